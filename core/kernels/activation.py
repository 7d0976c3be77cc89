"""Activation kernels (Relu family, Sigmoid family, Swish / SwiGLU, Gelu, Softplus, ...).

float32 stays float32 end to end (no float64 round trips) and temporaries are reused in place;
float16 / bfloat16 are computed in float32 and cast back. Softmax / LogSoftmax / Hardmax are in
`normalization` (as on every provider).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..errors import InvalidArgument
from ..fused_ops import DOMAIN, gelu as gelu_math
from ._util import widen
from .registry import register


def _run(fn: Callable[..., np.ndarray], x: np.ndarray, *args) -> np.ndarray:
    """`fn(x, *args)` on x widened to float32 when narrow; the result gets x's dtype."""
    if x.ndim == 0:   # numpy gives scalars for 0-d operands, and the helpers work in place
        return _run(fn, x.reshape(1), *args).reshape(())
    r = fn(widen(x), *args)
    if type(r) is not np.ndarray:
        r = np.asarray(r)
    return r if r.dtype == x.dtype else r.astype(x.dtype)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x < 0, x * alpha, x)


# `<op>_math`: the formula on a float array (in place where it can), shared with the
# com.microsoft fused ops (contrib_transformer.py); the kernels below wrap them for any dtype.
def elu_math(x: np.ndarray, alpha: float) -> np.ndarray:
    """ELU on a float array: x if x > 0 else alpha * (exp(x) - 1)."""
    neg = np.minimum(x, x.dtype.type(0))
    np.expm1(neg, out=neg)
    neg *= alpha
    return np.where(x > 0, x, neg)


