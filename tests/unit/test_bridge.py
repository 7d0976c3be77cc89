"""edge/bridge.py: capability runs, subgraph cuts, artifact keys and files, and sessions with a
tiny fake bridge (Relu/Add/Mul/MatMul into a JSON 'artifact', a numpy interpreter) compared with
numpy and onnxruntime-free references."""
from __future__ import annotations

import io
import json
from typing import Dict, List

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxedge import GraphOptimizationLevel, InferenceSession, SessionOptions, ir, model_io
from onnxedge.edge import bridge
from onnxedge.errors import EPFail, InvalidArgument, NoSuchFile
from onnxedge.providers import discovery
from onnxedge.providers.base import CompileContext

_NP = {"Relu": lambda a: np.maximum(a, 0), "Add": np.add, "Mul": np.multiply, "MatMul": np.matmul}


class FakeBridge(bridge.BridgeProvider):
    """Claims Relu/Add/Mul/MatMul on float32 with static shapes; 'translates' into JSON."""

    name = "FakeBridgeExecutionProvider"
    target = "fake"
    TARGET_OPTIONS = {"level": 1}
    TRIVIAL_OPS = frozenset({"Relu"})
    device = False
    calls: List[str] = []

    @classmethod
    def is_available(cls) -> bool:
        return cls.device

    def node_reason(self, node, graph, ctx, shapes):
        if node.op_type not in _NP:
            return "fake bridge has no %s" % node.op_type
        for name in node.inputs + node.outputs:
            info = shapes.get(name)
            if info is None or info.static() is None:
                return "dynamic shape of %s" % name
            if info.numpy_dtype() != np.float32:
                return "dtype of %s is not float32" % name
        return None

    def translate(self, graph, node_indices, ctx):
        FakeBridge.calls.append("translate")
        nodes = [graph.nodes[i] for i in node_indices]
        files = {}
        for k, v in graph.initializers.items():
            buf = io.BytesIO()
            np.save(buf, v)
            files["consts/%s.npy" % k] = buf.getvalue()
        files["model.json"] = json.dumps([[n.op_type, n.inputs, n.outputs] for n in nodes]).encode()
        return bridge.Artifact("", self.target, [v.name for v in graph.inputs],
                               [v.name for v in graph.outputs], files, {"ops": len(nodes)})

    def load(self, artifact):
        FakeBridge.calls.append("load")
        return lambda feeds: self.interpret(artifact, feeds)

    def interpret(self, artifact, feeds):
        env = dict(feeds)
        for rel, data in artifact.files.items():
            if rel.startswith("consts/"):
                env[rel[len("consts/"):-4]] = np.load(io.BytesIO(data))
        for op, ins, outs in json.loads(artifact.files["model.json"].decode()):
            env[outs[0]] = _NP[op](*[env[n] for n in ins]).astype(np.float32)
        return {n: env[n] for n in artifact.outputs}


@pytest.fixture
def fake(monkeypatch):
    """Register FakeBridge by name, as an entry point would."""
    real = discovery.provider_classes

    def classes():
        out = dict(real())
        out[FakeBridge.name] = FakeBridge
        return out

    monkeypatch.setattr(discovery, "provider_classes", classes)
    FakeBridge.calls = []
    FakeBridge.device = False
    return FakeBridge


