"""The fast paths of the convolution and pooling kernels against independent references.

Depthwise and grouped 2-D Conv (flattened stride-phase planes), 2-D ConvTranspose (col2im into
output phases) and the unpadded separable pooling are checked against direct float64 loops written
here (and onnxruntime where installed) on the shapes that break such tricks: odd sizes, stride
larger than the kernel, dilations, asymmetric and automatic pads, ceil mode, channel multipliers,
chunk boundaries, output_shape beyond the natural size, integer and half-precision inputs.
Runs on Python 3.8 + numpy 1.17 too (the onnxruntime comparisons are skipped there).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import onnxedge.kernels.conv as conv_mod
import onnxedge.kernels.pool as pool_mod
from onnxedge.kernels import registry

try:
    import onnxruntime as ort
except ImportError:  # Python 3.8 test environment
    ort = None

RNG = np.random.RandomState(11)


class Ctx:
    """The part of KernelContext that the pooling kernels read."""

    def __init__(self, n_out):
        self.num_outputs = n_out
        self.outputs_wanted = [True] * n_out
        self.opset = 19


def run(op, opset, *inputs, **attrs):
    fn = registry.resolve("", op, opset).fn
    if registry.signature(fn).wants_ctx:
        return fn(Ctx(1), *inputs, **attrs)
    return fn(*inputs, **attrs)


def rand(*shape, **kw):
    return RNG.standard_normal(shape).astype(kw.get("dtype", np.float32))


def ort_run(op, opset, inputs, attrs):
    """One-node model through onnxruntime (1 thread); skips when it is not installed."""
    if ort is None:
        pytest.skip("onnxruntime is not installed")
    from onnx import TensorProto, helper
    names = ["i%d" % k for k in range(len(inputs))]
    vis = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
           for n, v in zip(names, inputs)]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "g", vis, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))[0]


def close(got, want, tol=1e-4):
    assert got.dtype == np.asarray(want).dtype and got.shape == want.shape, \
        (got.dtype, want.dtype, got.shape, want.shape)
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


# ------------------------------------------------------------------------- references

def direct_conv(x, w, b, strides, pads, dilations, group):
    """float64 convolution by its definition: every output, every tap (explicit zero pads)."""
    N, C, H, W = x.shape
    M, Cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    oh = (xp.shape[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    y = np.zeros((N, M, oh, ow))
    Mg = M // group
    for m in range(M):
        g = m // Mg
        for i, j in itertools.product(range(kh), range(kw)):
            r, c = i * dilations[0], j * dilations[1]
            patch = xp[:, g * Cg:(g + 1) * Cg, r:r + (oh - 1) * strides[0] + 1:strides[0],
                       c:c + (ow - 1) * strides[1] + 1:strides[1]]
            y[:, m] += np.einsum("nchw,c->nhw", patch, w[m, :, i, j].astype(np.float64))
    if b is not None:
        y += b.astype(np.float64).reshape(1, M, 1, 1)
    return y


def direct_conv_transpose(x, w, b, strides, pads, dilations, output_padding, group):
    """float64 scatter definition of the 2-D transposed convolution, cropped by pads."""
    N, C, H, W = x.shape
    _, Mg, kh, kw = w.shape
    Cg = C // group
    full = [(H - 1) * strides[0] + (kh - 1) * dilations[0] + 1 + output_padding[0],
            (W - 1) * strides[1] + (kw - 1) * dilations[1] + 1 + output_padding[1]]
    y = np.zeros((N, Mg * group) + tuple(full))
    for c in range(C):
        g = c // Cg
        for i, j in itertools.product(range(kh), range(kw)):
            r, q = i * dilations[0], j * dilations[1]
            contrib = np.einsum("nhw,m->nmhw", x[:, c].astype(np.float64), w[c, :, i, j])
            y[:, g * Mg:(g + 1) * Mg, r:r + (H - 1) * strides[0] + 1:strides[0],
              q:q + (W - 1) * strides[1] + 1:strides[1]] += contrib
    y = y[:, :, pads[0]:full[0] - pads[2], pads[1]:full[1] - pads[3]]
    if b is not None:
        y = y + b.astype(np.float64).reshape(1, -1, 1, 1)
    return y


def direct_pool(x, kernel, strides, dilations, pads, out, kind, include_pad=False, p=2):
    """float64 pooling by its definition: gather each window's in-bounds taps."""
    nd = x.ndim - 2
    y = np.zeros(x.shape[:2] + tuple(out))
    for pos in itertools.product(*[range(o) for o in out]):
        vals, count_pad = [], 0
        for taps in itertools.product(*[range(k) for k in kernel]):
            idx = [pos[a] * strides[a] - pads[a] + taps[a] * dilations[a] for a in range(nd)]
            if all(0 <= idx[a] < x.shape[2 + a] for a in range(nd)):
                vals.append(x[(slice(None), slice(None)) + tuple(idx)].astype(np.float64))
                count_pad += 1
            elif all(-pads[a] <= idx[a] < x.shape[2 + a] + pads[nd + a] for a in range(nd)):
                count_pad += 1
        v = np.stack(vals, axis=-1)
        if kind == "max":
            r = v.max(axis=-1)
        elif kind == "avg":
            r = v.sum(axis=-1) / (count_pad if include_pad else len(vals))
        else:
            r = (np.abs(v) ** p).sum(axis=-1) ** (1.0 / p)
        y[(slice(None), slice(None)) + pos] = r
    return y


