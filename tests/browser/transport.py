"""Moves IR models and arrays into the page as pickles that numpy 1.17 (Pyodide 0.17.1) reads.

The page has no `onnx` package, so models cross as onnxedge IR. numpy 2 pickles arrays through
`numpy._core`, which numpy 1.17 lacks: arrays are therefore reduced to `numpy.ndarray(shape,
dtype, buffer)` calls and numpy scalars to their type applied to a Python value.
"""
from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np


class _PortablePickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                raise TypeError("cannot send object arrays to the page (dtype %s)" % obj.dtype)
            data = np.ascontiguousarray(obj)
            return np.ndarray, (data.shape, data.dtype.str, data.tobytes())
        if isinstance(obj, np.generic):
            return np.dtype(obj.dtype.str).type, (obj.item(),)
        if isinstance(obj, np.dtype):
            return np.dtype, (obj.str,)
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """Pickle `obj` (IR models, dicts/lists of arrays) for Python 3.8 + numpy 1.17 to load."""
    buf = io.BytesIO()
    _PortablePickler(buf, protocol=4).dump(obj)
    return buf.getvalue()
