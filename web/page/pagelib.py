"""Helpers run in the page's global namespace after onnxedge is installed (Python 3.8 in Pyodide)."""
from __future__ import annotations

import io
import json
import time

import numpy as np
from js import Uint8Array, fetch


async def fetch_bytes(url):
    """The body of `url` (same origin) as bytes, copied out of JS in one bulk copy."""
    resp = await fetch(url)
    if not resp.ok:
        raise OSError("fetch %s: HTTP %d" % (url, resp.status))
    view = Uint8Array.new(await resp.arrayBuffer())
    out = bytearray(view.length)
    view.assign_to(out)
    return bytes(out)


async def fetch_npy(url):
    """A numpy array from a served `.npy` file."""
    return np.load(io.BytesIO(await fetch_bytes(url)), allow_pickle=False)


async def fetch_npz(url):
    """A dict name -> numpy array from a served `.npz` file (feeds, test data)."""
    with np.load(io.BytesIO(await fetch_bytes(url)), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def now_ms():
    """Wall-clock milliseconds (performance.now() resolution when the page is isolated)."""
    return time.perf_counter() * 1000.0


async def run_model(model_url, feeds_url, providers, repeat=0, optimization_level=None):
    """Open a served `.oxe` model from its bytes, load the `.npz` feeds and run them with
    `InferenceSession.run_async` on these providers (at this graph optimization level; None:
    the default). JSON with the outputs (base64 bytes, shape, dtype), the partition report (op
    type, provider) and timings in ms (model fetch, session creation, first run, mean of
    `repeat` runs)."""
    import base64
    import onnxedge
    feeds = await fetch_npz(feeds_url)
    t = now_ms()
    oxe_bytes = await fetch_bytes(model_url)
    fetch_ms = now_ms() - t
    t = now_ms()
    opts = onnxedge.SessionOptions()
    if optimization_level is not None:
        opts.graph_optimization_level = optimization_level
    sess = onnxedge.InferenceSession(oxe_bytes, opts, providers=providers)
    create_ms = now_ms() - t
    t = now_ms()
    outs = await sess.run_async(None, feeds)
    first_ms = now_ms() - t
    run_ms = None
    if repeat:
        t = now_ms()
        for _ in range(repeat):
            await sess.run_async(None, feeds)
        run_ms = (now_ms() - t) / repeat
    names = [o.name for o in sess.get_outputs()]
    return json.dumps({
        "outputs": {n: {"shape": list(o.shape), "dtype": str(o.dtype),
                        "data": base64.b64encode(np.ascontiguousarray(o).tobytes()).decode()}
                    for n, o in zip(names, outs)},
        "partition": [[r["op_type"], r["provider"]] for r in sess.partition_report()],
        "providers": sess.get_providers(),
        "fetch_ms": fetch_ms, "create_ms": create_ms, "first_ms": first_ms, "run_ms": run_ms})
