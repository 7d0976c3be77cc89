"""The C engine's quantized ops (issue #17), the transport-independent half shared by every engine
provider (natively edge/neon/quantized.py, in the page web/wasm/ops.py): QLinearConv /
ConvInteger, QLinearMatMul / MatMulInteger / com.microsoft QGemm, QuantizeLinear /
DequantizeLinear (per tensor), DynamicQuantizeLinear, com.microsoft QLinearGlobalAveragePool and
Cast of integers to float32, on quantization.c.

Here: the support checks (the graph's declared types), the operands' analysis with the plans a
provider's `packer` writes (`conv_plans`, `gemm_plans`: weights packed once as int16 with their zero
points subtracted, requantization scales computed as onnxruntime orders them), the per-tensor
Q/DQ and pool parameters, and the program emitters (`EMIT`). A packer has `qpack_rows(w, zero)`,
`qpack_cols(b, zero, trans_b)`, `qconv_plan(...)` and `qgemm_plan(...)` (edge/neon/library.py's
signatures); its plans have `addr`. What the kernels cannot take (a non-constant scale or
weight, a dtype, a rank) gives None: the CPU kernel runs the node, the program refuses it.
Pure Python: the page runs it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from onnxedge import ir
from onnxedge.geometry import auto_pad_mode, conv_geometry, spatial_attr
from onnxedge.oxk_program import (OP_DEQUANTIZE, OP_DQL, OP_QCONV, OP_QGEMM, OP_QGLOBAL_POOL,
                                  OP_QUANTIZE, Builder, Unsupported)
from onnxedge.providers.support import Facts

MS = "com.microsoft"
F32 = np.dtype(np.float32)
I8, U8, I32 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)
I64, BOOL = np.dtype(np.int64), np.dtype(np.bool_)
Q8 = (I8, U8)
QT = {I32: 0, I8: 1, U8: 2}                    # oxk.h OXK_QT_*
CAST_FROM = dict(QT)                           # what oxk_dequantize reads as Cast: QT's types,
CAST_FROM.update({I64: 3, BOOL: QT[U8]})       # OXK_QT_INT64, and bool's bytes as uint8
ONNX_TYPES = {1: F32, 2: U8, 3: I8, 6: I32, 7: I64, 9: BOOL}   # ONNX element type -> dtype
MAX_PLANS = 32


def _declared(facts: Facts, name: str, ok: Sequence[np.dtype], what: str) -> Optional[str]:
    et = facts.elem_type(name) if name else 0
    if et and ONNX_TYPES.get(et) not in ok:
        return "%s %r has ONNX element type %d; the engine takes %s" % (
            what, name, et, "/".join(str(d) for d in ok))
    return None


def _rank(facts: Facts, name: str, ok: Sequence[int], what: str) -> Optional[str]:
    rank = facts.rank(name) if name else None
    if rank is not None and rank not in ok:
        return "%s %r has rank %d; the engine runs %s" % (what, name, rank, "/".join(map(str, ok)))
    return None


def scalar(consts: Dict[str, np.ndarray], name: str, default: Any = None) -> Any:
    """A constant one-element input's value (default when the input is absent), None when it is
    not a constant one-element array."""
    if not name:
        return default
    v = consts.get(name)
    if not isinstance(v, np.ndarray) or v.size != 1:
        return None
    return v.reshape(())


def _f32_scale(v: Any) -> Optional[np.float32]:
    return None if v is None or np.asarray(v).dtype != F32 else np.float32(v)


def _zero(v: Any, ok: Sequence[np.dtype]) -> Optional[int]:
    return None if v is None or np.asarray(v).dtype not in ok else int(v)


def plan_cache(make: Callable[..., Any]) -> Callable[..., Any]:
    """`make(key...)` cached per key (a few shapes and dtypes per node)."""
    cache: Dict[Tuple[Any, ...], Any] = {}

    def get(*key: Any) -> Any:
        ent = cache.get(key, False)
        if ent is False:
            if len(cache) >= MAX_PLANS:
                cache.clear()
            ent = cache[key] = make(*key)
        return ent
    return get



def check_qconv(node: ir.Node, facts: Facts) -> Optional[str]:
    """QLinearConv / ConvInteger: 2-D, int8/uint8 x and W."""
    w = 3 if node.op_type == "QLinearConv" else 1
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) != 2:
        return "kernel_shape %s is not 2-D; the engine runs 2-D convolutions" % (list(ks),)
    return _declared(facts, node.inputs[0], Q8, "input") or _declared(facts, node.inputs[w], Q8, "weight") \
        or _rank(facts, node.inputs[0], (4,), "input") or _rank(facts, node.inputs[w], (4,), "weight")


def check_qgemm(node: ir.Node, facts: Facts) -> Optional[str]:
    """QLinearMatMul / MatMulInteger / QGemm: int8/uint8 A and a 2-D int8/uint8 B."""
    bi = 1 if node.op_type == "MatMulInteger" else 3
    if node.op_type == "QGemm":
        if int(node.attributes.get("transA", 0)):
            return "QGemm with transA=1; the engine runs A untransposed"
        if len(node.inputs) < 8 or not node.inputs[7]:
            return "QGemm without y_scale (a float output); the engine requantizes"
    return _declared(facts, node.inputs[0], Q8, "A") or _declared(facts, node.inputs[bi], Q8, "B") \
        or _rank(facts, node.inputs[bi], (2,), "B")


def qdq_params(node: ir.Node, consts: Dict[str, np.ndarray]) -> Optional[Tuple[np.float32, int, np.dtype]]:
    """(scale, zero point, integer type) of a per-tensor QuantizeLinear / DequantizeLinear, None
    when they are not constant scalars the engine takes."""
    ins = list(node.inputs) + ["", ""]
    if int(node.attributes.get("block_size", 0) or 0):
        return None
    scale = _f32_scale(scalar(consts, ins[1]))
    if ins[2]:
        z = scalar(consts, ins[2])
        if z is None:
            return None
        dt = z.dtype
    else:
        code = int(node.attributes.get("output_dtype", 0) or 0)
        dt = ONNX_TYPES.get(code, U8) if node.op_type == "QuantizeLinear" else None
        z = np.zeros((), dt) if dt is not None else None
    if scale is None or z is None or dt not in ((I8, U8) if node.op_type == "QuantizeLinear" else (I8, U8, I32)):
        return None
    return scale, int(z), dt


def check_qdq(node: ir.Node, facts: Facts) -> Optional[str]:
    """QuantizeLinear (float32 to int8/uint8) / DequantizeLinear (int8/uint8/int32 to float32)."""
    if node.op_type == "QuantizeLinear":
        return _declared(facts, node.inputs[0], (F32,), "input") or \
            _declared(facts, node.outputs[0], Q8, "output")
    return _declared(facts, node.inputs[0], (I8, U8, I32), "input") or \
        _declared(facts, node.outputs[0], (F32,), "output")


def check_cast(node: ir.Node, facts: Facts) -> Optional[str]:
    """Cast of int8/uint8/int32/int64/bool to float32. An int64 scalar or vector stays on the CPU:
    that is shape arithmetic (Shape -> Gather -> Cast), and an engine node inside it would only
    split the CPU's work in two."""
    if int(node.attributes.get("to", 0)) != 1:
        return "Cast to ONNX type %s; the engine casts integers to float32" % node.attributes.get("to")
    bad = _declared(facts, node.inputs[0], tuple(CAST_FROM), "input")
    if bad is None and facts.elem_type(node.inputs[0]) == 7:
        rank = facts.rank(node.inputs[0])
        if rank is None or rank < 2:
            return "int64 input %r of rank %s: shape arithmetic, which stays on the CPU; the " \
                "engine casts int64 tensors of rank 2 and more" % (node.inputs[0], rank)
    return bad


