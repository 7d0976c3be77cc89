"""Provider lists as onnxruntime scripts write them: providers this build or machine lacks
(CUDA, a typo) are skipped with a warning and the session runs on the rest, CPU at least;
short names ('cpu', 'wasm', ...) are accepted; probing providers prints nothing."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnxedge


def _mlp_bytes() -> bytes:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_cuda_first_in_the_list_warns_and_runs_on_cpu(caplog):
    x = np.ones((1, 3), np.float32)
    with caplog.at_level(logging.WARNING, logger="onnxedge"):
        sess = onnxedge.InferenceSession(_mlp_bytes(), providers=["CUDAExecutionProvider",
                                                                  "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert any("CUDAExecutionProvider" in r.getMessage() for r in caplog.records)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0],
                               x @ (np.arange(12, dtype=np.float32).reshape(3, 4) / 10), rtol=1e-6)


def test_only_unknown_providers_fall_back_to_cpu():
    sess = onnxedge.InferenceSession(_mlp_bytes(), providers=["NopeExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_short_names_are_accepted():
    sess = onnxedge.InferenceSession(_mlp_bytes(), providers=["cpu"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    sess = onnxedge.InferenceSession(_mlp_bytes(), providers=[("CPU", {})])
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_probing_providers_prints_nothing():
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    out = subprocess.run([sys.executable, "-c", "import onnxedge; print(onnxedge.get_available_providers())"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "CPUExecutionProvider" in out.stdout
    assert out.stderr.strip() == "", out.stderr
