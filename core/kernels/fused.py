"""Kernels of the fused ops the optimizer makes, in the domain `com.onnxedge` (opset 1).

The contract (domain, op names, activations and their defaults, FusedConv's Z rule) is
`onnxedge.fused_ops`; each docstring here is the op's specification for providers that
implement the same ops elsewhere (WebGPU, NEON, wasm, the bridges). All compute in the input's
float type (float32 or float64; float16 is computed in float32 and rounded back).
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from .. import fused_ops
from ..errors import InvalidArgument
from ..fused_ops import DOMAIN, MS_DOMAIN, apply_activation
from ._util import widen
from .conv import conv
from .linalg import gemm, matmul
from .normalization import layer_norm
from .registry import register


def _activate(op: str, y: np.ndarray, activation: Any, params: Optional[List[float]]) -> np.ndarray:
    """y with the activation applied (in place on a private result)."""
    return apply_activation(activation, y, params, op)


@register("FusedConv", domain=MS_DOMAIN, since=1)
@register("FusedConv", domain=DOMAIN, since=1)
def fused_conv(X: np.ndarray, W: np.ndarray, B: Optional[np.ndarray] = None,
               Z: Optional[np.ndarray] = None, activation: str = "",
               activation_params: Optional[List[float]] = None,
               auto_pad: str = "NOTSET", dilations: Optional[List[int]] = None, group: int = 1,
               kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
               strides: Optional[List[int]] = None) -> np.ndarray:
    """FusedConv: activation(Conv(X, W, B) + Z).

    X, W, B and the attributes auto_pad, dilations, group, kernel_shape, pads, strides are ai.onnx
    Conv's; the optional Z is added to the convolution as ai.onnx Add would (numpy broadcasting;
    in practice Z has the output's shape: a residual shortcut). `activation` is one of "" (none),
    Relu, Tanh, Sigmoid, LeakyRelu (params [alpha]), Clip (params [min, max]) and HardSigmoid
    (params [alpha, beta]); defaults in `fused_ops.Activation`. The same kernel serves
    com.microsoft FusedConv (onnxruntime's contrib op, which asks Z to have the output's shape).
    """
    y = conv(X, W, B, auto_pad=auto_pad, dilations=dilations, group=group,
             kernel_shape=kernel_shape, pads=pads, strides=strides)
    if Z is not None:
        if Z.shape == y.shape and y.flags.writeable:
            y += Z.astype(y.dtype, copy=False)
        else:
            y = np.add(y, Z).astype(y.dtype, copy=False)
    return _activate("FusedConv", y, activation, activation_params)


@register("FusedGemm", domain=DOMAIN, since=1)
def fused_gemm(A: np.ndarray, B: np.ndarray, C: Optional[np.ndarray] = None, alpha: float = 1.0,
               beta: float = 1.0, transA: int = 0, transB: int = 0, activation: str = "",  # noqa: N803
               activation_params: Optional[List[float]] = None) -> np.ndarray:
    """FusedGemm: activation(alpha * op(A) @ op(B) + beta * C).

    Inputs and alpha, beta, transA, transB are ai.onnx Gemm's (opset 11+: C optional);
    activation and activation_params as in FusedConv.
    """
    y = gemm(A, B, C, alpha=alpha, beta=beta, transA=transA, transB=transB)
    return _activate("FusedGemm", y, activation, activation_params)


@register("FusedMatMul", domain=DOMAIN, since=1)
def fused_matmul(A: np.ndarray, B: np.ndarray, bias: Optional[np.ndarray] = None,
                 activation: str = "", activation_params: Optional[List[float]] = None
                 ) -> np.ndarray:
    """FusedMatMul: activation(MatMul(A, B) + bias).

    A and B are ai.onnx MatMul's inputs (numpy matmul semantics, any rank); `bias` (optional) is a
    1-D tensor of B's last dimension added to every row; activation and activation_params as in
    FusedConv.
    """
    if B.ndim == 2 and A.ndim > 2 and A.flags.c_contiguous and A.shape[-1] == B.shape[0]:
        y = matmul(A.reshape(-1, A.shape[-1]), B).reshape(A.shape[:-1] + (B.shape[1],))
    else:
        y = matmul(A, B)
    if bias is not None:
        if bias.ndim != 1 or bias.shape[0] != y.shape[-1]:
            raise InvalidArgument("FusedMatMul: bias must be 1-D of size %d (the output's last "
                                  "dimension), got shape %s" % (y.shape[-1], bias.shape))
        if not y.flags.writeable:
            y = y.copy()
        y += bias.astype(y.dtype, copy=False)
    return _activate("FusedMatMul", y, activation, activation_params)


@register("LayerNormalization", domain=DOMAIN, since=1)
def layer_normalization(X: np.ndarray, Scale: np.ndarray, B: Optional[np.ndarray] = None,
                        axis: int = -1, epsilon: float = 1e-5) -> np.ndarray:
    """LayerNormalization for models below opset 17 (ai.onnx LayerNormalization-17 semantics).

    Y = (X - mean) / sqrt(var + epsilon) * Scale + B, mean and (biased) variance over the axes
    [axis, rank); Scale and B broadcast to X.shape[axis:]. One output (no Mean / InvStdDev).
    """
    return layer_norm(None, X, Scale, B, axis=axis, epsilon=epsilon)


@register("Gelu", domain=DOMAIN, since=1)
def gelu(X: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gelu for models below opset 20 (ai.onnx Gelu-20 semantics).

    approximate="none": X * 0.5 * (1 + erf(X / sqrt 2)); "tanh":
    X * 0.5 * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3))).
    """
    r = fused_ops.gelu(widen(X), approximate)
    return r if r.dtype == X.dtype else r.astype(X.dtype)


