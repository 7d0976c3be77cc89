"""The page backend of the WebGPU device layer (device_js.JsDevice over navigator.gpu, SwiftShader
in headless Chromium), checked against numpy outside the page."""
from __future__ import annotations

import json

import numpy as np

# y = a * x + b over n elements; a second output z = x * x; the uniform block holds n, a
SHADER = """
struct U { n: u32, a: f32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> xs: array<f32>;
@group(0) @binding(1) var<storage, read> bs: array<f32>;
@group(0) @binding(2) var<storage, read_write> ys: array<f32>;
@group(0) @binding(3) var<uniform> u: U;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i < u.n) { ys[i] = u.a * xs[i] + bs[i]; }
}
"""


def test_adapter_is_swiftshader_fallback(js_device):
    assert js_device["backend"] == "WebGPU (navigator.gpu)"
    assert js_device["is_fallback"] is True, js_device


def test_dispatch_uniforms_copy_and_readbacks_match_numpy(pyodide_page, js_device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    url = pyodide_page.put_arrays("axb", {"x": x, "b": b})
    got = pyodide_page.run(
        "import struct\n"
        "from onnxedge.web.webgpu.device import CommandList\n"
        "d = await fetch_npz(%r)\n"
        "p = dev.pipeline('axb-test', %r)\n"
        "xb, bb = dev.upload(d['x']), dev.upload(d['b'])\n"
        "yb, zb = dev.acquire(4000), dev.acquire(4000)\n"
        "cl = CommandList()\n"
        "n = d['x'].size\n"
        "cl.dispatch(p, [xb, bb, yb], struct.pack('<IfII', n, 2.5, 0, 0), ((n + 63) // 64, 1, 1))\n"
        "cl.dispatch(p, [yb, bb, zb], struct.pack('<IfII', n, -1.0, 0, 0), ((n + 63) // 64, 1, 1))\n"
        "cl.copy(zb, 0, yb, 400, 400)\n"
        "cl.read(yb, (10, 100), 'float32'); cl.read(zb, (1000,), 'float32')\n"
        "y, z = await dev.execute_async(cl)\n"
        "dev.release(yb); dev.release(zb)\n"
        "json.dumps({'y': y.ravel().tolist(), 'yshape': list(y.shape), 'z': z.tolist(),\n"
        "            'submits': dev.stats['submits']})" % (url, SHADER))
    got = json.loads(got)
    y_ref = 2.5 * x + b
    z_ref = -1.0 * y_ref + b
    y_ref_after_copy = y_ref.copy()
    y_ref_after_copy[100:200] = z_ref[:100]
    assert got["yshape"] == [10, 100]
    np.testing.assert_allclose(np.array(got["y"], np.float32), y_ref_after_copy, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(got["z"], np.float32), z_ref, rtol=1e-6, atol=1e-6)
    assert got["submits"] >= 1


def test_pooled_buffers_are_reused(pyodide_page, js_device):
    stats = pyodide_page.run_json(
        "a = dev.acquire(1000); dev.release(a); b = dev.acquire(900); dev.release(b)\n"
        "json.dumps([a is b, b.nbytes])")
    assert stats == [True, 900]


def test_blocking_execute_says_to_use_run_async(pyodide_page, js_device):
    msg = pyodide_page.run(
        "from onnxedge.web.webgpu.device import CommandList\n"
        "from onnxedge.errors import EPFail\n"
        "try:\n"
        "    dev.execute(CommandList()); r = 'no error'\n"
        "except EPFail as e:\n"
        "    r = str(e)\n"
        "r")
    assert "run_async" in msg


def test_invalid_shader_use_becomes_epfail(pyodide_page, js_device):
    msg = pyodide_page.run(
        "from onnxedge.web.webgpu.device import CommandList\n"
        "from onnxedge.errors import EPFail\n"
        "bad = dev.pipeline('broken-test', 'this is not wgsl')\n"
        "cl = CommandList(); buf = dev.acquire(16)\n"
        "cl.dispatch(bad, [buf], b'', (1, 1, 1)); cl.read(buf, (4,), 'float32')\n"
        "try:\n"
        "    await dev.execute_async(cl); r = 'no error'\n"
        "except EPFail as e:\n"
        "    r = str(e)\n"
        "r")
    assert "broken-test" in msg and "WebGPU rejected" in msg
