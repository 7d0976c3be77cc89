"""The optimizer on the benchmark models: how much it removes, and outputs still match
onnxruntime."""
from __future__ import annotations

import os
import sys
from typing import Dict

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
import onnxedge  # noqa: E402
from onnxedge import onnx_loader  # noqa: E402
from onnxedge.optimizer import optimize  # noqa: E402
from benchmarks import models  # noqa: E402


@pytest.fixture(scope="module")
def model_paths(tmp_path_factory) -> Dict[str, str]:
    return models.build_all(str(tmp_path_factory.mktemp("optimizer_models")))


def _check_outputs(path: str, optimized, name: str, batch: int) -> None:
    feeds = models.make_inputs(name, batch=batch, seed=batch)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = onnxedge.InferenceSession(optimized, opts).run(None, feeds)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def _gelus(model) -> int:
    """Gelu nodes of an optimized model, standalone or as the activation fused into the MatMul
    before them (activation_fusion puts Gelu in the MatMul's epilogue)."""
    return sum(1 for n in model.graph.nodes if n.domain == "com.onnxedge" and
               (n.op_type == "Gelu" or str(n.attributes.get("activation", "")) in ("Gelu", "GeluTanh")))


def test_bert_encoder_loses_at_least_40_percent_of_its_nodes(model_paths):
    model = onnx_loader.load_model(model_paths["bert_encoder"])
    out = optimize(model, "extended")
    before, after = len(model.graph.nodes), len(out.graph.nodes)
    assert after <= 0.6 * before, (before, after)
    kinds = [(n.domain, n.op_type) for n in out.graph.nodes]
    assert kinds.count(("com.onnxedge", "MultiHeadAttention")) == models.BERT_LAYERS
    assert _gelus(out) == models.BERT_LAYERS
    assert ("", "Softmax") not in kinds and ("", "Erf") not in kinds and ("", "Constant") not in kinds
    _check_outputs(model_paths["bert_encoder"], out, "bert_encoder", 2)


def test_resnet18_has_no_batchnorm_left(model_paths):
    model = onnx_loader.load_model(model_paths["resnet18"])
    out = optimize(model, "extended")
    ops = [n.op_type for n in out.graph.nodes]
    assert "BatchNormalization" not in ops and ops.count("FusedConv") >= 9
    _check_outputs(model_paths["resnet18"], out, "resnet18", 1)


def test_mlp_is_fused_gemms(model_paths):
    model = onnx_loader.load_model(model_paths["mlp"])
    out = optimize(model, "all")
    assert [n.op_type for n in out.graph.nodes] == ["FusedGemm", "FusedGemm", "Gemm", "Softmax"]
    _check_outputs(model_paths["mlp"], out, "mlp", 3)


