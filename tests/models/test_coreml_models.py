"""The benchmark models through CoreMLExecutionProvider in reference mode (its ML Programs run in
the numpy MIL interpreter) against the CPU provider alone: float outputs within rtol 1e-4, the
QDQ CNN's int8 logits equal; partition reports; every saved .mlpackage loads back in
coremltools; pre-translated artifacts are reused by key."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

pytest.importorskip("onnx")
ct = pytest.importorskip("coremltools", reason="coremltools (the MIL builder) needs Python >= 3.10")
from benchmarks import models as bm  # noqa: E402

from onnxedge import InferenceSession  # noqa: E402
from onnxedge.edge.bridge import Artifact, provider_of  # noqa: E402

COREML = "CoreMLExecutionProvider"
# Nodes of each model (after the optimizer) that stay on the CPU, by op type or node name, and
# a word of why.
FALLBACK = {
    "mlp": {},
    "resnet18": {},
    # the mask's Unsqueeze moves float32 values (cast_hoist puts the Cast first): Core ML takes it
    "bert_encoder": {"Gather": "not an op", "Cast": "not an op"},
    "qdq_cnn": {"output_quantize": "int8 output"},      # at iOS17
}


@pytest.fixture(scope="module")
def built():
    return {name: bm.build(name).SerializeToString() for name in FALLBACK}


def _session(model: bytes, save_dir: str = "", **options):
    opts = {"reference": True}
    opts.update(options)
    if save_dir:
        opts["save_dir"] = save_dir
    return InferenceSession(model, providers=[(COREML, opts), "CPUExecutionProvider"])


# what Core ML leaves goes to the host: the C engine in front of numpy, or numpy
HOST = ("CPUExecutionProvider", "X64ExecutionProvider", "NeonExecutionProvider")


def _check_partition(sess, name: str) -> None:
    fallback = FALLBACK[name]
    for r in sess.partition_report():
        why = fallback.get(r["op_type"], fallback.get(r["node"]))
        if why:
            assert r["provider"] in HOST, r
            assert why in r["fallback_reasons"][COREML], r
        else:
            assert r["provider"] == COREML, r


def _check_packages(folder: str, sess) -> None:
    prov = provider_of(sess, COREML)
    assert prov.artifacts
    for key, art in prov.artifacts.items():
        loaded = Artifact.load_from(os.path.join(folder, key))
        assert loaded.files == art.files and loaded.inputs == art.inputs
        spec = ct.models.MLModel(os.path.join(folder, key, "model.mlpackage"),
                                 skip_model_load=True).get_spec()
        assert spec.WhichOneof("Type") == "mlProgram"
        assert [i.name for i in spec.description.input] == \
            [art.meta["mil_inputs"][n] for n in art.inputs]
        assert [o.name for o in spec.description.output] == \
            [art.meta["mil_outputs"][n] for n in art.outputs]
        main = spec.mlProgram.functions["main"]
        ops = {op.type for op in main.block_specializations[main.opset].operations}
        assert ops == set(art.meta["mil_ops"])


@pytest.mark.parametrize("name", ["mlp", "resnet18", "bert_encoder"])
def test_float_model_matches_cpu(name, built, tmp_path):
    feeds = bm.make_inputs(name)
    want = InferenceSession(built[name], providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = _session(built[name], str(tmp_path))
    _check_partition(sess, name)
    got = sess.run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    _check_packages(str(tmp_path), sess)
    # a second session with the saved artifacts translates nothing and gives the same outputs
    again = _session(built[name], artifact_dir=str(tmp_path))
    assert provider_of(again, COREML).translated == []
    for g, w in zip(again.run(None, feeds), got):
        np.testing.assert_array_equal(g, w)


def test_qdq_cnn_ios17_exact_int8(built, tmp_path):
    """iOS17 has MIL quantize/dequantize: all of the QDQ CNN but its int8 output runs on Core ML,
    weights kept int8 (constexpr_affine_dequantize); the int8 logits equal the CPU's."""
    feeds = bm.make_inputs("qdq_cnn")
    want = InferenceSession(built["qdq_cnn"], providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = _session(built["qdq_cnn"], str(tmp_path), minimum_deployment_target="iOS17")
    _check_partition(sess, "qdq_cnn")
    got = sess.run(None, feeds)
    assert got[0].dtype == np.int8
    np.testing.assert_array_equal(got[0], want[0])
    ops = set()
    for art in provider_of(sess, COREML).artifacts.values():
        ops.update(art.meta["mil_ops"])
    assert {"quantize", "dequantize", "constexpr_affine_dequantize", "conv"} <= ops
    _check_packages(str(tmp_path), sess)


def test_qdq_cnn_ios15_folds_weights_and_leaves_activation_qdq(built):
    """Below iOS17 activation Q/DQ stay on the CPU, weight DQ folds into float constants."""
    feeds = bm.make_inputs("qdq_cnn")
    want = InferenceSession(built["qdq_cnn"], providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = _session(built["qdq_cnn"])
    report = sess.partition_report()
    acts = [r for r in report if r["op_type"] in ("QuantizeLinear", "DequantizeLinear")
            and r["provider"] in HOST]
    assert acts and all("iOS17" in r["fallback_reasons"][COREML] or "int8 output" in
                        r["fallback_reasons"][COREML] for r in acts)
    assert any(r["op_type"] == "FusedConv" and r["provider"] == COREML for r in report)
    np.testing.assert_array_equal(sess.run(None, feeds)[0], want[0])


def test_float16_compute_precision_close(built):
    feeds = bm.make_inputs("mlp")
    want = InferenceSession(built["mlp"], providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = _session(built["mlp"], compute_precision="float16", minimum_deployment_target="iOS16")
    arts = list(provider_of(sess, COREML).artifacts.values())
    assert arts[0].meta["mil_ops"].get("cast")     # fp32 inputs cast to fp16 and back
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=2e-2, atol=2e-3)
