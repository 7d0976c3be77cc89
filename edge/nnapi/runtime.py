"""Runs NNAPI models on an Android device through libneuralnetworks.so (ctypes, the NDK C API).

`NnapiModel(model)` builds the model (ANeuralNetworksModel_create / addOperand /
setOperandValue / addOperation / identifyInputsAndOutputs / finish), compiles it
(ANeuralNetworksCompilation_create / setPreference / finish) and runs it
(ANeuralNetworksExecution_create / setInput / setOutput / compute, or startCompute + Event_wait
below feature level 3). Importing this module never loads the library; `available()` says whether
it loads here (Android only). `library` may be any object with the C functions as attributes,
which the tests use to check the marshalling without a device.
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, List, Optional, Sequence

import numpy as np

from onnxedge.errors import EPFail, InvalidArgument

from . import codes
from .model import Model

LIBRARY = "libneuralnetworks.so"


class OperandType(ctypes.Structure):
    """ANeuralNetworksOperandType."""

    _fields_ = [("type", ctypes.c_int32), ("dimensionCount", ctypes.c_uint32),
                ("dimensions", ctypes.POINTER(ctypes.c_uint32)), ("scale", ctypes.c_float),
                ("zeroPoint", ctypes.c_int32)]


def on_android() -> bool:
    """True on Android (CPython's sys.platform 'android', or Linux with Android's markers)."""
    return (sys.platform == "android" or hasattr(sys, "getandroidapilevel")
            or ("ANDROID_ROOT" in os.environ and os.path.isdir("/system")))


_LIB: List[Any] = []


def load_library(path: Optional[str] = None) -> Any:
    """The NNAPI library (ctypes.CDLL), loaded once; EPFail off Android or when it is missing."""
    if _LIB and path is None:
        return _LIB[0]
    if path is None and not on_android():
        raise EPFail("NnapiExecutionProvider: %s exists only on Android (this is %s)"
                     % (LIBRARY, sys.platform))
    try:
        lib = ctypes.CDLL(path or LIBRARY)
    except OSError as e:
        raise EPFail("NnapiExecutionProvider: cannot load %s: %s" % (path or LIBRARY, e)) from e
    if path is None:
        _LIB.append(lib)
    return lib


def available() -> bool:
    """True where libneuralnetworks.so loads (an Android device)."""
    try:
        load_library()
    except EPFail:
        return False
    return True


def device_feature_level() -> int:
    """The device's NNAPI feature level from its API level (1 on unknown)."""
    api = sys.getandroidapilevel() if hasattr(sys, "getandroidapilevel") else 0
    level = 1
    for fl, needed in sorted(codes.API_LEVEL.items()):
        if api >= needed:
            level = fl
    return level


def _u32_array(values: Sequence[int]) -> Any:
    return (ctypes.c_uint32 * max(len(values), 1))(*values)


