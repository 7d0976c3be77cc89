"""The execution-provider interface that the partitioner and the session talk to."""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Set

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


class GraphIndex:
    """Who reads each value of a graph and which values are constants, worked out once per
    graph (the partitioner builds one and every Group of the graph reads it)."""

    def __init__(self, graph: ir.Graph):
        self.outputs: Set[str] = {v.name for v in graph.outputs}
        self.readers: Dict[str, Set[int]] = {}
        for i, node in enumerate(graph.nodes):
            for name in node.reads():
                self.readers.setdefault(name, set()).add(i)
        fed = {v.name for v in graph.inputs}
        self.constants: Set[str] = {k for k in graph.initializers if k not in fed}
        self.constants.update(o for n in graph.nodes if n.op_type == "Constant" and not n.domain
                              for o in n.outputs if o)


class Group:
    """What the partitioner hands a provider to compile: a run of consecutive nodes.

    `node_indices` / `nodes`: the nodes, in graph order. `inputs`: the values they read (their
    subgraphs' outer references included) that none of them produces, in order of first read.
    `exported`: the values they produce that a node outside the group reads or that are graph
    outputs, in order of production. `free_after[k]`: the values that may be dropped once the
    group's k-th node has run (their last use in the graph); `freed`: all of them, in order.
    `constants`: the inputs no feed can override (initializers that are not graph inputs, and
    outputs of Constant nodes).
    """

    def __init__(self, graph: ir.Graph, node_indices: Sequence[int],
                 free_after: Optional[Dict[int, List[str]]] = None,
                 index: Optional[GraphIndex] = None):
        index = index if index is not None else GraphIndex(graph)
        self.node_indices = list(node_indices)
        self.nodes = [graph.nodes[i] for i in self.node_indices]
        inside = set(self.node_indices)
        produced: List[str] = []
        self.inputs: List[str] = []
        seen: Set[str] = set()
        for node in self.nodes:
            for name in node.reads():
                if name not in seen:
                    seen.add(name)
                    self.inputs.append(name)
            for name in node.outputs:
                if name and name not in seen:
                    seen.add(name)
                    produced.append(name)
        self.exported = [name for name in produced if name in index.outputs
                         or any(i not in inside for i in index.readers.get(name, ()))]
        self.free_after = [list((free_after or {}).get(i, [])) for i in self.node_indices]
        self.constants = [name for name in self.inputs if name in index.constants]

    @property
    def freed(self) -> List[str]:
        """Every value the group may drop after its nodes ran, in node order."""
        return [name for names in self.free_after for name in names]

    def __repr__(self) -> str:
        return "Group(nodes %s, inputs %d, exported %s)" % (self.node_indices, len(self.inputs),
                                                            self.exported)


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
    `inputs` (the group's inputs) and `device_type` (its provider's) are set by the
    partitioner: the session reads back device values a step cannot take (`device_values`).
    """

    def __init__(self, provider: str, node_indices: List[int], run: Callable[[Dict[str, Any]], None],
                 run_async: Optional[Callable[[Dict[str, Any]], Awaitable[None]]] = None):
        self.provider = provider
        self.node_indices = node_indices
        self.run = run
        self.run_async = run_async
        self.inputs: List[str] = []
        self.device_type = "cpu"
        self.profiles_nodes = False   # True: it records its own Node events while profiling


class ExecutionProvider:
    """Base class of execution providers (CPU, WebGPU, NEON, CoreML, NNAPI).

    A provider says which nodes it can run (`get_capability`) and compiles groups of them
    (`compile`). Tensors cross into and out of a provider through `to_host` / `from_host`.
    """

    name = "ExecutionProvider"
    device_type = "cpu"   # where its tensors live; "cpu" is the host (device_values)
    # True for providers that take QDQ groups (DequantizeLinear -> op -> QuantizeLinear) as they
    # are: a session asking for one leaves the optimizer's QDQ fusion out (optimize keep_qdq)
    keeps_qdq_groups = False

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

    def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
        """A Step that runs the group's nodes in order (see Group for what it tells)."""
        raise NotImplementedError

    def to_host(self, value: Any) -> Any:
        """Bring a value this provider produced back to host numpy memory."""
        return value

    def from_host(self, value: Any) -> Any:
        """Move a host value into this provider's memory."""
        return value
