"""Data movement inside C-engine programs (issue #17): Transpose, Concat, Slice, Split, Pad, Gather,
Expand, Tile, DepthToSpace, SpaceToDepth and Resize as oxk_movement plans on movement.c's kernels
(host and generic builds) against the CPU provider's numpy kernels, on random and edge shapes; the
program against the node-by-node run (bitwise); the ONNX node-suite cases through the default
(engine-backed) session; claims; and conv nets that stay one engine step across these ops."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import REPO, ensure_built, node_suite_twice

ensure_built()

import onnxedge  # noqa: E402
from onnxedge import ir, oxk_movement as M  # noqa: E402
from onnxedge.edge.neon import library as L  # noqa: E402
from onnxedge.errors import InvalidArgument  # noqa: E402
from onnxedge.kernels import resize as R  # noqa: E402

sys.path.insert(0, REPO)
from benchmarks import models  # noqa: E402

from onnxedge.edge.neon.provider import engine_name  # noqa: E402
NEON = engine_name()   # the C engine's provider on this machine
I64 = np.int64


def _i(*v):
    return np.array(v, I64)


# (id, op, attributes, data input shapes, {input index: parameter value}, opset, outputs)
CASES = [
    ("transpose-2d", "Transpose", {}, [(5, 7)], {}, 17, 1),
    ("transpose-4d", "Transpose", {"perm": [0, 2, 3, 1]}, [(2, 3, 4, 5)], {}, 17, 1),
    ("transpose-6d", "Transpose", {"perm": [5, 3, 1, 0, 2, 4]}, [(2, 3, 1, 2, 3, 2)], {}, 17, 1),
    ("transpose-big", "Transpose", {"perm": [1, 0]}, [(67, 130)], {}, 17, 1),
    ("transpose-1", "Transpose", {"perm": [0]}, [(9,)], {}, 17, 1),
    ("transpose-empty", "Transpose", {"perm": [1, 0, 2]}, [(2, 0, 3)], {}, 17, 1),
    ("concat-1", "Concat", {"axis": 1}, [(2, 3, 4), (2, 1, 4), (2, 5, 4)], {}, 17, 1),
    ("concat-neg", "Concat", {"axis": -1}, [(3, 2), (3, 0), (3, 7)], {}, 17, 1),
    ("concat-0", "Concat", {"axis": 0}, [(1, 4, 4), (3, 4, 4)], {}, 17, 1),
    ("slice-steps", "Slice", {}, [(6, 7, 8)], {1: _i(1, -1, 0), 2: _i(5, -8, 100), 3: _i(0, 1, 2),
                                               4: _i(2, -2, 3)}, 17, 1),
    ("slice-clamp", "Slice", {}, [(5, 9)], {1: _i(-100, 2), 2: _i(2 ** 62, -1), 3: _i(0, -1)}, 17, 1),
    ("slice-reverse", "Slice", {}, [(4, 6)], {1: _i(-1), 2: _i(-2 ** 62), 3: _i(1), 4: _i(-1)}, 17, 1),
    ("slice-empty", "Slice", {}, [(4, 6)], {1: _i(3), 2: _i(1), 3: _i(0)}, 17, 1),
    ("slice-v1", "Slice", {"starts": [1, 0], "ends": [3, 10], "axes": [0, 1]}, [(4, 6)], {}, 9, 1),
    ("split-input", "Split", {"axis": 1}, [(2, 7, 3)], {1: _i(2, 0, 5)}, 13, 3),
    ("split-equal", "Split", {"axis": -1}, [(3, 4, 6)], {}, 13, 3),
    ("split-num-outputs", "Split", {"axis": 0, "num_outputs": 3}, [(7, 2)], {}, 18, 3),
    ("split-attr", "Split", {"axis": 0, "split": [1, 3]}, [(4, 5)], {}, 11, 2),
    ("pad-constant", "Pad", {}, [(2, 3, 4, 5)], {1: _i(0, 0, 1, 2, 0, 1, 3, 0),
                                                 2: np.array(1.5, np.float32)}, 17, 1),
    ("pad-crop", "Pad", {}, [(3, 6)], {1: _i(-1, 2, 1, -3)}, 17, 1),
    ("pad-edge", "Pad", {"mode": "edge"}, [(2, 3, 4, 5)], {1: _i(0, 1, 2, 3, 0, 2, 1, 4)}, 17, 1),
    ("pad-reflect", "Pad", {"mode": "reflect"}, [(3, 4, 5)], {1: _i(2, 3, 1, 1, 0, 4)}, 17, 1),
    ("pad-wrap", "Pad", {"mode": "wrap"}, [(3, 4, 5)], {1: _i(1, 4, 2, 3, 2, 5)}, 19, 1),
    ("pad-axes", "Pad", {"mode": "reflect"}, [(2, 4, 6)], {1: _i(1, 2, 3, 0), 3: _i(-1, 1)}, 18, 1),
    ("pad-v2", "Pad", {"pads": [1, 0, 0, 2], "value": -2.0}, [(3, 4)], {}, 10, 1),
    ("gather-0", "Gather", {"axis": 0}, [(5, 3)], {1: _i(4, 0, -1, 2, 2)}, 17, 1),
    ("gather-mid", "Gather", {"axis": 1}, [(2, 6, 3)], {1: np.array([[0, 5], [-2, 1]], I64)}, 17, 1),
    ("gather-scalar", "Gather", {"axis": -1}, [(2, 3, 7)], {1: np.array(-1, I64)}, 17, 1),
    ("gather-int32", "Gather", {"axis": 0}, [(4,)], {1: np.array([3, 3, 0], np.int32)}, 17, 1),
    ("expand", "Expand", {}, [(3, 1, 4)], {1: _i(2, 1, 5, 1)}, 17, 1),
    ("expand-ones", "Expand", {}, [(1, 6)], {1: _i(4, 1)}, 17, 1),
    ("tile", "Tile", {}, [(2, 3, 4)], {1: _i(2, 1, 3)}, 17, 1),
    ("tile-zero", "Tile", {}, [(2, 3)], {1: _i(0, 2)}, 17, 1),
    ("tile-4d", "Tile", {}, [(2, 3, 2, 3)], {1: _i(2, 3, 2, 2)}, 17, 1),
    ("d2s-dcr", "DepthToSpace", {"blocksize": 2}, [(2, 8, 3, 5)], {}, 17, 1),
    ("d2s-crd", "DepthToSpace", {"blocksize": 3, "mode": "CRD"}, [(1, 18, 2, 4)], {}, 17, 1),
    ("s2d", "SpaceToDepth", {"blocksize": 2}, [(2, 3, 6, 4)], {}, 17, 1),
    ("resize-nearest-2x", "Resize", {"mode": "nearest"}, [(1, 3, 4, 5)],
     {2: np.array([1, 1, 2, 2], np.float32)}, 17, 1),
    # whole-factor nearest upsampling (movement.c copies each value f times) and tables that only
    # look like it (ceil's ix = 0, 1, 1, 2, 2, ...)
    ("resize-nearest-3x-asym", "Resize", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                          "nearest_mode": "floor"}, [(1, 2, 3, 7)],
     {2: np.array([1, 1, 3, 3], np.float32)}, 17, 1),
    ("resize-nearest-w2", "Resize", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                     "nearest_mode": "floor"}, [(2, 3, 4, 9)],
     {2: np.array([1, 1, 1, 2], np.float32)}, 17, 1),
    ("resize-nearest-2x-ceil", "Resize", {"mode": "nearest", "nearest_mode": "ceil"}, [(1, 2, 3, 6)],
     {2: np.array([1, 1, 2, 2], np.float32)}, 17, 1),
    ("resize-linear-up", "Resize", {"mode": "linear"}, [(2, 3, 5, 4)],
     {2: np.array([1, 1, 2.5, 1.75], np.float32)}, 17, 1),
    ("resize-linear-down", "Resize", {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
     [(1, 2, 9, 11)], {3: _i(1, 2, 4, 5)}, 17, 1),
    ("resize-linear-ac", "Resize", {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
     [(1, 2, 4, 4)], {3: _i(1, 2, 7, 9)}, 17, 1),
    ("resize-linear-pt", "Resize", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
     [(1, 1, 6, 6)], {3: _i(1, 1, 1, 4)}, 17, 1),
    ("resize-cubic", "Resize", {"mode": "cubic"}, [(1, 2, 5, 6)], {2: np.array([1, 1, 1.5, 0.5], np.float32)}, 17, 1),
    ("resize-antialias", "Resize", {"mode": "linear", "antialias": 1}, [(1, 1, 12, 10)],
     {3: _i(1, 1, 5, 3)}, 18, 1),
    ("resize-axes", "Resize", {"mode": "nearest", "axes": [3, 2], "nearest_mode": "floor",
                               "coordinate_transformation_mode": "asymmetric"},
     [(2, 2, 3, 3)], {3: _i(7, 5)}, 18, 1),
    ("resize-ceil", "Resize", {"mode": "nearest", "nearest_mode": "ceil"}, [(1, 1, 4, 6)],
     {2: np.array([1, 1, 0.6, 1.3], np.float32)}, 17, 1),
    ("resize-3d", "Resize", {"mode": "linear"}, [(3, 4, 5)], {2: np.array([1, 2, 0.8], np.float32)}, 17, 1),
    ("resize-1d", "Resize", {"mode": "linear"}, [(6,)], {3: _i(10)}, 17, 1),
    ("resize-same", "Resize", {"mode": "linear"}, [(1, 2, 3, 3)], {2: np.array([1, 1, 1, 1], np.float32)}, 17, 1),
]
IDS = [c[0] for c in CASES]
_N_INPUTS = {"Slice": 5, "Split": 2, "Pad": 4, "Gather": 2, "Expand": 2, "Tile": 2, "Resize": 4}


def _node_inputs(op, n_data, params):
    n = max([_N_INPUTS.get(op, 0)] + [i + 1 for i in params])
    names = ["x%d" % i for i in range(n_data)] if op == "Concat" else ["x0"]
    names += ["p%d" % i if i in params else "" for i in range(1, n)]
    while names and not names[-1]:
        names.pop()
    return names


def _model(case, recorded=False):
    """A one-node model; parameters as initializers, or as graph inputs (`recorded`: their values
    become part of the program's signature)."""
    _, op, attrs, shapes, params, opset, nout = case
    ins = _node_inputs(op, len(shapes), params)
    node = helper.make_node(op, ins, ["y%d" % j for j in range(nout)], **attrs)
    inputs = [helper.make_tensor_value_info("x%d" % i, TensorProto.FLOAT, list(s)) for i, s in enumerate(shapes)]
    inits = []
    for i, v in params.items():
        if recorded:
            inputs.append(helper.make_tensor_value_info("p%d" % i, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                        list(v.shape)))
        else:
            inits.append(numpy_helper.from_array(v, "p%d" % i))
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y%d" % j, TensorProto.FLOAT, None) for j in range(nout)],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _feeds(case, seed=0, recorded=False):
    rng = np.random.default_rng(seed)
    feeds = {"x%d" % i: rng.standard_normal(s).astype(np.float32) for i, s in enumerate(case[3])}
    if recorded:
        feeds.update({"p%d" % i: v for i, v in case[4].items()})
    return feeds


def _options(engine):
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "1" if engine else "0")
    return so


