"""Linear algebra kernels: MatMul, Gemm, Einsum, Det, Trilu and MatMulInteger.

MatMul and Gemm are on the hot path: transposes stay views (BLAS reads them as they are), alpha
and beta are applied in place and skipped when 1, and nothing is copied or cast for float32 /
float64. float16 / bfloat16 are multiplied in float32 (numpy has no half-precision BLAS) and cast
back. MatMulInteger multiplies exactly in float32 or float64 so that BLAS does the work.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import InvalidArgument
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
        if c.ndim > 2 or any(dc not in (1, dy) for dc, dy in zip(c.shape[::-1], y.shape[::-1])):
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


@register("Trilu", since=14)
def trilu(x: np.ndarray, k: Optional[np.ndarray] = None, upper: int = 1) -> np.ndarray:
    """ONNX Trilu: keep the upper (or lower) triangle of the trailing matrices, from diagonal k."""
    if x.ndim < 2:
        raise InvalidArgument("Trilu: input must have rank >= 2, got shape %s" % (tuple(x.shape),))
    diag = 0
    if k is not None:
        kv = np.asarray(k)
        if kv.size != 1 or kv.dtype.kind not in "iu":
            raise InvalidArgument("Trilu: input k must be a single integer, got %s of shape %s"
                                  % (kv.dtype, tuple(kv.shape)))
        diag = int(kv.reshape(-1)[0])
    rows, cols = x.shape[-2:]
    diag = max(-rows - 1, min(cols + 1, diag))   # beyond the matrix every k acts the same
    return np.triu(x, diag) if upper else np.tril(x, diag)


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
