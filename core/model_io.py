"""Loads and saves models whatever their format: `.oxe` and `.onnx`, told apart by content on
load (the `.oxe` file identifier) and by extension on save."""
from __future__ import annotations

import os
from typing import Any, Optional, Union

from . import ir
from .errors import NoSuchFile

Source = Union[str, bytes, bytearray, memoryview, "os.PathLike[str]"]


def _head(source: Source) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source[:8])
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise NoSuchFile("model file %s does not exist" % path)
    with open(path, "rb") as f:
        return f.read(8)


def is_oxe(source: Source) -> bool:
    """True when a path's content or the given bytes are an `.oxe` model."""
    from .format.layout import is_oxe as has_identifier
    return has_identifier(_head(source))


def load(source: Source) -> ir.Model:
    """The IR of a model given as a path or as bytes (`.oxe` or `.onnx`, by content)."""
    if is_oxe(source):
        from . import format as oxe
        return oxe.load(source)
    from . import onnx_loader
    return onnx_loader.load_model(source)


def save(model: ir.Model, path: Union[str, "os.PathLike[str]"],
         external_data_threshold: Optional[int] = None, **kwargs: Any) -> None:
    """Write a model to `path` in the format its extension names: `.oxe`, else `.onnx`.

    With `external_data_threshold` (bytes), large initializers go to `<file name>.data` beside
    the model. Other keyword arguments go to the format's writer.
    """
    path = os.fspath(path)
    if path.lower().endswith(".oxe"):
        from . import format as oxe
        oxe.save(model, path, external_data_threshold=external_data_threshold, **kwargs)
        return
    from . import onnx_writer
    onnx_writer.save_model(model, path, external_data_threshold=external_data_threshold, **kwargs)
