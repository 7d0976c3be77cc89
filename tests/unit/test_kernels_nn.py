"""Unit tests of the neural-network kernels: Conv family, pooling, normalizations and Resize.

Kernels are called through the registry at a given opset and compared with onnxruntime (when
installed), with direct numpy formulations, and with onnx's reference evaluator, on the shapes
that break such kernels: non-square and odd sizes, groups and depthwise, dilations, asymmetric
pads, automatic padding, ceil mode, float16/float64, integer images. Runs on Python 3.8 +
numpy 1.17 + onnx 1.14 too, where the onnxruntime comparisons are skipped.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import onnxedge.kernels.conv  # noqa: F401  (registers the kernels)
import onnxedge.kernels.normalization  # noqa: F401
import onnxedge.kernels.pool  # noqa: F401
import onnxedge.kernels.resize  # noqa: F401
from onnxedge.errors import InvalidArgument
from onnxedge.kernels import registry

try:
    import onnxruntime as ort
except ImportError:  # Python 3.8 test environment
    ort = None

needs_ort = pytest.mark.skipif(ort is None, reason="onnxruntime is not installed")
RNG = np.random.RandomState(7)


class Ctx:
    """The part of KernelContext that these kernels read."""

    def __init__(self, n_out, opset=22):
        self.num_outputs = n_out
        self.outputs_wanted = [True] * n_out
        self.opset = opset


def run(op, opset, *inputs, **attrs):
    """Call the kernel that serves `op` at `opset` (with a ctx when it asks for one)."""
    n_out = attrs.pop("_n_out", 1)
    fn = registry.resolve("", op, opset).fn
    if registry.signature(fn).wants_ctx:
        return fn(Ctx(n_out, opset), *inputs, **attrs)
    return fn(*inputs, **attrs)


def _tensor_type(dtype):
    from onnx import helper
    if hasattr(helper, "np_dtype_to_tensor_dtype"):
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    from onnx import mapping
    return mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]


def _model(op, opset, inputs, attrs, n_out):
    from onnx import ValueInfoProto, helper
    names = ["in%d" % i if x is not None else "" for i, x in enumerate(inputs)]
    outs = ["out%d" % i for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, _tensor_type(x.dtype), x.shape)
         for n, x in zip(names, inputs) if x is not None],
        [ValueInfoProto(name=o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, {n: x for n, x in zip(names, inputs) if x is not None}


def ort_run(op, opset, inputs, attrs=None, n_out=1):
    """onnxruntime's result for a one-node model (the test is skipped without onnxruntime)."""
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    model, feeds = _model(op, opset, inputs, attrs or {}, n_out)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def reference(op, opset, inputs, attrs=None, n_out=1):
    """onnx's reference evaluator on a one-node model."""
    pytest.importorskip("onnx.reference")
    from onnx.reference import ReferenceEvaluator
    model, feeds = _model(op, opset, inputs, attrs or {}, n_out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(model).run(None, feeds)


def rand(*shape, **kw):
    dtype = kw.get("dtype", np.float32)
    return RNG.uniform(kw.get("lo", -2.0), kw.get("hi", 2.0), size=shape).astype(dtype)


def assert_close(got, want, rtol=1e-4, atol=1e-4):
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol)


# ------------------------------------------------------------------------------ Conv references

def naive_conv(x, w, b=None, strides=None, pads=None, dilations=None, group=1):
    """Direct float64 convolution: a loop over kernel taps, explicit padding."""
    nd = x.ndim - 2
    strides = strides or [1] * nd
    dilations = dilations or [1] * nd
    pads = pads or [0] * (2 * nd)
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    N, C = x.shape[:2]
    M = w.shape[0]
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - (k[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((N, M) + tuple(out))
    cg, mg = C // group, M // group
    for g in range(group):
        for taps in itertools.product(*[range(n) for n in k]):
            sl = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                       for t, d, o, s in zip(taps, dilations, out, strides))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            wt = w[(slice(g * mg, (g + 1) * mg), slice(None)) + taps]
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wt)
    if b is not None:
        y += b.astype(np.float64).reshape((1, M) + (1,) * nd)
    return y


CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 3, 7, 9), (4, 3, 3, 3), dict(pads=[1, 0, 2, 1])),
    ((2, 4, 8, 5), (6, 2, 3, 2), dict(group=2, strides=[2, 1], pads=[1, 1, 0, 1])),
    ((1, 6, 9, 9), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),             # depthwise
    ((1, 3, 9, 8), (6, 1, 3, 3), dict(group=3, strides=[2, 2], dilations=[1, 2])),  # multiplier
    ((2, 5, 11, 10), (7, 5, 3, 3), dict(dilations=[2, 3], pads=[2, 3, 1, 0])),
    ((1, 8, 6, 7), (5, 8, 1, 1), {}),                                            # 1x1
    ((1, 8, 9, 7), (5, 8, 1, 1), dict(strides=[2, 3])),                          # 1x1 strided
    ((1, 8, 6, 7), (4, 2, 1, 1), dict(group=4)),                                 # grouped 1x1
    ((2, 3, 10), (4, 3, 4), dict(strides=[3], pads=[2, 1], dilations=[2])),      # 1-D
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 2, 1])),          # 3-D
    ((1, 16, 20, 13), (12, 16, 3, 3), dict(pads=[1, 1, 1, 1])),                  # Winograd F4
    ((2, 16, 9, 11), (10, 16, 3, 3), dict(pads=[0, 1, 2, 1])),                   # Winograd F2
    ((1, 16, 30, 30), (8, 16, 3, 3), {}),                                        # no pads
    ((2, 6, 100, 90), (4, 3, 5, 5), dict(group=2, pads=[1, 2, 0, 1])),           # row bands
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_matches_direct_convolution(xs, ws, attrs, bias):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    got = run("Conv", 22, x, w, b, **attrs)
    want = naive_conv(x, w, b, attrs.get("strides"), attrs.get("pads"), attrs.get("dilations"),
                      attrs.get("group", 1))
    assert_close(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("read_only", [False, True])
def test_conv_winograd_paths_and_weight_cache(read_only):
    for xs, pads in [((1, 32, 28, 28), [1, 1, 1, 1]), ((1, 16, 14, 14), [1, 1, 1, 1]),
                     ((3, 8, 13, 17), [0, 2, 1, 0])]:
        x, w = rand(*xs), rand(24, xs[1], 3, 3)
        w.flags.writeable = not read_only
        want = naive_conv(x, w, pads=pads).astype(np.float32)
        tol = 2e-5 * np.abs(want).max()     # Winograd's error scales with the sums, not the result
        for _ in range(2):   # the second call hits the transformed-weight cache
            assert_close(run("Conv", 11, x, w, pads=pads), want, rtol=0, atol=tol)
        w2 = w.copy()        # a new weight object must not reuse the old transform
        w2 *= -1
        w2.flags.writeable = not read_only
        assert_close(run("Conv", 11, x, w2, pads=pads), -want, rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_conv_keeps_dtype(dtype):
    x, w, b = rand(1, 3, 6, 5, dtype=dtype), rand(4, 3, 3, 3, dtype=dtype), rand(4, dtype=dtype)
    got = run("Conv", 22, x, w, b, pads=[1, 1, 1, 1])
    want = naive_conv(x, w, b, pads=[1, 1, 1, 1]).astype(dtype)
    assert_close(got, want, rtol=1e-2 if dtype == np.float16 else 1e-10,
                 atol=1e-2 if dtype == np.float16 else 1e-10)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("strides", [[1, 1], [2, 3], [3, 1]])
def test_conv_auto_pad_matches_onnxruntime(auto_pad, strides):
    x, w = rand(1, 3, 8, 7), rand(2, 3, 3, 2)
    attrs = dict(auto_pad=auto_pad, strides=strides)
    assert_close(run("Conv", 11, x, w, **attrs), ort_run("Conv", 11, [x, w], attrs)[0])


def test_conv_same_padding_with_dilations():
    # onnxruntime refuses this; the spec pads for the dilated kernel: (3-1)*2+1 = 5 -> 4 pads
    x, w = rand(1, 2, 7, 6), rand(3, 2, 3, 3)
    got = run("Conv", 11, x, w, auto_pad="SAME_LOWER", dilations=[2, 2])
    assert_close(got, naive_conv(x, w, pads=[2, 2, 2, 2], dilations=[2, 2]).astype(np.float32))
    got = run("Conv", 11, x, w, auto_pad="SAME_UPPER", dilations=[2, 1], strides=[2, 2])
    # height: out 4, total pad 3*2 + 5 - 7 = 4 (2+2); width: out 3, total 2*2 + 3 - 6 = 1 (0+1)
    assert_close(got, naive_conv(x, w, pads=[2, 0, 2, 1], dilations=[2, 1],
                                 strides=[2, 2]).astype(np.float32))


def test_conv_kernel_shape_attribute_and_errors():
    x, w = rand(1, 4, 5, 5), rand(2, 4, 3, 3)
    assert run("Conv", 1, x, w, kernel_shape=[3, 3]).shape == (1, 2, 3, 3)
    bad = [
        ((x, rand(2, 3, 3, 3)), {}),                 # channel mismatch
        ((x, w), dict(kernel_shape=[2, 2])),          # kernel_shape disagrees with W
        ((x, w), dict(strides=[1])),                  # wrong attribute length
        ((x, w), dict(pads=[1, 1, 1])),
        ((x, w), dict(group=3)),
        ((x, rand(2, 4, 7, 7)), {}),                  # kernel larger than the input
        ((x, w, rand(3)), {}),                        # bias of the wrong length
        ((rand(4, 5), rand(2, 4)), {}),               # rank < 3
        ((x, w), dict(auto_pad="SAME")),
    ]
    for args, attrs in bad:
        with pytest.raises(InvalidArgument) as err:
            run("Conv", 11, *args, **attrs)
        assert "Conv" in str(err.value)


# ------------------------------------------------------------------------- ConvTranspose

def naive_conv_transpose(x, w, strides, pads, dilations, output_padding, group=1):
    """Scatter-add definition of the transposed convolution (float64)."""
    nd = x.ndim - 2
    N, C = x.shape[:2]
    mg = w.shape[1]
    k = w.shape[2:]
    full = [(x.shape[2 + i] - 1) * strides[i] + (k[i] - 1) * dilations[i] + 1 + output_padding[i]
            for i in range(nd)]
    y = np.zeros((N, mg * group) + tuple(full))
    cg = C // group
    for g in range(group):
        for c in range(cg):
            for m in range(mg):
                for pos in itertools.product(*[range(n) for n in x.shape[2:]]):
                    for taps in itertools.product(*[range(n) for n in k]):
                        o = tuple(p * s + t * d
                                  for p, s, t, d in zip(pos, strides, taps, dilations))
                        y[(slice(None), g * mg + m) + o] += \
                            x[(slice(None), g * cg + c) + pos] * w[(g * cg + c, m) + taps]
    crop = tuple(slice(pads[i], full[i] - pads[i + nd]) for i in range(nd))
    return y[(slice(None), slice(None)) + crop]


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 2, 3, 4), (2, 3, 3, 2), dict(strides=[2, 3], pads=[1, 0, 0, 1])),
    ((2, 4, 3, 3), (4, 2, 2, 3), dict(group=2, dilations=[2, 1], output_padding=[1, 0],
                                      strides=[2, 2])),
    ((1, 3, 5), (3, 2, 3), dict(strides=[2], pads=[1, 2])),
    ((1, 1, 2, 3, 2), (1, 2, 2, 2, 3), dict(strides=[1, 2, 1])),
])
def test_conv_transpose_matches_scatter_definition(xs, ws, attrs):
    x, w = rand(*xs), rand(*ws)
    nd = x.ndim - 2
    want = naive_conv_transpose(x, w, attrs.get("strides", [1] * nd),
                                attrs.get("pads", [0] * 2 * nd),
                                attrs.get("dilations", [1] * nd),
                                attrs.get("output_padding", [0] * nd), attrs.get("group", 1))
    assert_close(run("ConvTranspose", 22, x, w, **attrs), want.astype(np.float32))


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(strides=[3, 2], auto_pad="SAME_LOWER"),
    dict(strides=[2, 3], output_shape=[9, 11]),
    dict(strides=[2, 2], output_shape=[8, 9], output_padding=[1, 1]),
    dict(strides=[2, 2], pads=[1, 0, 1, 2], output_padding=[1, 0], dilations=[1, 2]),
    dict(auto_pad="VALID", strides=[2, 1]),
])
def test_conv_transpose_matches_onnxruntime(attrs):
    x, w, b = rand(1, 2, 4, 5), rand(2, 3, 3, 3), rand(3)
    got = run("ConvTranspose", 11, x, w, b, **attrs)
    assert_close(got, ort_run("ConvTranspose", 11, [x, w, b], attrs)[0])
    if "output_shape" in attrs:   # the full (N, C, ...) form means the same
        full = dict(attrs, output_shape=[1, 3] + attrs["output_shape"])
        assert_close(run("ConvTranspose", 11, x, w, b, **full), got, 0, 0)


