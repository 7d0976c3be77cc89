"""onnxruntime's quantized contrib ops (domain com.microsoft, opset 1), with its CPU semantics.

Integer matmuls accumulate exactly (float64 sums of 8-bit products); requantization and the
float paths run in float32 as onnxruntime's MLAS does, rounding half to even and saturating:
MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm, GatherBlockQuantized (MatMulNBits is in
`matmul`), QLinearAdd/Mul/Concat/Sigmoid/LeakyRelu/Softmax,
QLinearAveragePool, QLinearGlobalAveragePool and com.microsoft QuantizeLinear/DequantizeLinear.
The lookup-table ops (Sigmoid, LeakyRelu, Concat) dequantize every code of the input type, apply
the float function and quantize back, as onnxruntime's tables do; QLinearSoftmax reproduces its
float32 exp table.
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, Optional

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument
from ._util import norm_axis
from .matmul import unpack_bits
from .pool import average_pool
from .quantization import INT_RANGES, dequantize_linear, dynamic_quantize_linear, quantize_linear
from .registry import register

MS = "com.microsoft"
_F32 = np.float32


def _scalar(op: str, value: Any, what: str) -> np.float32:
    """A per-tensor scale as a float32 scalar; InvalidArgument unless it has one element."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise InvalidArgument("%s: %s must be a scalar (or 1-element tensor), got shape %s"
                              % (op, what, arr.shape))
    return _F32(arr.reshape(()))


def _zp_value(op: str, value: Optional[np.ndarray], what: str) -> int:
    """A per-tensor zero point as an int (0 when absent)."""
    if value is None:
        return 0
    arr = np.asarray(value)
    if arr.size != 1:
        raise InvalidArgument("%s: %s must be a scalar (or 1-element tensor), got shape %s"
                              % (op, what, arr.shape))
    return int(arr.reshape(()))


def _int_dtype(op: str, ref: np.ndarray, what: str) -> np.dtype:
    """The 8/16-bit integer dtype of `ref` (a zero point or quantized tensor)."""
    dt = np.asarray(ref).dtype
    if dt.kind not in "iu" or dt.itemsize > 2:
        raise InvalidArgument("%s: %s must be int8, uint8, int16 or uint16, got %s"
                              % (op, what, dt))
    return dt


def saturate_round(y: np.ndarray, zero_point: Any, dtype: np.dtype) -> np.ndarray:
    """round_half_even(y) + zero_point saturated into the integer `dtype` (y in float32)."""
    lo, hi = INT_RANGES[dtypes.from_numpy(np.dtype(dtype))]
    q = np.rint(np.asarray(y, dtype=_F32)) + _F32(zero_point)
    return np.clip(q, lo, hi).astype(dtype)


def _out_dtype(op: str, zp: Optional[np.ndarray], fallback: np.ndarray) -> np.dtype:
    return _int_dtype(op, zp if zp is not None else fallback, "the output zero point")


# --------------------------------------------------------------------------- integer matmuls

def _minus_zp(op: str, q: np.ndarray, zp: Optional[np.ndarray], what: str) -> np.ndarray:
    """q - zero_point in float64 (exact for 8/16-bit codes)."""
    out = np.asarray(q).astype(np.float64)
    if zp is not None:
        out = out - np.asarray(zp).astype(np.float64)
    return out


def _check_k(op: str, a: np.ndarray, b: np.ndarray) -> None:
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != (b.shape[-2] if b.ndim > 1 else b.shape[0]):
        raise InvalidArgument("%s: A %s and B %s do not multiply (A's last dimension must equal "
                              "B's rows)" % (op, a.shape, b.shape))


