"""A bundle built with `--providers cpu,webgpu`: the page installs its navigator.gpu device and
runs the MLP on the WebGPU provider (SwiftShader in headless Chromium), outputs as onnxruntime's."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnxruntime

from bundles import wait_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "demo", "models", "mlp.onnx")


def test_webgpu_bundle_runs_the_mlp_on_the_gpu_provider(web_bundle: Any, bundle_page: Any):
    if not os.path.isfile(MLP):
        import subprocess
        import sys
        subprocess.run([sys.executable, os.path.join(ROOT, "demo", "make_models.py")], check=True)
    _, url = web_bundle([MLP], providers="cpu,webgpu")
    page = bundle_page(url)
    assert wait_state(page, ("ready", "error")) == "ready", page.evaluate("JSON.stringify(onnxedgeApp.error)")
    x = np.random.default_rng(3).standard_normal((2, 784)).astype(np.float32)
    out = page.evaluate("""async (x) => {
        const s = await onnxedge.InferenceSession.create('models/mlp.oxe', {executionProviders: ['webgpu']});
        const o = await s.run({input: new onnxedge.Tensor('float32', Float32Array.from(x), [2, 784])});
        return {providers: s.providers, partition: s.partition().map(r => r.provider),
                data: Array.from(o[s.outputNames[0]].data)};
    }""", x.ravel().tolist())
    assert out["providers"] == ["WebGpuExecutionProvider", "CPUExecutionProvider"]
    assert "WebGpuExecutionProvider" in out["partition"]
    ref = onnxruntime.InferenceSession(MLP, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    np.testing.assert_allclose(np.array(out["data"]).reshape(ref.shape), ref, rtol=1e-4, atol=1e-5)
