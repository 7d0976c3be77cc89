"""Normalizations and reductions in the C engine (issue #17; edge/kernels/normalization.c):
LayerNormalization (ai.onnx and com.onnxedge), SimplifiedLayerNormalization / RMSNormalization,
InstanceNormalization, GroupNormalization, inference BatchNormalization and ReduceSum / Mean / Max /
Min / L1 / L2 / SumSquare over one contiguous run of axes. The kernels against float64 references
(random and edge shapes, rows of one value, odd sizes, offsets far larger than the spread); the
compiled program's bits equal the node-by-node run's and do not depend on the thread count; the
ONNX node suite's cases through the default (engine-backed) session; the BERT encoder's
LayerNormalization nodes on the engine; what the engine does not take stays on the CPU with a
reason."""
from __future__ import annotations

import ctypes
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import REPO, ensure_built, node_suite_twice

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon import library  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests"))
from tolerance import EPS32, assert_close_to_reference  # noqa: E402

from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
RED = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3, "ReduceL1": 4, "ReduceL2": 5,
       "ReduceSumSquare": 6}


@pytest.fixture(scope="module", params=["", "generic"])
def lib(request):
    """The host build (SSE2/AVX2 vectors) and the plain-C vector build."""
    return library.load(request.param)


def _rand(rng, shape, offset=0.0, spread=1.0):
    return (rng.standard_normal(shape) * spread + offset).astype(np.float32)


# ------------------------------------------------------------------------------ float64 references

def _norm_ref(x, rows, groups, cpg, inner, rms, per_group, eps, scale, bias):
    """oxk_norm's meaning in float64: (y, |terms| bound)."""
    xd = x.astype(np.float64).reshape(rows, cpg * inner)
    mean = np.zeros((rows, 1)) if rms else xd.mean(1, keepdims=True)
    d = xd - mean
    inv = 1.0 / np.sqrt((d * d).mean(1, keepdims=True) + eps)
    if groups == 1 and inner == 1 and not per_group:
        s = np.ones(cpg) if scale is None else scale.astype(np.float64).reshape(-1)
        b = np.zeros(cpg) if bias is None else bias.astype(np.float64).reshape(-1)
        s, b = s[None, :], b[None, :]
    else:
        idx = (np.arange(rows) % groups)[:, None]
        k = np.arange(cpg * inner)[None, :] // inner
        ch = idx + 0 * k if per_group else idx * cpg + k
        s = scale.astype(np.float64)[ch] if scale is not None else 1.0
        b = bias.astype(np.float64)[ch] if bias is not None else 0.0
    y = d * inv * s + b
    bound = (np.abs(d) * inv + 1.0) * np.abs(s) + np.abs(b)
    return y.reshape(x.shape), bound.reshape(x.shape)


def _reduce_ref(x, outer, kind, r, inner):
    xd = x.astype(np.float64).reshape(outer, r, inner)
    a = np.abs(xd)
    if kind == 0:
        return xd.sum(1), a.sum(1)
    if kind == 1:
        return (xd.mean(1) if r else np.zeros((outer, inner))), a.sum(1) / max(r, 1)
    if kind == 2:
        return (xd.max(1) if r else np.full((outer, inner), -np.inf)), np.zeros((outer, inner))
    if kind == 3:
        return (xd.min(1) if r else np.full((outer, inner), np.inf)), np.zeros((outer, inner))
    if kind == 4:
        return a.sum(1), a.sum(1)
    if kind == 5:
        return np.sqrt((xd * xd).sum(1)), np.sqrt((xd * xd).sum(1))
    return (xd * xd).sum(1), (xd * xd).sum(1)


# ------------------------------------------------------------------------------------- the kernels

@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1), (5, 3), (4, 7), (2, 64), (7, 257), (3, 768), (2, 4099)])
@pytest.mark.parametrize("rms", [0, 1])
def test_layer_norm_rows_against_float64(lib, rows, cols, rms):
    rng = np.random.default_rng(cols + 10 * rows)
    x = _rand(rng, (rows, cols), 0.5, 2.0)
    s, b = _rand(rng, (cols,)), (None if rms else _rand(rng, (cols,)))
    args = (1, cols, 1, rms, 0, 1e-5)
    y = lib.norm(x, rows, args, s, b)
    want, bound = _norm_ref(x, rows, *args, s, b)
    assert_close_to_reference(y, want, bound, cols, "norm rows=%d cols=%d rms=%d" % (rows, cols, rms))