def _int_matmul_to_float(op: str, a: np.ndarray, a_scale: Any, a_zp: Optional[np.ndarray],
                         b: np.ndarray, b_scale: np.ndarray, b_zp: Optional[np.ndarray],
                         bias: Optional[np.ndarray]) -> np.ndarray:
    """float32(sum((a - a_zp)(b - b_zp))) * (a_scale * b_scale) + bias, onnxruntime's order."""
    a, b = np.asarray(a), np.asarray(b)
    _check_k(op, a, b)
    acc = np.matmul(_minus_zp(op, a, a_zp, "a_zero_point"), _minus_zp(op, b, b_zp, "b_zero_point"))
    scale = (_F32(a_scale) * np.asarray(b_scale).astype(_F32)).astype(_F32)
    y = acc.astype(_F32) * scale
    if bias is not None:
        y = y + np.asarray(bias).astype(_F32)
    out_dt = np.asarray(b_scale).dtype
    return y.astype(out_dt if out_dt.kind == "f" else _F32)


@register("MatMulIntegerToFloat", domain=MS, since=1)
def matmul_integer_to_float(A: np.ndarray, B: np.ndarray, a_scale: np.ndarray,
                            b_scale: np.ndarray, a_zero_point: Optional[np.ndarray] = None,
                            b_zero_point: Optional[np.ndarray] = None,
                            bias: Optional[np.ndarray] = None) -> np.ndarray:
    """MatMulIntegerToFloat: (A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias, in float.
    b_scale / b_zero_point may be per column of B."""
    op = "MatMulIntegerToFloat"
    return _int_matmul_to_float(op, A, _scalar(op, a_scale, "a_scale"), a_zero_point, B,
                                b_scale, b_zero_point, bias)


@register("DynamicQuantizeMatMul", domain=MS, since=1)
def dynamic_quantize_matmul(A: np.ndarray, B: np.ndarray, b_scale: np.ndarray,
                            b_zero_point: Optional[np.ndarray] = None,
                            bias: Optional[np.ndarray] = None) -> np.ndarray:
    """DynamicQuantizeMatMul: A quantized to uint8 as DynamicQuantizeLinear does, then
    MatMulIntegerToFloat with B (int8/uint8, per-tensor or per-column scale)."""
    op = "DynamicQuantizeMatMul"
    a = np.asarray(A)
    if a.dtype != np.float32:
        raise InvalidArgument("%s: A must be float32, got %s" % (op, a.dtype))
    aq, a_scale, a_zp = dynamic_quantize_linear(a)
    return _int_matmul_to_float(op, aq, _F32(a_scale), a_zp, B, b_scale, b_zero_point, bias)


@register("QGemm", domain=MS, since=1)
def qgemm(A: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray, B: np.ndarray,
          b_scale: np.ndarray, b_zero_point: np.ndarray, C: Optional[np.ndarray] = None,
          y_scale: Optional[np.ndarray] = None, y_zero_point: Optional[np.ndarray] = None,
          alpha: float = 1.0, transA: int = 0, transB: int = 0) -> np.ndarray:
    """QGemm: int32 Gemm of zero-point-shifted A and B plus the int32 bias C (scale
    alpha*a_scale*b_scale); requantized to y_scale/y_zero_point when given, else float."""
    op = "QGemm"
    a, b = np.asarray(A), np.asarray(B)
    if a.ndim != 2 or b.ndim != 2:
        raise InvalidArgument("%s: A and B must be 2-D, got %s and %s" % (op, a.shape, b.shape))
    av = _minus_zp(op, a, a_zero_point, "a_zero_point")
    bzp = np.asarray(b_zero_point).astype(np.float64)
    bs = np.asarray(b_scale).astype(_F32)
    if transA:
        av = av.T
    if transB:      # per-column quantization of B^T is along B's rows
        bv = (b.astype(np.float64) - (bzp.reshape(-1, 1) if bzp.size > 1 else bzp.reshape(()))).T
    else:
        bv = b.astype(np.float64) - (bzp.reshape(1, -1) if bzp.size > 1 else bzp.reshape(()))
    if av.shape[1] != bv.shape[0]:
        raise InvalidArgument("%s: op(A) %s and op(B) %s do not multiply"
                              % (op, av.shape, bv.shape))
    acc = np.matmul(av, bv)
    if C is not None:
        acc = acc + np.asarray(C).astype(np.float64)
    scale = (_F32(alpha) * _scalar(op, a_scale, "a_scale") * bs.reshape(-1)).astype(_F32)
    scale = scale.reshape(()) if scale.size == 1 else scale
    if y_scale is None:
        return (acc.astype(_F32) * scale).astype(_F32)
    scale = (scale / _scalar(op, y_scale, "y_scale")).astype(_F32)
    out_dt = _out_dtype(op, y_zero_point, a)
    return saturate_round(acc.astype(_F32) * scale, _zp_value(op, y_zero_point, "y_zero_point"),
                          out_dt)


