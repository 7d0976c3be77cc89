"""Memory and time budgets of a run.

Kernels whose output size comes from input *values* (ConstantOfShape, Expand, Tile, Range,
Pad, Resize, OneHot, ...) check the size they are asked for against a per-tensor byte budget
before they allocate. The budget, a cancel flag and a deadline travel with the run in a
context variable (per thread and per asyncio task), so stateless kernels need no extra
argument: the session sets it around `run`, constant folding sets a small one around folding.
"""
from __future__ import annotations

import contextvars
import os
import sys
import time
from typing import Any, List, Optional, Sequence

import numpy as np

from .errors import RuntimeException

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
