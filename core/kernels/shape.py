"""Shape and layout kernels: Reshape, Flatten, Squeeze/Unsqueeze, Transpose, Concat, Split,
Slice, Expand, Tile, Pad, Shape, Size, ConstantOfShape, Range, Identity, Dropout, Constant,
DepthToSpace, SpaceToDepth, EyeLike, ReverseSequence, Compress and Unique.

Kernels that only change the shape return numpy views of their input; none writes into an input.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument, InvalidGraph
from ._util import (broadcast_shape, check_tensor_bytes, int_list, norm_axes, norm_axis,
                    pick_outputs)
from .registry import register


def _prod(dims: Sequence[int]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


def _scalar(value: Any, op: str, what: str) -> Any:
    """The single element of a scalar or one-element tensor input, as a numpy scalar."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise InvalidArgument("%s: %s must be a scalar (or hold one element), got shape %s"
                              % (op, what, arr.shape))
    return arr.reshape(-1)[0]


# ---------------------------------------------------------------- Reshape, Flatten, (Un)Squeeze

def _reshape(data: np.ndarray, shape: Optional[List[int]], allowzero: int) -> np.ndarray:
    if shape is None:
        raise InvalidArgument("Reshape: the target shape is missing")
    out: List[int] = []
    infer = -1
    for i, d in enumerate(shape):
        if d == -1:
            if infer >= 0:
                raise InvalidArgument("Reshape: shape %s has more than one -1" % (shape,))
            infer = i
            out.append(1)
        elif d == 0 and not allowzero:
            if i >= data.ndim:
                raise InvalidArgument("Reshape: shape %s copies dimension %d (a 0) from an input "
                                      "of rank %d" % (shape, i, data.ndim))
            out.append(data.shape[i])
        elif d < 0:
            raise InvalidArgument("Reshape: shape %s has a negative dimension other than -1"
                                  % (shape,))
        else:
            out.append(d)
    known = _prod(out)
    if infer >= 0:
        if allowzero and 0 in shape:
            raise InvalidArgument("Reshape: shape %s has both -1 and 0 with allowzero=1" % (shape,))
        if known == 0 or data.size % known:
            raise InvalidArgument("Reshape: cannot reshape input of shape %s (%d elements) to %s"
                                  % (data.shape, data.size, shape))
        out[infer] = data.size // known
    elif known != data.size:
        raise InvalidArgument("Reshape: cannot reshape input of shape %s (%d elements) to %s "
                              "(%d elements)" % (data.shape, data.size, shape, known))
    return data.reshape(out)


@register("Reshape", since=1, until=4)
def reshape_1(data: np.ndarray, *, shape: Optional[List[int]] = None,
              consumed_inputs: Any = None) -> np.ndarray:
    """Reshape-1: the target shape is an attribute (0 copies a dim, one -1 is inferred)."""
    return _reshape(data, int_list(shape, "Reshape", "shape"), 0)


@register("Reshape", since=5)
def reshape_5(data: np.ndarray, shape: np.ndarray, *, allowzero: int = 0) -> np.ndarray:
    """Reshape-5/14: the target shape is an input; allowzero=1 makes 0 a real zero dim."""
    return _reshape(data, int_list(shape, "Reshape", "shape"), allowzero)