def test_conv_integer_matches_definition():
    x = RNG.randint(0, 256, size=(1, 3, 6, 5)).astype(np.uint8)
    w = RNG.randint(0, 256, size=(4, 3, 3, 2)).astype(np.uint8)
    xz, wz = np.array(128, np.uint8), np.array(7, np.uint8)
    got = run("ConvInteger", 10, x, w, xz, wz, pads=[1, 0, 1, 1])
    # padding holds the zero point, i.e. contributes nothing once it is subtracted
    want = naive_conv(x.astype(np.float64) - 128, w.astype(np.float64) - 7, pads=[1, 0, 1, 1])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))
    if ort is not None:
        np.testing.assert_array_equal(
            got, ort_run("ConvInteger", 10, [x, w, xz, wz], dict(pads=[1, 0, 1, 1]))[0])


# ------------------------------------------------------------------------------- pooling

POOL_GRID = [
    # (input shape, attrs)
    ((1, 2, 7, 9), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])),
    ((2, 1, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 3, 9, 7), dict(kernel_shape=[2, 3], strides=[3, 2], dilations=[2, 1], ceil_mode=1)),
    ((1, 2, 6, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 2, 6, 7), dict(kernel_shape=[2, 3], strides=[1, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], auto_pad="VALID")),
    ((1, 2, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 2], ceil_mode=1)),
    ((1, 1, 5, 6, 7), dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0])),
]


