"""ai.onnx.ml support vector machines: SVMClassifier (one-vs-one votes, libsvm's Platt scaling
and pairwise coupling for probabilities) and SVMRegressor, following onnxruntime's kernels."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..errors import InvalidArgument
from .ml import (ML, apply_transform, as_float_matrix, class_labels, expand_binary, ort_logistic,
                 ort_probit, text_of, transform_code)
from .registry import register

KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _kernel_matrix(op: str, x: np.ndarray, vectors: np.ndarray, kernel: str,
                   params: Optional[List[float]]) -> np.ndarray:
    """K(x_n, v_m) for every row and support vector, (N, M) float32."""
    gamma, coef0, degree = (list(params) + [0.0, 0.0, 0.0])[:3] if params else (0.0, 0.0, 0.0)
    gamma, coef0 = float(np.float32(gamma)), float(np.float32(coef0))
    a = x.astype(np.float64)
    b = vectors.astype(np.float64)
    if kernel == "RBF":
        d2 = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * a.dot(b.T)
        return np.exp(-gamma * np.maximum(d2, 0.0)).astype(np.float32)
    dot = a.dot(b.T)
    if kernel == "LINEAR":
        return dot.astype(np.float32)
    inner = gamma * dot + coef0
    if kernel == "POLY":
        return np.power(inner, float(np.float32(degree))).astype(np.float32)
    return np.tanh(inner).astype(np.float32)


def _kernel_name(op: str, kernel_type: Any) -> str:
    name = text_of(kernel_type) if kernel_type is not None else "LINEAR"
    if name not in KERNELS:
        raise InvalidArgument("%s: kernel_type %r is not one of %s"
                              % (op, name, ", ".join(KERNELS)))
    return name


def _support_vectors(op: str, support_vectors: Optional[List[float]], count: int,
                     n_features: int) -> np.ndarray:
    sv = np.asarray(support_vectors or [], dtype=np.float32)
    if count <= 0 or sv.size != count * n_features:
        raise InvalidArgument("%s: %d support_vectors values are not %d vectors of %d features"
                              % (op, sv.size, count, n_features))
    return sv.reshape(count, n_features)


def _pairwise_coupling(r: np.ndarray) -> np.ndarray:
    """libsvm's multiclass_probability (Wu, Lin and Weng) for every row at once, in float32 with
    onnxruntime's stopping rule: r is (N, k, k) pairwise probabilities, the result (N, k)."""
    f = np.float32
    n, k = r.shape[0], r.shape[1]
    q = np.zeros((n, k, k), dtype=np.float32)
    for i in range(k):
        for j in range(k):
            if j != i:
                q[:, i, i] += r[:, j, i] * r[:, j, i]
        for j in range(i):
            q[:, i, j] = q[:, j, i]
        for j in range(i + 1, k):
            q[:, i, j] = -r[:, j, i] * r[:, i, j]
    p = np.full((n, k), f(1.0) / f(k), dtype=np.float32)
    eps = f(0.005) / f(k)
    active = np.ones(n, dtype=bool)
    for _ in range(100):
        qp = np.einsum("nij,nj->ni", q, p).astype(np.float32)
        pqp = (p * qp).sum(axis=1).astype(np.float32)
        err = np.abs(qp - pqp[:, None]).max(axis=1)
        active &= ~(err < eps)
        if not active.any():
            break
        for i in range(k):
            diff = ((-qp[:, i] + pqp) / q[:, i, i]).astype(np.float32)
            diff = np.where(active, diff, f(0)).astype(np.float32)
            p[:, i] += diff
            one = (f(1) + diff).astype(np.float32)
            pqp = (pqp + diff * (diff * q[:, i, i] + f(2) * qp[:, i])) / one / one
            pqp = pqp.astype(np.float32)
            qp = ((qp + diff[:, None] * q[:, i, :]) / one[:, None]).astype(np.float32)
            p = (p / one[:, None]).astype(np.float32)
    return p