@register("Flatten")
def flatten(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """Flatten to 2-D: dims before `axis` form the rows, the rest the columns."""
    r = x.ndim
    if not -r <= axis <= r:
        raise InvalidArgument("Flatten: axis %d is out of range for rank %d (expected %d..%d)"
                              % (axis, r, -r, r))
    axis = axis + r if axis < 0 else axis
    return x.reshape(_prod(x.shape[:axis]), _prod(x.shape[axis:]))


def _squeeze(data: np.ndarray, axes: Optional[List[int]]) -> np.ndarray:
    if axes is None:
        return data.reshape([d for d in data.shape if d != 1])
    axes = norm_axes(axes, data.ndim, "Squeeze")
    for a in axes:
        if data.shape[a] != 1:
            raise InvalidArgument("Squeeze: axis %d of input shape %s is not 1" % (a, data.shape))
    return data.reshape([d for i, d in enumerate(data.shape) if i not in axes])


@register("Squeeze", since=1, until=12)
def squeeze_1(data: np.ndarray, *, axes: Optional[List[int]] = None) -> np.ndarray:
    """Squeeze-1/11: remove the listed size-1 axes (all of them when `axes` is absent)."""
    return _squeeze(data, axes)


@register("Squeeze", since=13)
def squeeze_13(data: np.ndarray, axes: Optional[np.ndarray] = None) -> np.ndarray:
    """Squeeze-13: like Squeeze-1 with `axes` as an optional input."""
    return _squeeze(data, int_list(axes, "Squeeze", "axes"))


def _unsqueeze(data: np.ndarray, axes: Optional[List[int]]) -> np.ndarray:
    if axes is None:
        raise InvalidArgument("Unsqueeze: axes are required")
    rank = data.ndim + len(axes)
    axes = norm_axes(axes, rank, "Unsqueeze")
    dims = iter(data.shape)
    return data.reshape([1 if i in axes else next(dims) for i in range(rank)])


@register("Unsqueeze", since=1, until=12)
def unsqueeze_1(data: np.ndarray, *, axes: Optional[List[int]] = None) -> np.ndarray:
    """Unsqueeze-1/11: insert size-1 axes at the listed output positions."""
    return _unsqueeze(data, axes)


@register("Unsqueeze", since=13)
def unsqueeze_13(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Unsqueeze-13: like Unsqueeze-1 with `axes` as an input."""
    return _unsqueeze(data, int_list(axes, "Unsqueeze", "axes"))


# ---------------------------------------------------------------- Transpose, Concat, Split

@register("Transpose")
def transpose(data: np.ndarray, *, perm: Optional[List[int]] = None) -> np.ndarray:
    """Permute the axes (reversed when `perm` is absent)."""
    if perm is None:
        return data.transpose()
    if sorted(int(p) for p in perm) != list(range(data.ndim)):
        raise InvalidArgument("Transpose: perm %s is not a permutation of the %d axes of the input"
                              % (list(perm), data.ndim))
    return data.transpose([int(p) for p in perm])


def _concat(xs: Sequence[np.ndarray], axis: int) -> np.ndarray:
    if not xs:
        raise InvalidArgument("Concat: needs at least one input")
    first = xs[0]
    if first.ndim == 0:
        raise InvalidArgument("Concat: inputs must have rank >= 1, got a scalar")
    axis = norm_axis(axis, first.ndim, "Concat")
    for i, x in enumerate(xs[1:], 1):
        if x.dtype != first.dtype:
            raise InvalidArgument("Concat: input %d has dtype %s, input 0 has %s"
                                  % (i, x.dtype, first.dtype))
        if x.ndim != first.ndim or any(a != b for j, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if j != axis):
            raise InvalidArgument("Concat: input %d has shape %s, which does not match input 0's "
                                  "%s outside axis %d" % (i, x.shape, first.shape, axis))
    return np.concatenate(xs, axis=axis)


@register("Concat", since=1, until=3)
def concat_1(*xs: np.ndarray, axis: int = 1) -> np.ndarray:
    """Concat-1: join inputs along `axis` (default 1)."""
    return _concat(xs, axis)


@register("Concat", since=4)
def concat_4(*xs: np.ndarray, axis: Optional[int] = None) -> np.ndarray:
    """Concat-4/11/13: join inputs along the required `axis` (negative from 11)."""
    if axis is None:
        raise InvalidGraph("Concat: the attribute 'axis' is required")
    return _concat(xs, axis)


def _split(ctx: Any, x: np.ndarray, axis: int, split: Optional[List[int]],
           num_outputs: Optional[int] = None) -> Any:
    if x.ndim == 0:
        raise InvalidArgument("Split: the input must have rank >= 1, got a scalar")
    axis = norm_axis(axis, x.ndim, "Split")
    dim = x.shape[axis]
    n = ctx.num_outputs
    if split:
        if len(split) != n or any(s < 0 for s in split) or sum(split) != dim:
            raise InvalidArgument("Split: split %s must have %d non-negative entries summing to "
                                  "the axis length %d" % (list(split), n, dim))
        sizes = list(split)
    elif num_outputs is not None:
        if num_outputs < 1 or num_outputs != n:
            raise InvalidArgument("Split: num_outputs=%d but the node has %d outputs"
                                  % (num_outputs, n))
        chunk = -(-dim // num_outputs)
        sizes = [chunk] * (num_outputs - 1) + [dim - chunk * (num_outputs - 1)]
        if sizes[-1] < 0:
            raise InvalidArgument("Split: cannot split an axis of length %d into %d outputs of "
                                  "ceil(%d/%d)=%d" % (dim, num_outputs, dim, num_outputs, chunk))
    else:
        if dim % n:
            raise InvalidArgument("Split: axis length %d is not divisible into %d equal outputs"
                                  % (dim, n))
        sizes = [dim // n] * n
    parts = []
    start = 0
    index = [slice(None)] * x.ndim
    for s in sizes:
        index[axis] = slice(start, start + s)
        parts.append(x[tuple(index)])
        start += s
    return parts[0] if len(parts) == 1 else tuple(parts)


@register("Split", since=1, until=1)
def split_1(ctx: Any, x: np.ndarray, split_input: Optional[np.ndarray] = None, *, axis: int = 0,
            split: Optional[List[int]] = None) -> Any:
    """Split-1: `split` as an attribute or a second input."""
    if split_input is not None:
        split = int_list(split_input, "Split", "split")
    return _split(ctx, x, axis, split)


@register("Split", since=2, until=12)
def split_2(ctx: Any, x: np.ndarray, *, axis: int = 0, split: Optional[List[int]] = None) -> Any:
    """Split-2/11: `split` attribute, else equal parts."""
    return _split(ctx, x, axis, split)


@register("Split", since=13, until=17)
def split_13(ctx: Any, x: np.ndarray, split: Optional[np.ndarray] = None, *, axis: int = 0) -> Any:
    """Split-13: `split` as an optional input, else equal parts."""
    return _split(ctx, x, axis, int_list(split, "Split", "split"))


@register("Split", since=18)
def split_18(ctx: Any, x: np.ndarray, split: Optional[np.ndarray] = None, *, axis: int = 0,
             num_outputs: Optional[int] = None) -> Any:
    """Split-18: `split` input or `num_outputs` (the last chunk may be smaller)."""
    return _split(ctx, x, axis, int_list(split, "Split", "split"), num_outputs)


# ---------------------------------------------------------------- Slice

def _slice(data: np.ndarray, starts: Optional[List[int]], ends: Optional[List[int]],
           axes: Optional[List[int]], steps: Optional[List[int]]) -> np.ndarray:
    if starts is None or ends is None or len(starts) != len(ends):
        raise InvalidArgument("Slice: starts %s and ends %s must be given with equal lengths"
                              % (starts, ends))
    n = len(starts)
    axes = list(range(n)) if axes is None else norm_axes(axes, data.ndim, "Slice")
    steps = [1] * n if steps is None else steps
    if len(axes) != n or len(steps) != n:
        raise InvalidArgument("Slice: starts, ends, axes %s and steps %s must have the same length"
                              % (axes, steps))
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        dim = data.shape[axis]
        if step == 0:
            raise InvalidArgument("Slice: step 0 on axis %d" % axis)
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, stop = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, stop = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            if stop < 0:
                stop = None
            if start < 0:   # an empty axis
                start = 0
        index[axis] = slice(start, stop, step)
    return data[tuple(index)]


@register("Slice", since=1, until=9)
def slice_1(data: np.ndarray, *, starts: Optional[List[int]] = None,
            ends: Optional[List[int]] = None, axes: Optional[List[int]] = None) -> np.ndarray:
    """Slice-1: starts, ends and axes as attributes (step 1)."""
    return _slice(data, starts, ends, axes, None)


@register("Slice", since=10)
def slice_10(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
             axes: Optional[np.ndarray] = None, steps: Optional[np.ndarray] = None) -> np.ndarray:
    """Slice-10/11/13: starts, ends, axes, steps as inputs; out-of-range bounds are clamped."""
    return _slice(data, int_list(starts, "Slice", "starts"), int_list(ends, "Slice", "ends"),
                  int_list(axes, "Slice", "axes"), int_list(steps, "Slice", "steps"))


# ---------------------------------------------------------------- Expand, Tile, Pad

@register("Expand", since=8)
def expand(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Broadcast `x` against `shape` (numpy rules; either side may hold the 1s)."""
    dims = int_list(shape, "Expand", "shape")
    if any(d < 0 for d in dims):
        raise InvalidArgument("Expand: shape %s has a negative dimension" % (dims,))
    out = broadcast_shape([x.shape, dims], "Expand")
    check_tensor_bytes("Expand", out, x.dtype)
    return np.array(np.broadcast_to(x, out))


@register("Tile", since=1, until=5)
def tile_1(x: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Tile-1: repeat `x` `tiles` times along the single axis `axis`."""
    ax = norm_axis(int(_scalar(axis, "Tile", "axis")), x.ndim, "Tile")
    reps = [1] * x.ndim
    reps[ax] = int(_scalar(tiles, "Tile", "tiles"))
    return _tile(x, reps)


@register("Tile", since=6)
def tile_6(x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    """Tile-6/13: repeat `x` repeats[i] times along each axis i."""
    return _tile(x, int_list(repeats, "Tile", "repeats"))


def _tile(x: np.ndarray, reps: List[int]) -> np.ndarray:
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise InvalidArgument("Tile: repeats %s must hold %d non-negative values (the input rank)"
                              % (reps, x.ndim))
    check_tensor_bytes("Tile", [d * r for d, r in zip(x.shape, reps)], x.dtype)
    return np.tile(x, reps) if reps else x.copy()


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pad(x: np.ndarray, pads: Optional[List[int]], mode: str, value: Any,
         axes: Optional[List[int]]) -> np.ndarray:
    if mode not in _PAD_MODES:
        raise InvalidArgument("Pad: mode %r is not one of constant, reflect, edge, wrap" % (mode,))
    if pads is None:
        raise InvalidArgument("Pad: pads are required")
    axes = list(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim, "Pad")
    if len(pads) != 2 * len(axes):
        raise InvalidArgument("Pad: pads %s must hold 2 values per padded axis (%d axes)"
                              % (pads, len(axes)))
    width = [[0, 0] for _ in range(x.ndim)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + len(axes)]]
    crop = []
    for a, (b, e) in enumerate(width):
        dim = x.shape[a]
        lo, hi = max(-b, 0), dim - max(-e, 0)
        if hi < lo:
            raise InvalidArgument("Pad: negative pads %s remove more than the %d elements of "
                                  "axis %d" % ([b, e], dim, a))
        crop.append(slice(lo, hi))
    x = x[tuple(crop)]
    width = [(max(b, 0), max(e, 0)) for b, e in width]
    check_tensor_bytes("Pad", [d + b + e for d, (b, e) in zip(x.shape, width)], x.dtype)
    if not any(b or e for b, e in width):
        return x.copy()
    if mode == "constant":
        if value is None:
            value = "" if x.dtype == object else 0
        fill = np.asarray(value).astype(x.dtype) if x.dtype != object else value
        return np.pad(x, width, mode="constant", constant_values=fill)
    for a, (b, e) in enumerate(width):
        if (b or e) and x.shape[a] == 0:
            raise InvalidArgument("Pad: mode %r cannot pad axis %d, which is empty" % (mode, a))
        if mode == "reflect" and max(b, e) > x.shape[a] - 1:
            raise InvalidArgument("Pad: reflect pads %s exceed %d, the length - 1 of axis %d "
                                  "(after cropping)" % ([b, e], x.shape[a] - 1, a))
    return np.pad(x, width, mode=_PAD_MODES[mode])


@register("Pad", since=1, until=1)
def pad_1(data: np.ndarray, *, mode: str = "constant", paddings: Optional[List[int]] = None,
          value: float = 0.0) -> np.ndarray:
    """Pad-1: `paddings` and `value` as attributes."""
    return _pad(data, paddings, mode, value, None)


@register("Pad", since=2, until=10)
def pad_2(data: np.ndarray, *, mode: str = "constant", pads: Optional[List[int]] = None,
          value: float = 0.0) -> np.ndarray:
    """Pad-2: `pads` and `value` as attributes."""
    return _pad(data, pads, mode, value, None)


@register("Pad", since=11)
def pad_11(data: np.ndarray, pads: np.ndarray, constant_value: Optional[np.ndarray] = None,
           axes: Optional[np.ndarray] = None, *, mode: str = "constant") -> np.ndarray:
    """Pad-11/13/18/19: pads, constant_value and (from 18) axes as inputs; negative pads crop."""
    value = None
    if constant_value is not None and np.asarray(constant_value).size:
        value = _scalar(constant_value, "Pad", "constant_value")
    return _pad(data, int_list(pads, "Pad", "pads"), mode, value, int_list(axes, "Pad", "axes"))


# ------------------------------------------------------- Shape, Size, ConstantOfShape, Range

@register("Shape", since=1)
def shape(data: np.ndarray, *, start: int = 0, end: Optional[int] = None) -> np.ndarray:
    """The input's shape as int64 (dims start..end from opset 15, clamped to the rank)."""
    r = data.ndim

    def clamp(v: int) -> int:
        return min(max(v + r if v < 0 else v, 0), r)
    lo, hi = clamp(int(start)), r if end is None else clamp(int(end))
    return np.array(data.shape[lo:hi], dtype=np.int64)


@register("Size")
def size(data: np.ndarray) -> np.ndarray:
    """The number of elements of the input, an int64 scalar."""
    return np.array(data.size, dtype=np.int64)


@register("ConstantOfShape", since=9)
def constant_of_shape(shape: np.ndarray, *, value: Optional[np.ndarray] = None) -> np.ndarray:
    """A tensor of the given shape filled with `value` (a one-element tensor; float32 0 default)."""
    dims = int_list(shape, "ConstantOfShape", "shape")
    if any(d < 0 for d in dims):
        raise InvalidArgument("ConstantOfShape: shape %s has a negative dimension" % (dims,))
    if value is None:
        check_tensor_bytes("ConstantOfShape", dims, np.float32)
        return np.zeros(dims, dtype=np.float32)
    v = np.asarray(value)
    check_tensor_bytes("ConstantOfShape", dims, v.dtype)
    return np.full(dims, _scalar(v, "ConstantOfShape", "value"), dtype=v.dtype)


@register("Range", since=11)
def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *,
           stash_type: int = 1) -> np.ndarray:
    """start, start+delta, ... up to `limit` (exclusive), in the inputs' type."""
    dt = np.asarray(start).dtype
    s, l, d = (_scalar(v, "Range", n) for v, n in ((start, "start"), (limit, "limit"),
                                                   (delta, "delta")))
    if dt.kind in "iu":
        s, l, d = int(s), int(l), int(d)
        if d == 0:
            raise InvalidArgument("Range: delta must not be 0")
        n = max(-((s - l) // d), 0)
        check_tensor_bytes("Range", [n], np.int64)
        return (np.arange(n, dtype=np.int64) * d + s).astype(dt)
    s, l, d = float(s), float(l), float(d)
    if d == 0 or math.isnan(d):
        raise InvalidArgument("Range: delta must be a non-zero number, got %r" % d)
    count = (l - s) / d
    if math.isnan(count) or math.isinf(count):
        raise InvalidArgument("Range: cannot count the steps from %r to %r by %r" % (s, l, d))
    n = max(int(math.ceil(count)), 0)
    check_tensor_bytes("Range", [n], np.float64 if dt != np.float32 else dt)
    if dt == np.float32:
        return np.float32(s) + np.arange(n, dtype=np.float32) * np.float32(d)
    return (s + np.arange(n, dtype=np.float64) * d).astype(dt)


# ---------------------------------------------------------------- Identity, Dropout, Constant

@register("Identity")
def identity(x: Any) -> Any:
    """The input itself (tensor, sequence or optional)."""
    return x


@register("Dropout", since=1, until=11)
def dropout_1(ctx: Any, data: np.ndarray, *, ratio: float = 0.5, is_test: int = 0,
              consumed_inputs: Any = None, seed: Any = None) -> Any:
    """Dropout-1..11 at inference: the input unchanged; the mask is all zeros (what onnxruntime
    gives for these opsets: "nothing dropped"), of data's type before opset 10, bool after."""
    mask_dtype = np.bool_ if ctx.opset >= 10 else data.dtype
    return pick_outputs(ctx, [data, np.zeros(data.shape, dtype=mask_dtype)])


@register("Dropout", since=12)
def dropout_12(ctx: Any, data: np.ndarray, ratio: Optional[np.ndarray] = None,
               training_mode: Optional[np.ndarray] = None, *, seed: Optional[int] = None) -> Any:
    """Dropout-12/13/22: identity unless `training_mode` is true, then a random mask scaled by
    1/(1-ratio) (numpy's legacy generator seeded by `seed` when given)."""
    r = 0.5 if ratio is None else float(_scalar(ratio, "Dropout", "ratio"))
    train = training_mode is not None and bool(_scalar(training_mode, "Dropout", "training_mode"))
    if not train or r == 0:
        return pick_outputs(ctx, [data, np.ones(data.shape, dtype=np.bool_)])
    if not 0 <= r < 1:
        raise InvalidArgument("Dropout: ratio must be in [0, 1), got %r" % r)
    rng = np.random.RandomState(seed) if seed is not None else np.random
    mask = rng.uniform(0.0, 1.0, data.shape) >= r
    one = data.dtype.type(1)
    scale = one / (one - data.dtype.type(r))
    out = (mask * data * scale).astype(data.dtype)
    return pick_outputs(ctx, [out, mask])


@register("Constant")
def constant(*, value: Any = None, sparse_value: Any = None, value_float: Optional[float] = None,
             value_floats: Optional[List[float]] = None, value_int: Optional[int] = None,
             value_ints: Optional[List[int]] = None, value_string: Optional[str] = None,
             value_strings: Optional[List[str]] = None) -> np.ndarray:
    """The tensor held by whichever one of the value attributes is set."""
    given = [(k, v) for k, v in (("value", value), ("sparse_value", sparse_value),
                                 ("value_float", value_float), ("value_floats", value_floats),
                                 ("value_int", value_int), ("value_ints", value_ints),
                                 ("value_string", value_string), ("value_strings", value_strings))
             if v is not None]
    if len(given) != 1:
        raise InvalidGraph("Constant: exactly one value attribute must be set, got %s"
                           % ([k for k, _ in given] or "none"))
    key, v = given[0]
    if key == "value":
        return np.asarray(v)
    if key == "sparse_value":
        return v.to_dense()
    if key == "value_float":
        return np.array(v, dtype=np.float32)
    if key == "value_floats":
        return np.array(v, dtype=np.float32).reshape(-1)
    if key == "value_int":
        return np.array(v, dtype=np.int64)
    if key == "value_ints":
        return np.array(v, dtype=np.int64).reshape(-1)
    out = np.empty(1 if key == "value_string" else len(v), dtype=object)
    out[:] = [v] if key == "value_string" else list(v)
    return out.reshape(()) if key == "value_string" else out


# ------------------------------------------------------- DepthToSpace, SpaceToDepth, EyeLike

def _check_4d(x: np.ndarray, op: str, blocksize: Optional[int]) -> int:
    if x.ndim != 4:
        raise InvalidArgument("%s: input must be 4-D (N, C, H, W), got shape %s" % (op, x.shape))
    if blocksize is None or blocksize < 1:
        raise InvalidArgument("%s: blocksize must be a positive integer, got %r" % (op, blocksize))
    return int(blocksize)


@register("DepthToSpace")
def depth_to_space(x: np.ndarray, *, blocksize: Optional[int] = None,
                   mode: str = "DCR") -> np.ndarray:
    """Move channel blocks into blocksize x blocksize spatial tiles (DCR or CRD order)."""
    bs = _check_4d(x, "DepthToSpace", blocksize)
    b, c, h, w = x.shape
    if c % (bs * bs):
        raise InvalidArgument("DepthToSpace: channels %d are not divisible by blocksize^2 = %d"
                              % (c, bs * bs))
    if mode == "DCR":
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise InvalidArgument("DepthToSpace: mode %r is not DCR or CRD" % (mode,))
    return t.reshape(b, c // (bs * bs), h * bs, w * bs)


@register("SpaceToDepth")
def space_to_depth(x: np.ndarray, *, blocksize: Optional[int] = None,
                   mode: str = "DCR") -> np.ndarray:
    """Move blocksize x blocksize spatial tiles into channels (DCR, or CRD from opset 28)."""
    bs = _check_4d(x, "SpaceToDepth", blocksize)
    b, c, h, w = x.shape
    if h % bs or w % bs:
        raise InvalidArgument("SpaceToDepth: height %d and width %d must be divisible by "
                              "blocksize %d" % (h, w, bs))
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    if mode == "DCR":
        t = t.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        t = t.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise InvalidArgument("SpaceToDepth: mode %r is not DCR or CRD" % (mode,))
    return t.reshape(b, c * bs * bs, h // bs, w // bs)


@register("EyeLike", since=9)
def eye_like(x: np.ndarray, *, dtype: Optional[int] = None, k: int = 0) -> np.ndarray:
    """A 2-D tensor shaped like `x` with ones on diagonal `k` (type `dtype` or x's)."""
    if x.ndim != 2:
        raise InvalidArgument("EyeLike: input must be 2-D, got shape %s" % (x.shape,))
    dt = x.dtype if dtype is None else dtypes.to_numpy(dtype)
    if dt == object:
        raise InvalidArgument("EyeLike: string output is not supported")
    return np.eye(x.shape[0], x.shape[1], k=int(k), dtype=dt)


# ---------------------------------------------------------------- ReverseSequence, Compress, Unique

@register("ReverseSequence", since=10)
def reverse_sequence(x: np.ndarray, sequence_lens: np.ndarray, *, batch_axis: int = 1,
                     time_axis: int = 0) -> np.ndarray:
    """Reverse the first sequence_lens[b] steps along `time_axis` of every batch entry b."""
    if x.ndim < 2 or {batch_axis, time_axis} != {0, 1}:
        raise InvalidArgument("ReverseSequence: needs rank >= 2 and batch_axis/time_axis 0 and 1, "
                              "got shape %s, batch_axis=%r, time_axis=%r"
                              % (x.shape, batch_axis, time_axis))
    y = x if time_axis == 0 else x.swapaxes(0, 1)
    t_len, b_len = y.shape[0], y.shape[1]
    lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
    if lens.shape[0] != b_len or (lens.size and (lens.min() < 0 or lens.max() > t_len)):
        raise InvalidArgument("ReverseSequence: sequence_lens %s must hold %d values in 0..%d"
                              % (lens.tolist(), b_len, t_len))
    t = np.arange(t_len)[:, None]
    src = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)
    out = y[src, np.arange(b_len)[None, :]]
    return out if time_axis == 0 else np.ascontiguousarray(out.swapaxes(0, 1))


@register("Compress", since=9)
def compress(x: np.ndarray, condition: np.ndarray, *, axis: Optional[int] = None) -> np.ndarray:
    """Keep the slices (or, without `axis`, the flat elements) where `condition` is true."""
    cond = np.asarray(condition)
    if cond.ndim != 1:
        raise InvalidArgument("Compress: condition must be 1-D, got shape %s" % (cond.shape,))
    cond = cond.astype(bool)
    if axis is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = norm_axis(axis, x.ndim, "Compress")
    return np.compress(cond[:x.shape[axis]], x, axis=axis)   # extra entries are ignored (as ORT)


@register("Unique", since=11)
def unique(ctx: Any, x: np.ndarray, *, axis: Optional[int] = None, sorted: int = 1) -> Any:
    """Unique values (or slices along `axis`): Y, first indices, inverse indices and counts."""
    if axis is None:
        data, ax = x.reshape(-1), None
    else:
        ax = norm_axis(axis, x.ndim, "Unique")
        data = x
    y, first, inverse, counts = np.unique(data, return_index=True, return_inverse=True,
                                          return_counts=True, axis=ax)
    inverse = np.asarray(inverse).reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if ax is None else ax)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    as64 = [np.asarray(v, dtype=np.int64) for v in (first, inverse, counts)]
    return pick_outputs(ctx, [y] + as64)