@register("MultiHeadAttention", domain=DOMAIN, since=1)
def multi_head_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                         mask: Optional[np.ndarray] = None, num_heads: int = 1,
                         scale: float = 1.0, nan_to_zero: int = 0) -> np.ndarray:
    """MultiHeadAttention: scaled dot-product attention over `num_heads` heads.

    query [batch, q_seq, H * D], key and value [batch, kv_seq, H * D] (already projected; the
    first two dims are kept as they are, the rest split into H heads of size D), optional additive
    `mask` broadcastable to the scores [batch, H, q_seq, kv_seq] (a mask that would make the
    scores larger is an error). Per head: p = softmax(q @ k^T * scale + mask) over the last axis;
    with `nan_to_zero` = 1 (default 0) every NaN in p becomes 0 (a row whose scores are all -inf,
    or hold NaN or +inf: torch's exported scaled_dot_product_attention guards its softmax with
    Where(IsNaN(p), 0, p)); result p @ v, heads concatenated back to [batch, q_seq, H * D].
    nan_to_zero was added later (its default keeps earlier models' meaning): a provider kernel
    without it must refuse nodes that set it (WebGPU's claim does; NEON does not claim the op).
    """
    heads = int(num_heads)
    for what, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim < 2 or heads <= 0 or (x.size and x.size % (x.shape[0] * x.shape[1] * heads)):
            raise InvalidArgument("MultiHeadAttention: %s of shape %s cannot be split into %d "
                                  "heads after its first two dimensions" % (what, x.shape, heads))
    dtype = query.dtype
    q, k, v = widen(query), widen(key), widen(value)

    def split(x: np.ndarray) -> np.ndarray:
        return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)

    scores = np.matmul(split(q), split(k).transpose(0, 1, 3, 2))
    if scale != 1.0:
        scores *= scores.dtype.type(scale)
    if mask is not None:
        bias = widen(mask).astype(scores.dtype, copy=False)
        try:
            grown = np.broadcast(scores, bias).shape != scores.shape
        except ValueError:
            grown = True
        if grown:
            raise InvalidArgument("MultiHeadAttention: mask of shape %s does not broadcast to the "
                                  "scores [batch, heads, q_seq, kv_seq] = %s"
                                  % (mask.shape, scores.shape))
        scores += bias   # in place: a fresh array costs page faults on every run
    with np.errstate(invalid="ignore"):   # a row of -inf scores: NaN, as ai.onnx Softmax gives
        scores -= np.max(scores, axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= np.sum(scores, axis=-1, keepdims=True)
    if int(nan_to_zero):
        scores[np.isnan(scores)] = 0
    out = np.matmul(scores, split(v)).transpose(0, 2, 1, 3)
    out = out.reshape(out.shape[0], out.shape[1], -1)
    return out if out.dtype == dtype else out.astype(dtype)
