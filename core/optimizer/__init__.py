"""Graph optimizer: rewrites a model's IR at onnxruntime's levels (basic, extended, all).

`optimize(model, level)` returns the rewritten model (the input model is left as it was); passes
live in `passes/`, one job per module, and `manager.py` runs them to a fixpoint.

An optimized model carries the stamp `metadata_props["onnxedge.optimized"] = "<level> <version>"`,
saved with it (`.oxe` or `.onnx`), so a device that opens it skips the passes it has had already
(they run again when this build's optimizer `VERSION` differs from the stamp's).

- basic: constant folding with the CPU kernels, Identity/Dropout elimination, shape-op folding,
  Reshape targets computed from the input's shape, Reshape/Squeeze/Unsqueeze/Flatten chains,
  dead-node elimination.
- all: the QDQ fusion first (QLinearConv / QLinearMatMul / QGemm / QLinearGlobalAveragePool
  from onnxruntime's QDQ groups, exact against onnxruntime's own fusion), then extended's passes.
- extended (and all): Conv+BatchNormalization, Conv/Gemm/MatMul + bias, Conv + shortcut Add,
  Gemm/Conv/MatMul + activation, LayerNormalization and Gelu from their decomposed forms, multi-head attention;
  onnxruntime's transformer contrib ops (Attention, MultiHeadAttention, SkipLayerNormalization,
  Gelu/BiasGelu/FastGelu) mapped onto these forms;
  fused nodes live in the domain `com.onnxedge` (kernels in their op's family module:
  `onnxedge.kernels.conv`, `.matmul`, `.normalization`, `.activation`, `.attention`).
"""
from __future__ import annotations

import logging
from typing import List, Union

from .. import ir
from ..errors import OnnxEdgeError
from ..optimizer_stamp import LEVELS, STAMP_KEY, VERSION, already_optimized, level_name

log = logging.getLogger("onnxedge")


def optimize(model: ir.Model, level: Union[str, int] = "all", keep_qdq: bool = False) -> ir.Model:
    """The model rewritten by every pass at `level` and below (a copy; `model` is unchanged).
    `keep_qdq` leaves QDQ groups as they are (no qdq_fusion; for providers that take them): the
    result is then stamped "extended", so a later session may still fuse them."""
    name = level_name(level)
    if name == "disable" or already_optimized(model, name):
        return model
    from .manager import PASSES, run_passes
    from .passes import qdq_fusion
    passes = PASSES[name]
    if keep_qdq and qdq_fusion.run in passes:
        passes = [p for p in passes if p is not qdq_fusion.run]
        name = "extended"
    out = copy_model(model)
    try:
        run_passes(out, out.graph, passes)
    except OnnxEdgeError:
        raise
    except Exception as e:  # a pass's own bug must not stop a model that runs unoptimized
        log.warning("graph optimizer failed on graph %r (%s: %s); the model runs unoptimized",
                    model.graph.name, type(e).__name__, e)
        return model
    out.metadata_props[STAMP_KEY] = "%s %d" % (name, VERSION)
    return out


def copy_graph(graph: ir.Graph) -> ir.Graph:
    """A copy of a graph whose nodes, lists and dicts can be edited; arrays are shared."""
    nodes = []
    for n in graph.nodes:
        attrs = {}
        for key, val in n.attributes.items():
            if isinstance(val, ir.Graph):
                val = copy_graph(val)
            elif isinstance(val, list) and val and isinstance(val[0], ir.Graph):
                val = [copy_graph(g) for g in val]
            attrs[key] = val
        nodes.append(ir.Node(n.op_type, n.inputs, n.outputs, attrs, n.domain, n.name, n.doc_string))
    def infos(values: List[ir.ValueInfo]) -> List[ir.ValueInfo]:
        return [ir.ValueInfo(v.name, v.type, v.doc_string) for v in values]

    return ir.Graph(graph.name, nodes, infos(graph.inputs), infos(graph.outputs),
                    dict(graph.initializers), dict(graph.value_info), graph.doc_string)


def copy_model(model: ir.Model) -> ir.Model:
    """A copy of a model that passes may rewrite without touching the original."""
    return ir.Model(copy_graph(model.graph), dict(model.opset_imports), model.ir_version,
                    model.producer_name, model.producer_version, model.domain,
                    model.model_version, model.doc_string, dict(model.metadata_props),
                    list(model.functions))


__all__ = ["LEVELS", "VERSION", "STAMP_KEY", "level_name", "optimize", "already_optimized",
           "copy_model", "copy_graph"]
