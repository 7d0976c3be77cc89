"""Small helpers shared by the kernel modules (axis handling, reading shape-like inputs)."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgument


def norm_axis(axis: int, rank: int, op: str, what: str = "axis") -> int:
    """`axis` in [-rank, rank-1] made non-negative; InvalidArgument naming `op` otherwise."""
    a = int(axis)
    if not -rank <= a < rank:
        raise InvalidArgument("%s: %s %d is out of range for a tensor of rank %d (expected %d..%d)"
                              % (op, what, a, rank, -rank, rank - 1))
    return a + rank if a < 0 else a


def norm_axes(axes: Sequence[int], rank: int, op: str, what: str = "axes") -> List[int]:
    """Each axis normalised by `norm_axis`; InvalidArgument on a repeated axis."""
    out = [norm_axis(a, rank, op, what) for a in axes]
    if len(set(out)) != len(out):
        raise InvalidArgument("%s: %s %s contains a repeated axis" % (op, what, list(axes)))
    return out


def int_list(value: Any, op: str, what: str) -> Optional[List[int]]:
    """A shape-like input or attribute (1-D int tensor, list, scalar) as Python ints (None
    stays None); InvalidArgument naming `op` and `what` for non-integers or rank > 1."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype.kind not in "iub":
        raise InvalidArgument("%s: %s must hold integers, got dtype %s" % (op, what, arr.dtype))
    if arr.ndim > 1:
        raise InvalidArgument("%s: %s must be 1-D, got shape %s" % (op, what, arr.shape))
    return [int(v) for v in arr.reshape(-1)]


def broadcast_shape(shapes: Sequence[Sequence[int]], op: str) -> tuple:
    """The numpy (multidirectional) broadcast of several shapes; InvalidArgument if they clash."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            d = int(d)
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                raise InvalidArgument("%s: shapes %s cannot be broadcast together"
                                      % (op, " and ".join(str(tuple(x)) for x in shapes)))
    return tuple(out)


def pick_outputs(ctx: Any, values: Sequence[Any]) -> Any:
    """A kernel's return value for a node declaring `ctx.num_outputs` of `values`' outputs:
    the first value alone for a one-output node, else a tuple of that many."""
    n = max(1, min(ctx.num_outputs if ctx is not None else len(values), len(values)))
    return values[0] if n == 1 else tuple(values[:n])


def is_narrow_float(dtype: Any) -> bool:
    """True for float types numpy computes poorly or not at all: float16 and ml_dtypes'
    bfloat16 / float8 (numpy kind 'V')."""
    dt = np.dtype(dtype)
    return dt.kind == "V" or (dt.kind == "f" and dt.itemsize < 4)


def widen(x: np.ndarray) -> np.ndarray:
    """`x` as float32 when its dtype is a narrow float (compute there, cast the result back)."""
    return x.astype(np.float32) if is_narrow_float(x.dtype) else x


# float64 erf: piecewise polynomials on [0, 1), [1, 2), ... fitted on first use against math.erf
# at Chebyshev nodes; the first piece is fitted as erf(x)/x so that tiny |x| keeps full relative
# accuracy. (width, end, degree): about 2e-15.
_ERF_PLANS = {"f64": (1.0, 6.0, 15)}
_ERF_TABLES: dict = {}


def _erf_table(kind: str) -> np.ndarray:
    table = _ERF_TABLES.get(kind)
    if table is None:
        import math
        width, end, deg = _ERF_PLANS[kind]
        nodes = np.cos(np.pi * (np.arange(4 * deg) + 0.5) / (4 * deg))
        pieces = int(round(end / width))
        table = np.empty((pieces, deg + 1))
        for i in range(pieces):
            xs = (i + 0.5 + 0.5 * nodes) * width
            ys = [math.erf(v) / (v if i == 0 else 1.0) for v in xs.tolist()]
            cheb = np.polynomial.chebyshev.chebfit(nodes, ys, deg)
            table[i] = np.polynomial.chebyshev.cheb2poly(cheb)[::-1]
        _ERF_TABLES[kind] = table
    return table


# float32 erf: the rational approximation Eigen and XLA use (odd numerator of degree 13 over an
# even denominator of degree 8 on [-4, 4]); a few ulp, ~10x faster than the polynomial pieces.
_ERF32_P = [np.float32(c) for c in (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                                    -5.69250639462346e-05, -7.34990630326855e-04,
                                    -2.95459980854025e-03, -1.60960333262415e-02)]
_ERF32_Q = [np.float32(c) for c in (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                    -7.37332916720468e-03, -1.42647390514189e-02)]


def _erf_float32(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, np.float32(-4), np.float32(4))
    x2 = x * x
    p = x2 * _ERF32_P[0]
    p += _ERF32_P[1]
    for c in _ERF32_P[2:]:
        p *= x2
        p += c
    p *= x
    q = x2 * _ERF32_Q[0]
    q += _ERF32_Q[1]
    for c in _ERF32_Q[2:]:
        q *= x2
        q += c
    p /= q
    np.clip(p, np.float32(-1), np.float32(1), out=p)
    return p


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in numpy alone; the result has x's dtype.

    float64: piecewise polynomials, ~2e-15 relative. float32 (and narrower floats, computed in
    float32): Eigen's rational approximation, within 1e-6 relative like onnxruntime's own.
    """
    x = np.asarray(x)
    if x.dtype != np.float64:
        return _erf_float32(x.astype(np.float32, copy=False)).astype(x.dtype, copy=False)
    width, end, _ = _ERF_PLANS["f64"]
    table = _erf_table("f64")
    a = np.abs(x.ravel())
    y = np.ones_like(a)
    with np.errstate(invalid="ignore"):
        piece = np.floor(a * (1.0 / width))
    for i in range(table.shape[0]):
        sel = np.flatnonzero(piece == i)
        if sel.size == 0:
            continue
        ai = a[sel]
        u = ai * (2.0 / width) - (2 * i + 1)
        r = np.full_like(u, table[i, 0])
        for c in table[i, 1:]:
            r *= u
            r += c
        if i == 0:
            r *= ai
        y[sel] = r
    y[np.isnan(a)] = np.nan
    np.copysign(y, x.ravel(), out=y)
    return y.reshape(x.shape)