@pytest.mark.parametrize("offset,spread", [(1e4, 1.0), (-3e5, 0.5), (1e3, 1e-3)])
def test_layer_norm_with_offsets_far_larger_than_the_spread(lib, offset, spread):
    """Two-pass statistics with the mean's rounding error carried: no cancellation (E[x^2] -
    E[x]^2 in float32 would lose every digit here), within the reduction tolerance of the
    centred values."""
    rng = np.random.default_rng(7)
    cols = 1000
    x = _rand(rng, (6, cols), offset, spread)
    s, b = _rand(rng, (cols,)), _rand(rng, (cols,))
    args = (1, cols, 1, 0, 0, 0.0)
    y = lib.norm(x, 6, args, s, b)
    want, bound = _norm_ref(x, 6, *args, s, b)
    assert_close_to_reference(y, want, bound, cols, "offset %g spread %g" % (offset, spread))


@pytest.mark.parametrize("n,c,hw,groups,per_group", [
    (2, 3, 1, 3, 0), (1, 4, 5, 4, 0), (2, 6, 33, 3, 0), (3, 8, 7, 2, 1), (1, 4, 4099, 1, 1), (2, 5, 17, 5, 1)])
def test_group_and_instance_norm_against_float64(lib, n, c, hw, groups, per_group):
    rng = np.random.default_rng(n * 100 + c * 10 + hw)
    x = _rand(rng, (n, c, hw), 3.0, 1.5)
    p = groups if per_group else c
    s, b = _rand(rng, (p,)), _rand(rng, (p,))
    args = (groups, c // groups, hw, 0, per_group, 1e-5)
    y = lib.norm(x, n * groups, args, s, b)
    want, bound = _norm_ref(x, n * groups, *args, s, b)
    assert_close_to_reference(y, want, bound, (c // groups) * hw, "groups %d" % groups)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (2, 5, 7), (3, 4, 9, 11), (1, 2, 20000)])
def test_batchnorm_against_float64(lib, shape):
    rng = np.random.default_rng(sum(shape))
    C = shape[1]
    x = _rand(rng, shape, 1.0, 3.0)
    s, b, m = _rand(rng, (C,)), _rand(rng, (C,)), _rand(rng, (C,))
    v = np.abs(_rand(rng, (C,))) + np.float32(0.1)
    inner = int(np.prod(shape[2:]))
    y = lib.batchnorm(x, shape[0], (C, inner, 1e-3), s, b, m, v)
    cs = (1, C) + (1,) * (len(shape) - 2)
    a = s.astype(np.float64) / np.sqrt(v.astype(np.float64) + 1e-3)
    want = (x - m.reshape(cs).astype(np.float64)) * a.reshape(cs) + b.reshape(cs)
    bound = np.abs(x) * np.abs(a).reshape(cs) + np.abs(m * a).reshape(cs) + np.abs(b).reshape(cs)
    assert_close_to_reference(y, want, bound, 4, "batchnorm %s" % (shape,))


@pytest.mark.parametrize("outer,r,inner", [(1, 1, 1), (3, 1, 5), (4, 7, 1), (2, 257, 1), (5, 3, 300),
                                           (1, 1000, 3), (2, 600, 513), (3, 0, 4), (2, 0, 1), (40000, 3, 1)])
@pytest.mark.parametrize("kind", sorted(RED.values()))
def test_reduce_against_float64(lib, outer, r, inner, kind):
    rng = np.random.default_rng(outer + r + inner + kind)
    x = _rand(rng, (outer, r, inner), 0.3, 2.0)
    y = lib.reduce(x, outer, (kind, r, inner), (outer, inner))
    want, bound = _reduce_ref(x, outer, kind, r, inner)
    if kind in (2, 3):
        np.testing.assert_array_equal(y, want.astype(np.float32))
    else:
        assert_close_to_reference(y, want, bound, r, "reduce kind %d (%d, %d, %d)" % (kind, outer, r, inner))


def test_kernels_refuse_bad_arguments(lib):
    x = np.zeros(16, np.float32)
    xp = x.ctypes.data
    S = lib.structs
    norm, bn, red = lib.function("oxk_norm"), lib.function("oxk_batchnorm"), lib.function("oxk_reduce")
    for args in ((0, 4, 1, 0, 0, 1e-5), (1, 0, 1, 0, 0, 1e-5), (1, 4, 0, 0, 0, 1e-5), (1, 4, 1, 0, 0, -1.0)):
        st = S["oxk_norm_args"](*args)
        assert norm(ctypes.addressof(st), 2, xp, None, None, xp) != 0, args
    st = S["oxk_norm_args"](1, 4, 1, 0, 0, 1e-5)
    assert norm(ctypes.addressof(st), -1, xp, None, None, xp) != 0
    assert norm(ctypes.addressof(st), 2, None, None, None, xp) != 0
    assert norm(None, 2, xp, None, None, xp) != 0
    st = S["oxk_batchnorm_args"](4, 2, 1e-5)
    assert bn(ctypes.addressof(st), 2, xp, xp, None, xp, xp, xp) != 0   # no bias
    assert bn(ctypes.addressof(S["oxk_batchnorm_args"](0, 2, 1e-5)), 2, xp, xp, xp, xp, xp, xp) != 0
    for args in ((7, 2, 2), (-1, 2, 2), (0, -1, 2), (0, 2, -1)):
        assert red(ctypes.addressof(S["oxk_reduce_args"](*args)), 2, xp, xp) != 0, args
    assert red(ctypes.addressof(S["oxk_reduce_args"](0, 2, 2)), 2, None, xp) != 0


def test_results_do_not_depend_on_the_thread_count(lib):
    rng = np.random.default_rng(3)
    x = _rand(rng, (64, 3000), 10.0)
    s, b = _rand(rng, (3000,)), _rand(rng, (3000,))
    xr = _rand(rng, (8, 700, 300))
    before = lib.num_threads()
    try:
        outs = []
        for n in (1, 3, 4):
            lib.set_num_threads(n)
            outs.append((lib.norm(x, 64, (1, 3000, 1, 0, 0, 1e-5), s, b),
                         lib.norm(x[:16], 16, (4, 2, 1500, 0, 0, 1e-5), s[:8], b[:8]),
                         lib.reduce(xr, 8, (0, 700, 300), (8, 300)),
                         lib.reduce(xr, 8 * 700, (5, 300, 1), (8 * 700,))))
    finally:
        lib.set_num_threads(before)
    for got in outs[1:]:
        for a, b_ in zip(outs[0], got):
            assert a.tobytes() == b_.tobytes()


# --------------------------------------------------------------------------------- through sessions

def _model(nodes, inputs, outputs, inits=(), opset=18, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                          + [helper.make_opsetid(d, v) for d, v in extra_opsets])
    m.ir_version = 9
    return m.SerializeToString()


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _on_engine(sess, op):
    return [r["provider"] for r in sess.partition_report() if r["op_type"] == op]


def _twice(model, feeds, op):
    """Run a default session twice (node by node, then the compiled program): both give the same
    bits; returns them and the session."""
    sess = onnxedge.InferenceSession(model)
    assert _on_engine(sess, op) and set(_on_engine(sess, op)) == {ENGINE}, sess.partition_report()
    first = sess.run(None, feeds)
    steps = [s for s in sess._plan.steps if s.provider == ENGINE]
    progs = [p for s in steps for p in s.programs.programs.values()]
    assert progs and all(p is not None for p in progs), [s.programs.refusals for s in steps]
    second = sess.run(None, feeds)
    for a, b in zip(first, second):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()
    return first, sess


def _cpu(model, feeds):
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "0")
    return onnxedge.InferenceSession(model, so).run(None, feeds)


def _close(got, want, k):
    want = np.asarray(want, np.float64)
    assert_close_to_reference(got, want, np.abs(want) + 1.0, k, ulps=16)


@pytest.mark.parametrize("shape,axis,bias", [((2, 5, 16), -1, True), ((3, 4, 1), -1, False),
                                             ((2, 3, 4, 5), 2, True), ((6, 9), 0, True), ((1, 128, 768), -1, True)])
def test_layer_normalization_program_equals_first_run(shape, axis, bias):
    rng = np.random.default_rng(len(shape))
    norm_shape = shape[axis:] if axis >= 0 else shape[axis:]
    inits = [("s", _rand(rng, norm_shape))] + ([("b", _rand(rng, norm_shape))] if bias else [])
    node = helper.make_node("LayerNormalization", ["x", "s"] + (["b"] if bias else []), ["y"],
                            axis=axis, epsilon=1e-4)
    model = _model([node], [_f("x", list(shape))], [_f("y", list(shape))], inits)
    feeds = {"x": _rand(rng, shape, 2.0, 3.0)}
    (y,), _ = _twice(model, feeds, "LayerNormalization")
    _close(y, _cpu(model, feeds)[0], int(np.prod(norm_shape)))


def test_layer_norm_chain_with_computed_scale_in_one_program():
    """Scale and bias computed in the graph (Add of two inputs) are program operands too; a
    LayerNormalization feeding a ReduceMean and a BatchNormalization runs in the same program."""
    rng = np.random.default_rng(5)
    n = helper.make_node
    nodes = [n("Add", ["s0", "s1"], ["s"]),
             n("LayerNormalization", ["x", "s", "b"], ["ln"]),
             n("ReduceMean", ["ln", "axes"], ["m"], keepdims=1),
             n("BatchNormalization", ["m", "bs", "bb", "bm", "bv"], ["y"], epsilon=1e-3)]
    inits = [("b", _rand(rng, (8,))), ("axes", np.array([2], np.int64)), ("bs", _rand(rng, (4,))),
             ("bb", _rand(rng, (4,))), ("bm", _rand(rng, (4,))), ("bv", np.abs(_rand(rng, (4,))) + 0.5)]
    model = _model(nodes, [_f("x", [2, 4, 6, 8]), _f("s0", [8]), _f("s1", [8])], [_f("y", [2, 4, 1, 8])], inits)
    feeds = {"x": _rand(rng, (2, 4, 6, 8)), "s0": _rand(rng, (8,)), "s1": _rand(rng, (8,))}
    (y,), sess = _twice(model, feeds, "LayerNormalization")
    assert set(r["provider"] for r in sess.partition_report()) == {ENGINE}
    _close(y, _cpu(model, feeds)[0], 8)


@pytest.mark.parametrize("op,attrs,params", [
    ("InstanceNormalization", {"epsilon": 1e-3}, "cc"),
    ("GroupNormalization", {"num_groups": 2, "epsilon": 1e-4}, "cc"),
    ("BatchNormalization", {"epsilon": 1e-3}, "cccv"),
])
@pytest.mark.parametrize("shape", [(2, 4, 5, 3), (1, 4, 1), (3, 4)])
def test_channel_normalizations(op, attrs, params, shape):
    if op == "InstanceNormalization" and len(shape) < 3:
        pytest.skip("InstanceNormalization needs rank >= 3")
    rng = np.random.default_rng(11)
    C = shape[1]
    names = ["p%d" % i for i in range(len(params))]
    inits = [(nm, (np.abs(_rand(rng, (C,))) + 0.5) if k == "v" else _rand(rng, (C,))) for nm, k in zip(names, params)]
    node = helper.make_node(op, ["x"] + names, ["y"], **attrs)
    model = _model([node], [_f("x", list(shape))], [_f("y", list(shape))], inits, opset=21)
    feeds = {"x": _rand(rng, shape, 1.0, 2.0)}
    (y,), _ = _twice(model, feeds, op)
    _close(y, _cpu(model, feeds)[0], int(np.prod(shape[2:])) * C)


def test_group_normalization_opset18_scale_per_group():
    rng = np.random.default_rng(12)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-5)
    model = _model([node], [_f("x", [2, 6, 7])], [_f("y", [2, 6, 7])],
                   [("s", _rand(rng, (3,))), ("b", _rand(rng, (3,)))], opset=18)
    feeds = {"x": _rand(rng, (2, 6, 7))}
    (y,), _ = _twice(model, feeds, "GroupNormalization")
    _close(y, _cpu(model, feeds)[0], 14)


@pytest.mark.parametrize("op", ["SimplifiedLayerNormalization", "RMSNormalization"])
def test_rms_normalizations(op):
    rng = np.random.default_rng(13)
    node = helper.make_node(op, ["x", "s"], ["y"], axis=-1, epsilon=1e-6)
    model = _model([node], [_f("x", [3, 5, 33])], [_f("y", [3, 5, 33])], [("s", _rand(rng, (33,)))],
                   opset=23 if op == "RMSNormalization" else 18)
    feeds = {"x": _rand(rng, (3, 5, 33), 0.5)}
    (y,), _ = _twice(model, feeds, op)
    x = feeds["x"].astype(np.float64)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * node_scale(model)
    _close(y, want, 33)


def node_scale(model):
    import onnx
    return numpy_helper.to_array(onnx.load_from_string(model).graph.initializer[0]).astype(np.float64)


def test_fused_layer_norm_below_opset_17_runs_on_the_engine():
    """A decomposed LayerNormalization in an opset-13 model: the optimizer fuses it into
    com.onnxedge LayerNormalization, which the engine runs."""
    rng = np.random.default_rng(14)
    n = helper.make_node
    nodes = [n("ReduceMean", ["x"], ["m"], axes=[-1]), n("Sub", ["x", "m"], ["d"]), n("Mul", ["d", "d"], ["q"]),
             n("ReduceMean", ["q"], ["v"], axes=[-1]), n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]),
             n("Div", ["d", "sd"], ["nd"]), n("Mul", ["nd", "g"], ["ng"]), n("Add", ["ng", "b"], ["y"])]
    inits = [("eps", np.array(1e-5, np.float32)), ("g", _rand(rng, (16,))), ("b", _rand(rng, (16,)))]
    model = _model(nodes, [_f("x", [2, 3, 16])], [_f("y", [2, 3, 16])], inits, opset=13)
    feeds = {"x": _rand(rng, (2, 3, 16), 1.0)}
    (y,), sess = _twice(model, feeds, "LayerNormalization")
    assert [r["domain"] for r in sess.partition_report() if r["op_type"] == "LayerNormalization"] == ["com.onnxedge"]
    _close(y, _cpu(model, feeds)[0], 16)


