"""Data movement inside C-engine programs (issue #17): what each data-movement node becomes.

Transpose, Slice, Concat, Split, Expand, Tile, DepthToSpace, SpaceToDepth and Pad are strided
copies (oxk.h `oxk_copy_args`: up to 6 axes, source and destination strides, offsets; a source
stride of 0 repeats a value); Gather with known indices is a gather of whole slices along its axis
(`oxk_gather_args`); Resize is a separable resampling of the two innermost axes with the index and
weight tables of the CPU kernel (onnxedge.kernels.resize.axis_taps), so both give the same values.
`plan(node, shapes, param, opset)` turns one node, its data inputs' shapes and its parameter values
into `Plan`: the output shapes and the steps; `reason(node, facts, engine)` says why a program
cannot take a node as the graph declares it. Compiler-side only (onnxedge.oxk_program emits the
steps); pure Python: the page runs it.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import ir
from onnxedge.errors import OnnxEdgeError
from onnxedge.kernels import resize as R

COPY_RANK = 6            # axes of one strided copy (oxk.h OXK_COPY_RANK)
PARAM_MAX = 64           # a computed parameter up to this many values (oxk_program.PARAM_MAX)
INT_MAX = 2 ** 31 - 1    # the kernels' sizes and offsets are int32
OPS = ("Transpose", "Concat", "Slice", "Split", "Pad", "Gather", "Expand", "Tile", "DepthToSpace",
       "SpaceToDepth", "Resize")
# Inputs read as parameters (their values are baked into a program: part of the signature).
# Gather's indices are not among them: constant ones are a table of the program, others an
# operand it reads at run time (embedding lookups of token ids).
PARAM_INPUTS = {"Slice": (1, 2, 3, 4), "Split": (1,), "Pad": (1, 2, 3), "Expand": (1,),
                "Tile": (1, 2), "Resize": (1, 2, 3)}
PAD_MODES = ("constant", "edge", "reflect", "wrap")
Shape = Tuple[int, ...]
Param = Callable[[int], Optional[np.ndarray]]


class Refused(Exception):
    """A node (with these shapes and parameters) the movement kernels do not take; says why."""


class Step:
    """One kernel call of a plan. kind 'copy' (args: oxk_copy_args' values), 'fill' (a copy from
    the one-value constant `value`), 'gather' (args: outer, axis, inner, count; tables: (index,),
    or () when the indices are data input 1, read at run time),
    'resample' (args: planes, ih, iw, oh, ow, ty, tx; tables: (iy, wy, ix, wx)). src: the data
    input it reads (index among the node's data inputs), or -1 - j for output j (Pad's borders
    read the output itself); dst: the output it writes."""

    def __init__(self, kind: str, src: int, dst: int, args: Tuple[Any, ...],
                 tables: Tuple[np.ndarray, ...] = (), value: float = 0.0):
        self.kind, self.src, self.dst, self.args, self.tables, self.value = kind, src, dst, args, tables, value


class Plan:
    """The output shapes of a node and the steps that make them, in order."""

    def __init__(self, out_shapes: Sequence[Shape], steps: Sequence[Step]):
        self.out_shapes = [tuple(int(d) for d in s) for s in out_shapes]
        self.steps = list(steps)


def data_inputs(node: ir.Node) -> List[int]:
    """Indices of the node's inputs that are data (float32 tensors the kernels move)."""
    if node.op_type == "Concat":
        return list(range(len(node.inputs)))
    return [0]


INDEX_TYPES = (6, 7)   # ONNX int32, int64: Gather's indices


def strides(shape: Sequence[int]) -> List[int]:
    """Row-major strides (in elements) of a contiguous array of `shape`."""
    out, acc = [0] * len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        out[k] = acc
        acc *= int(shape[k])
    return out


def _size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


MAX_SPLIT = 256   # copies one copy of more than COPY_RANK merged axes may become


