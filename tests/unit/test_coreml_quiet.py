"""coremltools' import warnings and progress bars stay out of `onnxedge inspect` with the Core ML
provider (they show with onnxedge's DEBUG logging only)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytestmark = pytest.mark.needs_setup   # coremltools

pytest.importorskip("coremltools")


def test_inspect_with_coreml_prints_no_third_party_noise(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["c"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    out = subprocess.run([sys.executable, "-m", "onnxedge.cli", "inspect", path, "--providers",
                          "CoreMLExecutionProvider,CPUExecutionProvider"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "CoreMLExecutionProvider" in out.stdout
    assert out.stderr.strip() == "", out.stderr[:2000]
