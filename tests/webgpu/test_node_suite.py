"""The ONNX node-suite cases of every op the WebGPU provider claims: >= 95% pass on WebGPU, and
the failures are exactly the ones listed (with reasons) in the expected-failures file."""
from __future__ import annotations

import pytest

from . import node_suite

pytestmark = pytest.mark.conformance


def _listing(failures):
    """One line per failing case: its name and the first 400 characters of its error."""
    return "\n".join("  %s: %s" % (k, " ".join(str(v).split())[:400])
                     for k, v in sorted(failures.items()))


def test_claimed_ops_node_suite(webgpu):
    from tests.conformance import expected
    failed, passed, _ = node_suite.run_all()
    listed = expected.read(node_suite.expected_path())
    total = len(failed) + len(passed)
    assert total > 300, "only %d claimed cases ran" % total
    assert len(passed) >= 0.95 * total, "%d of %d passed; failing:\n%s" % (
        len(passed), total, _listing(failed))
    unexpected = {k: v for k, v in failed.items() if k not in listed}
    assert not unexpected, "%d new failure(s) (fix, or list with a reason):\n%s" % (
        len(unexpected), _listing(unexpected))
    now_pass = sorted(k for k in listed if k in passed)
    assert not now_pass, "these pass now; delete their lines: %s" % now_pass
