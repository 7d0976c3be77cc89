"""Data movement kernels: ops that copy elements into a new layout without computing on them.

Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, ReverseSequence
and Trilu. Ops that only change or read a shape (Reshape, Squeeze, Shape, ...) are in `shape`.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgument, InvalidGraph
from ._util import (broadcast_shape, check_tensor_bytes, int_list, norm_axes, norm_axis,
                    scalar)
from .registry import register


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
    ax = norm_axis(int(scalar(axis, "Tile", "axis")), x.ndim, "Tile")
    reps = [1] * x.ndim
    reps[ax] = int(scalar(tiles, "Tile", "tiles"))
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
        value = scalar(constant_value, "Pad", "constant_value")
    return _pad(data, int_list(pads, "Pad", "pads"), mode, value, int_list(axes, "Pad", "axes"))


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


@register("Trilu", since=14)
def trilu(x: np.ndarray, k: Optional[np.ndarray] = None, upper: int = 1) -> np.ndarray:
    """ONNX Trilu: keep the upper (or lower) triangle of the trailing matrices, from diagonal k."""
    if x.ndim < 2:
        raise InvalidArgument("Trilu: input must have rank >= 2, got shape %s" % (tuple(x.shape),))
    diag = 0
    if k is not None:
        kv = np.asarray(k)
        if kv.size != 1 or kv.dtype.kind not in "iu":
            raise InvalidArgument("Trilu: input k must be a single integer, got %s of shape %s"
                                  % (kv.dtype, tuple(kv.shape)))
        diag = int(kv.reshape(-1)[0])
    rows, cols = x.shape[-2:]
    diag = max(-rows - 1, min(cols + 1, diag))   # beyond the matrix every k acts the same
    return np.triu(x, diag) if upper else np.tril(x, diag)
