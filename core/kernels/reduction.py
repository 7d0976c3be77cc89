"""Reductions: the Reduce* family, ArgMax / ArgMin, CumSum / CumProd and TopK.

Reduce* take `axes` as an attribute up to opset 12 (ReduceSum) or 17 (the others) and as an
optional input afterwards, where an empty `axes` reduces everything unless
`noop_with_empty_axes` is set. Reducing an empty set gives the operation's identity (0 for sums,
1 for products, -inf / the type's minimum for max, ...). float16 / bfloat16 accumulate in float32.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np

from ..errors import InvalidArgument
from ._util import int_list, norm_axes, norm_axis, widen
from .registry import add, register

Axes = Optional[Tuple[int, ...]]   # None: every axis


def _out(r: np.ndarray, dtype: np.dtype) -> np.ndarray:
    r = np.asarray(r)
    return r if r.dtype == dtype else r.astype(dtype)


def _extreme(dtype: np.dtype, high: bool):
    """The highest (or lowest) value of `dtype`: +-inf, an integer limit, True / False."""
    if dtype.kind == "b":
        return high
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if high else info.min
    return np.inf if high else -np.inf


def _max(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.size == 0:   # max of nothing is the lowest value
        return np.maximum.reduce(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, False))
    return np.maximum.reduce(x, axis=axes, keepdims=keep)


def _min(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.size == 0:
        return np.minimum.reduce(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, True))
    return np.minimum.reduce(x, axis=axes, keepdims=keep)


def _sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    dtype = x.dtype if x.dtype.kind == "f" else None
    return np.add.reduce(x, axis=axes, keepdims=keep, dtype=dtype)


def _mean(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.size == 0:   # the mean of nothing: ONNX leaves it undefined, onnxruntime gives 0
        return _sum(x, axes, keep)
    return np.mean(x, axis=axes, keepdims=keep)


def _prod(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.multiply.reduce(x, axis=axes, keepdims=keep)


def _l1(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return _sum(np.abs(x), axes, keep)


def _sum_square(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return _sum(np.square(x), axes, keep)


def _l2(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        x = x.astype(np.float64)
    return np.sqrt(_sum_square(x, axes, keep))


def _log_sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        x = x.astype(np.float64)
    return np.log(_sum(x, axes, keep))


def _log_sum_exp(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        x = x.astype(np.float64)
    m = np.asarray(_max(x, axes, True))
    m[~np.isfinite(m)] = 0
    e = np.asarray(np.subtract(x, m))
    np.exp(e, out=e)
    r = np.log(_sum(e, axes, True))
    r += m
    if not keep:
        r = np.squeeze(r, axis=axes)
    return r


def _reduce(op: str, fn: Callable[[np.ndarray, Axes, bool], np.ndarray], data: np.ndarray,
            axes: Optional[List[int]], keepdims: int, noop_with_empty_axes: int) -> np.ndarray:
    if not axes:
        if noop_with_empty_axes:
            return data.copy()
        norm: Axes = None
    else:
        norm = tuple(norm_axes(axes, data.ndim, op))
    x = widen(data)
    if fn in _WARNS:
        with np.errstate(all="ignore"):
            r = fn(x, norm, bool(keepdims))
    else:
        r = fn(x, norm, bool(keepdims))
    return _out(r, data.dtype)


_WARNS = (_log_sum, _log_sum_exp)   # log(0) = -inf is expected, not worth a warning
_REDUCE = [
    # op, function, first opset with axes as an input
    ("ReduceSum", _sum, 13), ("ReduceMean", _mean, 18), ("ReduceMax", _max, 18),
    ("ReduceMin", _min, 18), ("ReduceProd", _prod, 18), ("ReduceL1", _l1, 18),
    ("ReduceL2", _l2, 18), ("ReduceSumSquare", _sum_square, 18), ("ReduceLogSum", _log_sum, 18),
    ("ReduceLogSumExp", _log_sum_exp, 18),
]


def _reduce_kernels(op: str, fn: Callable[[np.ndarray, Axes, bool], np.ndarray],
                    split: int) -> None:
    def with_attr(data: np.ndarray, axes: Optional[List[int]] = None,
                  keepdims: int = 1) -> np.ndarray:
        return _reduce(op, fn, data, axes, keepdims, 0)

    def with_input(data: np.ndarray, axes_input: Optional[np.ndarray] = None, keepdims: int = 1,
                   noop_with_empty_axes: int = 0) -> np.ndarray:
        axes = int_list(axes_input, op, "input axes")
        return _reduce(op, fn, data, axes, keepdims, noop_with_empty_axes)

    with_attr.__name__, with_input.__name__ = op + "_1", op
    with_attr.__doc__ = "ONNX %s, opsets 1-%d (axes attribute)." % (op, split - 1)
    with_input.__doc__ = "ONNX %s, opset >= %d (optional axes input)." % (op, split)
    add(op, with_attr, since=1, until=split - 1)
    add(op, with_input, since=split)


for _op, _fn, _split in _REDUCE:
    _reduce_kernels(_op, _fn, _split)


# ----------------------------------------------------------------------------- ArgMax/ArgMin

def _arg(op: str, fn: Callable[..., np.ndarray], data: np.ndarray, axis: int, keepdims: int,
         select_last_index: int) -> np.ndarray:
    if data.ndim == 0:
        raise InvalidArgument("%s: input must have rank >= 1, got a scalar" % op)
    a = norm_axis(axis, data.ndim, op)
    if data.shape[a] == 0:
        raise InvalidArgument("%s: cannot reduce over axis %d of size 0 (input shape %s)"
                              % (op, axis, tuple(data.shape)))
    x = widen(data)
    if select_last_index:
        idx = (data.shape[a] - 1) - fn(np.flip(x, a), axis=a)
    else:
        idx = fn(x, axis=a)
    idx = np.asarray(idx, dtype=np.int64)
    return np.expand_dims(idx, a) if keepdims else idx


@register("ArgMax", since=1)
def arg_max(data: np.ndarray, axis: int = 0, keepdims: int = 1,
            select_last_index: int = 0) -> np.ndarray:
    """ONNX ArgMax: int64 indices of the maxima along `axis` (first one, or last when asked)."""
    return _arg("ArgMax", np.argmax, data, axis, keepdims, select_last_index)


@register("ArgMin", since=1)
def arg_min(data: np.ndarray, axis: int = 0, keepdims: int = 1,
            select_last_index: int = 0) -> np.ndarray:
    """ONNX ArgMin: int64 indices of the minima along `axis` (first one, or last when asked)."""
    return _arg("ArgMin", np.argmin, data, axis, keepdims, select_last_index)


# ----------------------------------------------------------------------------- CumSum, CumProd

def _scalar_int(value: np.ndarray, op: str, what: str) -> int:
    v = np.asarray(value)
    if v.size != 1 or v.dtype.kind not in "iu":
        raise InvalidArgument("%s: %s must be a single integer, got %s of shape %s"
                              % (op, what, v.dtype, tuple(v.shape)))
    return int(v.reshape(-1)[0])


def _cumulative(op: str, ufunc: np.ufunc, x: np.ndarray, axis: np.ndarray, exclusive: int,
                reverse: int) -> np.ndarray:
    if x.ndim == 0:
        raise InvalidArgument("%s: input must have rank >= 1, got a scalar" % op)
    a = norm_axis(_scalar_int(axis, op, "input axis"), x.ndim, op)
    xw = widen(x)
    if reverse:
        xw = np.flip(xw, a)
    r = ufunc.accumulate(xw, axis=a, dtype=xw.dtype)
    if exclusive:
        # shift by one along the axis, the operation's identity first
        shifted = np.full_like(r, ufunc.identity)
        dst = [slice(None)] * x.ndim
        src = [slice(None)] * x.ndim
        dst[a], src[a] = slice(1, None), slice(0, -1)
        shifted[tuple(dst)] = r[tuple(src)]
        r = shifted
    if reverse:
        r = np.flip(r, a)
    return np.ascontiguousarray(_out(r, x.dtype))


@register("CumSum", since=11)
def cum_sum(x: np.ndarray, axis: np.ndarray, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """ONNX CumSum along the `axis` input, optionally exclusive and / or reversed."""
    return _cumulative("CumSum", np.add, x, axis, exclusive, reverse)


@register("CumProd", since=26)
def cum_prod(x: np.ndarray, axis: np.ndarray, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """ONNX CumProd along the `axis` input, optionally exclusive and / or reversed."""
    return _cumulative("CumProd", np.multiply, x, axis, exclusive, reverse)


# -------------------------------------------------------------------------------------- TopK

def _sorted_order(keys: np.ndarray, axis: int, largest: int) -> np.ndarray:
    """Indices that sort `keys` along `axis`: descending (largest) or ascending by value, equal
    values by lower index first."""
    if largest:
        # a stable ascending sort of the reversed axis, read backwards
        n = keys.shape[axis]
        order = np.argsort(np.flip(keys, axis), axis=axis, kind="stable")
        return (n - 1) - np.flip(order, axis)
    return np.argsort(keys, axis=axis, kind="stable")


def _top_k_partition(rows: np.ndarray, k: int, largest: int) -> np.ndarray:
    """TopK of each row of a 2-D array without sorting whole rows (k much smaller than n):
    partition to find the k-th value t, keep everything beyond t plus the lowest-indexed values
    equal to t, then sort those k."""
    n = rows.shape[1]
    kth = n - k if largest else k - 1
    t = np.partition(rows, kth, axis=1)[:, kth:kth + 1]
    beyond = rows > t if largest else rows < t
    tied = rows == t
    need = k - np.count_nonzero(beyond, axis=1)[:, None]
    keep = beyond | (tied & (np.cumsum(tied, axis=1) <= need))
    cols = np.nonzero(keep)[1].reshape(rows.shape[0], k)
    order = _sorted_order(np.take_along_axis(rows, cols, axis=1), 1, largest)
    return np.take_along_axis(cols, order, axis=1)


def _top_k(op: str, x: np.ndarray, k: int, axis: int,
           largest: int) -> Tuple[np.ndarray, np.ndarray]:
    if x.ndim == 0:
        raise InvalidArgument("%s: input must have rank >= 1, got a scalar" % op)
    a = norm_axis(axis, x.ndim, op)
    n = x.shape[a]
    if not 0 <= k <= n:
        raise InvalidArgument("%s: k=%d is out of range for axis %d of size %d" % (op, k, axis, n))
    keys = widen(x)
    if 0 < k and n >= 64 and 4 * k <= n and not (keys.dtype.kind == "f" and np.isnan(keys).any()):
        rows = np.moveaxis(keys, a, -1)
        idx = _top_k_partition(rows.reshape(-1, n), k, largest).reshape(rows.shape[:-1] + (k,))
        idx = np.ascontiguousarray(np.moveaxis(idx, -1, a))
    else:
        order = _sorted_order(keys, a, largest)
        idx = np.ascontiguousarray(np.take(order, np.arange(k), axis=a))
    idx = idx.astype(np.int64, copy=False)
    return np.take_along_axis(x, idx, axis=a), idx


@register("TopK", since=10)
def top_k(x: np.ndarray, k: np.ndarray, axis: int = -1, largest: int = 1,
          sorted: int = 1) -> Tuple[np.ndarray, np.ndarray]:  # noqa: A002
    """ONNX TopK (k as an input): the k largest (or smallest) values along `axis`, sorted, and
    their int64 indices; equal values keep the lower index first."""
    return _top_k("TopK", x, _scalar_int(k, "TopK", "input K"), axis, largest)


@register("TopK", since=1, until=9)
def top_k_1(x: np.ndarray, axis: int = -1, k: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """ONNX TopK, opsets 1-9: k is an attribute; always the largest values."""
    return _top_k("TopK", x, int(k), axis, 1)
