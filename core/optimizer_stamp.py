"""The optimizer's levels and the stamp it leaves on a model, readable without the optimizer
(a reduced runtime build has no optimizer, yet must know whether a model was optimized)."""
from __future__ import annotations

from typing import Union

from . import ir
from .errors import InvalidArgument

LEVELS = ("disable", "basic", "extended", "all")
VERSION = 2   # bump when a pass of onnxedge.optimizer changes its output: saved stamps go stale
STAMP_KEY = "onnxedge.optimized"


def level_name(level: Union[str, int]) -> str:
    """Normalize a level given as a name or as GraphOptimizationLevel (0, 1, 2, 99)."""
    if isinstance(level, str):
        name = level.lower().replace("ort_enable_", "").replace("ort_disable_all", "disable")
        name = "all" if name == "layout" else name
        if name in LEVELS:
            return name
    else:
        by_int = {0: "disable", 1: "basic", 2: "extended", 3: "all", 99: "all"}
        if int(level) in by_int:
            return by_int[int(level)]
    raise InvalidArgument("optimization level %r is not one of %s" % (level, list(LEVELS)))


def already_optimized(model: ir.Model, level: Union[str, int]) -> bool:
    """True when the model's stamp says this optimizer version ran it at `level` or above."""
    stamp = model.metadata_props.get(STAMP_KEY, "").split()
    if len(stamp) != 2 or stamp[0] not in LEVELS or stamp[1] != str(VERSION):
        return False
    return LEVELS.index(stamp[0]) >= LEVELS.index(level_name(level))
