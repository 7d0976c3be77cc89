"""One op-support record for every provider, and the tables built from it.

A provider says what it runs with a `SupportTable` of `OpSupport` records: domain, op type, the
opset range [since, until] it implements, `check(node, facts) -> reason or None` (None: the
provider takes this node) and `build` (whatever the provider compiles the node with: a kernel
function, a (check, build) pair's build, a translator; the table does not call it).

`facts` is what a check may know about the graph: element types, shapes, constants and the
model's opsets. Every provider passes an object with the small `Facts` interface below (its
own subclass may add what only it needs: a deployment target, a feature level), so checks read
types through `facts.elem_type` / `facts.dtype` / `facts.rank` / `facts.shape` /
`facts.const` / `facts.opset_of`, never through a provider's private copy of inference.

`docs/OPERATORS.md` is generated from the tables: `python -m onnxedge.providers.support
--write-docs` (a test fails when the file is stale).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

import numpy as np

from .. import ir

MAX_OPSET = 1 << 30
Check = Callable[[ir.Node, Any], Optional[str]]


def norm_domain(domain: str) -> str:
    """"" for the default ONNX domain (also spelled "ai.onnx"), else the domain unchanged."""
    return "" if domain == "ai.onnx" else domain


class OpSupport(NamedTuple):
    """What a provider runs for one (domain, op type) over an opset range.

    `check(node, facts)` returns None when the provider takes the node, else why not; None as
    the check means the provider takes every node of the op. `build` is the provider's own
    (kernel, builder, op spec); `conditional` marks a check that may refuse nodes (the docs'
    footnote), and defaults to whether there is a check.
    """

    domain: str
    op: str
    since: int = 1
    until: int = MAX_OPSET
    check: Optional[Check] = None
    build: Any = None
    conditional: Optional[bool] = None

    def covers(self, opset: int) -> bool:
        """True when this record serves the opset."""
        return self.since <= opset <= self.until

    @property
    def has_conditions(self) -> bool:
        """True when the check may refuse a node of this op."""
        return self.check is not None if self.conditional is None else bool(self.conditional)


class SupportTable:
    """A provider's records, looked up by (domain, op type) and opset."""

    def __init__(self, provider: str, records: Iterable[OpSupport] = ()):
        self.provider = provider
        self._records: Dict[Tuple[str, str], List[OpSupport]] = {}
        for r in records:
            self.add(r)

    def add(self, record: OpSupport) -> OpSupport:
        """Add (or replace: same domain, op and `since`) a record; returns it."""
        record = record._replace(domain=norm_domain(record.domain))
        recs = self._records.setdefault((record.domain, record.op), [])
        recs[:] = [r for r in recs if r.since != record.since]
        recs.append(record)
        recs.sort(key=lambda r: -r.since)
        return record

    def register(self, ops: Iterable[str], domain: str = "", since: int = 1,
                 until: int = MAX_OPSET, check: Optional[Check] = None,
                 conditional: Optional[bool] = None) -> Callable[[Any], Any]:
        """Decorator: add a record whose build is the decorated object, for each op."""
        def wrap(build: Any) -> Any:
            for op in ops:
                self.add(OpSupport(domain, op, since, until, check, build, conditional))
            return build
        return wrap

    def records(self) -> List[OpSupport]:
        """Every record, sorted by domain, op and opset."""
        return sorted((r for rs in self._records.values() for r in rs),
                      key=lambda r: (r.domain, r.op, r.since))

    def keys(self) -> Set[Tuple[str, str]]:
        """Every (domain, op type) the table has a record for."""
        return set(self._records)

    def ops(self) -> List[str]:
        """Op type names of the table, sorted, without repeats."""
        return sorted({op for _, op in self._records})

    def __contains__(self, key: Tuple[str, str]) -> bool:
        return (norm_domain(key[0]), key[1]) in self._records

    def __len__(self) -> int:
        return sum(len(rs) for rs in self._records.values())

    def find(self, domain: str, op: str, opset: Optional[int] = None) -> Optional[OpSupport]:
        """The record of (domain, op) serving `opset` (any opset when None), else None."""
        for r in self._records.get((norm_domain(domain), op), ()):
            if opset is None or r.covers(opset):
                return r
        return None

    def lookup(self, node: ir.Node, opset: Optional[int] = None) -> Optional[OpSupport]:
        """The record for a node at the model's opset of its domain, else None."""
        return self.find(node.domain, node.op_type, opset)

    def reason(self, node: ir.Node, opset: Optional[int], facts: Any,
               missing: Optional[Callable[[ir.Node], str]] = None) -> Optional[str]:
        """None when the provider takes `node`, else why not: no record (`missing(node)`
        words it), an opset outside the record's range, or what the check says."""
        rec = self.lookup(node, opset)
        if rec is None:
            if opset is not None and self.find(node.domain, node.op_type) is not None:
                return "%s has no %s record for opset %d (it has opsets %s)" % (
                    node.op_type, self.provider, opset, self.ranges(node.domain, node.op_type))
            if missing is not None:
                return missing(node)
            return "no %s kernel for %s (domain %s)" % (self.provider, node.op_type,
                                                        node.domain or "ai.onnx")
        return rec.check(node, facts) if rec.check is not None else None

    def ranges(self, domain: str, op: str) -> str:
        """The opset ranges of (domain, op) as text: "1+", "6-12, 13+"."""
        recs = sorted(self._records.get((norm_domain(domain), op), ()), key=lambda r: r.since)
        return ", ".join(opset_range(r.since, r.until) for r in recs)