def _svc_decisions(coef: np.ndarray, kernels: np.ndarray, rho: np.ndarray, per_class: List[int]):
    """One-vs-one decision values (N, k(k-1)/2) and votes (N, k), libsvm's pair order."""
    k = len(per_class)
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(np.int64)
    n = kernels.shape[0]
    decisions = np.zeros((n, k * (k - 1) // 2), dtype=np.float32)
    votes = np.zeros((n, k), dtype=np.int64)
    kd = kernels.astype(np.float64)
    idx = 0
    for i in range(k - 1):
        si, ei = starts[i], starts[i + 1]
        for j in range(i + 1, k):
            sj, ej = starts[j], starts[j + 1]
            total = kd[:, si:ei].dot(coef[j - 1, si:ei]) + kd[:, sj:ej].dot(coef[i, sj:ej])
            total = total + float(rho[idx])
            decisions[:, idx] = total.astype(np.float32)
            win = total > 0
            votes[win, i] += 1
            votes[~win, j] += 1
            idx += 1
    return decisions, votes


def _platt_probabilities(decisions: np.ndarray, prob_a: List[float], prob_b: List[float],
                         k: int) -> np.ndarray:
    """Pairwise Platt-scaled probabilities coupled into (N, k) class probabilities."""
    f = np.float32
    n = decisions.shape[0]
    r = np.zeros((n, k, k), dtype=np.float32)
    a = np.asarray(prob_a, dtype=np.float32)
    b = np.asarray(prob_b, dtype=np.float32)
    idx = 0
    for i in range(k - 1):
        for j in range(i + 1, k):
            val = (decisions[:, idx] * a[idx] + b[idx]).astype(np.float32)
            p = (f(1) - ort_logistic(val)).astype(np.float32)
            p = np.minimum(np.maximum(p, f(1e-7)), f(1) - f(1e-7)).astype(np.float32)
            r[:, i, j] = p
            r[:, j, i] = f(1) - p
            idx += 1
    return _pairwise_coupling(r)


def _binary_label(labels: np.ndarray, max_weight: np.ndarray, maxclass: np.ndarray,
                  have_proba: bool, all_positive: bool) -> np.ndarray:
    """onnxruntime's ChooseClass for a two-class model."""
    if have_proba:
        return labels[maxclass]
    if all_positive:
        second = max_weight >= 0.5
    else:
        second = max_weight > 0
    return np.where(second, labels[1], labels[maxclass]) if labels.dtype != object else \
        _pick_objects(second, labels[1], labels[maxclass])


def _pick_objects(cond: np.ndarray, a: Any, b: np.ndarray) -> np.ndarray:
    out = np.empty(len(cond), dtype=object)
    out[:] = [a if c else v for c, v in zip(cond.tolist(), b.tolist())]
    return out


@register("SVMClassifier", domain=ML, since=1)
def svm_classifier(X: np.ndarray, classlabels_ints: Optional[List[int]] = None,
                   classlabels_strings: Optional[List[str]] = None,
                   coefficients: Optional[List[float]] = None,
                   kernel_params: Optional[List[float]] = None, kernel_type: Any = "LINEAR",
                   post_transform: Any = "NONE", prob_a: Optional[List[float]] = None,
                   prob_b: Optional[List[float]] = None, rho: Optional[List[float]] = None,
                   support_vectors: Optional[List[float]] = None,
                   vectors_per_class: Optional[List[int]] = None):
    """SVMClassifier-1: (labels, scores). With support vectors: one-vs-one decisions and votes,
    probabilities when prob_a/prob_b are given; without: a linear model (X @ W.T + rho[0])."""
    op = "SVMClassifier"
    post = transform_code(op, post_transform)
    x = as_float_matrix(op, X)
    labels = class_labels(op, classlabels_strings, classlabels_ints)
    k = len(labels)
    if not coefficients or not rho:
        raise InvalidArgument("%s: the coefficients and rho attributes are required" % op)
    prob_a, prob_b = list(prob_a or []), list(prob_b or [])
    if len(prob_a) != len(prob_b):
        raise InvalidArgument("%s: prob_a has %d values but prob_b %d"
                              % (op, len(prob_a), len(prob_b)))
    have_proba = len(prob_a) > 0
    per_class = [int(v) for v in (vectors_per_class or [])]
    n_vectors = sum(per_class)
    coef = np.asarray(coefficients, dtype=np.float32)
    all_positive = bool((coef >= 0).all())
    rho_arr = np.asarray(rho, dtype=np.float32)
    n_pairs = k * (k - 1) // 2
    if n_vectors > 0:
        if len(per_class) != k:
            raise InvalidArgument("%s: vectors_per_class has %d entries for %d classes"
                                  % (op, len(per_class), k))
        if coef.size < (k - 1) * n_vectors or rho_arr.size < n_pairs \
                or (have_proba and len(prob_a) < n_pairs):
            raise InvalidArgument("%s: coefficients, rho or prob_a/prob_b are too short for %d "
                                  "classes and %d support vectors" % (op, k, n_vectors))
        width = len(support_vectors or []) // n_vectors
        sv = _support_vectors(op, support_vectors, n_vectors, width)
        if sv.shape[1] != x.shape[1]:
            raise InvalidArgument("%s: X has %d features, the support vectors %d"
                                  % (op, x.shape[1], sv.shape[1]))
        kern = _kernel_matrix(op, x, sv, _kernel_name(op, kernel_type), kernel_params)
        coef2 = coef[:(k - 1) * n_vectors].astype(np.float64).reshape(k - 1, n_vectors)
        decisions, votes = _svc_decisions(coef2, kern, rho_arr, per_class)
        maxclass = np.argmax(votes, axis=1)
        max_weight = np.zeros(x.shape[0], dtype=np.float32)
        if have_proba:
            scores = _platt_probabilities(decisions, prob_a, prob_b, k)
        else:
            scores = decisions
    else:
        if coef.size % k or coef.size // k != x.shape[1]:
            raise InvalidArgument("%s: %d coefficients are not %d classes x %d features"
                                  % (op, coef.size, k, x.shape[1]))
        w = coef.astype(np.float64).reshape(k, -1)
        scores = (x.astype(np.float64).dot(w.T) + float(rho_arr[0])).astype(np.float32)
        maxclass = np.argmax(scores, axis=1)
        max_weight = scores.max(axis=1)
    if n_pairs == 1:
        y = _binary_label(labels, max_weight, maxclass, have_proba, all_positive)
    else:
        y = labels[maxclass]
    if scores.shape[1] == 1:          # two classes, no probabilities: one decision per row
        if post == "PROBIT":
            out = np.zeros((x.shape[0], 2), dtype=np.float32)
            out[:, 0] = ort_probit(scores[:, 0])
            return y, out
        return y, expand_binary(scores[:, 0], post, 2 if post == "NONE" else 0)
    return y, apply_transform(scores, post)


@register("SVMRegressor", domain=ML, since=1)
def svm_regressor(X: np.ndarray, coefficients: Optional[List[float]] = None,
                  kernel_params: Optional[List[float]] = None, kernel_type: Any = "LINEAR",
                  n_supports: int = 0, one_class: int = 0, post_transform: Any = "NONE",
                  rho: Optional[List[float]] = None,
                  support_vectors: Optional[List[float]] = None) -> np.ndarray:
    """SVMRegressor-1: sum of coefficient * K(x, support vector) + rho[0] (or X @ w + rho[0]
    without support vectors) as (N, 1) float32; one_class maps it to +1 / -1."""
    op = "SVMRegressor"
    transform_code(op, post_transform)   # validated; onnxruntime applies no transform here
    x = as_float_matrix(op, X)
    if not coefficients or not rho:
        raise InvalidArgument("%s: the coefficients and rho attributes are required" % op)
    coef = np.asarray(coefficients, dtype=np.float32).astype(np.float64)
    bias = float(np.float32(rho[0]))
    n_sv = int(n_supports)
    if n_sv > 0:
        sv = _support_vectors(op, support_vectors, n_sv, len(support_vectors or []) // n_sv)
        if sv.shape[1] != x.shape[1] or coef.size < n_sv:
            raise InvalidArgument("%s: X has %d features, the support vectors %d (%d "
                                  "coefficients for %d vectors)"
                                  % (op, x.shape[1], sv.shape[1], coef.size, n_sv))
        kern = _kernel_matrix(op, x, sv, _kernel_name(op, kernel_type), kernel_params)
        out = kern.astype(np.float64).dot(coef[:n_sv]) + bias
    else:
        if coef.size != x.shape[1]:
            raise InvalidArgument("%s: X has %d features but there are %d coefficients"
                                  % (op, x.shape[1], coef.size))
        out = x.astype(np.float64).dot(coef) + bias
    out = out.astype(np.float32).reshape(-1, 1)
    if int(one_class):
        out = np.where(out > 0, np.float32(1), np.float32(-1)).astype(np.float32)
    return out
