"""Image and detection ops: GridSample, AffineGrid, RoiAlign, NonMaxSuppression, Col2Im,
CenterCropPad.

GridSample follows onnxruntime: sample coordinates outside the image are first moved back by
the padding mode (border: clamped; reflection: mirrored), then interpolated with pixels fetched
under the same padding mode; cubic interpolation uses Keys' kernel with a = -0.75.
"""
from __future__ import annotations

import itertools
from typing import List, Optional, Sequence

import numpy as np

from ..errors import InvalidArgument
from ._util import check_tensor_bytes, int_list, norm_axes
from .registry import register

_MODE_NAMES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
               "nearest": "nearest"}


# ---------------------------------------------------------------- GridSample

def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Mirror coordinates outside [lo, hi] back inside, as often as needed."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    n = np.floor(dx / rng)
    r = dx - n * rng
    even = (n % 2) == 0
    out = np.where(below, np.where(even, lo + r, hi - r), x)
    return np.where(above, np.where(even, hi - r, lo + r), out)


def _cubic_coeffs(t: np.ndarray) -> List[np.ndarray]:
    a = -0.75
    x0, x1, x2, x3 = t + 1, t, 1 - t, 2 - t
    return [((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a,
            ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1,
            ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1,
            ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a]


def grid_sample_nd(op: str, X: np.ndarray, grid: np.ndarray, mode: str, padding_mode: str,
                   align_corners: int) -> np.ndarray:
    """Sample X (N, C, *spatial) at grid (N, *out, nd) holding (x, y, z...) in [-1, 1]."""
    x = np.asarray(X)
    g = np.asarray(grid)
    nd = x.ndim - 2
    if nd < 1 or g.ndim != nd + 2 or g.shape[0] != x.shape[0] or g.shape[-1] != nd:
        raise InvalidArgument("%s: for X of shape %s the grid must have shape (%d, ..., %d) with "
                              "%d spatial dims, got %s" % (op, x.shape, x.shape[0], nd, nd, g.shape))
    kind = _MODE_NAMES.get(mode)
    if kind is None:
        raise InvalidArgument("%s: mode %r is not one of %s" % (op, mode, sorted(_MODE_NAMES)))
    if padding_mode not in ("zeros", "border", "reflection"):
        raise InvalidArgument("%s: padding_mode %r is not zeros, border or reflection"
                              % (op, padding_mode))
    n, c = x.shape[:2]
    dims = x.shape[2:]
    out_sp = g.shape[1:-1]
    if x.size == 0 or g.size == 0:
        return np.zeros((n, c) + out_sp, dtype=x.dtype)
    gw = g.astype(np.float64)
    coords = []
    for d in range(nd):
        size = dims[d]
        v = gw[..., nd - 1 - d]
        v = (v + 1) / 2 * (size - 1) if align_corners else ((v + 1) * size - 1) / 2
        if kind == "nearest":
            v = np.rint(v)
        lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        if padding_mode == "border":
            v = np.clip(v, 0, size - 1)
        elif padding_mode == "reflection":
            v = _reflect(v, lo, hi)
        coords.append(v)
    nidx = np.arange(n).reshape((n,) + (1,) * len(out_sp))
    xw = x.astype(np.float64) if x.dtype != np.float64 else x

    def fetch(idx: List[np.ndarray]) -> np.ndarray:
        valid = np.ones(idx[0].shape, dtype=bool)
        fixed = []
        for d, i in enumerate(idx):
            size = dims[d]
            if padding_mode == "zeros":
                valid &= (i >= 0) & (i < size)
                i = np.clip(i, 0, size - 1)
            elif padding_mode == "border":
                i = np.clip(i, 0, size - 1)
            else:
                lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
                i = np.clip(np.trunc(_reflect(i.astype(np.float64), lo, hi)), 0, size - 1)
            fixed.append(i.astype(np.int64))
        vals = xw[(nidx, slice(None)) + tuple(fixed)]   # (N, *out, C)
        if padding_mode == "zeros":
            vals = vals * valid[..., None]
        return vals

    if kind == "nearest":
        acc = fetch(coords)
    else:
        taps_per_dim = []
        for v in coords:
            base = np.floor(v)
            t = v - base
            if kind == "linear":
                taps_per_dim.append([(base, 1 - t), (base + 1, t)])
            else:
                w = _cubic_coeffs(t)
                taps_per_dim.append([(base + k - 1, w[k]) for k in range(4)])
        acc = np.zeros((n,) + out_sp + (c,), dtype=np.float64)
        for combo in itertools.product(*taps_per_dim):
            weight = combo[0][1]
            for _, w in combo[1:]:
                weight = weight * w
            acc += fetch([i for i, _ in combo]) * weight[..., None]
    return np.moveaxis(acc, -1, 1).astype(x.dtype)


@register("GridSample", since=16, until=19)
def grid_sample_16(X: np.ndarray, grid: np.ndarray, align_corners: int = 0,
                   mode: str = "bilinear", padding_mode: str = "zeros") -> np.ndarray:
    """GridSample-16: 4-D input, modes bilinear / nearest / bicubic."""
    if np.asarray(X).ndim != 4:
        raise InvalidArgument("GridSample: opset 16 takes a 4-D X, got shape %s"
                              % (np.asarray(X).shape,))
    return grid_sample_nd("GridSample", X, grid, mode, padding_mode, int(align_corners))


@register("GridSample", since=20)
def grid_sample_20(X: np.ndarray, grid: np.ndarray, align_corners: int = 0,
                   mode: str = "linear", padding_mode: str = "zeros") -> np.ndarray:
    """GridSample-20/22: N-D input, modes linear / nearest / cubic."""
    return grid_sample_nd("GridSample", X, grid, mode, padding_mode, int(align_corners))


@register("AffineGrid", since=20)
def affine_grid(theta: np.ndarray, size: np.ndarray, align_corners: int = 0) -> np.ndarray:
    """AffineGrid-20: the (N, *spatial, nd) sampling grid of affine matrices theta (N, nd, nd+1)."""
    op = "AffineGrid"
    th = np.asarray(theta)
    sz = int_list(size, op, "size")
    nd = len(sz) - 2
    if nd not in (2, 3) or th.shape != (sz[0], nd, nd + 1):
        raise InvalidArgument("%s: size must have 4 or 5 entries and theta shape (N, nd, nd+1); "
                              "got size %s and theta %s" % (op, sz, th.shape))
    spatial = sz[2:]
    check_tensor_bytes(op, [sz[0]] + list(spatial) + [nd + 1], np.float64)
    axes = []
    for length in spatial:
        if align_corners:
            a = np.linspace(-1.0, 1.0, length) if length > 1 else np.zeros(length)
        else:
            a = (np.arange(length, dtype=np.float64) * 2 + 1) / length - 1
        axes.append(a)
    mesh = np.meshgrid(*axes, indexing="ij")          # per spatial dim (D,) H, W
    base = np.stack([m for m in mesh[::-1]] + [np.ones_like(mesh[0])], axis=-1)  # x, y(, z), 1
    flat = base.reshape(-1, nd + 1)
    out = np.einsum("pk,njk->npj", flat, th.astype(np.float64))
    return out.reshape((sz[0],) + tuple(spatial) + (nd,)).astype(th.dtype)


# ---------------------------------------------------------------- RoiAlign

def _roi_align(op: str, X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, half_pixel: bool,
               mode: str, oh: int, ow: int, sampling_ratio: int, spatial_scale: float) -> np.ndarray:
    x = np.asarray(X)
    r = np.asarray(rois)
    bi = np.asarray(batch_indices).astype(np.int64).reshape(-1)
    if x.ndim != 4 or r.ndim != 2 or r.shape[1] != 4 or bi.shape[0] != r.shape[0]:
        raise InvalidArgument("%s: expected X (N, C, H, W), rois (R, 4) and batch_indices (R,); "
                              "got %s, %s, %s" % (op, x.shape, r.shape, bi.shape))
    if mode not in ("avg", "max"):
        raise InvalidArgument("%s: mode %r is not avg or max" % (op, mode))
    if ((bi < 0) | (bi >= x.shape[0])).any():
        raise InvalidArgument("%s: batch_indices must lie in [0, %d)" % (op, x.shape[0]))
    n, c, h, w = x.shape
    out = np.zeros((r.shape[0], c, oh, ow), dtype=np.float64)
    offset = 0.5 if half_pixel else 0.0
    xw = x.astype(np.float64)
    for k in range(r.shape[0]):
        x1, y1, x2, y2 = [float(v) * spatial_scale - offset for v in r[k]]
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / oh))
        gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / ow))
        count = max(gh * gw, 1)
        ys = y1 + np.arange(oh)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / max(gh, 1)
        xs = x1 + np.arange(ow)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / max(gw, 1)
        yy = ys.reshape(oh, 1, gh, 1) * np.ones((1, ow, 1, gw))
        xx = xs.reshape(1, ow, 1, gw) * np.ones((oh, 1, gh, 1))
        outside = (yy < -1.0) | (yy > h) | (xx < -1.0) | (xx > w)
        yy, xx = np.maximum(yy, 0), np.maximum(xx, 0)
        y0 = np.floor(yy).astype(np.int64)
        x0 = np.floor(xx).astype(np.int64)
        top_y = y0 >= h - 1
        top_x = x0 >= w - 1
        y0 = np.where(top_y, h - 1, y0)
        x0 = np.where(top_x, w - 1, x0)
        y1i = np.where(top_y, h - 1, y0 + 1)
        x1i = np.where(top_x, w - 1, x0 + 1)
        yy = np.where(top_y, y0, yy)
        xx = np.where(top_x, x0, xx)
        ly, lx = yy - y0, xx - x0
        hy, hx = 1 - ly, 1 - lx
        img = xw[bi[k]]                                   # (C, H, W)
        parts = [(hy * hx, y0, x0), (hy * lx, y0, x1i), (ly * hx, y1i, x0), (ly * lx, y1i, x1i)]
        terms = [img[:, yi, xi] * np.where(outside, 0.0, wt)[None] for wt, yi, xi in parts]
        if mode == "avg":
            out[k] = sum(terms).sum(axis=(3, 4)) / count
        else:
            out[k] = np.max(np.maximum(np.maximum(terms[0], terms[1]),
                                       np.maximum(terms[2], terms[3])), axis=(3, 4))
    return out.astype(x.dtype)


