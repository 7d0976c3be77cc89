"""LayerNormalization fusion from its decomposed form:

    mean = ReduceMean(X, axes); d = X - mean; var = ReduceMean(d^2 or d*d, axes)
    Y = d / Sqrt(var + eps) [* gamma] [+ beta]

over the last axes becomes ai.onnx LayerNormalization (opset >= 17) or com.onnxedge
LayerNormalization (same inputs and attributes) before that.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ..context import FUSED_DOMAIN, PassContext
from ._match import is_const, is_op, other_input, sole_user


def _tail_axes(ctx: PassContext, node: ir.Node, x: str) -> Optional[int]:
    """k when the ReduceMean keeps dims and reduces exactly the last k axes of x."""
    if not int(node.attributes.get("keepdims", 1)):
        return None
    if "axes" in node.attributes:
        axes = [int(a) for a in node.attributes["axes"]]
    elif len(node.inputs) > 1 and ctx.const(node.inputs[1]) is not None:
        axes = [int(a) for a in ctx.const(node.inputs[1]).reshape(-1)]
    else:
        return None
    if not axes:
        return None
    if any(a >= 0 for a in axes):
        shape = ctx.shape(x)
        if shape is None:
            return None
        axes = [a - len(shape) if a >= 0 else a for a in axes]
    k = len(axes)
    return k if sorted(axes) == list(range(-k, 0)) else None


def _match(ctx: PassContext, rm1: ir.Node):
    x = rm1.inputs[0]
    k = _tail_axes(ctx, rm1, x)
    sub = sole_user(ctx, rm1.outputs[0], "Sub") if k else None
    if sub is None or sub.inputs != [x, rm1.outputs[0]] or sub.outputs[0] in ctx.outputs:
        return None
    d = sub.outputs[0]
    users = ctx.live_users(d)
    if len(users) != 2:
        return None
    sq = next((u for u in users if (is_op(u, "Mul") and u.inputs == [d, d])
               or (is_op(u, "Pow") and u.inputs[0] == d and is_const(ctx, u.inputs[1], 2.0, 1e-6))),
              None)
    div = next((u for u in users if is_op(u, "Div") and u.inputs[0] == d and u.inputs[1] != d),
               None)
    if sq is None or div is None:
        return None
    rm2 = sole_user(ctx, sq.outputs[0], "ReduceMean")
    if rm2 is None or _tail_axes(ctx, rm2, sq.outputs[0]) != k:
        return None
    add = sole_user(ctx, rm2.outputs[0], "Add")
    eps = ctx.scalar(other_input(add, rm2.outputs[0]) or "") if add is not None else None
    sqrt = sole_user(ctx, add.outputs[0], "Sqrt") if eps is not None else None
    if sqrt is None or div.inputs[1] != sqrt.outputs[0] or not ctx.private(sqrt.outputs[0]):
        return None
    return x, k, eps, [rm1, sub, sq, rm2, add, sqrt, div]


def _affine(ctx: PassContext, name: str, op: str, k: int, dtype: np.dtype):
    """(constant, node) for a following Mul/Add by a constant over the normalized axes."""
    node = sole_user(ctx, name, op)
    c = ctx.const(other_input(node, name) or "") if node is not None else None
    if c is None or c.ndim > k or c.dtype != dtype:
        return None, None
    return other_input(node, name), node


def run(ctx: PassContext) -> bool:
    """Replace every decomposed layer normalization over the last axes; True when one was."""
    changed = False
    for rm1 in list(ctx.graph.nodes):
        if id(rm1) in ctx.removed or not is_op(rm1, "ReduceMean"):
            continue
        found = _match(ctx, rm1)
        if found is None or not ctx.is_float(found[0]):
            continue
        x, k, eps, nodes = found
        dtype = ctx.dtype(x)
        out = nodes[-1].outputs[0]
        scale, mul = _affine(ctx, out, "Mul", k, dtype)
        if mul is not None:
            nodes.append(mul)
            out = mul.outputs[0]
        else:
            shape = ctx.shape(x)
            tail = shape[-k:] if shape is not None and len(shape) >= k else None
            if tail is None or not all(isinstance(d, int) for d in tail):
                continue
            scale = ctx.add_initializer(x + "_ln_scale", np.ones(tail, dtype))
        bias, add = _affine(ctx, out, "Add", k, dtype)
        inputs = [x, scale]
        if add is not None:
            nodes.append(add)
            out = add.outputs[0]
            inputs.append(bias)
        attrs = {"axis": -k, "epsilon": float(eps)}
        if ctx.opsets.get("", 0) >= 17:
            new = ir.Node("LayerNormalization", inputs, [out], attrs, name=rm1.name)
        else:
            new = ctx.make_node("LayerNormalization", inputs, [out], attrs, FUSED_DOMAIN, rm1.name)
        ctx.replace(nodes, [new])
        changed = True
    return changed