@pytest.mark.parametrize("shape,attrs", POOL_GRID)
def test_max_pool_with_indices_matches_onnxruntime(shape, attrs):
    x = rand(*shape)
    for order in (0, 1) if len(shape) == 4 else (0,):
        a = dict(attrs, storage_order=order)
        y, idx = run("MaxPool", 12, x, _n_out=2, **a)
        ry, ri = ort_run("MaxPool", 12, [x], a, n_out=2)
        assert_close(y, ry, rtol=0, atol=0)
        np.testing.assert_array_equal(idx, ri)
        assert idx.dtype == np.int64


@pytest.mark.parametrize("shape,attrs", POOL_GRID)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_matches_onnxruntime(shape, attrs, include_pad):
    x = rand(*shape)
    a = dict(attrs, count_include_pad=include_pad)
    assert_close(run("AveragePool", 19, x, **a), ort_run("AveragePool", 19, [x], a)[0],
                 rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,attrs", POOL_GRID[:6])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_matches_onnxruntime(shape, attrs, p):
    x = rand(*shape)
    a = dict(attrs, p=p)
    assert_close(run("LpPool", 18, x, **a), ort_run("LpPool", 18, [x], a)[0], rtol=1e-5,
                 atol=1e-5)


def test_pools_against_direct_windows():
    """Without onnxruntime too: max / average over explicit windows (odd, asymmetric)."""
    x = rand(2, 3, 7, 8)
    attrs = dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1])
    xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1)], constant_values=np.nan)
    oh, ow = (8 - 3) // 2 + 1, (9 - 2) // 3 + 1
    want_max = np.zeros((2, 3, oh, ow), np.float32)
    want_avg = np.zeros((2, 3, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, 2 * i:2 * i + 3, 3 * j:3 * j + 2].reshape(2, 3, -1)
            want_max[:, :, i, j] = np.nanmax(win, axis=2)
            want_avg[:, :, i, j] = np.nanmean(win, axis=2)
    assert_close(run("MaxPool", 8, x, **attrs), want_max, rtol=0, atol=0)
    assert_close(run("AveragePool", 11, x, **attrs), want_avg, rtol=1e-6, atol=1e-6)


def test_max_pool_integers_and_resnet_shape():
    x = RNG.randint(-128, 128, size=(1, 2, 9, 9)).astype(np.int8)
    got = run("MaxPool", 12, x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    want = reference("MaxPool", 12, [x], dict(kernel_shape=[3, 3], strides=[2, 2],
                                             pads=[1, 1, 1, 1]))[0]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)


def test_global_pools():
    x = rand(2, 3, 4, 5, 3)
    assert_close(run("GlobalAveragePool", 22, x), x.mean(axis=(2, 3, 4), keepdims=True))
    assert_close(run("GlobalMaxPool", 22, x), x.max(axis=(2, 3, 4), keepdims=True))
    assert_close(run("GlobalLpPool", 2, x, p=3),
                 (np.abs(x.astype(np.float64)) ** 3).sum(axis=(2, 3, 4), keepdims=True)
                 .astype(np.float32) ** np.float32(1 / 3), rtol=1e-5)
    h = x.astype(np.float16)
    assert run("GlobalAveragePool", 22, h).dtype == np.float16


def test_max_unpool_inverts_max_pool():
    x = rand(1, 2, 6, 8)
    y, idx = run("MaxPool", 12, x, _n_out=2, kernel_shape=[2, 2], strides=[2, 2])
    up = run("MaxUnpool", 11, y, idx, kernel_shape=[2, 2], strides=[2, 2])
    assert up.shape == x.shape
    np.testing.assert_array_equal(up.reshape(-1)[idx.reshape(-1)], y.reshape(-1))
    assert np.count_nonzero(up) == y.size
    big = run("MaxUnpool", 11, y, idx, np.array([1, 2, 7, 9]), kernel_shape=[2, 2],
              strides=[2, 2])
    np.testing.assert_array_equal(big[:, :, :6, :8], up)
    with pytest.raises(InvalidArgument):
        run("MaxUnpool", 11, y, idx + 1000, kernel_shape=[2, 2], strides=[2, 2])


def test_max_roi_pool_matches_onnxruntime():
    x = rand(2, 3, 10, 12)
    rois = np.array([[0, 1, 1, 7, 5], [1, 0, 2, 11, 9], [0, 3.4, 2.6, 4.1, 3.0]], np.float32)
    attrs = dict(pooled_shape=[3, 2], spatial_scale=1.0)
    got = run("MaxRoiPool", 22, x, rois, **attrs)
    assert_close(got, ort_run("MaxRoiPool", 12, [x, rois], attrs)[0], rtol=0, atol=0)


def test_pool_errors_name_the_op():
    x = rand(1, 1, 4, 4)
    for op, attrs in [("MaxPool", dict(kernel_shape=[5, 5])), ("AveragePool", {}),
                      ("LpPool", dict(kernel_shape=[2], strides=[1, 1])),
                      ("MaxPool", dict(kernel_shape=[2, 2], auto_pad="BAD"))]:
        with pytest.raises(InvalidArgument) as err:
            run(op, 18, x, **attrs)
        assert op in str(err.value)


# ------------------------------------------------------------------------- normalizations

def test_batch_norm_inference_and_training():
    x, s, b = rand(2, 3, 4, 5), rand(3), rand(3)
    mean, var = rand(3), rand(3, lo=0.5, hi=2)
    want = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5) \
        * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    for opset in (6, 9, 15):
        assert_close(run("BatchNormalization", opset, x, s, b, mean, var), want, 1e-5, 1e-5)
    y, rm, rv = run("BatchNormalization", 15, x, s, b, mean, var, _n_out=3, training_mode=1,
                    momentum=0.8)
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    assert_close(rm, mean * 0.8 + bm * 0.2, 1e-5, 1e-5)
    assert_close(rv, var * 0.8 + bv * 0.2, 1e-5, 1e-5)
    want_t = (x - bm.reshape(1, 3, 1, 1)) / np.sqrt(bv.reshape(1, 3, 1, 1) + 1e-5) \
        * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    assert_close(y, want_t, 1e-4, 1e-4)
    h = x.astype(np.float16)
    assert run("BatchNormalization", 15, h, s, b, mean, var).dtype == np.float16
    # opset 6, spatial=0: one value per (C, H, W) activation
    sp = [rand(3, 4, 5), rand(3, 4, 5), rand(3, 4, 5), rand(3, 4, 5, lo=0.5, hi=2)]
    got = run("BatchNormalization", 6, x, *sp, spatial=0, is_test=1)
    assert_close(got, (x - sp[2]) / np.sqrt(sp[3] + 1e-5) * sp[0] + sp[1], 1e-5, 1e-5)


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("with_bias", [False, True])
def test_layer_norm_outputs(axis, with_bias):
    x = rand(2, 3, 4)
    a = axis % 3
    scale, bias = rand(*x.shape[a:]), (rand(*x.shape[a:]) if with_bias else None)
    y, mean, inv = run("LayerNormalization", 17, x, scale, bias, _n_out=3, axis=axis,
                       epsilon=1e-3)
    axes = tuple(range(a, 3))
    m = x.astype(np.float64).mean(axis=axes, keepdims=True)
    v = x.astype(np.float64).var(axis=axes, keepdims=True)
    want = (x - m) / np.sqrt(v + 1e-3) * scale + (bias if with_bias else 0)
    assert_close(y, want.astype(np.float32), 1e-5, 1e-5)
    assert_close(mean, m.astype(np.float32), 1e-5, 1e-6)
    assert_close(inv, (1 / np.sqrt(v + 1e-3)).astype(np.float32), 1e-5, 1e-5)
    h = run("LayerNormalization", 17, x.astype(np.float16), scale.astype(np.float16), None,
            _n_out=3, axis=axis)
    assert h[0].dtype == np.float16 and h[1].dtype == np.float32