def selu_math(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    """SELU on a float array: gamma * elu(x, alpha)."""
    r = elu_math(x, alpha)
    r *= gamma
    return r


def celu_math(x: np.ndarray, alpha: float) -> np.ndarray:
    """CELU on a float array: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise InvalidArgument("Celu: attribute alpha must not be 0")
    neg = np.minimum(x, x.dtype.type(0))
    neg *= 1.0 / alpha
    np.expm1(neg, out=neg)
    neg *= alpha
    return np.where(x > 0, x, neg)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + exp(-x)) is accurate everywhere. Capping -x just below exp's overflow changes only
    # results under ~1e-38 (float32) / 1e-307 (float64) and keeps numpy from warning.
    r = np.negative(x)
    np.minimum(r, 88.0 if x.dtype.itemsize <= 4 else 708.0, out=r)
    np.exp(r, out=r)
    r += 1
    return np.reciprocal(r, out=r)


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    r = x * alpha
    r += beta
    np.maximum(r, 0, out=r)
    return np.minimum(r, 1, out=r)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    r = _hard_sigmoid(x, 1.0 / 6.0, 0.5)
    r *= x
    return r


def softplus_math(x: np.ndarray) -> np.ndarray:
    """Softplus on a float array: log(1 + exp(x)) without overflow."""
    return np.logaddexp(x.dtype.type(0), x)


def _mish(x: np.ndarray) -> np.ndarray:
    r = np.tanh(softplus_math(x))
    r *= x
    return r


def softsign_math(x: np.ndarray) -> np.ndarray:
    """Softsign on a float array: x / (1 + |x|)."""
    d = np.abs(x)
    d += 1
    return np.divide(x, d, out=d)


def thresholded_relu_math(x: np.ndarray, alpha: float) -> np.ndarray:
    """ThresholdedRelu on a float array: x if x > alpha else 0."""
    return np.where(x > alpha, x, x.dtype.type(0))


_gelu = gelu_math   # the one Gelu formula (fused_ops.gelu), shared with com.onnxedge Gelu


_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


@register("Relu", since=6)
def relu(x: np.ndarray) -> np.ndarray:
    """ONNX Relu: max(x, 0) (opset >= 14 also takes signed integers)."""
    return _run(_relu, x)


@register("LeakyRelu", since=6)
def leaky_relu(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    """ONNX LeakyRelu: x where x >= 0, alpha * x elsewhere."""
    return _run(_leaky_relu, x, alpha)


@register("Elu", since=6)
def elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """ONNX Elu: x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    return _run(elu_math, x, alpha)


@register("Selu", since=6)
def selu(x: np.ndarray, alpha: float = _SELU_ALPHA, gamma: float = _SELU_GAMMA) -> np.ndarray:
    """ONNX Selu: gamma * (x where x > 0, alpha * (exp(x) - 1) elsewhere)."""
    return _run(selu_math, x, alpha, gamma)


@register("Celu", since=12)
def celu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """ONNX Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return _run(celu_math, x, alpha)


@register("Sigmoid", since=6)
def sigmoid(x: np.ndarray) -> np.ndarray:
    """ONNX Sigmoid: 1 / (1 + exp(-x))."""
    return _run(_sigmoid, x)


@register("HardSigmoid", since=6)
def hard_sigmoid(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    """ONNX HardSigmoid: max(0, min(1, alpha * x + beta))."""
    return _run(_hard_sigmoid, x, alpha, beta)


@register("HardSwish", since=14)
def hard_swish(x: np.ndarray) -> np.ndarray:
    """ONNX HardSwish: x * max(0, min(1, x / 6 + 0.5))."""
    return _run(_hard_swish, x)


@register("Tanh", since=6)
def tanh(x: np.ndarray) -> np.ndarray:
    """ONNX Tanh."""
    return _run(np.tanh, x)


@register("Softplus", since=1)
def softplus(x: np.ndarray) -> np.ndarray:
    """ONNX Softplus: log(1 + exp(x)), without overflow."""
    return _run(softplus_math, x)


@register("Softsign", since=1)
def softsign(x: np.ndarray) -> np.ndarray:
    """ONNX Softsign: x / (1 + |x|)."""
    return _run(softsign_math, x)


@register("Mish", since=18)
def mish(x: np.ndarray) -> np.ndarray:
    """ONNX Mish: x * tanh(softplus(x))."""
    return _run(_mish, x)


@register("ThresholdedRelu", since=10)
def thresholded_relu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """ONNX ThresholdedRelu: x where x > alpha, 0 elsewhere."""
    return _run(thresholded_relu_math, x, alpha)


@register("Gelu", since=20)
def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """ONNX Gelu: x * Phi(x) exactly (approximate='none', through erf) or by the tanh formula."""
    return _run(_gelu, x, approximate)


def _swish(x: np.ndarray, alpha: float) -> np.ndarray:
    r = _sigmoid(x * alpha)
    r *= x
    return r


def _swiglu(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    r = _swish(a, alpha)
    r *= b
    return r


@register("Swish", since=24)
def swish(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """ONNX Swish: x * sigmoid(alpha * x)."""
    return _run(_swish, x, alpha)


@register("SwiGLU", since=28)
def swiglu(a: np.ndarray, b: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """ONNX SwiGLU: Swish(A) * B for a gate A and a value B of the same shape."""
    if a.shape != b.shape:
        raise InvalidArgument("SwiGLU: inputs A and B must have the same shape (no broadcasting), "
                              "got %s and %s" % (tuple(a.shape), tuple(b.shape)))
    return _run(_swiglu, a, widen(b), alpha)


# Opset 1 forms: the same ops plus the obsolete `consumed_inputs` attribute (Selu had other
# default constants then).

@register("Relu", since=1, until=5)
def relu_1(x: np.ndarray, consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX Relu, opset 1."""
    return relu(x)


@register("LeakyRelu", since=1, until=5)
def leaky_relu_1(x: np.ndarray, alpha: float = 0.01,
                 consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX LeakyRelu, opset 1."""
    return leaky_relu(x, alpha)


@register("Elu", since=1, until=5)
def elu_1(x: np.ndarray, alpha: float = 1.0, consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX Elu, opset 1."""
    return elu(x, alpha)


@register("Selu", since=1, until=5)
def selu_1(x: np.ndarray, alpha: float = 1.6732, gamma: float = 1.0507,
           consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX Selu, opset 1."""
    return selu(x, alpha, gamma)


@register("Sigmoid", since=1, until=5)
def sigmoid_1(x: np.ndarray, consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX Sigmoid, opset 1."""
    return sigmoid(x)


@register("HardSigmoid", since=1, until=5)
def hard_sigmoid_1(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5,
                   consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX HardSigmoid, opset 1."""
    return hard_sigmoid(x, alpha, beta)


@register("Tanh", since=1, until=5)
def tanh_1(x: np.ndarray, consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX Tanh, opset 1."""
    return tanh(x)


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    try:
        s = np.broadcast_to(slope, x.shape) if slope.shape != x.shape else slope
    except ValueError:
        # Opsets < 7 also accept a per-channel slope of shape [C] for an input [N, C, ...].
        if slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1]:
            s = slope.reshape((-1,) + (1,) * (x.ndim - 2))
        else:
            raise InvalidArgument("PRelu: slope of shape %s does not broadcast to input shape %s"
                                  % (tuple(slope.shape), tuple(x.shape))) from None
    r = np.where(x < 0, x * s, x)
    return r if r.dtype == x.dtype else r.astype(x.dtype)


@register("PRelu", since=6)
def prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """ONNX PRelu: x where x >= 0, slope * x elsewhere (slope broadcasts to x)."""
    if x.dtype.kind == "V":
        return _prelu(widen(x), widen(slope)).astype(x.dtype)
    return _prelu(x, slope)


@register("PRelu", since=1, until=5)
def prelu_1(x: np.ndarray, slope: np.ndarray, consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX PRelu, opset 1."""
    return prelu(x, slope)


@register("Shrink", since=9)
def shrink(x: np.ndarray, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    """ONNX Shrink: x + bias below -lambd, x - bias above lambd, 0 between."""
    xw = widen(x)
    r = np.where(xw < -lambd, xw + bias, np.where(xw > lambd, xw - bias, xw.dtype.type(0)))
    return r if r.dtype == x.dtype else r.astype(x.dtype)


@register("Gelu", domain=DOMAIN, since=1)
def fused_gelu(X: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gelu for models below opset 20 (ai.onnx Gelu-20 semantics).

    approximate="none": X * 0.5 * (1 + erf(X / sqrt 2)); "tanh":
    X * 0.5 * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3))).
    """
    r = gelu_math(widen(X), approximate)
    return r if r.dtype == X.dtype else r.astype(X.dtype)
