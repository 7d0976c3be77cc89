"""Indexing on the GPU: Gather along an axis (indices uploaded as int32, negative ones wrap)."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..runtime import Recorder, Uniform, grid
from .movement import check_data
from .table import attr, register


def _check_gather(node: Any, facts: Any) -> Optional[str]:
    why = check_data(node, facts)
    if why:
        return why
    if facts.dtype(node.inputs[1]) not in (np.dtype(np.int64), np.dtype(np.int32)):
        return "indices %r are not int32/int64" % node.inputs[1]
    return None


@register(["Gather"], check=_check_gather)
def run_gather(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Gather along an axis (indices may be negative)."""
    x, idx = ins[0], ins[1]
    rank = len(x.shape)
    axis = int(attr(node, "axis", 0))
    axis = axis + rank if axis < 0 else axis
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    y = rt.new(shape, x.dtype)
    if y.size == 0:
        return [y]
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    p = rt.kernel("indexing_gather", T=rt.wgsl_type(x.dtype))
    u = Uniform().u32(y.size, max(idx.size, 1), x.shape[axis], inner)
    rt.dispatch(p, [x, idx, y], u, grid(y.size, 256))
    return [y]
