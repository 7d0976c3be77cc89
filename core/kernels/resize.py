"""Resize (opsets 10-19+) and the deprecated Upsample (opsets 7-9).

Interpolation is separable: each resized axis is done on its own, as a gather of a few source
rows per output row (1 for nearest, 2 for linear, 4 for cubic, more with antialias) and a
weighted sum. Output sizes, coordinate transforms and nearest rounding follow onnxruntime;
interpolation weights follow the ONNX reference (edge-clamped taps unless exclude_outside).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgument
from ._util import check_tensor_bytes, norm_axes
from .registry import register

# the coordinate_transformation_mode and nearest_mode values Resize accepts (providers check
# against the same lists)
CT_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
             "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def source_coords(ct_mode: str, out_len: int, in_len: int, scale: float,
                  roi: Optional[Tuple[float, float]], from_scales: bool = False) -> np.ndarray:
    """Input coordinate of every output index along one axis.

    Like onnxruntime: float64 math with the float32 scale given (or out/in exactly when sizes
    were given), rounded to float32 at the end, which decides nearest-mode ties.
    """
    y = np.arange(out_len, dtype=np.float64)
    s = scale
    if ct_mode in ("half_pixel", "pytorch_half_pixel"):
        x = (y + 0.5) / s - 0.5
        if ct_mode == "pytorch_half_pixel" and out_len <= 1:
            x = np.zeros(out_len)
    elif ct_mode == "half_pixel_symmetric":
        adjustment = out_len / (s * in_len)
        x = in_len / 2.0 * (1 - adjustment) + (y + 0.5) / s - 0.5
    elif ct_mode == "align_corners":
        # with scales, the spec (and the node suite) use the unrounded length in_len * scale;
        # onnxruntime uses out_len (the two agree whenever in_len * scale is whole)
        length = in_len * s if from_scales else out_len
        x = y * (in_len - 1) / (length - 1) if length != 1 else np.zeros(out_len)
    elif ct_mode == "asymmetric":
        x = y / s
    elif ct_mode == "tf_half_pixel_for_nn":
        x = (y + 0.5) / s
    else:
        start, end = (float(np.float32(roi[0])), float(np.float32(roi[1]))) if roi is not None \
            else (0.0, 1.0)
        if out_len > 1:
            x = start * (in_len - 1) + y * (end - start) * (in_len - 1) / (out_len - 1)
        else:
            x = np.full(out_len, 0.5 * (start + end) * (in_len - 1))
    return x.astype(np.float32)


def nearest_index(x: np.ndarray, nearest_mode: str, in_len: int, scale: float) -> np.ndarray:
    """Source index of every output position for mode 'nearest', clamped to the input."""
    x = x.astype(np.float64)
    if nearest_mode == "round_prefer_floor":
        idx = np.ceil(x - 0.5)
    elif nearest_mode == "round_prefer_ceil":
        idx = np.floor(x + 0.5)
    elif nearest_mode == "floor":
        idx = np.floor(x)
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    else:   # "simple": Upsample and Resize-10 (ceil when downsampling, truncate otherwise)
        idx = np.ceil(x) if scale < 1 else np.trunc(x)
    return np.clip(idx, 0, in_len - 1).astype(np.intp)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic kernel value at distance |t|."""
    t = np.abs(t)
    t2, t3 = t * t, t * t * t
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def interpolation_taps(x: np.ndarray, in_len: int, scale: float, mode: str, cubic_a: float,
                       antialias: bool, exclude_outside: bool) -> Tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (out, taps), of linear or cubic interpolation at coordinates x."""
    x = x.astype(np.float64)
    base = np.floor(x)
    ratio = x - base
    s = min(scale, 1.0) if antialias else 1.0
    if mode == "linear":
        start = int(np.floor(-1.0 / s)) + 1
    else:
        start = int(np.floor(-2.0 / s)) + 1
    offsets = np.arange(start, 2 - start, dtype=np.float64)     # tap positions around floor(x)
    dist = (offsets[None, :] - ratio[:, None]) * s
    if mode == "linear":
        w = np.clip(1 - np.abs(dist), 0, 1)
    else:
        w = _cubic(dist, cubic_a)
    idx = base[:, None].astype(np.int64) + offsets.astype(np.int64)[None, :]
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= in_len), 0.0, w)
    total = w.sum(axis=1, keepdims=True)
    w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_len - 1).astype(np.intp), w


def axis_source(p: "ResizeParams", in_len: int, out_len: int, scale: float,
                roi: Optional[Tuple[float, float]]
                ) -> Optional[Tuple[np.ndarray, Optional[np.ndarray]]]:
    """(source coordinate of every output position, mask of those outside the input for
    tf_crop_and_resize or None) along one axis; None when the axis stays as it is."""
    if np.float32(scale) == 1 and out_len == in_len:    # onnxruntime leaves such an axis alone
        return None
    coords = source_coords(p.ct_mode, out_len, in_len, scale, roi, p.from_scales)
    outside = None
    if p.ct_mode == "tf_crop_and_resize":
        outside = (coords < 0) | (coords > in_len - 1)
        if not outside.any():
            outside = None
    if outside is None and out_len == in_len and np.array_equal(coords, np.arange(in_len)):
        return None
    return coords, outside


def axis_taps(p: "ResizeParams", in_len: int, out_len: int, scale: float,
              roi: Optional[Tuple[float, float]]
              ) -> Optional[Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]]:
    """(source indices (out_len, taps), float64 weights (out_len, taps) or None for nearest, mask
    of the outputs outside the input or None) along one axis; None when the axis stays as it is.
    The CPU kernel and the C engine's resampling (onnxedge.oxk_movement) read the same taps."""
    src = axis_source(p, in_len, out_len, scale, roi)
    if src is None:
        return None
    coords, outside = src
    if p.mode == "nearest":
        return nearest_index(coords, p.nearest_mode, in_len, scale)[:, None], None, outside
    idx, w = interpolation_taps(coords, in_len, scale, p.mode, p.cubic_a, p.antialias,
                                p.exclude_outside)
    return idx, w, outside


