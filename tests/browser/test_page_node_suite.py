"""The ONNX node suite inside the page: the reduced build of the whole suite (Pyodide 0.17.1,
Python 3.8, numpy 1.17.5), every case that build supports, compared like tests/conformance does.

The page's results must equal what the native Python 3.8 + numpy 1.17.5 run gives on the same
cases: that run's failures are the CPU expected-failures file's lines whose conditions hold for
Python 3.8 / numpy 1.17 (test38 holds the native run to that file). Cases that fail only in the
page are listed with their reason in tests/conformance/expected_failures/page.txt (the providers'
format, next to their files).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
import zipfile
from typing import Any, Dict
from unittest import mock

import pytest

from conftest import LIFETIME, PAGE_DIR, PYODIDE_DIR, ROOT, SUMMARY, TIMINGS, VENDOR_WHEELS
from server import PageServer, local_only_context

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from tests.conformance import expected as expected_file  # noqa: E402

import node_suite_archive  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE_EXPECTED = os.path.join(expected_file.FOLDER, "page.txt")
CPU_EXPECTED = expected_file.path_for("CPUExecutionProvider")
PYODIDE_VERSIONS = {"python": (3, 8, 2), "numpy": (1, 17, 5)}
BATCH = 50
BATCH_TIMEOUT_S = 120
# ops whose cases are not sent: they would abort the page's interpreter, so no later case could
# run (none today: DFT and STFT avoid numpy.fft in the page, which aborts Pyodide 0.17.1)
PAGE_FATAL_OPS: Dict[str, str] = {}


def native_38_failures() -> Dict[str, str]:
    """{case: reason} the native Python 3.8 + numpy 1.17.5 run fails ([flaky] lines left out)."""
    listed = expected_file.read(CPU_EXPECTED)
    with mock.patch.object(expected_file, "_here", lambda what: PYODIDE_VERSIONS[what]):
        return {name: reason for name, reason in listed.items()
                if expected_file.applies(reason) and not expected_file.is_flaky(reason)}


def flaky_cases() -> set:
    """Cases whose result is left to chance (random ops)."""
    return {n for n, r in expected_file.read(CPU_EXPECTED).items() if expected_file.is_flaky(r)}


def _wheels_for(wheel: str) -> list:
    """The reduced wheel, plus the vendored flatbuffers wheel when its metadata requires it."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = zf.read(meta).decode()
    out = [wheel]
    if "Requires-Dist: flatbuffers" in requires:
        out += [os.path.join(VENDOR_WHEELS, n) for n in os.listdir(VENDOR_WHEELS)
                if n.startswith("flatbuffers-") and n.endswith(".whl")]
    return out


@pytest.fixture(scope="module")
def suite_page(browser: Any, tmp_path_factory):
    """(run, suite build, blocked URLs): a fresh page with the node suite's reduced wheel
    installed and the archive loaded; run(code) runs Python there (a batch must answer within
    BATCH_TIMEOUT_S: a crashed interpreter never answers)."""
    out = str(tmp_path_factory.mktemp("node-suite"))
    t = time.perf_counter()
    suite = node_suite_archive.build_suite(out, skip_ops=PAGE_FATAL_OPS)
    TIMINGS["node suite: convert + reduce + archive (native, s)"] = time.perf_counter() - t
    wheel_dir = os.path.join(out, "wheels")
    os.makedirs(wheel_dir)
    names = []
    for path in _wheels_for(suite.wheel):
        shutil.copy(path, wheel_dir)
        names.append("/wheels/" + os.path.basename(path))
    for src in (os.path.join(ROOT, "tests", "conformance", "compare.py"),
                os.path.join(HERE, "page_node_runner.py")):
        shutil.copy(src, out)
    server = PageServer({"/pyodide/": PYODIDE_DIR, "/page/": PAGE_DIR, "/wheels/": wheel_dir,
                         "/suite/": out}).start()
    blocked: list = []
    context = local_only_context(browser, server.origin, blocked)
    LIFETIME.contexts.append(context)
    page = context.new_page()
    page.goto(server.origin + "/page/harness.html")
    page.evaluate("opts => harness.start(opts)", {"wheels": names})

    def run(code: str) -> Any:
        return page.evaluate(
            "([code, ms]) => Promise.race([harness.run(code), new Promise((_, reject) => "
            "setTimeout(() => reject(new Error('no answer from Python in ' + ms + ' ms')), ms))])",
            [code, BATCH_TIMEOUT_S * 1000])

    run("exec((await fetch_bytes('/suite/page_node_runner.py')).decode())\n"
        "install_compare((await fetch_bytes('/suite/compare.py')).decode())\n"
        "None")
    count = run("await load_suite('/suite/%s')" % node_suite_archive.ARCHIVE)
    assert count == len(suite.cases)
    yield run, suite, blocked
    server.stop()


