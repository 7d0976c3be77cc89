"""Normalizations: BatchNormalization, LayerNormalization, RMSNormalization, InstanceNormalization,
GroupNormalization, LRN, MeanVarianceNormalization, LpNormalization and the softmax family
(Softmax, LogSoftmax, Hardmax: a row normalized to sum 1).

Statistics are computed in float32 (float64 for float64 inputs) whatever the input type, and the
result is cast back to the input's type. Before opset 13 the softmax family flattens the input to
2-D at `axis`; from 13 it works along `axis` alone.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ..errors import InvalidArgument
from ..fused_ops import DOMAIN
from ._util import norm_axes, norm_axis, widen
from .registry import add, register


def _work_dtype(*arrays: Optional[np.ndarray]) -> np.dtype:
    """float64 when any input is float64, float32 otherwise (half types are widened)."""
    if any(a is not None and a.dtype == np.float64 for a in arrays):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _channel_param(op: str, name: str, p: np.ndarray, X: np.ndarray, dt: np.dtype,
                   per_activation: bool = False) -> np.ndarray:
    """A per-channel parameter (C,) shaped to broadcast against X (N, C, ...)."""
    C = X.shape[1]
    p = np.asarray(p)
    if per_activation or p.ndim > 1:
        if p.shape != X.shape[1:] and p.shape != (C,) + (1,) * (X.ndim - 2):
            raise InvalidArgument("%s: %s must have shape %s, got %s"
                                  % (op, name, X.shape[1:], p.shape))
        return p.astype(dt, copy=False).reshape((1,) + p.shape)
    if p.shape != (C,):
        raise InvalidArgument("%s: %s must have shape (%d,) (one value per channel), got %s"
                              % (op, name, C, p.shape))
    return p.astype(dt, copy=False).reshape((1, C) + (1,) * (X.ndim - 2))


def _check_rank(op: str, X: np.ndarray, rank: int) -> None:
    if X.ndim < rank:
        raise InvalidArgument("%s: input X must have rank >= %d, got shape %s"
                              % (op, rank, X.shape))


def _batch_norm_infer(op: str, X: np.ndarray, scale: np.ndarray, B: np.ndarray,
                      mean: np.ndarray, var: np.ndarray, epsilon: float,
                      per_activation: bool = False) -> np.ndarray:
    dt = _work_dtype(X, scale, B, mean, var)
    s = _channel_param(op, "scale", scale, X, dt, per_activation)
    b = _channel_param(op, "B", B, X, dt, per_activation)
    m = _channel_param(op, "input_mean", mean, X, dt, per_activation)
    v = _channel_param(op, "input_var", var, X, dt, per_activation)
    a = s / np.sqrt(v + dt.type(epsilon))
    y = X.astype(dt, copy=False) * a
    y += b - m * a
    return y.astype(X.dtype, copy=False)


def _batch_stats(X: np.ndarray, dt: np.dtype) -> Tuple[np.ndarray, np.ndarray]:
    axes = (0,) + tuple(range(2, X.ndim))
    x = X.astype(dt, copy=False)
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    return mean, var


def _batch_norm_train(op: str, X: np.ndarray, scale: np.ndarray, B: np.ndarray,
                      mean: np.ndarray, var: np.ndarray, epsilon: float,
                      momentum: float) -> Tuple[np.ndarray, ...]:
    dt = _work_dtype(X, scale, B, mean, var)
    bmean, bvar = _batch_stats(X, dt)
    y = _batch_norm_infer(op, X, scale, B, bmean, bvar, epsilon)
    mom = dt.type(momentum)
    run_mean = mean.astype(dt) * mom + bmean * (dt.type(1) - mom)
    run_var = var.astype(dt) * mom + bvar * (dt.type(1) - mom)
    return (y, run_mean.astype(mean.dtype, copy=False), run_var.astype(var.dtype, copy=False),
            bmean.astype(mean.dtype, copy=False), bvar.astype(var.dtype, copy=False))


def _check_bn_inputs(op: str, X: np.ndarray, *params: np.ndarray) -> None:
    _check_rank(op, X, 2)
    if any(p is None for p in params):
        raise InvalidArgument("%s: inputs scale, B, input_mean and input_var are all required" % op)


@register("BatchNormalization", since=1, until=13)
def batch_norm_v1(ctx: Any, X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                  var: np.ndarray, consumed_inputs: Optional[List[int]] = None,
                  epsilon: float = 1e-5, is_test: int = 0, momentum: float = 0.9,
                  spatial: int = 1) -> Any:
    """BatchNormalization (opsets 1-13): inference with the running statistics; when the node
    asks for the training outputs (mean, var, saved_mean, saved_var), batch statistics."""
    op = "BatchNormalization"
    _check_bn_inputs(op, X, scale, B, mean, var)
    per_act = ctx is not None and ctx.opset < 9 and not spatial
    n_out = ctx.num_outputs if ctx is not None else 1
    if n_out == 1 or is_test:
        y = _batch_norm_infer(op, X, scale, B, mean, var, epsilon, per_act)
        return y if n_out == 1 else (y,) + (None,) * (n_out - 1)
    return _batch_norm_train(op, X, scale, B, mean, var, epsilon, momentum)[:n_out]


@register("BatchNormalization", since=14)
def batch_norm(ctx: Any, X: np.ndarray, scale: np.ndarray, B: np.ndarray, input_mean: np.ndarray,
               input_var: np.ndarray, epsilon: float = 1e-5, momentum: float = 0.9,
               training_mode: int = 0) -> Any:
    """BatchNormalization (opsets 14+): Y, and in training mode the updated running mean/var."""
    op = "BatchNormalization"
    _check_bn_inputs(op, X, scale, B, input_mean, input_var)
    n_out = ctx.num_outputs if ctx is not None else 1
    if not training_mode:
        y = _batch_norm_infer(op, X, scale, B, input_mean, input_var, epsilon)
        return y if n_out == 1 else (y,) + (None,) * (n_out - 1)
    res = _batch_norm_train(op, X, scale, B, input_mean, input_var, epsilon, momentum)
    return res[0] if n_out == 1 else res[:n_out]


def _broadcast_param(op: str, name: str, p: Optional[np.ndarray], shape: Tuple[int, ...],
                     dt: np.dtype) -> Optional[np.ndarray]:
    """A Scale/B input that must broadcast to the normalized shape X.shape[axis:]."""
    if p is None:
        return None
    p = np.asarray(p)
    if p.ndim > len(shape) or any(a not in (1, b) for a, b in zip(p.shape[::-1], shape[::-1])):
        raise InvalidArgument("%s: %s of shape %s does not broadcast to the normalized shape %s"
                              % (op, name, p.shape, shape))
    return p.astype(dt, copy=False)


def _stash_dtype(op: str, X: np.ndarray, stash_type: int) -> np.dtype:
    if int(stash_type) not in (1, 11, 16, 10):
        raise InvalidArgument("%s: stash_type must be a float type code (1 = float32), got %r"
                              % (op, stash_type))
    return np.dtype(np.float64) if X.dtype == np.float64 or int(stash_type) == 11 \
        else np.dtype(np.float32)


@register("LayerNormalization", since=17)
def layer_norm(ctx: Any, X: np.ndarray, Scale: np.ndarray, B: Optional[np.ndarray] = None,
               axis: int = -1, epsilon: float = 1e-5, stash_type: int = 1) -> Any:
    """LayerNormalization: normalize over axes [axis, rank); optional Mean and InvStdDev outputs."""
    op = "LayerNormalization"
    _check_rank(op, X, 1)
    a = norm_axis(axis, X.ndim, op)
    dt = _stash_dtype(op, X, stash_type)
    axes = tuple(range(a, X.ndim))
    norm_shape = X.shape[a:]
    s = _broadcast_param(op, "Scale", Scale, norm_shape, dt)
    b = _broadcast_param(op, "B", B, norm_shape, dt)
    x = X.astype(dt, copy=False)
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = dt.type(1) / np.sqrt(var + dt.type(epsilon))
    d *= inv
    if s is not None:
        d *= s
    if b is not None:
        d += b
    y = d.astype(X.dtype, copy=False)
    n_out = ctx.num_outputs if ctx is not None else 1
    if n_out == 1:
        return y
    return (y, mean, inv)[:n_out]


@register("RMSNormalization", since=23)
def rms_norm(X: np.ndarray, scale: np.ndarray, axis: int = -1, epsilon: float = 1e-5,
             stash_type: int = 1) -> np.ndarray:
    """RMSNormalization: X / sqrt(mean(X^2) + epsilon) * scale over axes [axis, rank)."""
    op = "RMSNormalization"
    _check_rank(op, X, 1)
    a = norm_axis(axis, X.ndim, op)
    dt = _stash_dtype(op, X, stash_type)
    axes = tuple(range(a, X.ndim))
    s = _broadcast_param(op, "scale", scale, X.shape[a:], dt)
    x = X.astype(dt, copy=False)
    ms = np.mean(x * x, axis=axes, keepdims=True)
    y = x * (dt.type(1) / np.sqrt(ms + dt.type(epsilon)))
    if s is not None:
        y *= s
    return y.astype(X.dtype, copy=False)


def _normalize_groups(x: np.ndarray, axes: Tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over `axes`, in x's (float) dtype."""
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    d *= x.dtype.type(1) / np.sqrt(var + x.dtype.type(epsilon))
    return d