def _resize_axis(x: np.ndarray, axis: int, out_len: int, scale: float, p: "ResizeParams",
                 roi: Optional[Tuple[float, float]]) -> np.ndarray:
    """x resized along one axis."""
    in_len = x.shape[axis]
    taps = axis_taps(p, in_len, out_len, scale, roi)
    if taps is None:
        return x
    idx, w, outside = taps
    bshape = [1] * x.ndim
    bshape[axis] = out_len
    if w is None:
        y = np.take(x, idx[:, 0], axis=axis)
    else:
        w = w.astype(x.dtype)
        y = None
        for k in range(idx.shape[1]):
            term = np.take(x, idx[:, k], axis=axis)
            term *= w[:, k].reshape(bshape)
            if y is None:
                y = term
            else:
                y += term
    if outside is not None:
        y = np.where(outside.reshape(bshape), np.asarray(p.extrapolation, dtype=y.dtype), y)
    return y


class ResizeParams:
    """Checked Resize attributes (mode, coordinate transformation, nearest rounding, cubic
    coefficient, exclude_outside, extrapolation value, antialias): InvalidArgument naming the
    attribute when one is out of range. Shared by the CPU kernel and the WebGPU planner."""

    def __init__(self, mode: str, ct_mode: str, nearest_mode: str, cubic_a: float,
                 exclude_outside: int, extrapolation: float, antialias: int) -> None:
        self.mode = str(mode)
        self.ct_mode = str(ct_mode)
        self.nearest_mode = str(nearest_mode)
        if self.mode not in ("nearest", "linear", "cubic"):
            raise InvalidArgument("Resize: mode must be nearest, linear or cubic, got %r"
                                  % self.mode)
        if self.ct_mode not in CT_MODES:
            raise InvalidArgument("Resize: coordinate_transformation_mode must be one of %s, "
                                  "got %r" % (", ".join(CT_MODES), self.ct_mode))
        if self.nearest_mode not in NEAREST_MODES:
            raise InvalidArgument("Resize: nearest_mode must be one of %s, got %r"
                                  % (", ".join(NEAREST_MODES[:4]), self.nearest_mode))
        self.cubic_a = float(cubic_a)
        self.exclude_outside = bool(exclude_outside)
        self.extrapolation = float(extrapolation)
        self.antialias = bool(antialias)
        self.from_scales = False


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    if dtype == np.float64 or dtype.kind in "iu" and dtype.itemsize >= 4:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _check_budget(X: np.ndarray, out_shape: Sequence[int], p: "ResizeParams") -> None:
    """RuntimeException before allocating when the output, or the largest intermediate of the
    axis-by-axis resampling, is over the run's per-tensor budget."""
    dtype = X.dtype if p.mode == "nearest" or X.dtype.kind not in "fiu" \
        else _compute_dtype(X.dtype)
    check_tensor_bytes("Resize", out_shape, dtype)
    widest = [max(int(a), int(b)) for a, b in zip(X.shape, out_shape)]
    if widest != [int(n) for n in out_shape]:
        check_tensor_bytes("Resize", widest, dtype, "intermediate result")


