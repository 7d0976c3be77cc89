"""Runs inside the page (Pyodide 0.17.1, Python 3.8): the node-suite archive's cases.

Needs the harness helpers (`fetch_bytes`) and a module `conformance_compare` (the source of
tests/conformance/compare.py, installed by `install_compare`). `load_suite(url)` fetches the
archive once; `run_cases(names)` runs a batch and returns JSON {case: [status, error, ms]}.
"""
from __future__ import annotations

import io
import json
import sys
import time
import types
import zipfile

import numpy as np

SUITE = {}


def install_compare(source):
    """Make `source` (compare.py's text) importable as `conformance_compare`."""
    mod = types.ModuleType("conformance_compare")
    exec(compile(source, "conformance/compare.py", "exec"), mod.__dict__)
    sys.modules["conformance_compare"] = mod
    return mod


async def load_suite(url):
    """Fetch the archive; returns how many cases its manifest lists."""
    zf = zipfile.ZipFile(io.BytesIO(await fetch_bytes(url)))  # noqa: F821 (harness helper)
    SUITE["zip"] = zf
    SUITE["cases"] = {c["name"]: c for c in json.loads(zf.read("manifest.json"))}
    return len(SUITE["cases"])


def _data_set(case, i):
    with np.load(io.BytesIO(SUITE["zip"].read("%s/set_%d.npz" % (case["name"], i)))) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for key in case["strings"]:
        arrays[key] = arrays[key].astype(object)
    feeds = {name: arrays["in_%d" % k] for k, name in enumerate(case["inputs"])
             if "in_%d" % k in arrays}
    expected = [arrays["out_%d" % k] for k in range(len(case["outputs"]))]
    return feeds, expected


def run_case(name):
    """[status ("passed" / "failed"), first line of the error, ms] of one case."""
    import onnxedge
    compare = sys.modules["conformance_compare"]
    case = SUITE["cases"][name]
    t = time.perf_counter()
    try:
        sess = onnxedge.InferenceSession(SUITE["zip"].read(name + "/model.oxe"))
        for i in range(case["sets"]):
            feeds, expected = _data_set(case, i)
            with np.errstate(all="ignore"):
                got = sess.run(None, feeds)
            compare.compare_outputs(got, expected, case["rtol"], case["atol"], case["outputs"])
        status, error = "passed", ""
    except Exception as e:   # a failing case is a result, not a page error
        status = "failed"
        error = "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0])
    return [status, error, (time.perf_counter() - t) * 1000.0]


def run_cases(names):
    """JSON {case: [status, error, ms]} for a batch of cases."""
    return json.dumps({name: run_case(name) for name in names})
