"""Small helpers the pattern-matching passes share."""
from __future__ import annotations

from typing import Optional

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