def _cpu(model, feeds):
    return onnxedge.InferenceSession(model, _options(False)).run(None, feeds)


def _engine_steps(sess):
    return [s for s in sess._plan.steps if s.provider == NEON]


def _programs(sess):
    return [p for s in _engine_steps(sess) if s.programs is not None
            for p in s.programs.programs.values() if p is not None]


@pytest.fixture(scope="module", params=["", "generic"])
def lib(request):
    return L.load(request.param)


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes(), np.abs(got.astype(np.float64) - want).max()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_plan_on_the_c_kernels_equals_the_cpu_kernel(lib, case):
    """Every plan run step by step on movement.c gives the CPU provider's values bit for bit:
    copies move bits, and the resampling multiplies and adds in the CPU kernel's order."""
    _, op, attrs, shapes, params, opset, nout = case
    feeds = _feeds(case)
    want = _cpu(_model(case), feeds)
    ins = _node_inputs(op, len(shapes), params)
    node = ir.Node(op, ins, ["y%d" % j for j in range(nout)], attrs)
    plan = M.plan(node, shapes, lambda i: params.get(i), opset)
    xs = [feeds["x%d" % i] for i in range(len(shapes))]
    for got, w in zip(lib.movement(plan, xs), want):
        _same(got, w)
    for got, w in zip(M.run_numpy(plan, xs), want):   # the kernels' documented semantics
        _same(got, w)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == "Resize" and c[2].get("mode") != "nearest"],
                         ids=lambda c: c[0])