def test_rms_and_group_and_instance_norm():
    x = rand(2, 6, 3, 4)
    w = rand(4)
    ms = (x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True)
    assert_close(run("RMSNormalization", 23, x, w), (x / np.sqrt(ms + 1e-5) * w).astype(np.float32),
                 1e-5, 1e-5)
    s, b = rand(6), rand(6)
    g = x.reshape(2, 3, -1).astype(np.float64)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    want = norm.reshape(x.shape) * s.reshape(1, 6, 1, 1) + b.reshape(1, 6, 1, 1)
    assert_close(run("GroupNormalization", 21, x, s, b, num_groups=3), want.astype(np.float32),
                 1e-5, 1e-5)
    s3, b3 = rand(3), rand(3)
    want18 = norm.reshape(x.shape) * np.repeat(s3, 2).reshape(1, 6, 1, 1) \
        + np.repeat(b3, 2).reshape(1, 6, 1, 1)
    assert_close(run("GroupNormalization", 18, x, s3, b3, num_groups=3),
                 want18.astype(np.float32), 1e-5, 1e-5)
    inst = x.astype(np.float64)
    inst = (inst - inst.mean(axis=(2, 3), keepdims=True)) / np.sqrt(
        inst.var(axis=(2, 3), keepdims=True) + 1e-5)
    assert_close(run("InstanceNormalization", 6, x, s, b),
                 (inst * s.reshape(1, 6, 1, 1) + b.reshape(1, 6, 1, 1)).astype(np.float32),
                 1e-5, 1e-5)
    with pytest.raises(InvalidArgument):
        run("GroupNormalization", 21, x, s, b, num_groups=4)


