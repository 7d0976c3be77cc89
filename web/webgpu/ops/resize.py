"""Resize (opsets 10-19+) and Upsample (7-9): every mode (nearest with each nearest_mode,
linear, cubic, antialias, exclude_outside) and coordinate transformation, scales or sizes,
axes and keep_aspect_ratio_policy, any rank.

The host plans it: output shape, then per resized axis the source indices and weights of every
output row, computed by the CPU kernel's own helpers (`onnxedge.kernels.resize`), so ties and
clamping agree with it exactly. The device runs one separable pass per resized axis through
one template: a gather of the taps and their weighted sum (nearest: a copy of one tap).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge.kernels import resize as cpu

from ..runtime import GpuTensor, Recorder, Uniform, grid
from .table import F32, attr, register

_NEAREST_TYPES = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32)}
_MODES_V10 = ("nearest", "linear", "bilinear")


def _check_type(node: Any, facts: Any, mode: str) -> Optional[str]:
    dt = facts.dtype(node.inputs[0])
    if dt is None:
        return "input %r has an unknown element type" % node.inputs[0]
    if mode == "nearest":
        if dt not in _NEAREST_TYPES:
            return "input %r is %s; nearest Resize on WebGPU takes float32/int32/int64" % (
                node.inputs[0], dt)
    elif dt != F32:
        return "input %r is %s; %s Resize on WebGPU takes float32" % (node.inputs[0], dt, mode)
    return None


def _check_v10(node: Any, facts: Any) -> Optional[str]:
    """Upsample, and Resize before opset 11: nearest or linear."""
    mode = str(attr(node, "mode", "nearest"))
    why = _check_type(node, facts, mode)
    if why:
        return why
    if mode not in _MODES_V10:
        return "mode %r (expected nearest or linear)" % mode
    return None


def _check(node: Any, facts: Any) -> Optional[str]:
    """Resize from opset 11: nearest, linear or cubic, the CPU kernel's coordinate modes."""
    mode = str(attr(node, "mode", "nearest"))
    why = _check_type(node, facts, mode)
    if why:
        return why
    if mode not in ("nearest", "linear", "cubic"):
        return "mode %r (expected nearest, linear or cubic)" % mode
    ct = str(attr(node, "coordinate_transformation_mode", "half_pixel"))
    if ct not in cpu.CT_MODES:
        return "coordinate_transformation_mode %r" % ct
    nm = str(attr(node, "nearest_mode", "round_prefer_floor"))
    if nm not in cpu.NEAREST_MODES[:4]:
        return "nearest_mode %r" % nm
    policy = str(attr(node, "keep_aspect_ratio_policy", "stretch"))
    if policy not in ("stretch", "not_larger", "not_smaller"):
        return "keep_aspect_ratio_policy %r" % policy
    return None


def _floats(value: Any) -> Optional[List[float]]:
    if value is None:
        return None
    arr = np.asarray(value)
    return [float(v) for v in arr.reshape(-1)] if arr.size else None


def plan_shape(node: Any, shape: Sequence[int], scales: Optional[List[float]],
               sizes: Optional[List[int]], axes: List[int]) -> Tuple[List[int], List[float]]:
    """(output shape, per-axis scale) as the CPU kernel computes them."""
    rank = len(shape)
    if (scales is None) == (sizes is None):
        raise ValueError("Resize needs exactly one of scales and sizes (non-empty)")
    out, full = list(shape), [1.0] * rank
    if scales is not None:
        if len(scales) != len(axes) or any(not s > 0 for s in scales):
            raise ValueError("Resize scales %s: expected %d positive values" % (scales, len(axes)))
        for a, s in zip(axes, scales):
            s32 = np.float32(s)
            full[a] = float(s32)
            out[a] = int(np.floor(s32 * np.float32(shape[a])))
        return out, full
    if len(sizes) != len(axes) or any(s < 0 for s in sizes):
        raise ValueError("Resize sizes %s: expected %d non-negative values" % (sizes, len(axes)))
    policy = str(attr(node, "keep_aspect_ratio_policy", "stretch"))
    if policy == "stretch":
        for a, s in zip(axes, sizes):
            out[a] = s
            full[a] = s / shape[a] if shape[a] else 1.0
        return out, full
    ratios = [np.float32(s) / np.float32(shape[a]) if shape[a] else np.float32(1)
              for a, s in zip(axes, sizes)]
    q = min(ratios) if policy == "not_larger" else max(ratios)
    for a in axes:
        full[a] = float(q)
        out[a] = int(np.floor(q * np.float32(shape[a]) + np.float32(0.5)))
    return out, full


