"""benchmarks/browser.py's start-up accounting: onnxedge's own share of page load -> first
result sums the wheel install, imports, wasm kernels' start and session creation (not Pyodide's
start, its warm-up or numpy), and the digit demo is a benchmark model with onnxruntime-valid
feeds."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("onnx", reason="the benchmark models are built with onnx.helper")
    from benchmarks import browser
    return browser


def test_own_share_sums_onnxedge_steps_only(bench) -> None:
    got = bench.own_share({"install_ms": 40.04, "runtime_py_ms": 10, "pyodide_warm_ms": 15,
                           "import_ms": 20, "wasm_init_ms": 25, "session_create_ms": 30,
                           "pyodide_ms": 2500, "wheels_and_numpy_ms": 1500})
    assert got["onnxedge_share_ms"] == pytest.approx(115.0)
    assert got["own_breakdown"]["pyodide_ms"] == 2500
    assert bench.own_share(None) == {} and bench.own_share({}) == {}


def test_digits_model_and_feeds(bench, tmp_path) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    path = bench.model_files(str(tmp_path), ["digits"])["digits"]
    feeds = bench.make_feeds("digits")
    assert feeds["image"].shape == (1, 1, 8, 8) and feeds["image"].dtype == np.float32
    (probs,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert probs.shape == (1, 10) and abs(float(probs.sum()) - 1.0) < 1e-4
