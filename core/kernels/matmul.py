"""Matrix product kernels: MatMul, Gemm, Einsum, Det, MatMulInteger, MatMulNBits and the fused
FusedMatMul / FusedGemm.

MatMul and Gemm are on the hot path: transposes stay views (BLAS reads them as they are), alpha
and beta are applied in place and skipped when 1, and nothing is copied or cast for float32 /
float64. float16 / bfloat16 are multiplied in float32 (numpy has no half-precision BLAS) and cast
back. MatMulInteger multiplies exactly in float32 or float64 so that BLAS does the work.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..errors import InvalidArgument
from ..fused_ops import DOMAIN, MS_DOMAIN, apply_activation
from ._util import is_narrow_float, widen
from .registry import register


def _array(r: object) -> np.ndarray:
    return r if type(r) is np.ndarray else np.asarray(r)


def _shapes(*xs: np.ndarray) -> str:
    return " and ".join(str(tuple(x.shape)) for x in xs)


@register("MatMul", since=1)
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX MatMul: numpy.matmul semantics (1-D operands promoted, batch dims broadcast)."""
    if a.ndim == 0 or b.ndim == 0:
        raise InvalidArgument("MatMul: inputs must have rank >= 1, got shapes %s" % _shapes(a, b))
    aw, bw = widen(a), widen(b)
    try:
        if aw.ndim > 2 and bw.ndim == 2 and aw.flags.c_contiguous and aw.shape[-1] == bw.shape[0]:
            # [..., M, K] @ [K, N] as one [(...M), K] @ [K, N] BLAS call, not one per batch
            r = np.matmul(aw.reshape(-1, aw.shape[-1]), bw).reshape(aw.shape[:-1] + bw.shape[1:])
        else:
            r = np.matmul(aw, bw)
    except ValueError:
        raise InvalidArgument("MatMul: input shapes %s do not fit (inner dimensions or batch "
                              "broadcast)" % _shapes(a, b)) from None
    r = _array(r)
    return r if r.dtype == a.dtype else r.astype(a.dtype)


def _gemm(a: np.ndarray, b: np.ndarray, c: Optional[np.ndarray], alpha: float, beta: float,
          trans_a: int, trans_b: int) -> np.ndarray:
    if a.ndim != 2 or b.ndim != 2:
        raise InvalidArgument("Gemm: A and B must be 2-D, got shapes %s" % _shapes(a, b))
    at = a.T if trans_a else a
    bt = b.T if trans_b else b
    if at.shape[1] != bt.shape[0]:
        raise InvalidArgument("Gemm: inner dimensions differ: op(A) is %s, op(B) is %s (transA=%d, "
                              "transB=%d)" % (at.shape, bt.shape, trans_a, trans_b))
    dtype = a.dtype
    exact = dtype.kind in "iu" and (alpha != 1.0 or (c is not None and beta not in (0.0, 1.0)))
    if exact or is_narrow_float(dtype):
        work = np.float64 if exact else np.float32
        at, bt = at.astype(work), bt.astype(work)
        c = None if c is None else c.astype(work)
    y = np.matmul(at, bt)
    if alpha != 1.0:
        y *= alpha
    if c is not None and beta != 0.0:
        if c.shape != y.shape[y.ndim - c.ndim:] and (c.ndim > 2 or any(
                dc not in (1, dy) for dc, dy in zip(c.shape[::-1], y.shape[::-1]))):
            raise InvalidArgument("Gemm: C of shape %s does not broadcast to the output shape %s"
                                  % (tuple(c.shape), y.shape))
        if beta == 1.0:
            y += c
        else:
            y += c * beta
    return y if y.dtype == dtype else y.astype(dtype)


@register("Gemm", since=7)
def gemm(a: np.ndarray, b: np.ndarray, c: Optional[np.ndarray] = None, alpha: float = 1.0,
         beta: float = 1.0, transA: int = 0, transB: int = 0) -> np.ndarray:  # noqa: N803
    """ONNX Gemm: alpha * op(A) @ op(B) + beta * C, C broadcast to the output (optional from
    opset 11)."""
    return _gemm(a, b, c, alpha, beta, transA, transB)


@register("Gemm", since=1, until=6)
def gemm_1(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float = 1.0, beta: float = 1.0,
           broadcast: int = 0, transA: int = 0, transB: int = 0) -> np.ndarray:  # noqa: N803
    """ONNX Gemm, opsets 1-6 (C must have the output's shape unless broadcast=1)."""
    y_shape = (a.shape[1] if transA else a.shape[0], b.shape[0] if transB else b.shape[1])
    if not broadcast and c.size != 1 and tuple(c.shape) != y_shape:
        raise InvalidArgument("Gemm: without broadcast=1 (opset < 7) C must have shape %s, got %s"
                              % (y_shape, tuple(c.shape)))
    return _gemm(a, b, c, alpha, beta, transA, transB)


