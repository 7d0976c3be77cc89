"""The fused-op contract: the `com.onnxedge` domain, its op names and the epilogue activations.

The optimizer writes these ops (core/optimizer/passes/*fusion*.py), the CPU kernels run them
(core/kernels/fused.py) and every provider claims them against this one module: NEON and the
wasm kernels (through the C epilogue codes of edge/kernels/oxk.h, `OXK_ACT_*`, which a test
checks against `Activation`), WebGPU, NNAPI and Core ML.

FusedConv / FusedGemm / FusedMatMul carry `activation` (a name below, "" for none) and
`activation_params` (floats; missing trailing ones take the defaults below). The result is
`activation(main op + extra input)`:

* FusedConv(X, W, B, Z): Conv(X, W, B) + Z, where the optional Z is added as ai.onnx Add adds
  (multidirectional broadcasting; the optimizer's residual fusion writes a Z with the
  convolution's shape, a ResNet shortcut). com.microsoft FusedConv (onnxruntime's contrib op)
  is served by the same kernel: the same inputs, attributes and rule.
* FusedGemm(A, B, C): ai.onnx Gemm (alpha, beta, transA, transB; C optional).
* FusedMatMul(A, B, bias): ai.onnx MatMul, plus an optional 1-D bias of B's last dimension.

Clip's defaults are -inf / +inf (no bound), as ai.onnx Clip's missing min / max; a device that
cannot hold an infinity (WGSL uniforms) substitutes the largest finite float itself.
"""
from __future__ import annotations

import enum
import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .errors import InvalidArgument
from .numeric import erf

DOMAIN = "com.onnxedge"
MS_DOMAIN = "com.microsoft"   # onnxruntime's contrib domain (its FusedConv has our semantics)

FUSED_CONV = "FusedConv"
FUSED_GEMM = "FusedGemm"
FUSED_MATMUL = "FusedMatMul"
GELU = "Gelu"
LAYER_NORMALIZATION = "LayerNormalization"
MULTI_HEAD_ATTENTION = "MultiHeadAttention"
# The ops with an epilogue activation, and the plain op each one extends.
FUSED_BASE = {FUSED_CONV: "Conv", FUSED_GEMM: "Gemm", FUSED_MATMUL: "MatMul"}
OPS = (FUSED_CONV, FUSED_GEMM, FUSED_MATMUL, GELU, LAYER_NORMALIZATION, MULTI_HEAD_ATTENTION)

INF = float("inf")


class Activation(enum.Enum):
    """An elementwise function of the C engine: (attribute name, oxk.h OXK_ACT_* code or None,
    default params).

    The activations are what a fused op's `activation` attribute may name (FUSABLE) and the C
    kernels apply as GEMM / convolution epilogues. The unary math functions (MATH: Exp, Log, ...)
    share the codes so the engine runs those ops with the same kernel (oxk.h OXK_OP_ACT), but no
    fusion writes them as an epilogue. Gelu is the erf form, GeluTanh the tanh form
    (approximate="tanh"), Silu x * sigmoid(x), HardSwish x * HardSigmoid(x, 1/6, 1/2).
    """

    NONE = ("", 0, ())
    RELU = ("Relu", 1, ())
    CLIP = ("Clip", 2, (-INF, INF))
    SIGMOID = ("Sigmoid", 3, ())
    GELU_TANH = ("GeluTanh", 4, ())
    LEAKY_RELU = ("LeakyRelu", 5, (0.01,))
    TANH = ("Tanh", 6, ())
    EXP = ("Exp", 7, ())
    LOG = ("Log", 8, ())
    SQRT = ("Sqrt", 9, ())
    ABS = ("Abs", 10, ())
    NEG = ("Neg", 11, ())
    RECIPROCAL = ("Reciprocal", 12, ())
    ERF = ("Erf", 13, ())
    HARD_SIGMOID = ("HardSigmoid", 14, (0.2, 0.5))
    HARD_SWISH = ("HardSwish", 15, ())
    ELU = ("Elu", 16, (1.0,))
    SOFTPLUS = ("Softplus", 17, ())
    GELU = ("Gelu", 18, ())
    SILU = ("Silu", 19, ())

    @property
    def op(self) -> str:
        """The `activation` attribute value ("" for none)."""
        return self.value[0]

    @property
    def code(self) -> Optional[int]:
        """The C epilogue code (oxk.h OXK_ACT_*), None when the C kernels lack it."""
        return self.value[1]

    @property
    def defaults(self) -> Tuple[float, ...]:
        """Default activation_params."""
        return self.value[2]


_BY_NAME = {a.op: a for a in Activation}
# The unary math functions: engine ops (Exp, Log, ...), not epilogues a fusion writes.
MATH = tuple(a.op for a in (Activation.EXP, Activation.LOG, Activation.SQRT, Activation.ABS,
                            Activation.NEG, Activation.RECIPROCAL, Activation.ERF))
