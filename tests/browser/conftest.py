"""Browser test harness: Pyodide 0.17.1 in headless Chromium (pytest-playwright), served from
localhost, with onnxedge's own wheel installed in the page by micropip.

- `page_server`: mounts Pyodide (web/node_modules), the harness page (web/page), the wheels and a
  per-session data folder on 127.0.0.1.
- `pyodide_page`: one page for the session with Pyodide, numpy and onnxedge ready; `run(code)`
  runs Python in it (top-level await allowed) and returns the last expression (a JSON str).
- Every request to anything but the local server is aborted, and the test that caused it fails.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List

import numpy as np
import pytest

from onnxedge import model_io
from server import PageServer, local_only_context

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM = "/usr/bin/chromium"
PYODIDE_DIR = os.path.join(ROOT, "web", "node_modules", "@pyodide", "pyodide", "dist")
PAGE_DIR = os.path.join(ROOT, "web", "page")
VENDOR_WHEELS = os.path.join(PAGE_DIR, "wheels")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--enable-unsafe-webgpu"]

TIMINGS: Dict[str, float] = {}
SUMMARY: List[str] = []   # result lines the tests report (printed after the timings)


def _missing_setup() -> List[str]:
    missing = []
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(CHROMIUM)
    if not os.path.isfile(os.path.join(PYODIDE_DIR, "pyodide.js")):
        missing.append(PYODIDE_DIR)
    vendored = os.listdir(VENDOR_WHEELS) if os.path.isdir(VENDOR_WHEELS) else []
    if not any(f.startswith("flatbuffers-") and f.endswith(".whl") for f in vendored):
        missing.append(os.path.join(VENDOR_WHEELS, "flatbuffers-*.whl"))
    return missing


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: Dict[str, Any]) -> Dict[str, Any]:
    """Debian's Chromium (Playwright cannot download its own), headless, with WebGPU."""
    missing = _missing_setup()
    if missing:
        pytest.fail("the browser tests need `make setup-browser`; missing: %s" % ", ".join(missing))
    return dict(browser_type_launch_args, executable_path=CHROMIUM, headless=True,
                args=CHROMIUM_FLAGS)


class _Lifetime:
    """Playwright, the browser and the page contexts, stoppable once the browser tests are done.

    Playwright's sync API keeps an asyncio loop running in the main thread while it is started;
    stopping it right after the last browser test gives the suites that follow a clean thread
    (`asyncio.run` works again) instead of waiting for the end of the whole session."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.browser: Any = None
        self.contexts: List[Any] = []
        self.stopped = False

    def stop(self) -> None:
        """Close contexts, browser and Playwright (idempotent)."""
        if self.stopped:
            return
        self.stopped = True
        for ctx in self.contexts:
            ctx.close()
        if self.browser is not None:
            self.browser.close()
        if self.playwright is not None:
            self.playwright.stop()


LIFETIME = _Lifetime()
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def playwright() -> Any:
    """pytest-playwright's fixture, made stoppable after the last browser test."""
    from playwright.sync_api import sync_playwright
    if LIFETIME.stopped:
        pytest.fail("the browser tests already ran and stopped Playwright in this session: run "
                    "tests/browser in one block")
    LIFETIME.playwright = sync_playwright().start()
    yield LIFETIME.playwright
    LIFETIME.stop()


@pytest.fixture(scope="session")
def browser(browser_type: Any, browser_type_launch_args: Dict[str, Any]) -> Any:
    """Headless Chromium (pytest-playwright's fixture, closed with `LIFETIME`)."""
    LIFETIME.browser = browser_type.launch(**browser_type_launch_args)
    yield LIFETIME.browser
    LIFETIME.stop()


def pytest_runtest_teardown(item: Any, nextitem: Any) -> None:
    """After the last test of tests/browser, stop the browser and Playwright."""
    if nextitem is None or not str(nextitem.path).startswith(HERE + os.sep):
        LIFETIME.stop()


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory) -> str:
    """onnxedge's pure wheel, built once per session, beside the vendored flatbuffers wheel."""
    out = str(tmp_path_factory.mktemp("wheels"))
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", out, ROOT], capture_output=True, text=True)
    assert proc.returncode == 0, "building onnxedge's wheel failed:\n" + proc.stderr[-3000:]
    TIMINGS["wheel build (native, s)"] = time.perf_counter() - t
    for name in os.listdir(VENDOR_WHEELS):
        if name.startswith("flatbuffers-") and name.endswith(".whl"):
            shutil.copy(os.path.join(VENDOR_WHEELS, name), out)
    return out


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> str:
    """A served folder where tests put models and inputs for the page (/data/)."""
    return str(tmp_path_factory.mktemp("page-data"))


@pytest.fixture(scope="session")
def page_server(wheel_dir: str, data_dir: str):
    """The local server: /pyodide/, /page/, /wheels/, /data/."""
    server = PageServer({"/pyodide/": PYODIDE_DIR, "/page/": PAGE_DIR, "/wheels/": wheel_dir,
                         "/data/": data_dir}).start()
    yield server
    server.stop()