def opset_range(since: int, until: int) -> str:
    """"13+" for an open range, "6-12" for a closed one, "7" for one opset."""
    if until >= MAX_OPSET:
        return "%d+" % since
    return "%d" % since if since == until else "%d-%d" % (since, until)


class Facts:
    """What a check may know about a graph: declared and initializer types, shapes, constants.

    Types and shapes come from `known` (the session's `ctx.facts`, onnxedge.facts: declared
    and inferred once for the whole graph) and, for values it does not know, from what the
    graph states (value infos, initializers); constants are initializers no feed overrides. A
    provider may pass a subclass with more (a target level). Element types are ONNX codes
    (0: unknown).
    """

    def __init__(self, graph: ir.Graph, opsets: Optional[Dict[str, int]] = None,
                 known: Any = None):
        self.graph = graph
        self.opsets = dict(opsets or {})
        self.known = known
        fed = {v.name for v in graph.inputs}
        self.consts = {k: v for k, v in graph.initializers.items()
                       if k not in fed and isinstance(v, np.ndarray)}

    def opset_of(self, node: ir.Node) -> int:
        """The opset the model imports for the node's domain (0 when unknown)."""
        return self.opsets.get(node.domain, self.opsets.get(norm_domain(node.domain), 0))

    def type_of(self, name: str) -> Optional[ir.TypeInfo]:
        """The type of a value: its fact in `known`, else what the graph declares."""
        if not name:
            return None
        t = self.known.type_of(name) if self.known is not None else None
        return t if t is not None else self.graph.type_of(name)

    def elem_type(self, name: str) -> int:
        """ONNX element type code of a tensor value, 0 when unknown."""
        t = self.type_of(name)
        return t.elem_type if t is not None and t.kind == "tensor" else 0

    def shape(self, name: str) -> Optional[List[Any]]:
        """The value's shape (ints, dim names or None per dim), None when its rank is unknown."""
        t = self.type_of(name)
        if t is None or t.kind != "tensor" or t.shape is None:
            return None
        return list(t.shape)

    def rank(self, name: str) -> Optional[int]:
        """The value's rank, None when unknown."""
        s = self.shape(name)
        return None if s is None else len(s)

    def dtype(self, name: str) -> Optional[np.dtype]:
        """The value's numpy dtype, None when unknown."""
        from .. import dtypes
        code = self.elem_type(name)
        if not code:
            return None
        try:
            return np.dtype(dtypes.to_numpy(code))
        except Exception:
            return None

    def const(self, name: str) -> Optional[np.ndarray]:
        """The value of an initializer no feed can override, else None."""
        return self.consts.get(name) if name else None


class NoFacts(Facts):
    """Facts of no graph: every type and shape unknown (reasons asked for outside a graph)."""

    def __init__(self, opsets: Optional[Dict[str, int]] = None):
        self.graph = None  # type: ignore[assignment]
        self.known = None
        self.opsets = dict(opsets or {})
        self.consts = {}

    def type_of(self, name: str) -> Optional[ir.TypeInfo]:
        """Always None: nothing is known."""
        return None


# --------------------------------------------------------------------------- the docs

