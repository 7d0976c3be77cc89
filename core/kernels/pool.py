"""Pooling: MaxPool, AveragePool, LpPool, their Global forms, MaxUnpool and MaxRoiPool.

Windows are reduced one spatial axis at a time (max and sums are separable), each axis as a short
loop over its kernel taps of strided slices, so the Python work is sum(kernel), not prod(kernel).
No padded copy of the input is made: a tap updates only the outputs it lands inside for, and a
stride-1 last axis is reduced over flattened padded rows, so each tap is one contiguous run.
MaxPool's Indices output keeps the padded all-taps loop. Output sizes, automatic and ceil-mode
padding follow onnxruntime.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgument
from ..geometry import auto_pad_mode, pads_attr, pool_geometry, spatial_attr
from ._util import check_tensor_bytes
from .registry import register


class _Pool:
    """Checked attributes and geometry of one pooling call."""

    def __init__(self, op: str, X: np.ndarray, kernel_shape: Optional[Sequence[int]],
                 strides: Optional[Sequence[int]], dilations: Optional[Sequence[int]],
                 pads: Optional[Sequence[int]], auto_pad: str, ceil_mode: int) -> None:
        if X.ndim < 3:
            raise InvalidArgument("%s: input X must have rank >= 3 (N, C, spatial...), got shape %s"
                                  % (op, X.shape))
        nd = X.ndim - 2
        if kernel_shape is None or len(kernel_shape) != nd:
            raise InvalidArgument("%s: attribute kernel_shape must have %d values, got %s"
                                  % (op, nd, kernel_shape))
        self.kernel = spatial_attr(op, "kernel_shape", kernel_shape, nd, 1, 1)
        self.strides = spatial_attr(op, "strides", strides, nd, 1, 1)
        self.dilations = spatial_attr(op, "dilations", dilations, nd, 1, 1)
        self.begins, self.ends, self.out = pool_geometry(
            op, X.shape[2:], self.kernel, self.strides, self.dilations, pads,
            auto_pad_mode(op, auto_pad), int(ceil_mode))
        # the padded input must hold every window, ceil-mode ones included
        self.need = [(o - 1) * s + (k - 1) * d + 1
                     for o, s, k, d in zip(self.out, self.strides, self.kernel, self.dilations)]

    def padded(self, X: np.ndarray, value: Any) -> np.ndarray:
        """X padded with `value` to cover every window."""
        extra = [max(0, need - b - n) for need, b, n in zip(self.need, self.begins, X.shape[2:])]
        if not any(self.begins) and not any(extra):
            return X
        shape = X.shape[:2] + tuple(b + n + e for b, n, e in zip(self.begins, X.shape[2:], extra))
        out = np.full(shape, value, dtype=X.dtype)
        out[(Ellipsis,) + tuple(slice(b, b + n) for b, n in zip(self.begins, X.shape[2:]))] = X
        return out

    def reduce(self, xp: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
        """Reduce every window of the padded input with `ufunc` (np.maximum or np.add)."""
        y = xp
        for axis in range(len(self.kernel)):
            k, s, d, o = self.kernel[axis], self.strides[axis], self.dilations[axis], self.out[axis]
            pre = (slice(None),) * (axis + 2)
            taps = [y[pre + (slice(j * d, j * d + (o - 1) * s + 1, s),)] for j in range(k)]
            acc = taps[0].copy()
            for t in taps[1:]:
                ufunc(acc, t, out=acc)
            y = acc
        return y

    def reduce_unpadded(self, X: np.ndarray, ufunc: np.ufunc, fill: Any) -> np.ndarray:
        """`reduce` of X padded with `fill` (the identity of `ufunc` here), without a padded
        copy of X: the outer spatial axes by `_reduce_axis`, the last one by `_reduce_last`.
        Returns a view whose last axis may be strided."""
        y = X
        nd = len(self.kernel)
        for axis in range(nd - 1):
            y = self._reduce_axis(y, axis, ufunc, fill)
        if self.strides[-1] > 1:    # strided taps beat splitting the rows by phase here
            return self._reduce_axis(y, nd - 1, ufunc, fill)
        return self._reduce_last(y, ufunc, fill)

    def _reduce_axis(self, y: np.ndarray, axis: int, ufunc: np.ufunc, fill: Any) -> np.ndarray:
        """Reduce spatial `axis` of y: every kernel tap updates only the outputs whose tap lands
        inside the input, and the taps that land inside for every output start the result."""
        k, s, d, o = self.kernel[axis], self.strides[axis], self.dilations[axis], self.out[axis]
        b, n = self.begins[axis], y.shape[axis + 2]
        pre = (slice(None),) * (axis + 2)
        full, part = [], []
        for j in range(k):
            first = j * d - b                      # input index of output 0's tap j
            lo = max(0, -(first // s))
            hi = min(o, (n - 1 - first) // s + 1) if n - 1 >= first else 0
            if hi <= lo:
                continue
            src = y[pre + (slice(lo * s + first, (hi - 1) * s + first + 1, s),)]
            (full if (lo, hi) == (0, o) else part).append((lo, hi, src))
        if len(full) >= 2:
            acc = ufunc(full[0][2], full[1][2])
            full = full[2:]
        elif full and part:
            # the first partial tap meets the full one in a new array; the few outputs it
            # misses are copied from the full tap
            src, (lo, hi, psrc) = full.pop()[2], part.pop(0)
            acc = np.empty(src.shape, dtype=src.dtype)
            ufunc(src[pre + (slice(lo, hi),)], psrc, out=acc[pre + (slice(lo, hi),)])
            acc[pre + (slice(0, lo),)] = src[pre + (slice(0, lo),)]
            acc[pre + (slice(hi, o),)] = src[pre + (slice(hi, o),)]
        elif full:
            acc = full.pop()[2].copy()
        else:
            acc = np.full(y.shape[:axis + 2] + (o,) + y.shape[axis + 3:], fill, dtype=y.dtype)
        for lo, hi, src in full + part:
            dst = acc[pre + (slice(lo, hi),)]
            ufunc(dst, src, out=dst)
        return acc

    def _reduce_last(self, y: np.ndarray, ufunc: np.ufunc, fill: Any) -> np.ndarray:
        """Reduce the last spatial axis of y. Its rows are padded with `fill` and split by stride
        phase into flat buffers (phase a, row r, column i = padded column i*s + a), so that each
        tap is one contiguous run covering all rows: a row is reduced `q - o` columns too wide
        and the result is the (strided) view of its first `o` columns."""
        k, s, d, o = self.kernel[-1], self.strides[-1], self.dilations[-1], self.out[-1]
        b, n = self.begins[-1], y.shape[-1]
        lead = y.shape[:-1]
        R = int(np.prod(lead))
        q = o + ((k - 1) * d) // s
        rows = np.full((s, (R + 1) * q), fill, dtype=y.dtype)   # a spare row of `fill` at the end
        y2 = y.reshape(R, n)
        for a in range(s):
            i0 = max(0, -((a - b) // s))
            i1 = min(q, -((a - b - n) // s))
            if i1 > i0:
                c0 = i0 * s + a - b
                rows[a, :R * q].reshape(R, q)[:, i0:i1] = y2[:, c0:c0 + (i1 - i0 - 1) * s + 1:s]
        taps = [rows[(j * d) % s, (j * d) // s:(j * d) // s + R * q] for j in range(k)]
        if k == 1:
            acc = taps[0]
        else:
            acc = ufunc(taps[0], taps[1])
            for t in taps[2:]:
                ufunc(acc, t, out=acc)
        return acc.reshape(lead + (q,))[..., :o]

    def counts(self, in_shape: Sequence[int], include_pad: bool) -> np.ndarray:
        """How many window taps fall inside the input (or its explicit pads) per output."""
        total = np.ones((), dtype=np.float64)
        for axis in range(len(self.kernel)):
            k, s, d, o = self.kernel[axis], self.strides[axis], self.dilations[axis], self.out[axis]
            lo, hi = (-self.begins[axis], in_shape[axis] + self.ends[axis]) if include_pad \
                else (0, in_shape[axis])
            pos = np.arange(o)[:, None] * s - self.begins[axis] + np.arange(k)[None, :] * d
            c = ((pos >= lo) & (pos < hi)).sum(axis=1).astype(np.float64)
            total = np.multiply.outer(total, c)
        return total


def _lowest(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    if dtype.kind == "b":
        return False
    return np.finfo(np.float32).min


@register("MaxPool", since=1)
def max_pool(ctx: Any, X: np.ndarray, auto_pad: str = "NOTSET", ceil_mode: int = 0,
             dilations: Optional[List[int]] = None, kernel_shape: Optional[List[int]] = None,
             pads: Optional[List[int]] = None, storage_order: int = 0,
             strides: Optional[List[int]] = None) -> Any:
    """MaxPool: window maxima, and the flat input index of each maximum when Indices is wanted."""
    op = "MaxPool"
    geo = _Pool(op, X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    wants_indices = ctx is not None and ctx.num_outputs > 1 and ctx.outputs_wanted[1]
    if not wants_indices:
        y = np.ascontiguousarray(geo.reduce_unpadded(X, np.maximum, _lowest(X.dtype)))
        return (y, None) if ctx is not None and ctx.num_outputs > 1 else y
    return _max_pool_indices(X, geo.padded(X, _lowest(X.dtype)), geo, int(storage_order))


def _max_pool_indices(X: np.ndarray, xp: np.ndarray, geo: _Pool,
                      storage_order: int) -> Tuple[np.ndarray, np.ndarray]:
    """MaxPool with Indices: a loop over all kernel taps keeping the first maximum."""
    N, C = X.shape[:2]
    sp = X.shape[2:]
    nd = len(sp)
    best = None
    best_tap = np.zeros((N, C) + tuple(geo.out), dtype=np.int64)
    taps_list = list(itertools.product(*[range(k) for k in geo.kernel]))
    for t, taps in enumerate(taps_list):
        sl = xp[(slice(None), slice(None)) + tuple(
            slice(j * d, j * d + (o - 1) * s + 1, s)
            for j, d, o, s in zip(taps, geo.dilations, geo.out, geo.strides))]
        if best is None:
            best = sl.copy()
            continue
        better = sl > best
        np.copyto(best, sl, where=better)
        np.copyto(best_tap, t, where=better)
    taps_arr = np.asarray(taps_list, dtype=np.int64).reshape(-1, nd)
    coords = []
    for axis in range(nd):
        shape = [1] * nd
        shape[axis] = geo.out[axis]
        start = (np.arange(geo.out[axis], dtype=np.int64) * geo.strides[axis]
                 - geo.begins[axis]).reshape(shape)
        coords.append(start + taps_arr[best_tap, axis] * geo.dilations[axis])
    order = range(nd) if storage_order == 0 else reversed(range(nd))
    flat = np.zeros_like(best_tap)
    for axis in order:
        flat = flat * sp[axis] + coords[axis]
    base = (np.arange(N * C, dtype=np.int64) * int(np.prod(sp))).reshape((N, C) + (1,) * nd)
    return best, flat + base


@register("AveragePool", since=1)
def average_pool(X: np.ndarray, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                 count_include_pad: int = 0, dilations: Optional[List[int]] = None,
                 kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
                 strides: Optional[List[int]] = None) -> np.ndarray:
    """AveragePool: window means, counting padding only when count_include_pad is set."""
    op = "AveragePool"
    geo = _Pool(op, X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    dt = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    s = geo.reduce_unpadded(X.astype(dt, copy=False), np.add, 0)
    y = np.divide(s, geo.counts(X.shape[2:], bool(count_include_pad)).astype(dt))
    return y.astype(X.dtype, copy=False)


def _lp_power(x: np.ndarray, p: float) -> np.ndarray:
    if p == 2:
        return x * x
    if p == 1:
        return np.abs(x)
    return np.abs(x) ** x.dtype.type(p)


def _lp_root(s: np.ndarray, p: float) -> np.ndarray:
    if p == 2:
        return np.sqrt(s)
    if p == 1:
        return s
    return s ** s.dtype.type(1.0 / p)


def _check_p(op: str, p: Any) -> float:
    pv = float(p)
    if not pv > 0 or math.isinf(pv):
        raise InvalidArgument("%s: p must be a positive number, got %r" % (op, p))
    return pv


@register("LpPool", since=1)
def lp_pool(X: np.ndarray, auto_pad: str = "NOTSET", ceil_mode: int = 0,
            dilations: Optional[List[int]] = None, kernel_shape: Optional[List[int]] = None,
            p: float = 2, pads: Optional[List[int]] = None,
            strides: Optional[List[int]] = None) -> np.ndarray:
    """LpPool: the p-norm of every window (padding contributes zeros)."""
    op = "LpPool"
    pv = _check_p(op, p)
    geo = _Pool(op, X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    dt = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    s = geo.reduce_unpadded(_lp_power(X.astype(dt, copy=False), pv), np.add, 0)
    return np.ascontiguousarray(_lp_root(s, pv).astype(X.dtype, copy=False))


def _spatial_axes(op: str, X: np.ndarray) -> Tuple[int, ...]:
    if X.ndim < 3:
        raise InvalidArgument("%s: input X must have rank >= 3 (N, C, spatial...), got shape %s"
                              % (op, X.shape))
    return tuple(range(2, X.ndim))


@register("GlobalAveragePool", since=1)
def global_average_pool(X: np.ndarray) -> np.ndarray:
    """GlobalAveragePool: the mean over all spatial axes, kept as size-1 axes."""
    axes = _spatial_axes("GlobalAveragePool", X)
    return X.mean(axis=axes, keepdims=True).astype(X.dtype, copy=False)


@register("GlobalMaxPool", since=1)
def global_max_pool(X: np.ndarray) -> np.ndarray:
    """GlobalMaxPool: the maximum over all spatial axes, kept as size-1 axes."""
    axes = _spatial_axes("GlobalMaxPool", X)
    return X.max(axis=axes, keepdims=True)


@register("GlobalLpPool", since=1)
def global_lp_pool(X: np.ndarray, p: float = 2) -> np.ndarray:
    """GlobalLpPool: the p-norm over all spatial axes, kept as size-1 axes."""
    op = "GlobalLpPool"
    axes = _spatial_axes(op, X)
    pv = _check_p(op, p)
    dt = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    s = _lp_power(X.astype(dt, copy=False), pv).sum(axis=axes, keepdims=True)
    return _lp_root(s, pv).astype(X.dtype, copy=False)


@register("MaxUnpool", since=9)
def max_unpool(X: np.ndarray, I: np.ndarray, output_shape: Optional[np.ndarray] = None,
               kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
               strides: Optional[List[int]] = None) -> np.ndarray:
    """MaxUnpool: scatter X into zeros at the flat positions I (MaxPool's Indices)."""
    op = "MaxUnpool"
    if X.ndim < 3:
        raise InvalidArgument("%s: input X must have rank >= 3, got shape %s" % (op, X.shape))
    if I.shape != X.shape:
        raise InvalidArgument("%s: indices I must have the shape of X %s, got %s"
                              % (op, X.shape, I.shape))
    nd = X.ndim - 2
    if kernel_shape is None or len(kernel_shape) != nd:
        raise InvalidArgument("%s: attribute kernel_shape must have %d values, got %s"
                              % (op, nd, kernel_shape))
    kernel = spatial_attr(op, "kernel_shape", kernel_shape, nd, 1, 1)
    st = spatial_attr(op, "strides", strides, nd, 1, 1)
    begins, ends = pads_attr(op, pads, nd)
    inferred = list(X.shape[:2]) + [(n - 1) * s + k - b - e for n, s, k, b, e
                                    in zip(X.shape[2:], st, kernel, begins, ends)]
    shape = inferred
    if output_shape is not None:
        shape = [int(v) for v in np.asarray(output_shape).reshape(-1)]
        if len(shape) != X.ndim or shape[:2] != list(X.shape[:2]):
            raise InvalidArgument("%s: output_shape %s must have rank %d and start with %s"
                                  % (op, shape, X.ndim, list(X.shape[:2])))
    # indices address the inferred unpooled shape, which sits at the origin of a larger
    # output_shape (as the ONNX reference does); a smaller output_shape is addressed directly
    fits = all(o >= i for o, i in zip(shape, inferred))
    target = inferred if fits else shape
    check_tensor_bytes(op, [max(a, b) for a, b in zip(shape, inferred)], X.dtype)
    size = int(np.prod(target))
    idx = np.asarray(I, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise InvalidArgument("%s: indices must lie in [0, %d) for the unpooled shape %s"
                              % (op, size, target))
    y = np.zeros(size, dtype=X.dtype)
    y[idx] = X.reshape(-1)
    y = y.reshape(target)
    if target is shape:
        return y
    out = np.zeros(shape, dtype=X.dtype)
    out[tuple(slice(0, n) for n in inferred)] = y
    return out


@register("MaxRoiPool", since=1)
def max_roi_pool(X: np.ndarray, rois: np.ndarray, pooled_shape: Optional[List[int]] = None,
                 spatial_scale: float = 1.0) -> np.ndarray:
    """MaxRoiPool: max pooling of each region of interest into a fixed pooled_shape grid."""
    op = "MaxRoiPool"
    if X.ndim != 4:
        raise InvalidArgument("%s: input X must be 4-D (N, C, H, W), got shape %s" % (op, X.shape))
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise InvalidArgument("%s: rois must have shape (num_rois, 5), got %s" % (op, rois.shape))
    if pooled_shape is None or len(pooled_shape) != 2:
        raise InvalidArgument("%s: attribute pooled_shape must have 2 values, got %s"
                              % (op, pooled_shape))
    ph, pw = int(pooled_shape[0]), int(pooled_shape[1])
    N, C, H, W = X.shape
    y = np.zeros((rois.shape[0], C, ph, pw), dtype=X.dtype)
    for r, roi in enumerate(rois.astype(np.float64)):
        n = int(roi[0])
        if not 0 <= n < N:
            raise InvalidArgument("%s: roi %d has batch index %d outside [0, %d)" % (op, r, n, N))
        x1, y1, x2, y2 = [int(math.floor(v * spatial_scale + 0.5)) for v in roi[1:]]
        bh = max(y2 - y1 + 1, 1) / float(ph)
        bw = max(x2 - x1 + 1, 1) / float(pw)
        hs = np.clip(np.floor(np.arange(ph) * bh).astype(np.int64) + y1, 0, H)
        he = np.clip(np.ceil(np.arange(1, ph + 1) * bh).astype(np.int64) + y1, 0, H)
        ws = np.clip(np.floor(np.arange(pw) * bw).astype(np.int64) + x1, 0, W)
        we = np.clip(np.ceil(np.arange(1, pw + 1) * bw).astype(np.int64) + x1, 0, W)
        for i in range(ph):
            for j in range(pw):
                if he[i] > hs[i] and we[j] > ws[j]:
                    y[r, :, i, j] = X[n, :, hs[i]:he[i], ws[j]:we[j]].max(axis=(1, 2))
    return y