def _model(batch="N") -> bytes:
    """x -> MatMul(w) -> Add(b) -> Softmax -> Relu -> Mul(x2) -> Sigmoid -> Relu -> y."""
    rng = np.random.RandomState(0)
    w = rng.randn(4, 3).astype(np.float32)
    b = rng.randn(3).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h1"]),
             helper.make_node("Add", ["h1", "b"], ["h2"]),
             helper.make_node("Softmax", ["h2"], ["h3"], axis=-1),
             helper.make_node("Relu", ["h3"], ["h4"]),
             helper.make_node("Mul", ["h4", "h2"], ["h5"]),
             helper.make_node("Sigmoid", ["h5"], ["h6"]),
             helper.make_node("Relu", ["h6"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _session(providers) -> InferenceSession:
    """A session on _model() as written (unoptimized: MatMul+Add stay apart)."""
    opts = SessionOptions()
    opts.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    return InferenceSession(_model(), opts, providers=providers)


def _numpy_reference(x: np.ndarray) -> np.ndarray:
    m = model_io.load(_model())
    w, b = m.graph.initializers["w"], m.graph.initializers["b"]
    h2 = x @ w + b
    e = np.exp(h2 - h2.max(-1, keepdims=True))
    h5 = np.maximum(e / e.sum(-1, keepdims=True), 0) * h2
    return np.maximum(1 / (1 + np.exp(-h5)), 0)


def _ctx(model: ir.Model) -> CompileContext:
    return CompileContext(model.opset_imports, {})


def test_runs_groups_consecutive_indices():
    assert bridge.runs([5, 0, 1, 3, 4]) == [[0, 1], [3, 4, 5]]
    assert bridge.runs([]) == []


def test_capability_runs_and_reasons():
    m = model_io.load(_model(batch=2))
    p = FakeBridge({})
    ctx = _ctx(m)
    groups = p.get_capability(m.graph, ctx)
    # MatMul+Add claimed; Relu+Mul claimed; the lone trailing Relu is a trivial run
    assert groups == [[0, 1], [3, 4]]
    assert p.unsupported_reason(m.graph.nodes[2], ctx) == "fake bridge has no Softmax"
    assert "not worth" in p.unsupported_reason(m.graph.nodes[6], ctx)
    assert p.unsupported_reason(m.graph.nodes[0], ctx) is None


def test_dynamic_dims_block_claims_until_fixed():
    m = model_io.load(_model())
    ctx = _ctx(m)
    assert FakeBridge({}).get_capability(m.graph, ctx) == []
    p = FakeBridge({})
    p.get_capability(m.graph, ctx)
    assert "dynamic shape" in p.unsupported_reason(m.graph.nodes[0], ctx)
    assert FakeBridge({"dims": {"N": 2}}).get_capability(m.graph, ctx) == [[0, 1], [3, 4]]
    assert FakeBridge({"input_shapes": {"x": [5, 4]}}).get_capability(m.graph, ctx) == [[0, 1], [3, 4]]


def test_static_shapes_conv_and_pool_match_onnx_inference():
    import onnx
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 17, 16])
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], strides=[2, 2], pads=[1, 0, 1, 2]),
             helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                              ceil_mode=1),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], auto_pad="SAME_UPPER", strides=[2, 2],
                              dilations=[2, 2]),
             helper.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], auto_pad="VALID"),
             helper.make_node("GlobalAveragePool", ["p2"], ["y"])]
    w2 = numpy_helper.from_array(np.zeros((5, 8, 2, 2), np.float32), "w2")
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [w, w2])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    expected = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    m = model_io.load(_model_bytes(proto))
    got = bridge.static_shapes(m.graph, {"x": [1, 3, 17, 16]}, m.opset_imports)
    for name in ("c1", "p1", "c2", "p2", "y"):
        assert got[name].static() == expected[name], name


def _model_bytes(proto) -> bytes:
    proto.ir_version = 8
    return proto.SerializeToString()


def test_subgraph_cut():
    m = model_io.load(_model(batch=2))
    sub = bridge.subgraph(m.graph, [3, 4], bridge.static_shapes(m.graph, opsets=m.opset_imports))
    assert [n.op_type for n in sub.nodes] == ["Relu", "Mul"]
    assert [v.name for v in sub.inputs] == ["h3", "h2"]
    assert [v.name for v in sub.outputs] == ["h5"]
    assert sub.initializers == {}
    assert sub.inputs[0].type.shape == [2, 3]
    first = bridge.subgraph(m.graph, [0, 1])
    assert [v.name for v in first.inputs] == ["x"] and sorted(first.initializers) == ["b", "w"]
    assert [v.name for v in first.outputs] == ["h2"]   # h1 is used only inside
    # a value both used later and a graph output is an output of the cut
    last = bridge.subgraph(m.graph, [5, 6])
    assert [v.name for v in last.outputs] == ["y"]