def _interpolate(X: np.ndarray, out_shape: Sequence[int], scales: Sequence[float], p: ResizeParams,
                 rois: Sequence[Optional[Tuple[float, float]]]) -> np.ndarray:
    """Resize X to out_shape, axis by axis; `scales` and `rois` are per axis of X."""
    if any(n < 0 for n in out_shape):
        raise InvalidArgument("Resize: output shape %s has a negative size" % (list(out_shape),))
    _check_budget(X, out_shape, p)
    if list(out_shape) == list(X.shape):   # onnxruntime copies the input when no size changes
        return X.copy()
    if p.mode == "nearest":
        y = X
    else:
        if X.dtype.kind not in "fiu":
            raise InvalidArgument("Resize: mode %s needs a numeric input, got dtype %s"
                                  % (p.mode, X.dtype))
        y = X.astype(_compute_dtype(X.dtype), copy=False)
    for axis in range(X.ndim):
        if out_shape[axis] == 0 or X.shape[axis] == 0:
            shape = list(y.shape)
            shape[axis] = out_shape[axis]
            y = np.zeros(shape, dtype=y.dtype)
            continue
        y = _resize_axis(y, axis, int(out_shape[axis]), float(scales[axis]), p, rois[axis])
    if y.dtype != X.dtype:
        if X.dtype.kind in "iu":
            info = np.iinfo(X.dtype)
            y = np.clip(np.rint(y), info.min, info.max)
        y = y.astype(X.dtype)
    elif y is X:
        y = X.copy()
    return y


def _float_list(op: str, what: str, value: Optional[np.ndarray]) -> Optional[List[float]]:
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size == 0:
        return None
    return [float(v) for v in arr.reshape(-1)]


