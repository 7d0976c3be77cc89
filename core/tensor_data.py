"""Decoding helpers shared by the `.onnx` and `.oxe` loaders: 4-/2-bit unpacking and the sparse
tensor check (a module of its own so a reduced build without the `.onnx` loader keeps them)."""
from __future__ import annotations

from typing import Tuple

import numpy as np

from . import ir
from .errors import InvalidGraph


def unpack_bits(raw: np.ndarray, bits: int, count: int, signed: bool) -> np.ndarray:
    """`count` values of `bits` bits each from packed bytes, low bits first (sign-extended when signed)."""
    raw = raw.astype(np.uint8)
    per = 8 // bits
    mask = (1 << bits) - 1
    parts = [(raw >> (bits * i)) & mask for i in range(per)]
    vals = np.stack(parts, axis=-1).reshape(-1)[:count]
    if signed:
        vals = vals.astype(np.int8)
        vals = np.where(vals >= (1 << (bits - 1)), vals - (1 << bits), vals).astype(np.int8)
    return vals


MAX_SPARSE_DENSE_BYTES = 1 << 30   # sparse initializers made dense take at most this much a model


def densify(s: ir.SparseTensor, left: int, what: str) -> Tuple[np.ndarray, int]:
    """(the dense form of `s`, what is left of a model's `left` bytes for dense sparse
    initializers); InvalidGraph naming `what` before allocating beyond the budget."""
    size = s.values.dtype.itemsize
    for d in s.dims:
        size *= d
    if size > left:
        raise InvalidGraph("%s: its dense form %s takes %d bytes, beyond what is left (%d) of the "
                           "%d bytes all sparse initializers of a model may take made dense"
                           % (what, s.dims, size, left, MAX_SPARSE_DENSE_BYTES))
    return s.to_dense(), left - size


def check_sparse(s: ir.SparseTensor, what: str = "sparse tensor") -> None:
    """InvalidGraph unless `s` is well formed: values 1-D, indices [NNZ] (linear) or [NNZ, rank]
    inside its non-negative dims, and its dense form at most MAX_SPARSE_DENSE_BYTES."""
    dims, vals, idx = s.dims, s.values, np.asarray(s.indices)
    if any(d < 0 for d in dims) or len(dims) > 32:
        raise InvalidGraph("%s has dims %s: expected at most 32 non-negative sizes" % (what, dims))
    if vals.ndim != 1:
        raise InvalidGraph("%s: values have shape %s, expected 1-D" % (what, list(vals.shape)))
    nnz, size = vals.shape[0], 1
    for d in dims:
        size *= d
    if size * vals.dtype.itemsize > MAX_SPARSE_DENSE_BYTES:
        raise InvalidGraph("%s: its dense form %s would take %d bytes, more than the limit of %d"
                           % (what, dims, size * vals.dtype.itemsize, MAX_SPARSE_DENSE_BYTES))
    if idx.dtype.kind not in "iu":
        raise InvalidGraph("%s: indices have type %s, expected int64" % (what, idx.dtype))
    if idx.ndim == 1:
        ok = idx.shape[0] == nnz and (nnz == 0 or (idx.min() >= 0 and idx.max() < size))
    elif idx.ndim == 2:
        ok = idx.shape == (nnz, len(dims)) and (nnz == 0 or (
            (idx >= 0).all() and (idx < np.asarray(dims, dtype=np.int64)).all()))
    else:
        ok = False
    if not ok:
        raise InvalidGraph("%s: indices of shape %s do not address %d values inside dims %s"
                           % (what, list(idx.shape), nnz, dims))
