"""NEON groups compiled into C programs (edge/neon/program.py): the MLP, a ResNet-18-shaped CNN and
the BERT-style encoder of benchmarks/models.py against the CPU provider, one program per input
shape, bitwise-equal results for 1 and 2 threads, and the node-by-node path kept for what a
program cannot take."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import NEON, REPO, ensure_built, node_suite_twice

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
from onnxedge.edge.neon import program as P  # noqa: E402

sys.path.insert(0, REPO)
from benchmarks import models  # noqa: E402

CPU = ["CPUExecutionProvider"]


def _steps(sess):
    return [s for s in sess._plan.steps if s.provider == ENGINE]


def _programs(sess):
    return [p for s in _steps(sess) if s.programs is not None
            for p in s.programs.programs.values() if p is not None]


def _neon(model, threads=1, **opts):
    return onnxedge.InferenceSession(model, providers=NEON,
                                     provider_options=[dict(intra_op_num_threads=threads, **opts), {}])


def _close(got, want):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


@pytest.fixture(scope="module")
def built():
    return {name: models.build(name).SerializeToString() for name in ("mlp", "resnet18", "bert_encoder")}


@pytest.mark.parametrize("name,on_neon", [
    ("mlp", {"Gemm", "FusedGemm", "Softmax"}),
    ("resnet18", {"FusedConv", "MaxPool", "Add", "Relu", "GlobalAveragePool", "Flatten", "Gemm"}),
    ("bert_encoder", {"FusedMatMul", "MatMul", "Add", "Reshape"}),
])
def test_benchmark_models_run_as_programs(built, name, on_neon):
    model = built[name]
    sess, cpu = _neon(model), onnxedge.InferenceSession(model, providers=CPU)
    feeds = models.make_inputs(name, batch=1)
    want = cpu.run(None, feeds)[0]
    first = sess.run(None, feeds)[0]            # node by node, recording shapes
    progs = _programs(sess)
    assert progs, [s.programs.refusals for s in _steps(sess)]
    second = sess.run(None, feeds)[0]           # the programs
    _close(first, want)
    _close(second, want)
    ops = {r["op_type"] for r in sess.partition_report() if r["provider"] == ENGINE}
    assert on_neon & ops == on_neon & {r["op_type"] for r in sess.partition_report()}, ops
    # a second input shape makes a second program per group
    feeds2 = models.make_inputs(name, batch=2)
    _close(sess.run(None, feeds2)[0], cpu.run(None, feeds2)[0])
    _close(sess.run(None, feeds2)[0], cpu.run(None, feeds2)[0])
    assert len(_programs(sess)) == 2 * len(progs)
    assert sess.run(None, feeds)[0].tobytes() == second.tobytes()   # the first program again


@pytest.mark.parametrize("name", ["mlp", "resnet18", "bert_encoder"])
def test_programs_bitwise_equal_for_1_and_2_threads(built, name):
    feeds = models.make_inputs(name, batch=2)
    outs = []
    for threads in (1, 2):
        sess = _neon(built[name], threads)
        sess.run(None, feeds)
        outs.append(sess.run(None, feeds)[0])
        assert _programs(sess)
    assert outs[0].tobytes() == outs[1].tobytes()


@pytest.mark.parametrize("name", ["mlp", "resnet18", "bert_encoder"])
def test_first_run_gives_the_bits_of_the_program(built, name):
    """The first run of a signature goes node by node (recording shapes) on the same C kernels,
    in the same order, as the program the later runs use: the same bits every run."""
    feeds = models.make_inputs(name, batch=1)
    sess = _neon(built[name])
    first = sess.run(None, feeds)[0]
    assert _programs(sess)
    assert sess.run(None, feeds)[0].tobytes() == first.tobytes()


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_new_ops_in_one_program_and_liveness_reuses_the_arena():
    """A chain of the newly claimed ops; the arena holds far less than every intermediate."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    c = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    nodes = [n("Mul", ["x", "c"], ["a"]), n("Relu", ["a"], ["b"]), n("Sub", ["b", "x"], ["d"]),
             n("LeakyRelu", ["d"], ["e"], alpha=0.2), n("Sigmoid", ["e"], ["f"]), n("Tanh", ["f"], ["g"]),
             n("Clip", ["g", "lo", "hi"], ["h"]), n("Div", ["h", "x"], ["i"]), n("Add", ["i", "b"], ["j"]),
             n("Flatten", ["j"], ["k"], axis=2), n("Softmax", ["k"], ["s"]), n("LogSoftmax", ["k"], ["ls"]),
             n("Unsqueeze", ["s", "ax"], ["u"]), n("Squeeze", ["u", "ax"], ["v"]),
             n("Reshape", ["v", "shp"], ["y"]), n("Identity", ["ls"], ["z"])]
    inits = [("c", c), ("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.9, np.float32)),
             ("ax", np.array([0], np.int64)), ("shp", np.array([-1, 16], np.int64))]
    model = _model(nodes, [_f("x", ["N", 8, 4, 4])], [_f("y", None), _f("z", None)], inits)
    sess, cpu = _neon(model), onnxedge.InferenceSession(model, providers=CPU)
    assert {r["provider"] for r in sess.partition_report()} == {ENGINE}
    for batch in (1, 3):
        x = (rng.standard_normal((batch, 8, 4, 4)) + 2).astype(np.float32)
        want = cpu.run(None, {"x": x})
        sess.run(None, {"x": x})
        got = sess.run(None, {"x": x})
        for g, w in zip(got, want):
            _close(g, w)
    (prog,) = [p for p in _programs(sess) if p.out_shapes[0] == (3 * 8 * 16,)]
    assert prog.in_names == ["x"]
    assert prog.n_instr == 11                 # the views cost nothing
    assert prog.arena_bytes <= 3 * 3 * 8 * 16 * 4 + 3 * 64   # live at once: at most 3 intermediates


def test_a_signature_the_program_cannot_take_stays_node_by_node():
    """Add whose broadcast needs 4 axes (shapes unknown at claim time): refused with a reason, and
    the group keeps running node by node, right."""
    model = _model([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                   [_f("a", None), _f("b", None)], [_f("y", None)])
    sess, cpu = _neon(model), onnxedge.InferenceSession(model, providers=CPU)
    a = np.random.default_rng(1).standard_normal((2, 1, 3, 1)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((1, 4, 1, 5)).astype(np.float32)
    for _ in range(3):
        _close(sess.run(None, {"a": a, "b": b})[0], cpu.run(None, {"a": a, "b": b})[0])
    (step,) = _steps(sess)
    assert list(step.programs.programs.values()) == [None]
    assert "more than 3 axes" in list(step.programs.refusals.values())[0]
    # a float64 feed where float32 is not declared: no program either, CPU kernels right
    a64, b64 = a.astype(np.float64), np.float64(2.0) * np.ones((1, 4, 1, 5))
    model64 = _model([helper.make_node("Mul", ["a", "b"], ["y"])],
                     [helper.make_tensor_value_info("a", TensorProto.DOUBLE, None),
                      helper.make_tensor_value_info("b", TensorProto.DOUBLE, None)],
                     [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    assert {r["provider"] for r in _neon(model64).partition_report()} == {"CPUExecutionProvider"}
    del a64, b64


def test_unsupported_reasons_are_precise():
    n = helper.make_node
    model = _model([n("Softmax", ["x"], ["s"], axis=1), n("Add", ["s", "w"], ["t"]),
                    n("Reshape", ["ids", "shp"], ["r"])],
                   [_f("x", [2, 3, 4]), _f("w", [5, 1, 3, 1]),
                    helper.make_tensor_value_info("ids", TensorProto.INT64, [6])],
                   [_f("t", None), helper.make_tensor_value_info("r", TensorProto.INT64, None)],
                   [("shp", np.array([2, 3], np.int64))])
    sess = _neon(model)
    why = {r["op_type"]: r["fallback_reasons"][ENGINE] for r in sess.partition_report()}
    assert "axis 1 is not the last axis" in why["Softmax"]
    assert "more than 3 axes" in why["Add"]
    assert "not float32" in why["Reshape"]


def test_programs_off_runs_node_by_node(built):
    sess = _neon(built["mlp"], programs=0)
    feeds = models.make_inputs("mlp", batch=1)
    sess.run(None, feeds)
    sess.run(None, feeds)
    assert not _programs(sess)


def test_program_cache_is_bounded(built):
    sess = _neon(built["mlp"])
    rng = np.random.default_rng(0)
    for batch in range(1, P.MAX_PROGRAMS + 6):
        sess.run(None, {"input": rng.standard_normal((batch, 784)).astype(np.float32)})
    assert len(_programs(sess)) == P.MAX_PROGRAMS


def test_arena_plan_reuses_after_last_reader():
    bufs = []
    for born, last, size in [(0, 1, 100), (1, 2, 100), (2, 3, 100), (3, 3, 64)]:
        b = P._Buf(2, size, born=born)
        b.last = last
        bufs.append(b)
    top = P._plan_arena(bufs, 4)
    assert bufs[2].offset == bufs[0].offset      # buffer 0 died after node 1, node 2 reuses it
    assert bufs[1].offset != bufs[0].offset and top == 2 * 128


def test_node_suite_cases_through_programs():
    """Each node-suite case of the program-only ops run twice: the second run is the compiled
    program (the conformance runner runs once, so only the node-by-node path)."""
    ops = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Add", "Sub", "Mul", "Div", "Softmax",
           "LogSoftmax", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
    took, programs = node_suite_twice(ops, _neon)
    if took == 0:
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    assert programs >= 40, programs


@pytest.mark.parametrize("act,params,zshape", [("", [], (2, 4, 5, 5)), ("LeakyRelu", [0.2], (2, 4, 5, 5)),
                                               ("Relu", [], (1, 4, 1, 1)), ("Relu", [], (2, 32, 5, 5)),
                                               ("Sigmoid", [], (2, 32, 5, 5)), ("", [], (2, 32, 5, 5))])
def test_fused_conv_with_sum_input_in_a_program(act, params, zshape):
    """FusedConv's Z (a residual) is added in C: a Z of the output's shape in the conv's store (one
    CONV2D with Z as operand b; 32 output channels: the x86 AVX-512 lanes path's store), one that
    broadcasts by conv + bias into a temporary, + Z, activation; the first run (node by node)
    gives the program's bits."""
    rng = np.random.default_rng(5)
    cout = zshape[1]
    cin = 8 if cout >= 32 else 3
    attrs = dict(pads=[1, 1, 1, 1], domain="com.microsoft")
    if act:
        attrs.update(activation=act)
    if params:
        attrs.update(activation_params=params)
    node = helper.make_node("FusedConv", ["x", "w", "b", "z"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [_f("x", ["N", cin, 5, 5]), _f("z", list(zshape))], [_f("y", None)],
                              [numpy_helper.from_array(rng.standard_normal((cout, cin, 3, 3)).astype(np.float32), "w"),
                               numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    model = m.SerializeToString()
    sess, cpu = _neon(model), onnxedge.InferenceSession(model, providers=CPU)
    assert sess.partition_report()[0]["provider"] == ENGINE
    feeds = {"x": rng.standard_normal((2, cin, 5, 5)).astype(np.float32),
             "z": rng.standard_normal(zshape).astype(np.float32)}
    want = cpu.run(None, feeds)[0]
    first = sess.run(None, feeds)[0]
    second = sess.run(None, feeds)[0]
    _close(second, want)
    assert first.tobytes() == second.tobytes()
    full = tuple(zshape) == want.shape
    assert _programs(sess) and _programs(sess)[0].n_instr == (1 if full else 3 if act else 2)
