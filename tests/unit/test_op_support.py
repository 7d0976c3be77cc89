"""One op-support record for every provider (onnxedge.providers.support), and the generated
docs/OPERATORS.md matrix that is read from the providers' tables."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxedge import ir
from onnxedge.providers import support
from onnxedge.providers.support import MAX_OPSET, Facts, NoFacts, OpSupport, SupportTable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _node(op: str, domain: str = "", inputs=("x",), **attrs) -> ir.Node:
    return ir.Node(op, list(inputs), ["y"], dict(attrs), domain=domain)


def test_lookup_respects_domain_and_opset_range():
    table = SupportTable("TestProvider")
    old = table.add(OpSupport("", "Resize", 10, 10, check=lambda n, f: "old"))
    new = table.add(OpSupport("ai.onnx", "Resize", 11, check=None))
    assert table.lookup(_node("Resize"), 10) is old
    assert table.lookup(_node("Resize"), 13) is new and new.domain == ""   # ai.onnx is ""
    assert table.lookup(_node("Resize"), 9) is None
    assert table.lookup(_node("Resize", "com.other"), 13) is None
    assert table.reason(_node("Resize"), 10, NoFacts()) == "old"
    assert table.reason(_node("Resize"), 13, NoFacts()) is None
    why = table.reason(_node("Resize"), 9, NoFacts())
    assert "opset 9" in why and "10, 11+" in why
    why = table.reason(_node("Resize", "com.other"), 13, NoFacts())
    assert "Resize" in why and "com.other" in why
    assert table.reason(_node("Resize", "com.other"), 13, NoFacts(),
                        lambda n: "custom %s" % n.op_type) == "custom Resize"
    assert ("ai.onnx", "Resize") in table and ("com.other", "Resize") not in table
    assert len(table) == 2 and table.ops() == ["Resize"]


def test_register_decorator_and_conditions():
    table = SupportTable("TestProvider")

    @table.register(["A", "B"], domain="d", check=lambda n, f: None)
    def build():
        return 1

    assert table.find("d", "A").build is build and table.find("d", "B").has_conditions
    table.add(OpSupport("", "Shape"))
    assert not table.find("", "Shape").has_conditions
    assert table.find("", "Shape").until == MAX_OPSET
    assert support.opset_range(1, MAX_OPSET) == "1+" and support.opset_range(6, 12) == "6-12"
    assert support.opset_range(7, 7) == "7"


def test_facts_reads_declared_types_and_constants():
    g = ir.Graph("g", [], [ir.ValueInfo("x", ir.TypeInfo.tensor(TensorProto.FLOAT, [1, "n", 3])),
                           ir.ValueInfo("w", ir.TypeInfo.tensor(TensorProto.FLOAT, [3]))],
                 [ir.ValueInfo("y", ir.TypeInfo.tensor(TensorProto.INT64, None))],
                 {"w": np.ones(3, np.float32), "k": np.zeros((2, 2), np.int8)}, {})
    f = Facts(g, {"": 17})
    assert f.elem_type("x") == TensorProto.FLOAT and f.dtype("x") == np.float32
    assert f.shape("x") == [1, "n", 3] and f.rank("x") == 3
    assert f.rank("y") is None and f.dtype("y") == np.int64
    assert f.const("w") is None          # a graph input of the same name can override it
    assert f.const("k").dtype == np.int8 and f.rank("k") == 2
    assert f.elem_type("nothing") == 0 and f.dtype("nothing") is None
    assert f.opset_of(_node("Conv")) == 17 and f.opset_of(_node("X", "com.x")) == 0
    assert NoFacts().rank("x") is None and NoFacts().const("k") is None


def _tables():
    tables = support.load_tables()
    missing = [name for _, name, t in tables if t is None]
    if missing:
        pytest.skip("provider packages not installed: %s" % missing)
    return tables


def test_every_provider_has_a_table_of_records():
    for short, name, table in _tables():
        assert table.provider == name
        assert len(table) > 0
        for rec in table.records():
            assert isinstance(rec, OpSupport) and rec.since <= rec.until
            assert rec.domain != "ai.onnx"
            assert rec.check is None or callable(rec.check)


def test_cpu_table_is_the_kernel_registry():
    from onnxedge.kernels import registry
    from onnxedge.providers.cpu import support_table
    table = support_table()
    package = registry.KERNEL_PACKAGE + "."   # custom ops other tests registered are not listed
    assert table.keys() == {k for k in registry.registered_ops()
                            if any(s.module.startswith(package) for s in registry.specs_of(*k))}
    for domain, op in table.keys():
        for opset in (1, 7, 13, 17, 21):
            rec, spec = table.find(domain, op, opset), registry.find(domain, op, opset)
            assert (rec is None) == (spec is None), (domain, op, opset)
            if rec is not None:
                assert (rec.since, rec.until, rec.build) == (spec.since, spec.until, spec.fn)


def test_tables_respect_domain():
    """A provider claims an op only in the domain its record names (wasm used to look its
    checks up by op type alone)."""
    for _, name, table in _tables():
        for domain, op in table.keys():
            other = _node(op, "com.not.a.domain", inputs=["x", "w", "b"])
            assert table.lookup(other) is None
            why = table.reason(other, None, NoFacts())
            assert why and op in why, (name, op, why)


def test_operators_md_is_up_to_date():
    tables = _tables()
    path = os.path.join(ROOT, "docs", "OPERATORS.md")
    with open(path) as f:
        text = f.read()
    assert text == support.operators_markdown(tables), (
        "docs/OPERATORS.md is stale: run python -m onnxedge.providers.support --write-docs")


def test_operators_md_lists_ranges_and_conditions():
    text = support.operators_markdown(_tables())
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in text.splitlines() if line.startswith("| ") and "---" not in line}
    header = rows.pop("Op")
    conv = dict(zip(header, rows["Conv"]))
    assert conv["CPU"] == "1+" and conv["C engine"] == "1+ *" and conv["WebGPU"] == "1+ *"
    assert dict(zip(header, rows["Shape"]))["WebGPU"] == "1+"     # no check: no footnote
    assert dict(zip(header, rows["Acos"]))["C engine"] == ""


def test_wasm_claims_other_domain_and_facts():
    from onnxedge.web.wasm import claims
    node = helper.make_node("Gemm", ["x", "w"], ["y"], domain="com.microsoft")
    n = ir.Node(node.op_type, list(node.input), list(node.output), {}, domain=node.domain)
    assert "no wasm SIMD kernel" in claims.reason(n)
    n2 = ir.Node("Gemm", ["x", "w"], ["y"], {}, domain="")
    assert "not a constant initializer" in claims.reason(n2)
