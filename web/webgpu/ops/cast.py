"""Cast on the GPU: between float32, int32, int64 and bool, through the elementwise unary template
(on the host for values that live there)."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..runtime import Recorder, is_gpu
from .elementwise import unary
from .table import F32, attr, register


_CAST_OK = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)}


_TO = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_}


def _check_cast(node: Any, facts: Any) -> Optional[str]:
    dt = facts.dtype(node.inputs[0])
    if dt not in _CAST_OK:
        return "Cast from %s is not supported" % (dt if dt is not None else "an unknown type")
    if attr(node, "to") not in _TO:
        return "Cast to TensorProto type %r is not supported" % attr(node, "to")
    if attr(node, "saturate", 1) != 1 or attr(node, "round_mode", "up") != "up":
        return "Cast saturate/round_mode attributes are only for float8 targets"
    return None


@register(["Cast"], check=_check_cast, raw=True)
def run_cast(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Cast between float32, int32, int64 and bool: on the host for host values."""
    to = np.dtype(_TO[attr(node, "to")])
    x = ins[0]
    if not is_gpu(x):
        return [np.asarray(x).astype(to)]
    if x.dtype == to:
        return [x]
    if to == np.bool_:
        expr = "x != 0.0"
    elif to == F32:
        expr = "x"
    else:
        expr = "trunc(x)" if x.dtype == F32 else "x"
    return [unary(rt, x, expr, to)]
