"""Small helpers shared by the kernel modules (axis handling, reading shape-like inputs)."""
from __future__ import annotations

import contextvars
import os
import sys
import time
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgument, RuntimeException


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


# --- memory and time budgets of a run ------------------------------------------------------
#
# Kernels whose output size comes from input *values* (ConstantOfShape, Expand, Tile, Range,
# Pad, Resize, OneHot, ...) check the size they are asked for against a per-tensor byte budget
# before they allocate. The budget, a cancel flag and a deadline travel with the run in a
# context variable (per thread and per asyncio task), so stateless kernels need no extra
# argument: the session sets it around `run`, constant folding sets a small one around folding.

MAX_TENSOR_BYTES_KEY = "session.max_tensor_bytes"
RUN_TIMEOUT_MS_KEY = "session.run_timeout_ms"
_FALLBACK_MEMORY = 2 << 30   # when the machine's memory cannot be read (Pyodide, odd systems)


def physical_memory() -> Optional[int]:
    """Bytes of physical memory, or None where the system does not say (e.g. in Pyodide)."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if not isinstance(pages, int) or not isinstance(page, int) or pages <= 0 or page <= 0:
        return None
    return pages * page


_DEFAULT_BUDGET: List[int] = []


def default_max_tensor_bytes() -> int:
    """The default per-tensor budget: half the physical memory (2 GiB when unknown), and never
    more than a quarter of the address space (wasm32 and other 32-bit builds)."""
    if not _DEFAULT_BUDGET:
        mem = physical_memory() or _FALLBACK_MEMORY
        _DEFAULT_BUDGET.append(max(1 << 20, min(mem // 2, (sys.maxsize + 1) // 4)))
    return _DEFAULT_BUDGET[0]


class RunLimits:
    """The budgets of one run: bytes per tensor, a deadline and the caller's RunOptions (whose
    `terminate` flag another thread may set). `check()` raises when the run must stop."""

    __slots__ = ("max_tensor_bytes", "timeout_ms", "deadline", "run_options")

    def __init__(self, max_tensor_bytes: Optional[int] = None, timeout_ms: float = 0,
                 run_options: Any = None):
        self.max_tensor_bytes = default_max_tensor_bytes() if max_tensor_bytes is None \
            else int(max_tensor_bytes)
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms and timeout_ms > 0 \
            else None
        self.run_options = run_options

    def check(self) -> None:
        """RuntimeException when the caller set `run_options.terminate` or the time is up."""
        if self.run_options is not None and self.run_options.terminate:
            raise RuntimeException("the run was cancelled: run_options.terminate was set to True")
        if self.deadline is not None:
            if time.monotonic() > self.deadline:
                raise RuntimeException(
                    "the run exceeded its time limit of %g ms (RunOptions.run_timeout_ms or the "
                    "session config entry %r)" % (self.timeout_ms, RUN_TIMEOUT_MS_KEY))


_LIMITS: Any = contextvars.ContextVar("onnxedge_run_limits", default=None)


def current_limits() -> Optional[RunLimits]:
    """The limits of the run in progress in this thread / task, or None outside a run."""
    return _LIMITS.get()


class use_limits:  # noqa: N801 (used as a context manager, like a function)
    """`with use_limits(limits):` makes `limits` the current run's limits inside the block."""

    def __init__(self, limits: Optional[RunLimits]):
        self.limits = limits
        self._token: Any = None

    def __enter__(self) -> Optional[RunLimits]:
        self._token = _LIMITS.set(self.limits)
        return self.limits

    def __exit__(self, *exc: Any) -> None:
        _LIMITS.reset(self._token)


def check_run() -> None:
    """Raise when the current run was cancelled or ran out of time (no-op outside a run)."""
    limits = _LIMITS.get()
    if limits is not None:
        limits.check()


def max_tensor_bytes() -> int:
    """The byte budget of one tensor in the current run (the default outside a run)."""
    limits = _LIMITS.get()
    return default_max_tensor_bytes() if limits is None else limits.max_tensor_bytes


def element_count(dims: Sequence[Any]) -> int:
    """The product of `dims` in Python ints (never wraps around like int64 arithmetic)."""
    n = 1
    for d in dims:
        n *= int(d)
    return n


def check_tensor_bytes(op: str, dims: Sequence[Any], dtype: Any, what: str = "output") -> int:
    """Before allocating a tensor of shape `dims` and `dtype` in kernel `op`: its element count,
    or RuntimeException when it needs more bytes than the run's per-tensor budget (the session
    config entry "session.max_tensor_bytes")."""
    count = element_count(dims)
    itemsize = np.dtype(dtype).itemsize if dtype is not None else 1
    need = count * max(itemsize, 1)
    limit = max_tensor_bytes()
    if need > limit:
        shape = list(dims) if len(dims) <= 8 else list(dims[:8]) + ["..."]
        raise RuntimeException(
            "%s: the %s of shape %s (%d elements of %s) needs %d bytes, more than the limit of %d "
            "bytes per tensor (session config entry %r)"
            % (op, what, shape, count, np.dtype(dtype) if dtype is not None else "bytes", need,
               limit, MAX_TENSOR_BYTES_KEY))
    return count
