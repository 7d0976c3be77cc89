"""Numeric helpers shared by kernels, optimizer passes and providers: numpy's broadcasting of
shapes (checked), widening narrow floats for computation, and an erf accurate to the last bit of
float32/float64 without scipy (numpy has none)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import InvalidArgument


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
