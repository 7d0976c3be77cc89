"""ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSumExp over any axes (attribute or input),
keepdims and noop_with_empty_axes: one reduction template, and for long reduced ranges
(>= WG_MIN_COUNT) one workgroup per output with a workgroup-memory tree."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..runtime import MAX_RANK, Recorder, Uniform, grid, strides_of
from .table import attr, float_inputs, register

# op -> (init, step over v, finish)
_KINDS = {
    "ReduceSum": ("0.0", "acc = acc + v;", ""),
    "ReduceMean": ("0.0", "acc = acc + v;", "acc = acc / f32(max(u.count, 1u));"),
    "ReduceMax": ("bitcast<f32>(0xff800000u)", "acc = max(acc, v);", ""),
    "ReduceMin": ("bitcast<f32>(0x7f800000u)", "acc = min(acc, v);", ""),
    "ReduceProd": ("1.0", "acc = acc * v;", ""),
    "ReduceL1": ("0.0", "acc = acc + abs(v);", ""),
    "ReduceL2": ("0.0", "acc = acc + v * v;", "acc = sqrt(acc);"),
    "ReduceSumSquare": ("0.0", "acc = acc + v * v;", ""),
    "ReduceLogSum": ("0.0", "acc = acc + v;", "acc = log(acc);"),
}
# how two partial results meet in the workgroup tree (reduction_wg.wgsl)
_COMBINE = {"ReduceMax": "max(a, b)", "ReduceMin": "min(a, b)", "ReduceProd": "a * b"}
# reduced lengths from which one workgroup (256 threads and a tree) serves each output
WG_MIN_COUNT = 256
# the opset from which axes is an input rather than an attribute
_AXES_INPUT = {"ReduceSum": 13}


def _check(node: Any, facts: Any) -> Optional[str]:
    return float_inputs(node, facts, [0])


@register(list(_KINDS), check=_check, host_inputs=(1,))
def run_reduce(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Every Reduce* of the table."""
    op = node.op_type
    x = ins[0]
    rank = len(x.shape)
    if opset >= _AXES_INPUT.get(op, 18):
        axes = None if len(ins) < 2 or ins[1] is None else [int(a) for a in ins[1].reshape(-1)]
    else:
        a = attr(node, "axes")
        axes = None if a is None else [int(v) for v in a]
    if not axes:
        if attr(node, "noop_with_empty_axes", 0):
            axes = []
        else:
            axes = list(range(rank))
    axes = sorted({a + rank if a < 0 else a for a in axes})
    keep = bool(attr(node, "keepdims", 1))
    kept = [k for k in range(rank) if k not in axes]
    st = strides_of(x.shape)
    out_shape = [1 if k in axes else x.shape[k] for k in range(rank)] if keep \
        else [x.shape[k] for k in kept]
    y = rt.new(out_shape, x.dtype)
    if y.size == 0:
        return [y]
    if not axes and op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
        axes = []  # identity reduction: each element alone
    kshape, kstride = [x.shape[k] for k in kept], [st[k] for k in kept]
    rshape, rstride = [x.shape[k] for k in axes], [st[k] for k in axes]
    if len(kshape) > MAX_RANK or len(rshape) > MAX_RANK:
        raise ValueError("rank above %d" % MAX_RANK)
    count = int(np.prod(rshape, dtype=np.int64))
    init, step, fin = _KINDS[op]
    u = (Uniform().u32(y.size, len(kshape), len(rshape), count).vec(kshape).vec(kstride)
         .vec(rshape).vec(rstride))
    if count >= WG_MIN_COUNT:
        p = rt.kernel("reduction_wg", T=rt.wgsl_type(x.dtype), INIT=init, STEP=step, FINISH=fin,
                      COMBINE=_COMBINE.get(op, "a + b"))
        rt.dispatch(p, [x, y], u, grid(y.size, 1))
        return [y]
    p = rt.kernel("reduction", T=rt.wgsl_type(x.dtype), INIT=init, STEP=step, FINISH=fin, PRE="")
    rt.dispatch(p, [x, y], u, grid(y.size, 256))
    return [y]