# --------------------------------------------------------------------------- block-quantized weight


def _block_expand(v: np.ndarray, axis: int, block: int, length: int) -> np.ndarray:
    return np.repeat(v, block, axis=axis).take(np.arange(length), axis=axis)


@register("GatherBlockQuantized", domain=MS, since=1)
def gather_block_quantized(data: np.ndarray, indices: np.ndarray, scales: np.ndarray,
                           zero_points: Optional[np.ndarray] = None, block_size: int = 128,
                           gather_axis: int = 0, quantize_axis: int = 1,
                           bits: int = 4) -> np.ndarray:
    """GatherBlockQuantized: Gather of a block-quantized tensor, dequantized.

    uint8 data packs 8/bits codes per byte along the last axis (the quantize axis; gather axis
    0) with packed zero points, default 2^(bits-1); int4/uint4 data holds one code per element,
    default zero point 0. Out-of-range indices give zeros, as onnxruntime."""
    op = "GatherBlockQuantized"
    d = np.asarray(data)
    rank = d.ndim
    gax = norm_axis(gather_axis, rank, op, "gather_axis")
    qax = norm_axis(quantize_axis, rank, op, "quantize_axis")
    bits, block = int(bits), int(block_size)
    packed = d.dtype == np.uint8
    if packed:
        if gax != 0 or qax != rank - 1:
            raise InvalidArgument("%s: uint8 data needs gather_axis 0 and quantize_axis %d (the "
                                  "last), got %d and %d" % (op, rank - 1, gax, qax))
        codes = unpack_bits(d, bits)
        default_zp = 1 << (bits - 1)
    else:
        codes = d.astype(np.int32)
        default_zp = 0
    s = np.asarray(scales)
    nblk = -(-codes.shape[qax] // block)
    want = tuple(nblk if i == qax else codes.shape[i] for i in range(rank))
    if s.shape != want:
        raise InvalidArgument("%s: scales must have shape %s for data %s with block_size %d, got %s"
                              % (op, want, d.shape, block, s.shape))
    idx = np.asarray(indices).astype(np.int64)
    dim = codes.shape[gax]
    valid = (idx >= -dim) & (idx < dim)
    safe = np.where(valid, np.where(idx < 0, idx + dim, idx), 0)
    q = np.take(codes, safe, axis=gax).astype(_F32)
    sc = np.take(s.astype(_F32), safe, axis=gax)
    if zero_points is None:
        zp = _F32(default_zp)
    else:
        z = np.asarray(zero_points)
        z = unpack_bits(z, bits)[..., :nblk] if packed else z.astype(np.int32)
        zp = np.take(z.astype(_F32), safe, axis=gax)
    oq = qax + idx.ndim - 1 if qax > gax else qax
    sc = _block_expand(sc, oq, block, q.shape[oq])
    if np.ndim(zp):
        zp = _block_expand(zp, oq, block, q.shape[oq])
    y = (q - zp) * sc
    if not valid.all():
        mask = valid.reshape((1,) * gax + valid.shape + (1,) * (rank - gax - 1))
        y = np.where(mask, y, _F32(0))
    return y.astype(s.dtype)


# --------------------------------------------------------------------------- elementwise QLinear op

def _dequant(op: str, x: np.ndarray, scale: Any, zp: Optional[np.ndarray], what: str) -> np.ndarray:
    """(x - zp) * scale in float32 (per-tensor)."""
    return ((np.asarray(x).astype(_F32) - _F32(_zp_value(op, zp, what + "_zero_point")))
            * _scalar(op, scale, what + "_scale"))


def _quant(op: str, y: np.ndarray, scale: Any, zp: Optional[np.ndarray],
           dtype: np.dtype) -> np.ndarray:
    """round(y / scale) + zp, saturated (MlasQuantizeLinear)."""
    return saturate_round(np.asarray(y, dtype=_F32) / _scalar(op, scale, "output scale"),
                          _zp_value(op, zp, "output zero point"), dtype)


def _lookup(op: str, x: np.ndarray, x_scale: Any, x_zp: Optional[np.ndarray], y_scale: Any,
            y_zp: Optional[np.ndarray], fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply fn to x through a table over every code of x's 8-bit type (onnxruntime's tables)."""
    x = np.asarray(x)
    dt = _int_dtype(op, x, "X")
    if dt.itemsize != 1:
        raise InvalidArgument("%s: X must be int8 or uint8, got %s" % (op, dt))
    codes = np.arange(-128, 128) if dt.kind == "i" else np.arange(256)
    out_dt = _out_dtype(op, y_zp, x)
    table = _quant(op, fn(_dequant(op, codes, x_scale, x_zp, "X")), y_scale, y_zp, out_dt)
    return table[x.astype(np.int64) - int(codes[0])]


# MLAS's logistic: x clamped to [-18, 18], an odd rational polynomial p(x)/q(x) + 0.5 evaluated
# with fused multiply-adds (one rounding each: a float64 product of two float32 values is exact).
_LOGISTIC_P = (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
               8.51377133304701e-03, 2.48287947061529e-01)
_LOGISTIC_Q = (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
               1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01)


def _horner_fma(x2: np.ndarray, coeffs: tuple) -> np.ndarray:
    """Horner's rule in float32 with fused multiply-adds (emulated in float64)."""
    acc = np.full(x2.shape, _F32(coeffs[0]), _F32)
    x2d = x2.astype(np.float64)
    for c in coeffs[1:]:
        acc = (acc.astype(np.float64) * x2d + float(_F32(c))).astype(_F32)
    return acc


def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """onnxruntime's float32 Sigmoid (MlasComputeLogistic, FMA build), bit for bit on x86-64:
    numpy's 1 / (1 + exp(-x)) differs from it by up to 1.8e-7, enough to flip the rounding of
    a quantizer fed by the Sigmoid."""
    v = np.clip(np.asarray(x, dtype=_F32), _F32(-18), _F32(18))
    v2 = (v * v).astype(_F32)
    p = (_horner_fma(v2, _LOGISTIC_P) * v).astype(_F32)
    q = _horner_fma(v2, _LOGISTIC_Q)
    return np.clip((p / q).astype(_F32) + _F32(0.5), _F32(0), _F32(1)).astype(_F32)


@register("QLinearSigmoid", domain=MS, since=1)
def qlinear_sigmoid(X: np.ndarray, X_scale: np.ndarray, X_zero_point: Optional[np.ndarray],
                    Y_scale: np.ndarray, Y_zero_point: Optional[np.ndarray] = None) -> np.ndarray:
    """QLinearSigmoid: quantize(sigmoid(dequantize(X)))."""
    return _lookup("QLinearSigmoid", X, X_scale, X_zero_point, Y_scale, Y_zero_point, mlas_logistic)


@register("QLinearLeakyRelu", domain=MS, since=1)
def qlinear_leaky_relu(X: np.ndarray, X_scale: np.ndarray, X_zero_point: Optional[np.ndarray],
                       Y_scale: np.ndarray, Y_zero_point: Optional[np.ndarray] = None,
                       alpha: float = 0.01) -> np.ndarray:
    """QLinearLeakyRelu: quantize(leaky_relu(dequantize(X), alpha))."""
    a = _F32(alpha)
    return _lookup("QLinearLeakyRelu", X, X_scale, X_zero_point, Y_scale, Y_zero_point,
                   lambda v: np.where(v >= 0, v, v * a).astype(_F32))


@register("QLinearAdd", domain=MS, since=1)
def qlinear_add(A: np.ndarray, A_scale: np.ndarray, A_zero_point: Optional[np.ndarray],
                B: np.ndarray, B_scale: np.ndarray, B_zero_point: Optional[np.ndarray],
                C_scale: np.ndarray, C_zero_point: Optional[np.ndarray] = None) -> np.ndarray:
    """QLinearAdd: C = quantize(dequantize(A) + dequantize(B)), numpy broadcasting; in float32
    as MLAS's vector kernel: A*(sA/sC) + B*(sB/sC) + (zC - (zA*sA/sC + zB*sB/sC)), rounded half
    to even (equal to onnxruntime on all but about 1 in 10^5 elements, at exact ties)."""
    op = "QLinearAdd"
    a, b = np.asarray(A), np.asarray(B)
    sc = _scalar(op, C_scale, "C_scale")
    ra = _F32(_scalar(op, A_scale, "A_scale") / sc)
    rb = _F32(_scalar(op, B_scale, "B_scale") / sc)
    za = _F32(_zp_value(op, A_zero_point, "A_zero_point"))
    zb = _F32(_zp_value(op, B_zero_point, "B_zero_point"))
    zc = _zp_value(op, C_zero_point, "C_zero_point")
    fixed = _F32(_F32(zc) - (ra * za + rb * zb))
    y = a.astype(_F32) * ra + b.astype(_F32) * rb + fixed
    return saturate_round(y, 0, _out_dtype(op, C_zero_point, a))


@register("QLinearMul", domain=MS, since=1)
def qlinear_mul(A: np.ndarray, A_scale: np.ndarray, A_zero_point: Optional[np.ndarray],
                B: np.ndarray, B_scale: np.ndarray, B_zero_point: Optional[np.ndarray],
                C_scale: np.ndarray, C_zero_point: Optional[np.ndarray] = None) -> np.ndarray:
    """QLinearMul: C = quantize(dequantize(A) * dequantize(B)), numpy broadcasting;
    (A - zA)(B - zB) * (sA*sB/sC) + zC in float32."""
    op = "QLinearMul"
    a, b = np.asarray(A), np.asarray(B)
    mult = _F32(_scalar(op, A_scale, "A_scale") * _scalar(op, B_scale, "B_scale")
                / _scalar(op, C_scale, "C_scale"))
    av = a.astype(_F32) - _F32(_zp_value(op, A_zero_point, "A_zero_point"))
    bv = b.astype(_F32) - _F32(_zp_value(op, B_zero_point, "B_zero_point"))
    return saturate_round(av * bv * mult, _zp_value(op, C_zero_point, "C_zero_point"),
                          _out_dtype(op, C_zero_point, a))


@register("QLinearConcat", domain=MS, since=1)
def qlinear_concat(Y_scale: np.ndarray, Y_zero_point: np.ndarray, *inputs: np.ndarray,
                   axis: int = 0) -> np.ndarray:
    """QLinearConcat: inputs as (tensor, scale, zero point) triples, each requantized to
    Y_scale / Y_zero_point (copied when its parameters already match), then concatenated."""
    op = "QLinearConcat"
    if len(inputs) % 3 or not inputs:
        raise InvalidArgument("%s: after Y_scale and Y_zero_point the inputs must be (tensor, "
                              "scale, zero point) triples, got %d inputs" % (op, len(inputs)))
    ys, yz = _scalar(op, Y_scale, "Y_scale"), _zp_value(op, Y_zero_point, "Y_zero_point")
    parts = []
    for i in range(0, len(inputs), 3):
        x, s, z = inputs[i:i + 3]
        x = np.asarray(x)
        if _scalar(op, s, "input scale") == ys and _zp_value(op, z, "input zero point") == yz:
            parts.append(x.astype(np.asarray(Y_zero_point).dtype))
        else:
            parts.append(_lookup(op, x, s, z, Y_scale, Y_zero_point, lambda v: v))
    rank = parts[0].ndim
    return np.concatenate(parts, axis=norm_axis(axis, rank, op))


# --------------------------------------------------------------------------- pools and softmax

def _to_nchw(x: np.ndarray, channels_last: int) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if channels_last else x


@register("QLinearAveragePool", domain=MS, since=1)
def qlinear_average_pool(X: np.ndarray, x_scale: np.ndarray, x_zero_point: Optional[np.ndarray],
                         y_scale: np.ndarray, y_zero_point: Optional[np.ndarray] = None,
                         auto_pad: str = "NOTSET", ceil_mode: int = 0, channels_last: int = 0,
                         count_include_pad: int = 0, kernel_shape: Optional[List[int]] = None,
                         pads: Optional[List[int]] = None, strides: Optional[List[int]] = None,
                         dilations: Optional[List[int]] = None) -> np.ndarray:
    """QLinearAveragePool: AveragePool of the dequantized input (float32), quantized."""
    op = "QLinearAveragePool"
    x = np.asarray(X)
    xf = _to_nchw(_dequant(op, x, x_scale, x_zero_point, "x"), channels_last)
    y = average_pool(xf, auto_pad=auto_pad, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad, dilations=dilations,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)
    if channels_last:
        y = np.moveaxis(y, 1, -1)
    out_dt = _out_dtype(op, y_zero_point, x)
    lo, hi = INT_RANGES[dtypes.from_numpy(out_dt)]
    q = (y.astype(_F32) / _scalar(op, y_scale, "y_scale")).astype(_F32)   # zero point added
    q = q + _F32(_zp_value(op, y_zero_point, "y_zero_point"))              # before rounding
    return np.clip(np.rint(q), lo, hi).astype(out_dt)


@register("QLinearGlobalAveragePool", domain=MS, since=1)
def qlinear_global_average_pool(X: np.ndarray, x_scale: np.ndarray,
                                x_zero_point: Optional[np.ndarray], y_scale: np.ndarray,
                                y_zero_point: Optional[np.ndarray] = None,
                                channels_last: int = 0) -> np.ndarray:
    """QLinearGlobalAveragePool: integer sums over the spatial axes, requantized by
    x_scale / (y_scale * size) as MLAS does; keeps the spatial axes as size 1."""
    op = "QLinearGlobalAveragePool"
    x = np.asarray(X)
    if x.ndim < 3:
        raise InvalidArgument("%s: X must have rank >= 3, got shape %s" % (op, x.shape))
    axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
    size = int(np.prod([x.shape[a] for a in axes]))
    acc = x.astype(np.int64).sum(axis=axes, keepdims=True)
    acc = acc - _zp_value(op, x_zero_point, "x_zero_point") * size
    scale = _F32(_scalar(op, x_scale, "x_scale") / (_scalar(op, y_scale, "y_scale") * _F32(size)))
    return saturate_round(acc.astype(_F32) * scale, _zp_value(op, y_zero_point, "y_zero_point"),
                          _out_dtype(op, y_zero_point, x))


def _softmax_table(x_scale: np.float32, reduce_len: int) -> np.ndarray:
    """onnxruntime's float32 table: exp((i - 255 + shift) * x_scale), i = 0..255, with the shift
    keeping a row's sum below FLT_MAX."""
    shift = math.log(float(np.finfo(_F32).max) / max(1, reduce_len))
    shift = max(0.0, shift - 5) / float(x_scale)
    i = np.arange(256, dtype=np.float64)
    return np.exp((i - 255 + shift) * float(x_scale)).astype(_F32)


def _softmax_rows(x: np.ndarray, table: np.ndarray, y_scale: np.float32, yzp: int) -> np.ndarray:
    """Rows (last axis) of x through onnxruntime's table softmax (float32 sums in row order)."""
    signed = x.dtype == np.int8
    xi = x.astype(np.int64)
    if signed:
        idx = (127 - xi.max(axis=-1, keepdims=True) + xi) & 0xFF
        tab = np.empty(256, _F32)
        tab[(np.arange(256) - 128) & 0xFF] = table
        vt = tab[idx]
    else:
        vt = table[255 - xi.max(axis=-1, keepdims=True) + xi]
    vsum = np.cumsum(vt, axis=-1, dtype=_F32)[..., -1:]
    vsum = np.where(vsum == 0, _F32(1), vsum)
    vq = np.rint(vt * y_scale / vsum).astype(np.int64) + yzp
    if signed:
        return np.clip(vq, -128, 127).astype(np.int8)
    return np.clip(vq, 0, 255).astype(np.uint8)


@register("QLinearSoftmax", domain=MS, since=1)
def qlinear_softmax(X: np.ndarray, X_scale: np.ndarray, x_zero_point: Optional[np.ndarray],
                    y_scale: np.ndarray, y_zero_point: Optional[np.ndarray] = None,
                    axis: Optional[int] = None, opset: int = 13) -> np.ndarray:
    """QLinearSoftmax: onnxruntime's table softmax (an exp table over the 256 codes shifted to
    the row maximum, float32 sums, y = round(e * floor(1/y_scale) / sum) + zero point). `opset`
    below 13 flattens from `axis` (default 1) to 2-D; from 13 it works along `axis` (default -1)."""
    op = "QLinearSoftmax"
    x = np.asarray(X)
    if x.dtype not in (np.uint8, np.int8):
        raise InvalidArgument("%s: X must be uint8 or int8, got %s" % (op, x.dtype))
    if x.size == 0:
        return x.copy()
    opset = int(opset)
    ax = norm_axis((1 if opset < 13 else -1) if axis is None else axis, x.ndim, op)
    ys_int = _F32(math.floor(_F32(1.0) / _scalar(op, y_scale, "y_scale")))
    yzp = _zp_value(op, y_zero_point, "y_zero_point")
    xs = _scalar(op, X_scale, "X_scale")
    if opset < 13:
        rows = x.reshape(int(np.prod(x.shape[:ax], dtype=np.int64)), -1)
        return _softmax_rows(rows, _softmax_table(xs, rows.shape[1]), ys_int, yzp).reshape(x.shape)
    moved = np.moveaxis(x, ax, -1)
    y = _softmax_rows(moved, _softmax_table(xs, x.shape[ax]), ys_int, yzp)
    return np.moveaxis(y, -1, ax)


# --------------------------------------------------------------------------- QuantizeLinear / Dequa

@register("QuantizeLinear", domain=MS, since=1)
def ms_quantize_linear(x: np.ndarray, y_scale: np.ndarray,
                       y_zero_point: Optional[np.ndarray] = None,
                       axis: int = 1, block_size: int = 0, saturate: int = 1,
                       output_dtype: int = 0) -> np.ndarray:
    """com.microsoft QuantizeLinear: as ai.onnx's (per tensor or per axis; 8/16-bit and 4-bit
    types), round half to even, saturating."""
    return quantize_linear(x, y_scale, y_zero_point, axis=axis, saturate=saturate,
                           block_size=block_size, output_dtype=output_dtype)


@register("DequantizeLinear", domain=MS, since=1)
def ms_dequantize_linear(x: np.ndarray, x_scale: np.ndarray,
                         x_zero_point: Optional[np.ndarray] = None, axis: int = 1,
                         block_size: int = 0) -> np.ndarray:
    """com.microsoft DequantizeLinear: as ai.onnx's, (x - zero point) * scale."""
    return dequantize_linear(x, x_scale, x_zero_point, axis=axis, block_size=block_size)
