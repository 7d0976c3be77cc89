"""Shape-op folding: Shape and Size of values whose static shape is known become constants, and
so does Gather(Shape(x), i) when dim i of x is known even if others are symbolic."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ..context import PassContext


def _gathered_dims(ctx: PassContext, node: ir.Node) -> Optional[np.ndarray]:
    """The value of Gather(Shape(x), indices) when the gathered dims of x are known sizes."""
    shape_node = ctx.producer_of(node.inputs[0], "Shape")
    indices = ctx.const(node.inputs[1]) if len(node.inputs) > 1 else None
    if shape_node is None or indices is None or int(node.attributes.get("axis", 0)) != 0 \
            or indices.dtype.kind not in "iu":
        return None
    info = ctx.types.get(shape_node.inputs[0])
    if info is None or info.shape is None:
        return None
    rank = len(info.shape)
    start = int(shape_node.attributes.get("start", 0))
    end = int(shape_node.attributes.get("end", rank))
    start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
    dims = info.shape[start:end]
    flat = [int(i) + len(dims) if int(i) < 0 else int(i) for i in indices.reshape(-1)]
    if any(i < 0 or i >= len(dims) or not isinstance(dims[i], int) for i in flat):
        return None
    return np.array([dims[i] for i in flat], dtype=np.int64).reshape(indices.shape)


def run(ctx: PassContext) -> bool:
    """Replace Shape/Size nodes over statically shaped values by initializers."""
    changed = False
    for node in list(ctx.graph.nodes):
        if node.domain or node.outputs[0] in ctx.outputs:
            continue
        if node.op_type == "Gather":
            value = _gathered_dims(ctx, node)
            if value is not None:
                ctx.graph.initializers[node.outputs[0]] = value
                ctx.replace([node], [])
                changed = True
            continue
        if node.op_type not in ("Shape", "Size"):
            continue
        info = ctx.types.get(node.inputs[0])
        shape = None if info is None else info.static()
        if shape is None:
            continue
        if node.op_type == "Size":
            value = np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        else:
            rank = len(shape)
            start = int(node.attributes.get("start", 0))
            end = int(node.attributes.get("end", rank))
            start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
            value = np.array(shape[start:end], dtype=np.int64)
        ctx.graph.initializers[node.outputs[0]] = value
        ctx.replace([node], [])
        changed = True
    return changed
