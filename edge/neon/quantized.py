"""The engine's quantized ops (issue #17): QLinearConv / ConvInteger, QLinearMatMul / MatMulInteger
/ com.microsoft QGemm, QuantizeLinear / DequantizeLinear (per tensor), DynamicQuantizeLinear,
com.microsoft QLinearGlobalAveragePool and Cast of integers to float32, on quantization.c.

Each op has a support check (the graph's declared types), a node-by-node build and a program
emitter; both paths call the same C kernels with the same plans, so a group's first run gives the
bits its program gives (integer sums are exact; requantization is onnxruntime's: float32
multiplier, clamp, round half to even, zero point). Constant weights are packed once (int16, zero
points subtracted). What the kernels cannot take at run time (a non-constant scale or weight, a
dtype, a rank) returns None and the CPU kernel runs the node; the program refuses that signature.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import ir
from onnxedge.geometry import auto_pad_mode, conv_geometry, spatial_attr
from onnxedge.oxk_program import (OP_DEQUANTIZE, OP_DQL, OP_QCONV, OP_QGEMM, OP_QGLOBAL_POOL,
                                  OP_QUANTIZE, Builder, Unsupported)
from onnxedge.providers.support import Facts

from .library import KernelLibrary, Plan, data_address

Run = Callable[[Dict[str, Any]], Optional[List[np.ndarray]]]
MS = "com.microsoft"
F32 = np.dtype(np.float32)
I8, U8, I32 = np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)
Q8 = (I8, U8)
ONNX_TYPES = {1: F32, 2: U8, 3: I8, 6: I32}   # ONNX element type -> dtype, for the types here
MAX_PLANS = 32


def _cpu(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
    """The run of a node whose constant operands the kernels cannot take: the CPU kernel runs it."""
    return None


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


def _scalar(consts: Dict[str, np.ndarray], name: str, default: Any = None) -> Any:
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


def _plans(make: Callable[..., Any]) -> Callable[..., Any]:
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


def _runtime_zero(env: Dict[str, Any], name: str, dtype: np.dtype) -> Tuple[Optional[np.ndarray], int, bool]:
    """(array, address, ok) of a computed zero point of `dtype` (address 0: none)."""
    if not name:
        return None, 0, True
    z = env.get(name)
    if type(z) is not np.ndarray or z.dtype != dtype or z.size != 1:
        return None, 0, False
    z = np.ascontiguousarray(z)
    return z, z.__array_interface__["data"][0], True


def _call(lib: KernelLibrary, plan: Plan, what: str, n: int, x: np.ndarray, zaddr: int, y: np.ndarray) -> None:
    x, xa = data_address(x)
    rc = plan.fn(plan.addr, n, xa, zaddr or None, data_address(y)[1] if y.size else None)
    if rc:
        lib.check(rc, what)


# ---------------------------------------------------------------------------- convolution

def check_qconv(node: ir.Node, facts: Facts) -> Optional[str]:
    """QLinearConv / ConvInteger: 2-D, int8/uint8 x and W."""
    w = 3 if node.op_type == "QLinearConv" else 1
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) != 2:
        return "kernel_shape %s is not 2-D; the engine runs 2-D convolutions" % (list(ks),)
    return _declared(facts, node.inputs[0], Q8, "input") or _declared(facts, node.inputs[w], Q8, "weight") \
        or _rank(facts, node.inputs[0], (4,), "input") or _rank(facts, node.inputs[w], (4,), "weight")


def build_qconv(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """QLinearConv (requantized int8/uint8 output, int32 bias, per-channel weight scales and zero
    points) and ConvInteger (int32 output; x's zero point may be computed) on oxk_qconv_run."""
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
        return _cpu
    cout = w.shape[0]
    wz = np.zeros(1, np.int32) if not wzn else consts.get(wzn)
    if not isinstance(wz, np.ndarray) or wz.dtype not in (w.dtype, I32) or wz.size not in (1, cout):
        return _cpu
    x_zero_const = xzn in consts or not xzn
    scale, y_dt, y_zero, bias = None, I32, 0, None
    if linear:
        xs, ys = _f32_scale(_scalar(consts, ins[1])), _f32_scale(_scalar(consts, ins[6]))
        ws = consts.get(ins[4])
        yz = _scalar(consts, ins[7], np.zeros((), U8))
        if xs is None or ys is None or not isinstance(ws, np.ndarray) or ws.dtype != F32 \
                or ws.size not in (1, cout) or yz is None or yz.dtype not in Q8 or not x_zero_const:
            return _cpu
        scale = (xs * ws.reshape(-1)) / ys        # float32, as onnxruntime orders it
        y_dt, y_zero = yz.dtype, int(yz)
        if bn:
            bias = consts.get(bn)
            if not isinstance(bias, np.ndarray) or bias.dtype != I32 or bias.shape != (cout,):
                return _cpu
    packed = lib.qpack_rows(np.ascontiguousarray(w).reshape(cout, -1), wz.astype(np.int32))
    ks = a.get("kernel_shape")
    if ks and [int(k) for k in ks] != list(w.shape[2:]):
        return _cpu
    strides = spatial_attr(node.op_type, "strides", a.get("strides"), 2, 1, 1)
    dil = spatial_attr(node.op_type, "dilations", a.get("dilations"), 2, 1, 1)
    auto_pad = auto_pad_mode(node.op_type, a.get("auto_pad", "NOTSET"))

    def make(shape: Tuple[int, ...], x_dt: np.dtype) -> Optional[Tuple[Plan, Tuple[int, ...]]]:
        if len(shape) != 4 or shape[1] != w.shape[1] * group or 0 in shape:
            return None
        xz = _scalar(consts, xzn, np.zeros((), x_dt))
        if xz is None and x_zero_const:
            return None
        beg, end, out = conv_geometry(node.op_type, shape[2:], w.shape[2:], strides, dil, a.get("pads"), auto_pad)
        if min(out) <= 0:
            return None
        plan = lib.qconv_plan(shape, x_dt, int(xz) if xz is not None else 0, packed, cout, w.shape[2:], group,
                              strides, dil, (beg[0], beg[1], end[0], end[1]), out, y_dt, y_zero, bias, scale)
        return plan, (shape[0], cout, int(out[0]), int(out[1]))

    plan_for = _plans(make)
    what = node.describe()

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype not in Q8:
            return None
        ent = plan_for(x.shape, x.dtype)
        z, zaddr, ok = (None, 0, True) if x_zero_const else _runtime_zero(env, xzn, x.dtype)
        if ent is None or not ok:
            return None
        plan, oshape = ent
        y = np.empty(oshape, y_dt)
        _call(lib, plan, what, x.shape[0], x, zaddr, y)
        return [y]

    run.qplan = (plan_for, xn, "" if x_zero_const else xzn, y_dt)  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------- GEMM

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


def build_qgemm(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """A (..., K) @ constant B on oxk_qgemm_run: MatMulInteger (int32; A's zero point may be
    computed), QLinearMatMul and QGemm (int32 bias C, alpha, transB) requantized, B's scale and
    zero point per tensor or per column."""
    op = node.op_type
    ins = list(node.inputs) + [""] * 9
    if op == "MatMulInteger":
        an, azn, bn, bzn = ins[0], ins[2], ins[1], ins[3]
    else:
        an, azn, bn, bzn = ins[0], ins[2], ins[3], ins[5]
    trans_b = op == "QGemm" and bool(int(node.attributes.get("transB", 0)))
    b = consts.get(bn)
    if not isinstance(b, np.ndarray) or b.dtype not in Q8 or b.ndim != 2:
        return _cpu
    K, N = (b.shape[1], b.shape[0]) if trans_b else b.shape
    bz = np.zeros(1, np.int32) if not bzn else consts.get(bzn)
    if not isinstance(bz, np.ndarray) or bz.dtype not in (b.dtype, I32) or bz.size not in (1, N) \
            or bz.ndim > 1:
        return _cpu
    a_zero_const = azn in consts or not azn
    scale, y_dt, y_zero, bias = None, I32, 0, None
    if op != "MatMulInteger":
        sa, sy = _f32_scale(_scalar(consts, ins[1])), _f32_scale(_scalar(consts, ins[6 if op == "QLinearMatMul" else 7]))
        sb = consts.get(ins[4])
        yz = _scalar(consts, ins[7 if op == "QLinearMatMul" else 8], np.zeros((), U8))
        if sa is None or sy is None or not isinstance(sb, np.ndarray) or sb.dtype != F32 \
                or sb.size not in (1, N) or sb.ndim > 1 or yz is None or yz.dtype not in Q8 or not a_zero_const:
            return _cpu
        if op == "QGemm":
            alpha = np.float32(node.attributes.get("alpha", 1.0))
            scale = (alpha * sa * sb.reshape(-1)) / sy
            if ins[6]:
                bias = consts.get(ins[6])
                if not isinstance(bias, np.ndarray) or bias.dtype != I32 or bias.size != N:
                    return _cpu
                bias = bias.reshape(N)
        else:
            scale = (sa * sb.reshape(-1)) / sy
        y_dt, y_zero = yz.dtype, int(yz)
    packed = lib.qpack_cols(b, bz.astype(np.int32), trans_b)

    def make(a_dt: np.dtype) -> Optional[Plan]:
        az = _scalar(consts, azn, np.zeros((), a_dt))
        if az is None and a_zero_const:
            return None
        return lib.qgemm_plan(N, K, packed, a_dt, int(az) if az is not None else 0, y_dt, y_zero, bias, scale)

    plan_for = _plans(make)
    what = node.describe()
    two_d = op == "QGemm"

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[an]
        if type(x) is not np.ndarray or x.dtype not in Q8 or x.ndim < 1 or x.shape[-1] != K \
                or (two_d and x.ndim != 2):
            return None
        plan = plan_for(x.dtype)
        z, zaddr, ok = (None, 0, True) if a_zero_const else _runtime_zero(env, azn, x.dtype)
        if plan is None or not ok:
            return None
        y = np.empty(x.shape[:-1] + (N,), y_dt)
        _call(lib, plan, what, x.size // K if K else 0, x, zaddr, y)
        return [y]

    run.qplan = (plan_for, an, "" if a_zero_const else azn, y_dt, K, N)  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------- elementwise

def _qdq_params(node: ir.Node, consts: Dict[str, np.ndarray]) -> Optional[Tuple[np.float32, int, np.dtype]]:
    """(scale, zero point, integer type) of a per-tensor QuantizeLinear / DequantizeLinear, None
    when they are not constant scalars the engine takes."""
    ins = list(node.inputs) + ["", ""]
    if int(node.attributes.get("block_size", 0) or 0):
        return None
    scale = _f32_scale(_scalar(consts, ins[1]))
    if ins[2]:
        z = _scalar(consts, ins[2])
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


def build_qdq(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Per-tensor QuantizeLinear / DequantizeLinear with constant scale and zero point."""
    p = _qdq_params(node, consts)
    if p is None:
        return _cpu
    scale, zero, dt = p
    xn = node.inputs[0]
    if node.op_type == "QuantizeLinear":
        def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
            x = env[xn]
            if type(x) is not np.ndarray or x.dtype != F32:
                return None
            return [lib.quantize(x, scale, zero, dt)]
    else:
        def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
            x = env[xn]
            if type(x) is not np.ndarray or x.dtype != dt:
                return None
            return [lib.dequantize(x, scale, zero)]
    run.qargs = (dt, scale, zero)  # type: ignore[attr-defined]
    return run


def check_cast(node: ir.Node, facts: Facts) -> Optional[str]:
    """Cast of int8/uint8/int32 to float32."""
    if int(node.attributes.get("to", 0)) != 1:
        return "Cast to ONNX type %s; the engine casts integers to float32" % node.attributes.get("to")
    return _declared(facts, node.inputs[0], (I8, U8, I32), "input")


def build_cast(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Cast to float32 as oxk_dequantize with scale 1 and zero 0 (exact rounding of int32)."""
    xn = node.inputs[0]
    if int(node.attributes.get("to", 0)) != 1:
        return _cpu

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype not in (I8, U8, I32):
            return None
        return [lib.dequantize(x)]
    return run


def check_dql(node: ir.Node, facts: Facts) -> Optional[str]:
    """DynamicQuantizeLinear of float32."""
    return _declared(facts, node.inputs[0], (F32,), "input")


def build_dql(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """DynamicQuantizeLinear as onnxruntime computes it (scale 1 for an all-zero input)."""
    xn = node.inputs[0]

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype != F32:
            return None
        return lib.dynamic_quantize(x)
    return run


def check_qpool(node: ir.Node, facts: Facts) -> Optional[str]:
    """com.microsoft QLinearGlobalAveragePool, channels first."""
    if int(node.attributes.get("channels_last", 0)):
        return "channels_last=1; the engine pools NCHW tensors"
    return _declared(facts, node.inputs[0], Q8, "input") or \
        _rank(facts, node.inputs[0], range(3, 9), "input")


def build_qpool(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """QLinearGlobalAveragePool as MLAS computes it: the int32 sum of x - x_zero times
    x_scale / (y_scale * hw), requantized."""
    ins = list(node.inputs) + [""] * 5
    xs, ys = _f32_scale(_scalar(consts, ins[1])), _f32_scale(_scalar(consts, ins[3]))
    xzv, yzv = _scalar(consts, ins[2], None), _scalar(consts, ins[4], None)
    if xs is None or ys is None or int(node.attributes.get("channels_last", 0)):
        return _cpu
    xn = node.inputs[0]

    def params(dt: np.dtype, shape: Tuple[int, ...]) -> Optional[Tuple[int, int, np.float32]]:
        """(x zero, y zero, multiplier) for x of dtype `dt` and `shape`, None when not taken."""
        xz = 0 if not ins[2] else _zero(xzv, (dt,))
        yz = 0 if not ins[4] else _zero(yzv, (dt,))
        if xz is None or yz is None or len(shape) < 3 or 0 in shape:
            return None
        hw = int(np.prod(shape[2:]))
        return xz, yz, xs / (ys * np.float32(hw))

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype not in Q8:
            return None
        p = params(x.dtype, x.shape)
        return None if p is None else [lib.qglobal_pool(x, *p)]

    run.qpool = params  # type: ignore[attr-defined]
    return run


# ---------------------------------------------------------------------------- programs

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
    args = bd.struct("oxk_quant_args", {I32: 0, I8: 1, U8: 2}[dt], zero, float(scale))
    xn, yn = node.inputs[0], node.outputs[0]
    if node.op_type == "QuantizeLinear":
        bd.emit(OP_QUANTIZE, _count(bd, xn), args, bd.read(xn), None, bd.write(yn, (dt,)))
    else:
        bd.emit(OP_DEQUANTIZE, _count(bd, xn), args, bd.read(xn, (dt,)), None, bd.write(yn))


def _emit_cast(bd: Builder, node: ir.Node, run: Any) -> None:
    xn = node.inputs[0]
    dt = bd.rec[xn][0] if xn in bd.rec else None
    if dt not in (I8, U8, I32) or int(node.attributes.get("to", 0)) != 1:
        raise Unsupported("Cast of %s to ONNX type %s" % (dt, node.attributes.get("to")))
    args = bd.struct("oxk_quant_args", {I32: 0, I8: 1, U8: 2}[dt], 0, 1.0)
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
    args = bd.struct("oxk_qpool_args", int(np.prod(shape[2:])), {I8: 1, U8: 2}[dt], xz, yz, -(1 << 30),
                     1 << 30, float(scale))
    bd.emit(OP_QGLOBAL_POOL, shape[0] * shape[1], args, bd.read(xn, Q8), None,
            bd.write(node.outputs[0], (dt,)))


# op type -> program emitter (edge/neon/program.py merges them)
EMIT = {"QLinearConv": _emit_qconv, "ConvInteger": _emit_qconv, "QLinearMatMul": _emit_qgemm,
        "MatMulInteger": _emit_qgemm, "QGemm": _emit_qgemm, "QuantizeLinear": _emit_qdq,
        "DequantizeLinear": _emit_qdq, "Cast": _emit_cast, "DynamicQuantizeLinear": _emit_dql,
        "QLinearGlobalAveragePool": _emit_qpool}

# (domain, op, check, build) of the table (edge/neon/ops.py TABLE)
RECORDS = [("", "QLinearConv", check_qconv, build_qconv), ("", "ConvInteger", check_qconv, build_qconv),
           ("", "QLinearMatMul", check_qgemm, build_qgemm), ("", "MatMulInteger", check_qgemm, build_qgemm),
           (MS, "QGemm", check_qgemm, build_qgemm), ("", "QuantizeLinear", check_qdq, build_qdq),
           ("", "DequantizeLinear", check_qdq, build_qdq), ("", "Cast", check_cast, build_cast),
           ("", "DynamicQuantizeLinear", check_dql, build_dql),
           (MS, "QLinearGlobalAveragePool", check_qpool, build_qpool)]

__all__ = ["EMIT", "RECORDS", "build_qconv", "build_qgemm", "build_qdq", "build_cast", "build_dql",
           "build_qpool", "check_qconv", "check_qgemm", "check_qdq", "check_cast", "check_dql", "check_qpool"]