def test_resize_against_float64(lib, case):
    """Linear/cubic resampling against the CPU kernel in float64 (an independent rounding)."""
    _, op, attrs, shapes, params, opset, _ = case
    x = _feeds(case)["x0"]
    node = ir.Node(op, _node_inputs(op, 1, params), ["y0"], attrs)
    p = R.ResizeParams(attrs.get("mode", "nearest"), attrs.get("coordinate_transformation_mode", "half_pixel"),
                       "round_prefer_floor", -0.75, 0, 0.0, attrs.get("antialias", 0))
    want = R.resize(x.astype(np.float64), None, params.get(2), params.get(3), p.antialias,
                    attrs.get("axes"), p.ct_mode, mode=p.mode)
    got = lib.movement(M.plan(node, [x.shape], lambda i: params.get(i), opset), [x])[0]
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=8 * np.finfo(np.float32).eps * scale)


@pytest.mark.parametrize("recorded", [False, True], ids=["constant-params", "recorded-params"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_program_equals_node_by_node_and_cpu(case, recorded):
    """Through the default session (the engine in front of the CPU provider): the node is on the
    engine, the first run (node by node) and the second (the compiled program) give the same bits
    as the CPU provider; parameters given at run time are part of the program's signature."""
    if recorded and not case[4]:
        pytest.skip("no parameter inputs")
    model = _model(case, recorded)
    sess = onnxedge.InferenceSession(model, _options(True))
    assert {r["provider"] for r in sess.partition_report()} == {NEON}, sess.partition_report()
    feeds = _feeds(case, 1, recorded)
    want = _cpu(model, feeds)
    first = sess.run(None, feeds)
    progs = _programs(sess)
    assert progs, [s.programs.refusals for s in _engine_steps(sess)]
    second = sess.run(None, feeds)
    for f, s, w in zip(first, second, want):
        _same(f, w)
        _same(s, w)
    if recorded:   # other parameter values: another program, right values
        feeds2 = dict(feeds)
        feeds2["x0"] = feeds2["x0"] * 2
        sess.run(None, feeds2)
        for g, w in zip(sess.run(None, feeds2), _cpu(model, feeds2)):
            _same(g, w)


def test_programs_bitwise_equal_for_1_and_2_threads():
    """Large copies and resamplings are split across the pool: the same bits for 1 and 2 threads."""
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             n("Resize", ["t", "", "s"], ["r"], mode="linear"),
             n("Pad", ["r", "pads"], ["y"], mode="reflect")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64, 48, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s"),
                               numpy_helper.from_array(_i(0, 0, 2, 3, 0, 0, 1, 2), "pads")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    model = m.SerializeToString()
    x = np.random.default_rng(3).standard_normal((2, 64, 48, 16)).astype(np.float32)
    outs = []
    for threads in (1, 2):
        sess = onnxedge.InferenceSession(model, providers=[NEON, "CPUExecutionProvider"],
                                         provider_options=[dict(intra_op_num_threads=threads), {}])
        sess.run(None, {"x": x})
        outs.append(sess.run(None, {"x": x})[0])
        assert _programs(sess)
    assert outs[0].tobytes() == outs[1].tobytes()
    _same(outs[0], _cpu(model, {"x": x})[0])


# ----------------------------------------------------------------------------- bad arguments

def test_kernels_refuse_out_of_range_arguments(lib):
    x = np.arange(12, dtype=np.float32)
    node = ir.Node("Transpose", ["x"], ["y"], {"perm": [1, 0]})
    plan = M.plan(node, [(3, 4)], lambda i: None, 17)
    rank, dims, sa, sy, a_off, y_off, a_len, y_len = plan.steps[0].args
    plan.steps[0].args = (rank, dims, sa, sy, a_off + 1, y_off, a_len, y_len)   # reads past the end
    with pytest.raises(InvalidArgument, match="rejected"):
        lib.movement(plan, [x.reshape(3, 4)])
    plan.steps[0].args = (7, dims, sa, sy, a_off, y_off, a_len, y_len)         # rank > 6
    with pytest.raises(InvalidArgument):
        lib.movement(plan, [x.reshape(3, 4)])
    g = M.plan(ir.Node("Gather", ["x", "i"], ["y"], {"axis": 0}), [(12,)], lambda i: _i(1, 2), 17)
    g.steps[0].tables = (np.array([1, 12], np.int32),)
    with pytest.raises(InvalidArgument):
        lib.movement(g, [x])
    r = M.plan(ir.Node("Resize", ["x", "", "s"], ["y"], {"mode": "linear"}), [(3, 4)],
               lambda i: np.array([2, 2], np.float32) if i == 2 else None, 17)
    iy, wy, ix, wx = r.steps[0].tables
    r.steps[0].tables = (iy, wy, ix + 4, wx)
    with pytest.raises(InvalidArgument):
        lib.movement(r, [x.reshape(3, 4)])


def test_copies_of_more_than_six_axes_split_or_are_refused(lib):
    """A copy of more than 6 merged axes becomes one copy per index of its leading axes (Tile of
    a 4-D input repeated on every axis: 8 axes), up to 256 copies; axes that merge need none."""
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 5)).astype(np.float32)
    node = ir.Node("Tile", ["x", "r"], ["y"])
    plan = M.plan(node, [x.shape], lambda i: _i(3, 2, 2, 2), 17)
    assert len(plan.steps) == 6 and all(st.args[0] == 6 for st in plan.steps)
    _same(lib.movement(plan, [x])[0], np.tile(x, (3, 2, 2, 2)))
    node = ir.Node("Transpose", ["x"], ["y"], {"perm": [4, 5, 6, 7, 0, 1, 2, 3]})
    assert [st.args[0] for st in M.plan(node, [(2, 3) * 4], lambda i: None, 17).steps] == [2]
    node = ir.Node("Tile", ["x", "r"], ["y"])
    with pytest.raises(M.Refused, match="up to 6"):
        M.plan(node, [(2, 3, 4, 5, 6)], lambda i: _i(20, 20, 2, 2, 2), 17)


