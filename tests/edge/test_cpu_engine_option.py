"""The session config entry "session.cpu_engine": "1" (the default) puts the C engine
(X64ExecutionProvider / NeonExecutionProvider, the native kernel library) in front of the CPU provider without the
caller naming it; "0" keeps numpy alone."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from neon_helpers import REPO, ensure_built

ensure_built()

import onnxedge  # noqa: E402

from onnxedge.edge.neon.provider import engine_name  # noqa: E402
NEON = engine_name()   # the C engine's provider on this machine

sys.path.insert(0, REPO)
from benchmarks import models  # noqa: E402


def _options(value=None):
    so = onnxedge.SessionOptions()
    if value is not None:
        so.add_session_config_entry("session.cpu_engine", value)
    return so


@pytest.mark.parametrize("providers", [None, ["CPUExecutionProvider"], ["cpu"]])
def test_engine_runs_what_it_claims_when_asked(providers):
    m = models.build("mlp").SerializeToString()
    feeds = models.make_inputs("mlp")
    sess = onnxedge.InferenceSession(m, _options("1"), providers=providers)
    assert [p.name for p in sess.providers] == [NEON, "CPUExecutionProvider"]
    assert sess.get_providers() == ["CPUExecutionProvider"]   # as registered, onnxruntime's way
    assert {r["provider"] for r in sess.partition_report()} == {NEON}
    numpy_only = onnxedge.InferenceSession(m, _options("0"), providers=providers)
    assert [r["provider"] for r in numpy_only.partition_report()] == \
        ["CPUExecutionProvider"] * len(numpy_only.partition_report())
    want = numpy_only.run(None, feeds)[0].astype(np.float64)
    for _ in range(2):   # the second run goes through the compiled program
        got = sess.run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_engine_is_the_default_and_is_not_added_twice():
    m = models.build("mlp").SerializeToString()
    sess = onnxedge.InferenceSession(m)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert {r["provider"] for r in sess.partition_report()} == {NEON}
    sess = onnxedge.InferenceSession(m, _options("1"), providers=[NEON, "CPUExecutionProvider"])
    assert [p.name for p in sess.providers] == [NEON, "CPUExecutionProvider"]


def test_a_bad_value_is_refused():
    m = models.build("mlp").SerializeToString()
    with pytest.raises(onnxedge.InvalidArgument, match="session.cpu_engine"):
        onnxedge.InferenceSession(m, _options("yes"))


def test_profiling_sees_every_engine_node_and_the_same_outputs(tmp_path):
    m = models.build("mlp").SerializeToString()
    feeds = models.make_inputs("mlp")
    plain = onnxedge.InferenceSession(m, _options("1"))
    want = [plain.run(None, feeds)[0] for _ in range(2)]
    so = _options("1")
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "p_")
    sess = onnxedge.InferenceSession(m, so)
    got = [sess.run(None, feeds)[0] for _ in range(2)]
    import json
    events = json.load(open(sess.end_profiling()))
    nodes = [e for e in events if e.get("cat") == "Node"]
    ops = [e["args"]["op_name"] for e in nodes]
    assert sorted(set(ops)) == sorted({r["op_type"] for r in sess.partition_report()})
    assert len(nodes) == 2 * len(sess.partition_report())
    assert {e["args"]["provider"] for e in nodes} == {NEON}
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()   # node by node gives the program's bits


def test_scalars_keep_their_shape_on_both_paths():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Relu", ["q"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [])
                                       for n in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = onnxedge.InferenceSession(m.SerializeToString(), _options("1"))
    assert {r["provider"] for r in sess.partition_report()} == {NEON}
    feeds = {"a": np.array(-3.0, np.float32), "b": np.array(-2.0, np.float32)}
    for _ in range(3):   # node by node, then the program
        y = sess.run(None, feeds)[0]
        assert y.shape == () and float(y) == 1.5
