"""`await onnxedge.web.init()`: one Python call that readies the page's accelerators.

Inside Pyodide (a page, a bare page, a Web Worker, a JupyterLite kernel) it

- starts the wasm SIMD kernels (web/wasm/oxk.js) from the module bytes inside the installed wheel
  (no URL needed; `wasm_url` is the fallback for a bundle whose modules lie beside the page), on
  `threads` threads when the context is cross-origin isolated (else one, with a warning), with a
  time limit on the worker threads' start-up;
- opens the WebGPU device from `navigator.gpu` when `webgpu` is true;
- asks every provider to re-probe its availability (`refresh()`), so sessions created afterwards
  see what was started.

It returns a dict saying what is ready and why the rest is not. Natively (no `js` module) there
is nothing to start: it refreshes the providers and says so. onnxedge.js goes through the same
call, so every Pyodide context behaves alike.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Optional

WORKER_TIMEOUT_S = 10.0
_MODULES = ("oxk.wasm", "oxk-mt.wasm")


def _js() -> Any:
    """Pyodide's `js` module, or None natively."""
    try:
        import js
    except ImportError:
        return None
    return js


async def init(threads: int = 0, webgpu: bool = False, wasm: bool = True,
               timeout_s: float = WORKER_TIMEOUT_S, wasm_url: Optional[str] = None,
               power_preference: str = "high-performance") -> Dict[str, Any]:
    """Ready the page's accelerators and refresh provider availability.

    threads: wasm kernel threads (0: one per core, up to 16, when cross-origin isolated; more
    than 1 needs cross-origin isolation, else one thread and a warning). webgpu: open
    `navigator.gpu`'s device for the WebGPU provider. wasm: start the wasm SIMD kernels (when the
    wheel has them). timeout_s: limit on the worker threads' start-up (then one thread and a
    warning). wasm_url: folder holding oxk.js/oxk.wasm/oxk-mt.wasm when the wheel lacks them.

    Returns {"wasm": {"threads", "note"} or {"error"}, "webgpu": {"adapter"} or {"error"} or
    None, "isolated": bool, "providers": get_available_providers()}. Errors of the accelerators
    become warnings and the "error" entries (sessions then run on what remains, as
    onnxruntime-web skips a backend it cannot start); bad arguments raise InvalidArgument."""
    from onnxedge.errors import InvalidArgument
    if int(threads) < 0:
        raise InvalidArgument("onnxedge.web.init: threads=%r: expected 0 (auto) or a positive "
                              "count" % (threads,))
    if not float(timeout_s) > 0:
        raise InvalidArgument("onnxedge.web.init: timeout_s=%r: expected seconds > 0"
                              % (timeout_s,))
    js = _js()
    status: Dict[str, Any] = {"wasm": None, "webgpu": None, "isolated": _isolated(js)}
    if js is None:
        status["wasm"] = {"error": "not inside Pyodide (no 'js' module): nothing to start"}
    elif wasm:
        status["wasm"] = await _start_wasm(js, int(threads), float(timeout_s), wasm_url)
    if webgpu:
        status["webgpu"] = await _start_webgpu(power_preference)
    status["providers"] = refresh_providers()
    return status


def _isolated(js: Any) -> bool:
    """True when SharedArrayBuffer may be shared with workers (COOP/COEP served)."""
    if js is None:
        return False
    return bool(getattr(js, "crossOriginIsolated", False)) and \
        getattr(js, "SharedArrayBuffer", None) is not None


def refresh_providers() -> List[str]:
    """Ask every provider class with a `refresh()` to forget cached availability; the names of
    the providers available now (get_available_providers). A wheel installed since is seen too:
    it changes a sys.path folder, which makes discovery read the entry points anew."""
    from onnxedge.providers import discovery
    for cls in discovery.provider_classes().values():
        refresh = getattr(cls, "refresh", None)
        if callable(refresh):
            refresh()
    return discovery.available_providers()


