"""Source shrinking for reduced wheels: unused kernel functions, docstrings and comments out.

`strip_unused(source, keep_ops, imported)` keeps, of a kernel module's top-level statements, every
statement that is not a definition (loops and calls that register table-driven kernels), the
definitions registered for a kept op (`@register("Op", domain=...)`) and everything those
reference by name, transitively, and the imports of the names kept code uses; `imported` names
what other modules import from it.
`strip_text(source)` removes docstrings and comments. Both work on source lines (no
`ast.unparse`, which Python 3.8 lacks) and return the source unchanged when the result would not
compile.
"""
from __future__ import annotations

import ast
import io
import tokenize
from typing import Dict, Iterable, List, Optional, Set, Tuple

Op = Tuple[str, str]   # (domain, op type), default domain ""


def _norm(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _literal(node: ast.expr, consts: Dict[str, str]) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def _string_constants(tree: ast.Module) -> Dict[str, str]:
    """Module-level `NAME = "text"` assignments (e.g. a DOMAIN constant), and the string
    constants imported from onnxedge.fused_ops (`from ..fused_ops import DOMAIN`)."""
    out = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[-1] == "fused_ops":
            from onnxedge import fused_ops
            for alias in stmt.names:
                value = getattr(fused_ops, alias.name, None)
                if isinstance(value, str):
                    out[alias.asname or alias.name] = value
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            out[stmt.targets[0].id] = stmt.value.value
    return out


def _registered_op(call: ast.expr, consts: Dict[str, str]) -> Optional[Op]:
    """(domain, op) of `register("Op", domain=...)` / `add("Op", fn, domain=...)` with literal
    arguments (or module string constants), else None."""
    if not _is_registration(call) or not call.args:
        return None
    op = _literal(call.args[0], consts)
    name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
    domain: Optional[str] = ""
    for kw in call.keywords:
        if kw.arg == "domain":
            domain = _literal(kw.value, consts)
    if name == "register" and len(call.args) > 1:
        domain = _literal(call.args[1], consts)
    if op is None or domain is None:
        return None
    return (_norm(domain), op)


def _is_registration(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in ("register", "add")


def _defined_names(stmt: ast.stmt) -> Optional[Set[str]]:
    """Names a droppable statement defines (defs, classes, plain assignments), else None."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets: List[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets = [stmt.target]
    names: Set[str] = set()
    for t in targets:
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        for e in elts:
            if not isinstance(e, ast.Name):
                return None
            names.add(e.id)
    return names or None


def _used_names(stmt: ast.stmt) -> Set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def _first_line(stmt: ast.stmt) -> int:
    decos = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno] + [d.lineno for d in decos])


def strip_unused(source: str, keep_ops: Iterable[Op], imported: Iterable[str] = (),
                 filename: str = "<kernel>") -> str:
    """The kernel module without the top-level definitions that no kept op needs."""
    tree = ast.parse(source, filename)
    keep_ops = {(_norm(d), o) for d, o in keep_ops}
    roots: Set[str] = set(imported)
    optional: Dict[int, Set[str]] = {}      # statement index -> names it defines
    kept: Set[int] = set()
    consts = _string_constants(tree)
    for i, stmt in enumerate(tree.body):
        names = _defined_names(stmt)
        ops, opaque = [], False
        for deco in getattr(stmt, "decorator_list", None) or []:
            if _is_registration(deco):
                op = _registered_op(deco, consts)
                opaque = opaque or op is None
                ops.append(op)
        if isinstance(stmt, ast.Expr) and _is_registration(stmt.value):
            op = _registered_op(stmt.value, consts)
            if op is not None and op not in keep_ops:
                continue   # add("Op", fn) for a dropped op
        if names is None or opaque or any(op in keep_ops for op in ops):
            kept.add(i)     # imports, loops, calls, kept ops' kernels
        elif names & {"__all__"}:
            continue        # would name dropped definitions
        else:
            optional[i] = names
    used: Set[str] = set(roots)
    for i in kept:
        used |= _used_names(tree.body[i])
    changed = True
    while changed:
        changed = False
        for i, names in list(optional.items()):
            if names & used:
                kept.add(i)
                used |= _used_names(tree.body[i])
                del optional[i]
                changed = True
    lines = source.splitlines(True)
    for i, stmt in enumerate(tree.body):
        if i not in kept:
            _replace(lines, stmt, "")
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            pruned = _pruned_import(stmt, used)
            if pruned is not None:
                _replace(lines, stmt, pruned)
    out = "".join(lines)
    return out if _compiles(out, filename) else source


def _replace(lines: List[str], stmt: ast.stmt, text: str) -> None:
    """Put `text` in place of a top-level statement's lines (decorators included)."""
    first = _first_line(stmt) - 1
    lines[first] = text
    for n in range(first + 1, stmt.end_lineno):
        lines[n] = ""


def _pruned_import(stmt: ast.stmt, used: Set[str]) -> Optional[str]:
    """The import statement without the names nothing kept uses ("" when none is left), or None
    when it stays as it is."""
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return None
    aliases = stmt.names
    bound = [(a.asname or a.name).split(".")[0] for a in aliases]
    if any(a.name == "*" for a in aliases):
        return None
    keep = [a for a, name in zip(aliases, bound) if name in used]
    if len(keep) == len(aliases):
        return None
    if not keep:
        return ""
    names = ", ".join(a.name + (" as " + a.asname if a.asname else "") for a in keep)
    if isinstance(stmt, ast.Import):
        return "import %s\n" % names
    return "from %s%s import %s\n" % ("." * stmt.level, stmt.module or "", names)


def _compiles(source: str, filename: str) -> bool:
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def _docstring_nodes(tree: ast.Module) -> List[Tuple[ast.Expr, bool]]:
    """(docstring statement, whether it is its body's only statement) of module, classes, defs."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.append((body[0], len(body) == 1 and not isinstance(node, ast.Module)))
    return out


def strip_text(source: str, filename: str = "<module>", docstrings: bool = True) -> str:
    """The source without comments, blank lines and (unless told not to, or the module reads
    `__doc__`) docstrings."""
    lines = source.splitlines(True)
    if docstrings and "__doc__" not in source:
        tree = ast.parse(source, filename)
        for stmt, alone in _docstring_nodes(tree):
            first, last = stmt.lineno - 1, stmt.end_lineno - 1
            if lines[first][:stmt.col_offset].strip() or lines[last][stmt.end_col_offset:].strip():
                continue   # shares its lines with other code
            indent = lines[first][:stmt.col_offset]
            lines[first] = indent + "pass\n" if alone else ""
            for n in range(first + 1, last + 1):
                lines[n] = ""
    text = "".join(lines)
    lines = text.splitlines(True)
    in_string: Set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                line = lines[row - 1]
                lines[row - 1] = line[:col].rstrip() + ("\n" if line.endswith("\n") else "")
            elif tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                in_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, IndentationError):
        return source
    out = "".join(line for n, line in enumerate(lines, 1) if line.strip() or n in in_string)
    if not _compiles(out, filename):
        return source
    return strip_annotations(out, filename)


class _DropAnnotations(ast.NodeTransformer):
    """Function signature annotations and annotated assignments inside functions removed (class
    bodies keep theirs: a NamedTuple's fields are its annotations)."""

    def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
        args = node.args
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None:
                a.annotation = None
        node.returns = None
        node.body = [self._plain(stmt) for stmt in node.body]
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    @staticmethod
    def _plain(stmt: ast.stmt) -> ast.stmt:
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is None:
                return ast.copy_location(ast.Pass(), stmt)
            return ast.copy_location(ast.Assign(targets=[stmt.target], value=stmt.value), stmt)
        return stmt


def strip_annotations(source: str, filename: str = "<module>") -> str:
    """The source with function annotations dropped and re-printed compactly (`ast.unparse`, a
    Python 3.9+ builder; on 3.8 the source is returned as is). Comments must be gone already:
    unparse drops them. The result must compile, else the source is returned."""
    if not hasattr(ast, "unparse"):
        return source
    try:
        tree = _DropAnnotations().visit(ast.parse(source, filename))
        ast.fix_missing_locations(tree)
        out = ast.unparse(tree) + "\n"
    except (SyntaxError, ValueError, RecursionError):
        return source
    return out if _compiles(out, filename) else source
