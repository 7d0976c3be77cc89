"""benchmarks' qdq_cnn (int8 QDQ CNN): onnxedge's CPU provider against onnxruntime.

With both optimizers off, both run the same float emulation of the QDQ graph (dequantize, float
Conv/Gemm, quantize with round-half-to-even), so the int8 outputs must be equal. With both on, both
fuse the QDQ groups into integer QLinearConv / QLinearGlobalAveragePool kernels that requantize
the same way (onnxedge's qdq_fusion pass, issue #17): equal again. Across the two (fused against
float emulation) a value may round the other way: within 1 LSB.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ort = pytest.importorskip("onnxruntime")
from benchmarks import models as bm  # noqa: E402

from onnxedge import InferenceSession, model_io  # noqa: E402


@pytest.fixture(scope="module")
def qdq_path(tmp_path_factory) -> str:
    return bm.build_all(str(tmp_path_factory.mktemp("qdq")), ["qdq_cnn"])["qdq_cnn"]


def _ort(path: str, optimized: bool) -> "ort.InferenceSession":
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def test_structure_is_qdq_int8(qdq_path):
    m = model_io.load(qdq_path)
    ops = [n.op_type for n in m.graph.nodes]
    assert ops.count("QuantizeLinear") == 5 and ops.count("DequantizeLinear") == 10
    weights = [v for k, v in m.graph.initializers.items() if k.endswith("weight_quantized")]
    assert len(weights) == 3 and all(w.dtype == np.int8 for w in weights)
    assert m.graph.outputs[0].type.elem_type == 3   # int8


def _unoptimized(path: str) -> InferenceSession:
    from onnxedge import GraphOptimizationLevel, SessionOptions
    so = SessionOptions()
    so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    return InferenceSession(path, so)


@pytest.mark.parametrize("batch", [1, 4])
def test_matches_onnxruntime_exactly_unoptimized(qdq_path, batch):
    feeds = bm.make_inputs("qdq_cnn", batch=batch, seed=batch)
    want = _ort(qdq_path, optimized=False).run(None, feeds)[0]
    got = _unoptimized(qdq_path).run(None, feeds)[0]
    assert got.dtype == np.int8 and got.shape == (batch, 10)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 5   # not saturated to a constant


@pytest.mark.parametrize("batch", [1, 4])
def test_matches_onnxruntime_exactly_optimized(qdq_path, batch):
    """Both fuse the QDQ groups into integer kernels with the same requantization."""
    feeds = bm.make_inputs("qdq_cnn", batch=batch, seed=batch + 10)
    want = _ort(qdq_path, optimized=True).run(None, feeds)[0]
    got = InferenceSession(qdq_path).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)


def test_within_one_lsb_of_onnxruntime_integer_kernels(qdq_path):
    feeds = bm.make_inputs("qdq_cnn", batch=8, seed=3)
    want = _ort(qdq_path, optimized=True).run(None, feeds)[0]
    got = _unoptimized(qdq_path).run(None, feeds)[0]
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


def test_weight_dequantize_survives_optimization(qdq_path, tmp_path):
    """Constant folding keeps weight DequantizeLinear (as onnxruntime does) at level extended, also
    through .oxe; at level all the QDQ fusion takes the conv weights as int8 (QLinearConv)."""
    out = str(tmp_path / "q.oxe")
    from onnxedge import optimizer
    model_io.save(optimizer.optimize(model_io.load(qdq_path), "extended"), out)
    m = model_io.load(out)
    dq_inputs = {n.inputs[0] for n in m.graph.nodes if n.op_type == "DequantizeLinear"}
    assert {"conv1.weight_quantized", "conv2.weight_quantized", "fc.weight_quantized"} <= dq_inputs
    feeds = bm.make_inputs("qdq_cnn", batch=2)
    np.testing.assert_array_equal(InferenceSession(out).run(None, feeds)[0],
                                  _ort(qdq_path, optimized=False).run(None, feeds)[0])
    fused = optimizer.optimize(model_io.load(qdq_path), "all")
    convs = [n for n in fused.graph.nodes if n.op_type == "QLinearConv"]
    assert [n.inputs[3] for n in convs] == ["conv1.weight_quantized", "conv2.weight_quantized"]
    assert all(fused.graph.initializers[n.inputs[3]].dtype == np.int8 for n in convs)
