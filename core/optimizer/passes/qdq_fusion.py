"""QDQ fusion (level "all"): the QuantizeLinear/DequantizeLinear groups that onnxruntime's static
quantizer writes around Conv, MatMul, Gemm and GlobalAveragePool become integer ops, as
onnxruntime's own QDQ transformer makes them, so the int8 weights are never dequantized at run time:

- DQ(x) , DQ(W) [, DQ(int32 bias)] -> Conv -> Q   =>  QLinearConv (W per tensor or per output
  channel, axis 0)
- DQ(a) , DQ(B) -> MatMul -> Q                     =>  QLinearMatMul (B per tensor or per column)
- DQ(a) , DQ(B) [, DQ(int32 bias)] -> Gemm -> Q    =>  com.microsoft QGemm
- DQ(x) -> GlobalAveragePool -> Q                  =>  com.microsoft QLinearGlobalAveragePool
- Relu -> Q whose zero point is the type's lowest value: the Relu goes (the quantization clamps
  there already: exact).

W, B and the bias are constant initializers; scales and zero points constant scalars (per-channel
where said). The integer kernels requantize as onnxruntime does (float32 multiplier, round half to
even, saturate), so results equal onnxruntime's with its optimizer on; against the float
emulation of the QDQ graph (onnxruntime with its optimizer off, or this pass off) a value may round
the other way: within 1 quantization step. Sessions with a provider that consumes QDQ groups
itself (NNAPI, CoreML: `keeps_qdq_groups`) do not run this pass.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ... import ir
from ..context import PassContext
from ._match import is_op

MS_DOMAIN = "com.microsoft"
Q8 = (np.dtype(np.int8), np.dtype(np.uint8))
LOWEST = {np.dtype(np.int8): -128, np.dtype(np.uint8): 0}


def _scalar_f32(ctx: PassContext, name: str) -> Optional[np.ndarray]:
    v = ctx.const(name) if name else None
    return v if v is not None and v.size == 1 and v.dtype == np.float32 else None


def _q_params(ctx: PassContext, node: ir.Node) -> Optional[Tuple[str, str, np.dtype]]:
    """(scale, zero point, integer type) of a per-tensor Q or DQ with constant scalar operands and
    an explicit int8/uint8 zero point."""
    ins = list(node.inputs) + ["", ""]
    if int(node.attributes.get("block_size", 0) or 0) or _scalar_f32(ctx, ins[1]) is None:
        return None
    z = ctx.const(ins[2]) if ins[2] else None
    if z is None or z.size != 1 or z.dtype not in Q8:
        return None
    return ins[1], ins[2], z.dtype


def _dq_of(ctx: PassContext, name: str) -> Optional[ir.Node]:
    node = ctx.producer_of(name, "DequantizeLinear")
    return node if node is not None and is_op(node, "DequantizeLinear") else None


def _activation(ctx: PassContext, name: str) -> Optional[Tuple[ir.Node, Tuple[str, str, np.dtype]]]:
    """The per-tensor DQ making `name` (an activation) and its parameters."""
    dq = _dq_of(ctx, name)
    if dq is None:
        return None
    p = _q_params(ctx, dq)
    if p is None or (ctx.dtype(dq.inputs[0]) not in (None, p[2])):
        return None
    return dq, p


def _weight(ctx: PassContext, name: str, axis: int, rank: int) -> Optional[Tuple[str, str, str]]:
    """(quantized weight, scale, zero point) of a DQ of a constant int8/uint8 weight of `rank`,
    per tensor or per channel along `axis`."""
    dq = _dq_of(ctx, name)
    if dq is None or len(dq.inputs) < 3 or not dq.inputs[2]:
        return None
    w, s, z = ctx.const(dq.inputs[0]), ctx.const(dq.inputs[1]), ctx.const(dq.inputs[2])
    if w is None or s is None or z is None or w.dtype not in Q8 or w.ndim != rank \
            or s.dtype != np.float32 or z.dtype != w.dtype or s.shape != z.shape:
        return None
    if s.size != 1:
        dq_axis = int(dq.attributes.get("axis", 1))
        if s.ndim != 1 or (dq_axis + rank if dq_axis < 0 else dq_axis) != axis or s.size != w.shape[axis]:
            return None
    return dq.inputs[0], dq.inputs[1], dq.inputs[2]


def _bias(ctx: PassContext, name: str, expected: np.ndarray) -> Optional[str]:
    """The int32 constant behind DQ(bias) when its scale is the product of the input's and the
    weight's (as the quantizer writes it) and its zero point 0."""
    dq = _dq_of(ctx, name)
    if dq is None:
        return None
    b, s = ctx.const(dq.inputs[0]), ctx.const(dq.inputs[1])
    z = ctx.const(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] else np.zeros((), np.int32)
    if b is None or s is None or z is None or b.dtype != np.int32 or b.ndim != 1 or np.any(z != 0) \
            or s.dtype != np.float32:
        return None
    want = np.broadcast_to(expected.astype(np.float64), b.shape) if expected.size in (1, b.size) else None
    if want is None or not np.allclose(np.broadcast_to(s.astype(np.float64), b.shape), want, rtol=1e-5, atol=0):
        return None
    return dq.inputs[0]


def _ms(ctx: PassContext) -> None:
    if MS_DOMAIN not in ctx.model.opset_imports:
        ctx.model.opset_imports[MS_DOMAIN] = 1