def _exported_style_encoder_layer(hidden: int = 32, heads: int = 4, ffn: int = 64) -> bytes:
    """One encoder layer as torch's exporter writes it at opset 13: decomposed LayerNorm, tanh
    GELU ("gelu_new"), Reshape targets computed from Shape, sequence length left symbolic."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.RandomState(0)
    n = helper.make_node
    nodes = []
    inits = {"zero": np.array([0], np.int64), "m1": np.array([-1], np.int64),
             "m2": np.array([-2], np.int64), "two": np.array(2.0, np.float32),
             "eps": np.array(1e-12, np.float32), "hd": np.array([heads, hidden // heads], np.int64),
             "hid": np.array([hidden], np.int64), "scale": np.array(np.sqrt(hidden // heads), np.float32),
             "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32),
             "three": np.array(3.0, np.float32), "gk": np.array(0.044715, np.float32),
             "s2pi": np.array(np.sqrt(2 / np.pi), np.float32), "neg": np.array(-10000.0, np.float32),
             "ax12": np.array([1, 2], np.int64)}

    def w(name, *shape):
        inits[name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        return name

    def linear(x, name, n_in, n_out):
        nodes.extend([n("MatMul", [x, w(name + ".w", n_in, n_out)], [name + ".mm"]),
                      n("Add", [w(name + ".b", n_out), name + ".mm"], [name])])
        return name

    def layer_norm(x, name):
        nodes.extend([n("ReduceMean", [x], [name + ".mean"], axes=[-1]),
                      n("Sub", [x, name + ".mean"], [name + ".d"]),
                      n("Pow", [name + ".d", "two"], [name + ".sq"]),
                      n("ReduceMean", [name + ".sq"], [name + ".var"], axes=[-1]),
                      n("Add", [name + ".var", "eps"], [name + ".ve"]),
                      n("Sqrt", [name + ".ve"], [name + ".std"]),
                      n("Div", [name + ".d", name + ".std"], [name + ".n"]),
                      n("Mul", [name + ".n", w(name + ".g", hidden)], [name + ".s"]),
                      n("Add", [name + ".s", w(name + ".beta", hidden)], [name])])
        return name

    def heads_first(x, name, perm):
        nodes.extend([n("Shape", [x], [name + ".shape"]),
                      n("Slice", [name + ".shape", "zero", "m1"], [name + ".lead"]),
                      n("Concat", [name + ".lead", "hd"], [name + ".target"], axis=0),
                      n("Reshape", [x, name + ".target"], [name + ".4d"]),
                      n("Transpose", [name + ".4d"], [name], perm=perm)])
        return name

    nodes.extend([n("Unsqueeze", ["mask", "ax12"], ["m.u"]), n("Cast", ["m.u"], ["m.f"], to=1),
                  n("Sub", ["one", "m.f"], ["m.inv"]), n("Mul", ["m.inv", "neg"], ["m.add"])])
    x = layer_norm("x", "ln0")
    q = heads_first(linear(x, "q", hidden, hidden), "qh", [0, 2, 1, 3])
    k = heads_first(linear(x, "k", hidden, hidden), "kh", [0, 2, 3, 1])
    v = heads_first(linear(x, "v", hidden, hidden), "vh", [0, 2, 1, 3])
    nodes.extend([n("MatMul", [q, k], ["sc"]), n("Div", ["sc", "scale"], ["sc.s"]),
                  n("Add", ["sc.s", "m.add"], ["sc.m"]), n("Softmax", ["sc.m"], ["p"], axis=-1),
                  n("MatMul", ["p", v], ["ctx"]), n("Transpose", ["ctx"], ["ctx.t"], perm=[0, 2, 1, 3]),
                  n("Shape", ["ctx.t"], ["ctx.shape"]), n("Slice", ["ctx.shape", "zero", "m2"], ["ctx.lead"]),
                  n("Concat", ["ctx.lead", "hid"], ["ctx.target"], axis=0),
                  n("Reshape", ["ctx.t", "ctx.target"], ["ctx.m"])])
    a = linear("ctx.m", "o", hidden, hidden)
    nodes.append(n("Add", [a, x], ["res1"]))
    h = layer_norm("res1", "ln1")
    f = linear(h, "ff1", hidden, ffn)
    nodes.extend([n("Pow", [f, "three"], ["g.c"]), n("Mul", ["g.c", "gk"], ["g.kc"]),
                  n("Add", [f, "g.kc"], ["g.i"]), n("Mul", ["g.i", "s2pi"], ["g.ti"]),
                  n("Tanh", ["g.ti"], ["g.t"]), n("Add", ["g.t", "one"], ["g.p"]),
                  n("Mul", [f, "half"], ["g.h"]), n("Mul", ["g.h", "g.p"], ["gelu"])])
    f2 = linear("gelu", "ff2", ffn, hidden)
    nodes.append(n("Add", [f2, h], ["res2"]))
    layer_norm("res2", "out")
    graph = helper.make_graph(
        nodes, "layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model.SerializeToString()


def test_exporter_style_layer_is_fused_and_still_matches():
    data = _exported_style_encoder_layer()
    model = onnx_loader.load_model(data)
    out = optimize(model, "all")
    kinds = [(n.domain, n.op_type) for n in out.graph.nodes]
    assert kinds.count(("com.onnxedge", "LayerNormalization")) == 3
    assert kinds.count(("com.onnxedge", "MultiHeadAttention")) == 1
    assert _gelus(out) == 1
    assert kinds.count(("com.onnxedge", "FusedMatMul")) == 6
    assert len(out.graph.nodes) <= 0.3 * len(model.graph.nodes)
    rng = np.random.RandomState(1)
    mask = np.ones((2, 7), np.int64)
    mask[1, 5:] = 0
    feeds = {"x": rng.standard_normal((2, 7, 32)).astype(np.float32), "mask": mask}
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = onnxedge.InferenceSession(out, opts).run(None, feeds)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)


def test_huggingface_bert_export_is_fused_and_still_matches():
    """A real torch.onnx export of a HuggingFace BertModel (see data/make_hf_bert_tiny.py)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        "hf_bert_tiny_opset14.onnx")
    model = onnx_loader.load_model(path)
    out = optimize(model, "all")
    kinds = [(n.domain, n.op_type) for n in out.graph.nodes]
    assert kinds.count(("com.onnxedge", "MultiHeadAttention")) == 2
    assert kinds.count(("com.onnxedge", "LayerNormalization")) == 5
    assert _gelus(out) == 2
    assert ("", "Softmax") not in kinds and len(out.graph.nodes) < 0.3 * len(model.graph.nodes)
    rng = np.random.RandomState(3)
    for batch, seq in ((1, 16), (3, 9)):
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq // 2:] = 0
        feeds = {"input_ids": rng.randint(0, 50, (batch, seq)).astype(np.int64), "attention_mask": mask}
        expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
        got = onnxedge.InferenceSession(path).run(None, feeds)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)


