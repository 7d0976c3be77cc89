"""Memory and time budgets of a run (issue #14, part B2).

Kernels that size their output from input values check a per-tensor byte budget
("session.max_tensor_bytes") before they allocate; constant folding checks sizes before it
evaluates; `RunOptions.terminate` and a time limit (`RunOptions.run_timeout_ms`,
"session.run_timeout_ms") stop a run between nodes and Loop iterations. What could take gigabytes
or never end runs in a child process (tests/unit/budget_child.py) under an address-space limit,
with a timeout that only guards against a hang.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge as oe
from modelgen import single_node_model
from onnxedge.errors import InvalidArgument, RuntimeException
from onnxedge import budgets
from onnxedge.kernels import registry

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "budget_child.py")
KEY = "session.max_tensor_bytes"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the child measures memory through /proc and RLIMIT_AS")


def _child(*args: str) -> dict:
    """Run budget_child.py with these arguments; its JSON lines keyed by case name."""
    proc = subprocess.run([sys.executable, CHILD] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=240)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")]
    return {r["case"]: r for r in rows}


@pytest.fixture(scope="module")
def kernel_results() -> dict:
    return _child("kernels")


@pytest.fixture(scope="module")
def loop_results() -> dict:
    return _child("loops")


# ---------------------------------------------------------------- kernels over the budget

KERNEL_CASES = ["ConstantOfShape", "Expand", "Tile", "Range", "RangeInt64Max", "Resize",
                "Upsample", "Pad", "OneHot", "ConstantOfShapeOverSessionBudget"]


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_huge_requests_raise_before_allocating(kernel_results, case):
    r = kernel_results[case]
    op = "Range" if case.startswith("Range") else "ConstantOfShape" if case.startswith(
        "ConstantOfShape") else case
    assert r["error"] == "RuntimeException", r
    assert "%s node" % op in r["message"], r            # names the node
    assert KEY in r["message"] and "bytes" in r["message"], r   # and the budget, not a MemoryError
    assert r["rss_growth"] < 200 << 20, r               # nothing big was allocated


def test_range_to_int64_max_raises_in_process():
    model = single_node_model("Range", {}, ["y"], initializers={
        "a": np.array(0, np.int64), "b": np.array(np.iinfo(np.int64).max, np.int64),
        "d": np.array(1, np.int64)})
    sess = oe.InferenceSession(model)
    with pytest.raises(RuntimeException, match=r"Range node .*9223372036854775807 elements"):
        sess.run(None, {})


def _constant_of_shape(n: int) -> bytes:
    return single_node_model("ConstantOfShape", {}, ["y"],
                             initializers={"s": np.array([n], np.int64)})


def test_budget_is_a_session_option():
    so = oe.SessionOptions()
    so.add_session_config_entry(KEY, str(4096))
    small = oe.InferenceSession(_constant_of_shape(1024), so)     # exactly 4096 bytes: fine
    np.testing.assert_array_equal(small.run(None, {})[0], np.zeros(1024, np.float32))
    with pytest.raises(RuntimeException, match="4100 bytes, more than the limit of 4096"):
        oe.InferenceSession(_constant_of_shape(1025), so).run(None, {})
    # the default (half the machine's memory) lets the same model run
    assert oe.InferenceSession(_constant_of_shape(1025)).run(None, {})[0].shape == (1025,)


@pytest.mark.parametrize("key,value", [(KEY, "0"), (KEY, "lots"), (KEY, "-5"),
                                       ("session.run_timeout_ms", "-1"),
                                       ("session.run_timeout_ms", "soon")])
def test_bad_config_entries_are_refused(key, value):
    so = oe.SessionOptions()
    so.add_session_config_entry(key, value)
    with pytest.raises(InvalidArgument, match=key.replace(".", r"\.")):
        oe.InferenceSession(_constant_of_shape(4), so)


def test_bad_run_timeout_is_refused():
    ro = oe.RunOptions()
    ro.run_timeout_ms = -3
    with pytest.raises(InvalidArgument, match="run_timeout_ms"):
        oe.InferenceSession(_constant_of_shape(4)).run(None, {}, ro)


def test_default_budget_without_sysconf(monkeypatch):
    """Where the OS does not report its memory (Pyodide), the default is a fixed 1 GiB."""
    def no_sysconf(name):
        raise ValueError("unsupported")
    monkeypatch.setattr(budgets.os, "sysconf", no_sysconf)
    monkeypatch.setattr(budgets, "_DEFAULT_BUDGET", [])
    assert budgets.physical_memory() is None
    assert budgets.default_max_tensor_bytes() == 1 << 30


def test_element_count_never_wraps():
    assert budgets.element_count([1 << 40, 1 << 40]) == 1 << 80
    with budgets.use_limits(budgets.RunLimits(1 << 20)):
        with pytest.raises(RuntimeException, match="Tile: the output of shape"):
            budgets.check_tensor_bytes("Tile", [1 << 32, 1 << 32], np.float32)
        assert budgets.check_tensor_bytes("Tile", [512, 512], np.float32) == 512 * 512


def _other_value_sized_kernels():
    """(name, call) pairs: kernels sizing a ~64 MiB output from values or attributes."""
    from onnxedge.kernels import conv, image, indexing, movement, pool, random, signal
    f32, i64 = np.float32, np.int64
    n = 1 << 24
    return [
        ("RandomNormal", lambda: random.random_normal(shape=[n])),
        ("RandomUniform", lambda: random.random_uniform(shape=[n])),
        ("Multinomial", lambda: random.multinomial(np.zeros((1, 2), f32), sample_size=n)),
        ("HannWindow", lambda: signal.hann_window(np.array(n, i64))),
        ("MelWeightMatrix", lambda: signal.mel_weight_matrix(
            np.array(1024, i64), np.array(1 << 15, i64), np.array(16000, i64),
            np.array(0, f32), np.array(8000, f32))),
        ("AffineGrid", lambda: image.affine_grid(np.zeros((1, 2, 3), f32),
                                                 np.array([1, 1, 4096, 4096], i64))),
        ("CenterCropPad", lambda: image.center_crop_pad(np.zeros((2, 2), f32),
                                                        np.array([4096, 4096], i64))),
        ("MaxUnpool", lambda: pool.max_unpool(np.zeros((1, 1, 1, 1), f32),
                                              np.zeros((1, 1, 1, 1), i64),
                                              np.array([1, 1, 4096, 4096], i64),
                                              kernel_shape=[1, 1])),
        ("ConvTranspose", lambda: conv.conv_transpose(np.zeros((1, 1, 2, 2), f32),
                                                      np.zeros((1, 1, 1, 1), f32),
                                                      output_shape=[4096, 4096],
                                                      strides=[2048, 2048])),
        ("OneHot", lambda: indexing.one_hot(np.zeros(4, i64), np.array(n, i64),
                                            np.array([0, 1], f32))),
        ("Pad", lambda: movement.pad_2(np.zeros((2, 2), f32), pads=[0, 0, 4096, 4096])),
    ]


@pytest.mark.parametrize("name,call", _other_value_sized_kernels(),
                         ids=[c[0] for c in _other_value_sized_kernels()])
def test_value_sized_kernels_check_the_budget(name, call):
    with budgets.use_limits(budgets.RunLimits(1 << 20)):
        with pytest.raises(RuntimeException, match=r"^%s: .*more than the limit of 1048576" % name):
            call()
    assert budgets.current_limits() is None     # the block restored the state outside a run


# ---------------------------------------------------------------- constant folding

def test_folding_a_huge_constant_allocates_nothing():
    cos = _child("folding", "ConstantOfShape")["ConstantOfShape"]
    outer = _child("folding", "BroadcastAdd")["BroadcastAdd"]
    assert cos["model_bytes"] < 200
    for r in (cos, outer):
        assert r["error"] is None, r
        assert r["rss_growth"] < 300 << 20, r      # 1.6 GB before the fix
    assert cos["ops"] == ["ConstantOfShape", "Add"]   # left unfolded, as onnxruntime does
    assert outer["ops"] == ["Add", "Add"]


def test_small_constants_still_fold():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        "g", [x], [y], [numpy_helper.from_array(np.array([3], np.int64), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = oe.InferenceSession(model.SerializeToString())
    assert [n.op_type for n in sess.model.graph.nodes] == ["Add"]
    np.testing.assert_array_equal(sess.run(None, {"x": np.ones(3, np.float32)})[0], np.ones(3))


def test_folding_memory_error_is_logged_not_silent(monkeypatch, caplog):
    real_find = registry.find

    def out_of_memory(x):
        raise MemoryError()

    def find(domain, op_type, opset):
        spec = real_find(domain, op_type, opset)
        if op_type == "Neg" and spec is not None:
            return spec._replace(fn=out_of_memory)
        return spec
    monkeypatch.setattr(registry, "find", find)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["n"], name="neg_a"), helper.make_node("Add", ["n", "x"], ["y"])],
        "g", [x], [y], [numpy_helper.from_array(np.ones(2, np.float32), "a")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    from onnxedge import model_io, optimizer
    with caplog.at_level(logging.WARNING, logger="onnxedge"):
        out = optimizer.optimize(model_io.load(model.SerializeToString()), "basic")
    assert [n.op_type for n in out.graph.nodes] == ["Neg", "Add"]
    assert any("neg_a" in rec.getMessage() and "out of memory" in rec.getMessage()
               for rec in caplog.records)


# ---------------------------------------------------------------- loops that never end

@pytest.mark.parametrize("body", ["body", "no_trip_count", "empty_body"])
def test_terminate_stops_a_loop(loop_results, body):
    r = loop_results["terminate/" + body]
    assert r["error"] == "RuntimeException", r
    assert "Loop node 'the_loop'" in r["message"] and "terminate" in r["message"], r


@pytest.mark.parametrize("case", ["run_timeout_ms/body", "run_timeout_ms/no_trip_count",
                                  "run_timeout_ms/empty_body", "session_config_timeout"])
def test_time_limit_stops_a_loop(loop_results, case):
    r = loop_results[case]
    assert r["error"] == "RuntimeException", r
    assert "time limit of 300 ms" in r["message"], r


def test_loop_scan_outputs_are_charged_to_the_budget(loop_results):
    r = loop_results["scan_budget"]
    assert r["error"] == "RuntimeException", r
    assert "Loop node 'the_loop'" in r["message"] and "scan output 0" in r["message"], r
    assert KEY in r["message"]
    assert r["rss_growth"] < 300 << 20, r


def test_terminate_before_the_run_is_refused():
    ro = oe.RunOptions()
    ro.terminate = True
    with pytest.raises(InvalidArgument, match="terminate"):
        oe.InferenceSession(_constant_of_shape(4)).run(None, {}, ro)