def test_lrn_mvn_lpnorm():
    x = rand(2, 5, 3, 4)
    for size in (1, 2, 3, 4):
        sq = np.pad(x.astype(np.float64) ** 2, [(0, 0), ((size - 1) // 2, size // 2), (0, 0),
                                                 (0, 0)])
        acc = sum(sq[:, i:i + 5] for i in range(size))
        want = x / (2.0 + 1e-3 / size * acc) ** 0.6
        assert_close(run("LRN", 13, x, size=size, alpha=1e-3, beta=0.6, bias=2.0),
                     want.astype(np.float32), 1e-5, 1e-6)
    m = x.astype(np.float64)
    m = (m - m.mean(axis=(0, 2, 3), keepdims=True)) / (m.std(axis=(0, 2, 3), keepdims=True) + 1e-9)
    assert_close(run("MeanVarianceNormalization", 13, x), m.astype(np.float32), 1e-5, 1e-5)
    z = np.concatenate([x, np.zeros_like(x[:1])])
    for p in (1, 2):
        n = np.linalg.norm(z.astype(np.float64), ord=p, axis=1, keepdims=True)
        want = np.where(n == 0, 0, z / np.where(n == 0, 1, n))
        assert_close(run("LpNormalization", 22, z, axis=1, p=p), want.astype(np.float32),
                     1e-5, 1e-6)


@needs_ort
def test_norms_match_onnxruntime():
    x = rand(2, 5, 3, 4)
    assert_close(run("LRN", 13, x, size=3), ort_run("LRN", 13, [x], dict(size=3))[0], 1e-5, 1e-6)
    s, b = rand(5), rand(5)
    assert_close(run("InstanceNormalization", 6, x, s, b),
                 ort_run("InstanceNormalization", 6, [x, s, b])[0], 1e-4, 1e-5)
    assert_close(run("MeanVarianceNormalization", 13, x, axes=[1, 3]),
                 ort_run("MeanVarianceNormalization", 13, [x], dict(axes=[1, 3]))[0], 1e-4, 1e-5)


# ---------------------------------------------------------------------------------- Resize

RESIZE_GRID = [
    dict(mode="nearest", coordinate_transformation_mode="half_pixel"),
    dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    dict(mode="nearest", coordinate_transformation_mode="pytorch_half_pixel",
         nearest_mode="round_prefer_ceil"),
    dict(mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn",
         nearest_mode="ceil"),
    dict(mode="linear", coordinate_transformation_mode="half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="asymmetric"),
    dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
    dict(mode="cubic", coordinate_transformation_mode="half_pixel"),
    dict(mode="cubic", coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.5,
         exclude_outside=1),
    dict(mode="linear", antialias=1),
    dict(mode="cubic", antialias=1),
]


@pytest.mark.parametrize("attrs", RESIZE_GRID)
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 1.5], [1, 1, 0.5, 0.7], [1, 1, 0.6, 3.0]])
def test_resize_scales_matches_onnxruntime(attrs, scales):
    x = rand(1, 2, 5, 7) * 10
    s = np.array(scales, np.float32)
    opset = 13 if attrs.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn" else 19
    assert_close(run("Resize", opset, x, None, s, **attrs),
                 ort_run("Resize", opset, [x, None, s], attrs)[0], 1e-4, 1e-4)


