"""Dead-node elimination: drop nodes none of whose outputs is read or is a graph output."""
from __future__ import annotations

from ..context import PassContext


def run(ctx: PassContext) -> bool:
    """Remove every node whose results nothing needs; True when one was removed."""
    needed = set(ctx.outputs)
    keep = []
    for node in reversed(ctx.graph.nodes):
        if any(o and o in needed for o in node.outputs):
            keep.append(node)
            needed.update(node.reads())
    if len(keep) == len(ctx.graph.nodes):
        return False
    ctx.graph.nodes = keep[::-1]
    return True
