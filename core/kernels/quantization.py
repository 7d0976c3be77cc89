"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv.

Scales and zero points may be per tensor (a scalar or a 1-element tensor), per axis (1-D along
`axis`) or blocked (same rank as x, `block_size` elements of x per entry along `axis`). Integer
targets round half to even and saturate; float8 targets clamp to their largest finite value
unless saturate=0; 4-bit, 2-bit and float8/float4 types need the optional package ml_dtypes.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument
from .cast import cast_array
from .conv import conv_core, conv_setup
from .registry import register
from ._util import norm_axis

INT_RANGES = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767),
               21: (0, 15), 22: (-8, 7), 25: (0, 3), 26: (-2, 1)}
_FLOAT8 = {17, 18, 19, 20}
_FLOAT4 = {23}


def _expand(op: str, what: str, value: np.ndarray, shape: tuple, axis: int,
            block_size: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against x (per tensor, per axis or blocked)."""
    v = np.asarray(value)
    if v.size == 1 and (v.ndim <= 1 or not block_size):
        return v.reshape(())
    rank = len(shape)
    if rank == 0:
        raise InvalidArgument("%s: %s has shape %s but x is a scalar" % (op, what, v.shape))
    ax = norm_axis(axis, rank, op)
    if not block_size:
        if v.ndim != 1 or v.shape[0] != shape[ax]:
            raise InvalidArgument("%s: %s must be a scalar or 1-D of length %d (x.shape[%d]), got "
                                  "shape %s" % (op, what, shape[ax], ax, v.shape))
        dims = [1] * rank
        dims[ax] = shape[ax]
        return v.reshape(dims)
    if block_size < 0:
        raise InvalidArgument("%s: block_size must be positive, got %d" % (op, block_size))
    want = list(shape)
    want[ax] = -(-shape[ax] // block_size)
    if list(v.shape) != want:
        raise InvalidArgument("%s: with block_size %d along axis %d, %s must have shape %s, got %s"
                              % (op, block_size, ax, what, tuple(want), v.shape))
    return np.repeat(v, block_size, axis=ax).take(np.arange(shape[ax]), axis=ax)


def _float_of(a: np.ndarray) -> np.ndarray:
    """Narrow floats (float16, bfloat16, float8 ...) and ints as float32; float64 stays."""
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)


def quantize(x: np.ndarray, scale: np.ndarray, zero_point: Optional[np.ndarray], code: int,
             saturate: int = 1, precision: int = 0) -> np.ndarray:
    """x / scale (+ zero_point), rounded and saturated into ONNX element type `code`.
    `scale` and `zero_point` already broadcast against x."""
    if precision:
        pdt = dtypes.to_numpy(precision)
        q = x.astype(pdt) / scale.astype(pdt)
    else:
        dt = np.result_type(x.dtype, scale.dtype)
        if dt.kind == "V" or dt.kind != "f":
            dt = np.dtype(np.float32)
        q = x.astype(dt) / scale.astype(dt)
    q = _float_of(np.asarray(q))
    if code in INT_RANGES:
        lo, hi = INT_RANGES[code]
        out_dt = dtypes.to_numpy(code)
        with np.errstate(invalid="ignore"):
            qi = np.rint(q)
            if zero_point is not None:
                qi = qi + zero_point.astype(np.float64 if q.dtype == np.float64 else np.float32)
            return np.clip(qi, lo, hi).astype(np.int64).astype(out_dt)
    if code in _FLOAT8 or code in _FLOAT4:
        if zero_point is not None:
            q = q + _float_of(zero_point)
        return cast_array(q, code, saturate=saturate)
    raise InvalidArgument("QuantizeLinear: output type %s is not a quantized type (expected "
                          "int8, uint8, int16, uint16, int4, uint4, int2, uint2, float8 or float4)"
                          % dtypes.lookup(code).name)


@register("QuantizeLinear", since=10)
def quantize_linear(x: np.ndarray, y_scale: np.ndarray, y_zero_point: Optional[np.ndarray] = None,
                    axis: int = 1, saturate: int = 1, block_size: int = 0, output_dtype: int = 0,
                    precision: int = 0) -> np.ndarray:
    """QuantizeLinear-10..28: y = saturate(round(x / y_scale) + y_zero_point)."""
    op = "QuantizeLinear"
    code = int(output_dtype) or 0
    if y_zero_point is not None:
        try:
            zcode = dtypes.from_numpy(np.asarray(y_zero_point).dtype)
        except KeyError:
            raise InvalidArgument("%s: y_zero_point has dtype %s, which is no quantized type"
                                  % (op, np.asarray(y_zero_point).dtype)) from None
        if code and code != zcode:
            raise InvalidArgument("%s: output_dtype %s does not match y_zero_point's type %s"
                                  % (op, dtypes.lookup(code).name, dtypes.lookup(zcode).name))
        code = zcode
    code = code or dtypes.UINT8
    if code not in INT_RANGES and code not in _FLOAT8 and code not in _FLOAT4:
        raise InvalidArgument("%s: output type %s is not a quantized type" % (op, dtypes.lookup(code).name))
    x = np.asarray(x)
    s = _expand(op, "y_scale", y_scale, x.shape, axis, int(block_size))
    z = None if y_zero_point is None else _expand(op, "y_zero_point", y_zero_point, x.shape, axis,
                                                  int(block_size))
    return quantize(x, s, z, code, saturate, int(precision))


@register("DequantizeLinear", since=10)
def dequantize_linear(x: np.ndarray, x_scale: np.ndarray, x_zero_point: Optional[np.ndarray] = None,
                      axis: int = 1, block_size: int = 0, output_dtype: int = 0) -> np.ndarray:
    """DequantizeLinear-10..28: y = (x - x_zero_point) * x_scale, in x_scale's type (or output_dtype)."""
    op = "DequantizeLinear"
    x = np.asarray(x)
    x_scale = np.asarray(x_scale)
    s = _expand(op, "x_scale", x_scale, x.shape, axis, int(block_size))
    xf = _float_of(x) if x.dtype.kind in "fV" else x.astype(np.int32)
    if x_zero_point is not None:
        zp = np.asarray(x_zero_point)
        if x.dtype.kind in "iu" and zp.dtype != x.dtype:
            raise InvalidArgument("%s: x_zero_point has dtype %s but x has %s"
                                  % (op, zp.dtype, x.dtype))
        z = _expand(op, "x_zero_point", zp, x.shape, axis, int(block_size))
        xf = xf - (_float_of(z) if z.dtype.kind in "fV" else z.astype(np.int32))
    out_dt = dtypes.to_numpy(int(output_dtype)) if output_dtype else x_scale.dtype
    dt = np.float64 if x_scale.dtype == np.float64 else np.float32
    y = xf.astype(dt) * _float_of(s).astype(dt)
    return y.astype(out_dt)


@register("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(x: np.ndarray):
    """DynamicQuantizeLinear-11: uint8 y, its scale and zero point from x's range (widened to 0)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise InvalidArgument("DynamicQuantizeLinear: x must be float, got %s" % x.dtype)
    xf = x.astype(np.float32)
    hi = np.float32(max(0.0, float(xf.max()))) if xf.size else np.float32(0)
    lo = np.float32(min(0.0, float(xf.min()))) if xf.size else np.float32(0)
    scale = np.float32((hi - lo) if hi != lo else 1.0) / np.float32(255)
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)).astype(np.float32)
    y = np.clip(np.rint(xf / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.array(scale, dtype=x.dtype), np.array(zp, dtype=np.uint8)


def _qtype_code(op: str, ref: np.ndarray, what: str) -> int:
    code = dtypes.from_numpy(ref.dtype)
    if code not in (dtypes.INT8, dtypes.UINT8):
        raise InvalidArgument("%s: %s must be int8 or uint8, got %s" % (op, what, ref.dtype))
    return code


def _minus(op: str, v: np.ndarray, zp: Optional[np.ndarray], what: str) -> np.ndarray:
    out = np.asarray(v).astype(np.float64)
    if zp is not None:
        z = np.asarray(zp)
        if z.size != 1 and z.ndim > 2:
            raise InvalidArgument("%s: %s must be a scalar or 1-D, got shape %s" % (op, what, z.shape))
        out = out - z.astype(np.float64)
    return out


@register("QLinearMatMul", since=10)
def qlinear_matmul(a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray, b: np.ndarray,
                   b_scale: np.ndarray, b_zero_point: np.ndarray, y_scale: np.ndarray,
                   y_zero_point: np.ndarray) -> np.ndarray:
    """QLinearMatMul-10/21: quantized matmul with (per-tensor, per-row / per-column) scales."""
    op = "QLinearMatMul"
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise InvalidArgument("%s: a and b must have rank >= 1, got %s and %s" % (op, a.shape, b.shape))
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise InvalidArgument("%s: a's last dimension %d does not match b's rows %d (shapes %s, %s)"
                              % (op, ka, kb, a.shape, b.shape))
    code = _qtype_code(op, np.asarray(y_zero_point), "y_zero_point")
    av = _minus(op, a, a_zero_point, "a_zero_point")
    bv = _minus(op, b, b_zero_point, "b_zero_point")
    acc = np.matmul(av, bv)   # float64 sums of 8-bit products are exact
    sa = np.asarray(a_scale).astype(np.float32)
    sb = np.asarray(b_scale).astype(np.float32)
    sy = np.asarray(y_scale).astype(np.float32)
    mult = (sa * sb / sy).astype(np.float64)
    y = acc * mult + np.asarray(y_zero_point).astype(np.float64)
    lo, hi = INT_RANGES[code]
    return np.clip(np.rint(y), lo, hi).astype(dtypes.to_numpy(code))


@register("QLinearConv", since=10)
def qlinear_conv(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray, w: np.ndarray,
                 w_scale: np.ndarray, w_zero_point: np.ndarray, y_scale: np.ndarray,
                 y_zero_point: np.ndarray, B: Optional[np.ndarray] = None,
                 auto_pad: str = "NOTSET", dilations: Optional[List[int]] = None, group: int = 1,
                 kernel_shape: Optional[List[int]] = None, pads: Optional[List[int]] = None,
                 strides: Optional[List[int]] = None) -> np.ndarray:
    """QLinearConv-10: integer convolution, int32 bias, requantized by x_scale*w_scale/y_scale."""
    op = "QLinearConv"
    x, w = np.asarray(x), np.asarray(w)
    group = int(group)
    st, dl, begins, ends, out = conv_setup(op, x, w, None, group, kernel_shape, strides, dilations,
                                           pads, auto_pad)
    nd = x.ndim - 2
    m = w.shape[0]
    per_ch = (1, -1) + (1,) * nd

    def channel_vec(v: Optional[np.ndarray], what: str) -> np.ndarray:
        arr = np.zeros(()) if v is None else np.asarray(v).astype(np.float64)
        if arr.size == 1:
            return arr.reshape(())
        if arr.ndim != 1 or arr.shape[0] != m:
            raise InvalidArgument("%s: %s must be a scalar or have shape (%d,), got %s"
                                  % (op, what, m, arr.shape))
        return arr

    xz = np.asarray(x_zero_point).astype(np.float64)
    if xz.size != 1:
        raise InvalidArgument("%s: x_zero_point must be a scalar, got shape %s" % (op, xz.shape))
    wz = channel_vec(w_zero_point, "w_zero_point")
    xf = x.astype(np.float64) - xz.reshape(())
    wf = w.astype(np.float64) - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.ndim else wz)
    acc = conv_core(xf, wf, group, st, dl, begins, ends, out)
    if B is not None:
        bias = np.asarray(B)
        if bias.shape != (m,):
            raise InvalidArgument("%s: B must have shape (%d,), got %s" % (op, m, bias.shape))
        acc = acc + bias.astype(np.float64).reshape(per_ch)
    ws = channel_vec(w_scale, "w_scale").astype(np.float32)
    mult = (np.float32(np.asarray(x_scale).reshape(())) * ws
            / np.float32(np.asarray(y_scale).reshape(()))).astype(np.float64)
    y = acc * (mult.reshape(per_ch) if mult.ndim else mult)
    code = _qtype_code(op, np.asarray(y_zero_point), "y_zero_point")
    lo, hi = INT_RANGES[code]
    y = y + float(np.asarray(y_zero_point).reshape(()))
    return np.clip(np.rint(y), lo, hi).astype(dtypes.to_numpy(code))
