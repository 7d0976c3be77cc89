"""Type and shape facts: every value's element type and shape, worked out once per graph.

A runtime service of the core (it ships in runtime wheels, which leave out the optimizer): the
session runs `infer` once before partitioning and hands the result to every provider in the
compile context (`ctx.facts`); the optimizer's passes read the same facts. Like tract's output
facts, the rules live with the op: `@fact_rule("Op", domain=...)` registers a function
`rule(node, ins, ctx) -> [Fact or None per output]` (see `fact_rules.py`). An op without a rule
gets no facts ("unknown"): nothing is guessed from its first input.

A `Fact` is an ONNX element type code (0: unknown) and a shape: None when the rank is unknown,
else a list whose dims are ints, symbolic names (str) or None (a size nobody can tell).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import dtypes, ir


class Fact:
    """Element type (ONNX code, 0 when unknown) and shape (None when the rank is unknown)."""

    __slots__ = ("elem_type", "shape")

    def __init__(self, elem_type: int, shape: Optional[Sequence[Any]] = None):
        self.elem_type = int(elem_type or 0)
        self.shape = None if shape is None else list(shape)

    @property
    def rank(self) -> Optional[int]:
        """Number of dims, None when unknown."""
        return None if self.shape is None else len(self.shape)

    def numpy_dtype(self) -> Optional[np.dtype]:
        """numpy dtype of the element type, None when unknown or not a numpy type."""
        if not self.elem_type or not dtypes.has_numpy(self.elem_type):
            return None
        return np.dtype(dtypes.to_numpy(self.elem_type))

    def static(self) -> Optional[List[int]]:
        """The shape as ints when every dim is a known non-negative size."""
        if self.shape is None or not all(isinstance(d, int) and d >= 0 for d in self.shape):
            return None
        return list(self.shape)

    def type_info(self) -> ir.TypeInfo:
        """The fact as an IR tensor type."""
        return ir.TypeInfo.tensor(self.elem_type, self.shape)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Fact) and (self.elem_type, self.shape) == (other.elem_type,
                                                                            other.shape)

    def __repr__(self) -> str:
        return "Fact(%d, %r)" % (self.elem_type, self.shape)


class Facts(dict):
    """Value name -> Fact for every value whose type or shape is known (absent: unknown)."""

    def fact(self, name: str) -> Optional[Fact]:
        """The fact of a value, None when nothing is known."""
        return self.get(name) if name else None

    def elem_type(self, name: str) -> int:
        """ONNX element type code of a value, 0 when unknown."""
        f = self.fact(name)
        return f.elem_type if f is not None else 0

    def dtype(self, name: str) -> Optional[np.dtype]:
        """numpy dtype of a value, None when unknown (or not a numpy type)."""
        f = self.fact(name)
        return None if f is None else f.numpy_dtype()

    def shape(self, name: str) -> Optional[List[Any]]:
        """Shape of a value (ints, symbolic names, None), None when the rank is unknown."""
        f = self.fact(name)
        return None if f is None or f.shape is None else list(f.shape)

    def rank(self, name: str) -> Optional[int]:
        """Rank of a value, None when unknown."""
        f = self.fact(name)
        return None if f is None else f.rank

    def type_of(self, name: str) -> Optional[ir.TypeInfo]:
        """The fact as an IR tensor type (what `ir.Graph.type_of` gives for declared values)."""
        f = self.fact(name)
        return None if f is None or (not f.elem_type and f.shape is None) else f.type_info()


class RuleContext:
    """What a rule may read besides its inputs' facts: the node's opset, constant values
    (initializers no feed overrides, and outputs of Constant nodes) and the known elements of
    small integer vectors worked out from shapes (`dims`: Shape -> Gather -> Concat chains)."""

    def __init__(self, opset: int, constants: Dict[str, np.ndarray],
                 values: Optional[Dict[str, List[Any]]] = None):
        self.opset = opset
        self.constants = constants
        self.values = values if values is not None else {}

    def dims(self, name: str) -> Optional[List[Any]]:
        """The elements of an integer vector that holds dims: ints, symbolic names or None
        each; None when nothing is known (constants give ints, Shape of a fact its dims)."""
        ints = self.ints(name)
        if ints is not None:
            return list(ints)
        got = self.values.get(name) if name else None
        return None if got is None else list(got)

    def input_dims(self, node: ir.Node, k: int) -> Optional[List[Any]]:
        """`dims` of the node's k-th input (None when absent or unknown)."""
        return self.dims(node.inputs[k]) if len(node.inputs) > k and node.inputs[k] else None

    def const(self, name: str) -> Optional[np.ndarray]:
        """The constant value of `name`, None when it is not a constant."""
        return self.constants.get(name) if name else None

    def ints(self, name: str) -> Optional[List[int]]:
        """A constant integer tensor as a flat list of ints, None otherwise."""
        value = self.const(name)
        if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
            return [int(v) for v in value.reshape(-1)]
        return None

    def input_ints(self, node: ir.Node, k: int) -> Optional[List[int]]:
        """`ints` of the node's k-th input (None when absent or not constant)."""
        return self.ints(node.inputs[k]) if len(node.inputs) > k else None