@register("Resize", since=11)
def resize(X: np.ndarray, roi: Optional[np.ndarray] = None, scales: Optional[np.ndarray] = None,
           sizes: Optional[np.ndarray] = None, antialias: int = 0,
           axes: Optional[List[int]] = None,
           coordinate_transformation_mode: str = "half_pixel", cubic_coeff_a: float = -0.75,
           exclude_outside: int = 0, extrapolation_value: float = 0.0,
           keep_aspect_ratio_policy: str = "stretch", mode: str = "nearest",
           nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    """Resize: nearest / linear / cubic resampling to given scales or sizes."""
    p = ResizeParams(mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
                     exclude_outside, extrapolation_value, antialias)
    out_shape, full_scales, rois = resize_geometry(X.shape, p, roi, scales, sizes, axes,
                                                   keep_aspect_ratio_policy)
    return _interpolate(X, out_shape, full_scales, p, rois)


def resize_geometry(shape: Sequence[int], p: ResizeParams, roi: Optional[np.ndarray],
                    scales: Optional[np.ndarray], sizes: Optional[np.ndarray],
                    axes: Optional[List[int]] = None, keep_aspect_ratio_policy: str = "stretch"
                    ) -> Tuple[List[int], List[float], List[Optional[Tuple[float, float]]]]:
    """Resize-11+'s (output shape, scale per axis, roi per axis) for an input of `shape`; sets
    p.from_scales. InvalidArgument naming the input when scales, sizes or roi are malformed."""
    op = "Resize"
    r = len(shape)
    shape = [int(d) for d in shape]
    ax = norm_axes(axes, r, op) if axes is not None and len(axes) else list(range(r))
    sc = _float_list(op, "scales", scales)
    sz = None
    if sizes is not None and np.asarray(sizes).size:
        sz = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if (sc is None) == (sz is None):
        raise InvalidArgument("%s: exactly one of scales and sizes must be given (non-empty)" % op)
    out_shape = list(shape)
    full_scales = [1.0] * r
    if sc is not None:
        p.from_scales = True
        if len(sc) != len(ax):
            raise InvalidArgument("%s: scales must have %d values (one per resized axis), got %d"
                                  % (op, len(ax), len(sc)))
        if any(not s > 0 for s in sc):
            raise InvalidArgument("%s: scales must be positive, got %s" % (op, sc))
        for a, s in zip(ax, sc):
            s32 = np.float32(s)
            full_scales[a] = float(s32)
            out_shape[a] = int(np.floor(s32 * np.float32(shape[a])))
    else:
        if len(sz) != len(ax):
            raise InvalidArgument("%s: sizes must have %d values (one per resized axis), got %d"
                                  % (op, len(ax), len(sz)))
        if any(s < 0 for s in sz):
            raise InvalidArgument("%s: sizes must be non-negative, got %s" % (op, sz))
        policy = str(keep_aspect_ratio_policy)
        if policy == "stretch":
            for a, s in zip(ax, sz):
                out_shape[a] = s
                full_scales[a] = s / shape[a] if shape[a] else 1.0
        elif policy in ("not_larger", "not_smaller"):
            ratios = [np.float32(s) / np.float32(shape[a]) if shape[a] else np.float32(1)
                      for a, s in zip(ax, sz)]
            q = min(ratios) if policy == "not_larger" else max(ratios)
            for a in ax:
                full_scales[a] = float(q)
                out_shape[a] = int(np.floor(q * np.float32(shape[a]) + np.float32(0.5)))
        else:
            raise InvalidArgument("%s: keep_aspect_ratio_policy must be stretch, not_larger or "
                                  "not_smaller, got %r" % (op, policy))
    rois: List[Optional[Tuple[float, float]]] = [None] * r
    if p.ct_mode == "tf_crop_and_resize":
        rv = _float_list(op, "roi", roi)
        if rv is None or len(rv) not in (2 * len(ax), 2 * r):
            raise InvalidArgument("%s: tf_crop_and_resize needs roi with %d values (starts then "
                                  "ends), got %s" % (op, 2 * len(ax), rv))
        if len(rv) == 2 * len(ax):
            for i, a in enumerate(ax):
                rois[a] = (rv[i], rv[len(ax) + i])
        else:
            rois = [(rv[a], rv[r + a]) for a in range(r)]
    return out_shape, full_scales, rois


def _legacy(op: str, X: np.ndarray, scales: Any, mode: str) -> np.ndarray:
    """Resize-10 and Upsample: scales per axis, asymmetric coordinates, onnxruntime's nearest."""
    sc = _float_list(op, "scales", scales)
    if sc is None or len(sc) != X.ndim:
        raise InvalidArgument("%s: scales must have %d values (one per axis), got %s"
                              % (op, X.ndim, sc))
    if any(not s > 0 for s in sc):
        raise InvalidArgument("%s: scales must be positive, got %s" % (op, sc))
    m = str(mode)
    if m == "bilinear":
        m = "linear"
    if m not in ("nearest", "linear"):
        raise InvalidArgument("%s: mode must be nearest or linear, got %r" % (op, m))
    p = ResizeParams(m, "asymmetric", "simple", -0.75, 0, 0.0, 0)
    scales32 = [float(np.float32(s)) for s in sc]
    out_shape = [int(np.floor(np.float32(s) * np.float32(n))) for s, n in zip(sc, X.shape)]
    return _interpolate(X, out_shape, scales32, p, [None] * X.ndim)


@register("Resize", since=10, until=10)
def resize_v10(X: np.ndarray, scales: np.ndarray, mode: str = "nearest") -> np.ndarray:
    """Resize-10: nearest or linear resampling by per-axis scales."""
    return _legacy("Resize", X, scales, mode)


@register("Upsample", since=9, until=9)
def upsample_v9(X: np.ndarray, scales: np.ndarray, mode: str = "nearest") -> np.ndarray:
    """Upsample-9 (deprecated): Resize-10 with the scales as an input."""
    return _legacy("Upsample", X, scales, mode)


@register("Upsample", since=7, until=8)
def upsample_v7(X: np.ndarray, mode: str = "nearest",
                scales: Optional[List[float]] = None) -> np.ndarray:
    """Upsample-7 (deprecated): nearest or linear upsampling by the scales attribute."""
    return _legacy("Upsample", X, scales, mode)
