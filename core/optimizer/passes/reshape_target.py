"""Reshape targets computed from shapes, as exporters write `x.size()[:-1] + (h, d)` (Shape,
Slice/Gather, Unsqueeze, Concat), become constants: an entry that is the reshaped input's own dim
at the same position turns into 0 ("copy this dim"), which Reshape (allowzero=0) means anyway.

A dim may also be read off another value that provably has the same size there: dims are traced
back through ops that keep them (elementwise ops with a constant of lower rank, MatMul by a 2-D
constant on every axis but the last, Transpose, normalizations and activations)."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ... import ir
from ..context import FUSED_DOMAIN, PassContext
from ._match import is_op

Dim = Any   # an int, or (value name, axis): that axis of that value at run time

# ops whose output has their first input's shape
_SAME_SHAPE = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Neg", "Abs",
               "Identity", "Cast", "Gelu", "LayerNormalization", "Softmax", "Dropout", "Clip",
               "HardSigmoid", "Elu", "Softplus", "Reciprocal"}
_BINARY = {"Add", "Sub", "Mul", "Div"}


def root(ctx: PassContext, name: str, axis: int, depth: int = 0) -> Any:
    """The (value, axis) furthest back in the graph whose size provably equals dim `axis` of
    `name` (both axes counted from the front)."""
    node = ctx.producer_of(name)
    shape = ctx.shape(name)
    if node is None or depth > 64 or shape is None or not 0 <= axis < len(shape) \
            or node.domain not in ("", FUSED_DOMAIN):
        return (name, axis)
    op, ins = node.op_type, node.inputs
    src = None
    if op in _SAME_SHAPE or (node.domain and op == "FusedConv"):
        src = (ins[0], axis) if op != "FusedConv" else None
    elif op == "Transpose":
        perm = node.attributes.get("perm") or list(range(len(shape)))[::-1]
        src = (ins[0], int(perm[axis]))
    elif op in ("MatMul", "FusedMatMul") and axis < len(shape) - 1:
        w = ctx.const(ins[1])
        if w is not None and w.ndim == 2:
            src = (ins[0], axis)
    elif op in _BINARY and len(ins) == 2 and not node.domain:
        for data, other in ((ins[0], ins[1]), (ins[1], ins[0])):
            c = ctx.const(other)
            if c is not None and c.ndim <= len(shape) - 1 - axis:   # broadcasts below this axis
                data_shape = ctx.shape(data)
                if data_shape is not None and len(data_shape) == len(shape):
                    src = (data, axis)
                break
    if src is None:
        return (name, axis)
    return root(ctx, src[0], src[1], depth + 1)


def _norm(i: int, n: int) -> int:
    return min(max(i + n if i < 0 else i, 0), n)


def _shape_dims(ctx: PassContext, node: ir.Node) -> Optional[List[Dim]]:
    shape = ctx.shape(node.inputs[0])
    if shape is None:
        return None
    rank = len(shape)
    start = _norm(int(node.attributes.get("start", 0)), rank)
    end = _norm(int(node.attributes.get("end", rank)), rank)
    return [(node.inputs[0], i) for i in range(start, end)]


def _ints(ctx: PassContext, name: str) -> Optional[List[int]]:
    value = ctx.const(name) if name else None
    if value is None or value.dtype.kind not in "iu":
        return None
    return [int(v) for v in value.reshape(-1)]


def dims(ctx: PassContext, name: str, depth: int = 0) -> Optional[List[Dim]]:
    """The elements of a 1-D (or scalar) int64 shape value, each known or a symbolic dim."""
    known = _ints(ctx, name)
    if known is not None or depth > 8:
        return known
    node = ctx.producer_of(name)
    if node is None or node.domain:
        return None
    op, ins = node.op_type, node.inputs
    if op == "Shape":
        return _shape_dims(ctx, node)
    if op == "Concat" and int(node.attributes.get("axis", 0)) in (0, -1):
        out: List[Dim] = []
        for part in ins:
            got = dims(ctx, part, depth + 1)
            if got is None:
                return None
            out.extend(got)
        return out
    if op in ("Unsqueeze", "Squeeze", "Cast") and (op != "Cast" or node.attributes.get("to") == 7):
        return dims(ctx, ins[0], depth + 1)   # only scalars/1-D values travel here
    src = dims(ctx, ins[0], depth + 1) if ins else None
    if src is None:
        return None
    if op == "Gather" and int(node.attributes.get("axis", 0)) == 0:
        idx = _ints(ctx, ins[1])
        if idx is None or any(not -len(src) <= i < len(src) for i in idx):
            return None
        return [src[i] for i in idx]
    if op == "Slice" and len(ins) >= 3:
        starts, ends = _ints(ctx, ins[1]), _ints(ctx, ins[2])
        axes = _ints(ctx, ins[3]) if len(ins) > 3 and ins[3] else [0]
        steps = _ints(ctx, ins[4]) if len(ins) > 4 and ins[4] else [1]
        if not starts or not ends or axes not in ([0], [-1]) or steps != [1]:
            return None
        return src[_norm(starts[0], len(src)):_norm(ends[0], len(src))]
    return None


def run(ctx: PassContext) -> bool:
    """Give every Reshape whose target resolves this way a constant target; True when one did."""
    changed = False
    for node in list(ctx.graph.nodes):
        if not is_op(node, "Reshape") or len(node.inputs) < 2 \
                or ctx.const(node.inputs[1]) is not None or int(node.attributes.get("allowzero", 0)):
            continue
        target = dims(ctx, node.inputs[1])
        if target is None:
            continue
        values = []
        for i, d in enumerate(target):
            if isinstance(d, int):
                values.append(d)
            elif d == (node.inputs[0], i) or root(ctx, d[0], d[1]) == root(ctx, node.inputs[0], i):
                values.append(0)
            else:
                break
        else:
            shape = ctx.add_initializer(node.outputs[0] + "_shape", np.array(values, np.int64))
            ctx.replace([node], [ir.Node("Reshape", [node.inputs[0], shape], node.outputs,
                                         node.attributes, name=node.name)])
            changed = True
    return changed
