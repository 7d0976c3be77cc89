"""Fills the WGSL templates in `shaders/`: `{{name}}` is replaced by the value given for name."""
from __future__ import annotations

import os
import re
from typing import Dict

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shaders")
_CACHE: Dict[str, str] = {}
_FIELD = re.compile(r"\{\{(\w+)\}\}")


def source(name: str) -> str:
    """The raw text of shaders/<name>.wgsl (read once)."""
    text = _CACHE.get(name)
    if text is None:
        path = os.path.join(_DIR, name + ".wgsl")
        with open(path, "r") as f:
            text = f.read()
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


__all__ = ["render", "source", "cache_key"]
