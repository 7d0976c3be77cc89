"""The C engine's convolutions (edge/kernels/conv.c): every path of oxk_conv2d (depthwise, 1x1 at
stride 1 and 2, 3x3 and larger at strides 1/2/3, dilated, grouped; 1-D as H = 1) and the
transposed convolution (oxk_conv_transpose2d_run: pads, output_padding, strides, dilations,
groups), against the generic C build's reference kernel (oxk_ref_conv2d) and a float64 numpy
reference with tolerances scaled to magnitude and reduction length; every x86-64 ISA this CPU has
(OXK_ISA forced in a subprocess); Conv / ConvTranspose nodes through the engine (node by node,
then the compiled program, the same bits) against onnxruntime; and the ONNX node-suite cases."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import REPO, cpu_flags as _cpu_flags, ensure_built, node_suite_twice

ensure_built()

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/
from tolerance import (activation_bound, activation_reference, assert_close_to_reference,  # noqa: E402
                       conv_reference)

import onnxedge  # noqa: E402
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
from onnxedge.edge.neon import library as L  # noqa: E402
from onnxedge.kernels.conv import conv as np_conv, conv_transpose as np_convt  # noqa: E402

# (N, C, H, W, Cout, group, kh, kw, stride, dilation, pads t l b r)
CONV_CASES = [
    (1, 8, 13, 11, 8, 8, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),     # depthwise 3x3 s1
    (2, 6, 16, 15, 6, 6, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),     # depthwise 3x3 s2
    (1, 5, 7, 7, 5, 5, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),       # depthwise, 7x7 plane
    (1, 3, 9, 20, 3, 3, 5, 5, (1, 2), (2, 1), (2, 0, 3, 1)),      # depthwise 5x5, dilated, odd pads
    (1, 4, 1, 1, 4, 4, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),       # depthwise on a 1x1 plane
    # depthwise with 16 channels along the lanes (AVX-512, rows narrower than 48): a partial
    # block, batch 2; stride 2 and uneven pads; 5x5 dilated with strides (1, 2); 1-D
    (2, 24, 7, 7, 24, 24, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),
    (1, 32, 14, 13, 32, 32, 3, 3, (2, 2), (1, 1), (0, 1, 1, 1)),
    (1, 16, 9, 11, 16, 16, 5, 5, (1, 2), (2, 1), (2, 0, 3, 1)),
    (1, 20, 1, 30, 20, 20, 1, 3, (1, 1), (1, 1), (0, 1, 0, 1)),
    (1, 16, 10, 9, 24, 1, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0)),    # 1x1 = GEMM on the image
    (2, 16, 11, 10, 12, 1, 1, 1, (2, 2), (1, 1), (0, 0, 0, 0)),   # 1x1 stride 2 (phase (0, 0))
    (1, 7, 9, 9, 5, 1, 1, 1, (3, 2), (1, 1), (1, 2, 0, 1)),       # 1x1 strided and padded
    (1, 9, 12, 12, 10, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),    # 3x3 s1
    (1, 6, 15, 13, 7, 1, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),     # 3x3 s2
    (1, 3, 30, 29, 8, 1, 7, 7, (2, 2), (1, 1), (3, 3, 3, 3)),     # a 7x7 s2 stem
    (1, 4, 17, 19, 6, 1, 3, 3, (3, 3), (2, 2), (2, 1, 0, 2)),     # stride 3, dilation 2
    (2, 8, 10, 10, 12, 4, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),    # grouped
    (1, 4, 9, 9, 8, 4, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),       # depthwise with multiplier 2
    (1, 64, 40, 40, 32, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),   # big: chunked im2col + GEMM
    (1, 2, 1, 50, 4, 1, 1, 5, (1, 2), (1, 3), (0, 2, 0, 1)),      # 1-D (H = 1), dilated, strided
    (2, 6, 1, 33, 6, 6, 1, 3, (1, 1), (1, 1), (0, 1, 0, 1)),      # 1-D depthwise
    (1, 6, 1, 40, 9, 3, 1, 4, (1, 3), (1, 2), (0, 0, 0, 3)),      # 1-D grouped, dilated
    # wide output rows: the x86 AVX2/AVX-512 implicit GEMM (B read from the padded input, outputs
    # stored under lane masks per flat row); odd row counts (M % MR), flat ends inside a tile
    (1, 5, 9, 70, 13, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),     # 3x3 s1, 13 rows
    (1, 6, 11, 61, 7, 1, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),     # 3x3 s2 (phases)
    (2, 8, 6, 47, 16, 2, 3, 3, (1, 1), (1, 1), (0, 1, 2, 1)),     # grouped, batch 2, uneven pads
    (1, 3, 8, 90, 25, 1, 5, 3, (1, 1), (2, 1), (4, 1, 4, 1)),     # 5x3, dilated rows
    (1, 3, 20, 64, 16, 1, 7, 7, (2, 2), (1, 1), (3, 3, 3, 3)),    # a 7x7 s2 stem, 32 wide
    (1, 4, 1, 100, 30, 1, 1, 3, (1, 1), (1, 1), (0, 1, 0, 1)),    # 1-D, 3 taps
    (1, 2, 3, 27, 40, 1, 3, 3, (1, 1), (1, 1), (0, 0, 0, 0)),     # unpadded (read past the end)
    # 3x3 depthwise rows straight from the unpadded plane, output rows of 48 and more (interior
    # vectors, the last one moved back, border vectors from padded copies or masked loads;
    # narrower: the phases)
    (1, 4, 9, 60, 4, 4, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),      # 58 interior columns
    (2, 3, 6, 50, 3, 3, 3, 3, (1, 1), (1, 1), (0, 2, 1, 0)),      # uneven pads, batch 2
    (1, 2, 3, 70, 2, 2, 3, 3, (1, 1), (1, 1), (0, 0, 0, 0)),      # unpadded: one output row
    (1, 3, 17, 50, 3, 3, 3, 3, (1, 1), (1, 1), (2, 2, 2, 2)),     # pads 2: rows with one tap row
    (1, 2, 2, 50, 2, 2, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),      # 2 rows: no full row
    (1, 3, 29, 100, 3, 3, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),    # stride 2: deinterleaved rows
    (2, 2, 15, 99, 2, 2, 3, 3, (2, 2), (1, 1), (0, 1, 2, 0)),     # stride 2, uneven pads
    # AVX-512 loads the border vectors masked and takes rows from 24 wide (the others: 48)
    (1, 4, 9, 28, 4, 4, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),      # 28: two border vectors
    (1, 3, 7, 40, 3, 3, 3, 3, (1, 1), (1, 1), (0, 2, 1, 0)),      # 40, uneven pads: a middle one
    (1, 2, 11, 56, 2, 2, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),     # stride 2 to 28
    (1, 2, 9, 69, 2, 2, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),      # stride 2 to 35: a middle one
    (2, 3, 5, 26, 3, 3, 3, 3, (1, 1), (1, 1), (0, 0, 0, 0)),      # unpadded 24: no border vector
    # output channels along the lanes (x86 AVX-512 with packed weights of whole panels of NR
    # channels: the B panels; forced on AVX2 too; positions broadcast per row segment, stored
    # transposed)
    (1, 16, 14, 14, 32, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),   # 14-wide rows
    (1, 8, 9, 23, 64, 1, 3, 3, (2, 2), (1, 1), (1, 0, 1, 2)),     # stride 2, uneven pads
    (2, 16, 7, 7, 64, 2, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),     # grouped, batch 2, 7-wide rows
    (1, 12, 5, 33, 48, 1, 3, 3, (1, 1), (2, 2), (2, 1, 2, 3)),    # dilated; 48 = 1.5 AVX-512 panels
    (1, 9, 6, 31, 32, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),     # 31 = uneven row segments
    (1, 16, 1, 45, 32, 1, 1, 5, (1, 1), (1, 1), (0, 2, 0, 2)),    # 1-D
    # long K over many row segments; a partial last panel
    (1, 40, 6, 37, 64, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),    # K = 360, 18 segments
    (1, 33, 4, 20, 48, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),    # K = 297, 48 = 1.5 panels
    (1, 64, 3, 21, 32, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),    # K = 576
]
# The backends with the lanes path (forced on every case there)
LANES_ISAS = ("avx2+fma", "avx512f")
ACTS = [("", ()), ("Relu", ()), ("Clip", (0.0, 6.0)), ("Sigmoid", ())]


def _out(size, k, s, d, b, e):
    return (size + b + e - (k - 1) * d - 1) // s + 1


def _case(c, seed):
    N, C, H, W, Co, g, kh, kw, st, dl, pads = c
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((Co, C // g, kh, kw)).astype(np.float32)
    b = rng.standard_normal(Co).astype(np.float32)
    hw = (_out(H, kh, st[0], dl[0], pads[0], pads[2]), _out(W, kw, st[1], dl[1], pads[1], pads[3]))
    return x, w, b, hw


def check_conv_paths(lib: L.KernelLibrary, ref: L.KernelLibrary) -> None:
    """Every CONV_CASES x activation x packed/unpacked weights against float64 and oxk_ref_conv2d."""
    for i, c in enumerate(CONV_CASES):
        _, _, _, _, _, g, _, _, st, dl, pads = c
        x, w, b, hw = _case(c, i)
        want, bound, k = conv_reference(np_conv, x, w, b, group=g, strides=list(st), dilations=list(dl),
                                        pads=[pads[0], pads[1], pads[2], pads[3]])
        for act, p in ACTS:
            for packed in (None, lib.conv_pack(w, g)):
                got = lib.conv2d(x, w, b, g, st, dl, pads, hw, act, p, packed_w=packed)
                what = "conv case %d %s act %r packed %s" % (i, c, act, packed is not None)
                assert_close_to_reference(got, activation_reference(want, act, p),
                                          activation_bound(bound, act), k, what, rel=1e-6)
                base = ref.conv2d(x, w, b, g, st, dl, pads, hw, act, p, reference=True)
                assert_close_to_reference(got, base, 2 * activation_bound(bound, act), k, what + " vs ref",
                                          rel=1e-6)
                if lib.backend in LANES_ISAS and act in ("Relu", "Sigmoid"):   # forced lanes path
                    got = lib.conv2d(x, w, b, g, st, dl, pads, hw, act, p, packed_w=packed, path="lanes")
                    assert_close_to_reference(got, activation_reference(want, act, p),
                                              activation_bound(bound, act), k, what + " lanes", rel=1e-6)
            if g == x.shape[1] == w.shape[0]:   # depthwise: the phases path forced, the same bits
                phases = lib.conv2d(x, w, b, g, st, dl, pads, hw, act, p, path="depthwise_phases")
                assert phases.tobytes() == lib.conv2d(x, w, b, g, st, dl, pads, hw, act, p).tobytes(), what
        if lib.backend not in LANES_ISAS:
            with pytest.raises(onnxedge.errors.InvalidArgument):
                lib.conv2d(x, w, b, g, st, dl, pads, hw, path="lanes")
        check_residual(lib, c, i)


def conv_z(lib: L.KernelLibrary, x, w, b, g, st, dl, pads, hw, act, p, z, packed=None, path="auto"):
    """oxk_conv2d_run_z: act(conv(x) + b + z) through a plan."""
    plan = lib.conv_plan(x.shape, w, b, g, st, dl, pads, hw, act, p, packed_w=packed, path=path)
    y = np.empty(z.shape, np.float32)
    lib.check(lib.function("oxk_conv2d_run_z")(plan.addr, x.shape[0], x.ctypes.data, z.ctypes.data,
                                               y.ctypes.data), "conv2d_run_z")
    return y


def check_residual(lib: L.KernelLibrary, c, i) -> None:
    """FusedConv's Z through oxk_conv2d_run_z (the lanes path adds it in its store, the others
    after): the bits of conv + bias, + Z, then the activation as separate steps, and float64."""
    _, _, _, _, _, g, _, _, st, dl, pads = c
    x, w, b, hw = _case(c, i)
    packed = lib.conv_pack(w, g)
    z = np.random.default_rng(50 + i).standard_normal((x.shape[0], w.shape[0]) + tuple(hw)).astype(np.float32)
    want, bound, k = conv_reference(np_conv, x, w, b, group=g, strides=list(st), dilations=list(dl),
                                    pads=[pads[0], pads[1], pads[2], pads[3]])
    paths = ["auto"] + (["lanes"] if lib.backend in LANES_ISAS else [])
    for act, p in (("", ()), ("Relu", ()), ("Clip", (-0.5, 0.7)), ("Sigmoid", ())):
        for path in paths:
            what = "conv case %d %s + Z, act %r path %s" % (i, c, act, path)
            got = conv_z(lib, x, w, b, g, st, dl, pads, hw, act, p, z, packed, path)
            plain = conv_z(lib, x, w, b, g, st, dl, pads, hw, "", (), np.zeros_like(z), packed, path) \
                if path == "lanes" else lib.conv2d(x, w, b, g, st, dl, pads, hw, packed_w=packed, path=path)
            steps = plain + z
            steps = lib.act(steps, act, p) if act else steps
            assert got.tobytes() == steps.tobytes(), what
            assert_close_to_reference(got, activation_reference(want + z, act, p),
                                      activation_bound(bound + np.abs(z), act), k + 1, what, rel=1e-6)


def check_convt(lib: L.KernelLibrary) -> None:
    """ConvTranspose plans against the numpy kernel in float64."""
    for i, (xs, ws, g, st, dl, pads, opad) in enumerate(CONVT_CASES):
        rng = np.random.default_rng(100 + i)
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        b = rng.standard_normal(ws[1] * g).astype(np.float32)
        nd = len(xs) - 2
        attrs = dict(group=g, strides=list(st), dilations=list(dl), pads=list(pads), output_padding=list(opad))
        want = np_convt(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), **attrs)
        bound = np_convt(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                         np.abs(b).astype(np.float64), **attrs)
        k = (xs[1] // g) * int(np.prod(ws[2:])) + 1
        if nd == 1:
            x4, w4 = x[:, :, None], w[:, :, None]
            st, dl, beg, hw = (1, st[0]), (1, dl[0]), (0, pads[0]), (1, want.shape[2])
        else:
            x4, w4, beg, hw = x, w, (pads[0], pads[1]), want.shape[2:]
        for packed in (None, lib.convt_pack(w4, g)):
            got = lib.conv_transpose2d(x4, w4, b, g, st, dl, beg, hw, packed_w=packed)
            assert_close_to_reference(got.reshape(want.shape), want, bound, k,
                                      "convt case %d packed %s" % (i, packed is not None))


# (x shape, W shape (C, Cout/group, k...), group, strides, dilations, pads (begins + ends), output_padding)
CONVT_CASES = [
    ((1, 4, 6, 5), (4, 3, 2, 2), 1, (2, 2), (1, 1), (0, 0, 0, 0), (0, 0)),     # 2x upsampling
    ((2, 6, 5, 7), (6, 2, 3, 3), 2, (2, 2), (1, 1), (1, 1, 1, 1), (1, 1)),     # grouped, output_padding
    ((1, 3, 4, 4), (3, 5, 3, 2), 1, (3, 1), (2, 1), (2, 0, 1, 1), (1, 0)),     # stride 3, dilation
    ((1, 8, 1, 1), (8, 1, 4, 4), 8, (2, 2), (1, 1), (1, 1, 1, 1), (0, 0)),     # depthwise, 1x1 input
    ((1, 32, 20, 20), (32, 16, 2, 2), 1, (2, 2), (1, 1), (0, 0, 0, 0), (0, 0)),
    ((2, 4, 11), (4, 3, 4), 1, (2,), (1,), (1, 1), (0,)),                      # 1-D
    ((1, 6, 9), (6, 1, 3), 3, (3,), (2,), (0, 2), (2,)),                        # 1-D grouped, dilated
]


def test_conv_paths_against_float64_and_the_reference_kernel():
    lib, ref = L.load(), L.load("generic")
    check_conv_paths(lib, ref)
    check_conv_paths(ref, ref)


def test_conv_transpose_against_float64():
    check_convt(L.load())
    check_convt(L.load("generic"))


POINTWISE = [(64, 96, 7, 7), (96, 64, 8, 8), (32, 160, 5, 9), (64, 64, 1, 40)]   # Cout, Cin, H, W


def test_pointwise_lanes_packed_against_float64():
    """Pointwise convs on few positions: output channels along the lanes on their own packing
    (oxk_conv_pack_lanes, path lanes_packed; AVX-512 only), activations and a residual Z."""
    lib = L.load()
    for i, (co, ci, h, w_) in enumerate(POINTWISE):
        rng = np.random.default_rng(70 + i)
        x = rng.standard_normal((2, ci, h, w_)).astype(np.float32)
        w = rng.standard_normal((co, ci, 1, 1)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        fits = lib.conv_lanes_fits(w, h * w_)
        assert fits == (lib.backend == "avx512f"), (lib.backend, co, ci, h, w_)
        assert not lib.conv_lanes_fits(w, 65)
        if not fits:
            continue
        pw = lib.conv_pack_lanes(w)
        want, bound, k = conv_reference(np_conv, x, w, b, group=1, pads=[0, 0, 0, 0])
        z = rng.standard_normal(want.shape).astype(np.float32)
        for act, p in ACTS:
            what = "pointwise %s act %r" % ((co, ci, h, w_), act)
            got = lib.conv2d(x, w, b, 1, (1, 1), (1, 1), (0, 0, 0, 0), (h, w_), act, p, packed_w=pw,
                             path="lanes_packed")
            assert_close_to_reference(got, activation_reference(want, act, p),
                                      activation_bound(bound, act), k, what, rel=1e-6)
            got = conv_z(lib, x, w, b, 1, (1, 1), (1, 1), (0, 0, 0, 0), (h, w_), act, p, z, pw, "lanes_packed")
            assert_close_to_reference(got, activation_reference(want + z, act, p),
                                      activation_bound(bound + np.abs(z), act), k + 1, what + " + Z", rel=1e-6)
    with pytest.raises(onnxedge.errors.InvalidArgument):   # a 3x3 kernel has no such packing
        x = np.zeros((1, 4, 5, 5), np.float32)
        lib.conv2d(x, np.zeros((4, 4, 3, 3), np.float32), None, 1, (1, 1), (1, 1), (1, 1, 1, 1), (5, 5),
                   packed_w=np.zeros(64, np.float32), path="lanes_packed")


# Winograd F(2x2, 3x3): N, Cin, H, W, Cout, pads (t, l, b, r). Odd and even outputs, asymmetric
# pads, channel counts off the SGEMM tiles, and (256 + 256 channels: 32 tiles a block) blocks
# that start inside a row of tiles.
WINOGRAD_CASES = [(2, 32, 8, 8, 32, (1, 1, 1, 1)), (1, 40, 9, 13, 36, (0, 2, 1, 0)),
                  (1, 64, 5, 30, 72, (1, 1, 1, 1)), (1, 256, 20, 22, 256, (1, 1, 1, 1)),
                  (1, 33, 3, 3, 48, (2, 2, 2, 2))]


def check_winograd(lib: L.KernelLibrary) -> None:
    """Path 'winograd' against float64 (activations, a residual Z), and 1 and 2 threads bitwise."""
    for i, (n, ci, h, w_, co, pads) in enumerate(WINOGRAD_CASES):
        rng = np.random.default_rng(90 + i)
        x = rng.standard_normal((n, ci, h, w_)).astype(np.float32)
        w = rng.standard_normal((co, ci, 3, 3)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        hw = (h + pads[0] + pads[2] - 2, w_ + pads[1] + pads[3] - 2)
        pw = lib.conv_pack_winograd(w)
        want, bound, k = conv_reference(np_conv, x, w, b, group=1, pads=[pads[0], pads[1], pads[2], pads[3]])
        z = rng.standard_normal(want.shape).astype(np.float32)
        for act, p in ACTS:
            what = "winograd %s act %r (%s)" % ((n, ci, h, w_, co, pads), act, lib.backend)
            got = lib.conv2d(x, w, b, 1, (1, 1), (1, 1), pads, hw, act, p, packed_w=pw, path="winograd")
            assert_close_to_reference(got, activation_reference(want, act, p), activation_bound(bound, act), k,
                                      what, rel=1e-6)
            got = conv_z(lib, x, w, b, 1, (1, 1), (1, 1), pads, hw, act, p, z, pw, "winograd")
            assert_close_to_reference(got, activation_reference(want + z, act, p),
                                      activation_bound(bound + np.abs(z), act), k + 1, what + " + Z", rel=1e-6)
    old = lib.num_threads()
    try:
        outs = []
        for t in (1, 2):
            lib.set_num_threads(t)
            n, ci, h, w_, co, pads = WINOGRAD_CASES[3]
            rng = np.random.default_rng(7)
            x = rng.standard_normal((n, ci, h, w_)).astype(np.float32)
            w = rng.standard_normal((co, ci, 3, 3)).astype(np.float32)
            outs.append(lib.conv2d(x, w, None, 1, (1, 1), (1, 1), pads, (h, w_), "Relu",
                                   packed_w=lib.conv_pack_winograd(w), path="winograd").tobytes())
        assert outs[0] == outs[1]
    finally:
        lib.set_num_threads(old)


def test_winograd_against_float64():
    """3x3 stride-1 convs by F(2x2, 3x3) (oxk_conv_pack_winograd, path winograd) on the chosen
    core and the generic build: within the transforms' tolerance of float64."""
    check_winograd(L.load())
    check_winograd(L.load("generic"))


