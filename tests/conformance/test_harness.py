"""Tests of the conformance harness itself: comparison rules, expected-failures file, watchdog."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from . import expected as expected_file
from .compare import Mismatch, compare_outputs
from .engines import CaseTimeout, call_with_timeout


def _same(actual, want, rtol=1e-3, atol=1e-7):
    compare_outputs([actual], [want], rtol, atol, ["y"])


def test_floats_use_allclose_rule_and_nan_equals_nan():
    want = np.array([1.0, np.nan, np.inf, 0.0], dtype=np.float32)
    _same(want * np.float32(1 + 5e-4), want)
    with pytest.raises(Mismatch, match="1 of 4 values differ"):
        _same(np.array([1.01, np.nan, np.inf, 0.0], dtype=np.float32), want)
    with pytest.raises(Mismatch):
        _same(np.array([1.0, np.nan, -np.inf, 0.0], dtype=np.float32), want)


def test_dtype_shape_and_type_must_match():
    want = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(Mismatch, match="dtype float64, expected float32"):
        _same(np.zeros((2, 3)), want)
    with pytest.raises(Mismatch, match=r"shape \[3, 2\], expected \[2, 3\]"):
        _same(np.zeros((3, 2), dtype=np.float32), want)
    with pytest.raises(Mismatch, match="expected a numpy.ndarray"):
        _same(np.float32(0), np.zeros((), dtype=np.float32))


def test_integers_and_strings_are_exact():
    _same(np.array([1, 2], dtype=np.int64), np.array([1, 2], dtype=np.int64))
    with pytest.raises(Mismatch, match="first at \\(1,\\)"):
        _same(np.array([1, 3], dtype=np.int64), np.array([1, 2], dtype=np.int64))
    strings = np.array(["a", "b"], dtype=object)
    _same(np.array([b"a", "b"], dtype=object), strings)
    with pytest.raises(Mismatch, match="strings differ"):
        _same(np.array(["a", "c"], dtype=object), strings)


def test_sequences_optionals_and_output_count():
    seq = [np.ones(2, dtype=np.float32), np.zeros(1, dtype=np.int32)]
    _same([s.copy() for s in seq], seq)
    with pytest.raises(Mismatch, match="sequence of 1, expected 2"):
        _same(seq[:1], seq)
    _same(None, None)
    with pytest.raises(Mismatch, match="expected None"):
        _same(seq[0], None)
    with pytest.raises(Mismatch, match="got 2 outputs, expected 1"):
        compare_outputs([seq[0], seq[0]], [seq[0]], 1e-3, 1e-7)


def test_expected_file_round_trip_and_update(tmp_path):
    path = str(tmp_path / "CPUExecutionProvider.txt")
    expected_file.write(path, {"test_a": "not implemented yet: op A (issue 3)",
                               "test_b": "NotImplemented: no kernel for op B"}, "CPU", "1.23.2")
    entries = expected_file.read(path)
    assert entries == {"test_a": "not implemented yet: op A (issue 3)",
                       "test_b": "NotImplemented: no kernel for op B"}
    new = expected_file.updated(entries, ran=["test_a", "test_b", "test_c"],
                                failures={"test_a": "Mismatch: x", "test_b": "Mismatch: y",
                                          "test_c": "Mismatch: z"},
                                known=["test_a", "test_b", "test_c"])
    tag = expected_file.OLD_INTERPRETER_TAG + " " if sys.version_info < (3, 10) else ""
    assert new == {"test_a": "not implemented yet: op A (issue 3)",   # hand-written: kept
                   "test_b": "Mismatch: y",                            # machine-made: refreshed
                   "test_c": tag + "Mismatch: z"}                      # new
    assert expected_file.updated(entries, ran=["test_a"], failures={}) == {
        "test_b": "NotImplemented: no kernel for op B"}


def test_expected_file_needs_a_reason(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("test_a\n")
    with pytest.raises(expected_file.BadExpectedFile, match="reason"):
        expected_file.read(str(path))


def test_watchdog_interrupts_a_runaway_case():
    def spin():
        while True:
            pass
    start = time.time()
    with pytest.raises(CaseTimeout):
        call_with_timeout(spin, 0.2)
    assert time.time() - start < 2
    assert call_with_timeout(lambda: 7, 1) == 7


def test_conditions_limit_where_a_line_applies(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("test_a  # [python<3.0] Mismatch: old\n"
                    "test_b  # [python>=3.0, numpy>=1] not implemented yet: op B\n")
    entries = expected_file.read(str(path))
    assert expected_file.active(entries) == {"test_b": entries["test_b"]}
    # test_a's line does not apply here: kept as is whether the case ran or not
    new = expected_file.updated(entries, ran=["test_a", "test_b"], failures={"test_b": "X: y"})
    assert new == entries
    tag = expected_file.OLD_INTERPRETER_TAG + " " if sys.version_info < (3, 10) else ""
    assert expected_file.updated({}, ["test_c"], {"test_c": "Mismatch: z"}) == {
        "test_c": tag + "Mismatch: z"}
    path.write_text("test_a  # [cuda<2] x\n")
    with pytest.raises(expected_file.BadExpectedFile, match="bad condition"):
        expected_file.read(str(path))


def test_flaky_lines_survive_passing_runs():
    entries = {"test_r": "[flaky] random output", "test_s": "Mismatch: s"}
    assert expected_file.is_flaky(entries["test_r"]) and not expected_file.is_flaky(entries["test_s"])
    assert expected_file.updated(entries, ran=["test_r", "test_s"], failures={}) == {
        "test_r": "[flaky] random output"}


def test_listed_case_no_longer_claimed_counts_as_unexpected_pass():
    from . import run
    unclaimed = run.Result("test_a", "Conv", "nn", run.SKIPPED, "not claimed: dtype", 0.0, False)
    skipped = run.Result("test_b", "Conv", "nn", run.SKIPPED, "needs ml_dtypes", 0.0)
    verdict = run.check([unclaimed, skipped], {"test_a": "was wrong", "test_b": "was wrong"},
                        ["test_a", "test_b"])
    assert [r.name for r in verdict.unexpected_passes] == ["test_a"]
    assert not verdict.unexpected_failures


def test_only_a_package_outside_onnxedge_makes_a_provider_unavailable():
    from . import providers as eps
    assert eps.lacks_outside_package(ModuleNotFoundError("no coremltools", name="coremltools"))
    assert not eps.lacks_outside_package(ImportError("cannot import name 'bridge'",
                                                     name="onnxedge.web.wasm"))
    assert not eps.lacks_outside_package(ModuleNotFoundError("gone", name="onnxedge.web.x"))


def test_frozen_case_makes_inputs_after_the_first_initializers():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from . import cases as node_cases
    from . import providers as eps
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["y"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    info = node_cases.CaseInfo("test_add", "Add", "", 17, 1e-3, 1e-7, "")
    x, b = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    case = node_cases.Case(info, model.SerializeToString(), ["x", "b"], ["y"], [([x, b], [x + b])])
    frozen = eps.frozen(case)
    back = onnx.load_from_string(frozen.model)
    assert [i.name for i in back.graph.input] == ["x"] and frozen.input_names == ["x"]
    assert [t.name for t in back.graph.initializer] == ["b"]
    (feeds, want), = frozen.data_sets
    assert len(feeds) == 1 and feeds[0] is x and want[0].tolist() == [4, 6]
    assert eps.frozen(case._replace(input_names=["x"])) is None