class NnapiModel:
    """A model built and compiled on the device; call it with input buffers (NNAPI layout)."""

    def __init__(self, model: Model, library: Any = None,
                 preference: int = codes.PREFER_FAST_SINGLE_ANSWER, feature_level: int = 4):
        self.lib = library if library is not None else load_library()
        self.model = model
        self.feature_level = feature_level
        self._keep: List[Any] = []       # buffers NNAPI may reference until the model is freed
        self.handle = ctypes.c_void_p()
        self.compilation = ctypes.c_void_p()
        self._check(self.lib.ANeuralNetworksModel_create(ctypes.byref(self.handle)),
                    "ANeuralNetworksModel_create")
        try:
            self._build()
            self._check(self.lib.ANeuralNetworksCompilation_create(
                self.handle, ctypes.byref(self.compilation)), "ANeuralNetworksCompilation_create")
            self._check(self.lib.ANeuralNetworksCompilation_setPreference(
                self.compilation, ctypes.c_int32(preference)), "ANeuralNetworksCompilation_setPreference")
            self._check(self.lib.ANeuralNetworksCompilation_finish(self.compilation),
                        "ANeuralNetworksCompilation_finish")
        except Exception:
            self.close()
            raise

    def _check(self, result: int, call: str) -> None:
        if result != codes.NO_ERROR:
            raise EPFail("NnapiExecutionProvider: %s returned %s (%d)"
                         % (call, codes.RESULT_NAMES.get(result, "?"), result))

    def _build(self) -> None:
        lib, h = self.lib, self.handle
        for index, op in enumerate(self.model.operands):
            dims = _u32_array(op.dims)
            t = OperandType(op.type, len(op.dims),
                            ctypes.cast(dims, ctypes.POINTER(ctypes.c_uint32)) if op.dims else None,
                            op.scale, op.zero_point)
            self._keep.append(dims)
            self._check(lib.ANeuralNetworksModel_addOperand(h, ctypes.byref(t)),
                        "ANeuralNetworksModel_addOperand(%d)" % index)
            if op.value is not None:
                data = np.ascontiguousarray(op.value, dtype=codes.NUMPY_DTYPE[op.type])
                self._keep.append(data)
                self._check(lib.ANeuralNetworksModel_setOperandValue(
                    h, ctypes.c_int32(index), ctypes.c_void_p(data.ctypes.data),
                    ctypes.c_size_t(data.nbytes)), "ANeuralNetworksModel_setOperandValue(%d)" % index)
        for k, o in enumerate(self.model.operations):
            ins, outs = _u32_array(o.inputs), _u32_array(o.outputs)
            self._check(lib.ANeuralNetworksModel_addOperation(
                h, ctypes.c_int32(o.code), ctypes.c_uint32(len(o.inputs)), ins,
                ctypes.c_uint32(len(o.outputs)), outs),
                "ANeuralNetworksModel_addOperation(%d, %s)"
                % (k, codes.OPERATION_NAMES.get(o.code, o.code)))
        ins = [io.operand for io in self.model.inputs]
        outs = [io.operand for io in self.model.outputs]
        self._check(lib.ANeuralNetworksModel_identifyInputsAndOutputs(
            h, ctypes.c_uint32(len(ins)), _u32_array(ins), ctypes.c_uint32(len(outs)),
            _u32_array(outs)), "ANeuralNetworksModel_identifyInputsAndOutputs")
        self._check(lib.ANeuralNetworksModel_finish(h), "ANeuralNetworksModel_finish")

    def __call__(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run once: input buffers in the model's order and layout -> output buffers."""
        lib = self.lib
        if len(inputs) != len(self.model.inputs):
            raise InvalidArgument("NNAPI model takes %d inputs, got %d"
                                  % (len(self.model.inputs), len(inputs)))
        exe = ctypes.c_void_p()
        self._check(lib.ANeuralNetworksExecution_create(self.compilation, ctypes.byref(exe)),
                    "ANeuralNetworksExecution_create")
        try:
            keep = []
            for i, (io, x) in enumerate(zip(self.model.inputs, inputs)):
                op = self.model.operands[io.operand]
                x = np.ascontiguousarray(x, dtype=codes.NUMPY_DTYPE[op.type])
                if tuple(x.shape) != op.dims:
                    raise InvalidArgument("NNAPI input %r has shape %s, expected %s"
                                          % (io.name, list(x.shape), list(op.dims)))
                keep.append(x)
                self._check(lib.ANeuralNetworksExecution_setInput(
                    exe, ctypes.c_int32(i), None, ctypes.c_void_p(x.ctypes.data),
                    ctypes.c_size_t(x.nbytes)), "ANeuralNetworksExecution_setInput(%d)" % i)
            outs = []
            for i, io in enumerate(self.model.outputs):
                op = self.model.operands[io.operand]
                y = np.empty(op.dims, dtype=codes.NUMPY_DTYPE[op.type])
                outs.append(y)
                self._check(lib.ANeuralNetworksExecution_setOutput(
                    exe, ctypes.c_int32(i), None, ctypes.c_void_p(y.ctypes.data),
                    ctypes.c_size_t(y.nbytes)), "ANeuralNetworksExecution_setOutput(%d)" % i)
            if self.feature_level >= 3:
                self._check(lib.ANeuralNetworksExecution_compute(exe),
                            "ANeuralNetworksExecution_compute")
            else:
                event = ctypes.c_void_p()
                self._check(lib.ANeuralNetworksExecution_startCompute(exe, ctypes.byref(event)),
                            "ANeuralNetworksExecution_startCompute")
                try:
                    self._check(lib.ANeuralNetworksEvent_wait(event), "ANeuralNetworksEvent_wait")
                finally:
                    lib.ANeuralNetworksEvent_free(event)
            return outs
        finally:
            lib.ANeuralNetworksExecution_free(exe)

    def close(self) -> None:
        """Free the compilation and the model (safe to call twice)."""
        if self.compilation:
            self.lib.ANeuralNetworksCompilation_free(self.compilation)
            self.compilation = ctypes.c_void_p()
        if self.handle:
            self.lib.ANeuralNetworksModel_free(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
