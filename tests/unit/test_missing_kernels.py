"""A model using ops this build lacks: `onnxedge inspect` lists every one with its domain and
opset before a session is attempted, and session creation names them all in one error."""
from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import cli


def _model(path):
    body = helper.make_graph(
        [helper.make_node("Frobnicate", ["u"], ["z"], domain="com.example")], "body", [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Twiddle", ["r"], ["t"], domain="com.example"),
             helper.make_node("NoSuchOnnxOp", ["t"], ["u"]),
             helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.example", 3)])
    m.ir_version = 8
    onnx.save(m, path)


def test_inspect_lists_every_missing_op_before_a_session(tmp_path, capsys):
    path = str(tmp_path / "m.onnx")
    _model(path)
    assert cli.main(["inspect", path]) == 1
    out = capsys.readouterr().out
    assert "no kernel for 3 op(s)" in out
    for op, domain, opset in (("Twiddle", "com.example", 3), ("NoSuchOnnxOp", "ai.onnx", 17),
                              ("Frobnicate", "com.example", 3)):
        line = [ln for ln in out.splitlines() if ln.strip().startswith(op)]
        assert line and domain in line[0] and "opset %d" % opset in line[0], out
    assert "Relu" not in out


def test_session_error_names_every_missing_op(tmp_path):
    path = str(tmp_path / "m.onnx")
    _model(path)
    with pytest.raises(onnxedge.NotImplemented) as info:
        onnxedge.InferenceSession(path, providers=["CPUExecutionProvider"])
    msg = str(info.value)
    assert "Twiddle" in msg and "NoSuchOnnxOp" in msg and "Frobnicate" in msg
