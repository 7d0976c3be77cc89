"""Assigns each node of a graph to an execution provider and compiles the resulting steps.

Greedy, in the user's priority order: each provider claims the groups it can run among the
nodes still free; CPU comes last and takes the rest. Consecutive nodes (in topological order) on
the same provider become one step, so the plan is always a valid order of execution.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

from . import ir
from .errors import NotImplemented
from .providers.base import CompileContext, ExecutionProvider, GraphIndex, Group, Step


class Assignment(NamedTuple):
    """Which provider runs a node, and why the providers before it passed it over."""

    node_index: int
    provider: str
    fallback_reasons: Dict[str, str]


class Plan:
    """Ordered compiled steps plus the node-to-provider assignment for reports."""

    def __init__(self, steps: List[Step], assignments: List[Assignment]):
        self.steps = steps
        self.assignments = assignments

    def providers_used(self) -> List[str]:
        """Provider names that run at least one node, in step order without repeats."""
        seen: List[str] = []
        for s in self.steps:
            if s.provider not in seen:
                seen.append(s.provider)
        return seen


def assign(graph: ir.Graph, providers: List[ExecutionProvider], ctx: CompileContext) -> List[Assignment]:
    """The provider of every node: first claimant in priority order; NotImplemented if none."""
    owner: List[Optional[str]] = [None] * len(graph.nodes)
    reasons: List[Dict[str, str]] = [{} for _ in graph.nodes]
    for provider in providers:
        claimed = set()
        for group in provider.get_capability(graph, ctx):
            claimed.update(i for i in group if owner[i] is None)
        for i, node in enumerate(graph.nodes):
            if owner[i] is not None:
                continue
            if i in claimed:
                owner[i] = provider.name
            else:
                why = provider.unsupported_reason(node, ctx)
                reasons[i][provider.name] = why or "not claimed"
    for i, node in enumerate(graph.nodes):
        if owner[i] is None:
            raise NotImplemented("%s at opset %d: %s" % (
                node.describe(), ctx.opset_of(node), "; ".join(
                    "%s: %s" % kv for kv in reasons[i].items())))
    return [Assignment(i, owner[i], reasons[i]) for i in range(len(graph.nodes))]  # type: ignore


def build_plan(graph: ir.Graph, providers: List[ExecutionProvider], ctx: CompileContext) -> Plan:
    """Assign nodes, group consecutive nodes per provider, and compile each Group (its inputs,
    exported values, frees and constants worked out here, once)."""
    assignments = assign(graph, providers, ctx)
    by_name = {p.name: p for p in providers}
    index = GraphIndex(graph)
    steps: List[Step] = []
    runs: List[List[int]] = []
    for a in assignments:
        if runs and assignments[runs[-1][-1]].provider == a.provider:
            runs[-1].append(a.node_index)
        else:
            runs.append([a.node_index])
    for run in runs:
        group = Group(graph, run, ctx.free_after, index)
        provider = by_name[assignments[run[-1]].provider]
        step = provider.compile(graph, group, ctx)
        step.inputs = list(group.inputs)
        step.device_type = provider.device_type
        steps.append(step)
    return Plan(steps, assignments)