def test_winograd_choice_and_refusals():
    """oxk_conv_winograd_size: few channels or outputs keep the direct paths, and large weights
    need many tiles; the path refuses what it cannot run (a stride, no packing)."""
    lib = L.load()
    w = np.zeros((64, 64, 3, 3), np.float32)

    def fits(w, hw, group=1, strides=(1, 1), dil=(1, 1)):
        return lib.conv_winograd_fits(w, group, strides, dil, hw)

    assert fits(w, (8, 32)) and fits(w, (7, 7))
    assert not fits(np.zeros((64, 16, 3, 3), np.float32), (32, 32))
    assert not fits(w, (4, 4))                                          # 4 tiles
    big = np.zeros((512, 512, 3, 3), np.float32)                      # 16 MB transformed
    assert fits(big, (16, 16)) and not fits(big, (7, 7))
    assert not fits(w, (16, 16), strides=(2, 2)) and not fits(w, (16, 16), dil=(2, 2))
    assert not fits(np.zeros((64, 32, 3, 3), np.float32), (16, 16), group=2)
    assert not fits(np.zeros((64, 64, 5, 5), np.float32), (16, 16))
    x = np.zeros((1, 64, 8, 8), np.float32)
    pw = lib.conv_pack_winograd(w)
    with pytest.raises(onnxedge.errors.InvalidArgument):
        lib.conv2d(x, w, None, 1, (2, 2), (1, 1), (1, 1, 1, 1), (4, 4), packed_w=pw, path="winograd")
    with pytest.raises(onnxedge.errors.InvalidArgument):
        lib.conv2d(x, w, None, 1, (1, 1), (1, 1), (1, 1, 1, 1), (8, 8), path="winograd")
    with pytest.raises(onnxedge.errors.InvalidArgument):
        lib.conv_pack_winograd(np.zeros((4, 4, 5, 5), np.float32))


