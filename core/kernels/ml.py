"""ai.onnx.ml operators: LabelEncoder, TreeEnsemble, Binarizer, ArrayFeatureExtractor, Scaler,
Normalizer; and the score helpers the other ml_* modules share (onnxruntime's post transforms in
float32, class labels from attributes)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from ..errors import InvalidArgument, NotImplemented
from .registry import register

ML = "ai.onnx.ml"


def text_of(v: Any) -> str:
    """A string tensor element or attribute as str (tensor elements may be bytes)."""
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def is_str_array(x: np.ndarray) -> bool:
    """True for a tensor of strings (object, unicode or bytes dtype)."""
    return x.dtype == object or x.dtype.kind in "US"


# ---------------------------------------------------------------- shared score helpers
# onnxruntime computes classic-ML scores in float32 and post-transforms them with its own
# formulas (ml_common.h); these do the same on whole (N, C) float32 arrays.

TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")


def transform_code(op: str, name: Any) -> str:
    """The post_transform attribute as one of TRANSFORMS; InvalidArgument naming `op` otherwise."""
    text = text_of(name) if name is not None else "NONE"
    if text not in TRANSFORMS:
        raise InvalidArgument("%s: post_transform %r is not one of %s"
                              % (op, text, ", ".join(TRANSFORMS)))
    return text


def ort_logistic(x: np.ndarray) -> np.ndarray:
    """onnxruntime's ComputeLogistic in float32: 1/(1+exp(-|x|)), mirrored for x < 0."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore"):
        v = (np.float32(1) / (np.float32(1) + np.exp(-np.abs(x)))).astype(np.float32)
    return np.where(x < 0, np.float32(1) - v, v).astype(np.float32)