# Column order and short names of docs/OPERATORS.md; where each provider's table lives.
PROVIDER_TABLES = (
    ("CPU", "CPUExecutionProvider", "onnxedge.providers.cpu:support_table"),
    ("WebGPU", "WebGpuExecutionProvider", "onnxedge.web.webgpu.ops:support_table"),
    ("wasm", "WasmSimdExecutionProvider", "onnxedge.web.wasm.claims:support_table"),
    ("C engine", "NeonExecutionProvider / X64ExecutionProvider", "onnxedge.edge.neon.ops:support_table"),
    ("CoreML", "CoreMLExecutionProvider", "onnxedge.edge.coreml.support:support_table"),
    ("NNAPI", "NnapiExecutionProvider", "onnxedge.edge.nnapi.support:support_table"),
)
DOCS_PATH = "docs/OPERATORS.md"


def load_tables() -> List[Tuple[str, str, Optional[SupportTable]]]:
    """(short name, provider name, table or None when its package is not installed)."""
    import importlib
    out = []
    for short, name, where in PROVIDER_TABLES:
        mod, attr = where.split(":")
        try:
            table = getattr(importlib.import_module(mod), attr)()
        except ImportError:
            table = None
        out.append((short, name, table))
    return out


def _cell(table: Optional[SupportTable], domain: str, op: str) -> str:
    if table is None or (domain, op) not in table:
        return ""
    recs = sorted((r for r in table.records() if (r.domain, r.op) == (domain, op)),
                  key=lambda r: r.since)
    text = ", ".join(opset_range(r.since, r.until) for r in recs)
    return text + (" *" if any(r.has_conditions for r in recs) else "")


def operators_markdown(tables: Optional[List[Tuple[str, str, Optional[SupportTable]]]] = None
                       ) -> str:
    """docs/OPERATORS.md: the op x provider matrix of every provider's SupportTable."""
    tables = load_tables() if tables is None else tables
    keys = sorted({k for _, _, t in tables if t is not None for k in t.keys()},
                  key=lambda k: (k[0] != "", k[0], k[1]))
    lines = [
        "# Operators by execution provider",
        "",
        "Generated by `python -m onnxedge.providers.support --write-docs` from each provider's",
        "`SupportTable` (`onnxedge.providers.support.OpSupport` records); do not edit by hand.",
        "",
        "A cell gives the opsets the provider implements (`13+`: opset 13 and later; `6-12`:",
        "those opsets). `*`: the provider's check has conditions (element types, ranks,",
        "attributes, constant weights, a deployment target or feature level) and may leave a",
        "node of the op to the next provider; the partition report (`partition_report()`) says",
        "why for each node. An empty cell: the provider never claims the op. The CPU provider",
        "runs every registered kernel and is the fallback for every graph.",
        "",
    ]
    counts = ["%s %d" % (short, len(t.keys())) for short, _, t in tables if t is not None]
    lines += ["Ops per provider: " + ", ".join(counts) + ".", ""]
    for domain in sorted({d for d, _ in keys}, key=lambda d: (d != "", d)):
        lines += ["## %s" % (domain or "ai.onnx"), ""]
        lines.append("| Op | " + " | ".join(short for short, _, _ in tables) + " |")
        lines.append("|---|" + "---|" * len(tables))
        for d, op in keys:
            if d != domain:
                continue
            cells = [_cell(t, d, op) for _, _, t in tables]
            lines.append("| %s | %s |" % (op, " | ".join(cells)))
        lines.append("")
    missing = [name for _, name, t in tables if t is None]
    if missing:
        lines += ["Not installed when generated: %s." % ", ".join(missing), ""]
    return "\n".join(lines)


def docs_file(root: Optional[str] = None) -> str:
    """The path of docs/OPERATORS.md in the source tree (root: the repository)."""
    import os
    if root is None:
        here = os.path.dirname(os.path.abspath(__file__))
        root = os.path.dirname(os.path.dirname(here))
    return os.path.join(root, *DOCS_PATH.split("/"))


def _main(argv: Optional[List[str]] = None) -> int:
    import sys
    args = sys.argv[1:] if argv is None else argv
    text = operators_markdown()
    if "--write-docs" in args:
        path = docs_file()
        with open(path, "w") as f:
            f.write(text)
        print("wrote %s" % path)
    elif "--check-docs" in args:
        with open(docs_file()) as f:
            if f.read() != text:
                print("%s is stale: run python -m onnxedge.providers.support --write-docs"
                      % DOCS_PATH)
                return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())


__all__ = ["OpSupport", "SupportTable", "Facts", "NoFacts", "MAX_OPSET", "norm_domain",
           "opset_range", "operators_markdown", "load_tables", "docs_file", "PROVIDER_TABLES"]
