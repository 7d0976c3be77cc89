"""Elementwise ops: one unary template, one broadcasting binary template, and Where (the
activations, which share the unary template, are in `activation`; Cast in `cast`).

Each op is a WGSL expression over `x` (unary; `xr` is the raw stored value) or `a`, `b`
(binary), computed in f32; attributes travel as the uniforms `u.alpha`, `u.beta`, `u.gamma`.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..runtime import MAX_RANK, Recorder, Uniform, broadcast_strides, grid
from .table import F32, attr, float_inputs, register

# op -> (expression, {attribute: default} in the order alpha, beta, gamma)
UNARY = {
    "Exp": ("exp(x)", {}),
    "Log": ("log(x)", {}),
    "Sqrt": ("sqrt(x)", {}),
    "Abs": ("abs(x)", {}),
    "Neg": ("-x", {}),
    "Erf": ("erf_(x)", {}),
    "Floor": ("floor(x)", {}),
    "Ceil": ("ceil(x)", {}),
    "Round": ("round_even(x)", {}),
    "Reciprocal": ("1.0 / x", {}),
    "Sin": ("sin(x)", {}),
    "Cos": ("cos(x)", {}),
    "Tan": ("tan(x)", {}),
    "Sign": ("sign(x)", {}),
    "Clip": ("min(max(x, u.alpha), u.beta)", {}),
}

# op -> (expression, output is bool)
BINARY = {
    "Add": ("a + b", False),
    "Sub": ("a - b", False),
    "Mul": ("a * b", False),
    "Div": ("a / b", False),
    "Pow": ("pow_(a, b)", False),
    "Max": ("max(a, b)", False),
    "Min": ("min(a, b)", False),
    "Equal": ("u32(a == b)", True),
    "Less": ("u32(a < b)", True),
    "LessOrEqual": ("u32(a <= b)", True),
    "Greater": ("u32(a > b)", True),
    "GreaterOrEqual": ("u32(a >= b)", True),
}
VARIADIC = {"Sum": "Add", "Max": "Max", "Min": "Min", "Mean": "Add"}
_FLOAT_LIMIT = 3.4028234663852886e38


def broadcast_shape(*shapes: Sequence[int]) -> Tuple[int, ...]:
    """numpy's broadcast of these shapes (ValueError when they do not broadcast)."""
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = {s[k - rank + len(s)] for s in shapes if k - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ValueError("shapes %s do not broadcast" % (list(map(tuple, shapes)),))
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def collapse(shape: Sequence[int], strides: List[List[int]]) -> Tuple[List[int], List[List[int]]]:
    """Merge adjacent dims every operand walks contiguously; drop size-1 dims."""
    dims: List[int] = []
    sts: List[List[int]] = [[] for _ in strides]
    for k, d in enumerate(shape):
        if d == 1:
            continue
        if dims and all(st[-1] == s[k] * d for st, s in zip(sts, strides)):
            dims[-1] *= d
            for st, s in zip(sts, strides):
                st[-1] = s[k]
            continue
        dims.append(d)
        for st, s in zip(sts, strides):
            st.append(s[k])
    if not dims:
        return [1], [[0] for _ in strides]
    if len(dims) > MAX_RANK:
        raise ValueError("rank %d after merging dimensions exceeds the kernels' %d"
                         % (len(dims), MAX_RANK))
    return dims, sts


def unary(rt: Recorder, x: Any, expr: str, out_dtype: Any = F32,
          params: Sequence[float] = ()) -> Any:
    """Record y = expr(x) elementwise; returns y."""
    x = rt.gpu(x)
    y = rt.new(x.shape, out_dtype)
    if y.size == 0:
        return y
    to = rt.wgsl_type(out_dtype)
    p = rt.kernel("elementwise_unary", TI=rt.wgsl_type(x.dtype), TO=to, EXPR="%s(%s)" % (to, expr))
    vals = (list(params) + [0.0, 0.0, 0.0])[:3]
    rt.dispatch(p, [x, y], Uniform().u32(y.size).f32(*vals), grid(y.size, 256))
    return y


def binary(rt: Recorder, a: Any, b: Any, expr: str, out_dtype: Any = F32) -> Any:
    """Record y = expr(a, b) with numpy broadcasting; returns y."""
    a, b = rt.gpu(a), rt.gpu(b)
    shape = broadcast_shape(a.shape, b.shape)
    y = rt.new(shape, out_dtype)
    if y.size == 0:
        return y
    dims, (sa, sb) = collapse(shape, [broadcast_strides(a.shape, shape),
                                      broadcast_strides(b.shape, shape)])
    to = rt.wgsl_type(out_dtype)
    p = rt.kernel("elementwise_binary", TA=rt.wgsl_type(a.dtype), TB=rt.wgsl_type(b.dtype), TO=to,
                  EXPR="%s(%s)" % (to, expr))
    u = Uniform().u32(y.size, len(dims), 0, 0).vec(dims).vec(sa).vec(sb)
    rt.dispatch(p, [a, b, y], u, grid(y.size, 256))
    return y


def _check_unary(node: Any, facts: Any) -> Optional[str]:
    why = float_inputs(node, facts, [0])
    if why:
        return why
    if node.op_type == "Clip":
        return float_inputs(node, facts, [1, 2])
    return None


def _clip_bounds(node: Any, ins: List[Any], rt: Recorder, opset: int) -> Tuple[float, float]:
    if opset < 11:
        return float(attr(node, "min", -_FLOAT_LIMIT)), float(attr(node, "max", _FLOAT_LIMIT))
    lo = float(rt.host(ins[1]).reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None \
        else -_FLOAT_LIMIT
    hi = float(rt.host(ins[2]).reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None \
        else _FLOAT_LIMIT
    return max(lo, -_FLOAT_LIMIT), min(hi, _FLOAT_LIMIT)


@register(list(UNARY), check=_check_unary, host_inputs=(1, 2))
def run_unary(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Every op of the UNARY table."""
    op = node.op_type
    expr, defaults = UNARY[op]
    if op == "Clip":
        return [unary(rt, ins[0], expr, F32, _clip_bounds(node, ins, rt, opset))]
    params = [float(attr(node, k, v)) for k, v in defaults.items()]
    return [unary(rt, ins[0], expr, F32, params)]


def _check_binary(node: Any, facts: Any) -> Optional[str]:
    if node.op_type in VARIADIC and len(node.inputs) != 2:
        return float_inputs(node, facts, range(len(node.inputs)))
    return float_inputs(node, facts, [0, 1])


@register(list(BINARY) + list(VARIADIC), check=_check_binary)
def run_binary(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Every op of the BINARY table, and Sum/Mean/Max/Min over any number of inputs."""
    op = node.op_type
    if op in VARIADIC:
        expr = BINARY[VARIADIC[op]][0]
        acc = ins[0]
        for other in ins[1:]:
            acc = binary(rt, acc, other, expr)
        if len(ins) == 1:
            acc = unary(rt, acc, "x")
        if op == "Mean" and len(ins) > 1:
            acc = unary(rt, acc, "x / u.alpha", F32, [float(len(ins))])
        return [acc]
    expr, is_bool = BINARY[op]
    return [binary(rt, ins[0], ins[1], expr, np.bool_ if is_bool else F32)]


def _check_where(node: Any, facts: Any) -> Optional[str]:
    if facts.dtype(node.inputs[0]) != np.bool_:
        return "condition %r is not bool" % node.inputs[0]
    return float_inputs(node, facts, [1, 2])


@register(["Where"], check=_check_where)
def run_where(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Where(cond, x, y) with three-way broadcasting."""
    c, x, y = rt.gpu(ins[0]), rt.gpu(ins[1]), rt.gpu(ins[2])
    shape = broadcast_shape(c.shape, x.shape, y.shape)
    out = rt.new(shape, x.dtype)
    if out.size == 0:
        return [out]
    dims, (sc, sx, sy) = collapse(shape, [broadcast_strides(t.shape, shape) for t in (c, x, y)])
    p = rt.kernel("elementwise_where", T=rt.wgsl_type(x.dtype))
    u = Uniform().u32(out.size, len(dims), 0, 0).vec(dims).vec(sc).vec(sx).vec(sy)
    rt.dispatch(p, [c, x, y, out], u, grid(out.size, 256))
    return [out]


__all__ = ["unary", "binary", "broadcast_shape", "collapse", "UNARY", "BINARY"]
