"""The ONNX node-suite cases of every op the WebGPU provider claims, run on WebGPU (+ CPU).

A case counts only when the op under test really lands on WebGPU (its node is claimed; cases
whose dtype or attributes keep it on CPU are "not claimed"). Failures must be listed in
tests/conformance/expected_failures/WebGpuExecutionProvider.txt; `python -m tests.webgpu.node_suite
--write` rewrites that file from a run.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Tuple

PROVIDER = "WebGpuExecutionProvider"


def claimed_cases() -> List:
    """Manifest entries (non-expanded) whose op the provider has a kernel for."""
    from onnxedge.web.webgpu.ops import OPS
    from tests.conformance import cases as node_cases
    infos = node_cases.load_manifest(node_cases.ensure_cache(verbose=False))
    return [i for i in infos if (i.domain if i.domain != "ai.onnx" else "", i.op_type) in OPS
            and not i.name.endswith("_expanded")]


def on_gpu(model: bytes, op_type: str) -> bool:
    """True when a node of op_type is assigned to WebGPU in a session on the model."""
    import onnxedge
    sess = onnxedge.InferenceSession(model, providers=[PROVIDER, "CPUExecutionProvider"])
    return any(r["op_type"] == op_type and r["provider"] == PROVIDER
               for r in sess.partition_report())


def run_all() -> Tuple[Dict[str, str], List[str], List[str]]:
    """({failed case: error}, passed cases, cases whose op stayed on CPU)."""
    from tests.conformance import cases as node_cases
    from tests.conformance import run
    from tests.conformance.engines import onnxedge_engine
    engine = onnxedge_engine(PROVIDER)
    failed: Dict[str, str] = {}
    passed: List[str] = []
    unclaimed: List[str] = []
    for info in claimed_cases():
        case = node_cases.load_case(info)
        try:
            claimed = on_gpu(case.model, info.op_type)
        except Exception:
            claimed = True   # the session itself fails: run_one records why
        if not claimed:
            unclaimed.append(info.name)
            continue
        res = run.run_one(case, engine, 60.0)
        if res.status == "passed":
            passed.append(info.name)
        else:
            failed[info.name] = res.error
    return failed, passed, unclaimed


def expected_path() -> str:
    """The provider's expected-failures file."""
    from tests.conformance import expected
    return expected.path_for(PROVIDER)


def main(argv: List[str] = None) -> int:
    """Run the claimed cases; print the counts (and rewrite the expected file with --write)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the expected-failures file")
    args = ap.parse_args(argv)
    failed, passed, unclaimed = run_all()
    total = len(failed) + len(passed)
    print("%d claimed cases: %d passed, %d failed (%.1f%%); %d cases stayed on CPU"
          % (total, len(passed), len(failed), 100.0 * len(passed) / max(total, 1), len(unclaimed)))
    for name, err in sorted(failed.items()):
        print("  %s  # %s" % (name, err))
    if args.write:
        from tests.conformance import expected
        old = expected.read(expected_path())
        with open(expected_path(), "w") as f:
            f.write("# Expected failures of the ONNX node suite on WebGpuExecutionProvider: cases of\n"
                    "# ops it claims whose node ran on WebGPU (tests/webgpu/test_node_suite.py).\n"
                    "# Rewrite: .venv/bin/python -m tests.webgpu.node_suite --write (hand-written\n"
                    "# reasons are kept).\n\n")
            for name in sorted(failed):
                reason = old.get(name) or failed[name].replace("\n", " ")
                f.write("%s  # %s\n" % (name, reason))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.exit(main())
