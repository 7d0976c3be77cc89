"""onnxedge.web: the WebGPU and wasm SIMD providers, the Pyodide page and its tools.

In any Pyodide context (a page, a Web Worker, JupyterLite), after `micropip.install(<wheel>)`::

    import onnxedge, onnxedge.web
    await onnxedge.web.init(threads=2, webgpu=True)   # start the page's accelerators
    sess = onnxedge.InferenceSession(await onnxedge.web.fetch_bytes("model.onnx"),
                                     providers=onnxedge.get_available_providers())
    outputs = await sess.run_async(None, feeds)

See docs/WEB.md.
"""
from .page_init import fetch_bytes, init, refresh_providers

__all__ = ["init", "fetch_bytes", "refresh_providers"]