def _drop_relu(ctx: PassContext, q: ir.Node) -> bool:
    """Relu -> Q with the lowest zero point: Q reads the Relu's input."""
    relu = ctx.producer_of(q.inputs[0], "Relu")
    p = _q_params(ctx, q)
    if relu is None or p is None or not ctx.private(q.inputs[0]) or int(ctx.const(p[1]).reshape(-1)[0]) != LOWEST[p[2]]:
        return False
    q.inputs = [relu.inputs[0]] + list(q.inputs[1:])
    ctx.users.setdefault(relu.inputs[0], []).append(q)
    ctx.replace([relu], [])
    return True


def _fuse(ctx: PassContext, q: ir.Node) -> bool:
    p = _q_params(ctx, q)
    op = ctx.producer_of(q.inputs[0])
    if p is None or op is None or op.domain or not ctx.private(q.inputs[0]):
        return False
    ys, yz, _ = p
    y = q.outputs[0]
    act = _activation(ctx, op.inputs[0]) if op.inputs else None
    if act is None:
        return False
    dqx, (xs, xz, _) = act
    x = dqx.inputs[0]
    old: List[ir.Node] = [op, q]
    if op.op_type == "GlobalAveragePool":
        if ctx.const(yz).dtype != ctx.const(xz).dtype:
            return False
        _ms(ctx)
        new = ctx.make_node("QLinearGlobalAveragePool", [x, xs, xz, ys, yz], [y], {"channels_last": 0},
                            MS_DOMAIN, op.name)
    elif op.op_type in ("Conv", "MatMul", "Gemm"):
        if len(op.inputs) < 2:
            return False
        a = op.attributes
        if op.op_type == "Conv":
            w = _weight(ctx, op.inputs[1], 0, 4)
        elif op.op_type == "MatMul":
            w = _weight(ctx, op.inputs[1], 1, 2)
        else:
            if int(a.get("transA", 0)):
                return False
            w = _weight(ctx, op.inputs[1], 0 if int(a.get("transB", 0)) else 1, 2)
        if w is None:
            return False
        wq, ws, wz = w
        bias = ""
        if len(op.inputs) > 2 and op.inputs[2]:
            if op.op_type == "Gemm" and float(a.get("beta", 1.0)) != 1.0:
                return False
            alpha = np.float32(a.get("alpha", 1.0)) if op.op_type == "Gemm" else np.float32(1)
            bias = _bias(ctx, op.inputs[2], alpha * ctx.const(xs).astype(np.float32).reshape(())
                         * ctx.const(ws).astype(np.float32).reshape(-1))
            if bias is None:
                return False
        if op.op_type == "Conv":
            attrs = {k: v for k, v in a.items() if k in ("auto_pad", "dilations", "group", "kernel_shape",
                                                         "pads", "strides")}
            new = ctx.make_node("QLinearConv", [x, xs, xz, wq, ws, wz, ys, yz] + ([bias] if bias else []), [y],
                                attrs, "", op.name)
        elif op.op_type == "MatMul":
            new = ctx.make_node("QLinearMatMul", [x, xs, xz, wq, ws, wz, ys, yz], [y], {}, "", op.name)
        else:
            _ms(ctx)
            attrs = {"alpha": float(a.get("alpha", 1.0)), "transA": 0, "transB": int(a.get("transB", 0))}
            new = ctx.make_node("QGemm", [x, xs, xz, wq, ws, wz, bias, ys, yz], [y], attrs, MS_DOMAIN, op.name)
    else:
        return False
    # the DQs of the op's other inputs go with it when nothing else reads them
    for name in op.inputs:
        dq = _dq_of(ctx, name) if name else None
        if dq is not None and ctx.private(name):
            old.append(dq)
    ctx.replace(old, [new])
    return True


def _fold_weight(ctx: PassContext, dq: ir.Node) -> bool:
    """A DQ of a constant that only float Conv / MatMul / Gemm read (what no group took: a Gemm
    behind a Flatten) becomes its float32 value, as the run-time DQ computes it ((q - zero) *
    scale in float32), so weights are not dequantized on every run."""
    ins = list(dq.inputs) + ["", ""]
    q, s = ctx.const(ins[0]), ctx.const(ins[1])
    z = ctx.const(ins[2]) if ins[2] else np.zeros((), q.dtype if q is not None else np.uint8)
    users = ctx.live_users(dq.outputs[0])
    if q is None or s is None or z is None or s.dtype != np.float32 or q.dtype not in Q8 + (np.dtype(np.int32),) \
            or dq.outputs[0] in ctx.outputs or not users \
            or any(u.domain or u.op_type not in ("Conv", "MatMul", "Gemm") or u.inputs[0] == dq.outputs[0]
                   for u in users):
        return False
    axis = int(dq.attributes.get("axis", 1))
    if s.size > 1:
        if q.ndim == 0 or s.ndim != 1:
            return False
        shape = [1] * q.ndim
        shape[axis + q.ndim if axis < 0 else axis] = -1
        s, z = s.reshape(shape), z.reshape(shape)
    value = ((q.astype(np.int32) - z.astype(np.int32)).astype(np.float32) * s).astype(np.float32)
    name = ctx.add_initializer(dq.outputs[0] + "_folded", value)
    for u in users:
        u.inputs = [name if n == dq.outputs[0] else n for n in u.inputs]
    ctx.replace([dq], [])
    return True


def run(ctx: PassContext) -> bool:
    """Fuse every QDQ group this pass knows (see the module's docstring), then fold the weight DQs
    no group took; True when anything changed."""
    changed = False
    for q in list(ctx.graph.nodes):
        if id(q) in ctx.removed or not is_op(q, "QuantizeLinear"):
            continue
        if _drop_relu(ctx, q):
            changed = True
        if _fuse(ctx, q):
            changed = True
    for dq in list(ctx.graph.nodes):
        if id(dq) not in ctx.removed and is_op(dq, "DequantizeLinear") and _fold_weight(ctx, dq):
            changed = True
    return changed
