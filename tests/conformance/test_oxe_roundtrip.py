"""Every ONNX node-suite case gives the same result after `.onnx -> .oxe` and `.oxe -> .onnx`.

The `onnxedge-oxe` engine loads each model from `.oxe` bytes, and checks that the `.onnx` made
back from them gives bitwise-equal outputs and still passes onnx.checker. Under Python 3.11 the
whole suite also runs straight from `.onnx` and every case must have the same status; under the
Python 3.8 environment (slower) the `.oxe` results are checked against the provider's
expected-failures file, which test_node_suite.py holds the plain engine to.
"""
from __future__ import annotations

import sys

import pytest

from . import expected as expected_file
from . import run
from .engines import make_engine
from .test_node_suite import CACHE_ERROR, CASES, EXPECTED_PATH, PROVIDER, TIMEOUT

pytestmark = pytest.mark.conformance


def test_oxe_round_trip_keeps_every_node_case_result():
    """Pass/fail of each case is the same through .oxe as straight from .onnx."""
    if CACHE_ERROR:
        pytest.fail(CACHE_ERROR, pytrace=False)
    through_oxe = make_engine("onnxedge-oxe", PROVIDER)
    if sys.version_info < (3, 10):
        b = run.run_suite(CASES, [through_oxe], TIMEOUT)[through_oxe.name]
        verdict = run.check(b, expected_file.read(EXPECTED_PATH), [c.name for c in CASES])
        wrong = verdict.unexpected_failures + verdict.unexpected_passes
        assert not wrong, "%d cases differ from %s through .oxe:\n%s" % (
            len(wrong), EXPECTED_PATH, "\n".join("%s: %s %s" % (r.name, r.status, r.error)
                                                 for r in wrong[:30]))
    else:
        plain = make_engine("onnxedge", PROVIDER)
        results = run.run_suite(CASES, [plain, through_oxe], TIMEOUT)
        a, b = results[plain.name], results[through_oxe.name]
        differ = ["%s: %s / %s (%s)" % (x.name, x.status, y.status, y.error)
                  for x, y in zip(a, b) if x.status != y.status]
        assert not differ, "%d cases differ through .oxe:\n%s" % (len(differ),
                                                                  "\n".join(differ[:30]))
        assert run.counts(a) == run.counts(b)
    assert run.counts(b)[run.PASSED] > 1000