class PyodidePage:
    """The session's page with onnxedge installed; `run` executes Python in it."""

    def __init__(self, page: Any, server: PageServer, data_dir: str, blocked: List[str],
                 console: List[str]):
        self.page = page
        self.server = server
        self.data_dir = data_dir
        self.blocked = blocked
        self.console = console
        self.timings: Dict[str, float] = {}

    def run(self, code: str) -> Any:
        """Run Python in the page (top-level await works); the last expression's value."""
        try:
            return self.page.evaluate("code => harness.run(code)", code)
        except Exception as e:
            tail = "\n".join(self.console[-20:])
            raise AssertionError("Python in the page failed: %s\n--- page console ---\n%s"
                                 % (e, tail)) from None

    def run_json(self, code: str) -> Any:
        """Run Python whose last expression is a JSON string; the decoded value."""
        return json.loads(self.run(code))

    def put(self, name: str, data: bytes) -> str:
        """Serve `data` at /data/<name>; returns the path the page fetches."""
        with open(os.path.join(self.data_dir, name), "wb") as f:
            f.write(data)
        return "/data/" + name

    def put_oxe(self, name: str, onnx_model: Any) -> str:
        """Convert an ONNX model (ModelProto or bytes) to `.oxe` natively (model_io.load →
        model_io.save) and serve it at /data/<name>.oxe, for the page to open from its bytes
        (the page has numpy and flatbuffers, not `onnx`)."""
        data = onnx_model if isinstance(onnx_model, bytes) else onnx_model.SerializeToString()
        path = os.path.join(self.data_dir, name + ".oxe")
        model_io.save(model_io.load(data), path)
        assert model_io.is_oxe(path), "%s is not an .oxe file" % path
        return "/data/" + name + ".oxe"

    def put_arrays(self, name: str, arrays: Dict[str, np.ndarray]) -> str:
        """Serve arrays (feeds, test data) as /data/<name>.npz; the page reads it with
        `fetch_npz`."""
        path = os.path.join(self.data_dir, name + ".npz")
        np.savez(path, **arrays)
        return "/data/" + name + ".npz"


@pytest.fixture(scope="session")
def pyodide_page(browser: Any, page_server: PageServer, wheel_dir: str, data_dir: str):
    """One page for the session: Pyodide 0.17.1, numpy and onnxedge (by micropip) ready."""
    blocked: List[str] = []
    console: List[str] = []
    context = local_only_context(browser, page_server.origin, blocked)
    LIFETIME.contexts.append(context)
    page = context.new_page()
    page.on("console", lambda msg: console.append("%s: %s" % (msg.type, msg.text)))
    page.on("pageerror", lambda err: console.append("pageerror: %s" % err))
    t = time.perf_counter()
    page.goto(page_server.origin + "/page/harness.html")
    wheels = ["/wheels/" + n for n in sorted(os.listdir(wheel_dir)) if n.endswith(".whl")]
    timings = page.evaluate("opts => harness.start(opts)", {"wheels": wheels})
    TIMINGS["page start to onnxedge ready (s)"] = time.perf_counter() - t
    TIMINGS["  Pyodide 0.17.1 core (ms)"] = timings["pyodide_ms"]
    TIMINGS["  loadPackage numpy + micropip (ms)"] = timings["numpy_ms"]
    TIMINGS["  micropip install onnxedge + flatbuffers (ms)"] = timings["wheels_ms"]
    yield PyodidePage(page, page_server, data_dir, blocked, console)
    LIFETIME.stop()


@pytest.fixture(autouse=True)
def _no_outside_requests(request: Any):
    """Fail a test during which the page tried to reach anything but the local server."""
    yield
    if "pyodide_page" in request.fixturenames:
        pp = request.getfixturevalue("pyodide_page")
        if pp.blocked:
            urls, pp.blocked[:] = list(pp.blocked), []
            pytest.fail("the page tried to reach outside localhost: %s" % urls)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the page timings measured in this run."""
    if TIMINGS:
        terminalreporter.section("browser page timings (headless Chromium, Pyodide 0.17.1)")
        for key, value in TIMINGS.items():
            terminalreporter.write_line("%-50s %10.1f" % (key, value))
    if SUMMARY:
        terminalreporter.section("browser test results")
        for line in SUMMARY:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def js_device(pyodide_page: PyodidePage) -> Dict[str, Any]:
    """The page's WebGPU device (`dev` in the page), installed as the WebGPU provider's
    default device; returns its adapter info."""
    t = time.perf_counter()
    info = pyodide_page.run_json(
        "from onnxedge.web.webgpu import device_js\n"
        "dev = await device_js.install()\n"
        "json.dumps(dev.info.as_dict())")
    TIMINGS["navigator.gpu device ready (ms)"] = (time.perf_counter() - t) * 1000
    return info


# `onnxedge web build` bundles in the page (fixtures web_bundle, bundle_page): see bundles.py
import bundles  # noqa: E402
from bundles import _bundle_pages_stay_local, bundle_page, bundle_server, demo_files, web_bundle  # noqa: E402,F401

bundles.BUNDLE_TIMINGS = TIMINGS
