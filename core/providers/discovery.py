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
from typing import Any, Dict, List, Type

from ..errors import EPFail
from .base import ExecutionProvider
from .cpu import CPUExecutionProvider

GROUP = "onnxedge.providers"

# Known names, in onnxruntime's usual priority order (most specialised first).
KNOWN = ["WebGpuExecutionProvider", "WasmSimdExecutionProvider", "CoreMLExecutionProvider",
         "NnapiExecutionProvider", "NeonExecutionProvider", "CPUExecutionProvider"]


# onnxruntime-web's short names (and the CLI's), for the providers that have one
SHORT_NAMES = {"cpu": "CPUExecutionProvider", "webgpu": "WebGpuExecutionProvider",
               "wasm": "WasmSimdExecutionProvider", "neon": "NeonExecutionProvider",
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


def entry_points(group: str) -> list:
    """The installed entry points of `group` (`onnxedge.providers`, `onnxedge.commands`), read
    again only when sys.path or one of its folders changed."""
    key = _path_state()
    groups = _SCANNED.get(key)
    if groups is None:
        groups = {}
        try:
            from importlib import metadata
        except ImportError:  # pragma: no cover - Python < 3.8
            return []
        eps = metadata.entry_points()
        if hasattr(eps, "select"):   # Python 3.10+: every entry point
            found = [ep for g in sorted(eps.groups) for ep in eps.select(group=g)]
        else:   # Python 3.8/3.9: dict of group -> tuple
            found = [ep for group_eps in eps.values() for ep in group_eps]
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


def create(name: str, options: dict) -> ExecutionProvider:
    """An instance of the named provider; EPFail when it cannot be created."""
    cls = provider_classes()[name]
    try:
        return cls(options)
    except Exception as e:
        raise EPFail("%s could not be created with options %r: %s" % (name, options, e)) from e
