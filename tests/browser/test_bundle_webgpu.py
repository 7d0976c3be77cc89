"""A bundle built with `--providers cpu,webgpu`: the page installs its navigator.gpu device and
runs the MLP on the WebGPU provider (SwiftShader in headless Chromium), outputs as onnxruntime's."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime

from bundles import wait_state



def test_webgpu_bundle_runs_the_mlp_on_the_gpu_provider(web_bundle: Any, bundle_page: Any,
                                                         demo_files: Any):
    _, url = web_bundle([demo_files["mlp"]], providers="cpu,webgpu")
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
    ref = onnxruntime.InferenceSession(demo_files["mlp"], providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    np.testing.assert_allclose(np.array(out["data"]).reshape(ref.shape), ref, rtol=1e-4, atol=1e-5)
