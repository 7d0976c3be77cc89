"""Data movement: Transpose, Slice, Expand, Tile, Concat, Split (one strided-copy template) and
Pad (constant / reflect / edge). Gather is in `indexing`."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ..runtime import MAX_RANK, GpuTensor, Recorder, Uniform, broadcast_strides, grid, strides_of
from .elementwise import broadcast_shape
from .table import attr, register

_DATA = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)}
_NOMOD = 0xFFFFFFFF


def check_data(node: Any, facts: Any) -> Optional[str]:
    """Why the node's data input cannot be moved on the GPU (its dtype), or None."""
    dt = facts.dtype(node.inputs[0])
    if dt not in _DATA:
        return "input %r has element type %s" % (node.inputs[0], dt if dt is not None else "unknown")
    return None


def strided_copy(rt: Recorder, x: GpuTensor, y: GpuTensor, shape: Sequence[int],
                 src_strides: Sequence[int], dst_strides: Sequence[int], src_base: int = 0,
                 dst_base: int = 0, mods: Optional[Sequence[int]] = None) -> None:
    """Record Y[dst_base + c.ds] = X[src_base + (c % mods).ss] over every coordinate c of shape."""
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return
    if len(shape) > MAX_RANK:
        raise ValueError("rank %d exceeds the kernels' %d" % (len(shape), MAX_RANK))
    shape = list(shape) or [1]
    src_strides = list(src_strides) or [0]
    dst_strides = list(dst_strides) or [0]
    mods = list(mods) if mods is not None else [_NOMOD] * len(shape)
    p = rt.kernel("movement_strided", T=rt.wgsl_type(x.dtype))
    u = (Uniform().u32(n, len(shape), src_base, dst_base).vec(shape).vec(src_strides, signed=True)
         .vec(mods).vec(dst_strides))
    rt.dispatch(p, [x, y], u, grid(n, 256))


