"""Conv + BatchNormalization folding: the BN's scale and shift move into the Conv's weights and
bias, and the BN goes."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ..context import FLOAT_TYPES, PassContext


def _inference_bn(ctx: PassContext, bn: ir.Node) -> bool:
    if len([o for o in bn.outputs if o]) != 1 or len(bn.inputs) < 5:
        return False
    return not int(bn.attributes.get("training_mode", 0))


def _fold(conv: ir.Node, bn: ir.Node, ctx: PassContext) -> Optional[ir.Node]:
    w = ctx.const(conv.inputs[1])
    b = ctx.const(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
    params = [ctx.const(n) for n in bn.inputs[1:5]]
    if w is None or w.dtype not in FLOAT_TYPES or w.ndim < 3 or any(p is None for p in params):
        return None
    if len(conv.inputs) > 2 and conv.inputs[2] and b is None:
        return None
    m = w.shape[0]
    if any(p.size != m for p in params) or (b is not None and b.size != m):
        return None
    scale, shift, mean, var = [p.reshape(-1).astype(np.float64) for p in params]
    eps = float(bn.attributes.get("epsilon", 1e-5))
    factor = scale / np.sqrt(var + eps)
    w2 = (w.astype(np.float64) * factor.reshape((m,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    b0 = np.zeros(m) if b is None else b.reshape(-1).astype(np.float64)
    b2 = ((b0 - mean) * factor + shift).astype(w.dtype)
    inputs = [conv.inputs[0], ctx.add_initializer(conv.inputs[1] + "_bn", w2),
              ctx.add_initializer(bn.inputs[2] + "_conv", b2)]
    return ir.Node("Conv", inputs, [bn.outputs[0]], conv.attributes, name=conv.name)


def run(ctx: PassContext) -> bool:
    """Fold every BatchNormalization that is the only reader of a Conv's output."""
    changed = False
    for bn in list(ctx.graph.nodes):
        if bn.op_type != "BatchNormalization" or bn.domain or not _inference_bn(ctx, bn):
            continue
        conv = ctx.producer_of(bn.inputs[0], "Conv")
        if conv is None or not ctx.private(bn.inputs[0]) or len(conv.inputs) < 2:
            continue
        new = _fold(conv, bn, ctx)
        if new is not None:
            ctx.replace([conv, bn], [new])
            changed = True
    return changed
