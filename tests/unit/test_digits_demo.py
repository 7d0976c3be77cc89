"""The digit demo (demo/digits/): the numpy CNN's gradients, the training accuracy, and the
exported ONNX model in onnxruntime vs onnxedge."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "demo", "digits"))
import cnn  # noqa: E402


def test_cnn_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    params = cnn.init_params(rng)
    x = rng.random((3, 1, 8, 8))
    y = np.array([0, 4, 9])

    def loss(p):
        probs, _ = cnn.forward(p, x)
        return -np.mean(np.log(probs[np.arange(3), y]))

    probs, cache = cnn.forward(params, x)
    grads = cnn.backward(params, probs, y, cache)
    eps = 1e-6
    for name in ("w1", "b1", "w2", "b2", "w3", "b3"):
        flat = params[name].reshape(-1)
        for i in rng.choice(flat.size, size=min(5, flat.size), replace=False):
            old = flat[i]
            flat[i] = old + eps
            up = loss(params)
            flat[i] = old - eps
            down = loss(params)
            flat[i] = old
            numeric = (up - down) / (2 * eps)
            assert abs(grads[name].reshape(-1)[i] - numeric) <= 1e-6 + 1e-4 * abs(numeric), name


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    pytest.importorskip("sklearn", reason="training uses scikit-learn's bundled digits")
    pytest.importorskip("onnx", reason="the export uses onnx.helper")
    import train
    out = str(tmp_path_factory.mktemp("digits") / "digits.onnx")
    info = train.build(out, seed=0)
    return out, info


def test_training_reaches_held_out_accuracy_and_is_deterministic(trained, tmp_path):
    out, info = trained
    assert info["accuracy"] > 0.90
    import train
    again = str(tmp_path / "digits.onnx")
    train.build(again, seed=0)
    assert open(again, "rb").read() == open(out, "rb").read()


def test_exported_model_same_in_onnxruntime_and_onnxedge(trained):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    import onnxedge
    out, _ = trained
    samples = np.load(os.path.join(os.path.dirname(out), "digits_samples.npz"))
    images, labels = samples["images"], samples["labels"]
    assert images.shape == (20, 1, 8, 8) and images.dtype == np.float32
    assert 0.0 <= images.min() and images.max() <= 1.0
    ref = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    sess = onnxedge.InferenceSession(out, providers=["CPUExecutionProvider"])
    (expected,) = ref.run(None, {"image": images})
    (got,) = sess.run(None, {"image": images})
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert np.mean(got.argmax(axis=1) == labels) >= 0.9
    (one,) = sess.run(None, {"image": images[:1]})
    assert one.shape == (1, 10)
    assert [i.name for i in sess.get_inputs()] == ["image"]
    assert [o.name for o in sess.get_outputs()] == ["probabilities"]
    meta = json.loads(sess.get_modelmeta().custom_metadata_map["onnxedge.page"])
    assert meta["labels"] == [str(d) for d in range(10)]
    assert meta["image"] == {"input": "image", "channels": 1, "ink": True, "range": [0, 1]}