def _fixture(name: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", name)


def _matches_onnxruntime(path: str, vocab: int = 50) -> None:
    """The optimized session (the default level) against onnxruntime on the original model, with
    padded batch rows and a row whose every key is masked."""
    rng = np.random.RandomState(5)
    session = onnxedge.InferenceSession(path)
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch, seq in ((1, 16), (3, 9), (2, 1)):
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq // 2:] = 0
        mask[0, :] = 0 if batch > 1 else 1
        feeds = {"input_ids": rng.randint(0, vocab, (batch, seq)).astype(np.int64),
                 "attention_mask": mask}
        np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-5)


def test_huggingface_bert_dynamo_export_is_fused_and_still_matches():
    """torch.onnx.export(dynamo=True) of a BertModel (see data/make_hf_dynamo_tiny.py): Q and K
    each scaled, K transposed through 3-D Reshapes, the softmax guarded by Where(IsNaN)."""
    path = _fixture("hf_bert_tiny_dynamo.onnx")
    model = onnx_loader.load_model(path)
    out = optimize(model, "all")
    kinds = [(n.domain, n.op_type) for n in out.graph.nodes]
    mha = [n for n in out.graph.nodes if n.op_type == "MultiHeadAttention"]
    assert len(mha) == 2 and all(n.attributes.get("nan_to_zero") == 1 for n in mha)
    assert all(n.attributes["num_heads"] == 4 and abs(n.attributes["scale"] - 0.25) < 1e-6
               for n in mha)
    assert ("", "Softmax") not in kinds and ("", "IsNaN") not in kinds
    assert ("", "Transpose") not in kinds and ("", "Reshape") not in kinds
    assert len(model.graph.nodes) == 120 and len(out.graph.nodes) <= 60
    _matches_onnxruntime(path)


def test_huggingface_gpt2_dynamo_export_is_fused_and_still_matches():
    """The same exporter on a causal GPT2Model: Q, K, V from one Split, the merge Reshape to
    [-1, H * D] (before a Gemm) stays after the fused node."""
    path = _fixture("hf_gpt2_tiny_dynamo.onnx")
    model = onnx_loader.load_model(path)
    out = optimize(model, "all")
    kinds = [(n.domain, n.op_type) for n in out.graph.nodes]
    assert kinds.count(("com.onnxedge", "MultiHeadAttention")) == 2
    assert ("", "Softmax") not in kinds and ("", "IsNaN") not in kinds
    assert len(model.graph.nodes) == 136 and len(out.graph.nodes) <= 80
    _matches_onnxruntime(path)


@pytest.mark.parametrize("name,before,after,nan_guard", [
    ("torch_sdpa_causal_dynamo.onnx", 40, 17, False),     # mask built from Shape(Q), Shape(K)
    ("torch_sdpa_mask_scale_dynamo.onnx", 37, 6, True),   # boolean mask, scale=0.3
])
def test_torch_sdpa_dynamo_exports_are_fused_and_still_match(name, before, after, nan_guard):
    path = _fixture(name)
    model = onnx_loader.load_model(path)
    out = optimize(model, "all")
    mha = [n for n in out.graph.nodes if n.op_type == "MultiHeadAttention"]
    assert len(mha) == 1 and mha[0].attributes.get("nan_to_zero", 0) == int(nan_guard)
    assert abs(mha[0].attributes["scale"] - (0.3 if nan_guard else 8 ** -0.5)) < 1e-6
    assert (len(model.graph.nodes), len(out.graph.nodes)) == (before, after)
    rng = np.random.RandomState(6)
    session = onnxedge.InferenceSession(path)
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch, seq in ((2, 6), (3, 11), (1, 1)):
        mask = np.ones((batch, seq), bool)
        mask[-1, seq // 2:] = False
        mask[0, :] = batch == 1   # batch row 0 fully masked (NaN-guarded) unless alone
        feeds = {"x": rng.standard_normal((batch, seq, 32)).astype(np.float32), "m": mask}
        np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-5)
