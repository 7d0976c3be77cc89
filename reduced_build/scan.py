"""Required operators of models, and onnxruntime's `required_operators.config` file format.

A requirement set maps (domain, opset) to the op types a model uses there, subgraphs (If, Loop,
Scan bodies) and model-local function bodies included; calls to a model-local function are not
ops (their bodies are). The default domain is written "ai.onnx", as onnxruntime does.

The config format is onnxruntime's (`tools/python/create_reduced_build_config.py`)::

    # comment
    ai.onnx;17;Gemm,Relu,Softmax
    ai.onnx.ml;3;TreeEnsembleClassifier

Per-op type-reduction annotations (`Add{"inputs": {"0": ["float"]}}`) are read and ignored:
onnxedge keeps or drops whole kernels.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple, Union

from onnxedge import checker, ir, model_io
from onnxedge.errors import InvalidArgument, InvalidGraph, NoSuchFile

Requirements = Dict[Tuple[str, int], Set[str]]
DEFAULT_DOMAIN = "ai.onnx"


def _domain_name(domain: str) -> str:
    return DEFAULT_DOMAIN if domain in ("", DEFAULT_DOMAIN) else domain


def _scan_nodes(nodes: Iterable[ir.Node], opsets: Dict[str, int], functions: Dict[Tuple[str, str], Any],
                out: Requirements) -> None:
    for node in nodes:
        if (node.domain, node.op_type) in functions:
            continue   # a call of a model-local function: its body is scanned on its own
        dom = node.domain
        key = (_domain_name(dom), int(opsets.get(dom, opsets.get(_domain_name(dom), 0))))
        out.setdefault(key, set()).add(node.op_type)
        for _, sub in node.subgraphs():
            _scan_nodes(sub.nodes, opsets, functions, out)


def required_operators(model: Union[str, bytes, ir.Model],
                       level: Optional[str] = "all") -> Requirements:
    """{(domain, opset): op types} a model (path, bytes or IR; .onnx or .oxe) needs.

    With a `level`, the ops of the model as the optimizer rewrites it at that level are added
    (a session optimizes at load time, at "all" unless told otherwise, and may bring in fused
    ops such as com.onnxedge FusedGemm); None scans the model as it is.
    """
    m = model if isinstance(model, ir.Model) else model_io.load(model)
    out = _scan_model(m)
    if level is not None and level != "disable":
        from onnxedge import optimizer
        out = merge(out, _scan_model(optimizer.optimize(m, level)))
    return out


def _scan_model(m: ir.Model) -> Requirements:
    checker.check_model_identifiers(m)   # op types and domains reach generated files
    functions = {(f.domain, f.name): f for f in m.functions}
    out: Requirements = {}
    _scan_nodes(m.graph.nodes, m.opset_imports, functions, out)
    for f in m.functions:
        opsets = dict(m.opset_imports)
        opsets.update({("" if k == DEFAULT_DOMAIN else k): v for k, v in f.opset_imports.items()})
        _scan_nodes(f.nodes, opsets, functions, out)
    return out


def merge(*reqs: Requirements) -> Requirements:
    """The union of several requirement sets."""
    out: Requirements = {}
    for req in reqs:
        for key, ops in req.items():
            out.setdefault(key, set()).update(ops)
    return out


def scan_models(paths: Iterable[Union[str, ir.Model]], level: Optional[str] = "all") -> Requirements:
    """The merged requirements of several models (files or folders of .onnx / .oxe files)."""
    reqs = []
    for path in paths:
        if isinstance(path, str) and os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if name.lower().endswith((".onnx", ".oxe")):
                    reqs.append(required_operators(os.path.join(path, name), level))
        else:
            reqs.append(required_operators(path, level))
    return merge(*reqs)


def op_pairs(req: Requirements) -> Set[Tuple[str, str]]:
    """The (domain, op) pairs of a requirement set, default domain as "" (the registry's form)."""
    return {("" if d == DEFAULT_DOMAIN else d, op) for (d, _), ops in req.items() for op in ops}


# ------------------------------------------------------------------------- config files

def _split_ops(text: str, where: str) -> List[str]:
    """Op names of a config line's third field; braces (type annotations) may hold commas."""
    ops, depth, cur = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise InvalidArgument("%s: unbalanced '}' in %r" % (where, text))
        if ch == "," and depth == 0:
            ops.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise InvalidArgument("%s: unbalanced '{' in %r" % (where, text))
    ops.append("".join(cur))
    names = [op.split("{", 1)[0].strip() for op in ops]
    return [n for n in names if n]


def parse_config(text: str, source: str = "<config>") -> Requirements:
    """Requirements from the text of a required_operators.config file."""
    out: Requirements = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = "%s line %d" % (source, lineno)
        parts = line.split(";", 2)
        if len(parts) != 3:
            raise InvalidArgument("%s: expected 'domain;opset;Op1,Op2,...', got %r" % (where, raw))
        domain, opset, ops = parts
        try:
            version = int(opset.strip())
        except ValueError:
            raise InvalidArgument("%s: opset %r is not an integer" % (where, opset)) from None
        names = _split_ops(ops, where)
        for name in names:
            if not checker.is_op_type(name):
                raise InvalidArgument("%s: %r is not an operator name (expected %s)"
                                      % (where, name, checker.OP_TYPE_PATTERN))
        if not checker.is_domain(domain.strip()):
            raise InvalidArgument("%s: domain %r is not dotted identifiers (e.g. ai.onnx.ml)"
                                  % (where, domain.strip()))
        out.setdefault((_domain_name(domain.strip()), version), set()).update(names)
    return out


def read_config(path: str) -> Requirements:
    """Requirements from a required_operators.config file."""
    if not os.path.isfile(path):
        raise NoSuchFile("config %s does not exist" % path)
    with open(path, encoding="utf-8") as f:
        return parse_config(f.read(), path)


def format_config(req: Requirements, header: Optional[str] = None) -> str:
    """The text of a required_operators.config file for a requirement set.

    Every op and domain must be a plain identifier (InvalidGraph otherwise: a newline in one would
    add lines); the header's non-printable characters are written escaped."""
    lines = ["# " + _printable(h) for h in (header or "").splitlines()]
    for domain, opset in sorted(req):
        for op in sorted(req[(domain, opset)]):
            why = checker.op_identifier_error(domain, op)
            if why is not None:
                raise InvalidGraph("required operators (opset %d): %s" % (opset, why))
        if req[(domain, opset)]:
            lines.append("%s;%d;%s" % (domain, opset, ",".join(sorted(req[(domain, opset)]))))
    return "\n".join(lines) + "\n"


def _printable(text: str) -> str:
    """text with its non-printable characters (control characters, line separators) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def write_config(req: Requirements, path: str, header: Optional[str] = None) -> None:
    """Write a required_operators.config file."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(format_config(req, header))