# ----------------------------------------------------------------------------- claims

def _claims(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    sess = onnxedge.InferenceSession(m.SerializeToString(), _options(True))
    return {r["node"]: (r["provider"], r["fallback_reasons"].get(NEON, ""))
            for r in sess.partition_report()}


def test_claims_refuse_what_programs_cannot_take():
    n, f = helper.make_node, helper.make_tensor_value_info
    why = _claims(
        [n("Transpose", ["ids"], ["t"], name="int-data"),
         n("Transpose", ["big"], ["t2"], name="rank-7"),
         n("Gather", ["emb", "tok"], ["g"], name="embedding"),
         n("Gather", ["emb", "ftok"], ["g3"], name="float-indices"),
         n("Resize", ["x", "roi", "s"], ["r"], name="crop", mode="linear",
           coordinate_transformation_mode="tf_crop_and_resize"),
         n("Resize", ["x", "", "s2"], ["r2"], name="channels", mode="nearest"),
         n("Pad", ["x", "pads"], ["p"], name="pad-ok", mode="reflect"),
         n("Gather", ["emb", "few"], ["g2"], name="gather-ok")],
        [f("ids", TensorProto.INT64, [2, 3]), f("big", TensorProto.FLOAT, [1] * 7),
         f("emb", TensorProto.FLOAT, [100, 8]), f("tok", TensorProto.INT64, ["B", "S"]),
         f("x", TensorProto.FLOAT, [1, 2, 4, 4]), f("few", TensorProto.INT64, [3]),
         f("ftok", TensorProto.FLOAT, [3])],
        [f(o, TensorProto.UNDEFINED, None) for o in ("t", "t2", "g", "r", "r2", "p", "g2", "g3")],
        [numpy_helper.from_array(np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32), "roi"),
         numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s"),
         numpy_helper.from_array(np.array([1, 2, 2, 2], np.float32), "s2"),
         numpy_helper.from_array(_i(0, 0, 1, 1, 0, 0, 1, 1), "pads")])
    assert "not float32" in why["int-data"][1]
    assert "rank 7" in why["rank-7"][1]
    assert why["embedding"][0] == NEON   # token ids: read by the program at run time
    assert "element type 1" in why["float-indices"][1]
    assert "tf_crop_and_resize" in why["crop"][1]
    assert "before the last two" in why["channels"][1]
    assert why["pad-ok"][0] == NEON and why["gather-ok"][0] == NEON