# What the `activation` attribute may name (the optimizer's activation fusion writes these).
FUSABLE = tuple(a.op for a in Activation if a.op not in MATH)
# What the `activation` attribute may name and the C epilogue has (NEON, wasm): "" included.
C_EPILOGUE = tuple(a.op for a in Activation if a.code is not None and a.op in FUSABLE)
# Every C epilogue code by name (GeluTanh included: the C library's callers may ask for it).
C_CODES = {a.op: a.code for a in Activation if a.code is not None}


def _text(value: Any) -> str:
    return str(value)   # attributes are str already (see ir.py); no bytes to decode


def activation_name(node: Any) -> str:
    """A fused node's `activation` attribute as str ("" when absent)."""
    return _text(node.attributes.get("activation", "") or "")


def lookup(name: Any) -> Optional[Activation]:
    """The Activation with this attribute name, None when there is none."""
    return _BY_NAME.get(_text(name))


def params(name: Any, given: Optional[Sequence[float]] = None, count: int = 2) -> List[float]:
    """`count` parameters of an activation: `given` first, then its defaults, then 0.0."""
    act = lookup(name)
    out = [float(v) for v in (given or [])]
    if act is not None:
        out += list(act.defaults[len(out):])
    out += [0.0] * max(0, count - len(out))
    return out[:count]


def epilogue_params(name: Any, given: Optional[Sequence[float]] = None) -> Tuple[float, float]:
    """The two parameters a C epilogue (oxk.h) takes: the activation's own (defaults filled),
    0.0 in the slots it has none for."""
    act = lookup(name)
    own = len(act.defaults) if act is not None else 0
    p = params(name, given, 2)
    return (p[0] if own > 0 else 0.0, p[1] if own > 1 else 0.0)


def node_activation(node: Any, count: int = 2) -> Tuple[str, List[float]]:
    """(activation name, `count` params with defaults filled) of a fused node."""
    name = activation_name(node)
    return name, params(name, node.attributes.get("activation_params"), count)


def apply_activation(name: Any, y: np.ndarray, act_params: Optional[Sequence[float]] = None,
                     op: str = "FusedConv") -> np.ndarray:
    """`y` with the epilogue activation `name` applied, in place when y is writeable (its
    dtype kept); `op` names the node kind in errors."""
    name = _text(name)
    if not name:
        return y
    if not y.flags.writeable:
        y = y.copy()
    t = y.dtype.type
    if name == "Relu":
        np.maximum(y, t(0), out=y)
        return y
    if name == "Tanh":
        np.tanh(y, out=y)
        return y
    if name == "Sigmoid":
        with np.errstate(over="ignore"):   # exp(-y) overflows to inf for very negative y: 1/inf
            np.negative(y, out=y)
            np.exp(y, out=y)
            y += t(1)
            np.reciprocal(y, out=y)
        return y
    p = params(name, act_params)
    if name == "LeakyRelu":
        np.copyto(y, y * t(p[0]), where=y < 0)
    elif name == "Clip":
        np.clip(y, t(p[0]), t(p[1]), out=y)
    elif name == "HardSigmoid":
        y *= t(p[0])
        y += t(p[1])
        np.clip(y, t(0), t(1), out=y)
    elif name == "HardSwish":
        y *= np.clip(y * t(1.0 / 6.0) + t(0.5), t(0), t(1))
    elif name == "Elu":
        with np.errstate(over="ignore", invalid="ignore"):
            np.copyto(y, t(p[0]) * np.expm1(y), where=y <= 0)
    elif name == "Softplus":
        with np.errstate(over="ignore"):
            np.copyto(y, np.maximum(y, t(0)) + np.log1p(np.exp(-np.abs(y))))
    elif name == "Silu":
        with np.errstate(over="ignore", invalid="ignore"):
            y *= t(1) / (t(1) + np.exp(-y))
    elif name in ("Gelu", "GeluTanh"):
        np.copyto(y, gelu(y, "none" if name == "Gelu" else "tanh"))
    else:
        raise InvalidArgument("%s: activation must be one of %s, got %r"
                              % (op, ", ".join(a for a in FUSABLE if a), name))
    return y


def gelu(x: np.ndarray, approximate: Any = "none") -> np.ndarray:
    """Gelu of a float array (a new array): approximate "none" is x/2 (1 + erf(x / sqrt 2)),
    "tanh" is x/2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    mode = _text(approximate)
    if mode == "none":
        r = erf(x * (1.0 / math.sqrt(2.0)))
    elif mode == "tanh":
        r = x * x
        r *= 0.044715
        r += 1
        r *= x
        r *= math.sqrt(2.0 / math.pi)
        np.tanh(r, out=r)
    else:
        raise InvalidArgument("Gelu: attribute approximate must be 'none' or 'tanh', got %r"
                              % (approximate,))
    r += 1
    r *= x
    r *= 0.5
    return r


__all__ = ["DOMAIN", "MS_DOMAIN", "FUSED_CONV", "FUSED_GEMM", "FUSED_MATMUL", "GELU",
           "LAYER_NORMALIZATION", "MULTI_HEAD_ATTENTION", "FUSED_BASE", "OPS", "Activation",
           "FUSABLE", "MATH", "C_EPILOGUE", "C_CODES", "activation_name", "lookup", "params", "epilogue_params", "node_activation",
           "apply_activation", "gelu"]
