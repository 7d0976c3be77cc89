"""onnxedge: ONNX inference for browsers, Raspberry Pi and phones, with onnxruntime's API.

Switch from onnxruntime by changing the import::

    import onnxedge as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"input": x})
"""
from __future__ import annotations

from .errors import (EPFail, EngineError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
                     ModelLoaded, NoModel, NoSuchFile, NotImplemented, OnnxEdgeError,
                     RuntimeException)
from .custom_ops import custom_op, register_custom_op
from .ortvalue import IOBinding, OrtValue
from .session import (ExecutionMode, GraphOptimizationLevel, InferenceSession, ModelMetadata,
                      NodeArg, RunOptions, SessionOptions, get_all_providers,
                      get_available_providers, get_device)

__version__ = "0.1.0"

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode",
    "NodeArg", "ModelMetadata", "get_available_providers", "get_all_providers", "get_device",
    "OnnxEdgeError", "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError",
    "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph",
    "EPFail", "__version__", "custom_op", "register_custom_op", "OrtValue", "IOBinding",
    "SessionIOBinding",
]

SessionIOBinding = IOBinding   # onnxruntime's name
