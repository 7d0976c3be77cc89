"""Indexing kernels: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
TensorScatter, OneHot and NonZero (Where is in `elementwise`). Negative indices count from the
end; out-of-range ones raise."""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from ..errors import InvalidArgument
from ._util import check_tensor_bytes, norm_axis
from .registry import register


def _indices(indices: np.ndarray, dim: int, op: str, what: str = "indices") -> np.ndarray:
    """Integer indices checked against [-dim, dim-1] and made non-negative (int64)."""
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise InvalidArgument("%s: %s must be int32 or int64, got %s" % (op, what, idx.dtype))
    idx = idx.astype(np.int64)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -dim or hi >= dim:
            bad = lo if lo < -dim else hi
            raise InvalidArgument("%s: index %d in %s is out of bounds for an axis of size %d "
                                  "(expected %d..%d)" % (op, bad, what, dim, -dim, dim - 1))
    return np.where(idx < 0, idx + dim, idx)


def _along_axis(idx: np.ndarray, axis: int) -> Tuple[Any, ...]:
    """A fancy-index tuple that picks, at every position of `idx`, entry idx[...] on `axis`."""
    out: List[Any] = []
    for d, n in enumerate(idx.shape):
        if d == axis:
            out.append(idx)
        else:
            shape = [1] * idx.ndim
            shape[d] = n
            out.append(np.arange(n).reshape(shape))
    return tuple(out)


def _check_elementwise(data: np.ndarray, indices: np.ndarray, axis: int, op: str) -> None:
    idx = np.asarray(indices)
    if idx.ndim != data.ndim:
        raise InvalidArgument("%s: indices of rank %d must have the rank of data (%d)"
                              % (op, idx.ndim, data.ndim))
    for d, (n, m) in enumerate(zip(idx.shape, data.shape)):
        if d != axis and n > m:
            raise InvalidArgument("%s: indices shape %s exceeds data shape %s on axis %d"
                                  % (op, idx.shape, data.shape, d))


# ---------------------------------------------------------------- Gather family