def _fold(dims: Sequence[int], sa: Sequence[int], sy: Sequence[int]) -> List[List[int]]:
    """[length, source stride, destination stride] per axis of a copy: axes of length 1 dropped,
    neighbours that both sides read contiguously merged ([[0, 0, 0]] for an empty copy)."""
    axes: List[List[int]] = []
    for d, a, y in zip(dims, sa, sy):
        d, a, y = int(d), int(a), int(y)
        if d == 0:
            axes = [[0, 0, 0]]
            break
        if d == 1:
            continue
        if axes and axes[-1][1] == a * d and axes[-1][2] == y * d:
            axes[-1] = [axes[-1][0] * d, a, y]
        else:
            axes.append([d, a, y])
    return axes


def copy_args(dims: Sequence[int], sa: Sequence[int], sy: Sequence[int], a_off: int, y_off: int,
              a_len: int, y_len: int) -> Tuple[Any, ...]:
    """oxk_copy_args' values for the copy of index space `dims` (source strides `sa`, destination
    strides `sy`), its axes folded (_fold); Refused when more than COPY_RANK axes remain or a size
    passes int32."""
    axes = _fold(dims, sa, sy)
    if len(axes) > COPY_RANK:
        raise Refused("the copy needs %d axes after merging; the kernel moves up to %d"
                      % (len(axes), COPY_RANK))
    if max([a_len, y_len] + [abs(v) * max(d, 1) for d, a, y in axes for v in (a, y)]) > INT_MAX:
        raise Refused("a tensor of more than 2^31 elements")
    pad = [[1, 0, 0]] * (COPY_RANK - len(axes))
    full = axes + pad
    return (len(axes), tuple(r[0] for r in full), tuple(r[1] for r in full), tuple(r[2] for r in full),
            int(a_off), int(y_off), int(a_len), int(y_len))


def _copies(src: int, dst: int, dims: Sequence[int], sa: Sequence[int], sy: Sequence[int],
            a_off: int, y_off: int, a_len: int, y_len: int) -> List[Step]:
    """The copy steps of one copy: one, or one per index of the leading axes beyond COPY_RANK
    (Refused past MAX_SPLIT copies)."""
    axes = _fold(dims, sa, sy)
    lead = axes[:max(0, len(axes) - COPY_RANK)]
    if _size([d for d, _, _ in lead]) > MAX_SPLIT:
        raise Refused("the copy needs %d axes after merging; the kernel moves up to %d (and a "
                      "program splits a copy into at most %d)" % (len(axes), COPY_RANK, MAX_SPLIT))
    rest = axes[len(lead):]
    steps = []
    for index in np.ndindex(*[d for d, _, _ in lead]):
        da = sum(int(i) * a for i, (_, a, _) in zip(index, lead))
        dy = sum(int(i) * y for i, (_, _, y) in zip(index, lead))
        steps.append(Step("copy", src, dst, copy_args([r[0] for r in rest], [r[1] for r in rest],
                                                      [r[2] for r in rest], a_off + da, y_off + dy,
                                                      a_len, y_len)))
    return steps


def _contiguous(src: int, dst: int, dims: Sequence[int], sa: Sequence[int], a_off: int,
                a_len: int) -> List[Step]:
    """The copy steps into a whole contiguous output of shape `dims`."""
    return _copies(src, dst, dims, sa, strides(dims), a_off, 0, a_len, _size(dims))


def _ints(value: Optional[np.ndarray], what: str) -> Optional[List[int]]:
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise Refused("%s must be a 1-D integer tensor, got %s of shape %s" % (what, arr.dtype, arr.shape))
    return [int(v) for v in arr.reshape(-1)]


def _axis(a: int, rank: int, what: str = "axis") -> int:
    if not -rank <= a < rank:
        raise Refused("%s %d is out of range for rank %d" % (what, a, rank))
    return a + rank if a < 0 else a


def _axes(axes: Sequence[int], rank: int) -> List[int]:
    out = [_axis(int(a), rank, "axes entry") for a in axes]
    if len(set(out)) != len(out):
        raise Refused("axes %s repeat an axis" % (list(axes),))
    return out


# ----------------------------------------------------------------------------- the plans

def _transpose(node: ir.Node, x: Shape) -> Plan:
    perm = node.attributes.get("perm")
    perm = list(range(len(x)))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(len(x))):
        raise Refused("perm %s is not a permutation of %d axes" % (perm, len(x)))
    st = strides(x)
    out = [x[p] for p in perm]
    return Plan([out], _contiguous(0, 0, out, [st[p] for p in perm], 0, _size(x)))