# ------------------------------------------------------------------------- depthwise / grouped

CONV2D = [
    # (x shape, w shape, attrs)
    ((1, 5, 9, 11), (5, 1, 3, 3), dict(group=5, pads=[1, 1, 1, 1])),
    ((2, 6, 13, 10), (6, 1, 3, 3), dict(group=6, strides=[2, 2], pads=[1, 0, 2, 1])),
    ((1, 4, 11, 12), (4, 1, 2, 2), dict(group=4, strides=[3, 3])),            # stride > kernel
    ((1, 3, 14, 15), (3, 1, 3, 3), dict(group=3, dilations=[2, 3], pads=[2, 1, 0, 3])),
    ((1, 3, 12, 13), (6, 1, 3, 2), dict(group=3, strides=[2, 3], dilations=[1, 2])),  # x2
    ((1, 7, 10, 10), (7, 1, 5, 5), dict(group=7, strides=[1, 2], pads=[2, 2, 2, 2])),
    ((2, 96, 5, 4), (96, 1, 3, 3), dict(group=96, pads=[1, 1, 1, 1])),        # planes last
    ((1, 64, 4, 3), (128, 1, 3, 3), dict(group=64, strides=[2, 1], pads=[1, 0, 0, 1])),
    ((1, 8, 9, 11), (8, 2, 3, 3), dict(group=4, pads=[1, 1, 1, 1])),          # grouped
    ((2, 12, 11, 13), (6, 4, 3, 3), dict(group=3, strides=[2, 2], pads=[0, 1, 2, 1])),
    ((1, 8, 13, 12), (16, 2, 3, 2), dict(group=4, strides=[3, 2], dilations=[2, 1])),
    ((1, 6, 10, 9), (6, 3, 1, 1), dict(group=2, strides=[2, 2])),             # 1x1 strided
    ((1, 4, 8, 8), (4, 2, 3, 3), dict(group=2, auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 4, 7, 8), (4, 1, 3, 3), dict(group=4, auto_pad="SAME_LOWER", strides=[2, 2])),
]


def _explicit_pads(xs, ws, attrs):
    st, dl, begins, ends, _ = conv_mod.conv_setup(
        "Conv", np.empty(xs, np.float32), np.empty(ws, np.float32), None,
        attrs.get("group", 1), None, attrs.get("strides"), attrs.get("dilations"),
        attrs.get("pads"), attrs.get("auto_pad", "NOTSET"))
    return st, dl, begins + ends


@pytest.mark.parametrize("xs,ws,attrs", CONV2D)
@pytest.mark.parametrize("bias", [False, True])
def test_depthwise_and_grouped_conv_match_definition(xs, ws, attrs, bias):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    st, dl, pads = _explicit_pads(xs, ws, attrs)
    want = direct_conv(x, w, b, st, pads, dl, attrs["group"]).astype(np.float32)
    close(run("Conv", 22, x, w, b, **attrs), want)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_depthwise_and_grouped_keep_dtype(dtype):
    for ws, group in [((6, 1, 3, 3), 6), ((6, 2, 3, 3), 3)]:
        x, w, b = rand(2, 6, 9, 7, dtype=dtype), rand(*ws, dtype=dtype), rand(6, dtype=dtype)
        want = direct_conv(x, w, b, [2, 1], [1, 0, 1, 2], [1, 1], group).astype(dtype)
        got = run("Conv", 22, x, w, b, group=group, strides=[2, 1], pads=[1, 0, 1, 2])
        close(got, want, 1e-2 if dtype == np.float16 else 1e-12)


def test_depthwise_and_grouped_across_chunks(monkeypatch):
    """Chunk sizes that split planes and groups unevenly give the same result."""
    cases = [((3, 10, 9, 8), (10, 1, 3, 3), 10), ((1, 40, 3, 3), (40, 1, 3, 3), 40),
             ((2, 12, 9, 10), (12, 2, 3, 3), 6)]
    for (xs, ws, group), strides in itertools.product(cases, ([1, 1], [1, 2])):
        x, w, b = rand(*xs), rand(*ws), rand(ws[0])
        attrs = dict(group=group, pads=[1, 1, 1, 1], strides=strides)
        want = direct_conv(x, w, b, strides, [1, 1, 1, 1], [1, 1], group).astype(np.float32)
        with monkeypatch.context() as m:
            m.setattr(conv_mod, "_DW_CHUNK", 100)
            m.setattr(conv_mod, "_COLS_BYTES", 5000)   # grouped: one group per chunk
            close(run("Conv", 22, x, w, b, **attrs), want)


