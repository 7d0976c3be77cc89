"""onnxedge.web: the WebGPU and wasm SIMD providers, the Pyodide page and its tools.

In any Pyodide context (a page, a Web Worker, JupyterLite), after `micropip.install(<wheel>)`::

    import onnxedge, onnxedge.web
    await onnxedge.web.init(threads=2, webgpu=True)   # start the page's accelerators
    sess = onnxedge.InferenceSession(await onnxedge.web.fetch_bytes("model.onnx"),
                                     providers=onnxedge.get_available_providers())
    outputs = await sess.run_async(None, feeds)

`init`, `fetch_bytes` and `refresh_providers` live in onnxedge.web.page_init, imported on first
use (importing onnxedge.web costs nothing). See docs/WEB.md.
"""
from __future__ import annotations

from typing import Any

_LAZY = ("init", "fetch_bytes", "refresh_providers")


def __getattr__(name: str) -> Any:
    """onnxedge.web.init / fetch_bytes / refresh_providers, from page_init on first use."""
    if name in _LAZY:
        from . import page_init
        return getattr(page_init, name)
    raise AttributeError("module 'onnxedge.web' has no attribute %r" % name)


__all__ = list(_LAZY)
