"""Runs the passes of a level over a graph and its subgraphs until nothing changes.

After every pass the graph is tidied: unused initializers and stale value infos are dropped and
the nodes are put back in topological order.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Sequence

from .. import ir
from ..checker import topological_order
from .context import PassContext
from .passes import (activation_fusion, attention_fusion, bias_fusion, cast_hoist, constant_folding,
                     contrib_mapping, conv_add_fusion, conv_bn, dead_code, eliminate, gelu_fusion,
                     if_folding, layer_norm_fusion, qdq_fusion, reshape_chain, reshape_target,
                     shape_folding, silu_fusion)

Pass = Callable[[PassContext], bool]
MAX_ROUNDS = 8

BASIC: List[Pass] = [constant_folding.run, if_folding.run, eliminate.run, shape_folding.run,
                     reshape_target.run, reshape_chain.run, dead_code.run]
EXTENDED: List[Pass] = BASIC + [contrib_mapping.run, conv_bn.run, bias_fusion.run,
                                conv_add_fusion.run, gelu_fusion.run, layer_norm_fusion.run,
                                attention_fusion.run, silu_fusion.run,
                                activation_fusion.run, cast_hoist.run]
# "all" adds the QDQ fusion (integer QLinearConv / QLinearMatMul / QGemm from QDQ groups) before
# the extended fusions (which would take its Conv + Relu); sessions whose providers consume QDQ
# groups themselves leave it out (optimize(keep_qdq=True)).
ALL: List[Pass] = BASIC + [qdq_fusion.run] + EXTENDED[len(BASIC):]
PASSES: Dict[str, List[Pass]] = {"disable": [], "basic": BASIC, "extended": EXTENDED,
                                 "all": ALL}


def tidy(graph: ir.Graph, outer: Iterable[str] = ()) -> None:
    """Drop initializers nothing reads and value infos of values nothing makes; sort the nodes."""
    reads = {o.name for o in graph.outputs}
    made = set()
    for node in graph.nodes:
        reads.update(node.reads())
        made.update(node.outputs)
    fed = {v.name for v in graph.inputs}
    for name in [n for n in graph.initializers if n not in reads and n not in fed]:
        del graph.initializers[name]
    for name in [n for n in graph.value_info if n not in made]:
        del graph.value_info[name]
    graph.nodes = topological_order(graph, outer)


def run_passes(model: ir.Model, graph: ir.Graph, passes: Sequence[Pass],
               outer: Iterable[str] = ()) -> bool:
    """Apply `passes` in order, repeatedly (at most MAX_ROUNDS times), to `graph` and, first,
    to its subgraphs. True when anything changed."""
    if not passes:
        return False
    outer = set(outer)
    visible = outer | set(graph.initializers) | {v.name for v in graph.inputs}
    changed_any = False
    for node in graph.nodes:
        for _, sub in node.subgraphs():
            scope = visible | set(_defined_before(graph, node))
            changed_any |= run_passes(model, sub, passes, scope)
    for _ in range(MAX_ROUNDS):
        changed = False
        for fn in passes:
            if fn(PassContext(model, graph, outer)):
                tidy(graph, outer)
                changed = True
        changed_any |= changed
        if not changed:
            break
    return changed_any


def _defined_before(graph: ir.Graph, stop: ir.Node) -> List[str]:
    names: List[str] = []
    for node in graph.nodes:
        if node is stop:
            break
        names.extend(o for o in node.outputs if o)
    return names
