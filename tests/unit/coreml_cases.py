"""Helpers for the CoreML bridge tests: run ONNX node-suite cases through translate + interpret."""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from onnxedge import model_io
from onnxedge.edge import bridge
from onnxedge.providers.base import CompileContext
from onnxedge.session import InferenceSession, SessionOptions

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "conformance"))
import cases  # noqa: E402


# Inputs Core ML needs as constants (a model's weights); the node suite feeds them as inputs.
FREEZE = {"Conv": (1, 2), "ConvTranspose": (1, 2), "BatchNormalization": (1, 2, 3, 4),
          "LayerNormalization": (1, 2),
          "Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "ReduceMean": (1,), "Clip": (1, 2)}


def provider(**options):
    """A CoreML provider in reference mode (off macOS)."""
    from onnxedge.edge.coreml.provider import CoreMLExecutionProvider
    opts = {"reference": True}
    opts.update(options)
    return CoreMLExecutionProvider(opts)


def case_infos(ops) -> List[cases.CaseInfo]:
    """Node-suite cases (not the *_expanded function bodies) of these ai.onnx ops."""
    return [c for c in cases.load_manifest() if c.op_type in ops and c.domain in ("", "ai.onnx")
            and "_expanded" not in c.name]


def cpu_outputs(model_bytes: bytes, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """The CPU provider's outputs, optimizer off (the reference the bridge must match)."""
    opts = SessionOptions()
    opts.graph_optimization_level = 0
    return InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def translate_case(case: cases.Case, prov) -> Tuple[Optional[str], object, Dict[str, np.ndarray]]:
    """(reason the graph is not fully claimed or None, artifact, feeds) for data set 0."""
    model = model_io.load(case.model)
    graph = model.graph
    feeds = dict(zip(case.input_names, case.data_sets[0][0]))
    for node in graph.nodes:      # the suite feeds weights, shapes, axes: make them initializers
        for p in FREEZE.get(node.op_type, ()):
            name = node.inputs[p] if p < len(node.inputs) else ""
            if name in feeds:
                graph.initializers[name] = np.asarray(feeds.pop(name))
                graph.inputs = [v for v in graph.inputs if v.name != name]
        if node.op_type == "LayerNormalization" and len(node.outputs) > 1:
            # the suite also outputs Mean / InvStdDev, which Core ML's layer_norm does not give:
            # check Y alone (the first output, compared first)
            graph.outputs = [v for v in graph.outputs if v.name not in node.outputs[1:]]
            node.outputs = node.outputs[:1]
    opsets = dict(model.opset_imports)
    shapes = bridge.static_shapes(graph, {k: np.shape(v) for k, v in feeds.items()}, opsets)
    ctx = CompileContext(opsets, {})
    for node in graph.nodes:
        why = prov.node_reason(node, graph, ctx, shapes)
        if why:
            return why, None, feeds
    idx = list(range(len(graph.nodes)))
    sub = bridge.subgraph(graph, idx, shapes)
    art = prov.translate(sub, idx, ctx)
    return None, art, feeds