@register("RoiAlign", since=10, until=15)
def roi_align_10(X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, mode: str = "avg",
                 output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0,
                 spatial_scale: float = 1.0) -> np.ndarray:
    """RoiAlign-10: pixel corners at integer coordinates (output_half_pixel)."""
    return _roi_align("RoiAlign", X, rois, batch_indices, False, mode, int(output_height),
                      int(output_width), int(sampling_ratio), float(spatial_scale))


@register("RoiAlign", since=16)
def roi_align_16(X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray,
                 coordinate_transformation_mode: str = "half_pixel", mode: str = "avg",
                 output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0,
                 spatial_scale: float = 1.0) -> np.ndarray:
    """RoiAlign-16/22: adds coordinate_transformation_mode (half_pixel or output_half_pixel)."""
    ctm = coordinate_transformation_mode
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise InvalidArgument("RoiAlign: coordinate_transformation_mode %r is not half_pixel or "
                              "output_half_pixel" % (ctm,))
    return _roi_align("RoiAlign", X, rois, batch_indices, ctm == "half_pixel", mode,
                      int(output_height), int(output_width), int(sampling_ratio),
                      float(spatial_scale))


# ---------------------------------------------------------------- NonMaxSuppression

def _scalar(v: Optional[np.ndarray], default: float) -> float:
    if v is None:
        return default
    a = np.asarray(v).reshape(-1)
    return float(a[0]) if a.size else default


