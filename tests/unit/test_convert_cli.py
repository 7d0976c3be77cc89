"""`onnxedge convert`: .onnx -> .oxe (optionally optimized, optionally with external data) and back."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import cli, model_io


def _model(path):
    rng = np.random.RandomState(0)
    w = rng.randn(16, 64).astype(np.float32)
    b = rng.randn(64).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Identity", ["a"], ["i"]), helper.make_node("Relu", ["i"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return w, b


def _outputs(source, x):
    return onnxedge.InferenceSession(source).run(None, {"x": x})[0]


def test_convert_onnx_to_oxe_and_back_keeps_outputs(tmp_path, capsys):
    src = str(tmp_path / "m.onnx")
    w, b = _model(src)
    x = np.random.RandomState(1).randn(3, 16).astype(np.float32)
    want = np.maximum(x @ w + b, 0)
    dst = str(tmp_path / "m.oxe")
    assert cli.main(["convert", src, "-o", dst]) == 0
    out = capsys.readouterr().out
    assert "wrote %s" % dst in out and "loaded %s" % src in out and " s" in out
    assert model_io.is_oxe(dst)
    np.testing.assert_allclose(_outputs(dst, x), want, rtol=1e-5, atol=1e-6)
    back = str(tmp_path / "back.onnx")
    assert cli.main(["convert", dst, "-o", back]) == 0
    proto = onnx.load(back)
    onnx.checker.check_model(proto)
    assert [n.op_type for n in proto.graph.node] == ["MatMul", "Add", "Identity", "Relu"]
    np.testing.assert_array_equal(numpy_helper.to_array(proto.graph.initializer[0]), w)
    np.testing.assert_allclose(_outputs(back, x), want, rtol=1e-5, atol=1e-6)


def test_convert_with_optimize_and_external_data(tmp_path, capsys):
    src = str(tmp_path / "m.onnx")
    w, b = _model(src)
    dst = str(tmp_path / "opt.oxe")
    rc = cli.main(["convert", src, "-o", dst, "--optimize", "basic",
                   "--external-data-threshold", "1024"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "optimized (basic): 4 ->" in out and "external data" in out
    assert os.path.getsize(dst + ".data") >= w.nbytes
    model = model_io.load(dst)
    assert "Identity" not in [n.op_type for n in model.graph.nodes]   # basic drops Identity
    x = np.random.RandomState(2).randn(2, 16).astype(np.float32)
    np.testing.assert_allclose(_outputs(dst, x), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_convert_errors_are_reported(tmp_path, capsys):
    src = str(tmp_path / "m.onnx")
    _model(src)
    assert cli.main(["convert", src, "-o", str(tmp_path / "m.txt")]) == 1
    assert "must end in .oxe or .onnx" in capsys.readouterr().err
    assert cli.main(["convert", str(tmp_path / "missing.onnx"), "-o",
                     str(tmp_path / "x.oxe")]) == 1
    assert "NoSuchFile" in capsys.readouterr().err
    bad = tmp_path / "bad.oxe"
    bad.write_bytes(b"\0\0\0\0OXE1" + b"\xff" * 40)
    assert cli.main(["convert", str(bad), "-o", str(tmp_path / "y.onnx")]) == 1
    assert "InvalidGraph" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["convert", src, "-o", str(tmp_path / "z.oxe"), "--optimize", "fast"])


def test_inspect_and_run_take_the_optimization_level(tmp_path, capsys):
    src = str(tmp_path / "m.onnx")
    _model(src)
    assert cli.main(["inspect", src]) == 0
    out = capsys.readouterr().out
    assert "com.onnxedge.FusedGemm" in out and "4 nodes in the file" in out
    assert cli.main(["inspect", src, "--optimize", "disable"]) == 0
    out = capsys.readouterr().out
    assert "nodes: 4," in out and "in the file" not in out and "Identity" in out
    assert cli.main(["run", src, "--optimize", "basic"]) == 0
    assert "y: float32 [1, 64]" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["inspect", src, "--optimize", "max"])
