"""Loads and saves models whatever their format: `.oxe` and `.onnx`, told apart by content on
load (the `.oxe` file identifier) and by extension on save."""
from __future__ import annotations

import os
from typing import Any, Optional, Union

from . import ir
from .errors import InvalidGraph, NoSuchFile, NotImplemented

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


def _reduced_module(name: str, what: str) -> Any:
    """Import onnxedge.<name>, or say that this reduced build left it out and what to do."""
    import importlib
    try:
        return importlib.import_module("%s.%s" % (__package__, name))
    except ModuleNotFoundError as e:
        if e.name != "%s.%s" % (__package__, name):
            raise
    raise NotImplemented("%s: this is a reduced onnxedge build without %s (it reads only .oxe "
                         "models); convert the model with the full onnxedge: `onnxedge convert "
                         "MODEL.onnx -o MODEL.oxe --optimize all` (or `onnxedge reduce MODEL.onnx "
                         "-o OUT/`, which writes OUT/models/MODEL.oxe; `--with-onnx` makes a build "
                         "that opens .onnx too)" % (what, name))


def describe_content(head: bytes) -> str:
    """What the first bytes of something offered as a model look like: `.oxe`, `.onnx` (a
    protobuf ModelProto starts with the tag of one of its fields), empty, text, or unknown."""
    from .format.layout import is_oxe as has_identifier
    if not head:
        return "empty (0 bytes)"
    if has_identifier(head):
        return ".oxe"
    if head[0] in (0x08, 0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72, 0xca):
        return ".onnx"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "neither .oxe nor .onnx"
    return "text, not a model" if all(c.isprintable() or c.isspace() for c in text) \
        else "neither .oxe nor .onnx"


def load(source: Source) -> ir.Model:
    """The IR of a model given as a path or as bytes (`.oxe` or `.onnx`, by content)."""
    head = _head(source)
    from .format.layout import is_oxe as has_identifier
    if has_identifier(head):
        from . import format as oxe
        return oxe.load(source)
    kind = describe_content(head)
    where = "model %s is" % os.fspath(source) if isinstance(source, (str, os.PathLike)) \
        else "the model bytes are"
    if kind.startswith(("empty", "text")):
        raise InvalidGraph("%s %s (neither .oxe nor .onnx)" % (where, kind))
    what = "%s %s" % (where, kind)
    return _reduced_module("onnx_loader", what).load_model(source)


def save(model: ir.Model, path: Union[str, "os.PathLike[str]"],
         external_data_threshold: Optional[int] = None, **kwargs: Any) -> None:
    """Write a model to `path` in the format its extension names: `.oxe`, else `.onnx`.

    With `external_data_threshold` (bytes), large initializers go to `<file name>.data` beside
    the model. Other keyword arguments go to the format's writer.
    """
    path = os.fspath(path)
    if path.lower().endswith(".oxe"):
        writer = _reduced_module("format.writer", "saving %s" % path)
        writer.save(model, path, external_data_threshold=external_data_threshold, **kwargs)
        return
    onnx_writer = _reduced_module("onnx_writer", "saving %s" % path)
    onnx_writer.save_model(model, path, external_data_threshold=external_data_threshold, **kwargs)
