"""Translates a claimed subgraph into a Core ML ML Program with coremltools' MIL builder.

Each ONNX node becomes one or a few MIL ops (`mb.conv`, `mb.linear`, `mb.batch_norm`, ...);
initializers become MIL constants; the subgraph's inputs become the program's inputs (known dims
static, symbolic or unknown dims a bounded range `RangeDim(1, max_flexible_dim)`). The program goes
through `ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=...)` (coremltools'
default MIL passes) and is saved as a `.mlpackage`, whose files make the Artifact.
"""
from __future__ import annotations

import collections
import os
import re
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from onnxedge import dtypes, ir
from onnxedge.errors import EPFail, NotImplemented, OnnxEdgeError

from ..bridge import Artifact
from .support import FUSED, TARGETS

PACKAGE = "model.mlpackage"
SPEC_PATH = PACKAGE + "/Data/com.apple.CoreML/model.mlmodel"
WEIGHTS_DIR = PACKAGE + "/Data/com.apple.CoreML/"


def coremltools() -> Any:
    """The coremltools module, quietly imported (its Linux import logs missing native parts and
    untested versions of other packages)."""
    import logging
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    import coremltools as ct
    return ct


class quiet_progress:
    """Context manager: coremltools' progress bars (written to sys.stderr) are kept out of the
    output unless onnxedge's logger is at DEBUG (`-v`, log_severity_level 0)."""

    def __enter__(self) -> "quiet_progress":
        import io
        import logging
        self.saved = sys.stderr
        if not logging.getLogger("onnxedge").isEnabledFor(logging.DEBUG):
            sys.stderr = io.StringIO()
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.stderr = self.saved


def _ct_target(ct: Any, name: str) -> Any:
    return getattr(ct.target, "iOS%d" % TARGETS[name])


def _name(value: Any) -> str:
    return str(value)


class _Names:
    """Valid, unique MIL names for ONNX value names."""

    def __init__(self) -> None:
        self.used: Dict[str, str] = {}
        self.taken: set = set()

    def __call__(self, onnx_name: str, suffix: str = "") -> str:
        key = onnx_name + "\0" + suffix
        if key in self.used:
            return self.used[key]
        base = re.sub(r"[^A-Za-z0-9_]", "_", onnx_name + suffix) or "v"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "v_" + base
        name, k = base, 1
        while name in self.taken:
            name, k = "%s_%d" % (base, k), k + 1
        self.taken.add(name)
        self.used[key] = name
        return name


class _Emitter:
    """Emits the MIL ops of one ONNX node; `env` maps ONNX names to MIL vars or numpy constants."""

    def __init__(self, mb: Any, graph: ir.Graph, opsets: Dict[str, int], level: int,
                 names: _Names):
        self.mb = mb
        self.graph = graph
        self.opsets = opsets
        self.level = level
        self.names = names
        self.env: Dict[str, Any] = {}
        fed = {v.name for v in graph.inputs}
        for k, v in graph.initializers.items():
            if k not in fed and isinstance(v, np.ndarray):
                self.env[k] = v

    def get(self, name: str) -> Any:
        return self.env[name] if name else None

    def const(self, name: str) -> Optional[np.ndarray]:
        v = self.env.get(name) if name else None
        return v if isinstance(v, np.ndarray) else None

    def shape(self, value: Any) -> Tuple[Any, ...]:
        return tuple(value.shape)

    def emit(self, node: ir.Node) -> None:
        fn = _OPS.get((node.domain, node.op_type))
        if fn is None:
            raise NotImplemented("Core ML translator: no translation for %s" % node.describe())
        out = node.outputs[0]
        counter = [0]

        def nm(last: bool = False) -> str:
            if last:
                return self.names(out)
            counter[0] += 1
            return self.names(out, "_%d" % counter[0])

        self.env[out] = fn(self, node, dict(node.attributes), nm)


