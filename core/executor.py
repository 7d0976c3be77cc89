"""Runs lists of IR nodes with the registered CPU kernels.

`compile_nodes` turns nodes into a tight loop of kernel calls that frees every intermediate after
its last use; `GraphRunner` runs whole (sub)graphs: If/Loop/Scan bodies and model-local functions.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import ir, profiling
from .errors import InvalidGraph, NotImplemented, OnnxEdgeError, RuntimeException
from .kernels import registry
from .budgets import current_limits
from .kernels.registry import KernelContext

Env = Dict[str, Any]


def last_uses(nodes: Sequence[ir.Node], keep: Iterable[str]) -> List[List[str]]:
    """For each node, the values that nothing after it reads (and that are not in `keep`)."""
    keep = set(keep)
    seen: set = set()
    free: List[List[str]] = [[] for _ in nodes]
    for i in range(len(nodes) - 1, -1, -1):
        node = nodes[i]
        for name in node.reads() + [o for o in node.outputs if o]:
            if name not in seen and name not in keep:
                free[i].append(name)
            seen.add(name)
    return free


def _normalize(value: Any) -> Any:
    if type(value) is np.ndarray or value is None or isinstance(value, (list, dict)):
        return value
    return np.asarray(value)


class _Compiled:
    __slots__ = ("node", "fn", "ins", "outs", "attrs", "wants_ctx", "opset", "free", "wanted")

    def __init__(self, node: ir.Node, fn: Callable[..., Any], attrs: Dict[str, Any], wants_ctx: bool,
                 opset: int, free: List[str]):
        self.node = node
        self.fn = fn
        self.ins = list(node.inputs)
        self.outs = list(node.outputs)
        self.attrs = attrs
        self.wants_ctx = wants_ctx
        self.opset = opset
        self.free = free
        self.wanted = [bool(o) for o in node.outputs]


def _bind_attrs(node: ir.Node, sig: registry.KernelSignature) -> Dict[str, Any]:
    attrs = node.attributes
    for key, val in attrs.items():
        if isinstance(val, ir.AttrRef):
            raise InvalidGraph("%s: attribute %r refers to %r outside a function body"
                               % (node.describe(), key, val.ref_attr_name))
    if sig.accepts is None:
        return dict(attrs)
    return {k: v for k, v in attrs.items() if k in sig.accepts}


def _substitute(nodes: List[ir.Node], values: Dict[str, Any]) -> List[ir.Node]:
    """Copies of function-body nodes with attribute references replaced by the caller's values."""
    out = []
    for n in nodes:
        attrs = {}
        for k, v in n.attributes.items():
            if isinstance(v, ir.AttrRef):
                if v.ref_attr_name in values:
                    attrs[k] = values[v.ref_attr_name]
            else:
                attrs[k] = v
        out.append(ir.Node(n.op_type, n.inputs, n.outputs, attrs, n.domain, n.name))
    return out


def function_kernel(fn_def: ir.Function, call: ir.Node) -> Callable[..., Any]:
    """A kernel that runs a model-local function's body for one call site."""
    values = dict(fn_def.attribute_defaults)
    values.update(call.attributes)
    body = ir.Graph(
        name=fn_def.name,
        nodes=_substitute(fn_def.nodes, values),
        inputs=[ir.ValueInfo(n) for n in fn_def.inputs],
        outputs=[ir.ValueInfo(n) for n in fn_def.outputs],
    )
    opsets = dict(fn_def.opset_imports)
    opsets = {("" if k == "ai.onnx" else k): v for k, v in opsets.items()}
    runner_holder: List[GraphRunner] = []

    def run_function(ctx: KernelContext, *xs: Any) -> Any:
        if not runner_holder:
            runner_holder.append(GraphRunner(body, opsets, {}))
        feeds = {name: x for name, x in zip(fn_def.inputs, xs) if name}
        outs = runner_holder[0].run(feeds, {})
        return tuple(outs)

    return run_function


