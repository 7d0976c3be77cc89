"""Element types of every value in a graph, inferred forward from inputs and initializers.

The provider claims a node only when its inputs' types are known and supported; this small
forward pass knows the ops whose output type is not their first input's.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from onnxedge import dtypes as _dt
from onnxedge import ir

_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)
_F32 = np.dtype(np.float32)
_ALWAYS = {
    "Shape": _INT64, "Size": _INT64, "NonZero": _INT64, "ArgMax": _INT64, "ArgMin": _INT64,
    "Equal": _BOOL, "Less": _BOOL, "LessOrEqual": _BOOL, "Greater": _BOOL,
    "GreaterOrEqual": _BOOL, "Not": _BOOL, "And": _BOOL, "Or": _BOOL, "Xor": _BOOL,
    "IsNaN": _BOOL, "IsInf": _BOOL,
}
_SECOND_OUTPUT = {"TopK": _INT64, "MaxPool": _INT64, "Dropout": _BOOL, "Unique": _INT64}


def _numpy(code: Any) -> Optional[np.dtype]:
    try:
        return np.dtype(_dt.to_numpy(int(code)))
    except Exception:
        return None


def _constant_type(node: ir.Node) -> Optional[np.dtype]:
    a = node.attributes
    if "value" in a and isinstance(a["value"], np.ndarray):
        return a["value"].dtype
    if "value_float" in a or "value_floats" in a:
        return _F32
    if "value_int" in a or "value_ints" in a:
        return _INT64
    return None


class ValueTypes(dict):
    """Value name -> numpy dtype (None where unknown); calling it is `get`. `rank(name)` is the
    value's rank where an initializer or a declared shape tells it (claim checks that need it,
    e.g. ConvTranspose without kernel_shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.ranks: Dict[str, int] = {}

    def __call__(self, name: str) -> Optional[np.dtype]:
        return self.get(name)

    def rank(self, name: str) -> Optional[int]:
        """The rank of a value, or None when nothing in the graph declares it."""
        return self.ranks.get(name)


def infer(graph: ir.Graph) -> ValueTypes:
    """Map every value name to its numpy dtype (None where it cannot be told)."""
    types = ValueTypes()
    for vi in list(graph.inputs) + list(graph.outputs) + list(graph.value_info.values()):
        t = vi.type
        if t is not None and getattr(t, "kind", "") == "tensor" and t.elem_type:
            types[vi.name] = _numpy(t.elem_type)
            if t.shape is not None:
                types.ranks[vi.name] = len(t.shape)
    for name, value in graph.initializers.items():
        if isinstance(value, np.ndarray):
            types[name] = value.dtype
            types.ranks[name] = value.ndim
    for node in graph.nodes:
        first = types.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
        op = node.op_type
        if op == "Constant":
            out: Optional[np.dtype] = _constant_type(node)
            value = node.attributes.get("value")
            if isinstance(value, np.ndarray) and node.outputs:
                types.ranks[node.outputs[0]] = value.ndim
        elif op == "Cast":
            out = _numpy(node.attributes.get("to", 0))
        elif op == "CastLike":
            out = types.get(node.inputs[1]) if len(node.inputs) > 1 else None
        elif op in _ALWAYS:
            out = _ALWAYS[op]
        elif op == "Where":
            out = types.get(node.inputs[1]) if len(node.inputs) > 1 else None
        elif op == "EmbedLayerNormalization":   # com.microsoft: the embeddings' type, not ids'
            out = types.get(node.inputs[2]) if len(node.inputs) > 2 else None
        elif op in ("ConstantOfShape",):
            v = node.attributes.get("value")
            out = v.dtype if isinstance(v, np.ndarray) else _F32
        else:
            out = first
        for k, name in enumerate(node.outputs):
            if not name or name in types:
                continue
            if k == 0:
                types[name] = out
            elif op in _SECOND_OUTPUT and k == 1:
                types[name] = _SECOND_OUTPUT[op]
            elif op == "EmbedLayerNormalization":
                types[name] = np.dtype(np.int32) if k == 1 else out
            elif op in ("LayerNormalization", "BatchNormalization", "Split", "FusedLayerNorm"):
                types[name] = out
            else:
                types[name] = None
    return types


__all__ = ["infer", "ValueTypes"]
