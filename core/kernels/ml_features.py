"""ai.onnx.ml feature operators: Imputer, OneHotEncoder, ZipMap, CategoryMapper, DictVectorizer,
FeatureVectorizer and CastMap, as onnxruntime runs them. Maps are Python dicts and a sequence of
maps a list of dicts (what onnxruntime's Python API returns for ZipMap)."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import numpy as np

from ..errors import InvalidArgument
from .ml import ML, class_labels, is_str_array, text_of
from .registry import register


def _objects(values: List[Any], shape: Any) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


@register("Imputer", domain=ML, since=1)
def imputer(X: np.ndarray, imputed_value_floats: Optional[List[float]] = None,
            imputed_value_int64s: Optional[List[int]] = None,
            replaced_value_float: float = 0.0, replaced_value_int64: int = 0) -> np.ndarray:
    """Imputer-1: X with every `replaced_value` (NaN when replaced_value_float is NaN) swapped for
    the imputed value (one for all, or one per feature of the last axis)."""
    op = "Imputer"
    x = np.asarray(X)
    if x.dtype.kind == "f":
        values, target = imputed_value_floats, float(replaced_value_float)
    elif x.dtype.kind in "iu":
        values, target = imputed_value_int64s, int(replaced_value_int64)
    else:
        raise InvalidArgument("%s: X must be a float or integer tensor, got %s" % (op, x.dtype))
    if not values:
        raise InvalidArgument("%s: imputed_value_%s is required for %s input"
                              % (op, "floats" if x.dtype.kind == "f" else "int64s", x.dtype))
    stride = x.shape[0] if x.ndim == 1 else (x.shape[1] if x.ndim >= 2 else 1)
    fill = np.asarray(values).astype(x.dtype)
    if fill.size != 1 and fill.size != stride:
        raise InvalidArgument("%s: %d imputed values for %d features (expected 1 or %d)"
                              % (op, fill.size, stride, stride))
    if x.dtype.kind == "f" and target != target:
        hit = np.isnan(x)
    else:
        hit = x == target
    if fill.size == 1:
        return np.where(hit, fill[0], x).astype(x.dtype)
    flat = x.reshape(-1)
    per = np.resize(fill, flat.size)          # value i goes with feature i % stride
    return np.where(hit.reshape(-1), per, flat).reshape(x.shape).astype(x.dtype)


@register("OneHotEncoder", domain=ML, since=1)
def one_hot_encoder(X: np.ndarray, cats_int64s: Optional[List[int]] = None,
                    cats_strings: Optional[List[str]] = None, zeros: int = 1) -> np.ndarray:
    """OneHotEncoder-1: X.shape + [categories] float32, 1 at each value's category; an unknown
    value gives a zero row (zeros=1) or an error (zeros=0)."""
    op = "OneHotEncoder"
    x = np.asarray(X)
    if is_str_array(x):
        cats = [text_of(c) for c in (cats_strings or [])]
        items = [text_of(v) for v in x.reshape(-1).tolist()]
    else:
        cats = [int(c) for c in (cats_int64s or [])]
        items = x.reshape(-1).astype(np.int64).tolist()
    if not cats:
        raise InvalidArgument("%s: needs cats_%s for %s input"
                              % (op, "strings" if is_str_array(x) else "int64s", x.dtype))
    index = {c: i for i, c in enumerate(cats)}
    pos = np.asarray([index.get(v, -1) for v in items], dtype=np.int64)
    if not int(zeros) and (pos < 0).any():
        raise InvalidArgument("%s: value %r is not a category and zeros = 0"
                              % (op, items[int(np.flatnonzero(pos < 0)[0])]))
    out = np.zeros((pos.size, len(cats)), dtype=np.float32)
    found = np.flatnonzero(pos >= 0)
    out[found, pos[found]] = 1.0
    return out.reshape(tuple(x.shape) + (len(cats),))


@register("ZipMap", domain=ML, since=1)
def zip_map(X: np.ndarray, classlabels_int64s: Optional[List[int]] = None,
            classlabels_strings: Optional[List[str]] = None) -> List[Dict[Any, float]]:
    """ZipMap-1: each row of X (N, C) as a dict {class label: score} (keys in sorted order, as
    onnxruntime's std::map gives them); a list of N dicts."""
    op = "ZipMap"
    labels = class_labels(op, classlabels_strings, classlabels_int64s)
    x = np.asarray(X)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2 or x.shape[1] != len(labels):
        raise InvalidArgument("%s: X must be (N, %d) for %d class labels, got shape %s"
                              % (op, len(labels), len(labels), tuple(np.asarray(X).shape)))
    keys = labels.tolist()
    order = sorted(range(len(keys)), key=lambda i: keys[i])    # onnxruntime's maps are ordered
    keys = [keys[i] for i in order]
    rows = x.astype(np.float32)[:, order].tolist()
    return [dict(zip(keys, row)) for row in rows]


@register("CategoryMapper", domain=ML, since=1)
def category_mapper(X: np.ndarray, cats_int64s: Optional[List[int]] = None,
                    cats_strings: Optional[List[str]] = None, default_int64: int = -1,
                    default_string: str = "_Unused") -> np.ndarray:
    """CategoryMapper-1: strings to their paired int64 or int64s to their paired string."""
    op = "CategoryMapper"
    ints = [int(v) for v in (cats_int64s or [])]
    strs = [text_of(v) for v in (cats_strings or [])]
    if len(ints) != len(strs) or not ints:
        raise InvalidArgument("%s: cats_int64s (%d) and cats_strings (%d) must pair up"
                              % (op, len(ints), len(strs)))
    x = np.asarray(X)
    if is_str_array(x):
        table = dict(zip(strs, ints))
        out = [table.get(text_of(v), int(default_int64)) for v in x.reshape(-1).tolist()]
        return np.asarray(out, dtype=np.int64).reshape(x.shape)
    table2 = dict(zip(ints, strs))
    items = x.reshape(-1).astype(np.int64).tolist()
    return _objects([table2.get(v, text_of(default_string)) for v in items], x.shape)


def _map_values_dtype(values: List[Any]) -> Any:
    if any(isinstance(v, (str, bytes)) for v in values):
        return object
    if values and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return np.int64
    if any(isinstance(v, np.float64) for v in values):
        return np.float64
    return np.float32


@register("DictVectorizer", domain=ML, since=1)
def dict_vectorizer(X: Dict[Any, Any], int64_vocabulary: Optional[List[int]] = None,
                    string_vocabulary: Optional[List[str]] = None) -> np.ndarray:
    """DictVectorizer-1: a map as a [1, vocabulary] tensor of its values in vocabulary order
    (keys it lacks give 0, or "" for string values)."""
    op = "DictVectorizer"
    if not isinstance(X, dict):
        raise InvalidArgument("%s: X must be a map (dict), got %s" % (op, type(X).__name__))
    if string_vocabulary:
        vocab: List[Any] = [text_of(v) for v in string_vocabulary]
        data = {text_of(k): v for k, v in X.items()}
    elif int64_vocabulary:
        vocab = [int(v) for v in int64_vocabulary]
        data = {int(k): v for k, v in X.items()}
    else:
        raise InvalidArgument("%s: needs string_vocabulary or int64_vocabulary" % op)
    dtype = _map_values_dtype(list(X.values()))
    if dtype == object:
        return _objects([text_of(data[k]) if k in data else "" for k in vocab], (1, len(vocab)))
    return np.asarray([data.get(k, 0) for k in vocab], dtype=dtype).reshape(1, len(vocab))


@register("FeatureVectorizer", domain=ML, since=1)
def feature_vectorizer(*inputs: np.ndarray,
                       inputdimensions: Optional[List[int]] = None) -> np.ndarray:
    """FeatureVectorizer-1: the inputs' rows side by side as float32 (N, sum(inputdimensions)),
    each cut or zero-padded to its inputdimensions entry."""
    op = "FeatureVectorizer"
    dims = [int(d) for d in (inputdimensions or [])]
    if len(dims) != len(inputs) or not inputs:
        raise InvalidArgument("%s: %d inputs but %d inputdimensions values"
                              % (op, len(inputs), len(dims)))
    first = np.asarray(inputs[0])
    n = 1 if first.ndim <= 1 else first.shape[0]
    out = np.zeros((n, sum(dims)), dtype=np.float32)
    offset = 0
    for x, width in zip(inputs, dims):
        a = np.asarray(x)
        rows = a.reshape(1, -1) if a.ndim <= 1 else a.reshape(a.shape[0], -1)
        if rows.shape[0] != n:
            raise InvalidArgument("%s: inputs have %d and %d rows" % (op, n, rows.shape[0]))
        take = min(rows.shape[1], width)
        out[:, offset:offset + take] = rows[:, :take].astype(np.float32)
        offset += width
    return out


def _leading_int(text: str) -> int:
    m = re.match(r"\s*[+-]?\d+", text)
    if m is None:
        raise InvalidArgument("CastMap: %r is not an integer" % text)
    return int(m.group())


def _cast_one(value: Any, to: str) -> Any:
    if to == "TO_STRING":
        return text_of(value) if isinstance(value, (str, bytes)) else "%f" % float(np.float32(value))
    if isinstance(value, (str, bytes)):
        return float(text_of(value)) if to == "TO_FLOAT" else _leading_int(text_of(value))
    return float(value) if to == "TO_FLOAT" else int(np.float32(value))


@register("CastMap", domain=ML, since=1)
def cast_map(X: Dict[int, Any], cast_to: Any = "TO_FLOAT", map_form: Any = "DENSE",
             max_map: int = 1) -> np.ndarray:
    """CastMap-1: an int64-keyed map as a [1, M] tensor in key order, its values cast to float,
    string or int64; SPARSE puts value k at position k of max_map slots."""
    op = "CastMap"
    if not isinstance(X, dict):
        raise InvalidArgument("%s: X must be a map (dict), got %s" % (op, type(X).__name__))
    to = text_of(cast_to)
    form = text_of(map_form)
    if to not in ("TO_FLOAT", "TO_STRING", "TO_INT64"):
        raise InvalidArgument("%s: cast_to %r is not TO_FLOAT, TO_STRING or TO_INT64" % (op, to))
    if form not in ("DENSE", "SPARSE"):
        raise InvalidArgument("%s: map_form %r is not DENSE or SPARSE" % (op, form))
    items = sorted((int(k), v) for k, v in X.items())
    if form == "DENSE":
        vals = [_cast_one(v, to) for _, v in items]
    else:
        if items and items[0][0] < 0:
            raise InvalidArgument("%s: negative key %d in a SPARSE map" % (op, items[0][0]))
        pad: Any = "0.f" if to == "TO_STRING" else 0
        vals = [pad] * int(max_map)
        for key, v in items:
            if key < int(max_map):
                vals[key] = _cast_one(v, to)
    if to == "TO_STRING":
        return _objects(vals, (1, len(vals)))
    dtype = np.float32 if to == "TO_FLOAT" else np.int64
    return np.asarray(vals, dtype=dtype).reshape(1, len(vals))