def test_depthwise_matches_onnxruntime_on_mobilenet_shapes():
    for xs, s in [((2, 32, 28, 28), 1), ((1, 24, 27, 27), 2), ((1, 240, 7, 7), 1)]:
        x, w, b = rand(*xs), rand(xs[1], 1, 3, 3), rand(xs[1])
        attrs = dict(group=xs[1], pads=[1, 1, 1, 1], strides=[s, s])
        close(run("Conv", 17, x, w, b, **attrs), ort_run("Conv", 17, [x, w, b], attrs))


def test_conv_integer_depthwise():
    x = RNG.randint(0, 256, size=(1, 4, 7, 6)).astype(np.uint8)
    w = RNG.randint(0, 256, size=(4, 1, 3, 3)).astype(np.uint8)
    got = run("ConvInteger", 10, x, w, np.array(100, np.uint8), np.array(3, np.uint8),
              group=4, pads=[1, 1, 1, 1])
    want = direct_conv(x.astype(np.float64) - 100, w.astype(np.float64) - 3, None, [1, 1],
                       [1, 1, 1, 1], [1, 1], 4)
    np.testing.assert_array_equal(got, want.astype(np.int32))


# ------------------------------------------------------------------------- ConvTranspose

CONVT = [
    # (x shape, w shape, attrs)
    ((1, 4, 7, 6), (4, 3, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 3, 5, 4), (3, 2, 3, 3), dict(strides=[3, 2], pads=[0, 1, 2, 0],
                                      output_padding=[1, 1])),
    ((1, 2, 4, 5), (2, 3, 2, 3), dict(strides=[2, 3], dilations=[2, 2])),
    ((1, 4, 5, 5), (4, 2, 3, 3), dict(group=2, strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 3, 3), (2, 2, 2, 2), dict(strides=[4, 3])),                       # stride > kernel
    ((1, 3, 6, 5), (3, 2, 3, 1), dict(pads=[1, 0, 1, 0])),                     # stride 1
]


@pytest.mark.parametrize("xs,ws,attrs", CONVT)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_2d_matches_definition(xs, ws, attrs, bias):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[1] * attrs.get("group", 1)) if bias else None
    want = direct_conv_transpose(x, w, b, attrs.get("strides", [1, 1]),
                                 attrs.get("pads", [0, 0, 0, 0]), attrs.get("dilations", [1, 1]),
                                 attrs.get("output_padding", [0, 0]), attrs.get("group", 1))
    close(run("ConvTranspose", 22, x, w, b, **attrs), want.astype(np.float32))


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], output_shape=[8, 7]),
    dict(strides=[2, 3], auto_pad="SAME_UPPER"),
    dict(strides=[3, 2], auto_pad="SAME_LOWER", dilations=[1, 2]),
    dict(strides=[2, 2], pads=[2, 0, 0, 1], output_padding=[1, 1]),
])
def test_conv_transpose_2d_matches_onnxruntime(attrs):
    x, w, b = rand(2, 3, 4, 5), rand(3, 2, 3, 3), rand(2)
    close(run("ConvTranspose", 17, x, w, b, **attrs),
          ort_run("ConvTranspose", 17, [x, w, b], attrs))


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], output_shape=[13, 12]),    # beyond the natural size: bias only there
    dict(strides=[3, 2], output_shape=[5, 14], dilations=[1, 2]),
    dict(strides=[2, 2], auto_pad="SAME_LOWER", output_padding=[1, 0]),
])
def test_conv_transpose_2d_matches_the_nd_path(attrs):
    """The 2-D fast path against the general N-D path (a trailing axis of size 1)."""
    x, w, b = rand(2, 4, 4, 5), rand(4, 3, 3, 3), rand(6)
    got = run("ConvTranspose", 22, x, w, b, group=2, **attrs)
    a3 = {k: list(v) + [1 if k != "output_padding" else 0] for k, v in attrs.items()
          if k != "auto_pad"}
    if "auto_pad" in attrs:
        a3["auto_pad"] = attrs["auto_pad"]
    want = run("ConvTranspose", 22, x[..., None], w[..., None], b, group=2, **a3)
    close(got, want[..., 0], 1e-5)


