"""Identity and Dropout elimination: readers of the output read the input instead."""
from __future__ import annotations

from ... import ir
from ..context import PassContext


def _inference_dropout(ctx: PassContext, node: ir.Node) -> bool:
    """A Dropout that passes its input through: not training, and its mask unused."""
    if len(node.outputs) > 1 and node.outputs[1]:
        mask = node.outputs[1]
        if mask in ctx.outputs or ctx.live_users(mask):
            return False
    if len(node.inputs) > 2 and node.inputs[2]:
        training = ctx.const(node.inputs[2])
        if training is None or bool(training.reshape(-1)[0]):
            return False
    return True


def run(ctx: PassContext) -> bool:
    """Forward every Identity and inference-mode Dropout; True when one went."""
    changed = False
    for node in list(ctx.graph.nodes):
        if node.domain or not node.inputs or not node.inputs[0]:
            continue
        if node.op_type == "Identity" or \
                (node.op_type == "Dropout" and _inference_dropout(ctx, node)):
            changed |= ctx.forward(node, node.outputs[0], node.inputs[0])
    return changed
