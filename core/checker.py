"""Structural checks of an IR graph before it runs: every read is defined, outputs are unique,
nodes are in topological order (sorted when they are not), and the graph has no cycle.

Op types and domains must be plain identifiers (`check_op_identifiers`): tools write them into
generated files (a reduced build's kernel index, config files, shell hints), so a model must not
be able to smuggle quotes, newlines or code through them. Both loaders refuse such a model.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Set

from . import ir
from .errors import InvalidGraph


OP_TYPE_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
DOMAIN_PATTERN = r"(?:%s(?:\.%s)*)?" % (OP_TYPE_PATTERN, OP_TYPE_PATTERN)
_OP_TYPE = re.compile(OP_TYPE_PATTERN + r"\Z")
_DOMAIN = re.compile(DOMAIN_PATTERN + r"\Z")


def is_op_type(text: object) -> bool:
    """True when `text` is a valid op type: `[A-Za-z_][A-Za-z0-9_]*` (ASCII only)."""
    return isinstance(text, str) and _OP_TYPE.match(text) is not None


def is_domain(text: object) -> bool:
    """True when `text` is a valid domain: empty, or dotted identifiers ("ai.onnx.ml")."""
    return isinstance(text, str) and _DOMAIN.match(text) is not None


def op_identifier_error(domain: object, op_type: object) -> Optional[str]:
    """Why (domain, op_type) is not a pair of plain identifiers, or None when it is."""
    if not is_op_type(op_type):
        return "op_type %r is not an identifier (expected %s)" % (op_type, OP_TYPE_PATTERN)
    if not is_domain(domain):
        return ("domain %r is not empty or dotted identifiers (expected e.g. 'ai.onnx.ml', "
                "'com.microsoft')" % (domain,))
    return None


def check_op_pair(domain: object, op_type: object, where: str = "") -> None:
    """InvalidGraph (prefixed by `where`) unless op_type and domain are plain identifiers."""
    why = op_identifier_error(domain, op_type)
    if why is not None:
        raise InvalidGraph("%s%s" % (where + ": " if where else "", why))


def _check_node_identifiers(graph: ir.Graph, where: str = "") -> None:
    """check_op_pair for the nodes of one graph (not its subgraphs)."""
    seen: Set[tuple] = set()
    for i, node in enumerate(graph.nodes):
        key = (node.domain, node.op_type)
        if key in seen:
            continue
        why = op_identifier_error(node.domain, node.op_type)
        if why is not None:
            raise InvalidGraph("%snode %d (name %r) of graph %r: %s" % (where, i, node.name,
                                                                        graph.name, why))
        seen.add(key)


def check_op_identifiers(graph: ir.Graph, where: str = "") -> None:
    """InvalidGraph naming the node (index, name, graph) and the offending text when an op type
    or domain of `graph` or of any subgraph (If/Loop/Scan bodies) is not a plain identifier."""
    todo = [graph]
    while todo:
        g = todo.pop()
        _check_node_identifiers(g, where)
        for node in g.nodes:
            todo.extend(sub for _, sub in node.subgraphs())


def check_model_identifiers(model: ir.Model) -> ir.Model:
    """check_op_identifiers on the main graph and every model-local function (its name and domain
    too, which calls use as op type and domain); returns the model, for loaders to wrap with."""
    check_op_identifiers(model.graph)
    for k, f in enumerate(model.functions):
        check_op_pair(f.domain, f.name, "model-local function %d (%r)" % (k, f.name))
        check_op_identifiers(ir.Graph(f.name, f.nodes),
                             "model-local function %d (%r): " % (k, f.name))
    return model


def topological_order(graph: ir.Graph, outer: Iterable[str] = (),
                      cache: Optional[Dict[int, List[str]]] = None) -> List[ir.Node]:
    """The graph's nodes in an order where each node follows the producers of what it reads
    (`cache`: outer references of subgraphs already worked out, see Graph.outer_references)."""
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
        for name in node.reads(cache):
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


def check_graph(graph: ir.Graph, outer: Iterable[str] = (),
                _cache: Optional[Dict[int, List[str]]] = None) -> None:
    """Validate (and topologically sort, in place) a graph and all its subgraphs; each
    subgraph's outer references are worked out once, however deep the nesting."""
    cache: Dict[int, List[str]] = {} if _cache is None else _cache
    outer = set(outer)
    _check_node_identifiers(graph)   # subgraphs: by the recursion below
    graph.nodes = topological_order(graph, outer, cache)
    defined = outer | set(graph.initializers) | {v.name for v in graph.inputs}
    for node in graph.nodes:
        for _, sub in node.subgraphs():
            check_graph(sub, defined, cache)
        defined.update(o for o in node.outputs if o)
    names = [v.name for v in graph.inputs]
    if len(set(names)) != len(names):
        raise InvalidGraph("graph %r declares an input twice: %s" % (graph.name, names))
    for out in graph.outputs:
        if out.name not in defined:
            raise InvalidGraph("output %r of graph %r is never produced" % (out.name, graph.name))