def check_dql(node: ir.Node, facts: Facts) -> Optional[str]:
    """DynamicQuantizeLinear of float32."""
    return _declared(facts, node.inputs[0], (F32,), "input")


def check_qpool(node: ir.Node, facts: Facts) -> Optional[str]:
    """com.microsoft QLinearGlobalAveragePool, channels first."""
    if int(node.attributes.get("channels_last", 0)):
        return "channels_last=1; the engine pools NCHW tensors"
    return _declared(facts, node.inputs[0], Q8, "input") or \
        _rank(facts, node.inputs[0], range(3, 9), "input")



def conv_plans(node: ir.Node, packer: Any, consts: Dict[str, np.ndarray]
               ) -> Optional[Tuple[Callable[..., Any], str, str, np.dtype]]:
    """QLinearConv (requantized int8/uint8 output, int32 bias, per-channel weight scales and zero
    points) and ConvInteger (int32 output; x's zero point may be computed): the constant weight
    packed now; (plan_for(x shape, x dtype) -> (plan, output shape) or None, X's name, the
    computed x zero point's name ("" when constant or absent), the output dtype), None when the
    kernels do not take the node's constants."""
    a = node.attributes
    ins = list(node.inputs) + [""] * 9
    linear = node.op_type == "QLinearConv"
    if linear:
        xn, xzn, wn, wzn, bn = ins[0], ins[2], ins[3], ins[5], ins[8]
    else:
        xn, wn, xzn, wzn, bn = ins[0], ins[1], ins[2], ins[3], ""
    w = consts.get(wn)
    group = int(a.get("group", 1))
    if not isinstance(w, np.ndarray) or w.dtype not in Q8 or w.ndim != 4 or group < 1 or w.shape[0] % group:
        return None
    cout = w.shape[0]
    wz = np.zeros(1, np.int32) if not wzn else consts.get(wzn)
    if not isinstance(wz, np.ndarray) or wz.dtype not in (w.dtype, I32) or wz.size not in (1, cout):
        return None
    x_zero_const = xzn in consts or not xzn
    scale, y_dt, y_zero, bias = None, I32, 0, None
    if linear:
        xs, ys = _f32_scale(scalar(consts, ins[1])), _f32_scale(scalar(consts, ins[6]))
        ws = consts.get(ins[4])
        yz = scalar(consts, ins[7], np.zeros((), U8))
        if xs is None or ys is None or not isinstance(ws, np.ndarray) or ws.dtype != F32 \
                or ws.size not in (1, cout) or yz is None or yz.dtype not in Q8 or not x_zero_const:
            return None
        scale = (xs * ws.reshape(-1)) / ys        # float32, as onnxruntime orders it
        y_dt, y_zero = yz.dtype, int(yz)
        if bn:
            bias = consts.get(bn)
            if not isinstance(bias, np.ndarray) or bias.dtype != I32 or bias.shape != (cout,):
                return None
    ks = a.get("kernel_shape")
    if ks and [int(k) for k in ks] != list(w.shape[2:]):
        return None
    packed = packer.qpack_rows(np.ascontiguousarray(w).reshape(cout, -1), wz.astype(np.int32))
    strides = spatial_attr(node.op_type, "strides", a.get("strides"), 2, 1, 1)
    dil = spatial_attr(node.op_type, "dilations", a.get("dilations"), 2, 1, 1)
    auto_pad = auto_pad_mode(node.op_type, a.get("auto_pad", "NOTSET"))

    def make(shape: Tuple[int, ...], x_dt: np.dtype) -> Optional[Tuple[Any, Tuple[int, ...]]]:
        if len(shape) != 4 or shape[1] != w.shape[1] * group or 0 in shape:
            return None
        xz = scalar(consts, xzn, np.zeros((), x_dt))
        if xz is None and x_zero_const:
            return None
        beg, end, out = conv_geometry(node.op_type, shape[2:], w.shape[2:], strides, dil, a.get("pads"), auto_pad)
        if min(out) <= 0:
            return None
        plan = packer.qconv_plan(shape, x_dt, int(xz) if xz is not None else 0, packed, cout, w.shape[2:],
                                 group, strides, dil, (beg[0], beg[1], end[0], end[1]), out, y_dt, y_zero,
                                 bias, scale)
        return plan, (shape[0], cout, int(out[0]), int(out[1]))

    return plan_cache(make), xn, "" if x_zero_const else xzn, y_dt