def compile_node(node: ir.Node, opsets: Dict[str, int], free: List[str],
                 functions: Optional[Dict[Any, ir.Function]] = None) -> _Compiled:
    """Resolve a node's kernel and bind its attributes once, ahead of any run."""
    fn_def = (functions or {}).get((node.domain, node.op_type))
    if node.domain not in opsets and fn_def is None:
        raise InvalidGraph("%s: the model imports no opset for domain %r"
                           % (node.describe(), node.domain or "ai.onnx"))
    opset = opsets.get(node.domain, 0)
    spec = registry.find(node.domain, node.op_type, opset)
    if spec is None and fn_def is not None:
        return _Compiled(node, function_kernel(fn_def, node), {}, True, opset, free)
    if spec is None:
        spec = registry.resolve(node.domain, node.op_type, opset)   # raises NotImplemented
    sig = registry.signature(spec.fn)
    return _Compiled(node, spec.fn, _bind_attrs(node, sig), sig.wants_ctx, opset, free)


def _fail(node: ir.Node, opset: int, err: BaseException) -> OnnxEdgeError:
    where = "%s at opset %d" % (node.describe(), opset)
    if isinstance(err, OnnxEdgeError):
        msg = str(err)
        if node.op_type not in msg or "node" not in msg:
            msg = "%s: %s" % (where, msg)
        return type(err)(msg)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return RuntimeException("%s failed: %s: %s" % (where, type(err).__name__, first))


def run_compiled(steps: List[_Compiled], env: Env,
                 run_subgraph: Callable[[ir.Graph, Dict[str, Any], Env], List[Any]]) -> None:
    """Run compiled nodes in order on `env`, freeing values after their last use.

    Before each node, the run stops (RuntimeException) when its RunOptions.terminate was set or
    its time limit has passed. While a profiler is active (`profiling.active`), each node's
    time, types and shapes are recorded."""
    prof = profiling.current()
    limits = current_limits()
    for c in steps:
        if limits is not None:
            try:
                limits.check()
            except RuntimeException as e:
                raise RuntimeException("%s (stopped before %s)" % (e, c.node.describe())) from None
        try:
            args = [env[name] if name else None for name in c.ins]
        except KeyError as e:
            raise InvalidGraph("%s reads %s, which no graph input, initializer or earlier node "
                               "produces" % (c.node.describe(), e)) from None
        if prof is None:
            _run_node(c, args, env, run_subgraph)
        else:
            t0 = profiling.now_us()
            _run_node(c, args, env, run_subgraph)
            prof.node(c.node, "CPUExecutionProvider", t0, profiling.now_us(), args,
                      [env.get(name) if name else None for name in c.outs])
        for name in c.free:
            env.pop(name, None)


def _run_node(c: _Compiled, args: List[Any], env: Env,
              run_subgraph: Callable[[ir.Graph, Dict[str, Any], Env], List[Any]]) -> None:
    """Call one node's kernel on `args` and store its outputs in env."""
    try:
        if c.wants_ctx:
            ctx = KernelContext(c.node, c.opset, c.wanted,
                                lambda g, feeds, _env=env: run_subgraph(g, feeds, _env))
            res = c.fn(ctx, *args, **c.attrs)
        else:
            res = c.fn(*args, **c.attrs)
    except Exception as e:  # kernels' errors become the node's errors
        raise _fail(c.node, c.opset, e) from e
    outs = c.outs
    if len(outs) == 1:
        if type(res) is tuple:
            res = res[0]
        env[outs[0]] = _normalize(res)
    else:
        if type(res) is not tuple:
            res = (res,)
        if len(res) < sum(c.wanted):
            raise RuntimeException("%s returned %d outputs, the node declares %d"
                                   % (c.node.describe(), len(res), len(outs)))
        for name, val in zip(outs, res):
            if name:
                env[name] = _normalize(val)