@register("Gather")
def gather(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """Pick entries of `data` along `axis`; the output is data.shape with that axis replaced
    by indices.shape."""
    if data.ndim == 0:
        raise InvalidArgument("Gather: data must have rank >= 1, got a scalar")
    axis = norm_axis(axis, data.ndim, "Gather")
    idx = _indices(indices, data.shape[axis], "Gather")
    # np.take casts indices to intp 'safe'ly: int64 fails where intp is int32 (wasm32, Pyodide)
    return np.take(data, idx.astype(np.intp, copy=False), axis=axis)


@register("GatherElements", since=11)
def gather_elements(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """out[i][j][k] = data[indices[i][j][k]][j][k] (for axis 0); the output has indices' shape."""
    if data.ndim == 0:
        raise InvalidArgument("GatherElements: data must have rank >= 1, got a scalar")
    axis = norm_axis(axis, data.ndim, "GatherElements")
    _check_elementwise(data, indices, axis, "GatherElements")
    idx = _indices(indices, data.shape[axis], "GatherElements")
    return data[_along_axis(idx, axis)]


def _nd_index(data: np.ndarray, indices: np.ndarray, batch_dims: int, op: str
              ) -> Tuple[Tuple[Any, ...], Tuple[int, ...], int]:
    """The fancy index that GatherND/ScatterND apply to `data` reshaped to
    (batch, data.shape[batch_dims:]), with the batch shape and the index depth k."""
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise InvalidArgument("%s: indices must be int64, got %s" % (op, idx.dtype))
    if idx.ndim < 1 or data.ndim < 1:
        raise InvalidArgument("%s: data and indices must have rank >= 1, got %s and %s"
                              % (op, data.shape, idx.shape))
    b = int(batch_dims)
    if not 0 <= b < min(data.ndim, idx.ndim):
        raise InvalidArgument("%s: batch_dims %d must be below the ranks of data (%d) and "
                              "indices (%d)" % (op, b, data.ndim, idx.ndim))
    if data.shape[:b] != idx.shape[:b]:
        raise InvalidArgument("%s: the first %d dims of data %s and indices %s must match"
                              % (op, b, data.shape, idx.shape))
    k = idx.shape[-1]
    if k > data.ndim - b:
        raise InvalidArgument("%s: indices.shape[-1] = %d exceeds rank(data) - batch_dims = %d"
                              % (op, k, data.ndim - b))
    nbatch = int(np.prod(data.shape[:b], dtype=np.int64))
    per_batch = int(np.prod(idx.shape[b:-1], dtype=np.int64))
    flat = idx.reshape((nbatch, per_batch, k)).astype(np.int64)
    cols = [_indices(flat[..., j], data.shape[b + j], op) for j in range(k)]
    batch = np.broadcast_to(np.arange(nbatch).reshape(nbatch, 1), (nbatch, per_batch))
    return (batch,) + tuple(cols), data.shape[:b], k


@register("GatherND", since=11)
def gather_nd(data: np.ndarray, indices: np.ndarray, *, batch_dims: int = 0) -> np.ndarray:
    """Gather slices of `data` addressed by the last axis of `indices` (after `batch_dims`)."""
    index, _, k = _nd_index(data, indices, batch_dims, "GatherND")
    b = int(batch_dims)
    flat = data.reshape((-1,) + data.shape[b:])
    out = flat[index]
    idx_shape = np.shape(indices)
    return out.reshape(idx_shape[:-1] + data.shape[b + k:])


# ---------------------------------------------------------------- Scatter family

_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, index: Tuple[Any, ...], updates: np.ndarray, reduction: str,
             op: str) -> np.ndarray:
    updates = np.asarray(updates).astype(out.dtype, copy=False)
    if reduction == "none":
        out[index] = updates
    elif reduction in _REDUCE:
        _REDUCE[reduction].at(out, index, updates)
    else:
        raise InvalidArgument("%s: reduction %r is not one of none, add, mul, max, min"
                              % (op, reduction))
    return out


def _scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                      reduction: str, op: str) -> np.ndarray:
    if data.ndim == 0:
        raise InvalidArgument("%s: data must have rank >= 1, got a scalar" % op)
    axis = norm_axis(axis, data.ndim, op)
    if np.shape(indices) != np.shape(updates):
        raise InvalidArgument("%s: indices shape %s and updates shape %s must match"
                              % (op, np.shape(indices), np.shape(updates)))
    _check_elementwise(data, indices, axis, op)
    idx = _indices(indices, data.shape[axis], op)
    return _scatter(data.copy(), _along_axis(idx, axis), updates, reduction, op)


@register("Scatter", since=9)
def scatter(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
            axis: int = 0) -> np.ndarray:
    """Scatter-9 (deprecated in 11): ScatterElements without reduction."""
    return _scatter_elements(data, indices, updates, axis, "none", "Scatter")


@register("ScatterElements", since=11)
def scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                     axis: int = 0, reduction: str = "none") -> np.ndarray:
    """A copy of `data` with updates[i][j][k] written (or reduced) at
    [indices[i][j][k]][j][k] (for axis 0)."""
    return _scatter_elements(data, indices, updates, axis, reduction, "ScatterElements")


@register("ScatterND", since=11)
def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
               reduction: str = "none") -> np.ndarray:
    """A copy of `data` with slices addressed by the last axis of `indices` replaced by (or
    reduced with) `updates`."""
    index, _, k = _nd_index(data, indices, 0, "ScatterND")
    idx_shape = np.shape(indices)
    want = idx_shape[:-1] + data.shape[k:]
    if np.shape(updates) != want:
        raise InvalidArgument("ScatterND: updates shape %s must be indices.shape[:-1] + "
                              "data.shape[k:] = %s" % (np.shape(updates), want))
    out = np.array(data)            # a C-contiguous copy, so the reshape below is a view of it
    upd = np.asarray(updates).reshape((1, -1) + data.shape[k:])
    _scatter(out.reshape((1,) + data.shape), index, upd, reduction, "ScatterND")
    return out


