"""Table of every ONNX tensor element type: code, names, numpy dtype (where one exists).

Types numpy lacks (bfloat16, float8, int4, float4, ...) map to `ml_dtypes` when that optional
package is installed; `to_numpy` says which package is needed otherwise.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional

import numpy as np

from .errors import InvalidGraph, NotImplemented


class DType(NamedTuple):
    """One ONNX element type."""

    code: int          # TensorProto.DataType value
    name: str          # TensorProto name, e.g. "FLOAT"
    ort_name: str      # onnxruntime's element name, e.g. "float" (NodeArg.type is "tensor(float)")
    numpy: Optional[str]     # numpy dtype name, None when numpy has none
    ml_dtypes: Optional[str]  # ml_dtypes attribute name for types numpy lacks


_TABLE = [
    DType(1, "FLOAT", "float", "float32", None),
    DType(2, "UINT8", "uint8", "uint8", None),
    DType(3, "INT8", "int8", "int8", None),
    DType(4, "UINT16", "uint16", "uint16", None),
    DType(5, "INT16", "int16", "int16", None),
    DType(6, "INT32", "int32", "int32", None),
    DType(7, "INT64", "int64", "int64", None),
    DType(8, "STRING", "string", "object", None),
    DType(9, "BOOL", "bool", "bool", None),
    DType(10, "FLOAT16", "float16", "float16", None),
    DType(11, "DOUBLE", "double", "float64", None),
    DType(12, "UINT32", "uint32", "uint32", None),
    DType(13, "UINT64", "uint64", "uint64", None),
    DType(14, "COMPLEX64", "complex64", "complex64", None),
    DType(15, "COMPLEX128", "complex128", "complex128", None),
    DType(16, "BFLOAT16", "bfloat16", None, "bfloat16"),
    DType(17, "FLOAT8E4M3FN", "float8e4m3fn", None, "float8_e4m3fn"),
    DType(18, "FLOAT8E4M3FNUZ", "float8e4m3fnuz", None, "float8_e4m3fnuz"),
    DType(19, "FLOAT8E5M2", "float8e5m2", None, "float8_e5m2"),
    DType(20, "FLOAT8E5M2FNUZ", "float8e5m2fnuz", None, "float8_e5m2fnuz"),
    DType(21, "UINT4", "uint4", None, "uint4"),
    DType(22, "INT4", "int4", None, "int4"),
    DType(23, "FLOAT4E2M1", "float4e2m1", None, "float4_e2m1fn"),
    DType(24, "FLOAT8E8M0", "float8e8m0", None, "float8_e8m0fnu"),
    DType(25, "UINT2", "uint2", None, "uint2"),
    DType(26, "INT2", "int2", None, "int2"),
]

BY_CODE: Dict[int, DType] = {d.code: d for d in _TABLE}
BY_NAME: Dict[str, DType] = {d.name: d for d in _TABLE}
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL, FLOAT16, DOUBLE = range(1, 12)
UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16 = range(12, 17)

_ML_DTYPES = None


def _ml_dtypes():
    global _ML_DTYPES
    if _ML_DTYPES is None:
        try:
            import ml_dtypes  # optional dependency
        except ImportError:
            _ML_DTYPES = False
        else:
            _ML_DTYPES = ml_dtypes
    return _ML_DTYPES or None


def lookup(code: int) -> DType:
    """The DType of an ONNX element-type code; InvalidGraph for an unknown code."""
    try:
        return BY_CODE[int(code)]
    except (KeyError, TypeError, ValueError):
        raise InvalidGraph("unknown ONNX tensor element type %r" % (code,)) from None


def to_numpy(code: int) -> np.dtype:
    """The numpy dtype for an ONNX element type, or NotImplemented naming what is missing."""
    d = lookup(code)
    if d.numpy is not None:
        return np.dtype(d.numpy)
    mld = _ml_dtypes()
    if mld is None or not hasattr(mld, d.ml_dtypes):
        raise NotImplemented(
            "tensor type %s needs the optional package 'ml_dtypes' (with %s); "
            "install it with: pip install ml_dtypes" % (d.name, d.ml_dtypes))
    return np.dtype(getattr(mld, d.ml_dtypes))


def has_numpy(code: int) -> bool:
    """True when arrays of this ONNX element type can be made here."""
    try:
        to_numpy(code)
    except NotImplemented:
        return False
    return True


def from_numpy(dtype) -> int:
    """The ONNX element-type code of a numpy dtype; InvalidArgument-free lookup (raises KeyError)."""
    dt = np.dtype(dtype)
    if dt.kind in "OUS":
        return STRING
    for d in _TABLE:
        if d.numpy is not None and np.dtype(d.numpy) == dt:
            return d.code
    mld = _ml_dtypes()
    if mld is not None:
        for d in _TABLE:
            if d.ml_dtypes and hasattr(mld, d.ml_dtypes) and np.dtype(getattr(mld, d.ml_dtypes)) == dt:
                return d.code
    raise KeyError("numpy dtype %s has no ONNX element type" % dt)


def from_ort_name(name: str) -> Optional[int]:
    """The element-type code of onnxruntime's element name ("float", "int64"), or None."""
    for d in _TABLE:
        if d.ort_name == name:
            return d.code
    return None


def ort_type_string(code: int) -> str:
    """onnxruntime's type string for a tensor of this element type, e.g. 'tensor(float)'."""
    return "tensor(%s)" % lookup(code).ort_name
