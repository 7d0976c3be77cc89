"""Buffer reuse within a run: a temporary whose last use inside the partition has passed gives
its buffer to a later output of the same run (views keep their base alive), so the ResNet and
BERT benchmark models draw far fewer bytes per run, with bitwise the same outputs."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import helper

import onnxedge
from onnxedge.web.webgpu import runtime

from .helpers import compare, model

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
models = pytest.importorskip("models")
mk = helper.make_node


def _run(m, feeds, providers, reuse, monkeypatch):
    monkeypatch.setattr(runtime.Recorder, "reuse_in_run", reuse)
    sess = onnxedge.InferenceSession(m, providers=providers)
    out = sess.run(None, feeds)
    parts = [s.run.__self__ for s in sess._plan.steps if s.provider == "WebGpuExecutionProvider"]
    stats = [p.last_stats for p in parts]
    return out, sum(s["temp_bytes"] for s in stats), sum(s["reused_in_run"] for s in stats)


def test_dead_after_follows_last_use():
    from collections import namedtuple
    N = namedtuple("N", "inputs outputs")
    nodes = [N(["x"], ["a"]), N(["a"], ["b"]), N(["a", "b"], ["c"]), N(["c"], ["d", "unused"]),
             N(["d", ""], ["y"])]
    assert runtime.dead_after(nodes, ["y", "b"]) == [[], [], ["a"], ["c", "unused"], ["d"]]


def test_views_keep_their_buffer_alive(webgpu, monkeypatch):
    # a dies at the Reshape, but its view r is read after Tanh allocates a new output
    rng = np.random.default_rng(3)
    x, x2 = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6, 4)))
    nodes = [mk("Relu", ["x"], ["a"]), mk("Reshape", ["a", "s"], ["r"]),
             mk("Tanh", ["x2"], ["t"]), mk("Add", ["r", "t"], ["y"])]
    m = model(nodes, {"x": x, "x2": x2}, {"s": np.array([6, 4], np.int64)})
    compare(m, {"x": x, "x2": x2})
    _, _, reused = _run(m, {"x": x, "x2": x2}, webgpu, True, monkeypatch)
    assert reused == 0    # the only dead temporary (a) is still seen through r


@pytest.mark.parametrize("name,most", [("resnet18", 0.6), ("bert_encoder", 0.6)])
def test_models_draw_fewer_bytes_per_run(webgpu, monkeypatch, name, most):
    m = models.build(name).SerializeToString()
    feeds = models.make_inputs(name, batch=1)
    before, bytes_before, _ = _run(m, feeds, webgpu, False, monkeypatch)
    after, bytes_after, reused = _run(m, feeds, webgpu, True, monkeypatch)
    assert reused > 0
    assert bytes_after <= most * bytes_before, (bytes_before, bytes_after)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
