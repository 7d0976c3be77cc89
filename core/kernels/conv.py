"""Convolutions: Conv, ConvTranspose, ConvInteger, DeformConv and FusedConv.

Conv is im2col through a strided view and one BLAS matmul per group (large column matrices a band
of output rows at a time, so they stay in cache). Fast paths: 3x3 stride-1 convolutions use
Winograd F(4x4) or F(2x2) (weight transforms cached for read-only weights, i.e. initializers),
a 1x1 convolution is a plain matmul over the channels. 2-D depthwise and grouped convolutions and
2-D ConvTranspose work on "phase planes": the padded image split by stride phase and flattened,
so that every kernel tap is one contiguous run (outputs are computed a few columns too wide and
cropped at the end); depthwise sums the taps with in-place multiply-adds a cache-sized chunk at a
time, grouped convolution builds its columns from those runs and multiplies a chunk of groups at
once, ConvTranspose adds each tap's columns into the output's phases. Other ranks keep the
generic loops. float16/bfloat16 are computed in float32 (numpy has no half-precision BLAS) and
cast back; float64 stays float64.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import InvalidArgument
from ..fused_ops import DOMAIN, MS_DOMAIN, apply_activation
from ..geometry import auto_pad_mode, conv_geometry, spatial_attr, transpose_geometry
from ._util import check_tensor_bytes
from .registry import register

# Column matrices above this size are built a band of output rows at a time.
_COLS_BYTES = 2 << 20


def pad_spatial(x: np.ndarray, begins: Sequence[int], ends: Sequence[int],
                value: float = 0) -> np.ndarray:
    """`x` (N, C, *spatial) padded with `value`; `x` itself when every pad is zero."""
    if not any(begins) and not any(ends):
        return x
    shape = x.shape[:2] + tuple(s + b + e for s, b, e in zip(x.shape[2:], begins, ends))
    out = np.full(shape, value, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(b, b + s) for b, s in zip(begins, x.shape[2:]))] = x
    return out


def tap_slices(taps: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
               out: Sequence[int]) -> Tuple[slice, ...]:
    """Spatial slices of a padded input that line kernel tap `taps` up with every output."""
    return tuple(slice(k * d, k * d + (o - 1) * s + 1, s)
                 for k, s, d, o in zip(taps, strides, dilations, out))


def windows(xp: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
            dilations: Sequence[int], out: Sequence[int]) -> np.ndarray:
    """Read-only strided view (N, C, *kernel, *out) of the windows of a padded input."""
    st = xp.strides
    shape = xp.shape[:2] + tuple(kernel) + tuple(out)
    strides_v = st[:2] + tuple(s * d for s, d in zip(st[2:], dilations)) + \
        tuple(s * k for s, k in zip(st[2:], strides))
    return as_strided(xp, shape=shape, strides=strides_v, writeable=False)


def _compute_dtype(*arrays: np.ndarray) -> np.dtype:
    dt = np.result_type(*arrays)
    return dt if dt in (np.float32, np.float64) else np.dtype(np.float32)


def _check_conv_inputs(op: str, X: np.ndarray, W: np.ndarray, B: Optional[np.ndarray], group: int,
                       kernel_shape: Optional[Sequence[int]], transposed: bool) -> None:
    if X.ndim < 3:
        raise InvalidArgument("%s: input X must have rank >= 3 (N, C, spatial...), got shape %s"
                              % (op, X.shape))
    if W.ndim != X.ndim:
        raise InvalidArgument("%s: weight W must have the rank of X (%d), got shape %s"
                              % (op, X.ndim, W.shape))
    if group < 1:
        raise InvalidArgument("%s: group must be >= 1, got %d" % (op, group))
    C = X.shape[1]
    if transposed:
        if W.shape[0] != C or C % group:
            raise InvalidArgument("%s: W.shape[0] (%d) must equal the input channels (%d), a "
                                  "multiple of group (%d)" % (op, W.shape[0], C, group))
        M = W.shape[1] * group
    else:
        if W.shape[1] * group != C:
            raise InvalidArgument("%s: input channels (%d) must equal W.shape[1] (%d) * group (%d)"
                                  % (op, C, W.shape[1], group))
        M = W.shape[0]
        if M % group:
            raise InvalidArgument("%s: output channels W.shape[0] (%d) must be a multiple of "
                                  "group (%d)" % (op, M, group))
    if kernel_shape is not None and len(kernel_shape) and \
            [int(k) for k in kernel_shape] != list(W.shape[2:]):
        raise InvalidArgument("%s: kernel_shape %s does not match the weight's spatial shape %s"
                              % (op, list(kernel_shape), list(W.shape[2:])))
    if B is not None and (B.ndim != 1 or B.shape[0] != M):
        raise InvalidArgument("%s: bias B must have shape (%d,), got %s" % (op, M, B.shape))


def conv_core(X: np.ndarray, W: np.ndarray, group: int, strides: List[int],
               dilations: List[int], begins: List[int], ends: List[int],
               out: List[int], bias: Optional[np.ndarray] = None) -> np.ndarray:
    """Convolution of X (N, C, *S) with W (M, C/group, *K), plus an optional bias (M,), in X's
    dtype; returns (N, M, *out)."""
    N, C = X.shape[:2]
    M = W.shape[0]
    kernel = list(W.shape[2:])
    L = int(np.prod(out))
    Cg, Mg = C // group, M // group
    nd = len(kernel)

    if all(k == 1 for k in kernel) and not any(begins) and not any(ends):
        xs = X[(Ellipsis,) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides))]
        cols = xs.reshape(N, C, L)
        w2 = W.reshape(M, Cg)
        if group == 1:
            y = np.matmul(w2, cols)
        else:
            y = np.empty((N, M, L), dtype=X.dtype)
            for g in range(group):
                y[:, g * Mg:(g + 1) * Mg] = np.matmul(w2[g * Mg:(g + 1) * Mg],
                                                      cols[:, g * Cg:(g + 1) * Cg])
        if bias is not None:
            y += bias.reshape(1, M, 1)
        return y.reshape((N, M) + tuple(out))

    if group == 1:
        m = _winograd_tile(X, W, strides, dilations, out)
        if m:
            return _winograd(X, W, m, begins, ends, out, bias)
    if group > 1 and nd == 2:
        if Cg == 1:
            return _depthwise2d(X, W, group, strides, dilations, begins, out, bias)
        # strided: splitting the input by phase costs more than the contiguous columns save
        if strides == [1, 1] and Cg * int(np.prod(kernel)) * out[0] * (out[1] + kernel[1]) \
                * X.dtype.itemsize <= 2 * _COLS_BYTES:
            return _grouped2d(X, W, group, strides, dilations, begins, out, bias)
    xp = pad_spatial(X, begins, ends)
    if group > 1 and Cg == 1:
        return _depthwise(xp, W, group, strides, dilations, out, bias)

    y = np.empty((N, M, L), dtype=X.dtype)
    view = windows(xp, kernel, strides, dilations, out)
    K = Cg * int(np.prod(kernel))
    row = L // out[0]
    # large column matrices are built and multiplied a band of output rows at a time, so that
    # each band stays in cache between the copy and the matmul
    rows = max(1, _COLS_BYTES // (K * row * X.dtype.itemsize))
    for g in range(group):
        wg = W[g * Mg:(g + 1) * Mg].reshape(Mg, K)
        vg = view[:, g * Cg:(g + 1) * Cg]
        if rows >= out[0] and N * K * L * X.dtype.itemsize <= 4 * _COLS_BYTES:
            if group == 1:
                np.matmul(wg, vg.reshape(N, K, L), out=y)
            else:
                y[:, g * Mg:(g + 1) * Mg] = np.matmul(wg, vg.reshape(N, K, L))
            if bias is not None:
                y[:, g * Mg:(g + 1) * Mg] += bias[g * Mg:(g + 1) * Mg].reshape(1, Mg, 1)
            continue
        yv = y.reshape(N, M, out[0], row)
        for n in range(N):
            for r0 in range(0, out[0], rows):
                r1 = min(out[0], r0 + rows)
                cols = vg[n][(slice(None),) * (1 + nd) + (slice(r0, r1),)].reshape(K, -1)
                band = np.matmul(wg, cols)
                if bias is not None:
                    band += bias[g * Mg:(g + 1) * Mg].reshape(Mg, 1)
                yv[n, g * Mg:(g + 1) * Mg, r0:r1] = band.reshape(Mg, r1 - r0, row)
    return y.reshape((N, M) + tuple(out))


# Winograd F(m x m, 3 x 3) for 3x3 stride-1 convolutions (Lavin & Gray, 2015): each m x m output
# tile costs (m+2)^2 multiplies instead of 9 m^2, so the matmul shrinks 2.25x (m=2) or 4x (m=4).
_WINO = {
    2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    4: ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
}
_WINO_MIN_TILES = 36       # fewer tiles than this and the transforms cost more than they save
_WCACHE: Dict[int, Tuple[Any, int, np.ndarray]] = {}
_WCACHE_BYTES = [0]
_WCACHE_LIMIT = 1 << 28     # bytes of transformed weights kept for read-only (initializer) weights
_WCACHE_LOCK = threading.RLock()   # re-entrant: a weakref callback may run under it


def _winograd_tile(X: np.ndarray, W: np.ndarray, strides: List[int], dilations: List[int],
                   out: List[int]) -> int:
    """The Winograd output tile size (4 or 2) worth using for this convolution, or 0 for none."""
    if W.shape[2:] != (3, 3) or X.dtype != np.float32 or strides != [1, 1] or dilations != [1, 1]:
        return 0
    if X.shape[1] < 8 or W.shape[0] < 8:
        return 0
    tiles = [X.shape[0] * (-(-out[0] // m)) * (-(-out[1] // m)) for m in (4, 2)]
    if tiles[0] >= _WINO_MIN_TILES:
        return 4
    # with the weight transform cached (read-only weights), F(2x2) pays off down to 7x7 images
    if tiles[1] >= (16 if not W.flags.writeable else _WINO_MIN_TILES):
        return 2
    return 0


def _forget(key: int) -> None:
    """Drop a cached weight transform once its weight array is gone."""
    with _WCACHE_LOCK:
        hit = _WCACHE.pop(key, None)
        if hit is not None:
            _WCACHE_BYTES[0] -= hit[2].nbytes


def _winograd_weights(W: np.ndarray, m: int) -> np.ndarray:
    """G W G^T for every (out, in) channel pair as ((m+2)^2, M, C); cached for read-only weights."""
    key = id(W)
    hit = _WCACHE.get(key)
    if hit is not None and hit[0]() is W and hit[1] == m:
        return hit[2]
    M, C = W.shape[:2]
    g = np.asarray(_WINO[m][1], dtype=W.dtype)
    u = np.matmul(np.kron(g, g), W.reshape(M * C, 9).T).reshape(-1, M, C)
    if not W.flags.writeable and u.nbytes < _WCACHE_LIMIT // 4:
        with _WCACHE_LOCK:
            if _WCACHE_BYTES[0] + u.nbytes > _WCACHE_LIMIT:
                _WCACHE.clear()
                _WCACHE_BYTES[0] = 0
            _WCACHE[key] = (weakref.ref(W, lambda _, k=key: _forget(k)), m, u)
            _WCACHE_BYTES[0] += u.nbytes
    return u


def _winograd(X: np.ndarray, W: np.ndarray, m: int, begins: List[int], ends: List[int],
              out: List[int], bias: Optional[np.ndarray] = None) -> np.ndarray:
    """3x3 stride-1 convolution through Winograd F(m x m, 3 x 3); returns (N, M, *out)."""
    N, C = X.shape[:2]
    M = W.shape[0]
    t = m + 2
    bt = np.asarray(_WINO[m][0], dtype=X.dtype)
    at = np.asarray(_WINO[m][2], dtype=X.dtype)
    th, tw = -(-out[0] // m), -(-out[1] // m)
    # pad so that every tile, including the partial last ones, lies inside the array
    xp = pad_spatial(X, begins, [m * th + 2 - X.shape[2] - begins[0],
                                 m * tw + 2 - X.shape[3] - begins[1]])
    s = xp.strides
    tiles = as_strided(xp, (t, t, C, N, th, tw), (s[2], s[3], s[1], s[0], m * s[2], m * s[3]))
    P = N * th * tw
    d = np.matmul(bt, tiles.reshape(t, -1)).reshape(t, t, C * P)
    v = np.matmul(bt, d).reshape(t * t, C, P)
    prod = np.matmul(_winograd_weights(W, m), v)
    y = np.matmul(at, np.matmul(at, prod.reshape(t, -1)).reshape(m, t, M * P))
    if bias is not None:
        y.reshape(m * m, M, P)[...] += bias.reshape(1, M, 1)
    full = np.empty((N, M, m * th, m * tw), dtype=X.dtype)
    tiles_out = y.reshape(m, m, M, N, th, tw).transpose(3, 2, 4, 0, 5, 1)
    full.reshape(N, M, th, m, tw, m)[...] = tiles_out
    if m * th != out[0] or m * tw != out[1]:
        return np.ascontiguousarray(full[:, :, :out[0], :out[1]])
    return full


def _depthwise(xp: np.ndarray, W: np.ndarray, group: int, strides: List[int],
               dilations: List[int], out: List[int],
               bias: Optional[np.ndarray] = None) -> np.ndarray:
    """Depthwise convolution (one input channel per group) as broadcast multiply-adds per tap."""
    N, C = xp.shape[:2]
    mult = W.shape[0] // group
    kernel = W.shape[2:]
    nd = len(kernel)
    wr = W.reshape((C, mult) + tuple(kernel))
    y = np.zeros((N, C, mult) + tuple(out), dtype=xp.dtype)
    if bias is not None:
        y += bias.reshape((1, C, mult) + (1,) * nd)
    tmp = np.empty_like(y)
    expand = (slice(None), slice(None), None) + (Ellipsis,)
    for taps in itertools.product(*[range(k) for k in kernel]):
        sl = xp[(slice(None), slice(None)) + tap_slices(taps, strides, dilations, out)]
        wt = wr[(slice(None), slice(None)) + taps].reshape((1, C, mult) + (1,) * nd)
        np.multiply(sl[expand], wt, out=tmp)
        y += tmp
    return y.reshape((N, C * mult) + tuple(out))


# Depthwise 2-D: every kernel tap is one contiguous run of a flattened "phase plane".
_DW_CHUNK = 1 << 18   # bytes of output accumulated at a time: it and its temporary stay in L2


def phase_planes(X: np.ndarray, begins: Sequence[int], strides: Sequence[int],
                 shape: Sequence[int], planes_last: bool, fill: float = 0) -> np.ndarray:
    """X (N, C, H, W) zero-padded and split by stride phase: (sh, sw, N*C, Hq*Wq), or
    (sh, sw, Hq*Wq, N*C) when `planes_last`, where phase (a, b) row i, column j holds the padded
    input at (i*sh + a, j*sw + b) and `shape` is (Hq, Wq)."""
    N, C, H, Wd = X.shape
    P = N * C
    sh, sw = strides
    Hq, Wq = shape
    S = Hq * Wq
    ph = np.full((sh, sw) + ((S, P) if planes_last else (P, S)), fill, dtype=X.dtype)
    x3 = X.reshape(P, H, Wd)
    for a in range(sh):
        i0 = max(0, -(-(begins[0] - a) // sh))
        i1 = min(Hq, -(-(H + begins[0] - a) // sh))
        for b in range(sw):
            j0 = max(0, -(-(begins[1] - b) // sw))
            j1 = min(Wq, -(-(Wd + begins[1] - b) // sw))
            if i1 <= i0 or j1 <= j0:
                continue
            r0, c0 = i0 * sh + a - begins[0], j0 * sw + b - begins[1]
            src = x3[:, r0:r0 + (i1 - i0 - 1) * sh + 1:sh, c0:c0 + (j1 - j0 - 1) * sw + 1:sw]
            if planes_last:
                ph[a, b].reshape(Hq, Wq, P)[i0:i1, j0:j1] = src.transpose(1, 2, 0)
            else:
                ph[a, b].reshape(P, Hq, Wq)[:, i0:i1, j0:j1] = src
    return ph


def _depthwise2d(X: np.ndarray, W: np.ndarray, group: int, strides: List[int],
                 dilations: List[int], begins: List[int], out: List[int],
                 bias: Optional[np.ndarray] = None) -> np.ndarray:
    """2-D depthwise convolution (one input channel per group, any channel multiplier).

    The padded input is split by stride phase and flattened, so that kernel tap (ki, kj) reads
    one contiguous run of a phase plane for all outputs at once (an output row is computed
    `Wq - ow` columns too wide, and those columns are dropped at the end). The taps are summed
    with in-place multiply-adds, a chunk of planes (or of positions) at a time so that the
    accumulator stays in cache."""
    N, C = X.shape[:2]
    mult = W.shape[0] // group
    kh, kw = W.shape[2:]
    (sh, sw), (dh, dw), (oh, ow) = strides, dilations, out
    Wq = ow + (dw * (kw - 1)) // sw
    Hq = oh + (dh * (kh - 1)) // sh + (1 if Wq > ow else 0)
    P, L = N * C, oh * Wq
    # the longer of (planes, positions) is the innermost axis: numpy's inner loops stay long
    last = L < P
    ph = phase_planes(X, begins, strides, (Hq, Wq), last)
    wt = np.broadcast_to(W.reshape(1, C, mult, kh * kw), (N, C, mult, kh * kw))
    wt = wt.reshape(P, mult, kh * kw)
    if last:
        wt = np.ascontiguousarray(wt.transpose(2, 0, 1))        # (taps, P, mult)
    taps = [((dh * i) % sh, (dw * j) % sw, ((dh * i) // sh) * Wq + (dw * j) // sw, i * kw + j)
            for i in range(kh) for j in range(kw)]
    y = np.empty((L, P, mult) if last else (P, mult, L), dtype=X.dtype)
    outer = L if last else P
    step = max(1, _DW_CHUNK // (X.dtype.itemsize * y.size // outer))
    tmp = np.empty((min(step, outer),) + y.shape[1:], dtype=X.dtype)
    for c0 in range(0, outer, step):
        c1 = min(outer, c0 + step)
        yc, tc = y[c0:c1], tmp[:c1 - c0]
        for n, (a, b, off, q) in enumerate(taps):
            if last:
                src = ph[a, b, off + c0:off + c1, :, None]
                w = wt[q]
            else:
                src = ph[a, b, c0:c1, None, off:off + L]
                w = wt[c0:c1, :, q:q + 1]
            if n == 0:
                np.multiply(src, w, out=yc)
            else:
                np.multiply(src, w, out=tc)
                yc += tc
    M = C * mult
    if last:
        yv = y.reshape(oh, Wq, N, M)[:, :ow].transpose(2, 3, 0, 1)
    else:
        yv = y.reshape(N, M, oh, Wq)[..., :ow]
    res = np.empty((N, M, oh, ow), dtype=X.dtype)
    if bias is not None:
        np.add(yv, bias.reshape(1, M, 1, 1), out=res)
    else:
        np.copyto(res, yv)
    return res


def _grouped2d(X: np.ndarray, W: np.ndarray, group: int, strides: List[int],
               dilations: List[int], begins: List[int], out: List[int],
               bias: Optional[np.ndarray] = None) -> np.ndarray:
    """2-D grouped convolution: im2col from flattened phase planes (every kernel tap is one
    contiguous run, see `_depthwise2d`) and one batched matmul per chunk of groups whose
    column matrices fit in cache."""
    N, C = X.shape[:2]
    M = W.shape[0]
    kh, kw = W.shape[2:]
    (sh, sw), (dh, dw), (oh, ow) = strides, dilations, out
    Cg, Mg, T = C // group, M // group, kh * kw
    Wq = ow + (dw * (kw - 1)) // sw
    Hq = oh + (dh * (kh - 1)) // sh + (1 if Wq > ow else 0)
    S, L, K = Hq * Wq, oh * Wq, Cg * kh * kw
    ph = phase_planes(X, begins, strides, (Hq, Wq), False).reshape(sh, sw, N, C, S)
    taps = [((dh * i) % sh, (dw * j) % sw, ((dh * i) // sh) * Wq + (dw * j) // sw, i * kw + j)
            for i in range(kh) for j in range(kw)]
    gc = max(1, min(group, _COLS_BYTES // (K * L * X.dtype.itemsize)))
    cols = np.empty((gc * Cg, T, L), dtype=X.dtype)
    wg = W.reshape(group, Mg, K)
    y = np.empty((N, M, L), dtype=X.dtype)
    for n in range(N):
        if sh == sw == 1:   # one phase: all taps of a channel are one overlapping strided view
            plane = ph[0, 0, n]
            st = plane.strides
            view = as_strided(plane, shape=(C, kh, kw, L),
                              strides=(st[0], dh * Wq * st[1], dw * st[1], st[1]),
                              writeable=False)
        for g0 in range(0, group, gc):
            g1 = min(group, g0 + gc)
            c0, c1 = g0 * Cg, g1 * Cg
            cv = cols[:c1 - c0]
            if sh == sw == 1:
                np.copyto(cv.reshape(c1 - c0, kh, kw, L), view[c0:c1])
            else:
                for a, b, off, q in taps:
                    np.copyto(cv[:, q], ph[a, b, n, c0:c1, off:off + L])
            np.matmul(wg[g0:g1], cv.reshape(g1 - g0, K, L),
                      out=y[n, g0 * Mg:g1 * Mg].reshape(g1 - g0, Mg, L))
    yv = y.reshape(N, M, oh, Wq)[..., :ow]
    res = np.empty((N, M, oh, ow), dtype=X.dtype)
    if bias is not None:
        np.add(yv, bias.reshape(1, M, 1, 1), out=res)
    else:
        np.copyto(res, yv)
    return res


def conv_setup(op: str, x: np.ndarray, w: np.ndarray, b: Optional[np.ndarray], group: int,
               kernel_shape: Optional[List[int]], strides: Optional[List[int]],
               dilations: Optional[List[int]], pads: Optional[List[int]], auto_pad: str) -> tuple:
    """Check a forward convolution's inputs and resolve its geometry.

    Returns (strides, dilations, pads at the start, pads at the end, output spatial shape).
    """
    _check_conv_inputs(op, x, w, b, group, kernel_shape, transposed=False)
    nd = x.ndim - 2
    st = spatial_attr(op, "strides", strides, nd, 1, 1)
    dl = spatial_attr(op, "dilations", dilations, nd, 1, 1)
    begins, ends, out = conv_geometry(op, x.shape[2:], w.shape[2:], st, dl, pads,
                                      auto_pad_mode(op, auto_pad))
    return st, dl, begins, ends, out


@register("Conv", since=1)
def conv(X: np.ndarray, W: np.ndarray, B: Optional[np.ndarray] = None, auto_pad: str = "NOTSET",
         dilations: Optional[List[int]] = None, group: int = 1,
         kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
         strides: Optional[List[int]] = None) -> np.ndarray:
    """Conv: N-D convolution with groups, dilations, strides, explicit or automatic padding."""
    op = "Conv"
    group = int(group)
    st, dl, begins, ends, out = conv_setup(op, X, W, B, group, kernel_shape, strides, dilations,
                                           pads, auto_pad)
    dt = _compute_dtype(X, W)
    bias = None if B is None else B.astype(dt, copy=False)
    y = conv_core(X.astype(dt, copy=False), W.astype(dt, copy=False), group, st, dl,
                   begins, ends, out, bias)
    return y.astype(X.dtype, copy=False)


def _zero_point(op: str, zp: Optional[np.ndarray], name: str, channels: int,
                per_channel_ok: bool) -> np.ndarray:
    if zp is None:
        return np.zeros((), dtype=np.float64)
    z = np.asarray(zp)
    if z.size == 1:
        return z.reshape(()).astype(np.float64)
    if per_channel_ok and z.ndim == 1 and z.shape[0] == channels:
        return z.astype(np.float64)
    raise InvalidArgument("%s: %s must be a scalar%s, got shape %s"
                          % (op, name, " or have shape (%d,)" % channels if per_channel_ok else "",
                             z.shape))


@register("ConvInteger", since=10)
def conv_integer(x: np.ndarray, w: np.ndarray, x_zero_point: Optional[np.ndarray] = None,
                 w_zero_point: Optional[np.ndarray] = None, auto_pad: str = "NOTSET",
                 dilations: Optional[List[int]] = None, group: int = 1,
                 kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
                 strides: Optional[List[int]] = None) -> np.ndarray:
    """ConvInteger: integer convolution of (x - x_zero_point) and (w - w_zero_point) into int32."""
    op = "ConvInteger"
    group = int(group)
    st, dl, begins, ends, out = conv_setup(op, x, w, None, group, kernel_shape, strides, dilations,
                                           pads, auto_pad)
    xz = _zero_point(op, x_zero_point, "x_zero_point", x.shape[1], False)
    wz = _zero_point(op, w_zero_point, "w_zero_point", w.shape[0], True)
    xf = x.astype(np.float64) - xz
    wf = w.astype(np.float64) - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.ndim else wz)
    # float64 sums of 8-bit products are exact far beyond any realistic kernel size.
    y = conv_core(xf, wf, group, st, dl, begins, ends, out)
    return np.rint(y).astype(np.int32)


def _conv_transpose2d(x: np.ndarray, w: np.ndarray, group: int, strides: List[int],
                      dilations: List[int], begins: List[int], out: List[int],
                      bias: Optional[np.ndarray] = None) -> np.ndarray:
    """2-D transposed convolution: one matmul to columns per group, then col2im into the
    stride phases of the output (phase (a, b) holds the uncropped output at (t*sh + a, u*sw + b)),
    where every kernel tap adds one contiguous run: the input is widened with zero columns to
    the phase width so that a tap's columns line up with a flat phase plane. The phases are
    interleaved into the cropped output at the end, with the bias."""
    N, C, ih, iw = x.shape
    Mg = w.shape[1]
    M = Mg * group
    Cg = C // group
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw), (oh, ow) = strides, dilations, out
    Hq = ih + (dh * (kh - 1)) // sh
    Wq = iw + (dw * (kw - 1)) // sw
    L = ih * Wq
    if Wq > iw:
        xw = np.zeros((N, C, ih, Wq), dtype=x.dtype)
        xw[..., :iw] = x
    else:
        xw = x
    xg = xw.reshape(N, group, Cg, L)
    wg = w.reshape(group, Cg, Mg * kh * kw)
    planes = np.zeros((sh, sw, N, M, (Hq + 1) * Wq), dtype=x.dtype)   # a spare row for overruns
    for g in range(group):
        cols = np.matmul(wg[g].T, xg[:, g]).reshape(N, Mg, kh * kw, L)
        for i in range(kh):
            for j in range(kw):
                off = ((dh * i) // sh) * Wq + (dw * j) // sw
                dst = planes[(dh * i) % sh, (dw * j) % sw, :, g * Mg:(g + 1) * Mg, off:off + L]
                dst += cols[:, :, i * kw + j]
    y = np.empty((N, M, oh, ow), dtype=x.dtype)
    b4 = None if bias is None else bias.reshape(1, M, 1, 1)
    if begins[0] < 0 or begins[1] < 0 or begins[0] + oh > Hq * sh or begins[1] + ow > Wq * sw:
        y[...] = 0 if b4 is None else b4       # outputs that no phase plane covers
    for a in range(sh):
        t0 = max(0, -((a - begins[0]) // sh))
        t1 = min(Hq, -((a - begins[0] - oh) // sh))
        for b in range(sw):
            u0 = max(0, -((b - begins[1]) // sw))
            u1 = min(Wq, -((b - begins[1] - ow) // sw))
            if t1 <= t0 or u1 <= u0:
                continue
            o0, p0 = t0 * sh + a - begins[0], u0 * sw + b - begins[1]
            src = planes[a, b, :, :, :Hq * Wq].reshape(N, M, Hq, Wq)[:, :, t0:t1, u0:u1]
            dst = y[:, :, o0:o0 + (t1 - t0 - 1) * sh + 1:sh, p0:p0 + (u1 - u0 - 1) * sw + 1:sw]
            if b4 is None:
                np.copyto(dst, src)
            else:
                np.add(src, b4, out=dst)
    return y


@register("ConvTranspose", since=1)
def conv_transpose(X: np.ndarray, W: np.ndarray, B: Optional[np.ndarray] = None,
                   auto_pad: str = "NOTSET", dilations: Optional[List[int]] = None, group: int = 1,
                   kernel_shape: Optional[List[int]] = None,
                   output_padding: Optional[List[int]] = None,
                   output_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
                   strides: Optional[List[int]] = None) -> np.ndarray:
    """ConvTranspose: the gradient of Conv; matmul to columns, then a strided add per kernel tap."""
    op = "ConvTranspose"
    group = int(group)
    _check_conv_inputs(op, X, W, B, group, kernel_shape, transposed=True)
    nd = X.ndim - 2
    st = spatial_attr(op, "strides", strides, nd, 1, 1)
    dl = spatial_attr(op, "dilations", dilations, nd, 1, 1)
    op_pad = spatial_attr(op, "output_padding", output_padding, nd, 0, 0)
    kernel = list(W.shape[2:])
    begins, out = transpose_geometry(op, X.shape[2:], kernel, st, dl, pads,
                                     auto_pad_mode(op, auto_pad), op_pad, output_shape)
    dt = _compute_dtype(X, W)
    check_tensor_bytes(op, [X.shape[0], W.shape[1] * group] + list(out), dt)
    x, w = X.astype(dt, copy=False), W.astype(dt, copy=False)
    if nd == 2:
        bias = None if B is None else B.astype(dt, copy=False)
        return _conv_transpose2d(x, w, group, st, dl, begins, out, bias).astype(X.dtype,
                                                                                copy=False)
    N, C = x.shape[:2]
    Cg = C // group
    Mg = w.shape[1]
    in_sp = list(x.shape[2:])
    L = int(np.prod(in_sp))
    # the buffer spans full output coordinates [lo, hi); the result is [begins, begins + out)
    lo = [min(0, b) for b in begins]
    hi = [max((i - 1) * s + (k - 1) * d + 1, b + o)
          for i, s, k, d, b, o in zip(in_sp, st, kernel, dl, begins, out)]
    buf = np.zeros((N, group, Mg) + tuple(h - l for h, l in zip(hi, lo)), dtype=dt)
    xg = x.reshape(N, group, Cg, L)
    wg = w.reshape((group, Cg, Mg * int(np.prod(kernel))))
    for g in range(group):
        cols = np.matmul(wg[g].T, xg[:, g]).reshape((N, Mg) + tuple(kernel) + tuple(in_sp))
        for taps in itertools.product(*[range(k) for k in kernel]):
            dst = tuple(slice(k * d - l, k * d - l + (i - 1) * s + 1, s)
                        for k, d, l, i, s in zip(taps, dl, lo, in_sp, st))
            buf[(slice(None), g, slice(None)) + dst] += cols[(slice(None), slice(None)) + taps]
    crop = tuple(slice(b - l, b - l + o) for b, l, o in zip(begins, lo, out))
    y = buf.reshape((N, group * Mg) + buf.shape[3:])[(slice(None), slice(None)) + crop]
    if B is not None:
        y = y + B.astype(dt, copy=False).reshape((1, -1) + (1,) * nd)
    return np.ascontiguousarray(y).astype(X.dtype, copy=False)


def _bilinear_columns(X: np.ndarray, py: np.ndarray, px: np.ndarray) -> np.ndarray:
    """Bilinear samples of X (N, G, Cg, H, W) at float positions py/px (N, G, K, L), zero
    outside the image; returns (N, G, Cg, K, L)."""
    N, G, Cg, H, Wd = X.shape
    flat = X.reshape(N, G, Cg, H * Wd)
    y0, x0 = np.floor(py), np.floor(px)
    ly, lx = py - y0, px - x0
    out = None
    for dy, dx, w in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx),
                      (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yy, xx = y0 + dy, x0 + dx
        w = np.where((yy >= 0) & (yy < H) & (xx >= 0) & (xx < Wd), w, 0).astype(X.dtype)
        idx = (np.clip(yy, 0, H - 1) * Wd + np.clip(xx, 0, Wd - 1)).astype(np.intp)
        vals = np.take_along_axis(flat, idx.reshape(N, G, 1, -1), axis=3)
        vals = vals.reshape((N, G, Cg) + py.shape[2:]) * w[:, :, None]
        out = vals if out is None else out + vals
    return out


@register("DeformConv", since=19)
def deform_conv(X: np.ndarray, W: np.ndarray, offset: np.ndarray, B: Optional[np.ndarray] = None,
                mask: Optional[np.ndarray] = None, dilations: Optional[List[int]] = None,
                group: int = 1, kernel_shape: Optional[List[int]] = None, offset_group: int = 1,
                pads: Optional[List[int]] = None,
                strides: Optional[List[int]] = None) -> np.ndarray:
    """DeformConv (2-D): each kernel tap samples the input bilinearly at a learned offset."""
    op = "DeformConv"
    group, og = int(group), int(offset_group)
    _check_conv_inputs(op, X, W, B, group, kernel_shape, transposed=False)
    if X.ndim != 4:
        raise InvalidArgument("%s: only 2-D inputs (N, C, H, W) are supported, got shape %s"
                              % (op, X.shape))
    N, C, H, Wd = X.shape
    M = W.shape[0]
    kh, kw = W.shape[2:]
    st = spatial_attr(op, "strides", strides, 2, 1, 1)
    dl = spatial_attr(op, "dilations", dilations, 2, 1, 1)
    begins, _, out = conv_geometry(op, X.shape[2:], W.shape[2:], st, dl, pads, "NOTSET")
    oh, ow = out
    if og < 1 or C % og:
        raise InvalidArgument("%s: offset_group (%d) must divide the input channels (%d)"
                              % (op, og, C))
    if offset.shape != (N, og * 2 * kh * kw, oh, ow):
        raise InvalidArgument("%s: offset must have shape %s, got %s"
                              % (op, (N, og * 2 * kh * kw, oh, ow), offset.shape))
    if mask is not None and mask.shape != (N, og * kh * kw, oh, ow):
        raise InvalidArgument("%s: mask must have shape %s, got %s"
                              % (op, (N, og * kh * kw, oh, ow), mask.shape))
    dt = _compute_dtype(X, W)
    K, L = kh * kw, oh * ow
    off = offset.astype(dt).reshape(N, og, kh, kw, 2, oh, ow)
    base_h = (np.arange(kh) * dl[0]).reshape(kh, 1, 1, 1) + \
        (np.arange(oh) * st[0] - begins[0]).reshape(1, 1, oh, 1)
    base_w = (np.arange(kw) * dl[1]).reshape(1, kw, 1, 1) + \
        (np.arange(ow) * st[1] - begins[1]).reshape(1, 1, 1, ow)
    py = (off[:, :, :, :, 0] + base_h.astype(dt)).reshape(N, og, K, L)
    px = (off[:, :, :, :, 1] + base_w.astype(dt)).reshape(N, og, K, L)
    cols = _bilinear_columns(X.astype(dt).reshape(N, og, C // og, H, Wd), py, px)
    if mask is not None:
        cols *= mask.astype(dt).reshape(N, og, 1, K, L)
    cols = cols.reshape(N, C, K, L)
    Cg, Mg = C // group, M // group
    y = np.empty((N, M, L), dtype=dt)
    for g in range(group):
        wg = W[g * Mg:(g + 1) * Mg].astype(dt).reshape(Mg, Cg * K)
        cg = cols[:, g * Cg:(g + 1) * Cg].reshape(N, Cg * K, L)
        y[:, g * Mg:(g + 1) * Mg] = np.matmul(wg, cg)
    if B is not None:
        y += B.astype(dt).reshape(1, M, 1)
    return y.reshape(N, M, oh, ow).astype(X.dtype, copy=False)


@register("FusedConv", domain=MS_DOMAIN, since=1)
@register("FusedConv", domain=DOMAIN, since=1)
def fused_conv(X: np.ndarray, W: np.ndarray, B: Optional[np.ndarray] = None,
               Z: Optional[np.ndarray] = None, activation: str = "",
               activation_params: Optional[List[float]] = None,
               auto_pad: str = "NOTSET", dilations: Optional[List[int]] = None, group: int = 1,
               kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
               strides: Optional[List[int]] = None) -> np.ndarray:
    """FusedConv: activation(Conv(X, W, B) + Z).

    X, W, B and the attributes auto_pad, dilations, group, kernel_shape, pads, strides are ai.onnx
    Conv's; the optional Z is added to the convolution as ai.onnx Add would (numpy broadcasting;
    in practice Z has the output's shape: a residual shortcut). `activation` is one of "" (none),
    Relu, Tanh, Sigmoid, LeakyRelu (params [alpha]), Clip (params [min, max]) and HardSigmoid
    (params [alpha, beta]); defaults in `fused_ops.Activation`. The same kernel serves
    com.microsoft FusedConv (onnxruntime's contrib op, which asks Z to have the output's shape).
    """
    y = conv(X, W, B, auto_pad=auto_pad, dilations=dilations, group=group,
             kernel_shape=kernel_shape, pads=pads, strides=strides)
    if Z is not None:
        if Z.shape == y.shape and y.flags.writeable:
            y += Z.astype(y.dtype, copy=False)
        else:
            y = np.add(y, Z).astype(y.dtype, copy=False)
    return apply_activation(activation, y, activation_params, "FusedConv")