def test_conv_forced_paths_and_threads_bitwise():
    """Forced depthwise / direct3x3 agree with im2col within tolerance; 1 and 2 threads give the
    same bits (K is never split, col2im adds taps in order)."""
    lib = L.load()
    x, w, b, hw = _case(CONV_CASES[0], 0)
    a = lib.conv2d(x, w, b, 8, (1, 1), (1, 1), (1, 1, 1, 1), hw, "Relu", path="depthwise")
    c = lib.conv2d(x, w, b, 8, (1, 1), (1, 1), (1, 1, 1, 1), hw, "Relu", path="im2col")
    np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-5)
    with pytest.raises(onnxedge.errors.InvalidArgument):
        lib.conv2d(x, w, b, 8, (1, 1), (1, 1), (1, 1, 1, 1), hw, path="direct3x3")
    old = lib.num_threads()
    try:
        outs = []
        for t in (1, 2):
            lib.set_num_threads(t)
            outs.append([lib.conv2d(*_case(c, 7)[:3], c[5], c[8], c[9], c[10], _case(c, 7)[3], "Relu",
                                    packed_w=lib.conv_pack(_case(c, 7)[1], c[5])).tobytes()
                         for c in CONV_CASES[13:16] + CONV_CASES[18:]])
            rng = np.random.default_rng(3)
            x = rng.standard_normal((1, 32, 20, 20)).astype(np.float32)
            w = rng.standard_normal((32, 16, 2, 2)).astype(np.float32)
            outs[-1].append(lib.conv_transpose2d(x, w, None, 1, (2, 2), (1, 1), (0, 0), (40, 40)).tobytes())
        assert outs[0] == outs[1]
    finally:
        lib.set_num_threads(old)


