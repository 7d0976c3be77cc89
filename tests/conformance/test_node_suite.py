"""pytest entry: the ONNX backend node suite on every execution provider, one test per case.

Ids are `<provider>/<case>` (select one provider with `-k X64ExecutionProvider/`). CPU runs
every case; another provider runs the cases of the ops its table lists, in a session with
[provider, CPU], and a case it does not claim is skipped (see providers.py). A case listed in
expected_failures/<provider>.txt is an xfail while it fails, and a failure ("delete its line")
once it passes or is no longer claimed. Each provider's claimed cases must not fall below its
floor in MIN_CLAIMED (checked when all its cases ran). A provider that cannot run here (no
adapter, no kernel library, a package this machine lacks) is skipped with its reason; a broken
onnxedge import fails. The case cache is built on first use where onnx can build it (Python
3.11); elsewhere (Python 3.8) a missing cache fails `test_case_cache` loudly.
Environment: ONNXEDGE_CONFORMANCE_TIMEOUT (seconds per case, default 30), ONNXEDGE_CASE_CACHE.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import pytest

from . import cases as node_cases
from . import expected as expected_file
from . import providers as eps
from . import run

pytestmark = pytest.mark.conformance

PROVIDER = eps.CPU        # the provider of CASES, EXPECTED_PATH (test_oxe_roundtrip runs them)
TIMEOUT = float(os.environ.get("ONNXEDGE_CONFORMANCE_TIMEOUT", run.DEFAULT_TIMEOUT))
EXPECTED_PATH = expected_file.path_for(PROVIDER)
# The fewest cases each provider must claim (a provider that stops claiming would otherwise only
# turn its cases into skips): about 90% of what each claimed with onnx 1.23.2's cases, late 2026
# (CPU 1884, WebGPU 458, NEON 55, Wasm SIMD 41, Core ML 180, NNAPI 123; docs/CONFORMANCE.md).
MIN_CLAIMED = {eps.CPU: 1800, eps.WEBGPU: 420, eps.NEON: 50, eps.WASM: 38, eps.COREML: 165,
               eps.NNAPI: 110}


def _manifest():
    try:
        return node_cases.load_manifest(node_cases.ensure_cache()), None
    except node_cases.CacheMissing as e:
        return [], str(e)


CASES, CACHE_ERROR = _manifest()


def _items() -> Tuple[List[Any], List[str], Dict[str, Any]]:
    """([(provider, case info or None)], ids, {provider: its case names, or the import error})."""
    items: List[Any] = []
    ids: List[str] = []
    ran: Dict[str, Any] = {}
    for p in eps.PROVIDERS:
        try:
            chosen = eps.candidates(p, CASES)
        except ImportError as e:   # the provider's module needs a package this machine lacks
            if not eps.lacks_outside_package(e):
                raise
            ran[p] = "%s: %s" % (type(e).__name__, e)
            items.append((p, None))
            ids.append("%s/unavailable" % p)
            continue
        ran[p] = [c.name for c in chosen]
        items += [(p, c) for c in chosen]
        ids += ["%s/%s" % (p, c.name) for c in chosen]
    return items, ids, ran


ITEMS, IDS, CANDIDATES = _items()
RESULTS: Dict[str, Dict[str, run.Result]] = {p: {} for p in eps.PROVIDERS}


@pytest.fixture(scope="module")
def target_of():
    """target_of(provider): the set-up provider, or a skip saying why it cannot run here."""
    made: Dict[str, eps.Target] = {}
    why: Dict[str, Any] = {}

    def get(provider: str) -> eps.Target:
        if provider not in made:
            made[provider] = eps.Target(provider)
            why[provider] = made[provider].unavailable()
        if why[provider]:
            pytest.skip("%s cannot run here: %s" % (provider, why[provider]))
        return made[provider]
    yield get
    for target in made.values():
        target.close()


@pytest.fixture(scope="module")
def listed_of():
    """listed_of(provider): {case: reason} of every line of the provider's file."""
    cache: Dict[str, Dict[str, str]] = {}

    def get(provider: str) -> Dict[str, str]:
        if provider not in cache:
            cache[provider] = expected_file.read(expected_file.path_for(provider))
        return cache[provider]
    return get


def test_case_cache():
    """The node-case cache exists (build it with `python3 tests/conformance/cases.py`)."""
    if CACHE_ERROR:
        pytest.fail(CACHE_ERROR, pytrace=False)
    assert len(CASES) > 1000


@pytest.mark.parametrize("provider", eps.PROVIDERS)
def test_expected_failures_file_names_cases_it_runs(provider, listed_of):
    """Every line of the provider's expected-failures file names a case that provider runs."""
    if CACHE_ERROR:
        pytest.skip("no case cache")
    names = CANDIDATES[provider]
    if isinstance(names, str):
        pytest.skip("%s does not import here: %s" % (provider, names))
    stale = expected_file.stale(listed_of(provider), names)
    assert not stale, "not cases %s runs, delete from %s: %s" % (
        provider, expected_file.path_for(provider), stale)


def test_expected_failures_folder_holds_only_known_files():
    """expected_failures/ holds one file per provider (and the page's): no stale names."""
    known = {"%s.txt" % p for p in eps.PROVIDERS} | {"page.txt"}
    stray = sorted(set(os.listdir(expected_file.FOLDER)) - known)
    assert not stray, "files of no provider in %s: %s" % (expected_file.FOLDER, stray)


@pytest.mark.parametrize("provider,info", ITEMS, ids=IDS)
def test_node_case(provider, info, target_of, listed_of):
    """One case on one provider: passes, or fails as its expected-failures line says."""
    if info is None:
        pytest.skip("%s does not import here: %s" % (provider, CANDIDATES[provider]))
    target = target_of(provider)
    result = run.run_case(info, target, TIMEOUT)
    RESULTS[provider][info.name] = result
    path = expected_file.path_for(provider)
    listed = expected_file.active(listed_of(provider)).get(info.name)
    if not result.claimed:
        if listed is not None:
            pytest.fail("%s is no longer claimed by %s (%s): delete its line from %s"
                        % (info.name, provider, result.error, path), pytrace=False)
        pytest.skip(result.error)
    if result.status == run.SKIPPED:
        pytest.skip(result.error)
    if listed is not None:
        if result.status == run.PASSED and expected_file.is_flaky(listed):
            return
        if result.status == run.PASSED:
            pytest.fail("%s passes on %s now: delete its line from %s" % (info.name, provider, path),
                        pytrace=False)
        pytest.xfail(listed)
    if result.status == run.FAILED:
        pytest.fail("%s (not in %s)" % (result.error, path), pytrace=False)


@pytest.mark.parametrize("provider", eps.PROVIDERS)
def test_provider_claims_its_cases(provider):
    """The provider claimed at least MIN_CLAIMED of its cases (checked after all of them ran)."""
    names = CANDIDATES[provider]
    got = RESULTS[provider]
    if isinstance(names, str) or not names or len(got) < len(names):
        pytest.skip("not every case of %s ran in this session" % provider)
    claimed = sum(1 for r in got.values() if r.claimed)
    assert claimed >= MIN_CLAIMED[provider], (
        "%s claimed %d of its %d cases (at least %d expected)"
        % (provider, claimed, len(names), MIN_CLAIMED[provider]))
