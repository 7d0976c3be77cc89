"""The CLI as a new user meets it: every failure is one line naming the cause (no traceback),
one `--optimize` (alias `--level`) everywhere, `--dim`/`--input` names checked against the model,
metadata shown by `inspect`, and content that is not a model named for what it is."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import cli

ONNXEDGE = [sys.executable, "-m", "onnxedge.cli"]


def _model(path, metadata=None):
    w = numpy_helper.from_array(np.ones((4, 300), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 300])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="unit-test", producer_version="7")
    m.ir_version = 8
    m.doc_string = "a test model"
    for k, v in (metadata or {}).items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, path)
    return path


def _cli(args, **kw):
    return subprocess.run(ONNXEDGE + args, capture_output=True, text=True, timeout=120, **kw)


def test_convert_to_a_missing_folder_is_one_line(tmp_path):
    src = _model(str(tmp_path / "m.onnx"))
    out = _cli(["convert", src, "-o", str(tmp_path / "missing" / "dir" / "x.oxe")])
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "No such file or directory" in lines[0] and "missing" in lines[0], out.stderr


def test_inspect_into_a_closed_pipe_says_nothing(tmp_path):
    """`inspect -v | head`: far more than a pipe buffer of output, the reader gone after a line."""
    nodes = [helper.make_node("Relu", ["x" if i == 0 else "r%d" % (i - 1)], ["r%d" % i],
                              name="relu_number_%d_with_a_long_name" % i) for i in range(3000)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("r2999", TensorProto.FLOAT, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src = str(tmp_path / "chain.onnx")
    onnx.save(m, src)
    cmd = " ".join(ONNXEDGE) + " inspect -v --optimize disable %s | head -n 1" % src
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    assert out.stdout.startswith("model: ")


def test_unknown_dim_and_input_names_are_refused_first(tmp_path, capsys):
    src = _model(str(tmp_path / "m.onnx"))
    assert cli.main(["run", src, "--dim", "Q=3"]) == 1
    err = capsys.readouterr().err
    assert "no symbolic dimension named 'Q'" in err and "batch" in err
    np.save(str(tmp_path / "x.npy"), np.ones((1, 4), np.float32))
    assert cli.main(["run", src, "--input", "nope=%s" % (tmp_path / "x.npy")]) == 1
    captured = capsys.readouterr()
    assert "random" not in captured.out
    assert "no input named 'nope'" in captured.err and "['x']" in captured.err


@pytest.mark.parametrize("flag", ["--optimize", "--level"])
def test_one_optimization_flag_everywhere(flag):
    parser = cli.build_parser()
    for argv in (["run", "m.onnx"], ["inspect", "m.onnx"], ["convert", "m.onnx", "-o", "x.oxe"],
                 ["reduce", "m.onnx", "-o", "out"], ["web", "build", "m.onnx", "-o", "out"],
                 ["package", "rpi", "m.onnx", "-o", "out"]):
        assert parser.parse_args(argv + [flag, "basic"]).optimize == "basic", argv


def test_inspect_oxe_shows_producer_and_metadata(tmp_path, capsys):
    src = _model(str(tmp_path / "m.onnx"), {"labels": "cat,dog", "author": "me\x1b[31m"})
    oxe = str(tmp_path / "m.oxe")
    assert cli.main(["convert", src, "-o", oxe]) == 0
    capsys.readouterr()
    assert cli.main(["inspect", oxe]) == 0
    out = capsys.readouterr().out
    assert "producer: unit-test 7" in out and "description: a test model" in out
    assert "labels: cat,dog" in out
    assert "\x1b" not in out and "author: me\\x1b[31m" in out   # control characters escaped


@pytest.mark.parametrize("data,expected", [(b"", "empty (0 bytes)"),
                                           (b"name,label\n1,cat\n", "text, not a model")])
def test_content_that_is_not_a_model_is_named(data, expected):
    with pytest.raises(onnxedge.InvalidGraph, match="are %s" % expected.replace("(", r"\(").replace(")", r"\)")):
        onnxedge.InferenceSession(data)
