"""check_graph on deeply nested subgraphs works out each subgraph's outer references once
(it did so once per enclosing level: depth^2 x names)."""
from __future__ import annotations

from onnxedge import checker, dtypes, ir


def _nested(depth: int, names: int) -> ir.Graph:
    t = ir.TypeInfo.tensor(dtypes.from_numpy("float32"), [1])
    inner = ir.Graph(name="g%d" % depth, nodes=[ir.Node("Sum", ["v%d" % i for i in range(names)], ["o%d" % depth])],
                     inputs=[], outputs=[ir.ValueInfo("o%d" % depth, t)])
    for level in range(depth - 1, -1, -1):
        other = ir.Graph(name="e%d" % level, nodes=[ir.Node("Identity", ["v0"], ["x%d" % level])],
                         inputs=[], outputs=[ir.ValueInfo("x%d" % level, t)])
        node = ir.Node("If", ["cond"], ["o%d" % level], attributes={"then_branch": inner, "else_branch": other})
        inner = ir.Graph(name="g%d" % level, nodes=[node], inputs=[], outputs=[ir.ValueInfo("o%d" % level, t)])
    top = inner
    top.inputs = [ir.ValueInfo("cond", ir.TypeInfo.tensor(dtypes.from_numpy("bool"), []))] + \
        [ir.ValueInfo("v%d" % i, t) for i in range(names)]
    return top


def test_outer_references_worked_out_once_per_subgraph(monkeypatch):
    graph = _nested(depth=30, names=2000)
    computed = []
    original = ir.Graph.outer_references

    def counting(self, cache=None):
        if cache is None or id(self) not in cache:
            computed.append(self.name)
        return original(self, cache)
    monkeypatch.setattr(ir.Graph, "outer_references", counting)
    checker.check_graph(graph)
    # each of the 60 subgraphs (30 then-branches nested in each other, 30 small else-branches)
    # once, however deep it sits
    assert len(computed) <= 60, len(computed)
