"""Finds execution providers by name: the built-in CPU provider and entry-point plug-ins.

Providers living outside the core (web/, edge/) register under the entry-point group
`onnxedge.providers` (name = ORT provider name, value = `module:Class`), so the core never
imports them; a reduced build drops a provider by leaving its entry point out.
"""
from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Type

from ..errors import EPFail
from .base import ExecutionProvider
from .cpu import CPUExecutionProvider

GROUP = "onnxedge.providers"

# Known names, in onnxruntime's usual priority order (most specialised first).
KNOWN = ["WebGpuExecutionProvider", "WasmSimdExecutionProvider", "CoreMLExecutionProvider",
         "NnapiExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider", "CPUExecutionProvider"]


# onnxruntime-web's short names (and the CLI's), for the providers that have one
SHORT_NAMES = {"cpu": "CPUExecutionProvider", "webgpu": "WebGpuExecutionProvider",
               "wasm": "WasmSimdExecutionProvider", "neon": "NeonExecutionProvider", "x64": "X64ExecutionProvider",
               "coreml": "CoreMLExecutionProvider", "nnapi": "NnapiExecutionProvider"}


def canonical_name(name: str) -> str:
    """The provider name for a short name ('cpu', 'wasm', 'webgpu', ...; any case); other names
    are returned as given."""
    return SHORT_NAMES.get(name.strip().lower(), name.strip())


# entry points read once per state of sys.path: a scan reads every installed distribution's
# metadata (about 35 ms in Pyodide), and a session asks several times
_SCANNED: Dict[Any, Dict[str, list]] = {}


def _path_state() -> tuple:
    """sys.path with each folder's mtime (a new install changes its folder's mtime)."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


class EntryPoint:
    """An entry point read by `read_entry_points` (importlib.metadata's fields and `load`)."""

    def __init__(self, name: str, value: str, group: str):
        self.name, self.value, self.group = name, value, group

    def load(self) -> Any:
        """The object the entry point names (`module:attr.attr`)."""
        module, _, attr = self.value.partition(":")
        obj = importlib.import_module(module.strip())
        for part in attr.split("[")[0].strip().split(".") if attr else ():
            obj = getattr(obj, part)
        return obj

    def __repr__(self) -> str:
        return "EntryPoint(name=%r, value=%r, group=%r)" % (self.name, self.value, self.group)


def read_entry_points() -> List[EntryPoint]:
    """Every entry point of the *.dist-info / *.egg-info folders on sys.path, read directly:
    what the page uses, since importing importlib.metadata (with email, csv, zipfile, ...) costs
    Pyodide 0.17 ~80 ms of compiling stdlib sources at every page load. The first distribution
    of a name on sys.path wins, as importlib.metadata's."""
    out: List[EntryPoint] = []
    seen = set()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for folder in names:
            if not folder.endswith((".dist-info", ".egg-info")):
                continue
            dist = folder.rsplit(".", 1)[0].split("-")[0].lower().replace("_", "-")
            path = os.path.join(entry or ".", folder, "entry_points.txt")
            if dist in seen or not os.path.isfile(path):
                continue
            seen.add(dist)
            with open(path, encoding="utf-8") as f:
                out.extend(_parse_entry_points(f.read()))
    return out


def _parse_entry_points(text: str) -> List[EntryPoint]:
    group, out = "", []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif "=" in line and group:
            name, _, value = line.partition("=")
            out.append(EntryPoint(name.strip(), value.strip(), group))
    return out


def _metadata_entry_points() -> list:
    from importlib import metadata
    eps = metadata.entry_points()
    if hasattr(eps, "select"):   # Python 3.10+: every entry point
        return [ep for g in sorted(eps.groups) for ep in eps.select(group=g)]
    return [ep for group_eps in eps.values() for ep in group_eps]   # 3.8/3.9: group -> tuple


def entry_points(group: str) -> list:
    """The installed entry points of `group` (`onnxedge.providers`, `onnxedge.commands`), read
    again only when sys.path or one of its folders changed (in Pyodide by `read_entry_points`,
    elsewhere by importlib.metadata)."""
    key = _path_state()
    groups = _SCANNED.get(key)
    if groups is None:
        groups = {}
        found = read_entry_points() if sys.platform == "emscripten" else _metadata_entry_points()
        for ep in found:
            groups.setdefault(ep.group, []).append(ep)
        _SCANNED.clear()
        _SCANNED[key] = groups
    return list(groups.get(group, ()))


def clear_cache() -> None:
    """Forget the entry points read so far (the next lookup scans the installed packages)."""
    _SCANNED.clear()


# providers whose module needs something this platform lacks: name -> why (no warning for them)
NOT_HERE: Dict[str, str] = {}


def _missing_platform_module(e: BaseException) -> bool:
    """True when an import failed because a module outside onnxedge is absent here (`ctypes`
    in Pyodide, `wgpu` on a machine without it): the provider cannot exist on this platform,
    which is no fault of the plug-in. A missing onnxedge module is a broken build."""
    name = getattr(e, "name", None) or ""
    return isinstance(e, ModuleNotFoundError) and name.split(".")[0] not in ("", "onnxedge")


def provider_classes() -> Dict[str, Type[ExecutionProvider]]:
    """Every provider class that can be loaded, by name (available on this machine or not).
    Providers that cannot exist on this platform are left out quietly (`NOT_HERE` says why);
    a plug-in that fails for another reason is left out with a warning."""
    found: Dict[str, Type[ExecutionProvider]] = {}
    for ep in entry_points(GROUP):
        if ep.name in found or ep.name == CPUExecutionProvider.name:
            continue
        try:
            module, _, attr = ep.value.partition(":")
            cls = getattr(importlib.import_module(module), attr)
        except Exception as e:  # a broken plug-in must not break the runtime
            if _missing_platform_module(e):
                NOT_HERE[ep.name] = "needs the module %r, which this platform lacks" % e.name
            else:
                warnings.warn("execution provider %s could not be loaded from %s: %s"
                              % (ep.name, ep.value, e))
            continue
        found[ep.name] = cls
    found[CPUExecutionProvider.name] = CPUExecutionProvider
    return found


def available_providers() -> List[str]:
    """Names of providers that can run here, in priority order, CPU last (like ORT)."""
    names = []
    for name, cls in provider_classes().items():
        try:
            ok = cls.is_available()
        except Exception:
            ok = False
        if ok:
            names.append(name)
    order = {n: i for i, n in enumerate(KNOWN)}
    return sorted(names, key=lambda n: (order.get(n, len(KNOWN) - 1.5), n))


def cpu_engine() -> Optional[str]:
    """The provider that runs onnxedge's C engine on this machine (a class with `cpu_engine =
    True` that is available here: the native library on x86-64 / aarch64, the wasm module in a
    page), or None. Sessions put it in front of the CPU provider unless the session config entry
    "session.cpu_engine" is "0"."""
    for name in KNOWN:
        cls = provider_classes().get(name)
        if cls is None or not getattr(cls, "cpu_engine", False):
            continue
        try:
            if cls.is_available():
                return name
        except Exception:
            continue
    return None


def create(name: str, options: dict) -> ExecutionProvider:
    """An instance of the named provider; EPFail when it cannot be created."""
    cls = provider_classes()[name]
    try:
        return cls(options)
    except Exception as e:
        raise EPFail("%s could not be created with options %r: %s" % (name, options, e)) from e
