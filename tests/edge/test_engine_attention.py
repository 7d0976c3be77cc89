"""The C engine's attention (edge/kernels/attention.c: com.onnxedge MultiHeadAttention as one
oxk_attention call) and MatMul with both operands computed (oxk_matmul over broadcast batches):
the kernels against float64 references with tolerances scaled to magnitude and reduction length,
masks of every broadcast form, odd and size-1 shapes, NaN guards, 1 vs 2 threads bitwise; sessions
with com.microsoft Attention / MultiHeadAttention models against onnxruntime, the first run (node
by node) bitwise-equal to the compiled program's, natively and on the page's provider (the host
build standing in for the wasm module); the ONNX node suite's MatMul cases through the engine."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import NEON, REPO, node_suite_twice, ort_run

import onnxedge  # noqa: E402
from onnxedge import oxk_program  # noqa: E402
from onnxedge.edge.neon import library as L  # noqa: E402

sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
from tests.tolerance import EPS32, reduction_tolerance  # noqa: E402

from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine


@pytest.fixture(scope="module")
def lib():
    if not os.path.isfile(L.library_path()):
        from neon_helpers import ensure_built
        ensure_built("host")
    return L.load()


class _Node:
    def __init__(self, heads, scale, nan_to_zero=0):
        self.attributes = {"num_heads": heads, "scale": scale, "nan_to_zero": nan_to_zero}


def _split(x, heads):
    return x.astype(np.float64).reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)


def _reference(q, k, v, mask, heads, scale, nan_to_zero=0):
    """(float64 attention, its error bound): scores' reduction bound over D carried through the
    softmax (|dP| <= P * 2 max|ds|) and P V's reduction bound over kv_seq."""
    qh, kh, vh = _split(q, heads), _split(k, heads), _split(v, heads)
    s = qh @ kh.transpose(0, 1, 3, 2) * scale
    ds = reduction_tolerance(np.abs(qh) @ np.abs(kh).transpose(0, 1, 3, 2) * abs(scale), qh.shape[-1])
    if mask is not None:
        s = s + mask
        ds = ds + 2 * EPS32 * (np.abs(s) + np.abs(mask))
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0.0, p)
    pv = np.abs(p) @ np.abs(vh)
    spread = np.where(np.isfinite(ds), ds, 0).max(-1, keepdims=True)
    bound = reduction_tolerance(pv, k.shape[1]) + (4 * spread + 16 * EPS32) * pv
    merge = (lambda a: a.transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], -1))
    return merge(p @ vh), merge(bound)


def _run(lib, q, k, v, mask, heads, scale, nan_to_zero=0):
    found = oxk_program.attention_args(_Node(heads, scale, nan_to_zero), q.shape, k.shape, v.shape,
                                       None if mask is None else mask.shape)
    assert found is not None
    return lib.attention(q, k, v, mask, *found)


CASES = [  # batch, q_seq, kv_seq, heads, head size, V head size, mask shape
    (1, 128, 128, 4, 64, 64, (1, 1, 1, 128)),
    (2, 7, 5, 3, 5, 3, None),
    (1, 1, 1, 1, 1, 1, (1,)),
    (1, 1, 9, 2, 4, 4, (9,)),
    (3, 5, 9, 2, 4, 4, (3, 2, 5, 9)),
    (2, 3, 4, 1, 8, 8, (3, 1)),
    (2, 6, 6, 5, 3, 7, (2, 1, 1, 6)),
    (1, 17, 33, 8, 16, 16, (1, 8, 1, 1)),
]


