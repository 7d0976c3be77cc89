"""The kernels' fast paths on the shapes that pick them (host builds, SIMD and plain-C vectors),
against numpy: GEMM register tiles (row-major A strips of 1/2/4/8 rows, packed A, K and N
tails, K blocks), compiled plans, im2col panels, depthwise register chunks, vectorized pools,
the per-thread scratch under concurrent callers, and the provider's per-shape plans."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import NEON, ensure_built, ort_run
from tolerance import assert_close_to_reference, conv_reference

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
from onnxedge.edge.neon import library as L  # noqa: E402
from onnxedge.kernels.conv import conv as np_conv  # noqa: E402
from onnxedge.kernels.pool import average_pool, max_pool  # noqa: E402


@pytest.fixture(params=["", "generic"], ids=["simd", "generic"])
def lib(request):
    k = L.load(request.param)
    k.set_num_threads(2)
    return k


def _gemm_ref(a, b, alpha=1.0, beta=0.0, c=None, bias=None, kind=0, act="", params=()):
    y = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta:
        y = y + beta * c
    if kind == L.BIAS_ROW:
        y = y + bias[:, None]
    elif kind == L.BIAS_COL:
        y = y + bias[None, :]
    if act == "Relu":
        y = np.maximum(y, 0)
    elif act == "Clip":
        y = np.clip(y, params[0], params[1])
    return y


def test_sgemm_register_tile_grid(lib):
    """Every strip height (1, 2, 4, MR rows; M tails), packed and in-place A, N tails, K tails and
    K beyond one 256 block, each with a fused epilogue."""
    rng = np.random.default_rng(0)
    i = 0
    for M in (1, 2, 3, 4, 5, 8, 9, 16, 17):
        for N in (1, 8, 9, 17, 24, 40):
            for K in (1, 3, 4, 7, 64, 260):
                a = rng.standard_normal((M, K)).astype(np.float32)
                b = rng.standard_normal((K, N)).astype(np.float32)
                kind = (L.BIAS_NONE, L.BIAS_ROW, L.BIAS_COL)[i % 3]
                act, params = (("", ()), ("Relu", ()), ("Clip", (-0.5, 0.5)))[i // 3 % 3]
                bias = rng.standard_normal(M if kind == L.BIAS_ROW else N).astype(np.float32)
                got = lib.sgemm(a, b, bias=bias if kind else None, bias_kind=kind, act=act, act_params=params)
                want = _gemm_ref(a, b, bias=bias, kind=kind, act=act, params=params)
                bound = _gemm_ref(np.abs(a), np.abs(b), bias=np.abs(bias), kind=kind)
                assert_close_to_reference(got, want, bound, K + 1,
                                          "M=%d N=%d K=%d bias %d %s" % (M, N, K, kind, act))
                i += 1


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_sgemm_plan_any_m(lib, ta, tb):
    """One plan (packed B, bias, Relu) serves every M, and gives sgemm's bits."""
    rng = np.random.default_rng(1)
    K, N = 37, 29
    b = rng.standard_normal((K, N)).astype(np.float32)
    B = np.ascontiguousarray(b.T) if tb else b
    bias = rng.standard_normal(N).astype(np.float32)
    plan = lib.sgemm_plan(N, K, bool(ta), bool(tb), 1.0, lib.pack_b(B, bool(tb)), bias, "Relu")
    unpacked = lib.sgemm_plan(N, K, bool(ta), bool(tb), 0.5)
    for M in (1, 2, 7, 8, 13, 30):
        a = rng.standard_normal((M, K)).astype(np.float32)
        A = np.ascontiguousarray(a.T) if ta else a
        y = np.empty((M, N), np.float32)
        lib.check(plan.fn(plan.addr, M, L.data_address(A)[1], None, L.data_address(y)[1]), "plan")
        assert_close_to_reference(y, _gemm_ref(a, b, bias=bias, kind=L.BIAS_COL, act="Relu"),
                                  _gemm_ref(np.abs(a), np.abs(b), bias=np.abs(bias), kind=L.BIAS_COL),
                                  K + 1, "plan M=%d" % M)
        np.testing.assert_array_equal(y, lib.sgemm(A, B, bool(ta), bool(tb), bias=bias,
                                                   bias_kind=L.BIAS_COL, act="Relu"))
        lib.check(unpacked.fn(unpacked.addr, M, L.data_address(A)[1], L.data_address(B)[1],
                              L.data_address(y)[1]), "plan, B per call")
        assert_close_to_reference(y, _gemm_ref(a, b, alpha=0.5), _gemm_ref(np.abs(a), np.abs(b), alpha=0.5),
                                  K, "unpacked plan M=%d" % M)
    with pytest.raises(onnxedge.InvalidArgument, match="bias has 3 values, expected 29"):
        lib.sgemm_plan(N, K, bias=np.ones(3, np.float32))