def test_bad_arguments_are_rejected_not_crashed():
    lib = L.load()
    f = lib.function("oxk_conv_transpose2d_run")
    st = lib.structs["oxk_convt_plan"](3, 4, 4, 5, 2, 2, 2, 1, 1, 1, 1, 0, 0, 5, 5, 0, 0.0, 0.0, None, None, None)
    assert f(L.ctypes.addressof(st), 1, None, None) == -1   # odd C for group 2, no weight
    x = np.zeros((1, 4, 4, 4), np.float32)
    with pytest.raises(onnxedge.errors.InvalidArgument):
        lib.conv2d(x, np.zeros((4, 4, 3, 3), np.float32), None, 1, (0, 1), (1, 1), (0, 0, 0, 0), (2, 2))


ISAS = {"sse2": set(), "avx2": {"avx2", "fma"}, "avx512": {"avx2", "fma", "avx512f"}}


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="OXK_ISA chooses among the x86-64 host build's cores")
@pytest.mark.parametrize("isa", list(ISAS))
def test_conv_per_forced_isa(isa):
    if not ISAS[isa] <= _cpu_flags():
        pytest.skip("this CPU lacks %s" % ", ".join(sorted(ISAS[isa] - _cpu_flags())))
    code = ("import sys; sys.path[:0] = [%r, %r]\n"
            "import test_engine_conv as t; from onnxedge.edge.neon import library as L\n"
            "t.check_conv_paths(L.load(), L.load('generic')); t.check_convt(L.load()); t.check_winograd(L.load())\n"
            "print(L.load().backend)") % (os.path.dirname(os.path.abspath(__file__)),
                                          os.path.join(REPO, "tests"))
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, OXK_ISA=isa),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.split()[-1] == {"sse2": "sse2", "avx2": "avx2+fma", "avx512": "avx512f"}[isa]


