"""Residual fusion: Conv(X, W, B) + Z, with Z a computed tensor (a ResNet shortcut), becomes a
com.onnxedge FusedConv(X, W, B, Z); a following activation then joins it too."""
from __future__ import annotations

from ..context import FUSED_DOMAIN, PassContext
from ._match import is_op


def run(ctx: PassContext) -> bool:
    """Fuse every Add of a private Conv output and a non-constant tensor; True when one was."""
    changed = False
    for add in list(ctx.graph.nodes):
        if id(add) in ctx.removed or not is_op(add, "Add") or len(add.inputs) != 2:
            continue
        for i in (0, 1):
            conv, z = ctx.producer_of(add.inputs[i]), add.inputs[1 - i]
            if conv is None or not ctx.private(add.inputs[i]) or ctx.const(z) is not None \
                    or not ctx.is_float(add.inputs[i]) or ctx.dtype(z) != ctx.dtype(add.inputs[i]):
                continue
            if is_op(conv, "Conv"):
                attrs = dict(conv.attributes, activation="")
            elif conv.domain == FUSED_DOMAIN and conv.op_type == "FusedConv" \
                    and not conv.attributes.get("activation") and len(conv.inputs) < 4:
                attrs = dict(conv.attributes)
            else:
                continue
            inputs = (conv.inputs + ["", ""])[:3] + [z]
            new = ctx.make_node("FusedConv", inputs, [add.outputs[0]], attrs, FUSED_DOMAIN,
                                conv.name)
            ctx.replace([conv, add], [new])
            changed = True
            break
    return changed