class GraphRunner:
    """Runs a whole graph on the CPU kernels: subgraph bodies and function bodies."""

    def __init__(self, graph: ir.Graph, opsets: Dict[str, int],
                 functions: Optional[Dict[Any, ir.Function]] = None):
        self.graph = graph
        self.opsets = opsets
        self.functions = functions or {}
        self.output_names = [o.name for o in graph.outputs]
        self.input_names = [i.name for i in graph.inputs]
        self.outer = graph.outer_references()
        free = last_uses(graph.nodes, self.output_names)
        self.steps = [compile_node(n, opsets, f, self.functions) for n, f in zip(graph.nodes, free)]
        self._children: Dict[int, GraphRunner] = {}
        self._lock = threading.Lock()

    def child(self, sub: ir.Graph) -> "GraphRunner":
        """The (cached) runner of a subgraph of one of this graph's nodes."""
        key = id(sub)
        runner = self._children.get(key)
        if runner is None:
            with self._lock:
                runner = self._children.get(key)
                if runner is None:
                    runner = self.new_child(sub)
                    self._children[key] = runner
        return runner

    def new_child(self, sub: ir.Graph) -> "GraphRunner":
        """A runner for subgraph `sub` (a subclass makes its own kind)."""
        return GraphRunner(sub, self.opsets, self.functions)

    def run(self, feeds: Dict[str, Any], outer_env: Env) -> List[Any]:
        """Outputs of the graph for these input feeds, with outer-scope values from outer_env."""
        env = self.start_env(feeds, outer_env)
        run_compiled(self.steps, env, self.run_child)
        return self.outputs(env)

    def start_env(self, feeds: Dict[str, Any], outer_env: Env) -> Env:
        """A run's values before any node: the outer-scope values read, initializers, feeds."""
        env: Env = {}
        for name in self.outer:
            if name in outer_env:
                env[name] = outer_env[name]
        env.update(self.graph.initializers)
        env.update(feeds)
        return env

    def outputs(self, env: Env) -> List[Any]:
        """The graph's outputs from a finished run's values (InvalidGraph naming one never made)."""
        try:
            return [env[name] for name in self.output_names]
        except KeyError as e:
            raise InvalidGraph("graph %r: output %s is never produced" % (self.graph.name, e)) from None

    def run_child(self, sub: ir.Graph, feeds: Dict[str, Any], env: Env) -> List[Any]:
        """Run subgraph `sub` (an If/Loop/Scan body) with `feeds`, reading outer values from `env`."""
        return self.child(sub).run(feeds, env)


def unsupported_ops(nodes: Iterable[ir.Node], opsets: Dict[str, int],
                    functions: Optional[Dict[Any, ir.Function]] = None) -> List[ir.Node]:
    """The first node of each (domain, op type) that no kernel of this build serves at the
    model's opset (subgraphs included), in graph order."""
    missing: Dict[Tuple[str, str], ir.Node] = {}

    def walk(graph_nodes: Iterable[ir.Node]) -> None:
        for node in graph_nodes:
            key = (node.domain, node.op_type)
            if key not in (functions or {}) and key not in missing and \
                    registry.find(node.domain, node.op_type, opsets.get(node.domain, 0)) is None:
                missing[key] = node
            for _, sub in node.subgraphs():
                walk(sub.nodes)
    walk(nodes)
    return list(missing.values())


def check_supported(nodes: Iterable[ir.Node], opsets: Dict[str, int],
                    functions: Optional[Dict[Any, ir.Function]] = None) -> None:
    """Raise NotImplemented naming every op (subgraphs included) no kernel serves: the first
    one's full message (with a reduced build's rebuild hint), then the others."""
    missing = unsupported_ops(nodes, opsets, functions)
    if not missing:
        return
    first = missing[0]
    try:
        registry.resolve(first.domain, first.op_type, opsets.get(first.domain, 0))
    except NotImplemented as err:
        if len(missing) == 1:
            raise
        others = ", ".join("%s (domain %s, opset %d)" % (n.op_type, n.domain or "ai.onnx",
                                                           opsets.get(n.domain, 0))
                           for n in missing[1:])
        raise NotImplemented("%s; this build also lacks %s" % (err, others)) from None


__all__ = ["GraphRunner", "compile_node", "run_compiled", "last_uses",
           "check_supported", "unsupported_ops", "function_kernel"]
