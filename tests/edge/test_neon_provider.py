"""The C engine's provider (host build of the C kernels) inside InferenceSession, against
onnxruntime: single ops on edge shapes, the MLP and a small CNN, partition reports, options."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import NEON, ensure_built, mlp, ort_run, small_cnn, small_cnn_inputs

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
from onnxedge.errors import EPFail, InvalidArgument  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, 1) for d in extra_opsets])
    m.ir_version = 8
    return m.SerializeToString()


def _vi(name, arr_or_type, shape=None):
    if isinstance(arr_or_type, np.ndarray):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr_or_type.dtype),
                                             list(arr_or_type.shape))
    return helper.make_tensor_value_info(name, arr_or_type, shape)


def _session(model, **kw):
    return onnxedge.InferenceSession(model, providers=NEON,
                                     provider_options=[{"intra_op_num_threads": 2}, {}], **kw)


def _check_on_neon(sess, ops):
    where = {r["op_type"]: r["provider"] for r in sess.partition_report()}
    for op in ops:
        assert where.get(op) == ENGINE, sess.partition_report()


def test_listed_as_available():
    assert ENGINE in onnxedge.get_available_providers()


@pytest.mark.parametrize("xs,ws,attrs,with_bias", [
    ((1, 3, 10, 9), (4, 3, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ((2, 6, 9, 9), (6, 1, 3, 3), dict(group=6, strides=[2, 2], pads=[1, 1, 1, 1]), True),
    ((1, 4, 7, 8), (6, 2, 2, 3), dict(group=2, dilations=[2, 1], pads=[1, 0, 1, 2]), False),
    ((1, 5, 6, 6), (7, 5, 1, 1), dict(), True),
    ((1, 2, 11, 5), (3, 2, 5, 3), dict(strides=[3, 2], pads=[2, 0, 1, 1]), False),
    ((1, 3, 8, 8), (3, 3, 3, 3), dict(auto_pad="SAME_LOWER", strides=[2, 2]), True),
])
def test_conv_vs_onnxruntime(xs, ws, attrs, with_bias):
    rng = np.random.default_rng(sum(xs))
    x = rng.standard_normal(xs).astype(np.float32)
    inits = [("W", rng.standard_normal(ws).astype(np.float32))]
    if with_bias:
        inits.append(("B", rng.standard_normal(ws[0]).astype(np.float32)))
    node = helper.make_node("Conv", ["x"] + [k for k, _ in inits], ["y"], **attrs)
    m = _model([node], [_vi("x", x)], [_vi("y", TensorProto.FLOAT, None)], inits)
    sess = _session(m)
    _check_on_neon(sess, ["Conv"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ort_run(m, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_conv_weight_fed_at_run_time_is_not_prepacked():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"])], [_vi("x", x), _vi("w", w)],
               [_vi("y", TensorProto.FLOAT, None)])
    sess = _session(m)
    for scale in (1.0, -2.0):
        feeds = {"x": x, "w": w * np.float32(scale)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], ort_run(m, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("M,K,N,ta,tb,cshape,alpha,beta", [
    (1, 1, 1, 0, 0, None, 1.0, 1.0),
    (5, 7, 9, 1, 0, (9,), 0.5, 2.0),
    (5, 7, 9, 0, 1, (5, 1), 1.0, -1.0),
    (5, 7, 9, 1, 1, (5, 9), 1.5, 0.5),
    (3, 300, 17, 0, 1, (), 1.0, 1.0),
    (4, 8, 1, 0, 0, (1,), 1.0, 3.0),
    (4, 8, 6, 0, 0, (1, 6), 2.0, 0.0),
])
def test_gemm_vs_onnxruntime(M, K, N, ta, tb, cshape, alpha, beta):
    rng = np.random.default_rng(M * K + N)
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
    inits = [("B", rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32))]
    if cshape is not None:
        inits.append(("C", rng.standard_normal(cshape).astype(np.float32)))
    node = helper.make_node("Gemm", ["a"] + [k for k, _ in inits], ["y"], transA=ta, transB=tb,
                            alpha=alpha, beta=beta)
    m = _model([node], [_vi("a", a)], [_vi("y", TensorProto.FLOAT, None)], inits)
    sess = _session(m)
    _check_on_neon(sess, ["Gemm"])
    np.testing.assert_allclose(sess.run(None, {"a": a})[0], ort_run(m, {"a": a})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ashape,bshape,b_init", [
    ((3, 4, 5), (5, 6), True), ((7,), (7, 3), True), ((2, 3, 4, 5), (5, 1), True),
    ((2, 3, 4), (2, 4, 5), False), ((3, 4), (2, 4, 5), False), ((1, 2, 3), (3, 2, 3, 4), False),
])
def test_matmul_vs_onnxruntime(ashape, bshape, b_init):
    rng = np.random.default_rng(len(ashape) * 10 + len(bshape))
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    if b_init:
        m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", a)],
                   [_vi("y", TensorProto.FLOAT, None)], [("b", b)])
        feeds = {"a": a}
    else:
        m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", a), _vi("b", b)],
                   [_vi("y", TensorProto.FLOAT, None)])
        feeds = {"a": a, "b": b}
    sess = _session(m)
    _check_on_neon(sess, ["MatMul"])
    got, want = sess.run(None, feeds)[0], ort_run(m, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1, dilations=[1, 2])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER")),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
])
def test_pools_vs_onnxruntime(op, attrs):
    x = np.random.default_rng(4).standard_normal((2, 3, 9, 8)).astype(np.float32)
    m = _model([helper.make_node(op, ["x"], ["y"], **attrs)], [_vi("x", x)],
               [_vi("y", TensorProto.FLOAT, None)], opset=19)
    sess = _session(m)
    _check_on_neon(sess, [op])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ort_run(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ta,tb,zb_per_col", [(np.uint8, np.int8, False), (np.uint8, np.uint8, True),
                                              (np.int8, np.int8, False)])
def test_matmul_integer_exact_vs_onnxruntime(ta, tb, zb_per_col):
    rng = np.random.default_rng(9)
    a = rng.integers(np.iinfo(ta).min, np.iinfo(ta).max + 1, (2, 5, 37)).astype(ta)
    b = rng.integers(np.iinfo(tb).min, np.iinfo(tb).max + 1, (37, 11)).astype(tb)
    za = np.array(3, ta)
    zb = (rng.integers(0, 100, 11) if zb_per_col else np.array(5)).astype(tb)
    m = _model([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])], [_vi("a", a)],
               [_vi("y", TensorProto.INT32, None)], [("b", b), ("za", za), ("zb", zb)])
    sess = _session(m)
    _check_on_neon(sess, ["MatMulInteger"])
    got = sess.run(None, {"a": a})[0]
    np.testing.assert_array_equal(got, ort_run(m, {"a": a})[0])
    np.testing.assert_array_equal(got, (a.astype(np.int64) - 3) @ (b.astype(np.int64) - zb.astype(np.int64)))


def test_qlinear_matmul_vs_onnxruntime():
    rng = np.random.default_rng(10)
    a = rng.integers(0, 256, (4, 33)).astype(np.uint8)
    inits = [("sa", np.array(0.02, np.float32)), ("za", np.array(128, np.uint8)),
             ("b", rng.integers(-128, 128, (33, 9)).astype(np.int8)), ("sb", np.array(0.01, np.float32)),
             ("zb", np.array(0, np.int8)), ("sy", np.array(0.05, np.float32)), ("zy", np.array(120, np.uint8))]
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    m = _model([node], [_vi("a", a)], [_vi("y", TensorProto.UINT8, None)], inits)
    sess = _session(m)
    _check_on_neon(sess, ["QLinearMatMul"])
    got, want = sess.run(None, {"a": a})[0], ort_run(m, {"a": a})[0]
    assert got.dtype == want.dtype == np.uint8
    # requantization rounds a float32 product: allow one step where ORT's rounding order differs
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert np.mean(got == want) > 0.95


def test_fused_ops_of_both_domains():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("FusedConv", ["x", "w"], ["c"], domain="com.microsoft",
                              activation="LeakyRelu", activation_params=[0.2], pads=[1, 1, 1, 1]),
             helper.make_node("FusedConv", ["c", "w"], ["y"], domain="com.onnxedge",
                              activation="Clip", activation_params=[-0.5, 1.0], pads=[1, 1, 1, 1])]
    m = _model(nodes, [_vi("x", x)], [_vi("y", TensorProto.FLOAT, None)], [("w", w)],
               extra_opsets=("com.microsoft", "com.onnxedge"))
    sess = _session(m)
    assert all(r["provider"] == ENGINE for r in sess.partition_report())
    cpu = onnxedge.InferenceSession(m, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_mlp_end_to_end_vs_onnxruntime():
    model, feeds = mlp()
    sess = _session(model)
    np.testing.assert_allclose(sess.run(None, feeds)[0], ort_run(model, feeds)[0], rtol=1e-4, atol=1e-6)
    on_neon = {r["op_type"] for r in sess.partition_report() if r["provider"] == ENGINE}
    assert on_neon & {"Gemm", "FusedGemm"}


@pytest.mark.parametrize("level", ["ORT_DISABLE_ALL", "ORT_ENABLE_ALL"])
def test_small_cnn_end_to_end_vs_onnxruntime(level):
    model, feeds = small_cnn(), small_cnn_inputs()
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = getattr(onnxedge.GraphOptimizationLevel, level)
    sess = _session(model, sess_options=opts)
    np.testing.assert_allclose(sess.run(None, feeds)[0], ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)
    report = sess.partition_report()
    on_neon = [r["op_type"] for r in report if r["provider"] == ENGINE]
    assert sum(op in ("Conv", "FusedConv") for op in on_neon) == 4, report
    assert {"MaxPool", "AveragePool", "GlobalAveragePool"} <= set(on_neon)
    assert {"Gemm", "FusedGemm"} & set(on_neon)


def test_unsupported_reasons_are_precise():
    x = np.zeros((1, 2, 3, 3, 3), np.float32)   # 3-D convolutions stay on the CPU
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("MaxPool", ["x4"], ["p", "idx"], kernel_shape=[2, 2]),
             helper.make_node("MatMul", ["d", "d"], ["dd"]),
             helper.make_node("FusedConv", ["x4", "w4"], ["fc"], domain="com.microsoft",
                              activation="Softsign")]
    m = _model(nodes, [_vi("x", x), _vi("x4", TensorProto.FLOAT, [1, 2, 4, 4]),
                       _vi("d", TensorProto.DOUBLE, [2, 2])],
               [_vi(n, TensorProto.FLOAT, None) for n in ("c", "p", "fc")] +
               [_vi("idx", TensorProto.INT64, None), _vi("dd", TensorProto.DOUBLE, None)],
               [("w", np.ones((2, 2, 1, 1, 1), np.float32)), ("w4", np.ones((2, 2, 1, 1), np.float32))],
               extra_opsets=("com.microsoft",))
    sess = _session(m, sess_options=_no_opt())
    why = {r["op_type"]: r["fallback_reasons"].get(ENGINE, "") for r in sess.partition_report()}
    assert "rank 5" in why["Conv"] or "3-D" in why["Conv"], why["Conv"]
    assert "Indices" in why["MaxPool"]
    assert "not float32" in why["MatMul"]
    assert "Softsign" in why["FusedConv"]


def _no_opt():
    o = onnxedge.SessionOptions()
    o.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    return o


def test_options_threads_and_errors():
    model, feeds = mlp()
    sess = onnxedge.InferenceSession(model, providers=NEON,
                                     provider_options=[{"intra_op_num_threads": "1"}, {}])
    from onnxedge.edge.neon import library
    assert library.load().num_threads() == 1
    assert sess.get_provider_options()[ENGINE]["intra_op_num_threads"] == "1"
    with pytest.raises((EPFail, InvalidArgument), match="intra_op_num_threads"):
        onnxedge.InferenceSession(model, providers=NEON, provider_options=[{"intra_op_num_threads": -2}, {}])
    with pytest.raises((EPFail, InvalidArgument), match="unknown option"):
        onnxedge.InferenceSession(model, providers=NEON, provider_options=[{"threads": 2}, {}])
    generic = onnxedge.InferenceSession(model, providers=NEON, provider_options=[{"library": "generic"}, {}])
    np.testing.assert_allclose(generic.run(None, feeds)[0], ort_run(model, feeds)[0], rtol=1e-4, atol=1e-6)


def test_bad_input_shape_names_the_node():
    rng = np.random.default_rng(0)
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0")],
               [_vi("x", TensorProto.FLOAT, ["N", "C", "H", "W"])], [_vi("y", TensorProto.FLOAT, None)],
               [("w", rng.standard_normal((2, 3, 3, 3)).astype(np.float32))])
    sess = _session(m)
    with pytest.raises(onnxedge.errors.OnnxEdgeError, match="conv0.*channels"):
        sess.run(None, {"x": np.zeros((1, 4, 5, 5), np.float32)})


def test_session_intra_op_num_threads_sizes_the_kernel_pool():
    model, feeds = mlp()
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = onnxedge.InferenceSession(model, opts, providers=NEON)
    neon = next(p for p in sess._providers if p.name == NEON[0])
    assert neon.options["intra_op_num_threads"] == 1 and neon.lib.num_threads() == 1
    opts.intra_op_num_threads = 2   # the provider's own option wins over the session's
    sess = onnxedge.InferenceSession(model, opts,
                                     providers=NEON,
                                     provider_options=[{"intra_op_num_threads": 1}, {}])
    neon = next(p for p in sess._providers if p.name == NEON[0])
    assert neon.lib.num_threads() == 1
    sess = onnxedge.InferenceSession(model, opts, providers=NEON)
    assert next(p for p in sess._providers if p.name == NEON[0]).lib.num_threads() == 2
    np.testing.assert_allclose(sess.run(None, feeds)[0], ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)
