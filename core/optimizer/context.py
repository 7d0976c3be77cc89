"""What a pass sees of one graph: producers, users, constants, static types, and the edits
every pass shares (replace a pattern by new nodes, add an initializer, forward a value)."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Set

import numpy as np

from .. import facts, fused_ops, ir

FUSED_DOMAIN = fused_ops.DOMAIN
FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


class PassContext:
    """One graph under rewrite, with an index of who produces and who reads each value.

    The index is built once per pass; `replace` keeps it usable for later matches in the same
    pass (removed nodes are forgotten, new nodes become producers). Use counts of values read by
    removed nodes stay high until the next pass, which only makes matches more cautious.
    """

    def __init__(self, model: ir.Model, graph: ir.Graph, outer: Iterable[str] = ()):
        self.model = model
        self.graph = graph
        self.outer = set(outer)
        self.opsets = model.opset_imports
        self.outputs = {o.name for o in graph.outputs}
        self.fed = {v.name for v in graph.inputs}   # graph inputs, overridable initializers too
        self.removed: Set[int] = set()
        self._types: Optional[facts.Facts] = None
        self.reindex()

    # ------------------------------------------------------------------ index

    def reindex(self) -> None:
        """Rebuild the producer and user maps from the graph as it is now."""
        self.producer: Dict[str, ir.Node] = {}
        self.users: Dict[str, List[ir.Node]] = {}
        for node in self.graph.nodes:
            for out in node.outputs:
                if out:
                    self.producer[out] = node
            for name in node.reads():
                self.users.setdefault(name, []).append(node)
        self.removed = set()
        self._graveyard: List[ir.Node] = []
        self._types = None

    def producer_of(self, name: str, op_type: Optional[str] = None,
                    domain: str = "") -> Optional[ir.Node]:
        """The live node producing `name` (of `op_type` in `domain`, when given), or None."""
        node = self.producer.get(name)
        if node is None or id(node) in self.removed:
            return None
        if op_type is not None and (node.op_type != op_type or node.domain != domain):
            return None
        return node

    def live_users(self, name: str) -> List[ir.Node]:
        """Nodes still in the graph that read `name` (inputs or subgraph references), once each."""
        seen: Set[int] = set()
        out = []
        for n in self.users.get(name, ()):
            if id(n) not in self.removed and id(n) not in seen:
                seen.add(id(n))
                out.append(n)
        return out

    def only_user(self, name: str) -> Optional[ir.Node]:
        """The single node reading `name` when exactly one does and `name` is no graph output."""
        if name in self.outputs:
            return None
        users = self.live_users(name)
        if len(users) != 1:
            return None
        node = users[0]
        if node.inputs.count(name) != 1:
            return None
        if any(name in sub.outer_references() for _, sub in node.subgraphs()):
            return None
        return node

    def private(self, name: str) -> bool:
        """True when `name` is an intermediate a fusion may swallow: one reader, no graph output."""
        return self.only_user(name) is not None

    # ------------------------------------------------------------------ constants and types

    def const(self, name: str) -> Optional[np.ndarray]:
        """The value of `name` when it is a constant initializer of this graph (not a feedable
        input), else None."""
        if not name or name in self.fed:
            return None
        value = self.graph.initializers.get(name)
        return value if isinstance(value, np.ndarray) else None

    def scalar(self, name: str) -> Optional[float]:
        """A constant holding one number, as a float; None otherwise."""
        value = self.const(name)
        if value is None or value.size != 1 or value.dtype.kind not in "fiu":
            return None
        return float(value.reshape(-1)[0])

    @property
    def types(self) -> facts.Facts:
        """Static element types and shapes of the graph's values (the core's facts service,
        computed on first use)."""
        if self._types is None:
            self._types = facts.infer(self.graph, self.opsets)
        return self._types

    def dtype(self, name: str) -> Optional[np.dtype]:
        """The numpy dtype of a value when known."""
        info = self.types.get(name)
        return None if info is None else info.numpy_dtype()

    def shape(self, name: str) -> Optional[List[Any]]:
        """The (possibly symbolic) shape of a value, or None when its rank is unknown."""
        info = self.types.get(name)
        return None if info is None else info.shape

    def is_float(self, name: str) -> bool:
        """True when `name` is known to be float32 or float64."""
        return self.dtype(name) in FLOAT_TYPES

    # ------------------------------------------------------------------ edits

    def fresh_name(self, base: str) -> str:
        """A value/initializer name unused anywhere in this graph."""
        taken = self.graph.initializers
        name, i = base, 0
        while name in taken or name in self.producer or name in self.fed or name in self.outer:
            i += 1
            name = "%s_%d" % (base, i)
        return name

    def add_initializer(self, base: str, value: np.ndarray) -> str:
        """Store a new constant under a fresh name; returns the name."""
        name = self.fresh_name(base)
        self.graph.initializers[name] = value
        return name

    def replace(self, old: List[ir.Node], new: List[ir.Node]) -> None:
        """Swap the nodes `old` for `new`, placed where the last of `old` stood."""
        ids = {id(n) for n in old}
        positions = [i for i, n in enumerate(self.graph.nodes) if id(n) in ids]
        at = positions[-1]
        nodes = self.graph.nodes
        self.graph.nodes = [n for n in nodes[:at] if id(n) not in ids] + list(new) + \
            [n for n in nodes[at + 1:] if id(n) not in ids]
        self.removed.update(ids)
        self._graveyard.extend(old)   # keeps removed nodes alive so their ids are not reused
        for node in new:
            for out in node.outputs:
                if out:
                    self.producer[out] = node
            for name in node.reads():
                self.users.setdefault(name, []).append(node)
        kept = {o for n in new for o in n.outputs}
        for node in old:
            for out in node.outputs:
                if out and self.producer.get(out) is node:
                    del self.producer[out]
                if out not in kept:
                    self.graph.value_info.pop(out, None)
        self._types = None

    def forward(self, node: ir.Node, out: str, src: str) -> bool:
        """Remove `node` whose output `out` equals its input `src`: readers of `out` read `src`.

        When `out` is a graph output, the producer of `src` is renamed to make `out` instead
        (only if `src` is an intermediate no one else reads). False when neither is possible.
        """
        if out in self.outputs:
            prod = self.producer_of(src)
            if (prod is None or src in self.outputs or src in self.fed
                    or len(self.live_users(src)) != 1):
                return False
            prod.outputs = [out if o == src else o for o in prod.outputs]
            self.graph.value_info.pop(src, None)
            self.replace([node], [])
            self.producer[out] = prod
            return True
        for user in self.live_users(out):
            rename_reads(user, out, src)
            self.users.setdefault(src, []).append(user)
        self.graph.value_info.pop(out, None)
        self.replace([node], [])
        return True

    def make_node(self, op_type: str, inputs: List[str], outputs: List[str],
                  attributes: Optional[Dict[str, Any]] = None, domain: str = "",
                  name: str = "") -> ir.Node:
        """A new node; a node in the fused domain makes the model import that domain."""
        if domain == FUSED_DOMAIN and FUSED_DOMAIN not in self.model.opset_imports:
            self.model.opset_imports[FUSED_DOMAIN] = 1
        return ir.Node(op_type, inputs, outputs, attributes or {}, domain, name)


def rename_reads(node: ir.Node, old: str, new: str) -> None:
    """Make `node` (and any subgraph of it) read `new` wherever it read `old`."""
    node.inputs = [new if n == old else n for n in node.inputs]
    for _, sub in node.subgraphs():
        defined = set(sub.initializers) | {v.name for v in sub.inputs}
        if old in defined:
            continue
        for inner in sub.nodes:
            rename_reads(inner, old, new)
        for out in sub.outputs:
            if out.name == old:   # a subgraph output read straight from the outer scope
                out.name = new