def _act(e: _Emitter, y: Any, node: ir.Node, nm: Callable[..., str]) -> Any:
    mb = e.mb
    act = _name(node.attributes.get("activation", ""))
    p = [float(v) for v in node.attributes.get("activation_params") or []]
    if not act:
        return y
    if act == "Relu":
        return mb.relu(x=y, name=nm(True))
    if act == "Tanh":
        return mb.tanh(x=y, name=nm(True))
    if act == "Sigmoid":
        return mb.sigmoid(x=y, name=nm(True))
    if act == "LeakyRelu":
        return mb.leaky_relu(x=y, alpha=p[0] if p else 0.01, name=nm(True))
    if act == "Clip":
        return mb.clip(x=y, alpha=p[0], beta=p[1], name=nm(True))
    if act == "HardSigmoid":
        return mb.sigmoid_hard(x=y, alpha=p[0] if p else 0.2, beta=p[1] if len(p) > 1 else 0.5,
                               name=nm(True))
    if act in ("Gelu", "GeluTanh"):
        return mb.gelu(x=y, mode="EXACT" if act == "Gelu" else "TANH_APPROXIMATION", name=nm(True))
    if act == "Silu":   # x * sigmoid(x)
        return mb.mul(x=y, y=mb.sigmoid(x=y, name=nm()), name=nm(True))
    if act == "HardSwish":   # x * hardsigmoid(x, 1/6, 1/2)
        return mb.mul(x=y, y=mb.sigmoid_hard(x=y, alpha=1.0 / 6, beta=0.5, name=nm()), name=nm(True))
    raise NotImplemented("Core ML translator: fused activation %r of %s" % (act, node.describe()))


def _last(node: ir.Node) -> bool:
    """True when a fused node has no activation (its main op is the node's last)."""
    return not _name(node.attributes.get("activation", "")) and not (
        node.op_type == "FusedConv" and len(node.inputs) > 3 and node.inputs[3])


def _pads(a: Dict[str, Any], rank: int) -> Tuple[str, List[int]]:
    auto = _name(a.get("auto_pad", "NOTSET"))
    if auto == "VALID":
        return "valid", [0] * (2 * rank)
    if auto == "SAME_UPPER":
        return "same", [0] * (2 * rank)
    p = [int(v) for v in a.get("pads") or [0] * (2 * rank)]
    return "custom", [v for i in range(rank) for v in (p[i], p[i + rank])]


def _conv_args(e: _Emitter, node: ir.Node, a: Dict[str, Any], name: str) -> Dict[str, Any]:
    """MIL conv / conv_transpose keyword arguments of an ONNX Conv-like node."""
    x, w = e.get(node.inputs[0]), e.get(node.inputs[1])
    sp = len(e.shape(w)) - 2
    pad_type, pad = _pads(a, sp)
    kw = dict(x=x, weight=w, strides=[int(v) for v in a.get("strides") or [1] * sp],
              dilations=[int(v) for v in a.get("dilations") or [1] * sp], pad_type=pad_type,
              groups=int(a.get("group", 1)), name=name)
    if pad_type == "custom":
        kw["pad"] = pad
    if len(node.inputs) > 2 and node.inputs[2]:
        kw["bias"] = e.get(node.inputs[2])
    return kw


