"""Small helpers shared by the kernel modules (axis handling, reading shape-like inputs).

Private to `onnxedge.kernels`. It also hands the kernels the public helpers they share with the
rest of the runtime and with providers, which import those from their public homes instead:
`onnxedge.budgets` (run budgets), `onnxedge.geometry` (Conv/pool attributes and output shapes)
and `onnxedge.numeric` (broadcast_shape, widen, erf).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ..budgets import (MAX_TENSOR_BYTES_KEY, RUN_TIMEOUT_MS_KEY, RunLimits,  # noqa: F401
                       check_run, check_tensor_bytes, current_limits, default_max_tensor_bytes,
                       element_count, max_tensor_bytes, physical_memory, use_limits)
from ..errors import InvalidArgument
from ..geometry import auto_pad_mode, pads_attr, spatial_attr  # noqa: F401
from ..numeric import broadcast_shape, erf, is_narrow_float, widen  # noqa: F401


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


def pick_outputs(ctx: Any, values: Sequence[Any]) -> Any:
    """A kernel's return value for a node declaring `ctx.num_outputs` of `values`' outputs:
    the first value alone for a one-output node, else a tuple of that many."""
    n = max(1, min(ctx.num_outputs if ctx is not None else len(values), len(values)))
    return values[0] if n == 1 else tuple(values[:n])


def scalar(value: Any, op: str, what: str) -> Any:
    """The single element of a scalar or one-element tensor input, as a numpy scalar."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise InvalidArgument("%s: %s must be a scalar (or hold one element), got shape %s"
                              % (op, what, arr.shape))
    return arr.reshape(-1)[0]