@register("Einsum", since=12)
def einsum(*xs: np.ndarray, equation: str = "") -> np.ndarray:
    """ONNX Einsum: numpy.einsum on the equation (spaces ignored), the BLAS-backed path for
    several operands."""
    eq = str(equation).replace(" ", "")
    lhs = eq.split("->")[0]
    if not xs or len(lhs.split(",")) != len(xs):
        raise InvalidArgument("Einsum: equation %r names %d operands, got %d inputs"
                              % (equation, len(lhs.split(",")), len(xs)))
    dtype = xs[0].dtype
    ws = [widen(x) for x in xs]
    try:
        r = np.einsum(eq, *ws, optimize=len(ws) > 1)
    except (ValueError, TypeError) as e:
        raise InvalidArgument("Einsum: equation %r does not fit inputs of shapes %s: %s"
                              % (equation, _shapes(*xs), e)) from None
    r = _array(r)
    if any(np.may_share_memory(r, w) for w in ws) or not r.flags.c_contiguous:
        r = np.array(r)   # never hand out a view of an input (transposes, diagonals)
    return r if r.dtype == dtype else r.astype(dtype)


@register("Det", since=11)
def det(x: np.ndarray) -> np.ndarray:
    """ONNX Det: determinants of the trailing square matrices."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise InvalidArgument("Det: input must be [..., M, M] (rank >= 2, square), got shape %s"
                              % (tuple(x.shape),))
    r = _array(np.linalg.det(widen(x)))
    return r if r.dtype == x.dtype else r.astype(x.dtype)


def _shifted(x: np.ndarray, zp: Optional[np.ndarray], per_row: bool, what: str,
             work: type) -> np.ndarray:
    """x - zero point in `work`; the zero point is a scalar, per row of A ([M] or [..., M, 1])
    or per column of B ([N] or [..., 1, N])."""
    xf = x.astype(work)
    if zp is None:
        return xf
    if zp.dtype != x.dtype:
        raise InvalidArgument("MatMulInteger: %s has dtype %s, expected the input's %s"
                              % (what, zp.dtype, x.dtype))
    z = zp.astype(work)
    if z.size == 1:
        z = z.reshape(())
    elif per_row and z.ndim == 1 and x.ndim >= 2:
        z = z.reshape(-1, 1)
    xf -= z
    return xf


@register("MatMulInteger", since=10)
def matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point: Optional[np.ndarray] = None,
                   b_zero_point: Optional[np.ndarray] = None) -> np.ndarray:
    """ONNX MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) in int32, for 8-bit inputs."""
    for x, name in ((a, "A"), (b, "B")):
        if x.dtype not in (np.int8, np.uint8):
            raise InvalidArgument("MatMulInteger: %s must be int8 or uint8, got %s"
                                  % (name, x.dtype))
    if a.ndim == 0 or b.ndim == 0:
        raise InvalidArgument("MatMulInteger: inputs must have rank >= 1, got shapes %s"
                              % _shapes(a, b))
    # |a - za| * |b - zb| <= 255 * 255, so K <= 256 sums exactly in float32 (< 2**24).
    work = np.float32 if a.shape[-1] <= 256 else np.float64
    try:
        af = _shifted(a, a_zero_point, True, "a_zero_point", work)
        bf = _shifted(b, b_zero_point, False, "b_zero_point", work)
        r = np.matmul(af, bf)
    except ValueError:
        raise InvalidArgument("MatMulInteger: shapes %s (with zero points %s) do not fit"
                              % (_shapes(a, b), [None if z is None else tuple(z.shape)
                                                 for z in (a_zero_point, b_zero_point)])) from None
    return _array(r).astype(np.int32)


@register("FusedGemm", domain=DOMAIN, since=1)
def fused_gemm(A: np.ndarray, B: np.ndarray, C: Optional[np.ndarray] = None, alpha: float = 1.0,
               beta: float = 1.0, transA: int = 0, transB: int = 0, activation: str = "",  # noqa: N803
               activation_params: Optional[List[float]] = None) -> np.ndarray:
    """FusedGemm: activation(alpha * op(A) @ op(B) + beta * C).

    Inputs and alpha, beta, transA, transB are ai.onnx Gemm's (opset 11+: C optional);
    activation and activation_params as in FusedConv.
    """
    y = gemm(A, B, C, alpha=alpha, beta=beta, transA=transA, transB=transB)
    return apply_activation(activation, y, activation_params, "FusedGemm")


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
    return apply_activation(activation, y, activation_params, "FusedMatMul")


def unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """uint8 bytes to their `bits`-wide codes (lowest bits first), the last axis widened by
    8 / bits."""
    if bits == 8:
        return np.asarray(packed, dtype=np.uint8)
    if bits not in (2, 4):
        raise InvalidArgument("bits must be 2, 4 or 8, got %d" % bits)
    p = np.asarray(packed, dtype=np.uint8)
    per = 8 // bits
    mask = (1 << bits) - 1
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    codes = (p[..., None] >> shifts) & mask
    return codes.reshape(p.shape[:-1] + (p.shape[-1] * per,)).astype(np.uint8)


def nbits_weight(op: str, B: np.ndarray, scales: np.ndarray, zero_points: Optional[np.ndarray],
                  g_idx: Optional[np.ndarray], K: int, N: int, bits: int,
                  block_size: int) -> np.ndarray:
    """MatMulNBits' B dequantized to float32 [N, K] (the CPU kernel's, and the WebGPU
    provider's for its constant weights)."""
    if block_size < 16 or block_size & (block_size - 1):
        raise InvalidArgument("%s: block_size must be a power of 2 and >= 16, got %d"
                              % (op, block_size))
    k_blocks = -(-K // block_size)
    blob = block_size * bits // 8
    b = np.asarray(B)
    if b.dtype != np.uint8 or b.size != N * k_blocks * blob:
        raise InvalidArgument("%s: B must be uint8 of shape (%d, %d, %d) for N=%d, K=%d, bits=%d, "
                              "block_size=%d; got %s %s" % (op, N, k_blocks, blob, N, K, bits,
                                                           block_size, b.dtype, b.shape))
    q = unpack_bits(b.reshape(N, k_blocks * blob), bits)[:, :K].astype(np.float32)
    s = np.asarray(scales)
    if s.size != N * k_blocks:
        raise InvalidArgument("%s: scales must hold N*k_blocks = %d values, got shape %s"
                              % (op, N * k_blocks, s.shape))
    s = s.astype(np.float32).reshape(N, k_blocks)
    has_g_idx = g_idx is not None and np.asarray(g_idx).size == K
    if zero_points is not None and has_g_idx and np.asarray(zero_points).dtype == np.uint8:
        zero_points = None      # onnxruntime (1.31) leaves packed zero points out with g_idx
    if zero_points is None:
        zp = np.full((N, k_blocks), 1 << (bits - 1), dtype=np.float32)
    else:
        z = np.asarray(zero_points)
        if z.dtype == np.uint8:
            per_row = -(-k_blocks * bits // 8)
            if z.size != N * per_row:
                raise InvalidArgument("%s: packed zero_points must hold N*%d = %d bytes, got shape "
                                      "%s" % (op, per_row, N * per_row, z.shape))
            zp = unpack_bits(z.reshape(N, per_row), bits)[:, :k_blocks].astype(np.float32)
        else:
            if z.size != N * k_blocks:
                raise InvalidArgument("%s: float zero_points must match scales (%d values), got %s"
                                      % (op, N * k_blocks, z.shape))
            zp = z.astype(np.float32).reshape(N, k_blocks)
    if has_g_idx:
        blk = np.asarray(g_idx).astype(np.int64).reshape(-1)
        if blk.min(initial=0) < 0 or blk.max(initial=0) >= k_blocks:
            raise InvalidArgument("%s: g_idx values must lie in [0, %d)" % (op, k_blocks))
    else:
        blk = np.arange(K) // block_size
    return (q - zp[:, blk]) * s[:, blk]


@register("MatMulNBits", domain=MS_DOMAIN, since=1)
def matmul_nbits(A: np.ndarray, B: np.ndarray, scales: np.ndarray,
                 zero_points: Optional[np.ndarray] = None, g_idx: Optional[np.ndarray] = None,
                 bias: Optional[np.ndarray] = None, K: int = 0, N: int = 0, bits: int = 4,
                 block_size: int = 0, accuracy_level: int = 0) -> np.ndarray:
    """MatMulNBits: A @ dequant(B)^T + bias, B [N, k_blocks, blob] of `bits`-bit codes (low
    bits first) per block of `block_size` along K, zero point 2^(bits-1) when absent. g_idx [K]
    maps each k to its block (with it, onnxruntime applies float zero points but not packed
    uint8 ones; so does this kernel). accuracy_level is ignored (computed in float32)."""
    op = "MatMulNBits"
    a = np.asarray(A)
    K, N, bits = int(K), int(N), int(bits)
    if a.ndim == 0 or a.shape[-1] != K:
        raise InvalidArgument("%s: A's last dimension must be K=%d, got shape %s"
                              % (op, K, a.shape))
    w = nbits_weight(op, B, scales, zero_points, g_idx, K, N, bits, int(block_size))
    y = np.matmul(a.astype(np.float32), w.T)
    if bias is not None:
        y = y + np.asarray(bias).astype(np.float32)
    return y.astype(a.dtype)