def test_node_suite_in_page_matches_native_python38(suite_page, capsys):
    run, suite, blocked = suite_page
    results: Dict[str, list] = {}
    t = time.perf_counter()
    for start in range(0, len(suite.cases), BATCH):
        batch = suite.cases[start:start + BATCH]
        try:
            results.update(json.loads(run("run_cases(%r)" % (batch,))))
        except Exception as e:
            pytest.fail("the page stopped answering in the batch %s: %s"
                        % (batch, str(e).splitlines()[0]), pytrace=False)
        with capsys.disabled():
            sys.stdout.write("\r  node suite in the page: %d/%d cases, %.0f s"
                             % (len(results), len(suite.cases), time.perf_counter() - t))
            sys.stdout.flush()
    with capsys.disabled():
        sys.stdout.write("\n")
    page_s = time.perf_counter() - t
    assert not blocked, "the page tried to reach outside localhost: %s" % blocked
    flaky = flaky_cases()
    native = native_38_failures()
    page_only = expected_file.read(PAGE_EXPECTED)
    failed = {n: r[1] for n, r in results.items() if r[0] != "passed" and n not in flaky}
    counted = [n for n in results if n not in flaky]
    passed = sum(1 for n in counted if results[n][0] == "passed")
    native_passed = sum(1 for n in counted if n not in native)
    want_fail = {n for n in counted if n in native or n in page_only}
    TIMINGS["node suite in the page: run (s)"] = page_s
    SUMMARY.append("node suite in the page (reduced build of the whole suite, Pyodide 0.17.1): "
                   "%d of %d cases pass; native Python 3.8 + numpy 1.17.5 on the same cases: %d "
                   "(%d random-output cases not counted; %d page-only failures listed in %s)"
                   % (passed, len(counted), native_passed, len(results) - len(counted),
                      len(page_only), os.path.basename(PAGE_EXPECTED)))
    SUMMARY.append("  %d cases in the suite; not sent to the page: %s"
                   % (suite.total, _reasons(suite.left_out)))
    unexpected = sorted(set(failed) - want_fail)
    now_passing = sorted(want_fail - set(failed))
    assert not unexpected, "%d cases fail in the page but not natively (Python 3.8):\n%s" % (
        len(unexpected), "\n".join("%s: %s" % (n, failed[n]) for n in unexpected[:40]))
    assert not now_passing, ("%d cases pass in the page that the native Python 3.8 run fails or "
                             "%s lists: %s" % (len(now_passing), PAGE_EXPECTED, now_passing))
    assert passed > 1500


def _reasons(left_out: Dict[str, str]) -> str:
    """The kinds of reasons cases were not sent, with counts."""
    kinds: Dict[str, int] = {}
    for reason in left_out.values():
        if "no kernel" in reason:
            key = "need an op with no kernel"
        elif " dtype " in reason:
            key = "use types numpy lacks (bfloat16, float8, int4, ...)"
        elif reason.split(":")[0] in PAGE_FATAL_OPS:
            key = "would abort the page's interpreter"
        elif "does not convert" in reason:
            key = "do not convert to .oxe"
        else:
            key = "have sequence, map or optional values"
        kinds[key] = kinds.get(key, 0) + 1
    return "; ".join("%d %s" % (n, k) for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