# ------------------------------------------------------------------ through a session

def _model(op, xs, ws, bs, act=None, **attrs):
    rng = np.random.default_rng(len(xs) * 7 + ws[0])
    w = rng.standard_normal(ws).astype(np.float32)
    nodes = [helper.make_node(op, ["x", "w", "b"], ["y" if act else "z"], **attrs)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(bs).astype(np.float32), "b")]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    elif act == "Clip":
        inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
        nodes.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


SESSION_CASES = [
    ("Conv", (2, 4, 50), (6, 2, 5), (6,), "Relu", dict(group=2, strides=[2], dilations=[2], pads=[1, 3])),
    ("Conv", (1, 8, 37), (8, 1, 3), (8,), "Clip", dict(group=8, pads=[1, 1])),
    ("Conv", (1, 12, 15, 15), (12, 1, 3, 3), (12,), "Clip", dict(group=12, strides=[2, 2], pads=[1, 1, 1, 1])),
    ("Conv", (1, 96, 7, 7), (64, 96, 1, 1), (64,), "Clip", {}),       # pointwise, few positions:
    ("Conv", (2, 64, 40), (32, 64, 1), (32,), "Relu", {}),             # channels along the lanes on
    ("Conv", (1, 64, 9, 9), (32, 64, 1, 1), (32,), None, {}),          # AVX-512 (81 positions: GEMM)
    ("Conv", (1, 48, 10, 17), (40, 48, 3, 3), (40,), "Relu", dict(pads=[1, 1, 1, 1])),   # Winograd
    ("ConvTranspose", (1, 4, 9, 7), (4, 3, 2, 2), (6,), "Relu", dict(group=2, strides=[2, 2])),
    ("ConvTranspose", (2, 4, 9, 7), (4, 3, 3, 3), (3,), None,
     dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ("ConvTranspose", (2, 4, 20), (4, 3, 4), (3,), None, dict(strides=[2], pads=[1, 1])),
]


@pytest.mark.parametrize("op,xs,ws,bs,act,attrs", SESSION_CASES)
def test_conv_nodes_through_the_engine(op, xs, ws, bs, act, attrs):
    ort = pytest.importorskip("onnxruntime")
    model = _model(op, xs, ws, bs, act, **attrs)
    x = np.random.default_rng(5).standard_normal(xs).astype(np.float32)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    sess = onnxedge.InferenceSession(model)
    on = {r["op_type"] for r in sess.partition_report() if r["provider"] == ENGINE}
    assert on & {op, "FusedConv"}, sess.partition_report()
    first, second = sess.run(None, {"x": x})[0], sess.run(None, {"x": x})[0]
    assert first.tobytes() == second.tobytes()   # node by node, then the program: the same kernel
    steps = [s for s in sess._plan.steps if s.provider == ENGINE]
    assert any(p is not None for s in steps if s.programs for p in s.programs.programs.values())
    scale = float(np.abs(want).max()) + 1.0
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-5 * scale * np.sqrt(np.prod(ws[1:])))


def test_node_suite_conv_cases():
    took, programs = node_suite_twice(("Conv", "ConvTranspose"), lambda m: onnxedge.InferenceSession(m),
                                      freeze=("W", "B"))
    if took == 0:
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    assert took >= 10 and programs == took, (took, programs)