CONVS = [  # x shape, (Cout, kh, kw), group, strides, dilations, pads: the panel and chunk paths
    ((1, 3, 5, 13), (8, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),     # panels cross output rows
    ((2, 4, 9, 16), (9, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),     # panels inside rows
    ((1, 5, 11, 19), (6, 3, 3), 1, (2, 2), (1, 1), (1, 1, 0, 1)),    # stride 2 gather
    ((1, 4, 12, 20), (4, 3, 2), 2, (1, 1), (2, 2), (2, 1, 2, 1)),    # grouped, dilated
    ((1, 16, 6, 9), (24, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0)),    # pointwise: plain GEMM
    ((1, 6, 5, 37), (6, 3, 3), 6, (1, 1), (1, 1), (1, 1, 1, 1)),     # depthwise: 16 + 16 + 4 + 1
    ((2, 3, 8, 3), (3, 5, 5), 3, (1, 1), (1, 2), (2, 4, 2, 4)),      # depthwise: scalar tail only
    ((1, 4, 9, 20), (4, 3, 3), 4, (2, 2), (1, 1), (1, 1, 1, 1)),     # depthwise stride 2
]


@pytest.mark.parametrize("xs,ws,group,strides,dil,pads", CONVS)
def test_conv_auto_and_plan(lib, xs, ws, group, strides, dil, pads):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((ws[0], xs[1] // group, ws[1], ws[2])).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    want, bound, k = conv_reference(np_conv, x, w, b, group=group, strides=list(strides),
                                    dilations=list(dil), pads=list(pads))
    want = np.maximum(want, 0)
    out = want.shape[2:]
    got = lib.conv2d(x, w, b, group, strides, dil, pads, out, act="Relu")
    assert_close_to_reference(got, want, bound, k, "conv + Relu")
    for packed in (None, lib.conv_pack(w, group)):
        plan = lib.conv_plan(x.shape, w, b, group, strides, dil, pads, out, "Relu", packed_w=packed)
        y = np.empty(want.shape, np.float32)
        lib.check(plan.fn(plan.addr, xs[0], L.data_address(x)[1], L.data_address(y)[1]), "conv plan")
        np.testing.assert_array_equal(y, got)


@pytest.mark.parametrize("k,s,d,pads,ceil", [
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 0),
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 1),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0),
    ((3, 3), (1, 1), (1, 1), (0, 0, 0, 0), 0),
    ((2, 3), (1, 2), (2, 1), (1, 0, 0, 1), 1),
])
def test_pool_vector_paths_every_width(lib, k, s, d, pads, ceil):
    """Widths 1..25: the 4-wide inside paths, their scalar tails and the padded edges; the last
    plane's last row checks that stride-2 gathers stay inside the tensor."""
    rng = np.random.default_rng(4)
    for W in range(1, 26):
        H = 5 + W % 4
        x = rng.standard_normal((1, 2, H, W)).astype(np.float32)
        attrs = dict(kernel_shape=list(k), strides=list(s), pads=list(pads), ceil_mode=ceil,
                     dilations=list(d))
        try:
            want_max = max_pool(None, x, **attrs)
        except Exception:   # no output for this width
            continue
        if 0 in want_max.shape:
            continue
        out = want_max.shape[2:]
        np.testing.assert_array_equal(lib.pool2d(x, "max", k, s, d, pads, out), want_max, err_msg="W=%d" % W)
        for incl in (False, True):
            want = average_pool(x, count_include_pad=int(incl), **attrs)
            np.testing.assert_allclose(lib.pool2d(x, "avg", k, s, d, pads, out, incl), want,
                                       rtol=1e-5, atol=1e-6, err_msg="W=%d include_pad=%s" % (W, incl))
        plan = lib.pool_plan(x.shape, "max", k, s, d, pads, out)
        y = np.empty(want_max.shape, np.float32)
        lib.check(plan.fn(plan.addr, 2, L.data_address(x)[1], L.data_address(y)[1]), "pool plan")
        np.testing.assert_array_equal(y, want_max)