# --- per-spatial-axis attributes of Conv/pool-like ops (kernel_shape, strides, pads, auto_pad)

def spatial_attr(op: str, name: str, value: Optional[Sequence[int]], nd: int, default: int,
                 minimum: int) -> List[int]:
    """A per-spatial-axis attribute (strides, dilations, ...) checked for length and minimum."""
    if value is None or len(value) == 0:
        return [default] * nd
    vals = [int(v) for v in value]
    if len(vals) != nd:
        raise InvalidArgument("%s: attribute %s must have %d values (one per spatial axis), got %s"
                              % (op, name, nd, vals))
    if any(v < minimum for v in vals):
        raise InvalidArgument("%s: attribute %s values must be >= %d, got %s"
                              % (op, name, minimum, vals))
    return vals


def pads_attr(op: str, pads: Optional[Sequence[int]], nd: int) -> Tuple[List[int], List[int]]:
    """The `pads` attribute split into (begins, ends); zeros when absent."""
    if pads is None or len(pads) == 0:
        return [0] * nd, [0] * nd
    vals = [int(p) for p in pads]
    if len(vals) != 2 * nd:
        raise InvalidArgument("%s: attribute pads must have %d values (begins then ends), got %s"
                              % (op, 2 * nd, vals))
    if any(p < 0 for p in vals):
        raise InvalidArgument("%s: attribute pads must be non-negative, got %s" % (op, vals))
    return vals[:nd], vals[nd:]


def auto_pad_mode(op: str, auto_pad: object) -> str:
    """The auto_pad attribute as a checked upper-case string."""
    mode = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise InvalidArgument("%s: auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got %r"
                              % (op, mode))
    return mode