def axis_taps(p: Any, in_len: int, out_len: int, scale: float,
              roi: Optional[Tuple[float, float]]) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(indices int32 (out, taps), weights float32 (out, taps)) of one axis, or None when the
    CPU kernel leaves this axis as it is; outside rows (tf_crop_and_resize) get index -1."""
    src = cpu.axis_source(p, in_len, out_len, scale, roi)
    if src is None:
        return None
    x, outside = src
    if p.mode == "nearest":
        idx = cpu.nearest_index(x, p.nearest_mode, in_len, scale)[:, None]
        w = np.ones(idx.shape, np.float32)
    else:
        idx, w = cpu.interpolation_taps(x, in_len, scale, p.mode, p.cubic_a, p.antialias,
                                        p.exclude_outside)
    idx = np.array(idx, np.int32)
    if outside is not None:
        idx[outside, 0] = -1
    return idx, np.ascontiguousarray(w, np.float32)


def _params(node: Any, opset: int) -> Any:
    mode = str(attr(node, "mode", "nearest"))
    if node.op_type == "Upsample" or opset < 11:
        return cpu.ResizeParams("linear" if mode == "bilinear" else mode, "asymmetric", "simple",
                           -0.75, 0, 0.0, 0)
    return cpu.ResizeParams(mode, attr(node, "coordinate_transformation_mode", "half_pixel"),
                       attr(node, "nearest_mode", "round_prefer_floor"),
                       attr(node, "cubic_coeff_a", -0.75), attr(node, "exclude_outside", 0),
                       attr(node, "extrapolation_value", 0.0), attr(node, "antialias", 0))


def _axes_and_rois(node: Any, ins: List[Any], rank: int, p: Any
                   ) -> Tuple[List[int], List[Optional[Tuple[float, float]]]]:
    given = attr(node, "axes")
    axes = [a + rank if a < 0 else a for a in (given or range(rank))]
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise ValueError("Resize axes %s do not fit rank %d" % (given, rank))
    rois: List[Optional[Tuple[float, float]]] = [None] * rank
    if p.ct_mode == "tf_crop_and_resize":
        rv = _floats(ins[1] if len(ins) > 1 else None)
        if rv is None or len(rv) not in (2 * len(axes), 2 * rank):
            raise ValueError("tf_crop_and_resize needs roi with %d values, got %s"
                             % (2 * len(axes), rv))
        if len(rv) == 2 * len(axes):
            for i, a in enumerate(axes):
                rois[a] = (rv[i], rv[len(axes) + i])
        else:
            rois = [(rv[a], rv[rank + a]) for a in range(rank)]
    return axes, rois


def resize_pass(rt: Recorder, x: GpuTensor, axis: int, out_len: int, idx: np.ndarray,
                w: np.ndarray, nearest: bool, extrapolation: float) -> GpuTensor:
    """Record one separable pass: x resized along `axis` by the tap tables."""
    shape = list(x.shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    shape[axis] = out_len
    y = rt.new(shape, x.dtype)
    if y.size == 0:
        return y
    t = rt.wgsl_type(x.dtype)
    if nearest:
        # `_ = Wt[row]` keeps the weights bound (the "auto" layout drops unused bindings)
        body = "_ = Wt[row];\n  Y[i] = X[base + u32(I[row]) * u.inner];"
    else:
        body = ("var acc = 0.0;\n  for (var k = 0u; k < u.taps; k = k + 1u) {\n"
                "    acc = acc + Wt[row + k] * f32(X[base + u32(I[row + k]) * u.inner]);\n  }\n"
                "  Y[i] = %s(acc);" % t)
    p = rt.kernel("resize", T=t, BODY=body)
    taps = idx.shape[1]
    u = Uniform().u32(y.size, x.shape[axis], out_len, inner, taps).f32(extrapolation)
    rt.dispatch(p, [x, rt.gpu(idx), rt.gpu(w), y], u, grid(outer * out_len * inner, 256))
    return y


def _host_input(ins: List[Any], k: int) -> Any:
    return ins[k] if len(ins) > k and ins[k] is not None else None


@register(["Resize"], check=_check_v10, host_inputs=(1, 2, 3), until=10)
@register(["Resize"], check=_check, host_inputs=(1, 2, 3), since=11)
def run_resize(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Resize: plan the shape and per-axis taps on the host, one device pass per axis."""
    x = ins[0]
    rank = len(x.shape)
    p = _params(node, opset)
    if opset < 11:
        scales, sizes, axes = _floats(_host_input(ins, 1)), None, list(range(rank))
        rois: List[Optional[Tuple[float, float]]] = [None] * rank
    else:
        axes, rois = _axes_and_rois(node, ins, rank, p)
        scales = _floats(_host_input(ins, 2))
        sz = _host_input(ins, 3)
        sizes = [int(v) for v in np.asarray(sz).reshape(-1)] if sz is not None and \
            np.asarray(sz).size else None
        if scales is not None and sizes is None:
            p.from_scales = True
    return [_resize(rt, node, x, p, scales, sizes, axes, rois)]


@register(["Upsample"], check=_check_v10, host_inputs=(1,))
def run_upsample(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Upsample (7-9): Resize-10 with scales as an attribute (7-8) or an input (9)."""
    x = ins[0]
    rank = len(x.shape)
    scales = _floats(_host_input(ins, 1)) if opset >= 9 else \
        [float(s) for s in attr(node, "scales", [])]
    return [_resize(rt, node, x, _params(node, opset), scales, None, list(range(rank)),
                    [None] * rank)]


def _resize(rt: Recorder, node: Any, x: GpuTensor, p: Any, scales: Optional[List[float]],
            sizes: Optional[List[int]], axes: List[int],
            rois: List[Optional[Tuple[float, float]]]) -> GpuTensor:
    out_shape, full = plan_shape(node, x.shape, scales, sizes, axes)
    if list(out_shape) == list(x.shape):
        return x    # the CPU kernel copies the input when no size changes
    if x.size == 0:
        if int(np.prod(out_shape, dtype=np.int64)):
            return rt.gpu(np.zeros(out_shape, x.dtype))
        return rt.new(out_shape, x.dtype)
    y = x
    for axis in range(len(x.shape)):
        if out_shape[axis] == 0:
            return rt.new(out_shape, x.dtype)
        taps = axis_taps(p, x.shape[axis], out_shape[axis], full[axis], rois[axis])
        if taps is None:
            continue
        y = resize_pass(rt, y, axis, out_shape[axis], taps[0], taps[1], p.mode == "nearest",
                        p.extrapolation)
    return y


__all__ = ["plan_shape", "axis_taps", "resize_pass"]
