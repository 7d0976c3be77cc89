"""Dynamically quantized CNNs: every ConvInteger re-quantizes a float activation with
DynamicQuantizeLinear, so a float difference that flips one rounding compounds through the
layers. onnxedge must agree with onnxruntime on the predicted class of (almost) every input."""
from __future__ import annotations

import numpy as np
import pytest

from zoo import quantized, zoo

ort = pytest.importorskip("onnxruntime")
DRIFT = [m for m in quantized.MODELS if m.name in ("dynamic_cnn", "dynamic_deep_cnn")]


@pytest.mark.parametrize("model", DRIFT, ids=[m.name for m in DRIFT])
def test_dynamic_cnn_argmax_agreement(model):
    import onnxedge
    path = zoo.ensure_built("quantized", model)["path"]
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess = onnxedge.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.RandomState(123)
    same, worst, n = 0, 0.0, 100
    for _ in range(n):
        x = (rng.rand(1, 3, 16, 16) * 2 - 1).astype(np.float32)
        e = ref.run(None, {"x": x})[0]
        g = sess.run(None, {"x": x})[0]
        same += int(np.argmax(e) == np.argmax(g))
        worst = max(worst, float(np.abs(e - g).max() / max(1e-6, float(np.abs(e).max()))))
    print("%s: argmax agreement %d/%d, worst relative output difference %.2e"
          % (model.name, same, n, worst))
    assert same >= n - 1, "argmax agreement %d/%d" % (same, n)