@pytest.mark.parametrize("attrs", RESIZE_GRID[:3] + RESIZE_GRID[4:5] + RESIZE_GRID[8:9])
def test_resize_sizes_matches_onnxruntime(attrs):
    x = rand(2, 1, 6, 5) * 10
    for sizes in ([2, 1, 7, 4], [2, 1, 3, 11], [2, 1, 1, 1]):
        sz = np.array(sizes, np.int64)
        assert_close(run("Resize", 19, x, None, None, sz, **attrs),
                     ort_run("Resize", 19, [x, None, None, sz], attrs)[0], 1e-4, 1e-4)


def test_resize_axes_policy_roi_and_integers():
    x = rand(1, 2, 6, 8) * 10
    for policy in ("stretch", "not_larger", "not_smaller"):
        attrs = dict(axes=[3, 2], keep_aspect_ratio_policy=policy, mode="nearest")
        sz = np.array([5, 4], np.int64)
        got = run("Resize", 19, x, None, None, sz, **attrs)
        want = reference("Resize", 19, [x, None, None, sz], attrs)[0]
        assert_close(got, want, 0, 0)
    roi = np.array([0.2, 0.1, 0.9, 0.8], np.float32)
    attrs = dict(axes=[2, 3], coordinate_transformation_mode="tf_crop_and_resize",
                 mode="linear", extrapolation_value=-5.0)
    for sz in (np.array([4, 5], np.int64), np.array([9, 3], np.int64)):
        got = run("Resize", 19, x, roi, None, sz, **attrs)
        assert_close(got, reference("Resize", 19, [x, roi, None, sz], attrs)[0], 1e-4, 1e-4)
    img = RNG.randint(0, 256, size=(1, 3, 5, 4)).astype(np.uint8)
    s = np.array([1, 1, 1.7, 2.3], np.float32)
    for mode in ("nearest", "linear"):
        got = run("Resize", 13, img, None, s, mode=mode)
        assert got.dtype == np.uint8
        if ort is not None:
            want = ort_run("Resize", 13, [img, None, s], dict(mode=mode))[0]
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_resize_align_corners_follows_the_spec_for_fractional_lengths():
    # the node suite's case: length_resized is in*scale (2.4), not the rounded output size
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    got = run("Resize", 19, x, None, np.array([1, 1, 0.6, 0.6], np.float32), mode="linear",
              coordinate_transformation_mode="align_corners")
    np.testing.assert_allclose(got, [[[[1.0, 3.142857]]]], rtol=1e-5)


