"""ai.onnx.ml linear models: LinearClassifier and LinearRegressor, with onnxruntime's label and
score rules (binary models with one coefficient row, post transforms in float32)."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..errors import InvalidArgument
from .ml import (ML, apply_transform, as_float_matrix, class_labels, expand_binary, ort_probit,
                 transform_code)
from .registry import register


def _linear_scores(op: str, x: np.ndarray, coefficients: Optional[List[float]],
                   intercepts: Optional[List[float]], n_out: int) -> np.ndarray:
    """x @ coefficients(n_out, F).T + intercepts, rounded to float32 like onnxruntime's GEMM."""
    if not coefficients:
        raise InvalidArgument("%s: the coefficients attribute is required" % op)
    coef = np.asarray(coefficients, dtype=np.float32).astype(np.float64)
    if n_out <= 0 or coef.size % n_out:
        raise InvalidArgument("%s: %d coefficients do not split into %d rows"
                              % (op, coef.size, n_out))
    coef = coef.reshape(n_out, -1)
    if coef.shape[1] != x.shape[1]:
        raise InvalidArgument("%s: X has %d features but the coefficients expect %d"
                              % (op, x.shape[1], coef.shape[1]))
    scores = x.astype(np.float64).dot(coef.T)
    if intercepts:
        b = np.asarray(intercepts, dtype=np.float32).astype(np.float64)
        if b.size not in (1, n_out):
            raise InvalidArgument("%s: %d intercepts for %d outputs" % (op, b.size, n_out))
        scores = scores + b
    return scores.astype(np.float32)


def _one_column_transform(s: np.ndarray, post: str, add_second: bool) -> np.ndarray:
    """onnxruntime's update of one score per row: PROBIT only, or the two-column expansion
    (other transforms leave a lone column as it is)."""
    if post == "PROBIT":
        p = ort_probit(s[:, 0])
        if not add_second:
            return p.reshape(-1, 1)
        out = np.zeros(2 * p.size, dtype=np.float32)   # onnxruntime fills the packed front
        out[:p.size] = p
        return out.reshape(-1, 2)
    if add_second:
        return expand_binary(s[:, 0], post, 1)
    return s


@register("LinearClassifier", domain=ML, since=1)
def linear_classifier(X: np.ndarray, classlabels_ints: Optional[List[int]] = None,
                      classlabels_strings: Optional[List[str]] = None,
                      coefficients: Optional[List[float]] = None,
                      intercepts: Optional[List[float]] = None, multi_class: int = 0,
                      post_transform: Any = "NONE"):
    """LinearClassifier-1: (labels, scores); scores = X @ W.T + b, one row of W per class (one
    row for a binary model: label 1 when the score is > 0, scores [1-s, s])."""
    op = "LinearClassifier"
    post = transform_code(op, post_transform)
    x = as_float_matrix(op, X)
    labels = class_labels(op, classlabels_strings, classlabels_ints, required=False)
    n_classes = len(intercepts) if intercepts else \
        max(1, len(coefficients or []) // max(1, x.shape[1]))
    scores = _linear_scores(op, x, coefficients, intercepts, n_classes)
    strings = labels is not None and labels.dtype == object
    if n_classes == 1:
        two = labels is not None and len(labels) == 2
        if strings:
            pos, neg = (labels[1], labels[0]) if two else ("1", "0")
        else:
            pos, neg = (int(labels[1]), int(labels[0])) if two else (1, 0)
        pick = scores[:, 0] > 0
        if strings:
            y = np.empty(len(pick), dtype=object)
            y[:] = [pos if p else neg for p in pick.tolist()]
        else:
            y = np.where(pick, pos, neg).astype(np.int64)
        return y, _one_column_transform(scores, post, two)
    if labels is None or len(labels) < n_classes:
        raise InvalidArgument("%s: %d classes but %d class labels"
                              % (op, n_classes, 0 if labels is None else len(labels)))
    y = labels[np.argmax(scores, axis=1)]
    return y, apply_transform(scores, post)


@register("LinearRegressor", domain=ML, since=1)
def linear_regressor(X: np.ndarray, coefficients: Optional[List[float]] = None,
                     intercepts: Optional[List[float]] = None, post_transform: Any = "NONE",
                     targets: int = 1) -> np.ndarray:
    """LinearRegressor-1: X @ W.T + b with `targets` rows of W, as float32 (N, targets)."""
    op = "LinearRegressor"
    post = transform_code(op, post_transform)
    x = as_float_matrix(op, X)
    scores = _linear_scores(op, x, coefficients, intercepts, int(targets))
    if scores.shape[1] == 1:
        return ort_probit(scores) if post == "PROBIT" else scores
    return apply_transform(scores, post)
