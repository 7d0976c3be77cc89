"""Fills the WGSL templates in `shaders/`: `{{name}}` is replaced by the value given for name.

A line `//#include "common/coords.wgsl"` is replaced by that snippet's text (once per shader,
snippets may include others). Includes name files of the shaders folder only (relative, no `..`,
letters, digits, `_` and `/`, ending in .wgsl); only the package's own shader text reaches them.
"""
from __future__ import annotations

import os
import re
from typing import Dict, Set

from onnxedge.errors import InvalidArgument

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shaders")
_CACHE: Dict[str, str] = {}
_FIELD = re.compile(r"\{\{(\w+)\}\}")
_INCLUDE = re.compile(r'^//#include\s+"([^"]*)"\s*$', re.M)
_INCLUDE_NAME = re.compile(r"^[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*\.wgsl$")


def include_path(name: str, shader: str) -> str:
    """The file an `//#include "name"` of `shader` reads; InvalidArgument for anything that is
    not a .wgsl file inside the shaders folder."""
    path = os.path.realpath(os.path.join(_DIR, name))
    if (not _INCLUDE_NAME.match(name) or ".." in name.split("/")
            or not path.startswith(os.path.realpath(_DIR) + os.sep) or not os.path.isfile(path)):
        raise InvalidArgument("shader %s: //#include %r is not a .wgsl file of the shaders folder "
                              "(a relative name such as \"common/coords.wgsl\", no '..')"
                              % (shader, name))
    return path


def expand_includes(text: str, shader: str, seen: Set[str]) -> str:
    """text with each `//#include "..."` line replaced by the snippet (each snippet once)."""
    def sub(m: "re.Match") -> str:
        path = include_path(m.group(1), shader)
        if path in seen:
            return ""
        seen.add(path)
        with open(path, "r") as f:
            return expand_includes(f.read(), shader, seen)
    return _INCLUDE.sub(sub, text)


def source(name: str) -> str:
    """The text of shaders/<name>.wgsl with its includes expanded (read once)."""
    text = _CACHE.get(name)
    if text is None:
        path = os.path.join(_DIR, name + ".wgsl")
        with open(path, "r") as f:
            text = expand_includes(f.read(), name + ".wgsl", set())
        _CACHE[name] = text
    return text


def render(name: str, **params: object) -> str:
    """shaders/<name>.wgsl with every `{{key}}` replaced; KeyError names a missing key."""
    text = source(name)

    def sub(m: "re.Match") -> str:
        key = m.group(1)
        if key not in params:
            raise KeyError("shader %s.wgsl needs template parameter %r" % (name, key))
        return str(params[key])

    return _FIELD.sub(sub, text)


def cache_key(name: str, **params: object) -> str:
    """A pipeline cache key: the template name plus its specialization (never tensor sizes)."""
    return name + "(" + ",".join("%s=%s" % kv for kv in sorted(params.items())) + ")"


__all__ = ["render", "source", "cache_key", "expand_includes", "include_path"]