def test_upsample_and_resize_v10_match_onnxruntime():
    x = rand(1, 2, 3, 4)
    s = np.array([1, 1, 2, 3], np.float32)
    for mode in ("nearest", "linear"):
        want = ort_run("Upsample", 9, [x, s], dict(mode=mode))[0]
        assert_close(run("Upsample", 9, x, s, mode=mode), want)
        assert_close(run("Upsample", 7, x, mode=mode, scales=[1.0, 1.0, 2.0, 3.0]), want)
        down = np.array([1, 1, 0.6, 0.5], np.float32)
        assert_close(run("Resize", 10, x, down, mode=mode),
                     ort_run("Resize", 10, [x, down], dict(mode=mode))[0])


def test_resize_errors():
    x = rand(1, 1, 4, 4)
    s = np.array([1, 1, 2, 2], np.float32)
    cases = [
        ((x, None, None, None), {}),                                          # neither
        ((x, None, s, np.array([1, 1, 8, 8])), {}),                           # both
        ((x, None, s[:3]), {}),                                               # wrong count
        ((x, None, s), dict(mode="area")),
        ((x, None, s), dict(coordinate_transformation_mode="tf_crop_and_resize")),  # no roi
        ((x, None, -s), {}),
    ]
    for args, attrs in cases:
        with pytest.raises(InvalidArgument) as err:
            run("Resize", 19, *args, **attrs)
        assert "Resize" in str(err.value)


# ------------------------------------------------------------------- DeformConv, FusedConv

def test_deform_conv_zero_offsets_is_conv_and_matches_onnxruntime():
    x, w, b = rand(2, 4, 7, 6), rand(6, 2, 3, 2), rand(6)
    attrs = dict(group=2, offset_group=2, pads=[1, 0, 1, 1], strides=[2, 1])
    off = np.zeros((2, 2 * 2 * 6, 4, 6), np.float32)
    got = run("DeformConv", 19, x, w, off, b, **attrs)
    want = naive_conv(x, w, b, strides=[2, 1], pads=[1, 0, 1, 1], group=2)
    assert_close(got, want.astype(np.float32))
    off = rand(2, 24, 4, 6, lo=-1.5, hi=1.5)
    mask = rand(2, 12, 4, 6, lo=0, hi=1)
    got = run("DeformConv", 19, x, w, off, b, mask, **attrs)
    want = reference("DeformConv", 19, [x, w, off, b, mask], attrs)[0]
    assert_close(got, want, 1e-4, 1e-4)
    if ort is not None:
        assert_close(got, ort_run("DeformConv", 19, [x, w, off, b, mask], attrs)[0], 1e-4, 1e-4)


@pytest.mark.parametrize("activation,params", [("Relu", None), ("Tanh", None), ("Sigmoid", None),
                                               ("LeakyRelu", [0.1]), ("Clip", [-1.0, 2.0]),
                                               ("HardSigmoid", [0.3, 0.4]), ("", None)])
def test_fused_conv(activation, params):
    x, w, b, z = rand(1, 3, 6, 5), rand(4, 3, 3, 3), rand(4), rand(1, 4, 6, 5)
    y = naive_conv(x, w, b, pads=[1, 1, 1, 1]) + z
    acts = {"Relu": lambda v: np.maximum(v, 0), "Tanh": np.tanh,
            "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
            "LeakyRelu": lambda v: np.where(v < 0, 0.1 * v, v),
            "Clip": lambda v: np.clip(v, -1, 2),
            "HardSigmoid": lambda v: np.clip(0.3 * v + 0.4, 0, 1), "": lambda v: v}
    attrs = dict(activation=activation, pads=[1, 1, 1, 1])
    if params:
        attrs["activation_params"] = params
    fn = registry.resolve("com.microsoft", "FusedConv", 1).fn
    assert_close(fn(x, w, b, z, **attrs), acts[activation](y).astype(np.float32), 1e-5, 1e-5)