def gemm_plans(node: ir.Node, packer: Any, consts: Dict[str, np.ndarray]
               ) -> Optional[Tuple[Callable[..., Any], str, str, np.dtype, int, int]]:
    """A (..., K) @ constant B: MatMulInteger (int32; A's zero point may be computed),
    QLinearMatMul and QGemm (int32 bias C, alpha, transB) requantized, B's scale and zero point per
    tensor or per column; B packed now. (plan_for(A dtype) -> plan or None, A's name, the computed
    zero point's name or "", the output dtype, K, N), None when the kernels do not take it."""
    op = node.op_type
    ins = list(node.inputs) + [""] * 9
    if op == "MatMulInteger":
        an, azn, bn, bzn = ins[0], ins[2], ins[1], ins[3]
    else:
        an, azn, bn, bzn = ins[0], ins[2], ins[3], ins[5]
    trans_b = op == "QGemm" and bool(int(node.attributes.get("transB", 0)))
    b = consts.get(bn)
    if not isinstance(b, np.ndarray) or b.dtype not in Q8 or b.ndim != 2:
        return None
    K, N = (b.shape[1], b.shape[0]) if trans_b else b.shape
    bz = np.zeros(1, np.int32) if not bzn else consts.get(bzn)
    if not isinstance(bz, np.ndarray) or bz.dtype not in (b.dtype, I32) or bz.size not in (1, N) \
            or bz.ndim > 1:
        return None
    a_zero_const = azn in consts or not azn
    scale, y_dt, y_zero, bias = None, I32, 0, None
    if op != "MatMulInteger":
        sa = _f32_scale(scalar(consts, ins[1]))
        sy = _f32_scale(scalar(consts, ins[6 if op == "QLinearMatMul" else 7]))
        sb = consts.get(ins[4])
        yz = scalar(consts, ins[7 if op == "QLinearMatMul" else 8], np.zeros((), U8))
        if sa is None or sy is None or not isinstance(sb, np.ndarray) or sb.dtype != F32 \
                or sb.size not in (1, N) or sb.ndim > 1 or yz is None or yz.dtype not in Q8 or not a_zero_const:
            return None
        if op == "QGemm":
            alpha = np.float32(node.attributes.get("alpha", 1.0))
            scale = (alpha * sa * sb.reshape(-1)) / sy
            if ins[6]:
                bias = consts.get(ins[6])
                if not isinstance(bias, np.ndarray) or bias.dtype != I32 or bias.size != N:
                    return None
                bias = bias.reshape(N)
        else:
            scale = (sa * sb.reshape(-1)) / sy
        y_dt, y_zero = yz.dtype, int(yz)
    packed = packer.qpack_cols(b, bz.astype(np.int32), trans_b)

    def make(a_dt: np.dtype) -> Any:
        az = scalar(consts, azn, np.zeros((), a_dt))
        if az is None and a_zero_const:
            return None
        return packer.qgemm_plan(N, K, packed, a_dt, int(az) if az is not None else 0, y_dt, y_zero, bias, scale)

    return plan_cache(make), an, "" if a_zero_const else azn, y_dt, K, N


