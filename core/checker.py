"""Structural checks of an IR graph before it runs: every read is defined, outputs are unique,
nodes are in topological order (sorted when they are not), and the graph has no cycle."""
from __future__ import annotations

from typing import Dict, Iterable, List, Set

from . import ir
from .errors import InvalidGraph


def _reads(node: ir.Node) -> List[str]:
    reads = [n for n in node.inputs if n]
    for _, sub in node.subgraphs():
        reads.extend(sub.outer_references())
    return reads


def topological_order(graph: ir.Graph, outer: Iterable[str] = ()) -> List[ir.Node]:
    """The graph's nodes in an order where each node follows the producers of what it reads."""
    available: Set[str] = set(outer) | set(graph.initializers) | {v.name for v in graph.inputs}
    producer: Dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        if not node.op_type:
            raise InvalidGraph("node %d (%r) of graph %r has an empty op_type" % (i, node.name, graph.name))
        for out in node.outputs:
            if not out:
                continue
            if out in producer or out in graph.initializers:
                raise InvalidGraph("value %r of graph %r is produced twice (by %s and again by %s)"
                                   % (out, graph.name, graph.nodes[producer[out]].describe()
                                      if out in producer else "an initializer", node.describe()))
            producer[out] = i
    deps: List[Set[int]] = []
    for node in graph.nodes:
        d: Set[int] = set()
        for name in _reads(node):
            if name in producer:
                d.add(producer[name])
            elif name not in available:
                raise InvalidGraph("%s of graph %r reads %r, which no graph input, initializer, "
                                   "node output or outer scope defines" % (node.describe(), graph.name, name))
        deps.append(d)
    if all(all(j < i for j in d) for i, d in enumerate(deps)):
        return list(graph.nodes)
    users: List[List[int]] = [[] for _ in graph.nodes]
    pending = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, n in enumerate(pending) if n == 0]
    order: List[int] = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if len(order) != len(graph.nodes):
        stuck = [graph.nodes[i].describe() for i in range(len(graph.nodes)) if pending[i] > 0][:3]
        raise InvalidGraph("graph %r has a cycle through %s" % (graph.name, ", ".join(stuck)))
    return [graph.nodes[i] for i in order]


def check_graph(graph: ir.Graph, outer: Iterable[str] = ()) -> None:
    """Validate (and topologically sort, in place) a graph and all its subgraphs."""
    outer = set(outer)
    graph.nodes = topological_order(graph, outer)
    defined = outer | set(graph.initializers) | {v.name for v in graph.inputs}
    for node in graph.nodes:
        for _, sub in node.subgraphs():
            check_graph(sub, defined)
        defined.update(o for o in node.outputs if o)
    names = [v.name for v in graph.inputs]
    if len(set(names)) != len(names):
        raise InvalidGraph("graph %r declares an input twice: %s" % (graph.name, names))
    for out in graph.outputs:
        if out.name not in defined:
            raise InvalidGraph("output %r of graph %r is never produced" % (out.name, graph.name))