@register("NonMaxSuppression", since=10)
def non_max_suppression(boxes: np.ndarray, scores: np.ndarray,
                        max_output_boxes_per_class: Optional[np.ndarray] = None,
                        iou_threshold: Optional[np.ndarray] = None,
                        score_threshold: Optional[np.ndarray] = None,
                        center_point_box: int = 0) -> np.ndarray:
    """NonMaxSuppression-10/11: greedy per batch and class; (k, 3) int64 [batch, class, box]."""
    op = "NonMaxSuppression"
    b = np.asarray(boxes).astype(np.float64)
    s = np.asarray(scores).astype(np.float64)
    if b.ndim != 3 or b.shape[2] != 4 or s.ndim != 3 or s.shape[0] != b.shape[0] \
            or s.shape[2] != b.shape[1]:
        raise InvalidArgument("%s: expected boxes (B, S, 4) and scores (B, C, S); got %s and %s"
                              % (op, b.shape, s.shape))
    limit = int(_scalar(max_output_boxes_per_class, 0))
    iou_t = _scalar(iou_threshold, 0.0)
    score_t = None if score_threshold is None else _scalar(score_threshold, 0.0)
    if not 0.0 <= iou_t <= 1.0:
        raise InvalidArgument("%s: iou_threshold must be in [0, 1], got %g" % (op, iou_t))
    if center_point_box:
        xc, yc, bw, bh = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        y1, x1, y2, x2 = yc - bh / 2, xc - bw / 2, yc + bh / 2, xc + bw / 2
    else:
        y1 = np.minimum(b[..., 0], b[..., 2])
        y2 = np.maximum(b[..., 0], b[..., 2])
        x1 = np.minimum(b[..., 1], b[..., 3])
        x2 = np.maximum(b[..., 1], b[..., 3])
    area = (y2 - y1) * (x2 - x1)
    picked: List[List[int]] = []
    if limit > 0:
        for bt in range(b.shape[0]):
            for cl in range(s.shape[1]):
                sc = s[bt, cl]
                order = np.argsort(-sc, kind="stable")
                if score_t is not None:
                    order = order[sc[order] > score_t]
                chosen: List[int] = []
                for i in order.tolist():
                    if len(chosen) >= limit:
                        break
                    if chosen:
                        j = np.array(chosen)
                        ih = np.minimum(y2[bt, i], y2[bt, j]) - np.maximum(y1[bt, i], y1[bt, j])
                        iw = np.minimum(x2[bt, i], x2[bt, j]) - np.maximum(x1[bt, i], x1[bt, j])
                        inter = np.maximum(ih, 0) * np.maximum(iw, 0)
                        union = area[bt, i] + area[bt, j] - inter
                        ok = (area[bt, i] > 0) & (area[bt, j] > 0) & (union > 0)
                        iou = np.where(ok, inter / np.where(union > 0, union, 1), 0.0)
                        if (iou > iou_t).any():
                            continue
                    chosen.append(i)
                picked.extend([bt, cl, i] for i in chosen)
    return np.array(picked, dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------- Col2Im, CenterCropPad

@register("Col2Im", since=18)
def col2im(input: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray,
           dilations: Optional[List[int]] = None, pads: Optional[List[int]] = None,
           strides: Optional[List[int]] = None) -> np.ndarray:
    """Col2Im-18: sum the sliding blocks (N, C*prod(block), L) back into (N, C, *image_shape)."""
    op = "Col2Im"
    x = np.asarray(input)
    img = int_list(image_shape, op, "image_shape")
    blk = int_list(block_shape, op, "block_shape")
    nd = len(img)
    dl = list(dilations) if dilations else [1] * nd
    st = list(strides) if strides else [1] * nd
    pd = list(pads) if pads else [0] * (2 * nd)
    if len(blk) != nd or len(dl) != nd or len(st) != nd or len(pd) != 2 * nd or x.ndim != 3:
        raise InvalidArgument("%s: image_shape, block_shape, dilations, strides (and half of pads) "
                              "must have the same length and input must be 3-D" % op)
    kprod = int(np.prod(blk))
    if kprod == 0 or x.shape[1] % kprod:
        raise InvalidArgument("%s: input dim 1 (%d) is not a multiple of prod(block_shape) = %d"
                              % (op, x.shape[1], kprod))
    counts = [(img[d] + pd[d] + pd[d + nd] - (dl[d] * (blk[d] - 1) + 1)) // st[d] + 1
              for d in range(nd)]
    if any(v < 1 for v in counts) or int(np.prod(counts)) != x.shape[2]:
        raise InvalidArgument("%s: input dim 2 (%d) must equal the number of blocks %s = %d"
                              % (op, x.shape[2], counts, int(np.prod(counts))))
    n, c = x.shape[0], x.shape[1] // kprod
    check_tensor_bytes(op, [n, c] + [img[d] + pd[d] + pd[d + nd] for d in range(nd)], x.dtype)
    cols = x.reshape((n, c) + tuple(blk) + tuple(counts))
    padded = np.zeros((n, c) + tuple(img[d] + pd[d] + pd[d + nd] for d in range(nd)), dtype=x.dtype)
    for taps in itertools.product(*[range(k) for k in blk]):
        sl = tuple(slice(t * dl[d], t * dl[d] + st[d] * (counts[d] - 1) + 1, st[d])
                   for d, t in enumerate(taps))
        padded[(slice(None), slice(None)) + sl] += cols[(slice(None), slice(None)) + taps]
    crop = tuple(slice(pd[d], pd[d] + img[d]) for d in range(nd))
    return padded[(slice(None), slice(None)) + crop]


@register("CenterCropPad", since=18)
def center_crop_pad(input_data: np.ndarray, shape: np.ndarray,
                    axes: Optional[Sequence[int]] = None) -> np.ndarray:
    """CenterCropPad-18: crop or zero-pad each axis to `shape`, keeping the centre."""
    op = "CenterCropPad"
    x = np.asarray(input_data)
    target = int_list(shape, op, "shape")
    ax = norm_axes(axes if axes is not None else range(x.ndim), x.ndim, op)
    if len(ax) != len(target) or any(t < 0 for t in target):
        raise InvalidArgument("%s: shape %s must give one non-negative size per axis %s"
                              % (op, target, ax))
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    out_shape = list(x.shape)
    for a, t in zip(ax, target):
        size = x.shape[a]
        out_shape[a] = t
        if t <= size:
            start = (size - t) // 2
            src[a] = slice(start, start + t)
        else:
            start = (t - size) // 2
            dst[a] = slice(start, start + size)
    check_tensor_bytes(op, out_shape, x.dtype)
    out = np.zeros(out_shape, dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out
