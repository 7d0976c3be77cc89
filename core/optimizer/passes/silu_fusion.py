"""SiLU and HardSwish fusion: activations exporters write as chains become one activation.

* SiLU, x * Sigmoid(x) (torch's nn.SiLU, YOLO's Conv blocks): when x comes from a Conv / Gemm /
  MatMul that nothing else reads, the fused op of activation_fusion with activation "Silu"
  (there is no ai.onnx SiLU op to write otherwise, so elsewhere the two nodes stay).
* HardSwish written as x * HardSigmoid(x, 1/6, 1/2) (torch below opset 14), x * Clip(x + 3, 0, 6)
  / 6 or x * (Clip(x + 3, 0, 6) / 6) (Relu6 as Clip; a Mul by 1/6 in place of the Div): ai.onnx
  HardSwish from opset 14 (activation_fusion then fuses it like any activation), before that the
  fused activation "HardSwish" of a producing Conv / Gemm / MatMul.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ... import ir
from ..context import PassContext
from . import activation_fusion
from ._match import is_const, is_op, other_input, scale_operand, sole_user

SIXTH = 1.0 / 6.0


def _fuse_into_producer(ctx: PassContext, x: str, chain: List[ir.Node], out: str, act: str) -> bool:
    """Fuse `chain` (every reader of x among its nodes) into x's producer as activation `act`,
    when x is read by the chain alone and is no graph output."""
    prod = ctx.producer_of(x)
    if prod is None or x in ctx.outputs or not ctx.is_float(x):
        return False
    if {id(n) for n in ctx.live_users(x)} != {id(n) for n in chain if x in n.inputs}:
        return False
    return activation_fusion.fuse(ctx, prod, chain, out, act, [])


def _silu(ctx: PassContext, sig: ir.Node) -> bool:
    """x * Sigmoid(x) (either order) into x's producer."""
    x = sig.inputs[0]
    mul = sole_user(ctx, sig.outputs[0], "Mul")
    if mul is None or other_input(mul, sig.outputs[0]) != x:
        return False
    return _fuse_into_producer(ctx, x, [sig, mul], mul.outputs[0], "Silu")


def _scaled(ctx: PassContext, name: str, factor: float) -> Optional[ir.Node]:
    """The sole reader of `name` when it multiplies it by `factor` (Mul by c or Div by 1/c)."""
    node = ctx.only_user(name)
    if node is None or node.domain or node.op_type not in ("Mul", "Div"):
        return None
    got = scale_operand(ctx, node, 1)
    if got is None or got[0] != name or abs(got[1] - factor) > 1e-3 * factor:
        return None
    return node


def _gate(ctx: PassContext, node: ir.Node) -> Optional[Tuple[str, List[ir.Node], float]]:
    """(x, nodes, factor) when `node` computes factor * HardSigmoid-gate of x: HardSigmoid(x,
    1/6, 1/2) (factor 1) or Clip(x + 3, 0, 6) (factor 6)."""
    if is_op(node, "HardSigmoid"):
        a = node.attributes
        if abs(float(a.get("alpha", 0.2)) - SIXTH) <= 1e-6 and abs(float(a.get("beta", 0.5)) - 0.5) <= 1e-6:
            return node.inputs[0], [node], 1.0
        return None
    if not is_op(node, "Clip"):
        return None
    if ctx.opsets.get("", 0) < 11:
        lo, hi = node.attributes.get("min"), node.attributes.get("max")
        lo = None if lo is None else float(lo)
        hi = None if hi is None else float(hi)
    else:
        ins = list(node.inputs) + ["", ""]
        lo = ctx.scalar(ins[1]) if ins[1] else None
        hi = ctx.scalar(ins[2]) if ins[2] else None
    if lo != 0.0 or hi is None or abs(hi - 6.0) > 1e-6:
        return None
    add = ctx.producer_of(node.inputs[0])
    if not is_op(add, "Add") or not ctx.private(node.inputs[0]):
        return None
    for x, c in (add.inputs, add.inputs[::-1]):
        if is_const(ctx, c, 3.0, 1e-6) and ctx.producer_of(c) is None:
            return x, [add, node], 6.0
    return None


def _hardswish(ctx: PassContext, node: ir.Node) -> Optional[Tuple[str, List[ir.Node], str]]:
    """(x, the chain's nodes, its output) of a HardSwish chain whose gate is `node`."""
    got = _gate(ctx, node)
    if got is None:
        return None
    x, nodes, factor = got
    g = node.outputs[0]
    if factor != 1.0:   # x * (gate / 6): scale the gate first
        div = _scaled(ctx, g, 1.0 / factor)
        if div is not None:
            nodes, g, factor = nodes + [div], div.outputs[0], 1.0
    mul = sole_user(ctx, g, "Mul")
    if mul is None or other_input(mul, g) != x:
        return None
    nodes, out = nodes + [mul], mul.outputs[0]
    if factor != 1.0:   # (x * gate) / 6
        div = _scaled(ctx, out, 1.0 / factor)
        if div is None:
            return None
        nodes, out = nodes + [div], div.outputs[0]
    return x, nodes, out


def run(ctx: PassContext) -> bool:
    """Fuse every SiLU and HardSwish chain (see the module docstring); True when one was."""
    changed = False
    opset = ctx.opsets.get("", 0)
    for node in list(ctx.graph.nodes):
        if id(node) in ctx.removed or node.domain or not node.inputs:
            continue
        if node.op_type == "Sigmoid":
            changed |= _silu(ctx, node)
            continue
        chain = _hardswish(ctx, node) if node.op_type in ("HardSigmoid", "Clip") else None
        if chain is None or not ctx.is_float(chain[0]):
            continue
        x, nodes, out = chain
        if opset >= 14:
            ctx.replace(nodes, [ir.Node("HardSwish", [x], [out], {}, name=node.name)])
            changed = True
        else:
            changed |= _fuse_into_producer(ctx, x, nodes, out, "HardSwish")
    return changed
