"""The `.oxe` model format: a FlatBuffers file (schema `oxe.fbs`) with 64-byte aligned tensor data
that loads as read-only numpy views, without copying and without the `onnx` package.

`save(model, path_or_None)` writes one, `load(path_or_bytes)` reads one, `is_oxe(head)` tells it
apart from `.onnx` by its file identifier. docs/OXE.md describes the layout and the checks.
"""
from __future__ import annotations

from .layout import ALIGN, FILE_IDENTIFIER, FORMAT_MAJOR, FORMAT_MINOR, is_oxe
from .reader import load
from .writer import save, to_bytes

__all__ = ["ALIGN", "FILE_IDENTIFIER", "FORMAT_MAJOR", "FORMAT_MINOR", "is_oxe", "load", "save",
           "to_bytes"]
