"""The ONNX backend node cases, cached on disk in onnx's backend test-data layout.

`python3 tests/conformance/cases.py` rebuilds the cases from the installed onnx
(`onnx.backend.test.case.node.collect_testcases()`) into
`~/.cache/onnxedge/node-cases/onnx-<version>/` (`$ONNXEDGE_CASE_CACHE/onnx-<version>/` when
that variable is set), outside the repository:

    manifest.json                    name, op type, domain, opset, rtol, atol of every case
    COMPLETE                         stamp written last: a complete cache is reused as is
    <case>/model.onnx
    <case>/test_data_set_N/input_K.pb, output_K.pb
        TensorProto, or SequenceProto / OptionalProto / MapProto for non-tensor values

Generating needs an onnx recent enough to build the cases (the 3.11 environment); an older onnx
(the Python 3.8 environment) only reads a cache made there.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from typing import Any, List, NamedTuple, Optional, Tuple

GENERATOR_ONNX = "1.23.2"   # the onnx whose cases the expected-failure files describe
STAMP = "COMPLETE"
MANIFEST = "manifest.json"
GENERATE_COMMAND = "python3 tests/conformance/cases.py"


class CacheMissing(RuntimeError):
    """No complete case cache exists and this interpreter cannot make one."""


class CaseInfo(NamedTuple):
    """One cached case, as the manifest lists it."""

    name: str
    op_type: str      # the op under test (for *_expanded cases, the op whose function was expanded)
    domain: str
    opset: int
    rtol: float
    atol: float
    path: str         # the case's folder


class Case(NamedTuple):
    """A loaded case: model bytes, graph input/output names, and its data sets."""

    info: CaseInfo
    model: bytes
    input_names: List[str]
    output_names: List[str]
    data_sets: List[Tuple[List[Any], List[Any]]]


def cache_root(onnx_version: Optional[str] = None) -> str:
    """The cache folder for the cases of one onnx version (default: the generator's version)."""
    base = os.environ.get("ONNXEDGE_CASE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "onnxedge", "node-cases")
    return os.path.join(base, "onnx-%s" % (onnx_version or GENERATOR_ONNX))


def is_complete(root: str) -> bool:
    """True when `root` holds a finished cache."""
    return os.path.isfile(os.path.join(root, STAMP)) and os.path.isfile(os.path.join(root, MANIFEST))


def can_generate() -> bool:
    """True when the installed onnx is the one the cases are built from."""
    try:
        import onnx
    except ImportError:
        return False
    return onnx.__version__ == GENERATOR_ONNX


def ensure_cache(generate: bool = True, verbose: bool = True) -> str:
    """The folder of a complete cache, generating it here when missing and possible."""
    root = cache_root()
    if is_complete(root):
        return root
    if generate and can_generate():
        return generate_cache(root, verbose=verbose)
    try:
        import onnx
        have = "onnx %s" % onnx.__version__
    except ImportError:
        have = "no onnx"
    raise CacheMissing(
        "no ONNX node-case cache at %s and this interpreter (Python %d.%d, %s) cannot build one "
        "(it needs onnx %s). Build it first with: %s"
        % (root, sys.version_info[0], sys.version_info[1], have, GENERATOR_ONNX, GENERATE_COMMAND))


# ------------------------------------------------------------------------------- generation

def _collect() -> list:
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the generators divide by zero on purpose
        import numpy as np
        with np.errstate(all="ignore"):
            return list(collect_testcases())


def _value_proto(value: Any, type_proto: Any, name: str) -> Any:
    """The proto onnx's own `generate-data` writes for `value` of this graph input/output type."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    if type_proto.HasField("map_type"):
        return numpy_helper.from_dict(value, name)
    if type_proto.HasField("sequence_type"):
        return numpy_helper.from_list(value, name)
    if type_proto.HasField("optional_type"):
        return numpy_helper.from_optional(value, name)
    if isinstance(value, TensorProto):
        return value
    return numpy_helper.from_array(np.asarray(value), name)


def _op_of(case: Any, by_name: dict) -> Tuple[str, str]:
    base = case.name.split("_expanded")[0]
    model = by_name.get(base, case).model
    node = model.graph.node[0]
    return node.op_type, node.domain


def _opset(model: Any, domain: str) -> int:
    for imp in model.opset_import:
        if imp.domain in (domain, "ai.onnx" if domain == "" else domain):
            return int(imp.version)
    return 0


def _write_case(case: Any, folder: str) -> None:
    os.makedirs(folder)
    graph = case.model.graph
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(folder, "test_data_set_%d" % i)
        os.makedirs(ds)
        for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                proto = _value_proto(value, infos[j].type, infos[j].name)
                with open(os.path.join(ds, "%s_%d.pb" % (kind, j)), "wb") as f:
                    f.write(proto.SerializeToString())


def generate_cache(root: Optional[str] = None, verbose: bool = True) -> str:
    """Build the cache from the installed onnx into `root` (replacing an incomplete one)."""
    root = root or cache_root()
    if not can_generate():
        raise CacheMissing("generating the node cases needs onnx %s" % GENERATOR_ONNX)
    out = sys.stderr
    if verbose:
        out.write("collecting ONNX node cases (onnx %s) ...\n" % GENERATOR_ONNX)
    cases = _collect()
    by_name = {c.name: c for c in cases}
    tmp = "%s.tmp-%d" % (root, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    manifest = []
    for n, case in enumerate(cases, 1):
        _write_case(case, os.path.join(tmp, case.name))
        op, domain = _op_of(case, by_name)
        manifest.append({"name": case.name, "op_type": op, "domain": domain,
                         "opset": _opset(case.model, domain), "rtol": case.rtol, "atol": case.atol})
        if verbose and (n % 100 == 0 or n == len(cases)):
            out.write("\r  writing cases %d/%d" % (n, len(cases)))
            out.flush()
    if verbose:
        out.write("\n")
    with open(os.path.join(tmp, MANIFEST), "w") as f:
        json.dump({"onnx": GENERATOR_ONNX, "cases": manifest}, f, indent=0)
    with open(os.path.join(tmp, STAMP), "w") as f:
        f.write("onnx %s, %d cases\n" % (GENERATOR_ONNX, len(manifest)))
    if os.path.isdir(root):
        if is_complete(root):       # another process finished first: keep its copy
            shutil.rmtree(tmp, ignore_errors=True)
            return root
        shutil.rmtree(root)
    os.rename(tmp, root)
    if verbose:
        out.write("node cases cached in %s\n" % root)
    return root


# ---------------------------------------------------------------------------------- reading

def load_manifest(root: Optional[str] = None) -> List[CaseInfo]:
    """Every case of a complete cache, in generation order."""
    root = root or ensure_cache()
    with open(os.path.join(root, MANIFEST)) as f:
        data = json.load(f)
    return [CaseInfo(c["name"], c["op_type"], c["domain"], int(c["opset"]), float(c["rtol"]),
                     float(c["atol"]), os.path.join(root, c["name"])) for c in data["cases"]]


def _proto_class(type_proto: Any) -> Any:
    import onnx
    which = type_proto.WhichOneof("value")
    return {"sequence_type": onnx.SequenceProto, "optional_type": onnx.OptionalProto,
            "map_type": onnx.MapProto}.get(which, onnx.TensorProto)


def read_value(path: str, type_proto: Any) -> Any:
    """A numpy array, list, dict or None from one `.pb` file of a graph value of this type."""
    from onnxedge.onnx_loader import value_to_python
    proto = _proto_class(type_proto)()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return value_to_python(proto)


def _count(folder: str, kind: str) -> int:
    n = 0
    while os.path.isfile(os.path.join(folder, "%s_%d.pb" % (kind, n))):
        n += 1
    return n


def load_case(info: CaseInfo) -> Case:
    """Read a case's model and data sets (values converted by onnxedge's own loader)."""
    import onnx
    with open(os.path.join(info.path, "model.onnx"), "rb") as f:
        model_bytes = f.read()
    model = onnx.ModelProto()
    model.ParseFromString(model_bytes)
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in inits]
    data_sets = []
    n = 0
    while os.path.isdir(os.path.join(info.path, "test_data_set_%d" % n)):
        ds = os.path.join(info.path, "test_data_set_%d" % n)
        feeds = [read_value(os.path.join(ds, "input_%d.pb" % k), inputs[k].type)
                 for k in range(_count(ds, "input"))]
        expected = [read_value(os.path.join(ds, "output_%d.pb" % k), graph.output[k].type)
                    for k in range(_count(ds, "output"))]
        data_sets.append((feeds, expected))
        n += 1
    return Case(info, model_bytes, [vi.name for vi in inputs], [vi.name for vi in graph.output],
                data_sets)


def main(argv: Optional[List[str]] = None) -> int:
    """CLI: build the cache (`--force` rebuilds it), print where it is."""
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild even when a complete cache exists")
    args = ap.parse_args(argv)
    root = cache_root()
    try:
        if args.force and can_generate():
            if os.path.exists(os.path.join(root, STAMP)):
                os.remove(os.path.join(root, STAMP))
            generate_cache(root)
        else:
            ensure_cache()
    except CacheMissing as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    print("%s (%d cases)" % (root, len(load_manifest(root))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
