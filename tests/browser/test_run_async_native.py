"""`InferenceSession.run_async` outside the page: awaits the steps that have `run_async`, runs
the others, and gives what `run` gives (the path the page's WebGPU device takes)."""
from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Dict, List

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import ir
from onnxedge.providers import discovery
from onnxedge.providers.base import ExecutionProvider, Step


def await_(coro: Any) -> Any:
    """Run a coroutine to completion on a fresh loop in its own thread (pytest-playwright keeps
    an event loop running in the main thread once a browser test has started)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _model() -> bytes:
    """y = Relu(x + 1) * 2 with Add/Mul on the fake async provider and Relu on CPU."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Add", ["x", "one"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "two"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], [one, two])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


class AsyncOnlyProvider(ExecutionProvider):
    """Claims Add and Mul; its steps compute only in `run_async` (their `run` refuses)."""

    name = "AsyncOnlyExecutionProvider"
    calls: List[str] = []

    def get_capability(self, graph: ir.Graph, ctx: Any) -> List[List[int]]:
        return [[i] for i, n in enumerate(graph.nodes) if n.op_type in ("Add", "Mul")]

    def compile(self, graph: ir.Graph, group: Any, ctx: Any) -> Step:
        [node] = group.nodes
        fn = np.add if node.op_type == "Add" else np.multiply

        def run(env: Dict[str, Any]) -> None:
            raise AssertionError("run_async must not call the blocking run of an async step")

        async def run_async(env: Dict[str, Any]) -> None:
            await asyncio.sleep(0)
            AsyncOnlyProvider.calls.append(node.op_type)
            env[node.outputs[0]] = fn(env[node.inputs[0]], env[node.inputs[1]])

        return Step(self.name, group.node_indices, run, run_async)


@pytest.fixture
def session(monkeypatch):
    classes = dict(discovery.provider_classes(), AsyncOnlyExecutionProvider=AsyncOnlyProvider)
    monkeypatch.setattr(discovery, "provider_classes", lambda: classes)
    AsyncOnlyProvider.calls = []
    return onnxedge.InferenceSession(_model(), providers=["AsyncOnlyExecutionProvider",
                                                          "CPUExecutionProvider"])


def test_run_async_awaits_async_steps_and_runs_the_others(session):
    x = np.array([[-3, -1, 0], [0.5, 2, 4]], np.float32)
    [y] = await_(session.run_async(None, {"x": x}))
    np.testing.assert_array_equal(y, np.maximum(x + 1, 0) * 2)
    assert AsyncOnlyProvider.calls == ["Add", "Mul"]
    # the middle node runs on the host: numpy, or the C engine in front of it where it loads
    host = {"CPUExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider"}
    got = [r["provider"] for r in session.partition_report()]
    assert got[0] == got[2] == "AsyncOnlyExecutionProvider" and got[1] in host


def test_run_async_checks_feeds_like_run(session):
    with pytest.raises(onnxedge.InvalidArgument, match="input 'x'"):
        await_(session.run_async(None, {"x": np.zeros((2, 3), np.float64)}))
    with pytest.raises(onnxedge.InvalidArgument, match="not an output"):
        await_(session.run_async(["nope"], {"x": np.zeros((2, 3), np.float32)}))


def test_run_async_equals_run_on_cpu():
    sess = onnxedge.InferenceSession(_model())
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    [a] = sess.run(None, {"x": x})
    [b] = await_(sess.run_async(None, {"x": x}))
    np.testing.assert_array_equal(a, b)
    assert b.flags.writeable


def test_needs_run_async_tells_sessions_with_async_steps(session):
    """onnxedge.js calls `run` synchronously when this is False (CPU only), else `run_async`."""
    assert session.needs_run_async is True
    assert onnxedge.InferenceSession(_model()).needs_run_async is False
