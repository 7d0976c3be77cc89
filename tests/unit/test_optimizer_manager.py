"""The optimizer's levels, the pass manager and the session's use of them."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxedge
from onnxedge import onnx_loader
from onnxedge.optimizer import level_name, optimize

from optimizer_util import assert_same_outputs, make_model, ops, rand, reference, vi


def _mlp() -> bytes:
    nodes = [helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("MatMul", ["xi", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    return make_model(nodes, [vi("x", ["n", 3])], [vi("y", ["n", 4])], {"w": rand(3, 4), "b": rand(4, seed=1)})


@pytest.mark.parametrize("level,expected", [
    ("disable", ["Identity", "MatMul", "Add", "Relu"]), ("basic", ["MatMul", "Add", "Relu"]),
    ("extended", ["FusedGemm"]), ("all", ["FusedGemm"]), (2, ["FusedGemm"]), (0, ["Identity", "MatMul", "Add", "Relu"])])
def test_levels(level, expected):
    data = _mlp()
    model = onnx_loader.load_model(data)
    out = optimize(model, level)
    assert ops(out) == expected
    assert ops(model) == ["Identity", "MatMul", "Add", "Relu"]      # the input model is untouched
    assert_same_outputs(data, out, {"x": rand(5, 3, seed=2)})


def test_level_names():
    assert [level_name(x) for x in (0, 1, 2, 3, 99)] == ["disable", "basic", "extended", "all", "all"]
    assert level_name("ORT_ENABLE_EXTENDED") == "extended" and level_name("ORT_ENABLE_LAYOUT") == "all"
    with pytest.raises(onnxedge.InvalidArgument, match="optimization level"):
        level_name(7)


def test_session_default_level_fuses_and_disable_does_not():
    data = _mlp()
    sess = onnxedge.InferenceSession(data)
    assert [(r["op_type"], r["domain"]) for r in sess.partition_report()] == [("FusedGemm", "com.onnxedge")]
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = onnxedge.InferenceSession(data, opts)
    assert len(plain.partition_report()) == 4
    x = rand(3, 3, seed=4)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], plain.run(None, {"x": x})[0], rtol=1e-6)
    assert [o.name for o in sess.get_outputs()] == ["y"] and sess.get_outputs()[0].shape == ["n", 4]


def test_optimized_model_filepath_writes_the_fused_model(tmp_path):
    data = _mlp()
    opts = onnxedge.SessionOptions()
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    onnxedge.InferenceSession(data, opts)
    saved = onnx_loader.load_model(str(tmp_path / "opt.onnx"))
    assert ops(saved) == ["FusedGemm"] and saved.opset("com.onnxedge") == 1
    x = rand(2, 3, seed=5)
    again = onnxedge.InferenceSession(str(tmp_path / "opt.onnx"))
    np.testing.assert_allclose(again.run(None, {"x": x})[0],
                               np.maximum(x @ rand(3, 4) + rand(4, seed=1), 0), rtol=1e-5, atol=1e-6)


def test_fixpoint_across_passes():
    """Folding exposes a bias, then the bias exposes an activation: all in one optimize call."""
    nodes = [helper.make_node("Constant", [], ["half"], value_float=0.5),
             helper.make_node("Mul", ["b", "half"], ["hb"]),
             helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "hb"], ["a"]),
             helper.make_node("Identity", ["a"], ["ai"]), helper.make_node("Tanh", ["ai"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 2, 3])], [vi("y", None)], {"w": rand(3, 4), "b": rand(4, seed=1)})
    model = optimize(onnx_loader.load_model(data), "all")
    assert ops(model) == ["FusedMatMul"] and model.graph.nodes[0].attributes["activation"] == "Tanh"
    assert_same_outputs(data, model, {"x": rand(2, 2, 3, seed=2)})


def test_a_failing_pass_leaves_the_model_unoptimized(monkeypatch, caplog):
    from onnxedge.optimizer import manager

    def broken(ctx):
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(manager.PASSES, "basic", [broken])
    model = onnx_loader.load_model(_mlp())
    with caplog.at_level("WARNING", logger="onnxedge"):
        out = optimize(model, "basic")
    assert out is model and "ZeroDivisionError: boom" in caplog.text


def test_a_saved_optimized_model_skips_the_passes_it_has_had(tmp_path, monkeypatch):
    from onnxedge import optimizer
    from onnxedge.optimizer import manager
    basic = optimize(onnx_loader.load_model(_mlp()), "basic")
    assert basic.metadata_props[optimizer.STAMP_KEY] == "basic %d" % optimizer.VERSION
    assert optimizer.already_optimized(basic, "basic") and not optimizer.already_optimized(basic, "all")
    assert ops(optimize(basic, "all")) == ["FusedGemm"]            # a higher level still runs
    opts = onnxedge.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "m.oxe")
    onnxedge.InferenceSession(_mlp(), opts)
    calls = []
    real = manager.run_passes
    monkeypatch.setattr(manager, "run_passes", lambda *a: calls.append(a) or real(*a))
    sess = onnxedge.InferenceSession(str(tmp_path / "m.oxe"))         # stamped "all": no pass runs
    assert calls == []
    x = rand(2, 3, seed=5)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], reference(_mlp(), {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    stale = onnx_loader.load_model(_mlp())
    stale.metadata_props[optimizer.STAMP_KEY] = "all %d" % (optimizer.VERSION + 1)
    assert not optimizer.already_optimized(stale, "basic")          # another optimizer version
    assert ops(optimize(stale, "all")) == ["FusedGemm"]