def qpool_params(node: ir.Node, consts: Dict[str, np.ndarray]
                 ) -> Optional[Callable[[np.dtype, Tuple[int, ...]], Optional[Tuple[int, int, np.float32]]]]:
    """QLinearGlobalAveragePool as MLAS computes it (the int32 sum of x - x_zero times
    x_scale / (y_scale * hw), requantized): params(x dtype, x shape) -> (x zero, y zero,
    multiplier) or None; None when the scales are not constant float32 scalars."""
    ins = list(node.inputs) + [""] * 5
    xs, ys = _f32_scale(scalar(consts, ins[1])), _f32_scale(scalar(consts, ins[3]))
    xzv, yzv = scalar(consts, ins[2], None), scalar(consts, ins[4], None)
    if xs is None or ys is None or int(node.attributes.get("channels_last", 0)):
        return None

    def params(dt: np.dtype, shape: Tuple[int, ...]) -> Optional[Tuple[int, int, np.float32]]:
        xz = 0 if not ins[2] else _zero(xzv, (dt,))
        yz = 0 if not ins[4] else _zero(yzv, (dt,))
        if xz is None or yz is None or len(shape) < 3 or 0 in shape:
            return None
        hw = int(np.prod(shape[2:]))
        return xz, yz, xs / (ys * np.float32(hw))
    return params


def _emit_qconv(bd: Builder, node: ir.Node, run: Any) -> None:
    q = getattr(run, "qplan", None)
    if q is None:
        raise Unsupported("%s with operands the kernel does not take runs on the CPU" % node.op_type)
    plan_for, xn, zn, y_dt = q
    shape, x_dt = bd.shape(xn), bd.rec[xn][0] if xn in bd.rec else None
    ent = plan_for(shape, x_dt) if x_dt in Q8 else None
    if ent is None:
        raise Unsupported("the kernel has no plan for input %s %s" % (x_dt, shape))
    plan, oshape = ent
    if tuple(oshape) != bd.shape(node.outputs[0]):
        raise Unsupported("planned output %s differs from the recorded %s" % (oshape, bd.shape(node.outputs[0])))
    bd.keep.append(plan)
    bd.emit(OP_QCONV, shape[0], plan.addr, bd.read(xn, Q8), bd.read(zn, (x_dt,)) if zn else None,
            bd.write(node.outputs[0], (y_dt,)))


def _emit_qgemm(bd: Builder, node: ir.Node, run: Any) -> None:
    q = getattr(run, "qplan", None)
    if q is None:
        raise Unsupported("%s with operands the kernel does not take runs on the CPU" % node.op_type)
    plan_for, an, zn, y_dt, K, N = q
    shape, a_dt = bd.shape(an), bd.rec[an][0] if an in bd.rec else None
    plan = plan_for(a_dt) if a_dt in Q8 else None
    if plan is None or not shape or shape[-1] != K or (node.op_type == "QGemm" and len(shape) != 2):
        raise Unsupported("A of %s %s does not fit the plan (K=%d)" % (a_dt, shape, K))
    bd.keep.append(plan)
    bd.emit(OP_QGEMM, int(np.prod(shape)) // K, plan.addr, bd.read(an, Q8),
            bd.read(zn, (a_dt,)) if zn else None, bd.write(node.outputs[0], (y_dt,)))