@pytest.mark.parametrize("op", sorted(RED))
@pytest.mark.parametrize("shape,axes,keep", [((2, 3, 4), [1], 1), ((2, 3, 4), [-1], 0), ((2, 3, 4), [0, 1], 0),
                                             ((5, 1, 7), [0, 2], 1), ((3, 4, 5, 6), [1, 2], 1), ((2, 3), [], 0),
                                             ((2, 0, 3), [1], 1), ((4, 257), [1], 0)])
@pytest.mark.parametrize("as_input", [False, True])
def test_reductions_program_equals_first_run(op, shape, axes, keep, as_input):
    rng = np.random.default_rng(len(shape) + len(axes))
    opset = 18 if as_input else (11 if op == "ReduceSum" else 17)
    if as_input:
        node = helper.make_node(op, ["x", "axes"] if axes else ["x"], ["y"], keepdims=keep)
        inits = [("axes", np.array(axes, np.int64))] if axes else []
    else:
        node = helper.make_node(op, ["x"], ["y"], keepdims=keep, **({"axes": axes} if axes else {}))
        inits = []
    model = _model([node], [_f("x", list(shape))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   inits, opset=opset)
    feeds = {"x": _rand(rng, shape, 0.5)}
    (y,), _ = _twice(model, feeds, op)
    want = _cpu(model, feeds)[0]
    assert y.shape == want.shape
    if op in ("ReduceMax", "ReduceMin"):
        np.testing.assert_array_equal(y, want)
    else:
        _close(y, want, int(np.prod(shape)))


def test_reduce_with_computed_axes_is_part_of_the_signature():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    model = _model([node], [_f("x", [3, 4, 5]), helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = onnxedge.InferenceSession(model)
    x = _rand(np.random.default_rng(2), (3, 4, 5))
    for ax in (0, 2, 1, 2):
        for _ in range(2):
            y = sess.run(None, {"x": x, "axes": np.array([ax], np.int64)})[0]
            np.testing.assert_allclose(y, x.astype(np.float64).sum(ax), rtol=1e-5, atol=1e-5)
    step = [s for s in sess._plan.steps if s.provider == ENGINE][0]
    assert len(step.programs.programs) == 3


@pytest.mark.parametrize("nodes,inputs,why", [
    ([helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean"])], [_f("x", [2, 4])], "statistics outputs"),
    ([helper.make_node("BatchNormalization", ["x", "s", "s", "s", "s"], ["y", "rm", "rv"], training_mode=1)],
     [_f("x", [2, 4])], "training"),
    ([helper.make_node("ReduceSum", ["x", "ax"], ["y"])], [_f("x", [2, 3, 4])], "contiguous run"),
    ([helper.make_node("ReduceMax", ["x"], ["y"], axes=[0])],
     [helper.make_tensor_value_info("x", TensorProto.INT32, [2, 3])], "not float32"),
])
def test_what_the_engine_does_not_take_stays_on_the_cpu_with_a_reason(nodes, inputs, why):
    inits = [("s", np.ones(4, np.float32)), ("ax", np.array([0, 2], np.int64))]
    outs = [helper.make_empty_tensor_value_info(o) for o in nodes[0].output]
    model = _model(nodes, inputs, outs, [i for i in inits if i[0] in nodes[0].input])
    sess = onnxedge.InferenceSession(model)
    rep = [r for r in sess.partition_report() if r["op_type"] == nodes[0].op_type][0]
    assert rep["provider"] == "CPUExecutionProvider"
    assert why in rep["fallback_reasons"][ENGINE], rep


def test_bert_encoder_layer_norms_run_on_the_engine():
    sys.path.insert(0, REPO)
    from benchmarks import models
    model = models.build("bert_encoder").SerializeToString()
    sess = onnxedge.InferenceSession(model)
    assert _on_engine(sess, "LayerNormalization") == [ENGINE] * 9
    feeds = models.make_inputs("bert_encoder", batch=1)
    want = _cpu(model, feeds)[0]
    for _ in range(2):   # node by node, then the programs
        _close(sess.run(None, feeds)[0], want, 768)


# ------------------------------------------------------------------------------------ the node suite

NODE_OPS = {"BatchNormalization", "InstanceNormalization", "GroupNormalization", "RMSNormalization",
            "LayerNormalization"} | set(RED)


def test_node_suite_cases_through_the_engine():
    """Every float case of these ops the engine takes, node by node and then as a program (the
    LayerNormalization cases come in as the suite's _expanded_ver18 graphs, which the optimizer
    fuses back: the suite's own LayerNormalization cases read Mean and InvStdDev, see below)."""
    took, programs = node_suite_twice(NODE_OPS, lambda m: onnxedge.InferenceSession(m))
    if took == 0:
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    assert took >= 100 and programs == took, (took, programs)


def test_node_suite_layer_norm_cases_without_their_statistics_outputs():
    """The suite's LayerNormalization cases with Mean and InvStdDev dropped: output 0 on the
    engine (node by node and as a program) matches the suite's expected output."""
    sys.path.insert(0, REPO)
    try:
        import onnx
        from tests.conformance import cases
        infos = cases.load_manifest(cases.ensure_cache(generate=False, verbose=False))
    except Exception:
        pytest.skip("no node-case cache")
    ran = 0
    for info in infos:
        if info.op_type != "LayerNormalization" or "expanded" in info.name:
            continue
        case = cases.load_case(info)
        m = onnx.load_from_string(case.model)
        node = m.graph.node[0]
        del node.output[1:]
        keep = [o for o in m.graph.output if o.name == node.output[0]]
        del m.graph.output[:]
        m.graph.output.extend(keep)
        for inputs, want in case.data_sets:
            feeds = dict(zip(case.input_names, inputs))
            (y,), _ = _twice(m.SerializeToString(), feeds, "LayerNormalization")
            np.testing.assert_allclose(y, want[0], rtol=1e-4, atol=1e-5, err_msg=info.name)
            ran += 1
    assert ran >= 15