Rule = Callable[[ir.Node, List[Optional[Fact]], RuleContext], List[Optional[Fact]]]
_RULES: Dict[Tuple[str, str], Rule] = {}


def fact_rule(*op_types: str, domain: Union[str, Sequence[str]] = "") -> Callable[[Rule], Rule]:
    """Decorator: `fn` gives the output facts of these op types in this domain (or domains).

    `fn(node, ins, ctx)` gets the facts of the node's inputs (None where unknown or absent) and
    a RuleContext; it returns a list with a Fact or None per output (shorter lists are fine)."""
    domains = [domain] if isinstance(domain, str) else list(domain)

    def deco(fn: Rule) -> Rule:
        for d in domains:
            for op in op_types:
                _RULES[("" if d == "ai.onnx" else d, op)] = fn
        return fn
    return deco


def rule_for(domain: str, op_type: str) -> Optional[Rule]:
    """The registered rule of an op, None when it has none (its outputs stay unknown)."""
    _load_rules()
    return _RULES.get(("" if domain == "ai.onnx" else domain, op_type))


def covered_ops() -> List[Tuple[str, str]]:
    """(domain, op type) of every op with a rule, sorted."""
    _load_rules()
    return sorted(_RULES)


def _load_rules() -> None:
    from . import fact_rules  # noqa: F401  (registers the rules on import)


def _merge(declared: Fact, inferred: Optional[Fact]) -> Fact:
    """A declared fact completed by inference where it says nothing (type 0, unknown rank)."""
    if inferred is None:
        return declared
    elem = declared.elem_type or inferred.elem_type
    shape = declared.shape if declared.shape is not None else inferred.shape
    return Fact(elem, shape)


def _constant_value(node: ir.Node) -> Optional[np.ndarray]:
    """The value a Constant node makes (dense forms only), None otherwise."""
    a = node.attributes
    if isinstance(a.get("value"), np.ndarray):
        return a["value"]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return np.asarray(a[key], dtype=dt)
    return None


def declared(graph: ir.Graph) -> Facts:
    """The facts a graph states itself: initializers, then inputs, value infos and outputs."""
    known = Facts()
    for name, value in graph.initializers.items():
        if isinstance(value, np.ndarray):
            try:
                known[name] = Fact(dtypes.from_numpy(value.dtype), value.shape)
            except KeyError:
                pass
    for vi in list(graph.inputs) + list(graph.value_info.values()) + list(graph.outputs):
        t = vi.type
        if t is not None and t.kind == "tensor" and vi.name not in known \
                and (t.elem_type or t.shape is not None):
            known[vi.name] = Fact(t.elem_type, t.shape)
    return known