@register(["Transpose"], check=check_data)
def run_transpose(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Transpose by perm (reversed axes by default)."""
    x = ins[0]
    rank = len(x.shape)
    perm = [int(p) for p in (attr(node, "perm") or list(range(rank))[::-1])]
    shape = [x.shape[p] for p in perm]
    st = strides_of(x.shape)
    y = rt.new(shape, x.dtype)
    strided_copy(rt, x, y, shape, [st[p] for p in perm], strides_of(shape))
    return [y]


def _slice_params(node: Any, ins: List[Any], opset: int, shape: Sequence[int]):
    rank = len(shape)
    if opset < 10:
        starts, ends = attr(node, "starts"), attr(node, "ends")
        axes, steps = attr(node, "axes"), None
    else:
        starts, ends = ins[1].reshape(-1), ins[2].reshape(-1)
        axes = ins[3].reshape(-1) if len(ins) > 3 and ins[3] is not None else None
        steps = ins[4].reshape(-1) if len(ins) > 4 and ins[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    begin = [0] * rank
    step = [1] * rank
    out = list(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        a = a + rank if a < 0 else a
        if st == 0:
            raise ValueError("Slice step 0 on axis %d" % a)
        b, e2, _ = slice(int(s), int(e), st).indices(shape[a])
        out[a] = len(range(b, e2, st))
        begin[a], step[a] = b, st
    return begin, step, out


@register(["Slice"], check=check_data, host_inputs=(1, 2, 3, 4))
def run_slice(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Slice (negative and >1 steps, clamped bounds)."""
    x = ins[0]
    begin, step, out = _slice_params(node, ins, opset, x.shape)
    st = strides_of(x.shape)
    y = rt.new(out, x.dtype)
    base = sum(b * s for b, s in zip(begin, st))
    strided_copy(rt, x, y, out, [s * k for s, k in zip(st, step)], strides_of(out), base)
    return [y]


@register(["Expand"], check=check_data, host_inputs=(1,))
def run_expand(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Expand: numpy broadcast to a shape."""
    x = ins[0]
    shape = list(broadcast_shape(x.shape, [int(d) for d in ins[1].reshape(-1)]))
    y = rt.new(shape, x.dtype)
    strided_copy(rt, x, y, shape, broadcast_strides(x.shape, shape), strides_of(shape))
    return [y]


@register(["Tile"], check=check_data, host_inputs=(1,))
def run_tile(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Tile: repeats per axis (coordinates wrap with a modulo)."""
    x = ins[0]
    reps = [int(r) for r in ins[1].reshape(-1)]
    shape = [d * r for d, r in zip(x.shape, reps)]
    y = rt.new(shape, x.dtype)
    strided_copy(rt, x, y, shape, strides_of(x.shape), strides_of(shape),
                 mods=[max(d, 1) for d in x.shape])
    return [y]


def _check_concat(node: Any, facts: Any) -> Optional[str]:
    kinds = {facts.dtype(n) for n in node.inputs if n}
    if len(kinds) != 1 or not kinds <= _DATA:
        return "inputs have element types %s" % sorted(str(k) for k in kinds)
    return None


@register(["Concat"], check=_check_concat)
def run_concat(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Concat along an axis: one strided copy per input."""
    xs = [x for x in ins if x is not None]
    rank = len(xs[0].shape)
    axis = int(attr(node, "axis"))
    axis = axis + rank if axis < 0 else axis
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    y = rt.new(shape, xs[0].dtype)
    ds = strides_of(shape)
    off = 0
    for x in xs:
        strided_copy(rt, x, y, x.shape, strides_of(x.shape), ds, 0, off * ds[axis])
        off += x.shape[axis]
    return [y]


@register(["Split"], check=check_data, host_inputs=(1,))
def run_split(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Split along an axis into given sizes or equal parts (num_outputs)."""
    x = ins[0]
    rank = len(x.shape)
    axis = int(attr(node, "axis", 0))
    axis = axis + rank if axis < 0 else axis
    dim = x.shape[axis]
    n_out = len(node.outputs)
    split = ins[1] if opset >= 13 and len(ins) > 1 and ins[1] is not None else attr(node, "split")
    if split is not None and len(np.asarray(split).reshape(-1)):
        sizes = [int(s) for s in np.asarray(split).reshape(-1)]
    else:
        n = int(attr(node, "num_outputs", n_out))
        part = -(-dim // n)
        sizes = [min(part, max(0, dim - part * k)) for k in range(n)]
    if sum(sizes) != dim:
        raise ValueError("Split sizes %s do not add up to axis %d of size %d" % (sizes, axis, dim))
    st = strides_of(x.shape)
    outs, off = [], 0
    for s in sizes:
        shape = list(x.shape)
        shape[axis] = s
        y = rt.new(shape, x.dtype)
        strided_copy(rt, x, y, shape, st, strides_of(shape), off * st[axis])
        outs.append(y)
        off += s
    return outs


_PAD_MODES = {
    "constant": "inside = false;",
    "edge": "x = clamp(x, 0, n - 1);",
    "reflect": ("if (n == 1) { x = 0; } else { let p = 2 * (n - 1); var m = x % p; "
                "if (m < 0) { m = m + p; } x = select(m, p - m, m >= n); }"),
}


def _check_pad(node: Any, facts: Any) -> Optional[str]:
    mode = attr(node, "mode", "constant")
    if mode not in _PAD_MODES:
        return "Pad mode %r (WebGPU has constant, reflect, edge)" % mode
    return check_data(node, facts)


@register(["Pad"], check=_check_pad, host_inputs=(1, 2, 3))
def run_pad(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Pad with constant / reflect / edge (negative pads crop)."""
    x = ins[0]
    rank = len(x.shape)
    mode = attr(node, "mode", "constant")
    if opset < 11:
        pads, value = [int(p) for p in attr(node, "pads")], float(attr(node, "value", 0.0))
        axes = list(range(rank))
    else:
        pads = [int(p) for p in ins[1].reshape(-1)]
        value = float(ins[2].reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None \
            and ins[2].size else 0.0
        axes = [int(a) for a in ins[3].reshape(-1)] if len(ins) > 3 and ins[3] is not None \
            else list(range(rank))
    axes = [a + rank if a < 0 else a for a in axes]
    begin, end = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        begin[a], end[a] = pads[k], pads[k + len(axes)]
    shape = [d + b + e for d, b, e in zip(x.shape, begin, end)]
    y = rt.new(shape, x.dtype)
    if y.size == 0:
        return [y]
    if x.size == 0 and mode != "constant":
        raise ValueError("Pad mode %s of an empty tensor" % mode)
    p = rt.kernel("movement_pad", T=rt.wgsl_type(x.dtype), MODE=_PAD_MODES[mode])
    u = (Uniform().u32(y.size, rank).f32(value).u32(0).vec(shape).vec(list(x.shape), signed=True)
         .vec(begin, signed=True).vec(strides_of(x.shape)))
    rt.dispatch(p, [x, y], u, grid(y.size, 256))
    return [y]
