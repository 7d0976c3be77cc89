"""The JupyterLite-style example of docs/WEB.md, cell by cell, in a fresh Web Worker running
Pyodide 0.17.1 (as a notebook kernel does): `micropip.install(<wheel URL>)`,
`await onnxedge.web.init()`, a session from the fetched digit demo `.onnx`, then `run` and
`run_async`; both give onnxruntime's outputs (computed natively), rtol 1e-4 / atol 1e-5."""
from __future__ import annotations

import json
import os
from typing import Any, Dict

import numpy as np
import onnxruntime

from conftest import SUMMARY
from pyodide_contexts import open_context

# the cells of docs/WEB.md's "onnxedge in JupyterLite, PyScript or your own worker" (keep in step);
# WHEEL_URLS / MODEL_URL / SAMPLES_URL are filled in by the test
CELLS = [
    """
import micropip
await micropip.install(["numpy"] + WHEEL_URLS)   # the onnxedge wheel (and flatbuffers) by URL
""",
    """
import onnxedge, onnxedge.web
status = await onnxedge.web.init()               # wasm SIMD kernels (threads when isolated)
""",
    """
import io
import numpy as np
sess = onnxedge.InferenceSession(await onnxedge.web.fetch_bytes(MODEL_URL),
                                 providers=onnxedge.get_available_providers())
samples = np.load(io.BytesIO(await onnxedge.web.fetch_bytes(SAMPLES_URL)))
probs = sess.run(None, {"image": samples["images"]})[0]
probs_async = (await sess.run_async(None, {"image": samples["images"]}))[0]
""",
]


def test_notebook_cells_in_a_worker(browser: Any, page_server: Any, wheel_dir: str,
                                    data_dir: str, demo_files: Dict[str, str]) -> None:
    """The documented cells run in order in a worker and match onnxruntime."""
    with open(demo_files["digits"], "rb") as f, \
            open(os.path.join(data_dir, "digits.onnx"), "wb") as g:
        g.write(f.read())
    samples = os.path.join(os.path.dirname(demo_files["digits"]), "digits_samples.npz")
    with open(samples, "rb") as f, open(os.path.join(data_dir, "digits_samples.npz"), "wb") as g:
        g.write(f.read())
    ctx = open_context(browser, page_server.origin, data_dir, "worker")
    wheels = [page_server.origin + "/wheels/" + n for n in sorted(os.listdir(wheel_dir))
              if n.endswith(".whl")]
    ctx.run("WHEEL_URLS = %s\nMODEL_URL = %r\nSAMPLES_URL = %r\n'ok'"
            % (json.dumps(wheels), "/data/digits.onnx", "/data/digits_samples.npz"))
    for cell in CELLS:
        ctx.run(cell + "\n'ok'", timeout_s=180)
    got = ctx.run_json("import json, base64\njson.dumps({'status': status, "
                       "'providers': sess.get_providers(), "
                       "'sync': base64.b64encode(probs.astype('float32').tobytes()).decode(), "
                       "'async': base64.b64encode(probs_async.astype('float32').tobytes())"
                       ".decode(), 'shape': list(probs.shape)})")
    ref = onnxruntime.InferenceSession(demo_files["digits"], providers=["CPUExecutionProvider"])
    images = np.load(samples)["images"]
    want = ref.run(None, {"image": images})[0]
    import base64
    for key in ("sync", "async"):
        have = np.frombuffer(base64.b64decode(got[key]), np.float32).reshape(got["shape"])
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5, err_msg=key)
    assert got["providers"][0] == "WasmSimdExecutionProvider", got
    assert got["status"]["wasm"]["threads"] >= 1
    assert not ctx.blocked, ctx.blocked
    SUMMARY.append("notebook worker: digits on %s, init %s" % (got["providers"],
                                                              json.dumps(got["status"]["wasm"])))
