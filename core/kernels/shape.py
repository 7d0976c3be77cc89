"""Shape kernels: ops that change or read a shape, or make a tensor from attributes: Reshape,
Flatten, Squeeze/Unsqueeze, Shape, Size, ConstantOfShape, Range, Identity, Dropout, Constant,
EyeLike, Compress and Unique. Ops that copy data into a new layout are in `movement`.

Kernels that only change the shape return numpy views of their input; none writes into an input.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument, InvalidGraph
from ._util import (check_tensor_bytes, int_list, norm_axes, norm_axis, pick_outputs,
                    scalar)
from .registry import register


def _prod(dims: Sequence[int]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


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


# ---------------------------------------------------------------- Slice


# ---------------------------------------------------------------- Expand, Tile, Pad


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
    return np.full(dims, scalar(v, "ConstantOfShape", "value"), dtype=v.dtype)


@register("Range", since=11)
def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *,
           stash_type: int = 1) -> np.ndarray:
    """start, start+delta, ... up to `limit` (exclusive), in the inputs' type."""
    dt = np.asarray(start).dtype
    s, l, d = (scalar(v, "Range", n) for v, n in ((start, "start"), (limit, "limit"),
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
    r = 0.5 if ratio is None else float(scalar(ratio, "Dropout", "ratio"))
    train = training_mode is not None and bool(scalar(training_mode, "Dropout", "training_mode"))
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