def test_resize_10_stays_on_the_cpu():
    n, f = helper.make_node, helper.make_tensor_value_info
    why = _claims([n("Resize", ["x", "s"], ["y"], mode="nearest")], [f("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                  [f("y", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")], opset=10)
    assert "Resize-10" in why["y"][1]


# ----------------------------------------------------------------------------- partitions

def _net_model(kind):
    rng = np.random.default_rng(2)
    n = helper.make_node
    inits = {"w1": rng.standard_normal((8, 4, 3, 3)).astype(np.float32) * 0.3,
             "s": np.array([1, 1, 2, 2], np.float32)}
    if kind == "transpose":
        middle = [n("Transpose", ["c1"], ["m"], perm=[0, 1, 3, 2])]
        cm = 8
    elif kind == "concat":
        middle = [n("Sigmoid", ["c1"], ["g"]), n("Concat", ["c1", "g"], ["m"], axis=1)]
        cm = 16
    elif kind == "resize":
        middle = [n("Resize", ["c1", "", "s"], ["m"], mode="linear")]
        cm = 8
    else:   # a small UNet/FPN step: down, up (linear Resize), skip Concat, depth-to-space head
        inits["wd"] = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
        middle = [n("MaxPool", ["c1"], ["d"], kernel_shape=[2, 2], strides=[2, 2]),
                  n("Conv", ["d", "wd"], ["dc"], pads=[1, 1, 1, 1]), n("Relu", ["dc"], ["dr"]),
                  n("Resize", ["dr", "", "s"], ["up"], mode="linear"),
                  n("Concat", ["c1", "up"], ["m"], axis=1)]
        cm = 16
    inits["w2"] = rng.standard_normal((4, cm, 3, 3)).astype(np.float32) * 0.2
    nodes = [n("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]), n("Relu", ["c"], ["c1"])] + middle + \
        [n("Conv", ["m", "w2"], ["y"], pads=[1, 1, 1, 1])]
    hw = 4 if kind == "resize" else 8
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString(), hw


@pytest.mark.parametrize("kind", ["transpose", "concat", "resize", "unet"])
def test_conv_nets_stay_one_engine_step(kind):
    """Conv -> Transpose / Concat / Resize (and a small UNet step) -> Conv: one engine step, one
    program, the CPU provider's values."""
    model, hw = _net_model(kind)
    sess = onnxedge.InferenceSession(model, _options(True))
    assert {r["provider"] for r in sess.partition_report()} == {NEON}
    assert len(sess._plan.steps) == 1
    x = np.random.default_rng(4).standard_normal((2, 4, hw, hw)).astype(np.float32)
    want = _cpu(model, {"x": x})[0]
    first = sess.run(None, {"x": x})[0]
    second = sess.run(None, {"x": x})[0]
    assert len(_programs(sess)) == 1
    assert first.tobytes() == second.tobytes()
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_gather_reads_run_time_indices_in_the_program():
    """An embedding lookup (token ids fed at run time, negative ones counted from the end) inside
    a program with the Add after it; an index out of range is refused, not read."""
    n, f = helper.make_node, helper.make_tensor_value_info
    emb = np.random.default_rng(6).standard_normal((50, 8)).astype(np.float32)
    graph = helper.make_graph([n("Gather", ["emb", "ids"], ["g"]), n("Add", ["g", "pos"], ["y"])], "g",
                              [f("ids", TensorProto.INT64, ["B", "S"]), f("pos", TensorProto.FLOAT, ["S", 8])],
                              [f("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(emb, "emb")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    model = m.SerializeToString()
    sess = onnxedge.InferenceSession(model, _options(True))
    assert len(sess._plan.steps) == 1 and sess._plan.steps[0].provider == NEON
    rng = np.random.default_rng(7)
    for ids in (rng.integers(-50, 50, (2, 70)), rng.integers(0, 50, (1, 3))):
        feeds = {"ids": ids, "pos": rng.standard_normal((ids.shape[1], 8)).astype(np.float32)}
        want = _cpu(model, feeds)[0]
        _same(sess.run(None, feeds)[0], want)
        _same(sess.run(None, feeds)[0], want)
    assert len(_programs(sess)) == 2
    feeds["ids"] = np.array([[3, 50, 1]], np.int64)
    with pytest.raises(InvalidArgument):
        sess.run(None, feeds)


def test_bert_encoder_partition():
    """The BERT-style encoder of benchmarks/models.py: every node it has on the engine now."""
    sess = onnxedge.InferenceSession(models.build("bert_encoder").SerializeToString(), _options(True))
    off = [(r["op_type"], r["fallback_reasons"].get(NEON)) for r in sess.partition_report()
           if r["provider"] != NEON]
    moved = {"Transpose", "Concat", "Slice", "Split", "Gather", "Expand"}
    assert not [o for o in off if o[0] in moved], off


# ----------------------------------------------------------------------------- node suite

def test_node_suite_cases_through_the_engine():
    """Each node-suite case of these ops through the default session, run twice (node by node,
    then the compiled program) where the engine claims it."""
    ran, programs = node_suite_twice(set(M.OPS), lambda m: onnxedge.InferenceSession(m, _options(True)))
    if ran == 0:
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    assert ran >= 60 and programs >= 50, (ran, programs)


# ----------------------------------------------------------------------------- the page

@pytest.mark.parametrize("module", ["host", "node"])
def test_page_runs_the_unet_step_as_one_program(module):
    """The wasm provider compiles the same plans (the shared compiler): the UNet step is one wasm
    program on the host build over a numpy "wasm memory" and on the real oxk.wasm under node."""
    sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
    from onnxedge.web.wasm import transport
    if module == "host":
        from wasm_host_kernels import HostKernels
        k = HostKernels()
    else:
        import wasm_node_kernels as W
        why = W.available()
        if why:
            pytest.skip(why)
        k = W.NodeKernels()
    transport.install(k)
    try:
        model, hw = _net_model("unet")
        sess = onnxedge.InferenceSession(model, providers=["WasmSimdExecutionProvider", "CPUExecutionProvider"])
        assert [s.provider for s in sess._plan.steps] == ["WasmSimdExecutionProvider"]
        x = np.random.default_rng(9).standard_normal((2, 4, hw, hw)).astype(np.float32)
        want = _cpu(model, {"x": x})[0]
        sess.run(None, {"x": x})
        k.counts.clear()
        got = sess.run(None, {"x": x})[0]
        assert k.counts["program_run"] == 1
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    finally:
        transport.install(None)
        if module == "node":
            k.close()
