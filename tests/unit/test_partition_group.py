"""The partitioner's Group (inputs, exported values, frees, constants, worked out once) and
ir.Node.reads(), against what the graphs say by hand."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import pytest

from onnxedge import executor, ir
from onnxedge.partition import build_plan
from onnxedge.providers.base import CompileContext, Group, GraphIndex, Step
from onnxedge.providers.cpu import CPUExecutionProvider

F32 = 1


def _vi(name: str) -> ir.ValueInfo:
    return ir.ValueInfo(name, ir.TypeInfo.tensor(F32, [2]))


def _then_branch() -> ir.Graph:
    # reads `b` from the outer scope: a value only a subgraph captures
    return ir.Graph("then", [ir.Node("Identity", ["b"], ["t"])], [], [ir.ValueInfo("t")])


def _graph() -> ir.Graph:
    nodes = [
        ir.Node("Constant", [], ["k"], {"value": np.ones(2, np.float32)}, name="const"),  # 0
        ir.Node("Add", ["x", "w_fixed"], ["a"], name="add"),                              # 1
        ir.Node("Mul", ["a", "k"], ["b"], name="mul"),                                    # 2
        ir.Node("Sub", ["b", "w_fed"], ["c"], name="sub"),                                # 3
        ir.Node("Relu", ["c"], ["d"], name="relu"),                                       # 4
        ir.Node("If", ["cond"], ["e"], {"then_branch": _then_branch(),
                                        "else_branch": _then_branch()}, name="if"),     # 5
    ]
    return ir.Graph("g", nodes,
                    [_vi("x"), ir.ValueInfo("cond", ir.TypeInfo.tensor(9, [])), _vi("w_fed")],
                    [_vi("d"), _vi("e")],
                    {"w_fixed": np.ones(2, np.float32), "w_fed": np.zeros(2, np.float32)})


def test_node_reads_inputs_and_subgraph_outer_references():
    g = _graph()
    assert g.nodes[5].reads() == ["cond", "b", "b"]   # once per branch that captures it
    assert ir.Node("Conv", ["x", "w", ""], ["y"]).reads() == ["x", "w"]


def test_group_inputs_exports_frees_and_constants():
    g = _graph()
    free = executor.last_uses(g.nodes, [o.name for o in g.outputs])
    group = Group(g, [1, 2, 3], {i: f for i, f in enumerate(free)})
    assert group.nodes == g.nodes[1:4]
    assert group.inputs == ["x", "w_fixed", "k", "w_fed"]
    # b: captured by the If's subgraph after the group; c: read by Relu; a: used inside only
    assert group.exported == ["b", "c"]
    # a fed initializer can be overridden by a feed: not a constant; a Constant output is one
    assert group.constants == ["w_fixed", "k"]
    assert group.free_after == [free[1], free[2], free[3]]
    assert group.freed == free[1] + free[2] + free[3]
    assert "a" in group.freed and "b" not in group.freed


def test_group_exports_graph_outputs_and_nothing_read_only_inside():
    g = _graph()
    index = GraphIndex(g)
    tail = Group(g, [3, 4], index=index)
    assert tail.exported == ["d"]                      # c stays inside, d is a graph output
    whole = Group(g, list(range(6)), index=index)
    assert whole.exported == ["d", "e"]
    assert whole.inputs == ["x", "w_fixed", "w_fed", "cond"]


def test_the_partitioner_hands_each_provider_a_group():
    g = _graph()
    seen: List[Group] = []

    class Spy(CPUExecutionProvider):
        name = "SpyExecutionProvider"

        def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
            return [[2, 3]]

        def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
            seen.append(group)
            return super().compile(graph, group, ctx)

    free = executor.last_uses(g.nodes, [o.name for o in g.outputs])
    ctx = CompileContext({"": 17}, {i: f for i, f in enumerate(free)})
    plan = build_plan(g, [Spy(), CPUExecutionProvider()], ctx)
    assert [s.provider for s in plan.steps] == ["CPUExecutionProvider", "SpyExecutionProvider",
                                                "CPUExecutionProvider"]
    [group] = seen
    assert group.node_indices == [2, 3] and group.inputs == ["a", "k", "w_fed"]
    assert group.exported == ["b", "c"] and group.constants == ["k"]


def test_wasm_step_exports_only_what_is_read_outside(monkeypatch):
    # the wasm provider used to keep every value of a step as soon as any later node had a
    # subgraph; the Group says exactly which values leave it
    import os
    import sys
    from onnxedge.edge.neon import library
    if not os.path.isfile(library.library_path()):
        pytest.skip("the host kernel library is not built (make setup)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from wasm_host_kernels import HostKernels
    from onnxedge.web.wasm.provider import WasmSimdExecutionProvider
    w = np.ones((2, 2), np.float32)
    nodes = [ir.Node("MatMul", ["x", "w"], ["m1"], name="mm1"),
             ir.Node("MatMul", ["m1", "w"], ["m2"], name="mm2"),
             ir.Node("If", ["cond"], ["e"], {"then_branch": ir.Graph(
                 "t", [ir.Node("Identity", ["m2"], ["t"])], [], [ir.ValueInfo("t")]),
                 "else_branch": ir.Graph(
                 "f", [ir.Node("Identity", ["m2"], ["f"])], [], [ir.ValueInfo("f")])},
                 name="if")]
    g = ir.Graph("g", nodes, [ir.ValueInfo("x", ir.TypeInfo.tensor(F32, [2, 2])),
                              ir.ValueInfo("cond", ir.TypeInfo.tensor(9, []))],
                 [ir.ValueInfo("e")], {"w": w})
    ep = WasmSimdExecutionProvider({"kernels": HostKernels()})
    from onnxedge.web.wasm import provider as wasm_provider
    step = wasm_provider._WasmStep(ep, g, Group(g, [0, 1]), CompileContext({"": 17}, {}))
    assert step.inputs == ["x"] and step.outputs == ["m2"]