@pytest.mark.parametrize("pool_threads", [1, 3])
def test_scratch_is_per_thread_under_concurrent_callers(pool_threads):
    """Python threads run convolutions and GEMMs of different sizes at once (each thread's packing
    and im2col scratch grows to its own sizes): every result equals the one computed alone."""
    k = L.load()
    k.set_num_threads(pool_threads)
    rng = np.random.default_rng(9)
    jobs = []
    for i in range(6):
        c, hw = 3 + 5 * i, 6 + 7 * i
        x = rng.standard_normal((1, c, hw, hw + i)).astype(np.float32)
        w = rng.standard_normal((4 + 3 * i, c, 3, 3)).astype(np.float32)
        a = rng.standard_normal((5 + 11 * i, 40 + 9 * i)).astype(np.float32)
        b = rng.standard_normal((40 + 9 * i, 30 + 13 * i)).astype(np.float32)
        jobs.append((x, w, a, b))

    def run(job):
        x, w, a, b = job
        y = k.conv2d(x, w, None, 1, (1, 1), (1, 1), (1, 1, 1, 1), x.shape[2:])
        return y, k.sgemm(a, b), k.sgemm(a, b, trans_b=False, packed_b=k.pack_b(b))

    alone = [run(j) for j in jobs]
    errors = []

    def work(i):
        try:
            for _ in range(4):
                for got, want in zip(run(jobs[i]), alone[i]):
                    np.testing.assert_array_equal(got, want)
        except AssertionError as e:   # pragma: no cover - reported below
            errors.append("job %d: %s" % (i, e))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    k.set_num_threads(2)
    assert not errors, errors[0]
    for i, (x, w, a, b) in enumerate(jobs):
        want, bound, k = conv_reference(np_conv, x, w, None, pads=[1, 1, 1, 1])
        assert_close_to_reference(alone[i][0], want, bound, k, "conv of job %d" % i)
        g64 = a.astype(np.float64) @ b
        assert_close_to_reference(alone[i][1], g64, np.abs(a).astype(np.float64) @ np.abs(b),
                                  a.shape[1], "sgemm of job %d" % i)


def test_data_address():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    same, addr = L.data_address(a)
    assert same is a and addr == a.__array_interface__["data"][0]
    ro = a.copy()
    ro.setflags(write=False)
    same, addr = L.data_address(ro)          # read-only: no copy either
    assert same is ro and addr == ro.__array_interface__["data"][0]
    view = a[:, ::2]                          # not contiguous: a contiguous copy
    c, addr = L.data_address(view)
    assert c.flags.c_contiguous and addr == c.__array_interface__["data"][0]
    np.testing.assert_array_equal(c, view)
    e, addr = L.data_address(np.empty((0, 3), np.float32))
    assert e.size == 0 and isinstance(addr, int)


def _cnn_any_size() -> bytes:
    """Conv(+bias) -> MaxPool 2x2 -> depthwise Conv -> GlobalAveragePool -> Flatten -> Gemm,
    with symbolic batch, height and width."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.3, n) for n, s in
             (("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (8, 1, 3, 3)), ("wf", (5, 8)), ("bf", (5,)))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             n("MaxPool", ["c1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
             n("GlobalAveragePool", ["c2"], ["g"]),
             n("Flatten", ["g"], ["f"]),
             n("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cnn_any", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_session_plans_per_input_shape_and_threads():
    """One session, inputs of several shapes (a plan per shape), serially and from threads at
    once, read-only and non-contiguous feeds: all match onnxruntime."""
    model = _cnn_any_size()
    sess = onnxedge.InferenceSession(model, providers=NEON)
    assert {r["provider"] for r in sess.partition_report() if r["op_type"] != "Flatten"} == \
        {ENGINE}
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in
             ((1, 3, 8, 8), (2, 3, 12, 20), (1, 3, 17, 9), (3, 3, 8, 8), (1, 3, 8, 8))]
    want = [ort_run(model, {"x": x})[0] for x in feeds]
    for x, w in zip(feeds, want):
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], w, rtol=1e-4, atol=1e-5)
    ro = feeds[1].copy()
    ro.setflags(write=False)
    np.testing.assert_allclose(sess.run(None, {"x": ro})[0], want[1], rtol=1e-4, atol=1e-5)
    wide = np.repeat(feeds[2], 2, axis=3)[:, :, :, ::2]   # a strided view
    np.testing.assert_allclose(sess.run(None, {"x": wide})[0], want[2], rtol=1e-4, atol=1e-5)
    errors = []

    def work(i):
        for _ in range(3):
            got = sess.run(None, {"x": feeds[i]})[0]
            if not np.allclose(got, want[i], rtol=1e-4, atol=1e-5):
                errors.append(i)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(feeds))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
