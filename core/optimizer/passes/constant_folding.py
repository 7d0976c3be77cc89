"""Constant folding: Constant nodes and deterministic nodes whose inputs are all constants are
computed once with the CPU kernels and become initializers.

As in onnxruntime, large results stay unfolded: a result may take at most
max(MAX_BYTES, the bytes of the node's inputs). The size is checked before anything is computed:
kernels that size their output from input values (ConstantOfShape, Expand, Tile, Range, Pad,
Resize, ...) check it against that budget before they allocate, and broadcasting and MatMul-like
nodes are estimated from their input shapes here. A 150-byte model asking for a 1.6 GB constant
therefore costs nothing at session creation; the node runs (and fails under the session's own
budget) at run time.
"""
from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence

import numpy as np

from ... import ir
from ...budgets import RunLimits, element_count, use_limits
from ...errors import InvalidArgument
from ...kernels import registry
from ...numeric import broadcast_shape
from ...kernels.registry import KernelContext
from ..context import PassContext

log = logging.getLogger("onnxedge")

# Ops whose result is random or depends on more than their inputs.
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}
# Kept as in onnxruntime: a weight's DequantizeLinear stays so that QDQ groups reach the
# providers (NNAPI, CoreML) with their int8 weights and scales.
KEEP = {"DequantizeLinear"}
MAX_BYTES = 16 << 20   # a folded result larger than this must not outgrow what it replaces
# Ops whose output has the broadcast shape of their inputs (an outer "product" of two small
# constants can be huge).
BROADCASTING = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Where",
                "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu", "Clip"}


def _no_subgraph(graph: Any, feeds: Any) -> List[Any]:
    raise ValueError("subgraphs are not folded")


def fold_budget(args: Sequence[Optional[np.ndarray]]) -> int:
    """The most bytes one folded result of a node with these constant inputs may take."""
    return max(MAX_BYTES, sum(a.nbytes for a in args if a is not None))


def _matmul_shape(a: Sequence[int], b: Sequence[int]) -> Optional[List[int]]:
    """MatMul's output shape from its input shapes (None when they do not fit together)."""
    if len(a) < 2 or len(b) < 2:
        return None
    try:
        batch = broadcast_shape([a[:-2], b[:-2]], "MatMul")
    except InvalidArgument:
        return None
    return list(batch) + [a[-2], b[-1]]


def estimated_elements(node: ir.Node, args: Sequence[Optional[np.ndarray]]) -> Optional[int]:
    """An estimate from input shapes alone of the largest output's element count, for nodes
    whose output can be much larger than their inputs (broadcasting, MatMul, Gemm); None when
    the shapes say nothing (the kernels that size outputs from values check for themselves)."""
    shapes = [a.shape for a in args if a is not None]
    if len(shapes) < 2:
        return None
    if node.op_type == "Gemm" and len(shapes[0]) == len(shapes[1]) == 2:
        a, b = shapes[0], shapes[1]
        rows = a[1] if node.attributes.get("transA") else a[0]
        cols = b[0] if node.attributes.get("transB") else b[1]
        return element_count([rows, cols])
    if node.op_type in ("MatMul", "MatMulInteger"):
        out = _matmul_shape(shapes[0], shapes[1])
        return None if out is None else element_count(out)
    if node.op_type not in BROADCASTING:
        return None
    try:
        return element_count(broadcast_shape(shapes, node.op_type))
    except InvalidArgument:
        return None


def _too_big(node: ir.Node, args: Sequence[Optional[np.ndarray]], budget: int) -> bool:
    """True when the shape estimate already puts an output over the folding budget."""
    count = estimated_elements(node, args)
    if count is None:
        return False
    itemsize = max([a.dtype.itemsize for a in args if a is not None] + [1])
    return count * itemsize > budget


def evaluate(ctx: PassContext, node: ir.Node,
             args: List[Optional[np.ndarray]]) -> Optional[List[np.ndarray]]:
    """The node's outputs computed by its CPU kernel, or None when it cannot (or must not) be:
    among others when an output would take more than `fold_budget(args)` bytes, which is checked
    before the kernel allocates it."""
    if node.domain not in ctx.opsets or node.subgraphs():
        return None
    opset = ctx.opsets[node.domain]
    spec = registry.find(node.domain, node.op_type, opset)
    if spec is None or any(isinstance(v, ir.AttrRef) for v in node.attributes.values()):
        return None
    sig = registry.signature(spec.fn)
    attrs = {k: v for k, v in node.attributes.items() if sig.accepts is None or k in sig.accepts}
    wanted = [bool(o) for o in node.outputs]
    budget = fold_budget(args)
    if _too_big(node, args, budget):
        return None
    try:
        with np.errstate(all="ignore"), use_limits(RunLimits(budget)):
            if sig.wants_ctx:
                res = spec.fn(KernelContext(node, opset, wanted, _no_subgraph), *args, **attrs)
            else:
                res = spec.fn(*args, **attrs)
    except MemoryError:
        log.warning("constant folding: %s ran out of memory; it is left to run at run time",
                    node.describe())
        return None
    except Exception:   # leave the node to fail at run time with the node named
        return None
    res = list(res) if type(res) is tuple else [res]
    if len(res) < len(node.outputs):
        return None
    out = []
    for value in res[:len(node.outputs)]:
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            return None
        out.append(value)
    return out


def run(ctx: PassContext) -> bool:
    """Fold every foldable node; True when one was folded."""
    changed = False
    for node in list(ctx.graph.nodes):
        if node.op_type in NONDETERMINISTIC or (node.op_type in KEEP and not node.domain) \
                or any(o in ctx.outputs for o in node.outputs):
            continue
        if node.op_type != "Constant" or node.domain:
            present = [n for n in node.inputs if n]
            if not present or any(ctx.const(n) is None for n in present):
                continue
        args = [ctx.const(n) if n else None for n in node.inputs]
        values = evaluate(ctx, node, args)
        if values is None:
            continue
        if sum(v.nbytes for v in values) > fold_budget(args):
            continue
        for name, value in zip(node.outputs, values):
            if name:
                ctx.graph.initializers[name] = value
        ctx.replace([node], [])
        changed = True
    return changed
