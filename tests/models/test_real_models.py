"""The real-model-shaped benchmark rows (benchmarks/real_models.py: torch.onnx exports of a VAD with
1-D convs and an LSTM, a YOLO-style SiLU detector, a DBNet-style OCR detector with HardSwish and
ConvTranspose, a CRNN with bidirectional LSTMs) against onnxruntime: the default session (the C
engine for what it claims, numpy for the rest) on its first run (node by node) and on the second
(the compiled programs), and the numpy-only session."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

import onnxedge  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks import models, real_models  # noqa: E402

NAMES = list(real_models.BUILDERS)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return models.build_all(str(tmp_path_factory.mktemp("real_models")), NAMES)


def _close(got, want):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale)


@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime_on_the_engine_and_on_numpy(built, name):
    feeds = models.make_inputs(name)
    want = ort.InferenceSession(built[name], providers=["CPUExecutionProvider"]).run(None, feeds)
    numpy_only = onnxedge.SessionOptions()
    numpy_only.add_session_config_entry("session.cpu_engine", "0")
    for opts in (None, numpy_only):
        sess = onnxedge.InferenceSession(built[name], opts)
        for _ in range(2):
            got = sess.run(None, feeds)
            assert [g.shape for g in got] == [w.shape for w in want]
            for g, w in zip(got, want):
                _close(g, w)


def test_recurrent_layers_run_in_the_engine(built):
    for name in ("vad_lstm", "crnn_lstm"):
        rows = onnxedge.InferenceSession(built[name]).partition_report()
        lstm = [r for r in rows if r["op_type"] == "LSTM"]
        assert lstm and all(r["provider"] != "CPUExecutionProvider" for r in lstm), lstm


def test_inputs_need_batch_one():
    with pytest.raises(ValueError, match="batch 1"):
        models.make_inputs("vad_lstm", batch=2)
