"""Which nodes of a WebGPU partition run on the host, so a step never reads the device mid-way.

Some op inputs are needed on the host (a Reshape's shape, a Slice's starts, Pad's pads: the
`host_inputs` of an op's record). When such a value is computed inside the partition (a
Shape→Cast→Slice→Concat chain), recording it on the GPU would force a read-back in the middle
of the step (a second submit; impossible under `run_async` in a browser page, where read-backs
are promises). Instead the chain runs on the host with the CPU kernels, inside the step:

- `Shape`, `Size` and `Constant` already give host values (they read no device data);
- a node whose output is needed on the host is *hosted* when every input it reads is a host
  value (from outside the partition, a host source, or another hosted node), the CPU has a
  kernel for it, and its outputs are small (integer/bool, or at most `SMALL_ELEMENTS` floats);
- a node that needs a host input no hosting can provide is *blocked*: the provider does not
  claim it, so the value leaves the partition at the step's edge (read once, with the rest).

This mirrors onnxruntime's CPU-preferred shape subgraphs (`GetCpuPreferredNodes`).
"""
from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, NamedTuple, Sequence, Set

import numpy as np

from onnxedge import ir
from onnxedge.facts import Facts
from onnxedge.providers.base import consecutive_runs

HOST_SOURCES = frozenset({("", "Shape"), ("", "Size"), ("", "Constant")})
SMALL_ELEMENTS = 1024


class HostPlan(NamedTuple):
    """`hosted`: positions (in the node list) of nodes to run with CPU kernels on the host;
    `blocked`: positions of nodes whose host inputs would still need a device read-back."""

    hosted: FrozenSet[int]
    blocked: FrozenSet[int]


def _small(name: str, facts: Facts) -> bool:
    dtype = facts.dtype(name)
    if dtype is not None and (dtype.kind in "iub"):
        return True
    shape = facts.shape(name)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return False
    return int(np.prod(shape, dtype=np.int64)) <= SMALL_ELEMENTS


HostInputs = Callable[[ir.Node], FrozenSet[int]]


def plan(nodes: Sequence[ir.Node], host_inputs: HostInputs,
         has_cpu_kernel: Callable[[ir.Node], bool], facts: Facts) -> HostPlan:
    """The host plan of one partition's `nodes` (in order); `host_inputs(node)`: the input
    positions the node needs on the host."""
    producer: Dict[str, int] = {}
    for k, node in enumerate(nodes):
        for name in node.outputs:
            if name:
                producer[name] = k
    needed: Set[str] = set()
    for k, node in enumerate(nodes):
        needed.update(node.inputs[j] for j in host_inputs(node)
                      if j < len(node.inputs) and node.inputs[j])
    candidates: Set[int] = set()
    for k in range(len(nodes) - 1, -1, -1):
        node = nodes[k]
        if not any(name in needed for name in node.outputs if name):
            continue
        if (node.domain, node.op_type) in HOST_SOURCES:
            continue
        candidates.add(k)
        needed.update(name for name in node.inputs if name)
    on_host: Set[str] = set()
    hosted: Set[int] = set()
    for k, node in enumerate(nodes):
        outs = [name for name in node.outputs if name]
        if (node.domain, node.op_type) in HOST_SOURCES:
            on_host.update(outs)
            continue
        if k not in candidates or node.subgraphs() or not has_cpu_kernel(node):
            continue
        reads_host = all(name not in producer or name in on_host
                         for name in node.inputs if name)
        if reads_host and all(_small(name, facts) for name in outs):
            hosted.add(k)
            on_host.update(outs)
    blocked = {k for k, node in enumerate(nodes) if k not in hosted
               and any(node.inputs[j] in producer and node.inputs[j] not in on_host
                       for j in host_inputs(node) if j < len(node.inputs) and node.inputs[j])}
    return HostPlan(frozenset(hosted), frozenset(blocked))


def claimable(nodes: Sequence[ir.Node], positions: Sequence[int], host_inputs: HostInputs,
              has_cpu_kernel: Callable[[ir.Node], bool], facts: Facts) -> List[List[int]]:
    """The runs of consecutive `positions` (graph node indices a provider can run) less the
    nodes that would be blocked in them, to a fixed point (a node left unclaimed splits a run
    and hands host values to the rest, which can only unblock others)."""
    runs = consecutive_runs(positions)
    while True:
        dropped: Set[int] = set()
        for run in runs:
            found = plan([nodes[i] for i in run], host_inputs, has_cpu_kernel, facts)
            dropped.update(run[k] for k in found.blocked)
        if not dropped:
            return runs
        runs = consecutive_runs(i for run in runs for i in run if i not in dropped)


__all__ = ["HostPlan", "plan", "claimable", "HOST_SOURCES", "SMALL_ELEMENTS"]