@pytest.mark.parametrize("B,Sq,Skv,H,D,Dv,mshape", CASES)
def test_attention_kernel_matches_float64(lib, B, Sq, Skv, H, D, Dv, mshape):
    rng = np.random.default_rng(B * 1000 + Sq * 10 + Skv)
    q = (3 * rng.standard_normal((B, Sq, H * D))).astype(np.float32)
    k = rng.standard_normal((B, Skv, H * D)).astype(np.float32)
    v = (10 * rng.standard_normal((B, Skv, H * Dv))).astype(np.float32)
    mask = None if mshape is None else rng.uniform(-4, 1, mshape).astype(np.float32)
    scale = 1.0 / np.sqrt(D)
    got = _run(lib, q, k, v, mask, H, scale)
    want, bound = _reference(q, k, v, mask, H, scale)
    err = np.abs(got - want)
    assert (err <= bound).all(), (err.max(), bound[err > bound].min())


def test_attention_masked_rows_and_nan_to_zero(lib):
    """A row whose mask is -inf everywhere gives NaN (as ai.onnx Softmax does), 0 with
    nan_to_zero; other rows are unaffected."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 4, 8)).astype(np.float32) for _ in range(3))
    mask = np.zeros((1, 1, 4, 4), np.float32)
    mask[0, 0, 2, :] = -np.inf
    mask[0, 0, 1, 3] = -np.inf
    plain = _run(lib, q, k, v, mask, 2, 0.5)
    guarded = _run(lib, q, k, v, mask, 2, 0.5, nan_to_zero=1)
    assert np.isnan(plain[0, 2]).all() and (guarded[0, 2] == 0).all()
    rows = [0, 1, 3]
    assert plain[0, rows].tobytes() == guarded[0, rows].tobytes()
    want, bound = _reference(q, k, v, mask, 2, 0.5, nan_to_zero=1)
    assert (np.abs(guarded - want) <= bound).all()


def test_attention_geometry_refuses_what_the_cpu_kernel_reports():
    assert oxk_program.attention_geometry((1, 4, 8), (1, 5, 8), (1, 5, 8), None, 3) is None   # 8 % 3
    assert oxk_program.attention_geometry((1, 4, 8), (1, 5, 6), (1, 5, 8), None, 2) is None   # K size
    assert oxk_program.attention_geometry((1, 4, 8), (1, 5, 8), (1, 4, 8), None, 2) is None   # V seq
    assert oxk_program.attention_geometry((1, 4, 8), (1, 5, 8), (1, 5, 8), (2, 1, 1, 5), 2) is None
    assert oxk_program.attention_geometry((1, 0, 8), (1, 5, 8), (1, 5, 8), None, 2) is None
    assert oxk_program.attention_geometry((4, 8), (5, 8), (5, 8), None, 2) is None
    fields, scratch = oxk_program.attention_geometry((2, 4, 8), (2, 5, 8), (2, 5, 6), (2, 1, 4, 5), 2)
    assert fields == [2, 2, 4, 5, 4, 3, (20, 0, 5, 1)] and scratch == 2 * 2 * 4 * 5


def test_attention_kernel_rejects_bad_arguments(lib):
    st = lib.structs["oxk_attention_args"](1, 0, 1, 1, 1, 1, 1.0, 0, (0, 0, 0, 0))
    fn = lib.function("oxk_attention")
    x = np.zeros(4, np.float32)
    p = x.ctypes.data
    import ctypes
    assert fn(ctypes.addressof(st), p, p, p, None, p, p) == -1              # heads 0
    st = lib.structs["oxk_attention_args"](1, 1, 1, 1, 1, 1, 1.0, 0, (0, 0, 0, 0))
    assert fn(ctypes.addressof(st), p, p, p, None, None, p) == -1           # no scratch
    st = lib.structs["oxk_attention_args"](1, 1, 1, 0, 1, 1, 1.0, 0, (0, 0, 0, 0))
    assert fn(ctypes.addressof(st), p, p, p, None, p, p) == -1              # softmax over nothing


def test_attention_and_matmul_bitwise_for_1_and_2_threads(lib):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 33, 96)).astype(np.float32)
    k = rng.standard_normal((2, 40, 96)).astype(np.float32)
    v = rng.standard_normal((2, 40, 96)).astype(np.float32)
    mask = rng.standard_normal((2, 1, 1, 40)).astype(np.float32)
    a = rng.standard_normal((3, 4, 65, 70)).astype(np.float32)
    b = rng.standard_normal((1, 4, 70, 130)).astype(np.float32)
    geo = oxk_program.matmul_geometry(a.shape, b.shape)
    outs = []
    before = lib.get_num_threads() if hasattr(lib, "get_num_threads") else 1
    try:
        for n in (1, 2):
            lib.set_num_threads(n)
            outs.append((_run(lib, q, k, v, mask, 3, 0.2).tobytes(),
                         lib.matmul(a, b, geo[0], geo[2], geo[1], geo[3], geo[4]).tobytes()))
    finally:
        lib.set_num_threads(before)
    assert outs[0] == outs[1]


# ----------------------------------------------------------------------------- MatMul

MATMUL_SHAPES = [((2, 3, 4, 5), (1, 3, 5, 6)), ((5,), (2, 5, 3)), ((2, 3, 4), (4, 6)),
                 ((4, 3), (2, 1, 3, 7)), ((2, 1, 3, 4), (1, 5, 4, 2)), ((1, 1), (1, 1)),
                 ((3, 1, 7), (3, 7, 1)), ((2, 4, 3, 9, 8), (4, 1, 8, 5))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_computed_matmul_kernel(lib, sa, sb):
    rng = np.random.default_rng(len(sa) * 7 + sb[-1])
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    M, K, N, folded, out = oxk_program.matmul_geometry(sa, sb)
    got = lib.matmul(a, b, M, N, K, folded, out)
    want = np.matmul(a.astype(np.float64), b)
    bound = np.abs(a.astype(np.float64)) @ np.abs(b)
    assert got.shape == want.shape
    assert (np.abs(got - want) <= reduction_tolerance(bound, K)).all()
    # B read transposed in place (a Transpose swapping its last two axes) gives the same bits
    bt = np.ascontiguousarray(np.swapaxes(b, -1, -2))
    M2, K2, N2, folded2, out2 = oxk_program.matmul_geometry(sa, bt.shape, True)
    assert lib.matmul(a, bt, M2, N2, K2, folded2, out2, True).tobytes() == got.tobytes()


def test_matmul_geometry_refusals():
    assert oxk_program.matmul_geometry((2, 3), (4, 5)) is None            # K differs
    assert oxk_program.matmul_geometry((2, 3, 4), (3, 4, 5)) is None      # batches do not broadcast
    assert oxk_program.matmul_geometry((0, 4), (4, 5)) is None            # empty
    assert oxk_program.matmul_geometry((2, 3), (3,)) is None              # 1-D B
    # four alternating broadcast runs do not fold into three axes
    assert oxk_program.matmul_geometry((2, 1, 2, 1, 3, 4), (1, 2, 1, 2, 4, 5)) is None


def _two_input_matmul(sa, sb, transpose_b=False):
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(sa)),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, list(sb))]
    nodes = [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"])]
    bn = "rb"
    if transpose_b:
        perm = list(range(len(sb)))
        perm[-2:] = perm[-1], perm[-2]
        nodes.append(helper.make_node("Transpose", ["rb"], ["tb"], perm=perm))
        bn = "tb"
    nodes += [helper.make_node("MatMul", ["ra", bn], ["y0"]), helper.make_node("Relu", ["y0"], ["y"])]
    g = helper.make_graph(nodes, "mm", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _engine(model, threads=1, **opts):
    return onnxedge.InferenceSession(model, providers=NEON,
                                     provider_options=[dict(intra_op_num_threads=threads, **opts), {}])


def _programs(sess, provider=ENGINE):
    return [p for s in sess._plan.steps if s.provider == provider and getattr(s, "programs", None)
            for p in s.programs.programs.values() if p is not None]


@pytest.mark.parametrize("sa,sb", [((2, 3, 4, 5), (1, 3, 5, 6)), ((4, 3), (2, 1, 3, 7)),
                                   ((5,), (2, 5, 3)), ((2, 3, 4), (4, 6))])
def test_computed_matmul_in_sessions(lib, sa, sb):
    rng = np.random.default_rng(11)
    feeds = {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)}
    model = _two_input_matmul(sa, sb)
    sess = _engine(model)
    assert all(r["provider"] == ENGINE for r in sess.partition_report())
    first = sess.run(None, feeds)[0]                       # node by node on oxk_matmul
    assert _programs(sess), [s.programs.refusals for s in sess._plan.steps if getattr(s, "programs", None)]
    second = sess.run(None, feeds)[0]                      # the program's OXK_OP_MATMUL
    assert first.tobytes() == second.tobytes()
    want = ort_run(model, feeds)[0]
    K = sa[-1]
    bound = np.abs(feeds["a"].astype(np.float64)) @ np.abs(feeds["b"])
    assert (np.abs(second - want) <= 2 * reduction_tolerance(bound, K)).all()


def test_transposed_b_is_read_in_place_with_the_same_bits(lib):
    """Transpose(perm swapping the last two axes) -> MatMul: node by node the engine reads the
    transposed view with transB (no copy); the bits are those of a contiguous B."""
    rng = np.random.default_rng(2)
    sa, sb = (2, 3, 6, 5), (2, 3, 7, 5)
    feeds = {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)}
    model = _two_input_matmul(sa, sb, transpose_b=True)
    sess = onnxedge.InferenceSession(model, providers=NEON)
    got = [sess.run(None, feeds)[0] for _ in range(2)]
    bt = np.ascontiguousarray(np.swapaxes(np.maximum(feeds["b"], 0), -1, -2))
    M, K, N, folded, out = oxk_program.matmul_geometry(sa, bt.shape)
    plain = np.maximum(lib.matmul(np.maximum(feeds["a"], 0), bt, M, N, K, folded, out), 0)
    assert got[0].tobytes() == plain.tobytes() == got[1].tobytes()


def test_node_suite_matmul_through_the_engine():
    took, programs = node_suite_twice(("MatMul",), lambda m: _engine(m))
    if took == 0:
        pytest.skip("the node suite's case cache is missing (tests/conformance builds it)")
    assert programs >= 1, (took, programs)


# ----------------------------------------------------------------------------- sessions

def _ms_attention_model(B, S, hidden, heads, mask_kind):
    rng = np.random.default_rng(hidden + heads)
    w = (rng.standard_normal((hidden, 3 * hidden)) * 0.2).astype(np.float32)
    bias = (rng.standard_normal(3 * hidden) * 0.1).astype(np.float32)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, hidden])]
    node_in = ["x", "w", "bias"]
    if mask_kind == "index":
        ins.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [B]))
        node_in.append("mask")
    elif mask_kind == "raw":
        ins.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [B, S]))
        node_in.append("mask")
    node = helper.make_node("Attention", node_in, ["y"], domain="com.microsoft", num_heads=heads)
    g = helper.make_graph([node], "att", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    feeds = {"x": rng.standard_normal((B, S, hidden)).astype(np.float32)}
    if mask_kind == "index":
        feeds["mask"] = np.array([max(1, S - 2 * i) for i in range(B)], np.int32)
    elif mask_kind == "raw":
        m = np.ones((B, S), np.int32)
        m[:, S - 1:] = 0 if S > 1 else 1
        feeds["mask"] = m
    return model.SerializeToString(), feeds


def _ms_mha_model(B, Sq, Skv, hidden, heads):
    rng = np.random.default_rng(Sq * 3 + Skv)
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [B, s, hidden])
           for n, s in (("q", Sq), ("k", Skv), ("v", Skv))]
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft",
                            num_heads=heads)
    g = helper.make_graph([node], "mha", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    feeds = {n: rng.standard_normal((B, s, hidden)).astype(np.float32) for n, s in (("q", Sq), ("k", Skv), ("v", Skv))}
    return model.SerializeToString(), feeds


MS_MODELS = [("attention", (2, 7, 24, 3, "index")), ("attention", (1, 16, 32, 4, "raw")),
             ("attention", (1, 1, 8, 1, None)), ("attention", (3, 5, 12, 2, None)),
             ("mha", (2, 5, 9, 24, 4)), ("mha", (1, 1, 1, 8, 2)), ("mha", (1, 13, 7, 30, 5))]


def _ms(kind, args):
    return _ms_attention_model(*args) if kind == "attention" else _ms_mha_model(*args)


@pytest.mark.parametrize("kind,args", MS_MODELS)
def test_com_microsoft_attention_on_the_engine_vs_onnxruntime(lib, kind, args):
    model, feeds = _ms(kind, args)
    sess = _engine(model)
    on = {r["op_type"] for r in sess.partition_report() if r["provider"] == ENGINE}
    assert "MultiHeadAttention" in on, sess.partition_report()
    first = sess.run(None, feeds)[0]
    second = sess.run(None, feeds)[0]
    assert _programs(sess)
    assert first.tobytes() == second.tobytes()
    want = ort_run(model, feeds)[0]
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-5 * scale)
    # node by node only (programs=0) runs the same C kernel: the same bits
    assert _engine(model, programs=0).run(None, feeds)[0].tobytes() == second.tobytes()
    two = _engine(model, threads=2)
    assert [two.run(None, feeds)[0].tobytes() for _ in range(2)] == [second.tobytes()] * 2


@pytest.mark.parametrize("kind,args", MS_MODELS[:1] + MS_MODELS[4:5])
def test_page_provider_runs_attention_with_the_native_bits(lib, kind, args):
    """The page's provider (host build over a numpy 'wasm memory'): the attention on its C
    kernel node by node and in the program, with the native engine's bits."""
    from wasm_host_kernels import HostKernels
    from onnxedge.web.wasm import transport
    model, feeds = _ms(kind, args)
    k = HostKernels(megabytes=64)
    transport.install(k)
    try:
        sess = onnxedge.InferenceSession(model, providers=["WasmSimdExecutionProvider", "CPUExecutionProvider"])
        on = {r["op_type"] for r in sess.partition_report() if r["provider"] == "WasmSimdExecutionProvider"}
        assert "MultiHeadAttention" in on, sess.partition_report()
        first = sess.run(None, feeds)[0]
        assert k.counts.get("oxk_attention") == 1
        second = sess.run(None, feeds)[0]
        assert _programs(sess, "WasmSimdExecutionProvider")
    finally:
        transport.install(None)
    native = _engine(model).run(None, feeds)[0]
    assert first.tobytes() == second.tobytes() == native.tobytes()


def test_page_provider_runs_computed_matmul(lib):
    from wasm_host_kernels import HostKernels
    from onnxedge.web.wasm import transport
    sa, sb = (2, 3, 4, 5), (1, 3, 5, 6)
    rng = np.random.default_rng(4)
    feeds = {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)}
    model = _two_input_matmul(sa, sb)
    k = HostKernels(megabytes=16)
    transport.install(k)
    try:
        sess = onnxedge.InferenceSession(model, providers=["WasmSimdExecutionProvider", "CPUExecutionProvider"])
        assert all(r["provider"] == "WasmSimdExecutionProvider" for r in sess.partition_report())
        first = sess.run(None, feeds)[0]
        assert k.counts.get("oxk_matmul") == 1
        second = sess.run(None, feeds)[0]
    finally:
        transport.install(None)
    native = _engine(model).run(None, feeds)[0]
    assert first.tobytes() == second.tobytes() == native.tobytes()
