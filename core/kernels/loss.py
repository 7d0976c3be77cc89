"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights, ignore_index, reductions)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..errors import InvalidArgument
from ._util import pick_outputs
from .registry import register

_REDUCTIONS = ("none", "sum", "mean")


def _check(op: str, x: np.ndarray, target: np.ndarray, weight: Optional[np.ndarray],
           reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise InvalidArgument("%s: reduction %r is not one of none, sum, mean" % (op, reduction))
    if x.ndim < 2:
        raise InvalidArgument("%s: input must have shape (N, C, ...), got %s" % (op, x.shape))
    want = (x.shape[0],) + x.shape[2:]
    if target.shape != want:
        raise InvalidArgument("%s: target must have shape %s for input %s, got %s"
                              % (op, want, x.shape, target.shape))
    if target.dtype.kind not in "iu":
        raise InvalidArgument("%s: target must hold integers, got %s" % (op, target.dtype))
    if weight is not None and np.asarray(weight).shape != (x.shape[1],):
        raise InvalidArgument("%s: weight must have shape (%d,), got %s"
                              % (op, x.shape[1], np.asarray(weight).shape))


def nll(op: str, logp: np.ndarray, target: np.ndarray, weight: Optional[np.ndarray],
        ignore_index: Optional[int], reduction: str) -> np.ndarray:
    """The negative log-likelihood of `target` under `logp` (N, C, ...), reduced."""
    _check(op, logp, target, weight, reduction)
    c = logp.shape[1]
    t = target.astype(np.int64)
    keep = np.ones(t.shape, dtype=bool) if ignore_index is None else t != int(ignore_index)
    bad = keep & ((t < 0) | (t >= c))
    if bad.any():
        raise InvalidArgument("%s: target value %d is out of range [0, %d)"
                              % (op, int(t[bad].reshape(-1)[0]), c))
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1)[:, 0]
    w = np.ones((c,), dtype=logp.dtype) if weight is None else np.asarray(weight).astype(logp.dtype)
    wt = np.where(keep, w[safe], np.zeros((), dtype=logp.dtype)).astype(logp.dtype)
    loss = (-picked * wt).astype(logp.dtype)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.array(loss.sum(), dtype=logp.dtype)
    denom = wt.sum()
    return np.array(loss.sum() / denom if denom != 0 else loss.sum() * 0, dtype=logp.dtype)


@register("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(input: np.ndarray, target: np.ndarray,
                                 weight: Optional[np.ndarray] = None,
                                 ignore_index: Optional[int] = None,
                                 reduction: str = "mean") -> np.ndarray:
    """NegativeLogLikelihoodLoss-12/13/22: -input[n, target[n, ...], ...] * weight[target]."""
    x = np.asarray(input)
    return nll("NegativeLogLikelihoodLoss", x, np.asarray(target), weight, ignore_index, reduction)


def log_softmax_axis1(x: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax over axis 1, in x's dtype."""
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    shifted = wide - wide.max(axis=1, keepdims=True)
    out = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return out.astype(x.dtype)


@register("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(ctx: Any, scores: np.ndarray, labels: np.ndarray,
                               weights: Optional[np.ndarray] = None,
                               ignore_index: Optional[int] = None,
                               reduction: str = "mean"):
    """SoftmaxCrossEntropyLoss-12/13: NLL of log_softmax(scores) over axis 1; log_prob optional."""
    op = "SoftmaxCrossEntropyLoss"
    x = np.asarray(scores)
    if x.ndim < 2:
        raise InvalidArgument("%s: scores must have shape (N, C, ...), got %s" % (op, x.shape))
    logp = log_softmax_axis1(x)
    loss = nll(op, logp, np.asarray(labels), weights, ignore_index, reduction)
    return pick_outputs(ctx, [loss, logp])
