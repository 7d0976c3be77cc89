"""The kernel registry: opset resolution, lazy imports and a generated op_modules.py that is current."""
from __future__ import annotations

import sys

import pytest

import onnxedge
from onnxedge.kernels import registry


def test_op_modules_is_up_to_date():
    from onnxedge.kernels import op_modules
    with open(op_modules.__file__) as f:
        on_disk = f.read()
    assert on_disk == registry.build_op_modules_source(), \
        "core/kernels/op_modules.py is stale: run `make op-modules`"


def test_resolution_picks_the_newest_version_not_above_the_opset():
    def v1(x):
        return "v1"

    def v7(x):
        return "v7"
    registry.add("TestVersioned", v1, domain="test.reg", since=1, until=6)
    registry.add("TestVersioned", v7, domain="test.reg", since=7)
    assert registry.resolve("test.reg", "TestVersioned", 3).fn is v1
    assert registry.resolve("test.reg", "TestVersioned", 7).fn is v7
    assert registry.resolve("test.reg", "TestVersioned", 30).fn is v7
    with pytest.raises(onnxedge.NotImplemented, match=r"TestVersioned \(domain test.reg, opset 0\)"):
        registry.resolve("test.reg", "TestVersioned", 0)


def test_kernel_modules_are_imported_lazily():
    import subprocess
    code = ("import sys, onnxedge;"
            "from onnxedge.kernels import registry;"
            "assert not [m for m in sys.modules if m.startswith('onnxedge.kernels.') and m not in "
            "('onnxedge.kernels.registry', 'onnxedge.kernels.op_modules', 'onnxedge.kernels._util')],"
            " sorted(sys.modules);"
            "registry.resolve('', 'Relu', 17);"
            "print(sorted(m for m in sys.modules if m.startswith('onnxedge.kernels.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout.strip())
    assert "onnxedge.kernels.conv" not in loaded and len(loaded) <= 5


def test_restrict_limits_what_resolves():
    try:
        registry.restrict({("", "Relu")})
        assert registry.find("", "Relu", 17) is not None
        assert registry.find("", "Add", 17) is None
        assert registry.registered_ops() == [("", "Relu")]
    finally:
        registry.restrict(None)
    assert registry.find("", "Add", 17) is not None


def test_signature_reads_ctx_and_attributes():
    def k(ctx, x, y=None, alpha=1.0, beta=2):
        return x
    sig = registry.signature(k)
    assert sig.wants_ctx and sig.accepts == frozenset({"y", "alpha", "beta"})

    def kw(x, **attrs):
        return x
    assert registry.signature(kw).accepts is None