def test_artifact_key_is_stable_and_sensitive():
    m = model_io.load(_model(batch=2))
    sub = bridge.subgraph(m.graph, [0, 1])
    key = bridge.artifact_key(sub, "fake", {"level": 1})
    assert key == bridge.artifact_key(bridge.subgraph(model_io.load(_model(batch=2)).graph, [0, 1]),
                                      "fake", {"level": 1})
    assert len(key) == 64
    assert key != bridge.artifact_key(sub, "fake", {"level": 2})
    assert key != bridge.artifact_key(sub, "other", {"level": 1})
    changed = bridge.subgraph(m.graph, [0, 1])
    changed.initializers["w"] = changed.initializers["w"].copy()
    changed.initializers["w"][0, 0] += 1
    assert key != bridge.artifact_key(changed, "fake", {"level": 1})
    other_shape = bridge.subgraph(m.graph, [0, 1], bridge.static_shapes(m.graph, {"x": [3, 4]},
                                                                       m.opset_imports))
    assert key != bridge.artifact_key(other_shape, "fake", {"level": 1})


def test_artifact_save_and_load(tmp_path):
    art = bridge.Artifact("ab" * 32, "fake", ["x"], ["y"], {"m.mlpackage/Data/w.bin": b"\x00\x01",
                                                            "model.json": b"{}"}, {"ops": 2})
    art.save(str(tmp_path / "a"))
    back = bridge.Artifact.load_from(str(tmp_path / "a"))
    assert back == art and back.size() == 4
    with pytest.raises(NoSuchFile, match="artifact.json"):
        bridge.Artifact.load_from(str(tmp_path / "missing"))
    (tmp_path / "a" / "model.json").unlink()
    with pytest.raises(InvalidArgument, match="unreadable"):
        bridge.Artifact.load_from(str(tmp_path / "a"))


def test_session_reference_mode_matches_numpy(fake):
    x = np.random.RandomState(1).randn(2, 4).astype(np.float32)
    sess = _session([(fake.name, {"reference": True, "dims": {"N": 2}}),
                                                 "CPUExecutionProvider"])
    y, = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, _numpy_reference(x), rtol=1e-5, atol=1e-6)
    report = sess.partition_report()
    host = {"CPUExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider"}   # numpy, or the C engine before it
    assert ["host" if r["provider"] in host else r["provider"] for r in report] == \
        [fake.name] * 2 + ["host"] + [fake.name] * 2 + ["host"] * 2
    assert report[2]["fallback_reasons"] == {fake.name: "fake bridge has no Softmax"}
    assert fake.calls == ["translate", "translate"]
    with pytest.raises(InvalidArgument, match="input 'x' has shape \\[3, 4\\]"):
        sess.run(None, {"x": np.zeros((3, 4), np.float32)})


def test_unavailable_without_reference_is_skipped_and_device_path_loads(fake):
    sess = _session([(fake.name, {"dims": {"N": 2}})])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    fake.device = True
    x = np.ones((2, 4), np.float32)
    sess = _session([(fake.name, {"dims": {"N": 2}})])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _numpy_reference(x), rtol=1e-5)
    assert fake.calls.count("load") == 2


def test_artifact_dir_loads_without_translating(fake, tmp_path, monkeypatch):
    opts = {"reference": True, "dims": {"N": 2}, "save_dir": str(tmp_path)}
    _session([(fake.name, opts)])
    saved = sorted(p.name for p in tmp_path.iterdir())
    assert len(saved) == 2
    fake.calls = []
    monkeypatch.setattr(FakeBridge, "translator_available", classmethod(lambda cls: False))
    x = np.random.RandomState(2).randn(2, 4).astype(np.float32)
    sess = _session([
        (fake.name, {"reference": True, "dims": {"N": 2}, "artifact_dir": str(tmp_path)})])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _numpy_reference(x), rtol=1e-5)
    assert fake.calls == []
    assert sorted(bridge.provider_of(sess, fake.name).artifacts) == saved
    with pytest.raises(EPFail, match="no pre-translated artifact"):
        _session([
            (fake.name, {"reference": True, "dims": {"N": 2}, "artifact_dir": str(tmp_path / "x")})])


def test_unknown_option_is_refused(fake):
    with pytest.raises(EPFail, match="unknown option"):
        _session([(fake.name, {"reference": True, "bogus": 1})])
