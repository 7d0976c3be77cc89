"""Gelu fusion: the erf form x * 0.5 * (1 + erf(x / sqrt 2)) and the tanh form
0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), as exporters write them, become one
Gelu: ai.onnx Gelu from opset 20, com.onnxedge Gelu (same `approximate` attribute) before."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

from ... import ir
from ..context import FUSED_DOMAIN, PassContext
from ._match import is_const, is_op, other_input, sole_user

Match = Tuple[str, List[ir.Node]]   # (x, the nodes computing x * Phi(x) after the inner part)


def _erf_input(ctx: PassContext, erf: ir.Node) -> Optional[Tuple[str, List[ir.Node]]]:
    """x and [scale node] for erf(x / sqrt 2) or erf(x * (1 / sqrt 2))."""
    scale = ctx.producer_of(erf.inputs[0])
    if scale is None or not ctx.private(erf.inputs[0]) or len(scale.inputs) != 2:
        return None
    x, c = scale.inputs
    if is_op(scale, "Div") and is_const(ctx, c, math.sqrt(2.0)):
        return x, [scale]
    if is_op(scale, "Mul"):
        for x, c in ((scale.inputs[0], scale.inputs[1]), (scale.inputs[1], scale.inputs[0])):
            if is_const(ctx, c, 1.0 / math.sqrt(2.0)):
                return x, [scale]
    return None


def _cube_of(ctx: PassContext, name: str) -> Optional[Tuple[str, List[ir.Node]]]:
    """x and its nodes when `name` is Pow(x, 3) or x * x * x."""
    node = ctx.producer_of(name)
    if node is None or not ctx.private(name):
        return None
    if is_op(node, "Pow") and is_const(ctx, node.inputs[1], 3.0, 1e-6):
        return node.inputs[0], [node]
    if is_op(node, "Mul"):
        for sq_name, x in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
            sq = ctx.producer_of(sq_name)
            if is_op(sq, "Mul") and sq.inputs == [x, x] and ctx.private(sq_name):
                return x, [sq, node]
    return None


def _tanh_input(ctx: PassContext, tanh: ir.Node) -> Optional[Tuple[str, List[ir.Node]]]:
    """x and its nodes for tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))."""
    outer = ctx.producer_of(tanh.inputs[0])
    if not is_op(outer, "Mul") or not ctx.private(tanh.inputs[0]):
        return None
    for inner_name, c in ((outer.inputs[0], outer.inputs[1]), (outer.inputs[1], outer.inputs[0])):
        inner = ctx.producer_of(inner_name)
        if not is_const(ctx, c, math.sqrt(2.0 / math.pi)) or not is_op(inner, "Add") \
                or not ctx.private(inner_name):
            continue
        for x, term_name in (inner.inputs, inner.inputs[::-1]):
            term = ctx.producer_of(term_name)
            if not is_op(term, "Mul") or not ctx.private(term_name):
                continue
            for cube_name, k in (term.inputs, term.inputs[::-1]):
                cube = _cube_of(ctx, cube_name) if is_const(ctx, k, 0.044715) else None
                if cube is not None and cube[0] == x:
                    return x, cube[1] + [term, inner, outer]
    return None


def _tail(ctx: PassContext, core: ir.Node, x: str) -> Optional[List[ir.Node]]:
    """The nodes of x * 0.5 * (1 + core) after `core` (Add 1, then the Muls), in order."""
    add = sole_user(ctx, core.outputs[0], "Add")
    if add is None or not is_const(ctx, other_input(add, core.outputs[0]), 1.0):
        return None
    m1 = sole_user(ctx, add.outputs[0], "Mul")
    if m1 is None:
        return None
    a = other_input(m1, add.outputs[0])
    if a == x or is_const(ctx, a, 0.5):   # (x * (1 + core)) * 0.5 or (0.5 * (1 + core)) * x
        m2 = sole_user(ctx, m1.outputs[0], "Mul")
        b = other_input(m2, m1.outputs[0]) if m2 is not None else None
        if m2 is not None and ((a == x and is_const(ctx, b, 0.5)) or (a != x and b == x)):
            return [add, m1, m2]
        return None
    half = ctx.producer_of(a) if a else None   # (x * 0.5) * (1 + core)
    if is_op(half, "Mul") and ctx.private(a) and is_const(ctx, other_input(half, x), 0.5) \
            and x in half.inputs:
        return [half, add, m1]
    return None


def run(ctx: PassContext) -> bool:
    """Replace every erf- or tanh-form Gelu by one node; True when one was found."""
    changed = False
    opset = ctx.opsets.get("", 0)
    for core in list(ctx.graph.nodes):
        if id(core) in ctx.removed or core.domain or core.op_type not in ("Erf", "Tanh"):
            continue
        inner = _erf_input(ctx, core) if core.op_type == "Erf" else _tanh_input(ctx, core)
        if inner is None or not ctx.is_float(inner[0]):
            continue
        x, head = inner
        tail = _tail(ctx, core, x)
        if tail is None:
            continue
        attrs = {"approximate": "none" if core.op_type == "Erf" else "tanh"}
        out = [tail[-1].outputs[0]]
        if opset >= 20:
            new = ir.Node("Gelu", [x], out, attrs, name=core.name)
        else:
            new = ctx.make_node("Gelu", [x], out, attrs, FUSED_DOMAIN, core.name)
        ctx.replace(head + [core] + tail, [new])
        changed = True
    return changed
