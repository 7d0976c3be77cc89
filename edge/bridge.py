"""What the CoreML and NNAPI bridge providers share: subgraph cutting, static shapes, the
translated `Artifact` and the `BridgeProvider` base class.

A bridge hands each group of nodes it claims to a phone framework. The base class claims the
maximal runs of consecutive supported nodes, cuts each into a self-contained subgraph, keys it by
a sha256 of everything that changes the translation, and either loads a pre-translated artifact
(option `artifact_dir`, what a mobile package ships) or translates it. The step then runs the
artifact on the device (`load`) or, with the option `{"reference": True}`, in the bridge's numpy
reference interpreter (`interpret`), so sessions with a bridge run end to end on any machine.

Subclasses set `name`, `target` and implement `node_reason`, `translate`, `load`, `interpret`
and `is_available`. The translator may live in a module the device build leaves out: the
provider then only loads artifacts (see `translator_available`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from onnxedge import facts, ir
from onnxedge.errors import EPFail, InvalidArgument, NoSuchFile
from onnxedge.providers.base import CompileContext, ExecutionProvider, Group, Step
from onnxedge.providers.base import consecutive_runs as runs  # maximal runs of claimed nodes

Shapes = Dict[str, facts.Fact]
Runner = Callable[[Dict[str, np.ndarray]], Dict[str, np.ndarray]]

ARTIFACT_JSON = "artifact.json"


class Artifact(NamedTuple):
    """A translated subgraph: what a bridge loads on the device.

    `key` is the hex sha256 of the subgraph (see `artifact_key`); `inputs` / `outputs` are the
    subgraph's value names, in the order the artifact takes and gives them; `files` maps relative
    paths to their bytes (a .mlpackage folder's files, or one `model.nnapi`); `meta` is JSON-able
    (ops, sizes, input shapes).
    """

    key: str
    target: str
    inputs: List[str]
    outputs: List[str]
    files: Dict[str, bytes]
    meta: Dict[str, Any]

    def size(self) -> int:
        """Total bytes of the artifact's files."""
        return sum(len(b) for b in self.files.values())

    def save(self, folder: str) -> str:
        """Write the files and `artifact.json` (key, target, inputs, outputs, meta) into folder."""
        for rel, data in self.files.items():
            path = os.path.join(folder, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        os.makedirs(folder, exist_ok=True)
        head = {"key": self.key, "target": self.target, "inputs": list(self.inputs),
                "outputs": list(self.outputs), "files": sorted(self.files), "meta": self.meta}
        with open(os.path.join(folder, ARTIFACT_JSON), "w") as f:
            json.dump(head, f, indent=1, sort_keys=True)
        return folder

    @classmethod
    def load_from(cls, folder: str) -> "Artifact":
        """Read an artifact `save` wrote; NoSuchFile / InvalidArgument when it is missing or bad."""
        head_path = os.path.join(folder, ARTIFACT_JSON)
        if not os.path.isfile(head_path):
            raise NoSuchFile("bridge artifact folder %s has no %s" % (folder, ARTIFACT_JSON))
        try:
            with open(head_path) as f:
                head = json.load(f)
            files = {}
            for rel in head["files"]:
                with open(os.path.join(folder, *rel.split("/")), "rb") as f:
                    files[rel] = f.read()
            return cls(str(head["key"]), str(head["target"]), list(head["inputs"]),
                       list(head["outputs"]), files, dict(head.get("meta") or {}))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InvalidArgument("bridge artifact %s is unreadable: %s (expected the files "
                                  "listed in its %s)" % (folder, e, ARTIFACT_JSON)) from e


# --------------------------------------------------------------------------- shapes and cuts

def static_shapes(graph: ir.Graph, feeds_shapes: Optional[Dict[str, Sequence[int]]] = None,
                  opsets: Optional[Dict[str, int]] = None,
                  dims: Optional[Dict[str, int]] = None) -> Shapes:
    """Element types and shapes of the graph's values (the core's facts service, onnxedge.facts).

    `feeds_shapes` fixes input shapes by input name; `dims` fixes symbolic dims by name (like
    onnxruntime's free-dimension overrides, e.g. {"batch": 1}). `Fact.static()` is the shape as
    ints, None where a dim stays unknown.
    """
    feeds_shapes = feeds_shapes or {}
    dims = dims or {}
    inputs = []
    for vi in graph.inputs:
        t = vi.type
        if t is not None and t.kind == "tensor" and (vi.name in feeds_shapes or
                                                     (t.shape and dims)):
            if vi.name in feeds_shapes:
                shape = [int(d) for d in feeds_shapes[vi.name]]
            else:
                shape = [dims.get(d, d) if isinstance(d, str) else d for d in t.shape]
            vi = ir.ValueInfo(vi.name, ir.TypeInfo.tensor(t.elem_type, shape))
        inputs.append(vi)
    # Declared shapes of the other values win over inference only when fully static.
    declared: Shapes = {}
    static_vis: List[ir.ValueInfo] = []
    for vi in list(graph.outputs) + list(graph.value_info.values()):
        t = vi.type
        if t is None or t.kind != "tensor":
            continue
        shape = None if t.shape is None else [dims.get(d, d) if isinstance(d, str) else d
                                              for d in t.shape]
        info = facts.Fact(t.elem_type, shape)
        if info.static() is not None:
            static_vis.append(ir.ValueInfo(vi.name, ir.TypeInfo.tensor(t.elem_type, shape)))
        else:
            declared[vi.name] = info
    view = ir.Graph(graph.name, graph.nodes, inputs, static_vis, graph.initializers, {})
    known = facts.infer(view, opsets if opsets is not None else {"": 0})
    for name, info in declared.items():
        if name not in known or (known[name].static() is None and info.shape is not None):
            known[name] = info
    return known


def subgraph(graph: ir.Graph, nodes: Union[Group, Sequence[int]],
             shapes: Optional[Shapes] = None) -> ir.Graph:
    """A group's nodes (a Group, or node indices) as a self-contained graph.

    Inputs: the group's inputs that are not constants (graph inputs that are also initializers
    count as inputs), in order of first read. Initializers: the constants they read. Outputs:
    the values the group exports (read by a node outside it, or graph outputs), in order of
    production. Types come from `shapes` (static_shapes) where known, else from what the graph
    declares.
    """
    group = nodes if isinstance(nodes, Group) else Group(graph, sorted(set(nodes)))
    fed = {v.name for v in graph.inputs}
    consts = {k: v for k, v in graph.initializers.items() if k not in fed}
    inputs = [n for n in group.inputs if n not in consts]
    used_consts = {n: consts[n] for n in group.inputs if n in consts}
    outputs = group.exported
    produced = [o for n in group.nodes for o in n.outputs if o]

    def info(name: str) -> ir.ValueInfo:
        known = shapes.get(name) if shapes else None
        if known is not None and known.elem_type:
            return ir.ValueInfo(name, ir.TypeInfo.tensor(known.elem_type, known.shape))
        return ir.ValueInfo(name, graph.type_of(name))

    return ir.Graph(graph.name + "_sub", group.nodes, [info(n) for n in inputs],
                    [info(n) for n in outputs], used_consts,
                    {n: info(n) for n in produced if n not in outputs})


def _canonical(value: Any, h: "hashlib._Hash") -> None:
    """Feed a canonical, type-tagged encoding of `value` to the hash."""
    if isinstance(value, np.ndarray):
        h.update(b"A%s|%r|" % (value.dtype.str.encode(), value.shape))
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, ir.Graph):
        h.update(b"G")
        _hash_graph(value, h)
    elif isinstance(value, dict):
        h.update(b"D%d|" % len(value))
        for k in sorted(value, key=str):
            _canonical(str(k), h)
            _canonical(value[k], h)
    elif isinstance(value, (list, tuple)):
        h.update(b"L%d|" % len(value))
        for v in value:
            _canonical(v, h)
    elif isinstance(value, bytes):
        h.update(b"B%d|" % len(value) + value)
    elif isinstance(value, (bool, int, float, str)) or value is None:
        h.update(("%s:%r|" % (type(value).__name__, value)).encode())
    else:
        h.update(("O:%r|" % (value,)).encode())


def _hash_type(t: Optional[ir.TypeInfo], h: "hashlib._Hash") -> None:
    _canonical(None if t is None else [t.kind, t.elem_type, t.shape], h)


def _hash_graph(graph: ir.Graph, h: "hashlib._Hash") -> None:
    for vi in graph.inputs + graph.outputs:
        _canonical(vi.name, h)
        _hash_type(vi.type, h)
    for node in graph.nodes:
        _canonical([node.domain, node.op_type, node.inputs, node.outputs], h)
        _canonical(node.attributes, h)
    _canonical(dict(graph.initializers), h)


def artifact_key(sub: ir.Graph, target: str, target_options: Optional[Dict[str, Any]] = None,
                 opsets: Optional[Dict[str, int]] = None) -> str:
    """Hex sha256 of a subgraph (nodes, attributes, initializers, input/output types and
    shapes), the target, the target's options and the opsets: equal keys, equal translations."""
    h = hashlib.sha256()
    _canonical(["onnxedge-bridge-1", target, target_options or {}, opsets or {}], h)
    _hash_graph(sub, h)
    return h.hexdigest()


# --------------------------------------------------------------------------- the provider

class BridgeProvider(ExecutionProvider):
    """Base of the CoreML and NNAPI providers (see the module docstring). They translate QDQ
    groups into their own quantized ops, so sessions keep those groups (keeps_qdq_groups).

    Options: `reference` (bool: run artifacts in the numpy interpreter instead of the device),
    `artifact_dir` (folder of pre-translated artifacts, `<key>/artifact.json`, looked up before
    translating), `save_dir` (write every artifact compiled into `<save_dir>/<key>/`),
    `input_shapes` ({input: shape}) and `dims` ({symbolic dim: size}) to make dynamic inputs
    static, plus the subclass's `TARGET_OPTIONS` (part of the artifact key).

    A subclass whose translator lives in its own module names it in `TRANSLATOR_MODULE` and
    imports it lazily (inside `translate`), so a device build without it still imports.
    """

    keeps_qdq_groups = True

    name = "BridgeExecutionProvider"
    target = "bridge"
    OPTIONS = ("reference", "artifact_dir", "save_dir", "input_shapes", "dims")
    TARGET_OPTIONS: Dict[str, Any] = {}          # option -> default; part of the artifact key
    TRIVIAL_OPS: frozenset = frozenset()         # runs of only these ops are left to the CPU
    TRANSLATOR_MODULE = ""                       # e.g. "onnxedge.edge.coreml.translate"

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        known = tuple(self.OPTIONS) + tuple(self.TARGET_OPTIONS)
        unknown = sorted(set(self.options) - set(known))
        if unknown:
            raise InvalidArgument("%s: unknown option(s) %s; known: %s"
                                  % (self.name, unknown, sorted(known)))
        self._reasons: Dict[ir.Node, Optional[str]] = {}   # keyed by the node itself, not id()
        self.artifacts: Dict[str, Artifact] = {}     # key -> every artifact compiled, in order
        self.translated: List[str] = []              # keys this instance translated itself
        self.groups: List[Any] = []                  # (node indices, artifact key) per compile

    # ------------------------------------------------------------------ subclass hooks
    def node_reason(self, node: ir.Node, graph: ir.Graph, ctx: CompileContext,
                    shapes: Shapes) -> Optional[str]:
        """None when the bridge supports this node (op, dtypes, static shapes, feature level /
        deployment target), else why not."""
        raise NotImplementedError

    def translate(self, graph: ir.Graph, node_indices: List[int], ctx: CompileContext) -> Artifact:
        """The artifact for these nodes of `graph` (the base passes a `subgraph` and all its
        indices; the artifact's inputs/outputs must be that subgraph's input/output names)."""
        raise NotImplementedError

    def load(self, artifact: Artifact) -> Runner:
        """The device runtime for an artifact: feeds by input name -> outputs by output name."""
        raise NotImplementedError

    def interpret(self, artifact: Artifact, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Run the artifact in the numpy reference interpreter."""
        raise NotImplementedError

    @classmethod
    def translator_available(cls) -> bool:
        """False in a device build that ships only the loader: TRANSLATOR_MODULE (when the
        subclass names one) cannot be found."""
        if not cls.TRANSLATOR_MODULE:
            return True
        try:
            return importlib.util.find_spec(cls.TRANSLATOR_MODULE) is not None
        except ImportError:
            return False

    # ------------------------------------------------------------------ options
    def target_options(self) -> Dict[str, Any]:
        """The options that change a translation (the subclass's TARGET_OPTIONS, defaulted)."""
        return {k: self.options.get(k, v) for k, v in self.TARGET_OPTIONS.items()}

    def shapes(self, graph: ir.Graph, ctx: CompileContext) -> Shapes:
        """static_shapes of the graph under this provider's `input_shapes` / `dims` options."""
        return static_shapes(graph, self.options.get("input_shapes"), ctx.opsets,
                             self.options.get("dims"))

    # ------------------------------------------------------------------ capability
    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """Maximal runs of consecutive supported nodes (runs of only TRIVIAL_OPS dropped)."""
        shapes = self.shapes(graph, ctx)
        claimed = []
        for i, node in enumerate(graph.nodes):
            try:
                why = self.node_reason(node, graph, ctx, shapes)
            except Exception as e:   # a checker bug must cost a fallback, not the session
                why = "%s could not check it: %s: %s" % (self.name, type(e).__name__, e)
            self._reasons[node] = why
            if why is None:
                claimed.append(i)
        groups = []
        for run in runs(claimed):
            if all(graph.nodes[i].op_type in self.TRIVIAL_OPS for i in run):
                for i in run:
                    self._reasons[graph.nodes[i]] = (
                        "a run of only %s is not worth a %s call"
                        % ("/".join(sorted({graph.nodes[j].op_type for j in run})), self.target))
                continue
            groups.append(run)
        return groups

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """Why get_capability passed over `node` (None when it claimed it)."""
        return self._reasons.get(node, "not checked by %s" % self.name)

    # ------------------------------------------------------------------ compile
    def artifact_for(self, graph: ir.Graph, nodes: Union[Group, List[int]],
                     ctx: CompileContext) -> Artifact:
        """The artifact of a group (or node indices): cached, pre-translated in `artifact_dir`,
        or translated."""
        sub = subgraph(graph, nodes, self.shapes(graph, ctx))
        key = artifact_key(sub, self.target, self.target_options(), ctx.opsets)
        if key in self.artifacts:
            return self.artifacts[key]
        folder = self.options.get("artifact_dir")
        art = None
        if folder and os.path.isdir(os.path.join(folder, key)):
            art = Artifact.load_from(os.path.join(folder, key))
        elif not self.translator_available():
            raise EPFail("%s: no pre-translated artifact %s for nodes %s in %s, and this build "
                         "has no %s translator (make the package with the same model, shapes "
                         "and options)" % (self.name, key, [n.op_type for n in sub.nodes],
                                           folder or "(no artifact_dir option)", self.target))
        else:
            art = self.translate(sub, list(range(len(sub.nodes))), ctx)
            self.translated.append(key)
            if "input_shapes" not in art.meta:
                art.meta["input_shapes"] = {
                    v.name: v.type.shape for v in sub.inputs
                    if v.type is not None and v.type.shape is not None
                    and all(isinstance(d, int) for d in v.type.shape)}
        if art.key != key:
            art = art._replace(key=key)
        if self.options.get("save_dir"):
            art.save(os.path.join(self.options["save_dir"], key))
        self.artifacts[key] = art
        return art

    def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
        """A step running the group's artifact on the device, or in the reference interpreter."""
        art = self.artifact_for(graph, group, ctx)
        self.groups.append((group.node_indices, art.key))
        if self.options.get("reference"):
            def runner(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
                return self.interpret(art, feeds)
        elif self.is_available():
            runner = self.load(art)
        else:
            raise EPFail("%s cannot run on this machine (no %s runtime); pass the provider "
                         "option {'reference': True} to use the numpy reference interpreter"
                         % (self.name, self.target))
        expected = art.meta.get("input_shapes") or {}
        free = group.freed
        name = self.name

        def run(env: Dict[str, Any]) -> None:
            feeds = {}
            for n in art.inputs:
                value = np.asarray(env[n])
                want = expected.get(n)
                if want is not None and list(value.shape) != list(want):
                    raise InvalidArgument("%s: input %r has shape %s, but artifact %s was made "
                                          "for %s (set the input_shapes/dims options)"
                                          % (name, n, list(value.shape), art.key[:12], want))
                feeds[n] = value
            outs = runner(feeds)
            for n in art.outputs:
                if n not in outs:
                    raise EPFail("%s: artifact %s gave no output %r" % (name, art.key[:12], n))
                env[n] = outs[n]
            for n in free:
                env.pop(n, None)

        return Step(self.name, group.node_indices, run)


def provider_of(session: Any, name: str) -> ExecutionProvider:
    """The provider instance named `name` in an InferenceSession (for packaging and reports)."""
    for p in session.providers:
        if p.name == name:
            return p
    raise InvalidArgument("the session has no %s (it has %s)"
                          % (name, [p.name for p in session.providers]))


__all__ = ["Artifact", "BridgeProvider", "artifact_key", "provider_of", "runs",
           "static_shapes", "subgraph"]
