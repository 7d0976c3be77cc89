"""onnxedge.js's Python side, run in Pyodide's global namespace (Python 3.8 + numpy 1.17 and up).

onnxedge.js calls `oxe_call(call_id)` through `runPythonAsync` (runs of sessions without
asynchronous steps: `oxe_call_sync(call_id)`, called directly); the call's arguments wait in the
JS map `globalThis.onnxedgeCalls` (so concurrent calls never share a global). Every call returns
a plain JS object: `{ok: true, ...}` or `{ok: false, type, message}` carrying onnxedge's own
error (the JS side rejects with it). Tensors cross in one bulk copy each way (a Uint8Array's
`assign_to` into a bytearray, `assign` from a numpy array).

Start-up cost matters here (Pyodide 0.17 compiles every stdlib module it imports from source at
each page load): JSON crosses with the browser's own JSON.parse and a small encoder below
instead of the `json` package, and wheels unpack without `zipfile`.
"""
import importlib
import math
import os
import sys
import time
import zlib

import js

_SESSIONS = {}
_NEXT = [1]
_WEBGPU = {}
# 'wasm' is the wasm SIMD kernels (when initialized), then numpy; other short names ('cpu',
# 'webgpu', ...) are onnxedge.providers.discovery.SHORT_NAMES
_WASM_NAMES = ["WasmSimdExecutionProvider", "CPUExecutionProvider"]
_LEVELS = {"disabled": 0, "disable": 0, "basic": 1, "extended": 2, "all": 99, "layout": 99}


def _now():
    return time.perf_counter() * 1000.0


def _bytes_of(u8):
    out = bytearray(u8.length)
    u8.assign_to(out)
    return bytes(out)


def _obj(**fields):
    o = js.Object.new()
    for key, value in fields.items():
        setattr(o, key, value)
    return o


