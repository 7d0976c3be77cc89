"""Reshape chains: Reshape/Squeeze/Unsqueeze/Flatten sequences become one Reshape, and a
Reshape that keeps its input's static shape disappears."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ... import ir
from ..context import PassContext

RESHAPES = ("Reshape", "Squeeze", "Unsqueeze", "Flatten")


def _target(ctx: PassContext, last: ir.Node) -> Optional[List[int]]:
    """The shape to reshape the chain's input to: the last Reshape's own target when it copies
    no dims from its input, else the chain's static output shape."""
    if last.op_type == "Reshape" and len(last.inputs) > 1:
        target = ctx.const(last.inputs[1])
        if target is not None and (0 not in target.tolist() or last.attributes.get("allowzero", 0)):
            return [int(v) for v in target.reshape(-1)]
    info = ctx.types.get(last.outputs[0])
    return None if info is None else info.static()


def run(ctx: PassContext) -> bool:
    """Collapse every chain of two or more reshaping nodes; True when one changed."""
    if ctx.opsets.get("", 0) < 5:   # Reshape takes its shape as an input from opset 5
        return False
    changed = False
    for node in list(ctx.graph.nodes):
        if node.domain or node.op_type not in RESHAPES or id(node) in ctx.removed:
            continue
        chain = [node]
        while True:
            prod = ctx.producer_of(chain[0].inputs[0])
            if prod is None or prod.domain or prod.op_type not in RESHAPES \
                    or not ctx.private(chain[0].inputs[0]):
                break
            chain.insert(0, prod)
        src, out = chain[0].inputs[0], node.outputs[0]
        if len(chain) == 1:
            if node.op_type == "Reshape":
                before, after = ctx.types.get(src), ctx.types.get(out)
                if before is not None and after is not None and before.static() is not None \
                        and before.static() == after.static():
                    changed |= ctx.forward(node, out, src)
            continue
        target = _target(ctx, node)
        if target is None:
            continue
        shape = ctx.add_initializer(out + "_shape", np.array(target, dtype=np.int64))
        ctx.replace(chain, [ir.Node("Reshape", [src, shape], [out], name=node.name)])
        changed = True
    return changed
