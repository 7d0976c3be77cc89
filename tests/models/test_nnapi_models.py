"""The benchmark models through NnapiExecutionProvider in reference mode (translation -> .nnapi
bytes -> numpy NNAPI interpreter) against the CPU provider alone.

Float models: rtol 1e-4. The QDQ CNN: int8 outputs compared exactly. The two paths round
differently only on exact ties: the CPU's QuantizeLinear rounds half to even after a float32
convolution, NNAPI's QUANTIZE and quantized CONV_2D / FULLY_CONNECTED round half away from zero
after an exact int32 accumulation; a product landing within float32 error of a .5 tie could
differ by one step. The seeded inputs here hit no such tie (measured: 100% equal on 64 images),
so equality is asserted, with a <= 1 LSB bound on a second, larger batch.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from onnxedge import GraphOptimizationLevel, InferenceSession, SessionOptions
from onnxedge.edge.nnapi import codes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
models = pytest.importorskip("benchmarks.models")

NNAPI = "NnapiExecutionProvider"


def _sessions(name: str, batch: int, level: int = 4, optimize: bool = True, **opts):
    data = models.build(name).SerializeToString()
    so = SessionOptions()
    if not optimize:
        so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    options = dict({"reference": True, "dims": {"batch": batch}, "feature_level": level}, **opts)
    nn = InferenceSession(data, so, providers=[NNAPI, "CPUExecutionProvider"],
                          provider_options=[options, {}])
    cpu = InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return nn, cpu


def _provider(sess):
    return [p for p in sess._providers if p.name == NNAPI][0]


def _on_nnapi(sess) -> list:
    return [r["op_type"] for r in sess.partition_report() if r["provider"] == NNAPI]


@pytest.mark.parametrize("name,level", [("mlp", 4), ("mlp", 1), ("resnet18", 4), ("resnet18", 1)])
def test_float_models_fully_claimed(name, level):
    """MLP and ResNet-18: every node on NNAPI, one subgraph, outputs within rtol 1e-4."""
    nn, cpu = _sessions(name, 1, level)
    feeds = models.make_inputs(name, batch=1)
    report = nn.partition_report()
    assert all(r["provider"] == NNAPI for r in report), [
        (r["op_type"], r["fallback_reasons"]) for r in report if r["provider"] != NNAPI]
    prov = _provider(nn)
    assert len(prov.artifacts) == 1
    art = list(prov.artifacts.values())[0]
    assert art.meta["required_feature_level"] <= level
    got, want = nn.run(None, feeds), cpu.run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    if name == "resnet18":
        assert {"CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D", "ADD", "FULLY_CONNECTED"} <= set(
            art.meta["ops"])
        assert art.meta["layouts"]["input"] == "NHWC"


def test_bert_encoder_partial():
    """BERT: the linear layers, residual adds and masks go to NNAPI; Gather, LayerNorm,
    attention and Gelu stay on the CPU; the result still matches."""
    nn, cpu = _sessions("bert_encoder", 1)
    feeds = models.make_inputs("bert_encoder", batch=1)
    on = _on_nnapi(nn)
    assert on.count("FusedMatMul") >= 16, on
    reasons = {r["op_type"]: r["fallback_reasons"].get(NNAPI, "") for r in nn.partition_report()
               if r["provider"] != NNAPI}
    assert "no NNAPI translation" in reasons["Gather"]
    np.testing.assert_allclose(nn.run(None, feeds)[0], cpu.run(None, feeds)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("optimize", [True, False])
def test_qdq_cnn_int8(optimize):
    """The QDQ CNN becomes quantized CONV_2D / FULLY_CONNECTED on TENSOR_QUANT8_ASYMM_SIGNED
    operands; int8 logits equal the CPU provider's."""
    nn, cpu = _sessions("qdq_cnn", 64, optimize=optimize)
    feeds = models.make_inputs("qdq_cnn", batch=64)
    assert all(r["provider"] == NNAPI for r in nn.partition_report())
    prov = _provider(nn)
    model = prov.model_of(list(prov.artifacts.values())[0])
    quantized = [codes.OPERATION_NAMES[op.code] for op in model.operations
                 if model.operands[op.inputs[0]].type == codes.TENSOR_QUANT8_ASYMM_SIGNED
                 and op.code in (codes.CONV_2D, codes.FULLY_CONNECTED)]
    assert quantized == ["CONV_2D", "CONV_2D", "FULLY_CONNECTED"]
    got, want = nn.run(None, feeds)[0], cpu.run(None, feeds)[0]
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    rng = np.random.default_rng(7)
    big = {"input": (rng.standard_normal((64, 3, 32, 32)) * 1.5).astype(np.float32)}
    diff = np.abs(nn.run(None, big)[0].astype(int) - cpu.run(None, big)[0].astype(int))
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.99


def test_qdq_cnn_matches_onnxruntime():
    """Independent reference: onnxruntime's QDQ result equals the NNAPI translation's."""
    ort = pytest.importorskip("onnxruntime")
    nn, _ = _sessions("qdq_cnn", 64)
    feeds = models.make_inputs("qdq_cnn", batch=64)
    ref = ort.InferenceSession(models.build("qdq_cnn").SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(nn.run(None, feeds)[0], ref)


def test_qdq_cnn_below_feature_level_4():
    """int8 needs TENSOR_QUANT8_ASYMM_SIGNED (level 4): at level 3 the Q/DQ nodes stay on the
    host (CPU or the C engine) with that reason, the float convolutions still go to NNAPI."""
    nn, cpu = _sessions("qdq_cnn", 2, level=3)
    report = nn.partition_report()
    q = [r for r in report if r["op_type"] == "QuantizeLinear"]
    assert q and all(r["provider"] != NNAPI for r in q)   # the CPU's, or the C engine's
    assert "feature level >= 4" in q[0]["fallback_reasons"][NNAPI]
    feeds = models.make_inputs("qdq_cnn", batch=2)
    np.testing.assert_array_equal(nn.run(None, feeds)[0], cpu.run(None, feeds)[0])


def test_artifacts_load_without_translator(tmp_path, monkeypatch):
    """Artifacts saved by one session are loaded by key by another that cannot translate."""
    from onnxedge.edge.nnapi.provider import NnapiExecutionProvider
    nn, cpu = _sessions("resnet18", 1, save_dir=str(tmp_path))
    keys = list(_provider(nn).artifacts)
    assert sorted(os.listdir(str(tmp_path))) == sorted(keys)
    monkeypatch.setattr(NnapiExecutionProvider, "translator_available", classmethod(lambda c: False))
    monkeypatch.setattr(NnapiExecutionProvider, "translate", None)
    again, _ = _sessions("resnet18", 1, artifact_dir=str(tmp_path))
    assert _provider(again).translated == []
    feeds = models.make_inputs("resnet18", batch=1)
    np.testing.assert_allclose(again.run(None, feeds)[0], cpu.run(None, feeds)[0], rtol=1e-4, atol=1e-5)
