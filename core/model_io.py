"""Loads and saves models whatever their format; `.onnx` today, told apart by content on load
and by extension on save."""
from __future__ import annotations

import os
from typing import Union

from . import ir
from .errors import NotImplemented


def load(source: Union[str, bytes, "os.PathLike[str]"]) -> ir.Model:
    """The IR of a model given as a path or as bytes."""
    from . import onnx_loader
    return onnx_loader.load_model(source)


def save(model: ir.Model, path: Union[str, "os.PathLike[str]"]) -> None:
    """Write a model to `path`, in the format its extension names (`.onnx`)."""
    path = os.fspath(path)
    if path.lower().endswith(".oxe"):
        raise NotImplemented("cannot write %s: the .oxe format is not in this build yet; "
                             "use a .onnx path" % path)
    from . import onnx_writer
    onnx_writer.save_model(model, path)
