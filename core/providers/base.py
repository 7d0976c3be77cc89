"""The execution-provider interface that the partitioner and the session talk to."""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional

from .. import facts as _facts
from .. import ir


def consecutive_runs(indices: Iterable[int]) -> List[List[int]]:
    """Maximal runs of consecutive node indices, [0, 1, 3] -> [[0, 1], [3]]: the groups a
    provider claims (the partitioner groups consecutive nodes of one provider into a step)."""
    out: List[List[int]] = []
    for i in sorted(set(indices)):
        if out and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


class CompileContext:
    """What a provider needs to compile its part of a graph.

    `opsets` maps domain to the model's opset; `free_after[i]` lists the values that may be
    dropped once node i has run (their last use); `functions` holds model-local functions;
    `run_subgraph(graph, feeds, outer_env)` runs an If/Loop/Scan body on the CPU; `facts` are
    the element types and shapes of the graph's values (`onnxedge.facts`, worked out once by the
    session before partitioning; empty when the caller gave none: every value unknown).
    """

    def __init__(self, opsets: Dict[str, int], free_after: Dict[int, List[str]],
                 functions: Optional[Dict[Any, ir.Function]] = None,
                 run_subgraph: Optional[Callable[..., List[Any]]] = None,
                 facts: Optional[_facts.Facts] = None):
        self.opsets = opsets
        self.free_after = free_after
        self.functions = functions or {}
        self.run_subgraph = run_subgraph
        self.facts = facts if facts is not None else _facts.Facts()

    def opset_of(self, node: ir.Node) -> int:
        """The opset the model imports for this node's domain."""
        return self.opsets.get(node.domain, 0)


class Step:
    """A compiled group of nodes: `run(env)` reads its inputs from env and writes its outputs.

    `run_async(env)`, when a provider gives one, is a coroutine function doing the same without
    blocking (a device whose readback is a promise, as WebGPU in a browser page);
    `InferenceSession.run_async` awaits it and calls `run` for steps without one.
    """

    def __init__(self, provider: str, node_indices: List[int], run: Callable[[Dict[str, Any]], None],
                 run_async: Optional[Callable[[Dict[str, Any]], Awaitable[None]]] = None):
        self.provider = provider
        self.node_indices = node_indices
        self.run = run
        self.run_async = run_async


class ExecutionProvider:
    """Base class of execution providers (CPU, WebGPU, NEON, CoreML, NNAPI).

    A provider says which nodes it can run (`get_capability`) and compiles groups of them
    (`compile`). Tensors cross into and out of a provider through `to_host` / `from_host`.
    """

    name = "ExecutionProvider"

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        self.options = dict(options or {})

    @classmethod
    def is_available(cls) -> bool:
        """True when this provider can run on this machine (libraries, devices present)."""
        return True

    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """Groups of node indices (in `graph.nodes`) this provider claims."""
        raise NotImplementedError

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """Why this provider does not claim `node` (None when it does): for partition reports."""
        return None

    def compile(self, graph: ir.Graph, node_indices: List[int], ctx: CompileContext) -> Step:
        """A Step that runs these nodes in order."""
        raise NotImplementedError

    def to_host(self, value: Any) -> Any:
        """Bring a value this provider produced back to host numpy memory."""
        return value

    def from_host(self, value: Any) -> Any:
        """Move a host value into this provider's memory."""
        return value
