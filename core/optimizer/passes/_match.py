"""Small helpers the pattern-matching passes share."""
from __future__ import annotations

from typing import Optional, Tuple

from ... import ir
from ..context import PassContext


def is_op(node: Optional[ir.Node], op_type: str) -> bool:
    """True when `node` is the ai.onnx op `op_type`."""
    return node is not None and node.op_type == op_type and not node.domain


def other_input(node: ir.Node, name: str) -> Optional[str]:
    """The input of a two-input node that is not `name` (None when `name` is not one of them)."""
    if len(node.inputs) != 2 or name not in node.inputs:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def is_const(ctx: PassContext, name: Optional[str], value: float, rtol: float = 1e-3) -> bool:
    """True when `name` is a one-element constant close to `value`."""
    got = ctx.scalar(name) if name else None
    return got is not None and abs(got - value) <= rtol * abs(value)


def sole_user(ctx: PassContext, name: str, op_type: str) -> Optional[ir.Node]:
    """The only reader of `name` when it is the ai.onnx op `op_type`."""
    node = ctx.only_user(name)
    return node if is_op(node, op_type) else None


def scale_operand(ctx: PassContext, node: ir.Node, max_rank: int) -> Optional[Tuple[str, float]]:
    """(x, factor) when `node` is x * c, c * x or x / c with c a non-zero one-element constant of
    rank <= `max_rank` (so it cannot add dimensions): the node multiplies x by factor (c or 1/c)."""
    if node.op_type not in ("Mul", "Div") or node.domain or len(node.inputs) != 2:
        return None
    for data, const in ((0, 1), (1, 0)):
        if node.op_type == "Div" and const == 0:
            continue
        value = ctx.const(node.inputs[const])
        c = ctx.scalar(node.inputs[const])
        if c is None or c == 0 or value is None or value.ndim > max_rank:
            continue
        return node.inputs[data], (1.0 / c if node.op_type == "Div" else c)
    return None