def infer(graph: ir.Graph, opsets: Optional[Dict[str, int]] = None,
          start: Optional[Dict[str, Fact]] = None) -> Facts:
    """Facts of every value of `graph` that its declarations and the op rules tell.

    Declared facts win (inference fills what they leave unknown); `start` replaces the declared
    facts of the values it names (e.g. input shapes fixed by a caller). Subgraph bodies are not
    entered: If/Loop/Scan outputs are known only where declared."""
    opsets = opsets or {}
    known = declared(graph)
    known.update(start or {})
    fed = {v.name for v in graph.inputs}
    constants = {k: v for k, v in graph.initializers.items()
                 if k not in fed and isinstance(v, np.ndarray)}
    values: Dict[str, List[Any]] = {}
    for node in graph.nodes:
        if node.op_type == "Constant" and not node.domain and node.outputs:
            value = _constant_value(node)
            if value is not None:
                constants[node.outputs[0]] = value
        ctx = RuleContext(opsets.get(node.domain, 0), constants, values)
        outs = _infer_node(node, known, ctx)
        if not node.domain and node.op_type in _VALUE_OPS and node.outputs and node.outputs[0]:
            got = _dims_value(node, known, ctx)
            if got is not None:
                values[node.outputs[0]] = got
        for name, fact in zip(node.outputs, outs):
            if not name or fact is None:
                continue
            have = known.get(name)
            known[name] = fact if have is None else _merge(have, fact)
    return known


def _infer_node(node: ir.Node, known: Facts, ctx: RuleContext) -> List[Optional[Fact]]:
    rule = rule_for(node.domain, node.op_type)
    if rule is None:
        return []
    ins = [known.get(n) if n else None for n in node.inputs]
    try:
        return list(rule(node, ins, ctx) or [])
    except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError):
        return []   # a malformed node: its facts stay unknown; the checker / kernel says why


_VALUE_OPS = ("Shape", "Gather", "Concat", "Unsqueeze", "Squeeze", "Cast", "Identity", "Slice",
              "Equal", "Where")
MAX_DIMS_VALUE = 16   # longest integer vector whose elements are followed


def _dims_value(node: ir.Node, known: Facts, ctx: RuleContext) -> Optional[List[Any]]:
    """The elements of a small integer vector made from shapes (Shape, then Gather / Slice /
    Concat / Unsqueeze / Squeeze / Cast / Identity of such vectors), None when unknown."""
    op, ins = node.op_type, node.inputs
    try:
        if op == "Shape":
            shape = known.shape(ins[0])
            if shape is None:
                return None
            rank = len(shape)
            a = node.attributes
            start, end = int(a.get("start", 0)), int(a.get("end", rank))
            start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
            return list(shape[start:end])
        if op == "Concat":
            parts = [ctx.dims(n) for n in ins]
            if any(p is None for p in parts):
                return None
            out = [d for p in parts for d in p]   # type: ignore[union-attr]
            return out if len(out) <= MAX_DIMS_VALUE else None
        if op == "Where":   # the exporters' Where(Equal(dims, -1), ones, dims) before Expand
            cond = ctx.values.get(ins[0]) if ins else None
            if cond is None or not all(isinstance(c, bool) for c in cond):
                return None
            if not any(cond):
                return ctx.dims(ins[2])
            return ctx.dims(ins[1]) if all(cond) else None
        src = ctx.dims(ins[0]) if ins else None
        if src is None:
            return None
        if op == "Equal":   # dims (sizes >= 0, symbolic or not) against a constant -1
            other = ctx.ints(ins[1])
            if other is None or any(v != -1 for v in other) or \
                    not all(isinstance(d, str) or (isinstance(d, int) and d >= 0) for d in src):
                return None
            return [False] * len(src)
        if op == "Gather":
            idx = ctx.ints(ins[1])
            if idx is None or int(node.attributes.get("axis", 0)) != 0:
                return None
            return [src[i] for i in idx]
        if op == "Slice":
            starts, ends = ctx.input_ints(node, 1), ctx.input_ints(node, 2)
            steps = ctx.input_ints(node, 4) if len(ins) > 4 and ins[4] else [1]
            if starts is None or ends is None or steps is None or len(starts) != 1:
                return None
            return src[slice(starts[0], ends[0], steps[0])]
        if op == "Cast" and int(node.attributes.get("to", 0)) not in (dtypes.INT64, dtypes.INT32):
            return None
        return src   # Unsqueeze / Squeeze of a vector's elements, Cast to int, Identity
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def of_values(facts: Dict[str, Fact], names: Iterable[str]) -> List[Optional[Fact]]:
    """The facts of these names, None where unknown."""
    return [facts.get(n) if n else None for n in names]


__all__ = ["Fact", "Facts", "RuleContext", "fact_rule", "rule_for", "covered_ops", "infer",
           "declared", "of_values"]