@register("InstanceNormalization", since=1)
def instance_norm(X: np.ndarray, scale: np.ndarray, B: np.ndarray,
                  consumed_inputs: Optional[List[int]] = None,
                  epsilon: float = 1e-5) -> np.ndarray:
    """InstanceNormalization: normalize each (n, c) over the spatial axes, then scale and shift."""
    op = "InstanceNormalization"
    _check_rank(op, X, 3)
    dt = _work_dtype(X, scale, B)
    y = _normalize_groups(X.astype(dt), tuple(range(2, X.ndim)), epsilon)
    y *= _channel_param(op, "scale", scale, X, dt)
    y += _channel_param(op, "B", B, X, dt)
    return y.astype(X.dtype, copy=False)


def _group_norm(op: str, X: np.ndarray, scale: np.ndarray, bias: np.ndarray, num_groups: int,
                epsilon: float, per_group: bool, dt: np.dtype) -> np.ndarray:
    _check_rank(op, X, 2)
    N, C = X.shape[:2]
    G = int(num_groups)
    if G < 1 or C % G:
        raise InvalidArgument("%s: num_groups (%d) must divide the channel count %d" % (op, G, C))
    want = G if per_group else C
    for name, p in (("scale", scale), ("bias", bias)):
        if np.asarray(p).shape != (want,):
            raise InvalidArgument("%s: %s must have shape (%d,), got %s"
                                  % (op, name, want, np.asarray(p).shape))
    x = X.astype(dt).reshape(N, G, -1)
    y = _normalize_groups(x, (2,), epsilon).reshape(X.shape)
    s = np.asarray(scale).astype(dt)
    b = np.asarray(bias).astype(dt)
    if per_group:
        s, b = np.repeat(s, C // G), np.repeat(b, C // G)
    shape = (1, C) + (1,) * (X.ndim - 2)
    y *= s.reshape(shape)
    y += b.reshape(shape)
    return y.astype(X.dtype, copy=False)


@register("GroupNormalization", since=18, until=20)
def group_norm_v18(X: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5,
                   num_groups: int = 1) -> np.ndarray:
    """GroupNormalization (opset 18): per-group statistics; scale, bias of shape (num_groups,)."""
    return _group_norm("GroupNormalization", X, scale, bias, num_groups, epsilon, True,
                       _work_dtype(X))


@register("GroupNormalization", since=21)
def group_norm(X: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5,
               num_groups: int = 1, stash_type: int = 1) -> np.ndarray:
    """GroupNormalization (opset 21+): per-group statistics, scale and bias per channel (C,)."""
    op = "GroupNormalization"
    return _group_norm(op, X, scale, bias, num_groups, epsilon, False,
                       _stash_dtype(op, X, stash_type))


@register("LRN", since=1)
def lrn(X: np.ndarray, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
        size: int = 0) -> np.ndarray:
    """LRN: x / (bias + alpha/size * sum of x^2 over `size` neighbouring channels)^beta."""
    op = "LRN"
    _check_rank(op, X, 3)
    size = int(size)
    if size < 1:
        raise InvalidArgument("%s: attribute size must be a positive integer, got %d" % (op, size))
    dt = _work_dtype(X)
    x = X.astype(dt, copy=False)
    sq = x * x
    C = X.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    acc = np.zeros_like(sq)
    for off in range(-lo, hi + 1):
        a, b = max(0, -off), min(C, C - off)
        if a < b:
            acc[:, a:b] += sq[:, a + off:b + off]
    acc *= dt.type(alpha / size)
    acc += dt.type(bias)
    y = x / acc ** dt.type(beta)
    return y.astype(X.dtype, copy=False)


@register("MeanVarianceNormalization", since=9)
def mean_variance_norm(X: np.ndarray, axes: Optional[List[int]] = None) -> np.ndarray:
    """MeanVarianceNormalization: (X - mean) / (std + 1e-9) over `axes` (default N, H, W)."""
    op = "MeanVarianceNormalization"
    ax = tuple(norm_axes(axes if axes is not None else [0, 2, 3], X.ndim, op))
    dt = _work_dtype(X)
    x = X.astype(dt, copy=False)
    mean = x.mean(axis=ax, keepdims=True)
    d = x - mean
    std = np.sqrt(np.mean(d * d, axis=ax, keepdims=True))
    d /= std + dt.type(1e-9)
    return d.astype(X.dtype, copy=False)


@register("LpNormalization", since=1)
def lp_norm(X: np.ndarray, axis: int = -1, p: int = 2) -> np.ndarray:
    """LpNormalization: divide by the L1 or L2 norm along `axis` (zero vectors stay zero)."""
    op = "LpNormalization"
    a = norm_axis(axis, X.ndim, op)
    if int(p) not in (1, 2):
        raise InvalidArgument("%s: p must be 1 or 2, got %r" % (op, p))
    dt = _work_dtype(X)
    x = X.astype(dt, copy=False)
    if int(p) == 1:
        n = np.abs(x).sum(axis=a, keepdims=True)
    else:
        n = np.sqrt((x * x).sum(axis=a, keepdims=True))
    safe = np.where(n == 0, dt.type(1), n)
    y = np.where(n == 0, dt.type(0), x / safe)
    return y.astype(X.dtype, copy=False)


# ---------------------------------------------------------------------------- softmax family

def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    if np.isfinite(m).all():   # x - m is then never inf - inf, and every row sums to >= 1
        e = np.subtract(x, m)
        np.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        return e
    with np.errstate(invalid="ignore"):   # a row of -inf gives NaN, as in onnxruntime, silently
        e = np.subtract(x, m)
        np.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.subtract(x, np.max(x, axis=axis, keepdims=True))
        d -= np.log(np.sum(np.exp(d), axis=axis, keepdims=True))
    return d


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    out = np.zeros(x.shape, dtype=x.dtype)
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    np.put_along_axis(out, idx, 1, axis=axis)
    return out


def _along_axis(op: str, fn: Callable[[np.ndarray, int], np.ndarray], x: np.ndarray, axis: int,
                coerce_2d: bool) -> np.ndarray:
    if x.ndim == 0:
        raise InvalidArgument("%s: input must have rank >= 1, got a scalar" % op)
    a = norm_axis(axis, x.ndim, op)
    if x.size == 0:
        return np.zeros(x.shape, dtype=x.dtype)
    xw = widen(x)
    if coerce_2d:
        rows = int(np.prod(x.shape[:a], dtype=np.int64))
        r = fn(xw.reshape(rows, -1), 1).reshape(x.shape)
    else:
        r = fn(xw, a)
    return r if r.dtype == x.dtype else r.astype(x.dtype)


def _softmax_kernels(op: str, fn: Callable[[np.ndarray, int], np.ndarray]) -> None:
    def per_axis(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return _along_axis(op, fn, x, axis, coerce_2d=False)

    def flattened(x: np.ndarray, axis: int = 1) -> np.ndarray:
        return _along_axis(op, fn, x, axis, coerce_2d=True)

    per_axis.__name__, flattened.__name__ = op, op + "_1"
    per_axis.__doc__ = "ONNX %s along `axis` (opset >= 13)." % op
    flattened.__doc__ = "ONNX %s, opsets 1-12: over the input flattened to 2-D at `axis`." % op
    add(op, flattened, since=1, until=12)
    add(op, per_axis, since=13)


_softmax_kernels("Softmax", _softmax)
_softmax_kernels("LogSoftmax", _log_softmax)
_softmax_kernels("Hardmax", _hardmax)


@register("LayerNormalization", domain=DOMAIN, since=1)
def layer_normalization(X: np.ndarray, Scale: np.ndarray, B: Optional[np.ndarray] = None,
                        axis: int = -1, epsilon: float = 1e-5) -> np.ndarray:
    """LayerNormalization for models below opset 17 (ai.onnx LayerNormalization-17 semantics).

    Y = (X - mean) / sqrt(var + epsilon) * Scale + B, mean and (biased) variance over the axes
    [axis, rank); Scale and B broadcast to X.shape[axis:]. One output (no Mean / InvStdDev).
    """
    return layer_norm(None, X, Scale, B, axis=axis, epsilon=epsilon)


@register("LayerNormalization", domain="", since=1, until=16)
def layer_normalization_contrib(ctx: Any, X: np.ndarray, Scale: np.ndarray,
                                B: Optional[np.ndarray] = None, axis: int = -1,
                                epsilon: float = 1e-5, stash_type: int = 1) -> Any:
    """LayerNormalization below opset 17, as onnxruntime registers it (ai.onnx
    LayerNormalization-17 semantics; optional Mean and InvStdDev outputs)."""
    return layer_norm(ctx, X, Scale, B, axis=axis, epsilon=epsilon, stash_type=stash_type)
