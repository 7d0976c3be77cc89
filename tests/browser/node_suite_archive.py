"""The ONNX node suite packed for the page (native side): a reduced build of the whole suite and
one zip archive of the cases it supports, as `.oxe` models with `.npz` data sets.

    suite = build_suite(out_dir)
    suite.wheel, suite.archive, suite.cases, suite.left_out

Each case's model is optimized at level "all" and saved as `.oxe` (what `onnxedge reduce` does
with a model), the operators of every converted case are merged into one
`required_operators.config`, and `onnxedge.reduced_build.build.reduce` makes the slim wheel from
that config. A case is left out (with its reason) when a value cannot travel as `.npz` (sequences,
maps, optionals, ml_dtypes types Pyodide lacks) or when it needs an op the build has no kernel for.

Archive layout: `manifest.json` (a list of {name, rtol, atol, inputs, outputs, sets, strings})
and `<case>/model.oxe`, `<case>/set_<i>.npz` (keys `in_<k>`, `out_<k>`). String tensors travel as
numpy unicode arrays; `strings` lists the keys to turn back into object arrays of `str`.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from onnxedge import format as oxe_format
from onnxedge import model_io, optimizer
from onnxedge.reduced_build import scan
from onnxedge.reduced_build.build import reduce
from tests.conformance import cases as node_cases

ARCHIVE = "node_suite.zip"
NUMPY_TYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "complex64", "complex128"}


class SuiteBuild(NamedTuple):
    """What `build_suite` wrote."""

    wheel: str                   # the reduced wheel of the whole suite
    archive: str                 # the zip of supported cases
    cases: List[str]             # the cases in the archive, in suite order
    left_out: Dict[str, str]     # case -> why it is not in the archive
    report: Dict[str, Any]       # reduce()'s size report
    total: int                   # cases in the suite


def _npz_value(value: Any) -> Tuple[Optional[np.ndarray], bool, str]:
    """(array for np.savez, is a string tensor, why not) of one input or expected output."""
    if not isinstance(value, np.ndarray):
        return None, False, "a %s value (only tensors travel as .npz)" % type(value).__name__
    if value.dtype == object:
        if all(isinstance(v, str) for v in value.ravel().tolist()):
            return value.astype(np.str_) if value.size else np.zeros(value.shape, "<U1"), True, ""
        return None, False, "an object tensor that is not all str"
    if value.dtype.name not in NUMPY_TYPES:   # ml_dtypes' float8 has kind "f" too
        return None, False, "dtype %s (no such numpy type in Pyodide)" % value.dtype
    return value, False, ""


def _pack_case(case: node_cases.Case) -> Tuple[Optional[Dict[str, Any]], Dict[str, bytes], str]:
    """(manifest entry, archive members, why left out) of one loaded case."""
    entry = {"name": case.info.name, "rtol": case.info.rtol, "atol": case.info.atol,
             "inputs": case.input_names, "outputs": case.output_names,
             "sets": len(case.data_sets), "strings": []}
    members: Dict[str, bytes] = {}
    for i, (feeds, expected) in enumerate(case.data_sets):
        arrays: Dict[str, np.ndarray] = {}
        for kind, values in (("in", feeds), ("out", expected)):
            for k, value in enumerate(values):
                array, is_str, why = _npz_value(value)
                if array is None:
                    return None, {}, "%s %d of data set %d is %s" % (kind, k, i, why)
                key = "%s_%d" % (kind, k)
                arrays[key] = array
                if is_str and key not in entry["strings"]:
                    entry["strings"].append(key)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        members["%s/set_%d.npz" % (case.info.name, i)] = buf.getvalue()
    return entry, members, ""


def build_suite(out_dir: str, progress: Any = None,
                skip_ops: Optional[Dict[str, str]] = None) -> SuiteBuild:
    """Convert every case, reduce for all of them, and write the archive of supported cases.

    `skip_ops` {op type: reason}: cases using one of these ops are left out with that reason
    (ops the page cannot run at all, e.g. ones that abort the interpreter)."""
    infos = node_cases.load_manifest(node_cases.ensure_cache())
    os.makedirs(out_dir, exist_ok=True)
    left_out: Dict[str, str] = {}
    packed: List[Tuple[Dict[str, Any], Dict[str, bytes], scan.Requirements]] = []
    for info in infos:
        case = node_cases.load_case(info)
        try:
            model = optimizer.optimize(model_io.load(case.model), "all")
        except Exception as e:   # the page could not open it either; native runs report it
            left_out[info.name] = "does not convert to .oxe: %s" % str(e).splitlines()[0]
            continue
        entry, members, why = _pack_case(case)
        if entry is None:
            left_out[info.name] = why
            continue
        members["%s/model.oxe" % info.name] = oxe_format.to_bytes(model)
        packed.append((entry, members, scan.required_operators(model, None)))
    config = os.path.join(out_dir, "node_suite.config")
    scan.write_config(scan.merge(*[p[2] for p in packed]), config,
                      "operators of the ONNX node suite cases that travel to the page")
    result = reduce([], os.path.join(out_dir, "build"), config=config, progress=progress)
    missing = set(result.report["ops_missing"])
    manifest, archive = [], os.path.join(out_dir, ARCHIVE)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for entry, members, reqs in packed:
            ops = {("%s.%s" % (d, op) if d != scan.DEFAULT_DOMAIN else op)
                   for (d, _), names in reqs.items() for op in names}
            lacking = sorted(ops & missing)
            if lacking:
                left_out[entry["name"]] = "no kernel in the build for %s" % ", ".join(lacking)
                continue
            skipped = sorted(ops & set(skip_ops or {}))
            if skipped:
                left_out[entry["name"]] = "%s: %s" % (skipped[0], skip_ops[skipped[0]])
                continue
            manifest.append(entry)
            for name, data in members.items():
                zf.writestr(name, data)
        zf.writestr("manifest.json", json.dumps(manifest))
    return SuiteBuild(result.wheel, archive, [e["name"] for e in manifest], left_out,
                      result.report, len(infos))
