"""The C kernels through ctypes (host builds: SIMD and plain-C vectors) against numpy, the core's
numpy kernels and the library's scalar reference path, on edge shapes."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from neon_helpers import ensure_built
from tolerance import (activation_bound, activation_reference, assert_close_to_reference,
                       conv_reference)

ensure_built()

from onnxedge.edge.neon import library as L  # noqa: E402
from onnxedge.errors import InvalidArgument  # noqa: E402
from onnxedge.kernels.conv import conv as np_conv  # noqa: E402
from onnxedge.kernels.pool import average_pool, max_pool  # noqa: E402


@pytest.fixture(params=["", "generic"], ids=["simd", "generic"])
def lib(request):
    k = L.load(request.param)
    k.set_num_threads(2)
    return k


SHAPES = [(1, 1, 1), (1, 17, 3), (7, 9, 13), (8, 8, 8), (9, 16, 1), (17, 33, 257), (64, 1, 5),
          (3, 5, 0), (130, 70, 600)]


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_sgemm_shapes_and_transposes(lib, M, N, K, ta, tb):
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    A = np.ascontiguousarray(a.T) if ta else a
    B = np.ascontiguousarray(b.T) if tb else b
    want = 0.75 * (a.astype(np.float64) @ b) - 1.5 * c
    bound = 0.75 * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1.5 * np.abs(c)
    got = lib.sgemm(A, B, bool(ta), bool(tb), alpha=0.75, beta=-1.5, c=c)
    assert_close_to_reference(got, want, bound, K + 1, "sgemm")
    pa, pb = lib.pack_a(A, bool(ta)), lib.pack_b(B, bool(tb))
    got2 = lib.sgemm(A, B, bool(ta), bool(tb), alpha=0.75, beta=-1.5, c=c, packed_a=pa, packed_b=pb)
    np.testing.assert_allclose(got2, got, rtol=1e-6, atol=1e-6)
    # alpha alone (attention's scale): the tile store scales in registers, over every K block
    got3 = lib.sgemm(A, B, bool(ta), bool(tb), alpha=0.75, packed_a=pa, packed_b=pb)
    assert_close_to_reference(got3, 0.75 * (a.astype(np.float64) @ b),
                              0.75 * (np.abs(a).astype(np.float64) @ np.abs(b)), K, "sgemm alpha")


@pytest.mark.parametrize("act,params", [("", ()), ("Relu", ()), ("Clip", (-0.5, 0.7)),
                                        ("Sigmoid", ()), ("GeluTanh", ()), ("LeakyRelu", (0.1,)),
                                        ("Tanh", ())])
@pytest.mark.parametrize("kind", [L.BIAS_ROW, L.BIAS_COL])
def test_sgemm_epilogues(lib, act, params, kind):
    rng = np.random.default_rng(3)
    M, N, K = 13, 21, 300    # K > the K block: the epilogue must run once, on the last block
    a = rng.standard_normal((M, K)).astype(np.float32) / 8
    b = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(M if kind == L.BIAS_ROW else N).astype(np.float32)
    b_abs = np.abs(bias[:, None] if kind == L.BIAS_ROW else bias[None, :])
    pre = a.astype(np.float64) @ b + (bias[:, None] if kind == L.BIAS_ROW else bias[None, :])
    bound = activation_bound(np.abs(a).astype(np.float64) @ np.abs(b) + b_abs, act)
    want = activation_reference(pre, act, params)
    got = lib.sgemm(a, b, bias=bias, bias_kind=kind, act=act, act_params=params)
    assert_close_to_reference(got, want, bound, K + 1, "sgemm " + act, rel=1e-5)
    ref = lib.sgemm(a, b, bias=bias, bias_kind=kind, act=act, act_params=params, reference=True)
    assert_close_to_reference(ref, want, bound, K + 1, "reference sgemm " + act, rel=1e-5)


def _geometry(H, W, k, s, d, pads):
    oh = (H + pads[0] + pads[2] - ((k[0] - 1) * d[0] + 1)) // s[0] + 1
    ow = (W + pads[1] + pads[3] - ((k[1] - 1) * d[1] + 1)) // s[1] + 1
    return oh, ow


CONVS = [  # (N, C, H, W), (Cout, kh, kw), group, strides, dilations, pads (t, l, b, r), paths
    ((1, 3, 9, 7), (5, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1), ["im2col", "direct3x3"]),
    ((2, 4, 8, 11), (6, 3, 3), 1, (1, 1), (1, 1), (0, 2, 1, 0), ["im2col", "direct3x3"]),
    ((1, 6, 10, 9), (6, 3, 3), 6, (2, 1), (1, 2), (1, 0, 2, 1), ["im2col", "depthwise"]),
    ((2, 5, 7, 7), (5, 5, 5), 5, (1, 1), (1, 1), (2, 2, 2, 2), ["depthwise"]),
    ((1, 6, 11, 9), (9, 3, 2), 3, (2, 2), (2, 1), (0, 1, 1, 0), ["im2col"]),
    ((2, 7, 5, 6), (4, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), ["im2col"]),
    ((1, 8, 12, 12), (16, 1, 1), 2, (2, 2), (1, 1), (0, 0, 0, 0), ["im2col"]),
    ((1, 1, 1, 1), (3, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), ["im2col"]),
    ((1, 2, 3, 3), (1, 3, 3), 1, (3, 3), (1, 1), (2, 2, 2, 2), ["im2col", "auto"]),
]


@pytest.mark.parametrize("xs,ws,group,strides,dil,pads,paths", CONVS)
def test_conv_paths_against_numpy(lib, xs, ws, group, strides, dil, pads, paths):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((ws[0], xs[1] // group, ws[1], ws[2])).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    want, bound, k = conv_reference(np_conv, x, w, b, group=group, strides=list(strides),
                                    dilations=list(dil), pads=[pads[0], pads[1], pads[2], pads[3]])
    out = _geometry(xs[2], xs[3], ws[1:], strides, dil, pads)
    assert want.shape[2:] == out
    ref = lib.conv2d(x, w, b, group, strides, dil, pads, out, reference=True)
    assert_close_to_reference(ref, want, bound, k, "reference conv")
    packed = lib.conv_pack(w, group)
    for path in paths:
        got = lib.conv2d(x, w, b, group, strides, dil, pads, out, path=path)
        assert_close_to_reference(got, want, bound, k, path)
        if path == "im2col":
            got = lib.conv2d(x, w, b, group, strides, dil, pads, out, path=path, packed_w=packed)
            assert_close_to_reference(got, want, bound, k, "packed")


def test_conv_fused_activation_and_forced_path_mismatch(lib):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    got = lib.conv2d(x, w, None, 4, (1, 1), (1, 1), (1, 1, 1, 1), (6, 6), act="Clip",
                     act_params=(0.0, 0.5))
    want, bound, k = conv_reference(np_conv, x, w, None, group=4, pads=[1, 1, 1, 1])
    assert_close_to_reference(got, np.clip(want, 0, 0.5), bound, k, "conv + Clip")
    with pytest.raises(InvalidArgument, match="rejected"):   # depthwise path on a dense conv
        lib.conv2d(x, rng.standard_normal((4, 4, 3, 3)).astype(np.float32), None, 1, (1, 1),
                   (1, 1), (1, 1, 1, 1), (6, 6), path="depthwise")


POOLS = [  # kernel, strides, dilations, pads, ceil_mode, count_include_pad
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 0, 0),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0, 1),
    ((3, 2), (2, 3), (1, 1), (1, 0, 0, 1), 1, 0),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, 1),
    ((2, 3), (1, 1), (2, 1), (0, 1, 1, 1), 0, 0),
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 0, 0),
    # column windows (CRNN-style (2, 1), (4, 1)): 8 outputs a step, a padded and dilated one
    ((2, 1), (2, 1), (1, 1), (0, 0, 0, 0), 0, 0),
    ((4, 1), (4, 1), (1, 1), (0, 0, 0, 0), 1, 0),
    ((3, 1), (1, 1), (2, 1), (1, 1, 1, 1), 0, 1),
    # MaxPool's two passes (windows larger than 2x2): every row pass (stride 1, stride 2 in
    # deinterleaved pairs with an odd or even tap count, stride 2 dilated, stride 3)
    ((5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 0, 0),
    ((4, 3), (2, 2), (1, 1), (1, 2, 2, 1), 1, 0),
    ((3, 4), (2, 2), (2, 1), (0, 1, 0, 2), 0, 0),
    ((3, 3), (3, 2), (1, 2), (1, 1, 1, 1), 1, 0),
    ((3, 3), (1, 3), (1, 1), (0, 0, 0, 0), 0, 0),
]


@pytest.mark.parametrize("k,s,d,pads,ceil,incl", POOLS)
def test_pools_against_numpy(lib, k, s, d, pads, ceil, incl):
    x = np.random.default_rng(7).standard_normal((2, 3, 9, 10)).astype(np.float32)
    attrs = dict(kernel_shape=list(k), strides=list(s), pads=list(pads), ceil_mode=ceil,
                 dilations=list(d))
    want_max = max_pool(None, x, **attrs)
    want_avg = average_pool(x, count_include_pad=incl, **attrs)
    out = want_max.shape[2:]
    for kind, want in (("max", want_max), ("avg", want_avg)):
        got = lib.pool2d(x, kind, k, s, d, pads, out, bool(incl))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=kind)
        ref = lib.pool2d(x, kind, k, s, d, pads, out, bool(incl), reference=True)
        np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-6, err_msg=kind + " reference")


@pytest.mark.parametrize("xs,k,s,pads", [
    ((1, 3, 8, 8), (5, 5), (1, 1), (2, 2, 2, 2)),          # YOLO's SPPF: an 8x8 plane, mostly border
    ((1, 2, 112, 112), (3, 3), (2, 2), (1, 1, 1, 1)),      # ResNet's stem pool
    ((2, 2, 1, 7), (3, 3), (1, 1), (1, 1, 1, 1)),          # one row: the pad rows only
    ((1, 2, 13, 37), (5, 3), (1, 2), (2, 1, 2, 1)),        # odd widths, vector and scalar tails
])
def test_max_pool_two_passes_exact_and_thread_independent(lib, xs, k, s, pads):
    """Max is exact: the two passes give numpy's values bit for bit, the generic build's, and
    the same bits on 1 and 2 threads."""
    x = np.random.default_rng(11).standard_normal(xs).astype(np.float32)
    want = max_pool(None, x, kernel_shape=list(k), strides=list(s), pads=list(pads))
    got = lib.pool2d(x, "max", k, s, (1, 1), pads, want.shape[2:], False)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, L.load("generic").pool2d(x, "max", k, s, (1, 1), pads, want.shape[2:], False))
    lib.set_num_threads(1)
    try:
        one = lib.pool2d(x, "max", k, s, (1, 1), pads, want.shape[2:], False)
    finally:
        lib.set_num_threads(2)
    assert one.tobytes() == got.tobytes()


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 5, 7), (1, 4, 16, 16), (2, 2, 3)])
def test_global_pools(lib, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(lib.global_pool(x, "avg"),
                               x.mean(axis=tuple(range(2, x.ndim)), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(lib.global_pool(x, "max"),
                                  x.max(axis=tuple(range(2, x.ndim)), keepdims=True))


@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8),
                                   (np.int8, np.uint8)])
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (3, 5, 17), (16, 7, 64), (33, 19, 100), (2, 3, 0)])
def test_qgemm_exact(lib, ta, tb, M, N, K):
    rng = np.random.default_rng(M + N + K)
    ia, ib = np.iinfo(ta), np.iinfo(tb)
    a = rng.integers(ia.min, ia.max + 1, (M, K)).astype(ta)
    b = rng.integers(ib.min, ib.max + 1, (K, N)).astype(tb)
    za = np.array(rng.integers(ia.min, ia.max + 1), ta)
    zb = rng.integers(ib.min, ib.max + 1, N).astype(tb)
    want = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
    np.testing.assert_array_equal(lib.qgemm(a, b, za, zb), want)
    np.testing.assert_array_equal(lib.qgemm(a, b, za, zb, packed_b=lib.qpack_b(b)), want)
    np.testing.assert_array_equal(lib.qgemm(a, b, za, zb, reference=True), want)
    # extreme values: every product at its largest magnitude
    a.fill(ia.min)
    b.fill(ib.min)
    want = (a.astype(np.int64) - 0) @ (b.astype(np.int64) - 0)
    np.testing.assert_array_equal(lib.qgemm(a, b, np.array(0, ta), np.array(0, tb)), want)


def test_threads_same_results_and_concurrent_callers():
    k = L.load()
    rng = np.random.default_rng(11)
    a = rng.standard_normal((200, 150)).astype(np.float32)
    b = rng.standard_normal((150, 170)).astype(np.float32)
    assert k.set_num_threads(1) == 1
    one = k.sgemm(a, b)
    assert k.set_num_threads(2) == 2
    two = k.sgemm(a, b)
    np.testing.assert_array_equal(one, two)   # blocks split the same way: bit-identical
    results = [None] * 6
    def work(i):
        results[i] = k.sgemm(a, b)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, one)


def test_bad_arguments_raise_project_errors():
    k = L.load()
    with pytest.raises(InvalidArgument, match="float32"):
        k.sgemm(np.ones((2, 2)), np.ones((2, 2), np.float32))
    with pytest.raises(InvalidArgument, match="op\\(A\\) is 2x3 but op\\(B\\) is 2x2"):
        k.sgemm(np.ones((2, 3), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(InvalidArgument, match="activation 'Swish'"):
        k.sgemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), act="Swish")
    with pytest.raises(InvalidArgument, match="int8 or uint8"):
        k.qgemm(np.ones((2, 2), np.int16), np.ones((2, 2), np.int8), 0, 0)
    with pytest.raises(InvalidArgument, match="rejected"):
        k.conv2d(np.ones((1, 2, 4, 4), np.float32), np.ones((2, 1, 3, 3), np.float32), None, 2,
                 (0, 1), (1, 1), (0, 0, 0, 0), (2, 2))


def test_library_reports_its_backend():
    assert L.load().backend in ("sse2", "sse2+fma", "avx2+fma", "avx512f", "neon", "neon+dotprod")
    assert L.load("generic").backend == "generic"