def test_conv_transpose_2d_keeps_dtype():
    for dtype, tol in [(np.float16, 1e-2), (np.float64, 1e-12)]:
        x, w = rand(1, 2, 4, 3, dtype=dtype), rand(2, 3, 4, 4, dtype=dtype)
        want = direct_conv_transpose(x, w, None, [2, 2], [1, 1, 1, 1], [1, 1], [0, 0], 1)
        close(run("ConvTranspose", 22, x, w, strides=[2, 2], pads=[1, 1, 1, 1]),
              want.astype(dtype), tol)


# ------------------------------------------------------------------------- pooling

POOLS = [
    # (x shape, attrs)
    ((1, 3, 11, 11), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 2, 9, 10), dict(kernel_shape=[3, 2], strides=[1, 1], pads=[1, 0, 1, 1])),
    ((1, 2, 12, 11), dict(kernel_shape=[2, 2], strides=[3, 3])),             # stride > kernel
    ((1, 2, 13, 12), dict(kernel_shape=[3, 3], strides=[2, 1], dilations=[2, 3],
                          pads=[2, 1, 0, 2])),
    ((1, 2, 8, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                        ceil_mode=1)),
    ((1, 1, 7, 6), dict(kernel_shape=[4, 3], strides=[3, 2], ceil_mode=1)),
    ((1, 1, 5, 5), dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),             # window > input
    ((1, 2, 15), dict(kernel_shape=[4], strides=[2], pads=[2, 1], dilations=[2])),
    ((1, 2, 6, 5, 7), dict(kernel_shape=[2, 3, 3], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])),
]


def _pool_geometry(x, attrs):
    geo = pool_mod._Pool("MaxPool", x, attrs["kernel_shape"], attrs.get("strides"),
                         attrs.get("dilations"), attrs.get("pads"), "NOTSET",
                         attrs.get("ceil_mode", 0))
    pads = geo.begins + [max(0, nd - b - n) for nd, b, n
                         in zip(geo.need, geo.begins, x.shape[2:])]
    return geo, pads


@pytest.mark.parametrize("shape,attrs", POOLS)
def test_pools_match_definition(shape, attrs):
    x = rand(*shape)
    geo, pads = _pool_geometry(x, attrs)
    args = (x, geo.kernel, geo.strides, geo.dilations, pads, geo.out)
    close(run("MaxPool", 12, x, **attrs), direct_pool(*args, kind="max").astype(np.float32), 0)
    # AveragePool divides by the taps inside the input or (count_include_pad) its explicit pads
    begins, ends = pool_mod.pads_attr("AveragePool", attrs.get("pads"), x.ndim - 2)
    exp_pads = begins + ends
    for include in (0, 1):
        want = direct_pool(x, geo.kernel, geo.strides, geo.dilations, exp_pads, geo.out, "avg",
                           include_pad=bool(include))
        close(run("AveragePool", 19, x, count_include_pad=include, **attrs),
              want.astype(np.float32), 1e-5)
    if "dilations" not in attrs:
        for p in (1, 2, 3):
            close(run("LpPool", 18, x, p=p, **attrs),
                  direct_pool(*args, kind="lp", p=p).astype(np.float32), 1e-5)


@pytest.mark.parametrize("shape,attrs", POOLS[:7])
def test_pools_match_onnxruntime(shape, attrs):
    x = rand(*shape)
    close(run("MaxPool", 12, x, **attrs), ort_run("MaxPool", 12, [x], attrs), 0)
    for include in (0, 1):
        a = dict(attrs, count_include_pad=include)
        close(run("AveragePool", 19, x, **a), ort_run("AveragePool", 19, [x], a), 1e-5)


def test_max_pool_dtypes_and_resnet_stem():
    x = RNG.randint(-128, 128, size=(2, 3, 12, 13)).astype(np.int8)
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    geo, pads = _pool_geometry(x, attrs)
    want = direct_pool(x, geo.kernel, geo.strides, geo.dilations, pads, geo.out, "max")
    got = run("MaxPool", 12, x, **attrs)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want.astype(np.int8))
    h = rand(1, 4, 9, 9, dtype=np.float16)
    close(run("MaxPool", 12, h, **attrs), run("MaxPool", 12, h.astype(np.float32),
                                               **attrs).astype(np.float16), 0)
    close(run("AveragePool", 19, h, **attrs),
          run("AveragePool", 19, h.astype(np.float32), **attrs).astype(np.float16), 1e-3)
    stem = rand(1, 8, 112, 112)
    close(run("MaxPool", 12, stem, **attrs), ort_run("MaxPool", 12, [stem], attrs), 0)


def test_max_pool_two_outputs_without_indices():
    """A node declaring Indices that nobody reads still gets the fast path's values."""
    x = rand(1, 2, 7, 7)
    fn = registry.resolve("", "MaxPool", 12).fn
    ctx = Ctx(2)
    ctx.outputs_wanted = [True, False]
    y, idx = fn(ctx, x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert idx is None
    y2, _ = fn(Ctx(2), x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    close(y, y2, 0)
