"""reduced_build.strip: kernel modules cut to the kept ops, docstrings and comments removed, the
code still doing what it did (checked by running it)."""
from __future__ import annotations

import textwrap

from onnxedge.reduced_build import strip

KERNELS = textwrap.dedent('''
    """A kernel module."""
    from __future__ import annotations

    import math
    from typing import Dict, List  # only Dict is used by kept code

    from .registry import add, register

    DOMAIN = "com.example"
    SCALE = 2.0
    UNUSED = {"x": 1}
    TABLE: Dict[str, int] = {"a": 1}
    __all__ = ["relu", "cosine"]


    def _helper(x):
        """Doubles, through a second helper."""
        return _inner(x) * SCALE


    def _inner(x):
        return x


    def _only_for_cos(x):
        return math.cos(x)


    @register("Relu", since=6)
    def relu(x):
        return max(_helper(x), 0.0)


    @register("Cos", "", since=7)
    def cosine(x):
        return _only_for_cos(x)


    @register("Fancy", domain=DOMAIN)
    def fancy(x):
        return TABLE["a"] + x


    for _op in ("Abs",):
        add(_op, abs)
    add("Neg", lambda x: -x)
''')


def _run(source):
    registered = {}

    def register(op, domain="", since=1):
        def wrap(fn):
            registered[(domain, op)] = fn
            return fn
        return wrap

    def add(op, fn, domain=""):
        registered[(domain, op)] = fn

    import sys
    import types
    mod = types.ModuleType("kernels_under_test")
    mod.__dict__.update({"register": register, "add": add})
    registry = types.ModuleType("registry")
    registry.register, registry.add = register, add
    sys.modules["kernels_under_test.registry"] = registry
    mod.__package__ = "kernels_under_test"
    sys.modules["kernels_under_test"] = mod
    exec(compile(source, "k.py", "exec"), mod.__dict__)
    return registered, mod.__dict__


def test_strip_unused_keeps_the_kept_ops_and_what_they_reach():
    out = strip.strip_unused(KERNELS, {("", "Relu"), ("com.example", "Fancy")})
    registered, ns = _run(out)
    assert set(registered) == {("", "Relu"), ("com.example", "Fancy"), ("", "Abs")}
    assert registered[("", "Relu")](3.0) == 6.0 and registered[("com.example", "Fancy")](1) == 2
    for gone in ("cosine", "_only_for_cos", "UNUSED", "__all__", "math", "List"):
        assert gone not in ns, gone
    assert "from typing import Dict\n" in out
    # a name another module imports stays, with what it needs
    out = strip.strip_unused(KERNELS, set(), imported={"_only_for_cos"})
    registered, ns = _run(out)
    assert set(registered) == {("", "Abs")} and "relu" not in ns and ns["_only_for_cos"](0.0) == 1.0
    # unchanged when nothing can go
    everything = {("", "Relu"), ("", "Cos"), ("com.example", "Fancy"), ("", "Neg")}
    registered, _ = _run(strip.strip_unused(KERNELS, everything, {"UNUSED", "__all__", "List"}))
    assert set(registered) == everything | {("", "Abs")}


def test_strip_text_removes_docstrings_and_comments_only():
    source = textwrap.dedent('''
        """Module docstring."""
        from __future__ import annotations
        # first remark

        def f(x):
            """Only a docstring and a return."""
            return "# not a comment" + x  # second remark


        def g():
            """Only a docstring."""


        class C:
            """Doc."""

            text = """keeps

            its blank line"""
    ''')
    out = strip.strip_text(source)
    assert "docstring" not in out and "Doc." not in out and "remark" not in out
    ns = {}
    exec(compile(out, "m.py", "exec"), ns)
    assert ns["f"]("!") == "# not a comment!" and ns["g"]() is None
    assert ns["C"].text == "keeps\n\n    its blank line"
    assert out.splitlines()[0] == "from __future__ import annotations"
    # a module reading its own __doc__ keeps its docstrings
    assert '"""Kept."""' in strip.strip_text('"""Kept."""\nprint(__doc__)\n')


def test_strip_annotations_keeps_namedtuple_fields_and_behaviour():
    import ast
    from onnxedge.reduced_build import strip as strip_mod
    if not hasattr(ast, "unparse"):
        return   # the builder on Python 3.8 leaves annotations in place
    src = (
        "from __future__ import annotations\n"
        "from typing import List, NamedTuple\n"
        "class P(NamedTuple):\n"
        "    a: int\n"
        "    b: str = 'x'\n"
        "def f(x: List[int], *rest: int, k: float = 2.0, **kw: str) -> int:\n"
        "    total: int = sum(x) + len(rest)\n"
        "    unused: int\n"
        "    return int(total * k)\n")
    out = strip_mod.strip_annotations(src)
    assert "List[int]" not in out and "-> int" not in out and "total = " in out
    ns: dict = {}
    exec(compile(out, "<stripped>", "exec"), ns)
    assert ns["f"]([1, 2], 3, k=3.0) == 12
    assert ns["P"](1)._fields == ("a", "b") and ns["P"](1).b == "x"
