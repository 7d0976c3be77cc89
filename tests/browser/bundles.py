"""Fixtures for `onnxedge web build` bundles in headless Chromium (imported by conftest.py).

- `web_bundle(models, **opts) -> (dist_dir, page_url)`: builds a bundle once per distinct
  (models, opts) in the session with `onnxedge.web.bundle.build_bundle` (opts are its keyword
  arguments: config, pyodide, providers, title) and serves it at /bundles/<n>/ on one local
  server; page_url is the bundle's index.html.
- `bundle_page(page_url, wait=True) -> playwright Page`: one page per URL for the session
  (cached), in a browser context whose outside requests are aborted; with `wait`, returns once
  the page has opened its first model (body[data-state] is "ready", "done" or "error").
- Every test that used them fails if a page tried to reach anything but the local server.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

import pytest

from onnxedge.web.static_server import PageServer
from server import local_only_context

BUNDLE_TIMINGS: Dict[str, float] = {}
_BLOCKED: List[str] = []


# JS for page.evaluate: `decode(t)` makes an onnxedge.Tensor from {type, dims, b64} and
# `encode(t)` the reverse (tensors cross between the test and the page as base64 of their bytes).
JS_TENSOR_CODEC = """
  const TYPED = {float32: Float32Array, float64: Float64Array, int32: Int32Array,
                 int64: BigInt64Array};
  const decode = (t) => {
    const bytes = Uint8Array.from(atob(t.b64), (c) => c.charCodeAt(0));
    return new window.onnxedge.Tensor(t.type, new TYPED[t.type](bytes.buffer), t.dims);
  };
  const encode = (t) => {
    const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000)
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return {type: t.type, dims: t.dims, b64: btoa(text)};
  };
"""


def encode_array(x: Any) -> Dict[str, Any]:
    """A numpy array as the {type, dims, b64} that JS_TENSOR_CODEC's `decode` reads."""
    import base64
    import numpy as np
    return {"type": str(x.dtype), "dims": list(x.shape),
            "b64": base64.b64encode(np.ascontiguousarray(x).tobytes()).decode()}


def decode_array(t: Dict[str, Any]) -> Any:
    """The numpy array of a {type, dims, b64} that JS_TENSOR_CODEC's `encode` wrote."""
    import base64
    import numpy as np
    return np.frombuffer(base64.b64decode(t["b64"]), np.dtype(t["type"])).reshape(t["dims"])


def assert_page_outputs(got: Dict[str, Any], expected: Dict[str, Any], rtol: float, atol: float,
                        label: str = "") -> float:
    """Check the page's outputs ({"names", "outputs"} of a run) against expected {name: array}:
    same names in order, shapes, dtypes and values within rtol/atol; the largest |difference|."""
    import numpy as np
    assert got["names"] == list(expected), label
    worst = 0.0
    for name, want in expected.items():
        have = decode_array(got["outputs"][name])
        assert have.shape == want.shape and have.dtype == want.dtype, (label, name)
        np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, err_msg="%s %s" % (label, name))
        worst = max(worst, float(np.max(np.abs(have.astype(np.float64) - want))) if want.size else 0.0)
    return worst


@pytest.fixture(scope="session")
def demo_files() -> Dict[str, str]:
    """The demo MLP and digit CNN in demo/models/, made as `make demo` makes them when missing
    (a fresh clone has neither: demo/models/ is not tracked)."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    demo = os.path.join(root, "demo")
    makers = {"mlp": os.path.join(demo, "make_models.py"),
              "digits": os.path.join(demo, "digits", "train.py")}
    out = {}
    for name, script in makers.items():
        out[name] = os.path.join(demo, "models", name + ".onnx")
        if not os.path.isfile(out[name]):
            subprocess.run([sys.executable, script], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def bundle_server():
    """The session's server for bundles (folders are mounted as they are built)."""
    server = PageServer({}).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def web_bundle(tmp_path_factory: Any, bundle_server: PageServer) -> Callable[..., Tuple[str, str]]:
    """Factory: web_bundle(models, **build_bundle options) -> (dist_dir, page_url), cached."""
    from onnxedge.web.bundle import build_bundle
    cache: Dict[Any, Tuple[str, str]] = {}

    def make(models: Sequence[str], **opts: Any) -> Tuple[str, str]:
        key = (tuple(os.path.abspath(m) for m in models),
               tuple(sorted((k, repr(v)) for k, v in opts.items())))
        if key not in cache:
            n = len(cache) + 1
            dist = str(tmp_path_factory.mktemp("bundle%d" % n))
            t = time.perf_counter()
            build_bundle(list(models), dist, progress=None, **opts)
            BUNDLE_TIMINGS["bundle %d build (s)" % n] = time.perf_counter() - t
            url = bundle_server.mount("/bundles/%d/" % n, dist)
            cache[key] = (dist, url + "index.html")
        return cache[key]

    return make


@pytest.fixture(scope="session")
def bundle_page(browser: Any, bundle_server: PageServer) -> Callable[..., Any]:
    """Factory: bundle_page(page_url, wait=True) -> a Playwright page on that bundle (cached)."""
    context = local_only_context(browser, bundle_server.origin, _BLOCKED)
    pages: Dict[str, Any] = {}

    def open_page(url: str, wait: bool = True) -> Any:
        if url not in pages:
            page = context.new_page()
            page.console_lines = []
            page.on("console", lambda msg: page.console_lines.append("%s: %s" % (msg.type, msg.text)))
            page.on("pageerror", lambda err: page.console_lines.append("pageerror: %s" % err))
            t = time.perf_counter()
            page.goto(url)
            if wait:
                wait_state(page, ("ready", "done", "error"), 90)
                BUNDLE_TIMINGS["page load to first model ready (s) %s" % url.split("/")[-2]] = \
                    time.perf_counter() - t
            pages[url] = page
        return pages[url]

    return open_page


def wait_state(page: Any, states: Sequence[str], timeout_s: float = 60) -> str:
    """Wait until body[data-state] is one of `states`; returns it."""
    page.wait_for_function("states => states.includes(document.body.dataset.state)",
                           arg=list(states), timeout=timeout_s * 1000)
    return page.evaluate("document.body.dataset.state")


@pytest.fixture(autouse=True)
def _bundle_pages_stay_local():
    """Fail a test during which a bundle page tried to reach outside the local server."""
    yield
    if _BLOCKED:
        urls, _BLOCKED[:] = list(_BLOCKED), []
        pytest.fail("a bundle page tried to reach outside localhost: %s" % urls)