@register("TensorScatter", since=24)
def tensor_scatter(past_cache: np.ndarray, update: np.ndarray,
                   write_indices: Any = None, *, mode: str = "linear",
                   axis: int = -2) -> np.ndarray:
    """A copy of the KV cache `past_cache` with `update` written along the sequence `axis`,
    starting per batch entry at write_indices[b] (0 when absent; modulo the cache length in
    "circular" mode)."""
    op = "TensorScatter"
    if mode not in ("linear", "circular"):
        raise InvalidArgument("%s: mode %r is not linear or circular" % (op, mode))
    rank = past_cache.ndim
    axis = norm_axis(axis, rank, op)
    if axis == 0:
        raise InvalidArgument("%s: axis must not be the batch axis 0" % op)
    if update.ndim != rank or any(a != b for i, (a, b) in enumerate(zip(update.shape,
                                                                       past_cache.shape))
                                  if i != axis) or update.shape[axis] > past_cache.shape[axis]:
        raise InvalidArgument("%s: update shape %s does not fit cache shape %s on axis %d"
                              % (op, update.shape, past_cache.shape, axis))
    batch, length, cap = past_cache.shape[0], update.shape[axis], past_cache.shape[axis]
    starts = np.zeros(batch, np.int64) if write_indices is None else \
        np.asarray(write_indices).astype(np.int64).reshape(-1)
    if starts.shape[0] != batch:
        raise InvalidArgument("%s: write_indices must hold %d values, got %d"
                              % (op, batch, starts.shape[0]))
    pos = starts[:, None] + np.arange(length)[None, :]
    if mode == "circular":
        pos = pos % cap
    elif pos.size and (pos.min() < 0 or pos.max() >= cap):
        raise InvalidArgument("%s: write_indices %s + %d updates overrun the cache length %d"
                              % (op, starts.tolist(), length, cap))
    out = past_cache.copy()
    np.moveaxis(out, axis, 1)[np.arange(batch)[:, None], pos] = np.moveaxis(update, axis, 1)
    return out


# ---------------------------------------------------------------- OneHot, NonZero


@register("OneHot", since=9)
def one_hot(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
            axis: int = -1) -> np.ndarray:
    """values[1] where the new `axis` position equals the index, values[0] elsewhere; indices
    outside [-depth, depth-1] give an all-off row."""
    vals = np.asarray(values)
    if vals.size != 2:
        raise InvalidArgument("OneHot: values must hold [off_value, on_value], got shape %s"
                              % (vals.shape,))
    d = np.asarray(depth)
    if d.size != 1:
        raise InvalidArgument("OneHot: depth must be a scalar, got shape %s" % (d.shape,))
    n = int(d.reshape(-1)[0])
    if n < 1:
        raise InvalidArgument("OneHot: depth must be positive, got %d" % n)
    idx = np.asarray(indices)
    rank = idx.ndim
    if not -rank - 1 <= axis <= rank:
        raise InvalidArgument("OneHot: axis %d is out of range for indices of rank %d "
                              "(expected %d..%d)" % (axis, rank, -rank - 1, rank))
    axis = axis + rank + 1 if axis < 0 else axis
    check_tensor_bytes("OneHot", list(idx.shape) + [n], np.int64, "index grid")
    check_tensor_bytes("OneHot", list(idx.shape) + [n], vals.dtype)
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + n, idx)
    hot = idx[..., None] == np.arange(n)
    hot = np.moveaxis(hot, -1, axis)
    flat = vals.reshape(-1)
    return np.where(hot, flat[1], flat[0]).astype(vals.dtype, copy=False)


@register("NonZero", since=9)
def non_zero(x: np.ndarray) -> np.ndarray:
    """Indices of the non-zero elements, int64 of shape (rank, count)."""
    x = np.asarray(x)
    if x.ndim == 0:   # onnxruntime treats a scalar as a 1-element vector
        return np.zeros((1, 1 if bool(x) else 0), dtype=np.int64)
    if x.dtype == object:
        x = x.astype(bool)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)