def _concat(node: ir.Node, shapes: Sequence[Shape]) -> Plan:
    rank = len(shapes[0])
    if rank == 0:
        raise Refused("Concat of scalars")
    axis = _axis(int(node.attributes.get("axis", 1)), rank)
    for s in shapes[1:]:
        if len(s) != rank or any(a != b for k, (a, b) in enumerate(zip(s, shapes[0])) if k != axis):
            raise Refused("input shapes %s do not match outside axis %d" % ([list(t) for t in shapes], axis))
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    sy, steps, at = strides(out), [], 0
    for i, s in enumerate(shapes):
        if _size(s):
            steps += _copies(i, 0, s, strides(s), sy, 0, at * sy[axis], _size(s), _size(out))
        at += s[axis]
    return Plan([out], steps)


def _split(node: ir.Node, x: Shape, param: Param, opset: int) -> Plan:
    rank, n = len(x), len(node.outputs)
    if rank == 0:
        raise Refused("Split of a scalar")
    axis = _axis(int(node.attributes.get("axis", 0)), rank)
    dim = x[axis]
    split = _ints(param(1), "split") if opset >= 13 or opset == 1 else None
    if split is None and node.attributes.get("split") is not None:
        split = [int(v) for v in node.attributes["split"]]
    num = node.attributes.get("num_outputs")
    if split:
        if len(split) != n or min(split) < 0 or sum(split) != dim:
            raise Refused("split %s does not cut an axis of %d into %d outputs" % (split, dim, n))
        sizes = split
    elif num is not None:
        chunk = -(-dim // int(num))
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        if int(num) != n or sizes[-1] < 0:
            raise Refused("num_outputs=%s does not cut an axis of %d into %d outputs" % (num, dim, n))
    else:
        if dim % n:
            raise Refused("an axis of %d does not split into %d equal outputs" % (dim, n))
        sizes = [dim // n] * n
    st, outs, steps, at = strides(x), [], [], 0
    for j, size in enumerate(sizes):
        out = list(x)
        out[axis] = size
        outs.append(out)
        if _size(out):
            steps += _contiguous(0, j, out, st, at * st[axis], _size(x))
        at += size
    return Plan(outs, steps)


def _slice(node: ir.Node, x: Shape, param: Param, opset: int) -> Plan:
    rank = len(x)
    if opset < 10:
        a = node.attributes
        starts, ends = a.get("starts"), a.get("ends")
        axes, steps = a.get("axes"), None
        starts = None if starts is None else [int(v) for v in starts]
        ends = None if ends is None else [int(v) for v in ends]
    else:
        starts, ends = _ints(param(1), "starts"), _ints(param(2), "ends")
        axes, steps = _ints(param(3), "axes"), _ints(param(4), "steps")
    if starts is None or ends is None or len(starts) != len(ends):
        raise Refused("starts %s and ends %s" % (starts, ends))
    axes = list(range(len(starts))) if axes is None else _axes(axes, rank)
    steps = [1] * len(starts) if steps is None else steps
    if len(axes) != len(starts) or len(steps) != len(starts) or 0 in steps:
        raise Refused("starts, ends, axes %s and steps %s" % (axes, steps))
    st = strides(x)
    out, sa, off = list(x), list(st), 0
    for start, end, axis, step in zip(starts, ends, axes, steps):
        r = range(*slice(start, end, step).indices(x[axis]))
        out[axis] = len(r)
        sa[axis] = st[axis] * step
        if len(r):
            off += r.start * st[axis]
    return Plan([out], _contiguous(0, 0, out, sa, off, _size(x)) if _size(out) else [])


def _expand(x: Shape, param: Param) -> Plan:
    shape = _ints(param(1), "shape")
    if shape is None or min(shape + [0]) < 0:
        raise Refused("shape %s" % (shape,))
    rank = max(len(x), len(shape))
    xs = [1] * (rank - len(x)) + list(x)
    ss = [1] * (rank - len(shape)) + shape
    if any(a != b and 1 not in (a, b) for a, b in zip(xs, ss)):
        raise Refused("shape %s does not broadcast with %s" % (shape, list(x)))
    out = [b if a == 1 else a for a, b in zip(xs, ss)]
    st = strides(xs)
    sa = [0 if a == 1 else s for a, s in zip(xs, st)]
    return Plan([out], _contiguous(0, 0, out, sa, 0, _size(x)) if _size(out) else [])


def _tile(node: ir.Node, x: Shape, param: Param, opset: int) -> Plan:
    if opset < 6:
        reps = [1] * len(x)
        axis, tiles = _ints(param(2), "axis"), _ints(param(1), "tiles")
        if not axis or not tiles:
            raise Refused("tiles and axis are needed")
        reps[_axis(axis[0], len(x))] = tiles[0]
    else:
        reps = _ints(param(1), "repeats") or []
    if len(reps) != len(x) or min(reps + [0]) < 0:
        raise Refused("repeats %s for rank %d" % (reps, len(x)))
    out = [d * r for d, r in zip(x, reps)]
    sx, sy = strides(x), strides(out)
    dims, sa, syy = [], [], []
    for d, r, a, y in zip(x, reps, sx, sy):
        dims += [r, d]
        sa += [0, a]
        syy += [d * y, y]
    return Plan([out], _copies(0, 0, dims, sa, syy, 0, 0, _size(x), _size(out)) if _size(out) else [])


def _blocks(node: ir.Node, x: Shape) -> Plan:
    """DepthToSpace / SpaceToDepth: a transpose of a 6-D view of the input."""
    if len(x) != 4:
        raise Refused("input of rank %d; the op is 4-D" % len(x))
    bs = int(node.attributes.get("blocksize", 0))
    mode = node.attributes.get("mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    b, c, h, w = x
    if bs < 1 or mode not in ("DCR", "CRD"):
        raise Refused("blocksize %d, mode %r" % (bs, mode))
    if node.op_type == "DepthToSpace":
        if c % (bs * bs):
            raise Refused("%d channels are not divisible by blocksize^2 = %d" % (c, bs * bs))
        cc = c // (bs * bs)
        view, perm = ((b, bs, bs, cc, h, w), (0, 3, 4, 1, 5, 2)) if mode == "DCR" else \
            ((b, cc, bs, bs, h, w), (0, 1, 4, 2, 5, 3))
        out = (b, cc, h * bs, w * bs)
    else:
        if h % bs or w % bs:
            raise Refused("height %d and width %d are not divisible by blocksize %d" % (h, w, bs))
        view = (b, c, h // bs, bs, w // bs, bs)
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        out = (b, c * bs * bs, h // bs, w // bs)
    st = strides(view)
    dims = [view[p] for p in perm]
    return Plan([out], _contiguous(0, 0, dims, [st[p] for p in perm], 0, _size(x)) if _size(x) else [])


def _pad(node: ir.Node, x: Shape, param: Param, opset: int) -> Plan:
    rank = len(x)
    a = node.attributes
    mode = a.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in PAD_MODES:
        raise Refused("mode %r" % mode)
    if opset < 11:
        pads = a.get("pads", a.get("paddings"))
        pads = None if pads is None else [int(v) for v in pads]
        value, axes = float(a.get("value", 0.0)), None
    else:
        pads, axes = _ints(param(1), "pads"), _ints(param(3), "axes")
        v = param(2)
        value = float(np.asarray(v).reshape(-1)[0]) if v is not None and np.asarray(v).size else 0.0
    axes = list(range(rank)) if axes is None else _axes(axes, rank)
    if pads is None or len(pads) != 2 * len(axes):
        raise Refused("pads %s for %d axes" % (pads, len(axes)))
    width = [[0, 0] for _ in range(rank)]
    for i, ax in enumerate(axes):
        width[ax] = [pads[i], pads[i + len(axes)]]
    lo = [max(-b, 0) for b, _ in width]                              # cropped at the start
    n = [d - max(-b, 0) - max(-e, 0) for d, (b, e) in zip(x, width)]  # kept interior
    if min(n + [0]) < 0:
        raise Refused("negative pads %s remove more than the input %s" % (pads, list(x)))
    pb = [max(b, 0) for b, _ in width]
    pe = [max(e, 0) for _, e in width]
    out = [k + b + e for k, b, e in zip(n, pb, pe)]
    sx, sy, ylen = strides(x), strides(out), _size(out)
    steps: List[Step] = []
    if ylen == 0:
        return Plan([out], steps)
    if mode == "constant" and (any(pb) or any(pe) or 0 in n):
        steps.append(Step("fill", 0, 0, copy_args(out, [0] * rank, sy, 0, 0, 1, ylen), value=value))
    if _size(n):
        steps += _copies(0, 0, n, sx, sy, sum(l * s for l, s in zip(lo, sx)),
                         sum(b * s for b, s in zip(pb, sy)), _size(x), ylen)
    if mode == "constant":
        return Plan([out], steps)
    for k in range(rank):
        if not (pb[k] or pe[k]):
            continue
        if n[k] == 0 or (mode == "reflect" and max(pb[k], pe[k]) > n[k] - 1) or \
                (mode == "wrap" and max(pb[k], pe[k]) > n[k]):
            raise Refused("mode %s cannot pad axis %d of length %d by %s" % (mode, k, n[k], [pb[k], pe[k]]))
        # axes before k: their whole (padded) extent; after k: the interior
        dims = [out[j] if j < k else n[j] for j in range(rank)]
        base = sum(pb[j] * sy[j] for j in range(k + 1, rank))
        for before in (True, False):
            count = pb[k] if before else pe[k]
            if not count:
                continue
            dst = 0 if before else pb[k] + n[k]
            if mode == "edge":
                src, step = (pb[k], 0) if before else (pb[k] + n[k] - 1, 0)
            elif mode == "reflect":
                src, step = (2 * pb[k], -1) if before else (pb[k] + n[k] - 2, -1)
            else:
                src, step = (n[k], 1) if before else (pb[k], 1)
            d = list(dims)
            d[k] = count
            sa = list(sy)
            sa[k] = step * sy[k]
            steps += _copies(-1, 0, d, sa, sy, base + src * sy[k], base + dst * sy[k], ylen, ylen)
    return Plan([out], steps)


def _gather(node: ir.Node, x: Shape, param: Param, ishape: Optional[Shape]) -> Plan:
    rank = len(x)
    if rank == 0:
        raise Refused("Gather from a scalar")
    axis = _axis(int(node.attributes.get("axis", 0)), rank)
    outer, inner = _size(x[:axis]), _size(x[axis + 1:])
    ind = param(1)
    if ind is None:   # read at run time (the kernel checks them)
        if ishape is None:
            raise Refused("the indices are not known")
        out = list(x[:axis]) + list(ishape) + list(x[axis + 1:])
        if max(_size(x), _size(out)) > INT_MAX:
            raise Refused("a tensor of more than 2^31 elements")
        return Plan([out], [Step("gather", 0, 0, (outer, x[axis], inner, _size(ishape)))] if _size(out) else [])
    ind = np.asarray(ind)
    if ind.dtype.kind not in "iu":
        raise Refused("indices of dtype %s" % ind.dtype)
    idx = ind.astype(np.int64).reshape(-1)
    idx = np.where(idx < 0, idx + x[axis], idx)
    if idx.size and (idx.min() < 0 or idx.max() >= x[axis]):
        raise Refused("an index is out of range for an axis of %d" % x[axis])
    out = list(x[:axis]) + list(ind.shape) + list(x[axis + 1:])
    if max(_size(x), _size(out)) > INT_MAX:
        raise Refused("a tensor of more than 2^31 elements")
    steps = [Step("gather", 0, 0, (outer, x[axis], inner, idx.size), (idx.astype(np.int32),))] \
        if _size(out) else []
    return Plan([out], steps)


def _resize(node: ir.Node, x: Shape, param: Param, opset: int) -> Plan:
    if opset < 11:
        raise Refused("Resize-%d (scales only, legacy rounding) runs on the CPU" % opset)
    a = node.attributes

    def s(name: str, default: str) -> str:
        v = a.get(name, default)
        return v.decode() if isinstance(v, bytes) else str(v)

    try:
        p = R.ResizeParams(s("mode", "nearest"), s("coordinate_transformation_mode", "half_pixel"),
                           s("nearest_mode", "round_prefer_floor"), float(a.get("cubic_coeff_a", -0.75)),
                           int(a.get("exclude_outside", 0)), float(a.get("extrapolation_value", 0.0)),
                           int(a.get("antialias", 0)))
        out, scales, rois = R.resize_geometry(x, p, param(1), param(2), param(3), a.get("axes"),
                                              s("keep_aspect_ratio_policy", "stretch"))
    except OnnxEdgeError as e:
        raise Refused(str(e))
    rank = len(x)
    if rank == 0 or 0 in x or 0 in out:
        raise Refused("an empty or scalar input or output (%s -> %s)" % (list(x), out))
    taps: List[Optional[Tuple[np.ndarray, Optional[np.ndarray], Any]]] = [None] * rank
    if list(out) != list(x):    # the CPU kernel copies the input when no size changes
        taps = [R.axis_taps(p, x[k], out[k], scales[k], rois[k]) for k in range(rank)]
    if any(t is not None for t in taps[:max(rank - 2, 0)]):
        raise Refused("an axis before the last two is resized (%s -> %s); the kernel resamples the "
                      "two innermost axes" % (list(x), out))
    if any(t is not None and t[2] is not None for t in taps):
        raise Refused("tf_crop_and_resize extrapolates outside the input")
    ih, iw = (x[-2], x[-1]) if rank >= 2 else (1, x[-1])
    oh, ow = (out[-2], out[-1]) if rank >= 2 else (1, out[-1])

    def table(t: Any, n: int) -> Tuple[np.ndarray, np.ndarray]:
        if t is None:
            return np.arange(n, dtype=np.int32).reshape(n, 1), np.ones((n, 1), np.float32)
        idx, w, _ = t
        w = np.ones(idx.shape, np.float32) if w is None else w.astype(np.float32)
        return np.ascontiguousarray(idx, np.int32), np.ascontiguousarray(w)

    iy, wy = table(taps[-2] if rank >= 2 else None, oh)
    ix, wx = table(taps[-1], ow)
    planes = _size(x[:-2]) if rank >= 2 else 1
    if max(_size(x), _size(out)) > INT_MAX:
        raise Refused("a tensor of more than 2^31 elements")
    args = (planes, ih, iw, oh, ow, iy.shape[1], ix.shape[1])
    return Plan([out], [Step("resample", 0, 0, args, (iy, wy, ix, wx))])


def plan(node: ir.Node, shapes: Sequence[Shape], param: Param, opset: int) -> Plan:
    """The plan of data-movement node `node` whose data inputs (data_inputs) have `shapes`;
    `param(i)` is the value of input i (None when absent). Gather: the indices' value (a table) or
    None with their shape after the data's (read at run time). Refused says why it cannot be done."""
    op = node.op_type
    shapes = [tuple(int(d) for d in s) for s in shapes]
    if op == "Concat":
        return _concat(node, shapes)
    x = shapes[0]
    if op == "Transpose":
        return _transpose(node, x)
    if op == "Split":
        return _split(node, x, param, opset)
    if op == "Slice":
        return _slice(node, x, param, opset)
    if op == "Expand":
        return _expand(x, param)
    if op == "Tile":
        return _tile(node, x, param, opset)
    if op in ("DepthToSpace", "SpaceToDepth"):
        return _blocks(node, x)
    if op == "Pad":
        return _pad(node, x, param, opset)
    if op == "Gather":
        return _gather(node, x, param, shapes[1] if len(shapes) > 1 else None)
    if op == "Resize":
        return _resize(node, x, param, opset)
    raise Refused("%s is not a data-movement op" % op)


def run_numpy(p: Plan, xs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Execute a plan with numpy (the kernels' semantics, for tests and as documentation)."""
    outs = [np.zeros(s, np.float32) for s in p.out_shapes]
    flat_out = [o.reshape(-1) for o in outs]
    for st in p.steps:
        y = flat_out[st.dst]
        if st.kind in ("copy", "fill"):
            rank, dims, sa, sy, a_off, y_off = st.args[:6]
            dst = np.lib.stride_tricks.as_strided(y[y_off:], dims[:rank], [4 * s for s in sy[:rank]])
            if st.kind == "fill":
                dst[...] = np.float32(st.value)
                continue
            a = flat_out[-1 - st.src] if st.src < 0 else np.ascontiguousarray(xs[st.src]).reshape(-1)
            dst[...] = np.lib.stride_tricks.as_strided(a[a_off:], dims[:rank], [4 * s for s in sa[:rank]])
        elif st.kind == "gather":
            outer, axis, inner, _ = st.args
            idx = st.tables[0] if st.tables else np.asarray(xs[1]).reshape(-1)
            y[...] = np.ascontiguousarray(xs[st.src]).reshape(outer, axis, inner)[:, idx, :].reshape(-1)
        else:
            planes, ih, iw, oh, ow, ty, tx = st.args
            iy, wy, ix, wx = st.tables
            x = np.ascontiguousarray(xs[st.src]).reshape(planes, ih, iw)
            acc = None
            for b in range(tx):
                col = None
                for t in range(ty):
                    term = x[:, iy[:, t], :][:, :, ix[:, b]] * wy[:, t][None, :, None]
                    col = term if col is None else col + term
                term = col * wx[:, b][None, None, :]
                acc = term if acc is None else acc + term
            y[...] = acc.reshape(-1)
    return outs


# ----------------------------------------------------------------------------- claims

def reason(node: ir.Node, facts: Any, engine: str) -> Optional[str]:
    """Why a program cannot take data-movement node `node` as the graph declares it (None: it
    can); `facts` is a providers.support.Facts (or NoFacts)."""
    op = node.op_type
    for i in data_inputs(node):
        name = node.inputs[i] if i < len(node.inputs) else ""
        et = facts.elem_type(name) if name else 0
        if et not in (0, 1):
            return "input %r is not float32 (ONNX element type %d); %s programs move float32 values" \
                % (name, et, engine)
        rank = facts.rank(name) if name else None
        if rank is not None and rank > COPY_RANK:
            return "input %r has rank %d; %s copies up to %d axes" % (name, rank, engine, COPY_RANK)
    opset = facts.opset_of(node) if hasattr(facts, "opset_of") else 13
    mode = node.attributes.get("mode")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if op == "Pad" and mode not in (None,) + PAD_MODES:
        return "mode %r is not one of %s" % (mode, ", ".join(PAD_MODES))
    if op == "Resize":
        if opset and opset < 11:
            return "Resize-%d runs on the CPU (%s resamples Resize-11 and later)" % (opset, engine)
        ct = node.attributes.get("coordinate_transformation_mode", "half_pixel")
        ct = ct.decode() if isinstance(ct, bytes) else ct
        if ct == "tf_crop_and_resize":
            return "coordinate_transformation_mode tf_crop_and_resize extrapolates; %s resamples " \
                "inside the input" % engine
        rank = facts.rank(node.inputs[0])
        if rank is not None and rank > 2:
            for i in (2, 3):
                v = facts.const(node.inputs[i]) if i < len(node.inputs) and node.inputs[i] else None
                if v is None or v.size != rank or node.attributes.get("axes") is not None:
                    continue
                vals = v.reshape(-1)
                if i == 2 and any(float(s) != 1.0 for s in vals[:rank - 2]):
                    return "scales %s resize an axis before the last two; %s resamples the two " \
                        "innermost axes" % (vals.tolist(), engine)
    if op in ("DepthToSpace", "SpaceToDepth"):
        rank = facts.rank(node.inputs[0])
        if rank is not None and rank != 4:
            return "input of rank %d; %s is 4-D" % (rank, op)
    if op == "Gather" and len(node.inputs) > 1:
        et = facts.elem_type(node.inputs[1])
        if et not in (0,) + INDEX_TYPES:
            return "indices %r have ONNX element type %d; %s gathers int32/int64 indices" \
                % (node.inputs[1], et, engine)
    return None


__all__ = ["COPY_RANK", "OPS", "PARAM_INPUTS", "Plan", "Refused", "Step", "copy_args", "data_inputs",
           "plan", "reason", "run_numpy", "strides"]