def _count(bd: Builder, name: str) -> int:
    return int(np.prod(bd.shape(name)))


def _emit_qdq(bd: Builder, node: ir.Node, run: Any) -> None:
    q = getattr(run, "qargs", None)
    if q is None:
        raise Unsupported("%s with a scale or zero point the kernel does not take" % node.op_type)
    dt, scale, zero = q
    args = bd.struct("oxk_quant_args", QT[dt], zero, float(scale))
    xn, yn = node.inputs[0], node.outputs[0]
    if node.op_type == "QuantizeLinear":
        bd.emit(OP_QUANTIZE, _count(bd, xn), args, bd.read(xn), None, bd.write(yn, (dt,)))
    else:
        bd.emit(OP_DEQUANTIZE, _count(bd, xn), args, bd.read(xn, (dt,)), None, bd.write(yn))


def _emit_cast(bd: Builder, node: ir.Node, run: Any) -> None:
    xn = node.inputs[0]
    dt = bd.rec[xn][0] if xn in bd.rec else None
    if dt not in CAST_FROM or int(node.attributes.get("to", 0)) != 1:
        raise Unsupported("Cast of %s to ONNX type %s" % (dt, node.attributes.get("to")))
    args = bd.struct("oxk_quant_args", CAST_FROM[dt], 0, 1.0)
    bd.emit(OP_DEQUANTIZE, _count(bd, xn), args, bd.read(xn, (dt,)), None, bd.write(node.outputs[0]))


def _emit_dql(bd: Builder, node: ir.Node, run: Any) -> None:
    xn = node.inputs[0]
    n = _count(bd, xn)
    outs = list(node.outputs) + ["", ""]
    for part, (name, dt) in enumerate(zip(outs[:3], (U8, F32, U8))):
        if name:
            bd.emit(OP_DQL, n, bd.struct("oxk_dql_args", part), bd.read(xn), None, bd.write(name, (dt,)))


def _emit_qpool(bd: Builder, node: ir.Node, run: Any) -> None:
    xn = node.inputs[0]
    dt, shape = (bd.rec[xn][0], bd.shape(xn)) if xn in bd.rec else (None, ())
    p = run.qpool(dt, shape) if dt in Q8 and hasattr(run, "qpool") else None
    if p is None:
        raise Unsupported("QLinearGlobalAveragePool of %s %s" % (dt, shape))
    xz, yz, scale = p
    args = bd.struct("oxk_qpool_args", int(np.prod(shape[2:])), QT[dt], xz, yz, -(1 << 30),
                     1 << 30, float(scale))
    bd.emit(OP_QGLOBAL_POOL, shape[0] * shape[1], args, bd.read(xn, Q8), None,
            bd.write(node.outputs[0], (dt,)))


# op type -> program emitter (the providers' program targets merge them)
EMIT = {"QLinearConv": _emit_qconv, "ConvInteger": _emit_qconv, "QLinearMatMul": _emit_qgemm,
        "MatMulInteger": _emit_qgemm, "QGemm": _emit_qgemm, "QuantizeLinear": _emit_qdq,
        "DequantizeLinear": _emit_qdq, "Cast": _emit_cast, "DynamicQuantizeLinear": _emit_dql,
        "QLinearGlobalAveragePool": _emit_qpool}

# (domain, op, check) of the quantized ops every engine provider claims
CHECKS = [("", "QLinearConv", check_qconv), ("", "ConvInteger", check_qconv),
          ("", "QLinearMatMul", check_qgemm), ("", "MatMulInteger", check_qgemm), (MS, "QGemm", check_qgemm),
          ("", "QuantizeLinear", check_qdq), ("", "DequantizeLinear", check_qdq), ("", "Cast", check_cast),
          ("", "DynamicQuantizeLinear", check_dql), (MS, "QLinearGlobalAveragePool", check_qpool)]

__all__ = ["CAST_FROM", "CHECKS", "EMIT", "MS", "Q8", "QT", "check_cast", "check_dql", "check_qconv", "check_qdq",
           "check_qgemm", "check_qpool", "conv_plans", "gemm_plans", "plan_cache", "qdq_params",
           "qpool_params", "scalar"]
