"""Loads a model from a path or bytes, whatever its format (today `.onnx`)."""
from __future__ import annotations

import os
from typing import Union

from . import ir


def load(source: Union[str, bytes, "os.PathLike[str]"]) -> ir.Model:
    """The IR of a model given as a path or as bytes."""
    from . import onnx_loader
    return onnx_loader.load_model(source)