_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _dumps(value):
    """JSON text of plain Python data (dict, list, tuple, str, int, float, bool, None); NaN and
    infinities become null, other objects their str()."""
    if value is None or value is True or value is False:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "null"
    if isinstance(value, dict):
        return "{" + ",".join(_dumps(str(k)) + ":" + _dumps(v) for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    return '"' + str(value).translate(_ESCAPES) + '"'


def _py(value):
    """Plain Python data of a JS value from JSON.parse (objects -> dict, arrays -> list)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if js.Array.isArray(value):
        return [_py(v) for v in value]
    return {str(k): _py(getattr(value, str(k))) for k in js.Object.keys(value)}


def _loads(text):
    """Python data of JSON text (parsed by the browser)."""
    return _py(js.JSON.parse(str(text)))


def _json(value):
    return js.JSON.parse(_dumps(value))


def _site_packages():
    for entry in sys.path:
        if entry.endswith("site-packages") and os.path.isdir(entry):
            return entry
    import sysconfig
    return sysconfig.get_paths()["purelib"]


def _zip_members(data, name):
    """[(path, bytes)] of a zip archive's files (stored or deflated; no zip64). A small reader
    of its own: importing `zipfile` (and shutil, bz2, ... with it) costs Pyodide 0.17 ~0.1 s of
    compiling stdlib sources at every page load."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65557))
    if end < 0:
        raise ValueError("wheel %s is not a zip archive" % name)
    count = int.from_bytes(data[end + 10:end + 12], "little")
    pos = int.from_bytes(data[end + 16:end + 20], "little")
    out = []
    for _ in range(count):
        if data[pos:pos + 4] != b"PK\x01\x02":
            raise ValueError("wheel %s: a broken central directory" % name)
        u16 = lambda o: int.from_bytes(data[pos + o:pos + o + 2], "little")  # noqa: E731
        u32 = lambda o: int.from_bytes(data[pos + o:pos + o + 4], "little")  # noqa: E731
        method, size, local = u16(10), u32(20), u32(42)
        path = data[pos + 46:pos + 46 + u16(28)].decode("utf-8")
        pos += 46 + u16(28) + u16(30) + u16(32)
        start = local + 30 + int.from_bytes(data[local + 26:local + 28], "little") + \
            int.from_bytes(data[local + 28:local + 30], "little")
        raw = data[start:start + size]
        if method == 8:
            raw = zlib.decompressobj(-15).decompress(raw)
        elif method != 0:
            raise ValueError("wheel %s: %s uses zip method %d" % (name, path, method))
        out.append((path, raw))
    return out


def install_wheel(u8, name):
    """Unzip a pure wheel (a Uint8Array) into site-packages, as pip would; returns its file count."""
    target = _site_packages()
    members = _zip_members(_bytes_of(u8), name)
    bad = [p for p, _ in members if p.startswith("/") or ".." in p.split("/")]
    if bad:
        raise ValueError("wheel %s holds unsafe paths: %s" % (name, bad[:3]))
    made = set()
    for path, raw in members:
        if path.endswith("/"):
            continue
        full = os.path.join(target, path)
        folder = os.path.dirname(full)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        with open(full, "wb", buffering=0) as f:
            f.write(raw)
    importlib.invalidate_caches()
    return len(members)


def _providers(requested):
    """onnxedge provider names of executionProviders entries (short names expanded)."""
    from onnxedge.providers.discovery import canonical_name
    out = []
    for p in requested or []:
        name = p if isinstance(p, str) else (p.get("name") if isinstance(p, dict) else None)
        if not isinstance(name, str):
            from onnxedge.errors import InvalidArgument
            raise InvalidArgument("executionProviders entry %r: expected a name such as 'wasm', "
                                  "'webgpu' or an onnxedge provider name" % (p,))
        names = _WASM_NAMES if name.strip().lower() == "wasm" else [canonical_name(name)]
        for full in names:
            if full == "WasmSimdExecutionProvider" and full != name and not _wasm_ready():
                continue
            if full not in out:
                out.append(full)
    return out or ["CPUExecutionProvider"]


async def _usable(providers):
    """(providers this page can run, [{name, reason}] of the others), as onnxruntime-web skips
    the backends it cannot initialize; CPU is always usable."""
    from onnxedge.providers import discovery
    classes = discovery.provider_classes()
    usable, skipped = [], []
    for name in providers:
        reason = None
        if name not in classes:
            reason = ("this bundle was built without it (it has %s; rebuild with `onnxedge web "
                      "build --providers ...`)" % ", ".join(sorted(classes)))
        elif name == "WebGpuExecutionProvider":
            try:
                await _ensure_webgpu()
            except Exception as e:   # EPFail: no navigator.gpu, no adapter
                reason = str(e)
        if reason is None and not _is_available(classes[name]):
            reason = "not available in this page"
        if reason is None:
            usable.append(name)
        else:
            skipped.append({"name": name, "reason": reason})
    return usable or ["CPUExecutionProvider"], skipped


def _is_available(cls):
    try:
        return bool(cls.is_available())
    except Exception:
        return False


def _wasm_ready():
    """True when the wheel has the wasm provider and the page initialized its kernels."""
    try:
        from onnxedge.web.wasm import transport
    except ImportError:
        return False
    return transport.current() is not None


async def _ensure_webgpu():
    """Install the page's navigator.gpu device once (when the wheel holds the WebGPU provider;
    otherwise the session itself says the provider is unknown)."""
    if "device" not in _WEBGPU:
        try:
            from onnxedge.web.webgpu import device_js
        except ImportError:
            return None
        _WEBGPU["device"] = await device_js.install()
    return _WEBGPU["device"]


def _io(args):
    """[{name, type ('float32', ...), shape}] of NodeArgs (type "tensor(float)" -> "float32")."""
    from onnxedge import dtypes
    by_ort = {d.ort_name: d.numpy for d in dtypes.BY_CODE.values() if d.numpy}
    out = []
    for a in args:
        t = a.type
        if t.startswith("tensor(") and t.endswith(")"):
            t = by_ort.get(t[len("tensor("):-1], t)
        shape = [d if isinstance(d, int) and d >= 0 else (d or None) for d in a.shape]
        out.append({"name": a.name, "type": t, "shape": shape})
    return out


async def _create(args):
    import onnxedge
    t0 = _now()
    model = _bytes_of(args.model)
    providers, skipped = await _usable(_providers(_loads(args.providers)))
    opts = onnxedge.SessionOptions()
    for key, value in _loads(args.config or "{}").items():   # e.g. session.cpu_engine
        opts.add_session_config_entry(str(key), str(value))
    level = args.graphOptimizationLevel
    if level:
        if str(level).lower() not in _LEVELS:
            raise onnxedge.InvalidArgument("graphOptimizationLevel %r: expected one of %s"
                                           % (level, ", ".join(sorted(_LEVELS))))
        opts.graph_optimization_level = _LEVELS[str(level).lower()]
    sess = onnxedge.InferenceSession(model, opts, providers=providers)
    sid = _NEXT[0]
    _NEXT[0] += 1
    _SESSIONS[sid] = sess
    info = {"id": sid, "inputs": _io(sess.get_inputs()), "outputs": _io(sess.get_outputs()),
            "providers": sess.get_providers(), "sync": not sess.needs_run_async,
            "metadata": sess.get_modelmeta().custom_metadata_map,
            "partition": [{"node": r["node"], "opType": r["op_type"], "domain": r["domain"],
                           "provider": r["provider"], "reasons": r["fallback_reasons"]}
                          for r in sess.partition_report()],
            "skipped": skipped,
            "createMs": _now() - t0}
    return _obj(ok=True, info=_json(info))


def _session(sid):
    sess = _SESSIONS.get(int(sid))
    if sess is None:
        from onnxedge.errors import InvalidArgument
        raise InvalidArgument("session %s was released (or never created)" % sid)
    return sess


def _feeds(args):
    """(session, fetches, feeds) of a run call; the tensors copied out of JS in one copy each."""
    import numpy as np
    from onnxedge.errors import InvalidArgument
    sess = _session(args.session)
    meta = _loads(args.meta)
    feeds = {}
    for f, u8 in zip(meta["feeds"], args.buffers):
        name, dtype, dims = f["name"], f["type"], [int(d) for d in f["dims"]]
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise InvalidArgument("input '%s': tensor type %r is not one onnxedge can take"
                                  % (name, dtype)) from None
        raw = _bytes_of(u8)
        count = int(np.prod(dims)) if dims else 1
        if count * dt.itemsize != len(raw):
            raise InvalidArgument("input '%s': %d bytes of %s do not fill dims %s (%d elements)"
                                  % (name, len(raw), dtype, dims, count))
        feeds[name] = np.frombuffer(raw, dtype=dt).reshape(dims)
    return sess, meta.get("fetches"), feeds


def _direct(sess, feeds):
    """The JS object onnxedge.js runs this session's program from for feeds of this signature
    (onnxedge.web.wasm.provider.direct_program; its `valid` turns false when the program is
    released), or None: the session runs through Python."""
    try:
        from onnxedge.web.wasm.provider import direct_program
    except ImportError:   # a bundle without the wasm provider
        return None
    prog = direct_program(sess, feeds)
    if prog is None:
        return None
    if prog.published is None:
        desc = prog.describe()
        for i in desc["inputs"]:
            i["dims"] = [int(d) for d in feeds[i["name"]].shape]
        desc["valid"] = True
        obj = _json(desc)
        prog.published = obj
        prog.target.on_release.append(lambda: setattr(obj, "valid", False))
    return prog.published


def _outputs(sess, fetches, outs, t0, t1, t2, feeds=None):
    """The run call's JS result: outputs copied into Uint8Arrays, and timings; with `feeds`, the
    session's program for their signature when JS can run it itself (`program`, see _direct)."""
    import numpy as np
    from onnxedge.errors import InvalidArgument
    names = fetches or [o.name for o in sess.get_outputs()]
    result = js.Array.new()
    for name, value in zip(names, outs):
        arr = np.ascontiguousarray(value)
        if arr.dtype == np.object_:
            raise InvalidArgument("output '%s' is a string tensor: onnxedge.js moves numeric "
                                  "tensors only" % name)
        u8 = js.Uint8Array.new(arr.nbytes)
        if arr.nbytes:
            u8.assign(arr.reshape(-1).view(np.uint8))
        dims = js.Array.new()
        for d in arr.shape:
            dims.push(int(d))
        result.push(_obj(name=name, type=str(arr.dtype), dims=dims, bytes=u8))
    timings = {"feedMs": t1 - t0, "runMs": t2 - t1, "fetchMs": _now() - t2}
    return _obj(ok=True, outputs=result, timings=_json(timings),
                program=_direct(sess, feeds) if feeds is not None else None)


async def _run(args):
    t0 = _now()
    sess, fetches, feeds = _feeds(args)
    t1 = _now()
    outs = await sess.run_async(fetches, feeds)
    return _outputs(sess, fetches, outs, t0, t1, _now(), feeds if args.direct else None)


def _run_sync(args):
    t0 = _now()
    sess, fetches, feeds = _feeds(args)
    t1 = _now()
    outs = sess.run(fetches, feeds)
    return _outputs(sess, fetches, outs, t0, t1, _now(), feeds if args.direct else None)


async def _init(args):
    """onnxedge.web.init for onnxedge.js: start the wasm kernels (oxk.js already loaded by the
    page; module bytes from the wheel, else from baseURL) on `threads` threads."""
    from onnxedge.web import page_init
    timeout = float(args.timeoutMs) / 1000.0 if args.timeoutMs else page_init.WORKER_TIMEOUT_S
    status = await page_init.init(threads=int(args.threads or 0), wasm_url=args.baseURL or None,
                                  timeout_s=timeout)
    return _obj(ok=True, status=_json(status))


async def _release(args):
    _SESSIONS.pop(int(args.session), None)
    return _obj(ok=True)


_HANDLERS = {"create": _create, "run": _run, "release": _release, "init": _init}
_SYNC_HANDLERS = {"run": _run_sync}


def _failure(e):
    return _obj(ok=False, type=type(e).__name__, message=str(e),
                python="%s.%s" % (type(e).__module__, type(e).__name__))


async def oxe_call(call_id):
    """Run the call waiting in globalThis.onnxedgeCalls under call_id; a JS result object."""
    args = js.onnxedgeCalls.get(call_id)
    try:
        return await _HANDLERS[str(args.op)](args)
    except Exception as e:   # every error goes back to JS as data: its type and message
        return _failure(e)


def oxe_call_sync(call_id):
    """`oxe_call` for calls that never wait (a run of a session with no asynchronous step):
    called straight from JS, it skips runPythonAsync's event-loop round trip (~8 ms in
    Pyodide 0.17, whose resumption goes through a clamped setTimeout)."""
    args = js.onnxedgeCalls.get(call_id)
    try:
        return _SYNC_HANDLERS[str(args.op)](args)
    except Exception as e:
        return _failure(e)


def _opens_onnx():
    """True when onnxedge in this page can open .onnx bytes: its own wire-format reader (or the
    `onnx` package) is installed. Looked up, not imported, so start-up compiles nothing for it."""
    from importlib.util import find_spec
    for name in ("onnxedge.onnx_wire", "onnx"):
        try:
            if find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def oxe_versions():
    """JSON: Python, numpy and onnxedge versions inside the page, and whether it opens .onnx."""
    import numpy
    import onnxedge
    return _dumps({"python": sys.version.split()[0], "numpy": numpy.__version__,
                       "onnxedge": onnxedge.__version__, "opensOnnx": _opens_onnx()})