def ort_probit(x: np.ndarray) -> np.ndarray:
    """onnxruntime's ComputeProbit: sqrt(2) * ErfInv(2x - 1), its closed-form ErfInv, float32."""
    f = np.float32
    x = (f(2) * np.asarray(x, dtype=np.float32) - f(1)).astype(np.float32)
    sgn = np.where(x < 0, f(-1), f(1)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log(((f(1) - x) * (f(1) + x)).astype(np.float32))
        v = f(2) / (f(np.pi) * f(0.147)) + f(0.5) * lg
        v2 = f(1) / f(0.147) * lg
        v3 = -v + np.sqrt(v * v - v2)
        out = f(1.41421356) * sgn * np.sqrt(v3)
    return out.astype(np.float32)


def ort_softmax(s: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (N, C) float32 scores."""
    s = np.asarray(s, dtype=np.float32)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def ort_softmax_zero(s: np.ndarray) -> np.ndarray:
    """onnxruntime's SOFTMAX_ZERO: like softmax, but scores within 1e-7 of 0 stay 0-weighted."""
    s = np.asarray(s, dtype=np.float32)
    vmax = s.max(axis=1, keepdims=True)
    nz = (s > np.float32(1e-7)) | (s < np.float32(-1e-7))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.where(nz, np.exp(s - vmax), s * np.exp(-vmax)).astype(np.float32)
        total = np.where(nz, e, 0).sum(axis=1, keepdims=True).astype(np.float32)
        return (e / total).astype(np.float32)


def apply_transform(scores: np.ndarray, post: str) -> np.ndarray:
    """Post transform of (N, C) scores with C >= 2, as onnxruntime applies it to each row."""
    if post == "LOGISTIC":
        return ort_logistic(scores)
    if post == "SOFTMAX":
        return ort_softmax(scores)
    if post == "SOFTMAX_ZERO":
        return ort_softmax_zero(scores)
    if post == "PROBIT":
        return ort_probit(scores)
    return np.asarray(scores, dtype=np.float32)


def expand_binary(s: np.ndarray, post: str, mode: int) -> np.ndarray:
    """One score per row made into two columns the way onnxruntime does (`add_second_class`):
    LOGISTIC -> [1-p, p] with p = logistic(s); otherwise mode 0/1 -> [1-s, s], 2/3 -> [-s, s]."""
    s = np.asarray(s, dtype=np.float32).reshape(-1)
    if mode in (0, 1) and post == "LOGISTIC":
        p = ort_logistic(s)
        return np.stack([np.float32(1) - p, p], axis=1).astype(np.float32)
    if mode in (0, 1):
        return np.stack([np.float32(1) - s, s], axis=1).astype(np.float32)
    if post == "LOGISTIC":
        return np.stack([ort_logistic(-s), ort_logistic(s)], axis=1)
    return np.stack([-s, s], axis=1).astype(np.float32)


def class_labels(op: str, strings: Optional[List[Any]], ints: Optional[List[int]],
                 required: bool = True) -> Optional[np.ndarray]:
    """The classlabels_strings (object array) or classlabels_ints / int64s (int64 array)."""
    if strings:
        out = np.empty(len(strings), dtype=object)
        out[:] = [text_of(v) for v in strings]
        return out
    if ints:
        return np.asarray(ints, dtype=np.int64)
    if required:
        raise InvalidArgument("%s: needs classlabels_strings or classlabels_ints" % op)
    return None


def as_float_matrix(op: str, X: np.ndarray) -> np.ndarray:
    """X as a 2-D float32 (N, F) array (a 1-D X is one row), the way onnxruntime reads it."""
    x = np.asarray(X)
    if x.ndim == 0 or x.dtype == object or x.dtype.kind not in "fiub":
        raise InvalidArgument("%s: X must be a numeric tensor of rank 1 or 2, got %s of shape %s"
                              % (op, x.dtype, x.shape))
    if x.ndim == 1:
        x = x.reshape(1, -1)
    elif x.ndim > 2:
        x = x.reshape(x.shape[0], -1)
    return x.astype(np.float32)


# ---------------------------------------------------------------- LabelEncoder

class _Lookup:
    """A dict that also finds NaN float keys."""

    def __init__(self, keys: List[Any], values: List[Any]):
        self.table: Dict[Any, Any] = {}
        self.nan_value: Any = None
        for k, v in zip(keys, values):
            if isinstance(k, float) and k != k:
                self.nan_value = v
            else:
                self.table[k] = v

    def get(self, key: Any, default: Any) -> Any:
        if isinstance(key, float) and key != key:
            return default if self.nan_value is None else self.nan_value
        return self.table.get(key, default)


def _encode(op: str, x: np.ndarray, keys: List[Any], values: List[Any], default: Any,
            out_dtype: Any) -> np.ndarray:
    if len(keys) != len(values):
        raise InvalidArgument("%s: %d keys but %d values" % (op, len(keys), len(values)))
    table = _Lookup(keys, values)
    items = [text_of(v) for v in x.reshape(-1).tolist()] if is_str_array(x) else x.reshape(-1).tolist()
    out = [table.get(k, default) for k in items]
    if out_dtype == object:
        arr = np.empty(len(out), dtype=object)
        arr[:] = out
        return arr.reshape(x.shape)
    return np.array(out, dtype=out_dtype).reshape(x.shape)


@register("LabelEncoder", domain=ML, since=1, until=1)
def label_encoder_1(X: np.ndarray, classes_strings: Optional[List[str]] = None,
                    default_int64: int = -1, default_string: str = "_Unused") -> np.ndarray:
    """LabelEncoder-1: strings to their index in classes_strings, or indices to strings."""
    op = "LabelEncoder"
    x = np.asarray(X)
    classes = [text_of(s) for s in (classes_strings or [])]
    if is_str_array(x):
        return _encode(op, x, classes, list(range(len(classes))), int(default_int64), np.int64)
    return _encode(op, x.astype(np.int64), list(range(len(classes))), classes,
                   text_of(default_string), object)


def _keys_values(op: str, x: np.ndarray, attrs: Dict[str, Any]):
    keys = None
    if attrs.get("keys_tensor") is not None:
        kt = np.asarray(attrs["keys_tensor"]).reshape(-1)
        keys = [text_of(v) for v in kt.tolist()] if is_str_array(kt) else kt.tolist()
    for name, conv in (("keys_strings", text_of), ("keys_int64s", int), ("keys_floats", float)):
        if keys is None and attrs.get(name) is not None:
            keys = [conv(v) for v in attrs[name]]
    if keys is None:
        raise InvalidArgument("%s: needs one of keys_tensor, keys_strings, keys_int64s, keys_floats"
                              % op)
    if attrs.get("values_tensor") is not None:
        vt = np.asarray(attrs["values_tensor"]).reshape(-1)
        if is_str_array(vt):
            return keys, [text_of(v) for v in vt.tolist()], object, "_Unused"
        return keys, vt.tolist(), vt.dtype, vt.dtype.type(-1 if vt.dtype.kind in "iu" else -0.0)
    if attrs.get("values_strings") is not None:
        return keys, [text_of(v) for v in attrs["values_strings"]], object, None
    if attrs.get("values_int64s") is not None:
        return keys, [int(v) for v in attrs["values_int64s"]], np.int64, None
    if attrs.get("values_floats") is not None:
        return keys, [float(v) for v in attrs["values_floats"]], np.float32, None
    raise InvalidArgument("%s: needs one of values_tensor, values_strings, values_int64s, "
                          "values_floats" % op)


@register("LabelEncoder", domain=ML, since=2)
def label_encoder_2(X: np.ndarray, default_float: float = -0.0, default_int64: int = -1,
                    default_string: str = "_Unused", default_tensor: Optional[np.ndarray] = None,
                    keys_floats: Optional[List[float]] = None,
                    keys_int64s: Optional[List[int]] = None,
                    keys_strings: Optional[List[str]] = None,
                    keys_tensor: Optional[np.ndarray] = None,
                    values_floats: Optional[List[float]] = None,
                    values_int64s: Optional[List[int]] = None,
                    values_strings: Optional[List[str]] = None,
                    values_tensor: Optional[np.ndarray] = None) -> np.ndarray:
    """LabelEncoder-2/4: map each key to its value (keys and values as lists or tensors)."""
    op = "LabelEncoder"
    x = np.asarray(X)
    attrs = dict(keys_floats=keys_floats, keys_int64s=keys_int64s, keys_strings=keys_strings,
                 keys_tensor=keys_tensor, values_floats=values_floats,
                 values_int64s=values_int64s, values_strings=values_strings,
                 values_tensor=values_tensor)
    keys, values, out_dt, tensor_default = _keys_values(op, x, attrs)
    if not is_str_array(x) and keys and isinstance(keys[0], str):
        raise InvalidArgument("%s: string keys need a string input, got %s" % (op, x.dtype))
    if default_tensor is not None:
        dv = np.asarray(default_tensor).reshape(-1)
        default = text_of(dv[0]) if is_str_array(dv) else dv.tolist()[0]
    elif out_dt == object:
        default = text_of(default_string)
    elif out_dt == np.int64 and tensor_default is None:
        default = int(default_int64)
    elif out_dt == np.float32 and tensor_default is None:
        default = float(default_float)
    else:
        default = tensor_default
    if not is_str_array(x) and x.dtype.kind == "f":
        keys = [float(k) for k in keys]
    return _encode(op, x, keys, values, default, out_dt)


# ---------------------------------------------------------------- TreeEnsemble

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)


def _post_transform(op: str, scores: np.ndarray, post: int) -> np.ndarray:
    if post == 0:
        return scores
    if post == 1:
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if post == 2:
        return 1.0 / (1.0 + np.exp(-scores))
    if post == 3:
        nz = scores != 0
        e = np.where(nz, np.exp(scores - np.where(nz, scores, -np.inf).max(axis=1, keepdims=True)), 0)
        total = e.sum(axis=1, keepdims=True)
        return np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    raise NotImplemented("%s: post_transform %d (PROBIT) is not implemented" % (op, post))


@register("TreeEnsemble", domain=ML, since=5)
def tree_ensemble(X: np.ndarray, aggregate_function: int = 1,
                  leaf_targetids: Optional[List[int]] = None,
                  leaf_weights: Optional[np.ndarray] = None,
                  membership_values: Optional[np.ndarray] = None, n_targets: Optional[int] = None,
                  nodes_falseleafs: Optional[List[int]] = None,
                  nodes_falsenodeids: Optional[List[int]] = None,
                  nodes_featureids: Optional[List[int]] = None,
                  nodes_hitrates: Optional[np.ndarray] = None,
                  nodes_missing_value_tracks_true: Optional[List[int]] = None,
                  nodes_modes: Optional[np.ndarray] = None,
                  nodes_splits: Optional[np.ndarray] = None,
                  nodes_trueleafs: Optional[List[int]] = None,
                  nodes_truenodeids: Optional[List[int]] = None, post_transform: int = 0,
                  tree_roots: Optional[List[int]] = None) -> np.ndarray:
    """TreeEnsemble-5: sum / average / min / max of leaf weights per target over all trees."""
    op = "TreeEnsemble"
    x = np.asarray(X)
    if x.ndim != 2:
        raise InvalidArgument("%s: X must be 2-D (N, features), got %s" % (op, x.shape))
    required = dict(leaf_targetids=leaf_targetids, leaf_weights=leaf_weights, n_targets=n_targets,
                    nodes_falseleafs=nodes_falseleafs, nodes_falsenodeids=nodes_falsenodeids,
                    nodes_featureids=nodes_featureids, nodes_modes=nodes_modes,
                    nodes_splits=nodes_splits, nodes_trueleafs=nodes_trueleafs,
                    nodes_truenodeids=nodes_truenodeids, tree_roots=tree_roots)
    missing = [k for k, v in required.items() if v is None]
    if missing:
        raise InvalidArgument("%s: missing attributes %s" % (op, ", ".join(missing)))
    modes = np.asarray(nodes_modes).astype(np.int64).reshape(-1)
    splits = np.asarray(nodes_splits).astype(np.float64).reshape(-1)
    feat = np.asarray(nodes_featureids, dtype=np.int64)
    t_ids = np.asarray(nodes_truenodeids, dtype=np.int64)
    f_ids = np.asarray(nodes_falsenodeids, dtype=np.int64)
    t_leaf = np.asarray(nodes_trueleafs, dtype=bool)
    f_leaf = np.asarray(nodes_falseleafs, dtype=bool)
    tracks = (np.zeros(len(modes), dtype=bool) if nodes_missing_value_tracks_true is None
              else np.asarray(nodes_missing_value_tracks_true, dtype=bool))
    weights = np.asarray(leaf_weights).astype(np.float64).reshape(-1)
    targets = np.asarray(leaf_targetids, dtype=np.int64)
    n_nodes = len(modes)
    if any(len(a) != n_nodes for a in (splits, feat, t_ids, f_ids, t_leaf, f_leaf, tracks)):
        raise InvalidArgument("%s: every nodes_* attribute must have %d entries" % (op, n_nodes))
    if (feat >= x.shape[1]).any() or (feat < 0).any():
        raise InvalidArgument("%s: nodes_featureids must lie in [0, %d)" % (op, x.shape[1]))
    sets: Dict[int, np.ndarray] = {}
    if (modes == _MEMBER).any():
        if membership_values is None:
            raise InvalidArgument("%s: BRANCH_MEMBER nodes need membership_values" % op)
        groups: List[List[float]] = [[]]
        for v in np.asarray(membership_values).astype(np.float64).reshape(-1).tolist():
            if v != v:
                groups.append([])
            else:
                groups[-1].append(v)
        for k, node in enumerate(np.flatnonzero(modes == _MEMBER).tolist()):
            if k >= len(groups):
                raise InvalidArgument("%s: membership_values has too few NaN-separated sets" % op)
            sets[node] = np.array(groups[k])
    xv = x.astype(np.float64)
    n = x.shape[0]
    nt = int(n_targets)
    agg = int(aggregate_function)
    if agg not in (0, 1, 2, 3):
        raise InvalidArgument("%s: aggregate_function %d is not 0-3" % (op, agg))
    acc = np.zeros((n, nt))
    hit = np.zeros((n, nt), dtype=bool)
    rows = np.arange(n)
    for root in tree_roots:
        root = int(root)
        if t_leaf[root] and f_leaf[root] and t_ids[root] == f_ids[root]:
            node, at_leaf = np.full(n, t_ids[root]), np.ones(n, dtype=bool)
        else:
            node, at_leaf = np.full(n, root), np.zeros(n, dtype=bool)
        for _ in range(n_nodes + 1):
            active = np.flatnonzero(~at_leaf)
            if active.size == 0:
                break
            nd = node[active]
            v = xv[active, feat[nd]]
            s = splits[nd]
            m = modes[nd]
            with np.errstate(invalid="ignore"):    # NaN features compare False, as intended
                go = np.select([m == _LEQ, m == _LT, m == _GTE, m == _GT, m == _EQ, m == _NEQ],
                               [v <= s, v < s, v >= s, v > s, v == s, v != s], False)
            for node_id, arr in sets.items():
                sel = nd == node_id
                if sel.any():
                    go[sel] = np.isin(v[sel], arr)
            nan = np.isnan(v)
            go = np.where(nan & tracks[nd], True, go)
            node[active] = np.where(go, t_ids[nd], f_ids[nd])
            at_leaf[active] = np.where(go, t_leaf[nd], f_leaf[nd])
        else:
            raise InvalidArgument("%s: tree at root %d has a cycle" % (op, root))
        tg, wt = targets[node], weights[node]
        if agg in (0, 1):
            np.add.at(acc, (rows, tg), wt)
        else:
            cur = acc[rows, tg]
            better = np.minimum(cur, wt) if agg == 2 else np.maximum(cur, wt)
            acc[rows, tg] = np.where(hit[rows, tg], better, wt)
        hit[rows, tg] = True
    if agg == 0 and len(tree_roots):
        acc /= len(tree_roots)
    return _post_transform(op, acc, int(post_transform)).astype(x.dtype)


# ---------------------------------------------------------------- small ones

@register("Binarizer", domain=ML, since=1)
def binarizer(X: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """Binarizer-1: 1 where X > threshold, else 0, in X's type."""
    x = np.asarray(X)
    return (x > threshold).astype(x.dtype)


@register("ArrayFeatureExtractor", domain=ML, since=1)
def array_feature_extractor(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """ArrayFeatureExtractor-1: X[..., Y] (indices along the last axis)."""
    op = "ArrayFeatureExtractor"
    x = np.asarray(X)
    idx = np.asarray(Y).astype(np.int64).reshape(-1)
    if x.ndim == 0:
        raise InvalidArgument("%s: X must have rank >= 1" % op)
    if ((idx < 0) | (idx >= x.shape[-1])).any():
        raise InvalidArgument("%s: indices must lie in [0, %d)" % (op, x.shape[-1]))
    out = x[..., idx]
    return out.reshape(1, -1) if x.ndim == 1 else out


@register("Scaler", domain=ML, since=1)
def scaler(X: np.ndarray, offset: Optional[List[float]] = None,
           scale: Optional[List[float]] = None) -> np.ndarray:
    """Scaler-1: (X - offset) * scale, as float32."""
    x = np.asarray(X).astype(np.float32)
    off = np.asarray(offset if offset else [0.0], dtype=np.float32)
    sc = np.asarray(scale if scale else [1.0], dtype=np.float32)
    return ((x - off) * sc).astype(np.float32)


@register("Normalizer", domain=ML, since=1)
def normalizer(X: np.ndarray, norm: str = "MAX") -> np.ndarray:
    """Normalizer-1: each row divided by its MAX, L1 or L2 norm, as float32."""
    x = np.asarray(X).astype(np.float32)
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    if norm == "MAX":
        d = x2.max(axis=1, keepdims=True)
    elif norm == "L1":
        d = np.abs(x2).sum(axis=1, keepdims=True)
    elif norm == "L2":
        d = np.sqrt((x2 * x2).sum(axis=1, keepdims=True))
    else:
        raise InvalidArgument("Normalizer: norm %r is not MAX, L1 or L2" % (norm,))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d != 0, x2 / np.where(d != 0, d, 1), x2)
    return out.reshape(x.shape).astype(np.float32)

