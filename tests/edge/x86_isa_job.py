"""Runs in a subprocess with OXK_ISA set (see test_x86_isa.py): checks the kernel library's SGEMM
core chosen for that ISA (and conv's im2col path, which runs on it) against float64 numpy on
random and edge shapes, every epilogue, strided operands, packed operands, and 1 vs 2 threads
bitwise-equal. Raises AssertionError on the first mismatch; prints the backend name when all pass.
Usage: OXK_ISA=avx2 python x86_isa_job.py"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/

from tolerance import (activation_bound, activation_reference, assert_close_to_reference,
                       conv_reference)  # noqa: E402

from onnxedge.edge.neon import library as L  # noqa: E402
from onnxedge.kernels.conv import conv as np_conv  # noqa: E402

# Shapes around every core's tile (sse2 4x8, avx2 6x16, avx512 12x32) and K block (256): 0/1,
# one tile, one past, one short, several blocks of C (MB x NB) for the threaded split.
SHAPES = [(1, 1, 1), (0, 5, 3), (4, 0, 2), (3, 5, 0), (1, 17, 9), (5, 1, 33), (6, 16, 8),
          (7, 17, 1), (11, 31, 7), (12, 32, 256), (13, 33, 257), (2, 40, 513), (25, 47, 300),
          (97, 65, 31), (50, 300, 20)]
ACTS = [("", ()), ("Relu", ()), ("Clip", (-0.5, 0.7)), ("Sigmoid", ()), ("GeluTanh", ()),
        ("LeakyRelu", (0.1,)), ("Tanh", ())]


def check_shapes(k: L.KernelLibrary) -> None:
    """Every shape x transposes, alpha/beta, packed and unpacked operands."""
    for M, N, K in SHAPES:
        rng = np.random.default_rng(M * 10007 + N * 101 + K)
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32) * 3
        c = rng.standard_normal((M, N)).astype(np.float32)
        want = 0.75 * (a.astype(np.float64) @ b) - 1.5 * c
        bound = 0.75 * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1.5 * np.abs(c)
        for ta in (0, 1):
            for tb in (0, 1):
                A = np.ascontiguousarray(a.T) if ta else a
                B = np.ascontiguousarray(b.T) if tb else b
                what = "%s sgemm %dx%dx%d ta=%d tb=%d" % (k.backend, M, N, K, ta, tb)
                got = k.sgemm(A, B, bool(ta), bool(tb), alpha=0.75, beta=-1.5, c=c)
                assert_close_to_reference(got, want, bound, K + 1, what)
                if M and N:
                    pa, pb = k.pack_a(A, bool(ta)), k.pack_b(B, bool(tb))
                    got2 = k.sgemm(A, B, bool(ta), bool(tb), alpha=0.75, beta=-1.5, c=c,
                                   packed_a=pa, packed_b=pb)
                    np.testing.assert_array_equal(got2, got, err_msg=what + " packed")


def check_epilogues(k: L.KernelLibrary) -> None:
    """Bias per row / column and every activation, K within one block and past it, tile edges."""
    for M, N, K in [(13, 37, 300), (12, 32, 40), (1, 5, 7)]:
        rng = np.random.default_rng(M + N + K)
        a = rng.standard_normal((M, K)).astype(np.float32) / 8
        b = rng.standard_normal((K, N)).astype(np.float32)
        for kind in (L.BIAS_ROW, L.BIAS_COL):
            bias = rng.standard_normal(M if kind == L.BIAS_ROW else N).astype(np.float32)
            b2 = bias[:, None] if kind == L.BIAS_ROW else bias[None, :]
            pre = a.astype(np.float64) @ b + b2
            for act, params in ACTS:
                bound = activation_bound(np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(b2), act)
                got = k.sgemm(a, b, bias=bias, bias_kind=kind, act=act, act_params=params)
                assert_close_to_reference(got, activation_reference(pre, act, params), bound, K + 1,
                                          "%s sgemm %dx%dx%d bias %d %s" % (k.backend, M, N, K, kind, act),
                                          rel=1e-5)


def check_strides(k: L.KernelLibrary) -> None:
    """lda, ldb, ldc wider than the matrices: the core reads and writes only the M x N window."""
    fn = k.function("oxk_sgemm")
    for M, N, K, ta, tb in [(13, 35, 21, 0, 0), (7, 50, 300, 1, 1), (30, 17, 9, 0, 1)]:
        rng = np.random.default_rng(M * N + K)
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        A = np.zeros((K, M + 5) if ta else (M, K + 3), np.float32)
        B = np.zeros((N, K + 7) if tb else (K, N + 4), np.float32)
        if ta:
            A[:, :M] = a.T
        else:
            A[:, :K] = a
        if tb:
            B[:, :K] = b.T
        else:
            B[:, :N] = b
        C = np.full((M, N + 6), 7.0, np.float32)
        rc = fn(ta, tb, M, N, K, 1.0, A.ctypes.data, A.shape[1], None, B.ctypes.data, B.shape[1],
                None, 0.0, C.ctypes.data, C.shape[1], None, 0, 0, 0.0, 0.0)
        assert rc == 0, "oxk_sgemm returned %d" % rc
        what = "%s strided sgemm %dx%dx%d ta=%d tb=%d" % (k.backend, M, N, K, ta, tb)
        assert_close_to_reference(C[:, :N], a.astype(np.float64) @ b,
                                  np.abs(a).astype(np.float64) @ np.abs(b), K, what)
        assert (C[:, N:] == 7.0).all(), what + ": wrote past N"


def check_threads(k: L.KernelLibrary) -> None:
    """1 and 2 threads give bitwise-equal results (several blocks of C in both directions)."""
    rng = np.random.default_rng(11)
    for M, N, K in [(200, 150, 170), (61, 700, 290), (5, 1000, 33)]:
        a = rng.standard_normal((M, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        bias = rng.standard_normal(N).astype(np.float32)
        k.set_num_threads(1)
        one = k.sgemm(a, b, bias=bias, bias_kind=L.BIAS_COL, act="Relu")
        k.set_num_threads(2)
        two = k.sgemm(a, b, bias=bias, bias_kind=L.BIAS_COL, act="Relu")
        np.testing.assert_array_equal(one, two, err_msg="%s %dx%dx%d 1 vs 2 threads" % (k.backend, M, N, K))


CONVS = [  # x shape, (Cout, kh, kw), group, strides, dilations, pads (t, l, b, r)
    ((1, 3, 20, 18), (8, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 4, 9, 37), (6, 3, 2), 2, (1, 2), (2, 1), (2, 0, 1, 1)),
    ((1, 16, 12, 12), (33, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 6, 11, 9), (9, 3, 2), 3, (2, 2), (2, 1), (0, 1, 1, 0)),
    ((1, 1, 1, 1), (3, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0)),
]


def check_conv(k: L.KernelLibrary) -> None:
    """Conv's im2col path builds the chosen core's B panels: plain and packed weights, 1 vs 2 threads."""
    for xs, ws, group, strides, dil, pads in CONVS:
        rng = np.random.default_rng(sum(xs) + sum(ws))
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal((ws[0], xs[1] // group, ws[1], ws[2])).astype(np.float32)
        bias = rng.standard_normal(ws[0]).astype(np.float32)
        want, bound, kk = conv_reference(np_conv, x, w, bias, group=group, strides=list(strides),
                                         dilations=list(dil), pads=list(pads))
        out = want.shape[2:]
        packed = k.conv_pack(w, group)
        what = "%s conv %s * %s" % (k.backend, xs, w.shape)
        k.set_num_threads(1)
        one = k.conv2d(x, w, bias, group, strides, dil, pads, out, path="im2col")
        assert_close_to_reference(one, want, bound, kk, what)
        k.set_num_threads(2)
        two = k.conv2d(x, w, bias, group, strides, dil, pads, out, path="im2col", packed_w=packed)
        np.testing.assert_array_equal(two, one, err_msg=what + " packed, 2 threads")


def main() -> None:
    k = L.load()
    check_shapes(k)
    check_epilogues(k)
    check_strides(k)
    check_threads(k)
    check_conv(k)
    print(k.backend)


if __name__ == "__main__":
    main()