def _conv(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    y = e.mb.conv(**_conv_args(e, node, a, nm(_last(node))))
    if len(node.inputs) > 3 and node.inputs[3]:
        y = e.mb.add(x=y, y=e.get(node.inputs[3]),
                     name=nm(not _name(a.get("activation", ""))))
    return _act(e, y, node, nm) if node.domain == FUSED else y


def _conv_transpose(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    return e.mb.conv_transpose(**_conv_args(e, node, a, nm(True)))


def _gemm(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    mb = e.mb
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    x, bw = e.get(node.inputs[0]), e.get(node.inputs[1])
    c = e.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    last = _last(node) if node.domain == FUSED else True
    if isinstance(bw, np.ndarray):
        weight = (bw if tb else bw.T) * bw.dtype.type(alpha)
        n = weight.shape[0]
        bias = None
        if c is None:
            bias = np.zeros(n, weight.dtype)
        elif isinstance(c, np.ndarray) and (c.size == 1 or c.size == n and c.shape[-1] == n):
            bias = np.broadcast_to(c.reshape(-1) * c.dtype.type(beta), (n,)).astype(weight.dtype)
        if ta:
            x = mb.transpose(x=x, perm=[1, 0], name=nm())
        y = mb.linear(x=x, weight=np.ascontiguousarray(weight),
                      bias=bias if bias is not None else np.zeros(n, weight.dtype),
                      name=nm(last and bias is not None))
        if bias is None:
            y = mb.add(x=y, y=_scaled(mb, c, beta, nm), name=nm(last))
    else:
        y = mb.matmul(x=x, y=bw, transpose_x=bool(ta), transpose_y=bool(tb),
                      name=nm(last and alpha == 1.0 and c is None))
        if alpha != 1.0:
            y = mb.mul(x=y, y=np.float32(alpha), name=nm(last and c is None))
        if c is not None:
            y = mb.add(x=y, y=_scaled(mb, c, beta, nm), name=nm(last))
    return _act(e, y, node, nm) if node.domain == FUSED else y


def _scaled(mb: Any, c: Any, beta: float, nm: Callable[..., str]) -> Any:
    if beta == 1.0:
        return c
    if isinstance(c, np.ndarray):
        return c * c.dtype.type(beta)
    return mb.mul(x=c, y=np.float32(beta), name=nm())


def _matmul(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    mb = e.mb
    x, w = e.get(node.inputs[0]), e.get(node.inputs[1])
    bias = e.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    last = _last(node) if node.domain == FUSED else True
    if isinstance(w, np.ndarray) and w.ndim == 2 and not isinstance(x, np.ndarray) and \
            (bias is None or isinstance(bias, np.ndarray)):
        b = bias if bias is not None else np.zeros(w.shape[1], w.dtype)
        y = mb.linear(x=x, weight=np.ascontiguousarray(w.T), bias=b, name=nm(last))
    else:
        y = mb.matmul(x=x, y=w, name=nm(last and bias is None))
        if bias is not None:
            y = mb.add(x=y, y=bias, name=nm(last))
    return _act(e, y, node, nm) if node.domain == FUSED else y


_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "real_div", "Pow": "pow"}
_NP_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
              "Pow": np.power}
_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Sqrt": "sqrt",
          "Exp": "exp", "Abs": "abs", "Identity": "identity", "Dropout": "identity"}


def _binary(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x, y = e.get(node.inputs[0]), e.get(node.inputs[1])
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return _NP_BINARY[node.op_type](x, y).astype(x.dtype)
    return getattr(e.mb, _BINARY[node.op_type])(x=x, y=y, name=nm(True))


def _unary(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    return getattr(e.mb, _UNARY[node.op_type])(x=e.get(node.inputs[0]), name=nm(True))


def _leaky(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    return e.mb.leaky_relu(x=e.get(node.inputs[0]), alpha=float(a.get("alpha", 0.01)),
                           name=nm(True))


def _clip(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    if e.opsets.get("", 0) < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo = e.const(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        hi = e.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    lo = None if lo is None else float(np.asarray(lo).reshape(-1)[0])
    hi = None if hi is None else float(np.asarray(hi).reshape(-1)[0])
    mb = e.mb
    if lo is not None and hi is not None and lo < hi:
        return mb.clip(x=x, alpha=lo, beta=hi, name=nm(True))
    if lo is not None and hi is not None:      # min >= max: ONNX gives max everywhere
        return mb.minimum(x=mb.maximum(x=x, y=np.float32(lo), name=nm()), y=np.float32(hi),
                          name=nm(True))
    if lo is not None:
        return mb.maximum(x=x, y=np.float32(lo), name=nm(True))
    if hi is not None:
        return mb.minimum(x=x, y=np.float32(hi), name=nm(True))
    return mb.identity(x=x, name=nm(True))


def _gelu(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    mode = "TANH_APPROXIMATION" if _name(a.get("approximate", "none")) == "tanh" else "EXACT"
    return e.mb.gelu(x=e.get(node.inputs[0]), mode=mode, name=nm(True))


def _softmax(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    default = -1 if e.opsets.get("", 0) >= 13 else 1
    return e.mb.softmax(x=e.get(node.inputs[0]), axis=int(a.get("axis", default)), name=nm(True))


def _batch_norm(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    s, b, m, v = (e.const(n) for n in node.inputs[1:5])
    return e.mb.batch_norm(x=e.get(node.inputs[0]), mean=m, variance=v, gamma=s, beta=b,
                           epsilon=float(a.get("epsilon", 1e-5)), name=nm(True))


def _layer_norm(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    shape = e.shape(x)
    axis = int(a.get("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    norm = tuple(int(d) for d in shape[axis:])
    scale = e.const(node.inputs[1])
    bias = e.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    gamma = np.ascontiguousarray(np.broadcast_to(scale, norm))
    beta = np.ascontiguousarray(np.broadcast_to(bias, norm)) if bias is not None else \
        np.zeros(norm, scale.dtype)
    return e.mb.layer_norm(x=x, axes=list(range(axis, len(shape))), gamma=gamma, beta=beta,
                           epsilon=float(a.get("epsilon", 1e-5)), name=nm(True))


def _pool(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    k = [int(v) for v in a["kernel_shape"]]
    pad_type, pad = _pads(a, len(k))
    kw = dict(x=e.get(node.inputs[0]), kernel_sizes=k, pad_type=pad_type,
              strides=[int(v) for v in a.get("strides") or [1] * len(k)],
              ceil_mode=bool(int(a.get("ceil_mode", 0))), name=nm(True))
    if pad_type == "custom":
        kw["pad"] = pad
    if node.op_type == "MaxPool":
        return e.mb.max_pool(**kw)
    return e.mb.avg_pool(exclude_padding_from_average=not int(a.get("count_include_pad", 0)), **kw)


def _global_pool(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    return e.mb.reduce_mean(x=x, axes=list(range(2, len(e.shape(x)))), keep_dims=True,
                            name=nm(True))


def _reshape(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    target = [int(v) for v in e.const(node.inputs[1]).reshape(-1)]
    shape = e.shape(x)
    for i, d in enumerate(target):
        if d == 0:
            target[i] = shape[i] if isinstance(shape[i], int) else -1
    if target.count(-1) > 1:
        raise NotImplemented("Core ML translator: %s reshapes %s to %s with more than one "
                             "dynamic dim" % (node.describe(), shape, target))
    return e.mb.reshape(x=x, shape=np.array(target, np.int32), name=nm(True))


def _flatten(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    shape = e.shape(x)
    axis = int(a.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    head, tail = shape[:axis], shape[axis:]
    if all(isinstance(d, int) for d in tail):
        target = [-1, int(np.prod(tail, dtype=np.int64))]
    else:
        target = [int(np.prod(head, dtype=np.int64)), -1]
    return e.mb.reshape(x=x, shape=np.array(target, np.int32), name=nm(True))


def _transpose(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    perm = a.get("perm") or list(range(len(e.shape(x))))[::-1]
    return e.mb.transpose(x=x, perm=[int(p) for p in perm], name=nm(True))


def _concat(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    values = [e.get(n) for n in node.inputs if n]
    return e.mb.concat(values=values, axis=int(a["axis"]), name=nm(True))


def _axes(e: _Emitter, node: ir.Node, a: Dict[str, Any], since: int) -> Optional[List[int]]:
    if e.opsets.get("", 0) >= since:
        c = e.const(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        return None if c is None else [int(v) for v in c.reshape(-1)]
    return None if a.get("axes") is None else [int(v) for v in a["axes"]]


def _squeeze(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    axes = _axes(e, node, a, 13)
    if node.op_type == "Unsqueeze":
        return e.mb.expand_dims(x=x, axes=axes, name=nm(True))
    if axes is None:
        axes = [i for i, d in enumerate(e.shape(x)) if d == 1]
    return e.mb.squeeze(x=x, axes=axes, name=nm(True))


def _reduce_mean(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    axes = _axes(e, node, a, 18)
    if not axes:
        if int(a.get("noop_with_empty_axes", 0)):
            return e.mb.identity(x=x, name=nm(True))
        axes = list(range(len(e.shape(x))))
    return e.mb.reduce_mean(x=x, axes=axes, keep_dims=bool(int(a.get("keepdims", 1))),
                            name=nm(True))


def _qparams(e: _Emitter, node: ir.Node, rank: int) -> Tuple[np.ndarray, np.ndarray, int]:
    scale = e.const(node.inputs[1]).astype(np.float32)
    zp = e.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if zp is None:
        zp = np.zeros(scale.shape, np.uint8)
    if scale.size == 1:          # a 1-element scale is per-tensor (as onnxruntime reads it)
        scale, zp = scale.reshape(()), zp.reshape(())
    axis = int(node.attributes.get("axis", 1)) if scale.ndim == 1 else 0
    return scale, zp, axis + rank if axis < 0 else axis


def _quantize(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    scale, zp, axis = _qparams(e, node, len(e.shape(x)))
    kw = dict(input=x, scale=scale, zero_point=zp, output_dtype=zp.dtype.name, name=nm(True))
    if scale.ndim == 1:
        kw["axis"] = axis
    return e.mb.quantize(**kw)


def _dequantize(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    x = e.get(node.inputs[0])
    rank = len(e.shape(x))
    scale, zp, axis = _qparams(e, node, rank)
    if isinstance(x, np.ndarray):
        if e.level >= 16 and x.dtype in (np.int8, np.uint8) and zp.dtype == x.dtype:
            return e.mb.constexpr_affine_dequantize(quantized_data=x, zero_point=zp, scale=scale,
                                                    axis=axis, name=nm(True))
        shape = [1] * rank
        if scale.ndim == 1:
            shape[axis] = -1
        return ((x.astype(np.float64) - zp.astype(np.float64).reshape(shape or ()))
                * scale.astype(np.float64).reshape(shape or ())).astype(np.float32)
    kw = dict(input=x, scale=scale, zero_point=zp, name=nm(True))
    if scale.ndim == 1:
        kw["axis"] = axis
    return e.mb.dequantize(**kw)


def _attention(e: _Emitter, node: ir.Node, a: Dict[str, Any], nm: Callable[..., str]) -> Any:
    """com.onnxedge MultiHeadAttention as reshape / transpose / matmul / softmax."""
    mb = e.mb
    heads = int(a.get("num_heads", 1))

    def split(name: str, perm: List[int]) -> Any:
        x = e.get(name)
        b, s, hd = e.shape(x)
        target = [b if isinstance(b, int) else -1, s if isinstance(s, int) else -1,
                  heads, hd // heads]
        x = mb.reshape(x=x, shape=np.array(target, np.int32), name=nm())
        return mb.transpose(x=x, perm=perm, name=nm())

    q = split(node.inputs[0], [0, 2, 1, 3])          # B, H, Sq, D
    k = split(node.inputs[1], [0, 2, 3, 1])          # B, H, D, Skv
    v = split(node.inputs[2], [0, 2, 1, 3])          # B, H, Skv, D
    scores = mb.matmul(x=q, y=k, name=nm())
    scale = float(a.get("scale", 1.0))
    if scale != 1.0:
        scores = mb.mul(x=scores, y=np.float32(scale), name=nm())
    if len(node.inputs) > 3 and node.inputs[3]:
        scores = mb.add(x=scores, y=e.get(node.inputs[3]), name=nm())
    probs = mb.softmax(x=scores, axis=-1, name=nm())
    out = mb.transpose(x=mb.matmul(x=probs, y=v, name=nm()), perm=[0, 2, 1, 3], name=nm())
    b, s, hd = e.shape(e.get(node.inputs[0]))
    target = [b if isinstance(b, int) else -1, s if isinstance(s, int) else -1, hd]
    return mb.reshape(x=out, shape=np.array(target, np.int32), name=nm(True))


_OPS: Dict[tuple, Callable[..., Any]] = {
    ("", "Conv"): _conv, (FUSED, "FusedConv"): _conv, ("", "ConvTranspose"): _conv_transpose,
    ("", "Gemm"): _gemm,
    (FUSED, "FusedGemm"): _gemm, ("", "MatMul"): _matmul, (FUSED, "FusedMatMul"): _matmul,
    ("", "LeakyRelu"): _leaky, ("", "Clip"): _clip, ("", "Gelu"): _gelu, (FUSED, "Gelu"): _gelu,
    ("", "Softmax"): _softmax, ("", "BatchNormalization"): _batch_norm,
    ("", "LayerNormalization"): _layer_norm, (FUSED, "LayerNormalization"): _layer_norm,
    ("", "MaxPool"): _pool, ("", "AveragePool"): _pool, ("", "GlobalAveragePool"): _global_pool,
    ("", "Reshape"): _reshape, ("", "Flatten"): _flatten, ("", "Transpose"): _transpose,
    ("", "Concat"): _concat, ("", "Squeeze"): _squeeze, ("", "Unsqueeze"): _squeeze,
    ("", "ReduceMean"): _reduce_mean, ("", "QuantizeLinear"): _quantize,
    ("", "DequantizeLinear"): _dequantize, (FUSED, "MultiHeadAttention"): _attention,
}
for _op in _BINARY:
    _OPS[("", _op)] = _binary
for _op in _UNARY:
    _OPS[("", _op)] = _unary

_INPUT_TYPES = (dtypes.FLOAT, dtypes.FLOAT16)


def _input_spec(mb: Any, vi: ir.ValueInfo, symbols: Dict[str, Any]) -> Tuple[Any, bool]:
    from coremltools.converters.mil.mil import get_new_symbol, types
    t = vi.type
    if t is None or t.kind != "tensor" or t.shape is None or t.elem_type not in _INPUT_TYPES:
        raise NotImplemented("Core ML translator: subgraph input %r has type %s; expected a "
                             "float32/float16 tensor of known rank" % (vi.name, t))
    dims, flexible = [], False
    for d in t.shape:
        if isinstance(d, int) and d >= 0:
            dims.append(d)
        else:
            flexible = True
            key = d if isinstance(d, str) and d else None
            if key is None:
                dims.append(get_new_symbol())
            else:
                dims.append(symbols.setdefault(key, get_new_symbol()))
    dtype = types.fp16 if t.elem_type == dtypes.FLOAT16 else types.fp32
    return mb.TensorSpec(shape=tuple(dims), dtype=dtype), flexible


def _describe(sub: ir.Graph) -> str:
    return "[%s] (inputs %s)" % (", ".join(n.describe() for n in sub.nodes[:6]) +
                                 (", ..." if len(sub.nodes) > 6 else ""),
                                 [v.name for v in sub.inputs])


def translate(sub: ir.Graph, opsets: Dict[str, int], deployment_target: str = "iOS15",
              compute_precision: str = "float32", max_flexible_dim: int = 4096,
              key: str = "") -> Artifact:
    """The `.mlpackage` Artifact of a self-contained subgraph (bridge.subgraph's result)."""
    ct = coremltools()
    from coremltools.converters.mil import Builder as mb
    level = TARGETS[deployment_target]
    names = _Names()
    symbols: Dict[str, Any] = {}
    specs, flexible = [], []
    for vi in sub.inputs:
        spec, flex = _input_spec(mb, vi, symbols)
        specs.append(spec)
        flexible.append(flex)
    in_names = [names(vi.name) for vi in sub.inputs]
    out_names = [names(vi.name) for vi in sub.outputs]

    def body(*args: Any) -> Any:
        e = _Emitter(mb, sub, opsets, level, names)
        for vi, var in zip(sub.inputs, args):
            e.env[vi.name] = var
        for node in sub.nodes:
            e.emit(node)
        outs = []
        for vi in sub.outputs:
            v = e.env[vi.name]
            if isinstance(v, np.ndarray) or v.name != names(vi.name):
                v = mb.identity(x=v, name=names(vi.name, "_out"))
                out_names[len(outs)] = v.name
            outs.append(v)
        return tuple(outs)

    from coremltools.converters.mil.mil import Function, Program
    target = _ct_target(ct, deployment_target)
    try:
        with Function(dict(zip(in_names, specs)), target) as func:
            func.set_outputs(list(body(*[func.inputs[n] for n in in_names])))
    except OnnxEdgeError:
        raise
    except Exception as e:     # coremltools' own checks (type inference, op constraints)
        raise EPFail("Core ML translator: the MIL builder refused the subgraph %s: %s: %s"
                     % (_describe(sub), type(e).__name__, e)) from e
    prog = Program()
    prog.add_function("main", func)
    inputs = None
    if any(flexible):
        inputs = []
        for n, spec in zip(in_names, specs):
            shape = tuple(d if isinstance(d, int) else ct.RangeDim(1, max_flexible_dim, 1)
                          for d in spec.sym_shape)
            inputs.append(ct.TensorType(name=n, shape=shape))
    precision = ct.precision.FLOAT16 if compute_precision == "float16" else ct.precision.FLOAT32
    try:
        with quiet_progress():
            model = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=target,
                               compute_precision=precision, inputs=inputs)
    except Exception as e:
        raise EPFail("Core ML translator: ct.convert refused the ML Program of %s: %s: %s"
                     % (_describe(sub), type(e).__name__, e)) from e
    with tempfile.TemporaryDirectory() as tmp:
        model.save(os.path.join(tmp, PACKAGE))
        files = {}
        for root, dirs, fnames in os.walk(tmp):
            if not dirs and not fnames:   # the manifest lists it (weights/): keep it in the files
                fnames = [".keep"]
                open(os.path.join(root, ".keep"), "wb").close()
            for f in fnames:
                path = os.path.join(root, f)
                with open(path, "rb") as fh:
                    files[os.path.relpath(path, tmp).replace(os.sep, "/")] = fh.read()
    spec = model.get_spec()
    main = spec.mlProgram.functions["main"]
    block = main.block_specializations[main.opset]
    mil_ops = collections.Counter(op.type for op in block.operations)
    meta = {"deployment_target": deployment_target, "compute_precision": compute_precision,
            "mil_inputs": dict(zip([v.name for v in sub.inputs], in_names)),
            "mil_outputs": dict(zip([v.name for v in sub.outputs], out_names)),
            "onnx_ops": [("%s.%s" % (n.domain, n.op_type)) if n.domain else n.op_type
                         for n in sub.nodes],
            "mil_ops": dict(sorted(mil_ops.items())),
            "flexible_inputs": [v.name for v, f in zip(sub.inputs, flexible) if f],
            "sizes": {k: len(v) for k, v in sorted(files.items())}}
    return Artifact(key, "coreml", [v.name for v in sub.inputs], [v.name for v in sub.outputs],
                    files, meta)


__all__ = ["PACKAGE", "SPEC_PATH", "coremltools", "translate"]
