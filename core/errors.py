"""Error types of onnxedge, named after onnxruntime's status codes.

Every message names the thing at fault (input, node, op and opset) and what was expected.
"""
from __future__ import annotations

import builtins

__all__ = [
    "OnnxEdgeError", "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError",
    "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph",
    "EPFail",
]


class OnnxEdgeError(Exception):
    """Root of every error onnxedge raises on purpose."""


class Fail(OnnxEdgeError):
    """A generic failure while running a model."""


class InvalidArgument(OnnxEdgeError, ValueError):
    """A caller passed a bad value: unknown input name, wrong dtype, rank or shape."""


class NoSuchFile(OnnxEdgeError, FileNotFoundError):
    """A model or external-data file does not exist."""


class NoModel(OnnxEdgeError):
    """No model was given."""


class EngineError(OnnxEdgeError):
    """The execution engine failed in a way that is not the model's fault."""


class RuntimeException(OnnxEdgeError, RuntimeError):
    """A kernel failed while running on valid-looking data."""


class ModelLoaded(OnnxEdgeError):
    """A model was already loaded."""


class NotImplemented(OnnxEdgeError, builtins.NotImplementedError):  # noqa: A001 (ORT's name)
    """An operator, dtype or feature is not implemented (names op, domain and opset)."""


class InvalidGraph(OnnxEdgeError):
    """The model is malformed: bad references, cycles, missing values, corrupt bytes."""


class InvalidProtobuf(InvalidGraph):
    """The model bytes are not a parseable ONNX protobuf (a kind of malformed model)."""


class EPFail(OnnxEdgeError):
    """An execution provider failed to initialise or compile its part of the graph."""
