"""Helpers for the optimizer tests: build a model with onnx.helper, optimize it, and compare its
outputs with onnxruntime on the original model (or, where onnxruntime is missing, with onnxedge
running the original model unoptimized)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import ir, onnx_loader
from onnxedge.optimizer import optimize

try:
    import onnxruntime as ort
except ImportError:   # Python 3.8 test venv
    ort = None


def make_model(nodes: Sequence, inputs: Sequence, outputs: Sequence,
               inits: Optional[Dict[str, np.ndarray]] = None, opset: int = 17) -> bytes:
    """Serialized model from onnx.helper nodes and value infos, with numpy initializers."""
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs),
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def vi(name: str, shape: Optional[Sequence] = None, elem: int = TensorProto.FLOAT):
    """A tensor value info."""
    return helper.make_tensor_value_info(name, elem, shape)


def ops(model: ir.Model) -> List[str]:
    """The op types of a model's main graph, in order."""
    return [n.op_type for n in model.graph.nodes]


def optimized(data: bytes, level: str = "extended") -> ir.Model:
    """The IR of `data` after `optimize` at `level`."""
    return optimize(onnx_loader.load_model(data), level)


def reference(data: bytes, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """Outputs of the original model: onnxruntime when installed, else onnxedge unoptimized."""
    if ort is not None:
        return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxedge.InferenceSession(data, opts).run(None, feeds)


def assert_same_outputs(data: bytes, model: ir.Model, feeds: Dict[str, np.ndarray],
                        rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """The optimized IR `model` gives the reference's outputs (names, dtypes, shapes, values)."""
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = onnxedge.InferenceSession(model, opts).run(None, feeds)
    want = reference(data, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def rand(*shape: int, seed: int = 0, dtype=np.float32) -> np.ndarray:
    """Seeded standard-normal values."""
    return np.random.RandomState(seed).standard_normal(shape).astype(dtype)