# ---------------------------------------------------------------------------- wasm kernels
async def _start_wasm(js: Any, threads: int, timeout_s: float,
                      wasm_url: Optional[str]) -> Dict[str, Any]:
    try:
        from onnxedge.web.wasm import transport
    except ImportError:
        return {"error": "this wheel has no wasm SIMD provider (onnxedge.web.wasm)"}
    if transport.current() is not None:   # already started (by an earlier init or the page)
        rt = js.onnxedgeWasm
        return {"threads": int(rt.threads), "note": str(rt.note)}
    isolated = _isolated(js)
    if threads > 1 and not isolated:
        warnings.warn("onnxedge.web.init(threads=%d): this context is not cross-origin isolated "
                      "(serve the page with Cross-Origin-Opener-Policy: same-origin and "
                      "Cross-Origin-Embedder-Policy: require-corp for SharedArrayBuffer), so the "
                      "wasm kernels run on one thread" % threads, RuntimeWarning, stacklevel=3)
        threads = 1
    try:
        opts = _wasm_options(js, threads, timeout_s, wasm_url)
        rt = await js.onnxedgeWasm.init(opts)
    except Exception as e:   # a missing module, a failed fetch, a compile error
        why = "the wasm SIMD kernels could not be started: %s" % _message(e)
        warnings.warn("onnxedge.web.init: %s; sessions run their nodes on numpy" % why,
                      RuntimeWarning, stacklevel=3)
        return {"error": why}
    got, note = int(rt.threads), str(rt.note)
    if threads > 1 and got < threads and "failed" in note:
        warnings.warn("onnxedge.web.init(threads=%d): the wasm kernels run on %s"
                      % (threads, note), RuntimeWarning, stacklevel=3)
    transport.install(None)   # look the started module up again
    return {"threads": got, "note": note}


def _wasm_options(js: Any, threads: int, timeout_s: float, wasm_url: Optional[str]) -> Any:
    """oxk.js loaded (from the wheel's copy, else wasm_url) and the options of its init():
    the modules' bytes from the wheel, or wasm_url as baseURL."""
    from onnxedge.errors import Fail
    from onnxedge.web import wasm as pkg
    if getattr(js, "onnxedgeWasm", None) is None:
        if not os.path.isfile(pkg.RUNTIME_JS):
            raise Fail("%s is not in this wheel and the page has not loaded oxk.js (load it "
                       "with a <script> from the bundle's wasm/ folder)" % pkg.RUNTIME_JS)
        with open(pkg.RUNTIME_JS, encoding="utf-8") as f:
            js.Function.new(f.read())()
    opts = js.Object.new()
    opts.threads = threads
    opts.timeoutMs = int(timeout_s * 1000)
    paths = [os.path.join(pkg.LIB_DIR, m) for m in _MODULES]
    if all(os.path.isfile(p) for p in paths):
        modules = js.Object.new()
        for name, path in zip(_MODULES, paths):
            setattr(modules, name, _u8(js, path))
        opts.modules = modules
    elif wasm_url:
        opts.baseURL = str(wasm_url)
    else:
        raise Fail("the wasm modules %s are not in this wheel: pass wasm_url= (the folder "
                   "`onnxedge web build` writes as wasm/) or install the full wheel" % paths)
    return opts


def _u8(js: Any, path: str) -> Any:
    """A JS Uint8Array holding the file's bytes (one bulk copy)."""
    with open(path, "rb") as f:
        data = f.read()
    u8 = js.Uint8Array.new(len(data))
    u8.assign(data)
    return u8


def _message(e: BaseException) -> str:
    """The last line of an error (a JsException carries the JS stack)."""
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


# ---------------------------------------------------------------------------- WebGPU
async def _start_webgpu(power_preference: str) -> Dict[str, Any]:
    try:
        from onnxedge.web.webgpu import device_js
    except ImportError:
        return {"error": "this wheel has no WebGPU provider (onnxedge.web.webgpu)"}
    try:
        dev = await device_js.install(power_preference)
    except Exception as e:   # EPFail: no navigator.gpu, no adapter; outside Pyodide
        why = _message(e)
        warnings.warn("onnxedge.web.init(webgpu=True): %s" % why, RuntimeWarning, stacklevel=3)
        return {"error": why}
    return {"adapter": dev.info.name}


# ---------------------------------------------------------------------------- fetching
async def fetch_bytes(url: str) -> bytes:
    """The body of `url` as bytes, fetched by the browser (in a page or a worker): e.g. a model
    for `InferenceSession(await fetch_bytes("model.onnx"))`. Fail names the URL on HTTP errors."""
    from onnxedge.errors import Fail
    js = _js()
    if js is None:
        raise Fail("onnxedge.web.fetch_bytes(%r): only inside Pyodide (use urllib natively)"
                   % (url,))
    resp = await js.fetch(str(url))
    if not resp.ok:
        raise Fail("fetching %s failed: HTTP %s" % (url, resp.status))
    u8 = js.Uint8Array.new(await resp.arrayBuffer())
    out = bytearray(int(u8.length))
    u8.assign_to(out)
    return bytes(out)


__all__ = ["init", "refresh_providers", "fetch_bytes", "WORKER_TIMEOUT_S"]
