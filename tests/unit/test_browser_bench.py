"""benchmarks/browser.py's native helpers: the matmul model, tensor transport, the output check."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(scope="module")
def browser_bench():
    pytest.importorskip("onnx", reason="the benchmark models are built with onnx.helper")
    from benchmarks import browser
    return browser


def test_matmul_model_computes_relu_of_matmul_plus_bias(browser_bench, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    import onnx
    from onnx import numpy_helper
    path = browser_bench.build_matmul(str(tmp_path / "matmul.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    x = browser_bench.make_feeds("matmul")["input"]
    assert x.shape == browser_bench.MATMUL[:2]
    (got,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})
    want = np.maximum(x.astype(np.float64) @ inits["w"] + inits["b"], 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert (got == 0).mean() > 0.2   # the ReLU does cut


def test_tensors_survive_the_page_encoding(browser_bench):
    for x in (np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
              np.array([[2 ** 40, -3]], np.int64)):
        t = browser_bench.encode(x)
        assert t["dims"] == list(x.shape)
        y = browser_bench.decode(t)
        assert y.dtype == x.dtype and np.array_equal(y, x)


def test_output_check_flags_disagreement(browser_bench):
    a = {"y": np.array([1.0, 2.0, 0.0], np.float32)}
    assert browser_bench.compare(a, {"y": a["y"] * (1 + 5e-4)})["agree"]
    off = browser_bench.compare(a, {"y": np.array([1.0, 2.01, 0.0], np.float32)})
    assert not off["agree"] and off["max_abs_diff"] == pytest.approx(0.01, rel=1e-3)
    assert not browser_bench.compare(a, {"y": a["y"][:2]})["agree"]
    assert not browser_bench.compare(a, {"z": a["y"]})["agree"]


def test_table_puts_configurations_side_by_side(browser_bench):
    def r(ms, own=None, start=1.0, mb=10e6):
        out = {"median_ms": ms, "page_to_first_result_s": start, "bytes_before_first_result": mb}
        if own is not None:
            out["engine_median_ms"] = own
        return out
    row = {"model": "matmul", "checks": {"onnxedge-wasm-1t": {"agree": True, "max_abs_diff": 1e-6},
                                         "onnxedge-cpu": {"agree": True, "max_abs_diff": 2e-6}},
           "engines": {"ort-wasm-1t": r(20.0, start=0.5, mb=14.8e6), "ort-wasm-2t": r(12.0),
                       "onnxedge-cpu": r(900.0, 899.0), "onnxedge-wasm-1t": r(30.0, 28.0, 2.5, 28.1e6),
                       "onnxedge-wasm-2t": r(18.0)}}
    line = browser_bench.markdown_table([row]).splitlines()[-1]
    assert line == ("| matmul | 20 | 12 | 900 | 30 (28) | 18 | 1.50x | 1.50x | 0.50 / 2.50 | 14.8 / 28.1 "
                    "| - | yes (2.0e-06) |")      # no start-up breakdown given: no own share
    row["engines"]["onnxedge-wasm-1t"]["onnxedge_share_ms"] = 123.4
    assert "| 14.8 / 28.1 | 123 | yes" in browser_bench.markdown_table([row]).splitlines()[-1]
    row["checks"]["onnxedge-cpu"]["agree"] = False
    row["engines"]["ort-wasm-2t"] = {"error": "no first result"}
    line = browser_bench.markdown_table([row]).splitlines()[-1]
    assert "| error |" in line and "| - |" in line and line.endswith("NO (2.0e-06) |")
