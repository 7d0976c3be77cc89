"""pytest entry: every ONNX backend node case on onnxedge, one test per case.

A case listed in expected_failures/<provider>.txt is an xfail while it fails, and a failure (with
"delete its line") once it passes. The case cache is built on first use where onnx can build it
(Python 3.11); elsewhere (Python 3.8) a missing cache fails `test_case_cache` loudly.
Environment: ONNXEDGE_CONFORMANCE_PROVIDER (default CPUExecutionProvider),
ONNXEDGE_CONFORMANCE_TIMEOUT (seconds per case, default 30), ONNXEDGE_CASE_CACHE (cache folder).
"""
from __future__ import annotations

import os

import pytest

from . import cases as node_cases
from . import expected as expected_file
from . import run
from .engines import make_engine

pytestmark = pytest.mark.conformance

PROVIDER = os.environ.get("ONNXEDGE_CONFORMANCE_PROVIDER", "CPUExecutionProvider")
TIMEOUT = float(os.environ.get("ONNXEDGE_CONFORMANCE_TIMEOUT", run.DEFAULT_TIMEOUT))
EXPECTED_PATH = expected_file.path_for(PROVIDER)


def _manifest():
    try:
        return node_cases.load_manifest(node_cases.ensure_cache()), None
    except node_cases.CacheMissing as e:
        return [], str(e)


CASES, CACHE_ERROR = _manifest()


@pytest.fixture(scope="module")
def listed():
    """{case: reason} of the provider's expected-failures file (every line)."""
    return expected_file.read(EXPECTED_PATH)


@pytest.fixture(scope="module")
def expected(listed):
    """{case: reason} of the failures expected in this interpreter."""
    return expected_file.active(listed)


@pytest.fixture(scope="module")
def engine():
    """onnxedge on the provider under test."""
    return make_engine("onnxedge", PROVIDER)


def test_case_cache():
    """The node-case cache exists (build it with `python3 tests/conformance/cases.py`)."""
    if CACHE_ERROR:
        pytest.fail(CACHE_ERROR, pytrace=False)
    assert len(CASES) > 1000


def test_expected_failures_file_names_real_cases(listed):
    """Every line of the expected-failures file names a case of the suite."""
    if CACHE_ERROR:
        pytest.skip("no case cache")
    stale = expected_file.stale(listed, [c.name for c in CASES])
    assert not stale, "not cases of the suite, delete from %s: %s" % (EXPECTED_PATH, stale)


@pytest.mark.parametrize("info", CASES, ids=[c.name for c in CASES])
def test_node_case(info, engine, expected):
    """One node case: passes, or fails as its expected-failures line says."""
    (result,) = run.run_suite([info], [engine], TIMEOUT)[engine.name]
    if result.status == run.SKIPPED:
        pytest.skip(result.error)
    listed = expected.get(info.name)
    if listed is not None:
        if result.status == run.PASSED and expected_file.is_flaky(listed):
            return
        if result.status == run.PASSED:
            pytest.fail("%s passes now: delete its line from %s" % (info.name, EXPECTED_PATH),
                        pytrace=False)
        pytest.xfail(listed)
    if result.status == run.FAILED:
        pytest.fail("%s (not in %s)" % (result.error, EXPECTED_PATH), pytrace=False)
