"""The `.oxe` model format: a FlatBuffers file (schema `oxe.fbs`) with 64-byte aligned tensor data
that loads as read-only numpy views, without copying and without the `onnx` package.

`save(model, path_or_None)` writes one, `load(path_or_bytes)` reads one, `is_oxe(head)` tells it
apart from `.onnx` by its file identifier. docs/OXE.md describes the layout and the checks.
The writer (and `flatbuffers`) is imported on first use: a reduced runtime build has only the reader.
"""
from __future__ import annotations

from typing import Any

from .layout import ALIGN, FILE_IDENTIFIER, FORMAT_MAJOR, FORMAT_MINOR, is_oxe
from .reader import load


def save(*args: Any, **kwargs: Any) -> Any:
    """Write a model as `.oxe` (see `writer.save`)."""
    from .writer import save as _save
    return _save(*args, **kwargs)


def to_bytes(*args: Any, **kwargs: Any) -> Any:
    """A model as `.oxe` bytes (see `writer.to_bytes`)."""
    from .writer import to_bytes as _to_bytes
    return _to_bytes(*args, **kwargs)


__all__ = ["ALIGN", "FILE_IDENTIFIER", "FORMAT_MAJOR", "FORMAT_MINOR", "is_oxe", "load", "save",
           "to_bytes"]
