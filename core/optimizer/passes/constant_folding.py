"""Constant folding: Constant nodes and deterministic nodes whose inputs are all constants are
computed once with the CPU kernels and become initializers."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ... import ir
from ...kernels import registry
from ...kernels.registry import KernelContext
from ..context import PassContext

# Ops whose result is random or depends on more than their inputs.
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                    "Multinomial", "Bernoulli", "Dropout"}
# Kept as in onnxruntime: a weight's DequantizeLinear stays so that QDQ groups reach the
# providers (NNAPI, CoreML) with their int8 weights and scales.
KEEP = {"DequantizeLinear"}
MAX_BYTES = 16 << 20   # a folded result larger than this must not outgrow what it replaces


def _no_subgraph(graph: Any, feeds: Any) -> List[Any]:
    raise ValueError("subgraphs are not folded")


def evaluate(ctx: PassContext, node: ir.Node,
             args: List[Optional[np.ndarray]]) -> Optional[List[np.ndarray]]:
    """The node's outputs computed by its CPU kernel, or None when it cannot (or must not) be."""
    if node.domain not in ctx.opsets or node.subgraphs():
        return None
    opset = ctx.opsets[node.domain]
    spec = registry.find(node.domain, node.op_type, opset)
    if spec is None or any(isinstance(v, ir.AttrRef) for v in node.attributes.values()):
        return None
    sig = registry.signature(spec.fn)
    attrs = {k: v for k, v in node.attributes.items() if sig.accepts is None or k in sig.accepts}
    wanted = [bool(o) for o in node.outputs]
    try:
        with np.errstate(all="ignore"):
            if sig.wants_ctx:
                res = spec.fn(KernelContext(node, opset, wanted, _no_subgraph), *args, **attrs)
            else:
                res = spec.fn(*args, **attrs)
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
        size_in = sum(a.nbytes for a in args if a is not None)
        if sum(v.nbytes for v in values) > max(MAX_BYTES, size_in):
            continue
        for name, value in zip(node.outputs, values):
            if name:
                ctx.graph.initializers[name] = value
        ctx.replace([node], [])
        changed = True
    return changed
