"""The digit demo model and the three benchmark models in the page, through the bundle and its JS
API (`onnxedge web build`: Pyodide 0.17.1, the reduced wheel, `.oxe` models; onnxedge.js), give
the outputs onnxruntime (and native onnxedge) give.

Tolerance: rtol 1e-4, atol 1e-5, as tests/models holds native onnxedge to. The page runs numpy
1.17.5 without BLAS, whose matmul sums in another order than onnxruntime's MLAS; float32 rounding
of that order is ~1e-6 relative per product sum, and no model here needs more than the native
tolerance (the largest differences measured are printed in the terminal summary).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict

import numpy as np
import onnxruntime
import pytest

import onnxedge

from bundles import JS_TENSOR_CODEC, assert_page_outputs, decode_array, encode_array, wait_state
from conftest import ROOT, SUMMARY

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "demo", "digits"))
import models  # noqa: E402

BENCH_MODELS = ("mlp", "resnet18", "bert_encoder")
RTOL, ATOL = 1e-4, 1e-5

# Runs a model through onnxedge.js; tensors travel as base64 of their bytes (one copy each way).
RUN_JS = """
async ({model, feeds}) => {
  const onnxedge = window.onnxedge;
""" + JS_TENSOR_CODEC + """
  const session = await onnxedge.InferenceSession.create(model, {executionProviders: ['wasm']});
  const inputs = {};
  for (const [name, t] of Object.entries(feeds)) inputs[name] = decode(t);
  const t0 = performance.now();
  const out = await session.run(inputs);
  const runMs = performance.now() - t0;
  const result = {outputs: {}, names: session.outputNames, runMs};
  for (const name of session.outputNames) result.outputs[name] = encode(out[name]);
  await session.release();
  return result;
}
"""

@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> Dict[str, str]:
    """The digit CNN (trained here, seed 0) and the three benchmark models as .onnx files."""
    import train
    out = str(tmp_path_factory.mktemp("page-models"))
    paths = dict(models.build_all(out, BENCH_MODELS))
    paths["digits"] = os.path.join(out, "digits.onnx")
    train.build(paths["digits"], seed=0)
    return paths


@pytest.fixture(scope="module")
def models_page(web_bundle: Any, bundle_page: Any, model_files: Dict[str, str]) -> Any:
    """The page of one bundle holding the four models, its first model opened."""
    _, url = web_bundle([model_files[k] for k in ("digits",) + BENCH_MODELS],
                        title="onnxedge models test")
    page = bundle_page(url)
    state = wait_state(page, ("ready", "done", "error"))
    assert state in ("ready", "done"), "the bundle page did not start: %s" % "\n".join(
        page.console_lines[-20:])
    return page


def _feeds(name: str, model_files: Dict[str, str]) -> Dict[str, np.ndarray]:
    if name == "digits":
        samples = np.load(os.path.join(os.path.dirname(model_files["digits"]), "digits_samples.npz"))
        return {"image": samples["images"]}
    return models.make_inputs(name)


@pytest.mark.parametrize("name", ("digits",) + BENCH_MODELS)
def test_model_in_page_matches_onnxruntime(name: str, models_page: Any,
                                           model_files: Dict[str, str]):
    feeds = _feeds(name, model_files)
    ref = onnxruntime.InferenceSession(model_files[name], providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    got = models_page.evaluate(RUN_JS, {"model": "models/%s.oxe" % name,
                                        "feeds": {k: encode_array(v) for k, v in feeds.items()}})
    native = onnxedge.InferenceSession(model_files[name], providers=["CPUExecutionProvider"])
    native_out = dict(zip([o.name for o in native.get_outputs()], native.run(None, feeds)))
    worst = assert_page_outputs(got, expected, RTOL, ATOL, name + " vs onnxruntime")
    assert_page_outputs(got, native_out, RTOL, ATOL, name + " vs native onnxedge")
    if name == "digits":
        labels = np.load(os.path.join(os.path.dirname(model_files["digits"]),
                                      "digits_samples.npz"))["labels"]
        accuracy = float(np.mean(decode_array(got["outputs"]["probabilities"]).argmax(axis=1) == labels))
        assert accuracy >= 0.9
    SUMMARY.append("model %-13s in the page (onnxedge.js, 'wasm'): run %8.1f ms, max |diff| vs "
                   "onnxruntime %.2g" % (name, got["runMs"], worst))
