"""BatchNormalization (inference), LayerNormalization (ai.onnx and com.onnxedge),
InstanceNormalization, Softmax and LogSoftmax (opset < 13 flattening and >= 13 single axis).
Rows shorter than WG_MIN_ROW run one per thread; longer ones one per workgroup with a tree."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ..runtime import Recorder, Uniform, grid
from .matmul import FUSED_DOMAIN
from .table import F32, attr, float_inputs, register

_NORM_BODY = """
  var mean = 0.0;
  for (var j = 0u; j < u.D; j = j + 1u) { mean = mean + f32(X[base + j * u.inner]); }
  mean = mean / f32(u.D);
  var var_ = 0.0;
  for (var j = 0u; j < u.D; j = j + 1u) {
    let d = f32(X[base + j * u.inner]) - mean;
    var_ = var_ + d * d;
  }
  let inv = 1.0 / sqrt(var_ / f32(u.D) + u.eps);
  for (var j = 0u; j < u.D; j = j + 1u) {
    let k = base + j * u.inner;
    Y[k] = {{T}}((f32(X[k]) - mean) * inv * f32(S[%(s)s]) %(b)s);
  }"""
_SOFTMAX_BODY = """
  var mx = -3.4028234e38;
  for (var j = 0u; j < u.D; j = j + 1u) { mx = max(mx, f32(X[base + j * u.inner])); }
  var sum = 0.0;
  for (var j = 0u; j < u.D; j = j + 1u) { sum = sum + exp(f32(X[base + j * u.inner]) - mx); }
  for (var j = 0u; j < u.D; j = j + 1u) {
    let k = base + j * u.inner;
    Y[k] = {{T}}(%s);
  }"""

# the same bodies for normalization_rows_wg.wgsl: one workgroup per row, strided loops, tree reductions
_NORM_BODY_WG = """
  var part_sum = 0.0;
  for (var j = lid; j < u.D; j = j + WG) { part_sum = part_sum + f32(X[base + j * u.inner]); }
  let mean = tree_sum(part_sum, lid) / f32(u.D);
  var part_sq = 0.0;
  for (var j = lid; j < u.D; j = j + WG) {
    let d = f32(X[base + j * u.inner]) - mean;
    part_sq = part_sq + d * d;
  }
  let inv = 1.0 / sqrt(tree_sum(part_sq, lid) / f32(u.D) + u.eps);
  for (var j = lid; j < u.D; j = j + WG) {
    let k = base + j * u.inner;
    Y[k] = {{T}}((f32(X[k]) - mean) * inv * f32(S[%(s)s]) %(b)s);
  }"""
_SOFTMAX_BODY_WG = """
  var part_mx = -3.4028234e38;
  for (var j = lid; j < u.D; j = j + WG) { part_mx = max(part_mx, f32(X[base + j * u.inner])); }
  let mx = tree_max(part_mx, lid);
  var part_sum = 0.0;
  for (var j = lid; j < u.D; j = j + WG) {
    part_sum = part_sum + exp(f32(X[base + j * u.inner]) - mx);
  }
  let sum = tree_sum(part_sum, lid);
  for (var j = lid; j < u.D; j = j + WG) {
    let k = base + j * u.inner;
    Y[k] = {{T}}(%s);
  }"""
# row lengths from which one workgroup (256 threads and a tree) serves each row
WG_MIN_ROW = 128


def _rownorm(rt: Recorder, x: Any, extra: List[Any], body: Tuple[str, str], rows: int, D: int,
             inner: int,
             C: int = 1, eps: float = 0.0, ssize: int = 0, bsize: int = 0) -> Any:
    """Record a row-wise op; body = (per-thread-row body, workgroup-per-row body)."""
    y = rt.new(x.shape, F32)
    if y.size == 0:
        return y
    t = rt.wgsl_type(F32)
    names = ["S", "Bb"][:len(extra)]
    decl = "\n".join("@group(0) @binding(%d) var<storage, read> %s: array<%s>;" % (k + 1, n, t)
                     for k, n in enumerate(names))
    n = 1 + len(extra)
    wide = D >= WG_MIN_ROW
    p = rt.kernel("normalization_rows_wg" if wide else "normalization_rows", T=t, EXTRA_DECL=decl, OUT_BINDING=n,
                  U_BINDING=n + 1, BODY=(body[1] if wide else body[0]).replace("{{T}}", t))
    u = Uniform().u32(rows, D, inner, C).f32(eps).u32(ssize, bsize, 0)
    rt.dispatch(p, [x] + extra + [y], u, grid(rows, 1) if wide else grid(rows, 64))
    return y


def _check_ln(node: Any, facts: Any) -> Optional[str]:
    if any(o for o in node.outputs[1:]):
        return "LayerNormalization's Mean / InvStdDev outputs are not produced on WebGPU"
    return float_inputs(node, facts, [0, 1, 2])


def _layer_norm(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    rank = len(x.shape)
    axis = int(attr(node, "axis", -1))
    axis = axis + rank if axis < 0 else axis
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    D = int(np.prod(x.shape[axis:], dtype=np.int64))
    for t in (scale, bias):
        if t is not None and t.size not in (1, D):
            raise ValueError("scale/bias of shape %s do not cover the normalized shape %s"
                             % (list(t.shape), list(x.shape[axis:])))
    s_idx = "j" if scale.size == D else "0u"
    b_term = "" if bias is None else "+ f32(Bb[%s])" % ("j" if bias.size == D else "0u")
    body = (_NORM_BODY % {"s": s_idx, "b": b_term}, _NORM_BODY_WG % {"s": s_idx, "b": b_term})
    extra = [scale] + ([bias] if bias is not None else [])
    return [_rownorm(rt, x, extra, body, rows, D, 1, eps=float(attr(node, "epsilon", 1e-5)))]


register(["LayerNormalization"], check=_check_ln)(_layer_norm)
register(["LayerNormalization"], check=_check_ln, domain=FUSED_DOMAIN)(_layer_norm)


@register(["InstanceNormalization"], check=lambda n, f: float_inputs(n, f, [0, 1, 2]))
def run_instance_norm(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """InstanceNormalization: per (n, c) over the spatial axes."""
    x = ins[0]
    N, C = x.shape[0], x.shape[1]
    D = int(np.prod(x.shape[2:], dtype=np.int64))
    sb = {"s": "r % u.C", "b": "+ f32(Bb[r % u.C])"}
    body = (_NORM_BODY % sb, _NORM_BODY_WG % sb)
    return [_rownorm(rt, x, [ins[1], ins[2]], body, N * C, D, 1, C,
                     float(attr(node, "epsilon", 1e-5)))]


def softmax_rows(rt: Recorder, x: Any, rows: int, D: int, inner: int, log: bool = False,
                 zero_empty_rows: bool = False) -> Any:
    """Record Softmax (LogSoftmax when log) over rows of D elements at stride inner;
    `zero_empty_rows` gives 0 for rows whose every element is -inf (where 0/0 would be NaN)."""
    expr = "f32(X[k]) - mx - log(sum)" if log else "exp(f32(X[k]) - mx) / sum"
    if zero_empty_rows:
        expr = "select(%s, 0.0, sum == 0.0)" % expr
    return _rownorm(rt, x, [], (_SOFTMAX_BODY % expr, _SOFTMAX_BODY_WG % expr), rows, D, inner)


def _check_softmax(node: Any, facts: Any) -> Optional[str]:
    return float_inputs(node, facts, [0])


@register(["Softmax", "LogSoftmax"], check=_check_softmax)
def run_softmax(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Softmax / LogSoftmax along an axis (opset < 13: over the flattened axes from axis on)."""
    x = ins[0]
    rank = len(x.shape)
    axis = int(attr(node, "axis", -1 if opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    if rank == 0:
        raise ValueError("Softmax of a scalar")
    if opset >= 13:
        D, inner = x.shape[axis], int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    else:
        D, inner = int(np.prod(x.shape[axis:], dtype=np.int64)), 1
    rows = x.size // max(D, 1)
    return [softmax_rows(rt, x, rows, D, inner, node.op_type == "LogSoftmax")]


def _check_bn(node: Any, facts: Any) -> Optional[str]:
    if len([o for o in node.outputs if o]) > 1:
        return "BatchNormalization in training mode (running statistics outputs)"
    if attr(node, "training_mode", 0):
        return "BatchNormalization training_mode=1"
    return float_inputs(node, facts, [0, 1, 2, 3, 4])


@register(["BatchNormalization"], check=_check_bn)
def run_batchnorm(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """BatchNormalization with running statistics (inference)."""
    x = ins[0]
    y = rt.new(x.shape, F32)
    if y.size == 0:
        return [y]
    C = x.shape[1] if len(x.shape) > 1 else 1
    inner = int(np.prod(x.shape[2:], dtype=np.int64))
    p = rt.kernel("normalization_batch", T=rt.wgsl_type(F32))
    u = Uniform().u32(y.size, C, inner).f32(float(attr(node, "epsilon", 1e-5)))
    rt.dispatch(p, [x, ins[1], ins[2], ins[3], ins[4], y], u, grid(y.size, 256))
    return [y]
