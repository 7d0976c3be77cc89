"""Writes docs/ZOO.md: every zoo model, the tool that made it, its non-standard ops, whether
onnxruntime runs it and whether onnxedge matches onnxruntime.

    python3 tests/zoo/report.py [--families ml,quantized] [--out docs/ZOO.md]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from zoo import zoo  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
HEADER = """# The model zoo

Models as people ship them, built locally with the tools users use (no downloads: random or
fitted weights, fixed seeds), each run on onnxedge's CPU provider and compared with onnxruntime
(`tests/zoo/test_zoo.py`; float outputs at the model's rtol/atol, quantized outputs within one
quantization step, classic-ML labels exactly). Regenerate with `python3 tests/zoo/report.py`;
the models are built once into `~/.cache/onnxedge/zoo/` (`$ONNXEDGE_ZOO_CACHE`).

Non-standard ops: ops outside the ONNX standard domains' schemas (onnxruntime's `com.microsoft`
contrib ops, and `SimplifiedLayerNormalization`, which onnxruntime registers in the default
domain), plus every `ai.onnx.ml` op.

Dynamically quantized CNNs (DynamicQuantizeLinear + ConvInteger, where a tiny float difference
can flip a quantizer's rounding and compound through the layers): onnxedge's predicted class
agrees with onnxruntime's on 100 of 100 random inputs for both the small and the 10-layer
Sigmoid/SiLU CNN (`tests/zoo/test_quantized_drift.py` asserts it).

"""


def nonstandard_ops(path: str) -> List[str]:
    """Ops of the model (subgraphs included) that are contrib / ml ops, as domain.op."""
    import onnx
    from onnx import defs
    model = onnx.load(path, load_external_data=False)
    found = set()

    def walk(graph: Any) -> None:
        for node in graph.node:
            domain = node.domain or ""
            if domain == "ai.onnx.ml" or domain not in ("", "ai.onnx") or \
                    not defs.has(node.op_type, domain):
                found.add("%s.%s" % (domain or "ai.onnx", node.op_type))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)
    walk(model.graph)
    return sorted(found)


def evaluate(family: str, model: zoo.ZooModel) -> Dict[str, Any]:
    """Build (or reuse) one zoo model and compare onnxedge with onnxruntime."""
    import test_zoo
    row: Dict[str, Any] = {"family": family, "model": model.name, "tool": model.tool}
    try:
        built = zoo.ensure_built(family, model)
    except Exception as exc:   # a missing tool: reported, not hidden
        row.update(ops=[], ort="build failed: %s" % exc, onnxedge="-")
        return row
    row["ops"] = nonstandard_ops(built["path"])
    try:
        import onnxruntime as ort
        ref = ort.InferenceSession(built["path"], providers=["CPUExecutionProvider"])
        names = [o.name for o in ref.get_outputs()]
        expected = ref.run(names, built["feeds"])
        row["ort"] = "yes"
    except Exception as exc:
        row.update(ort="no: %s" % str(exc).splitlines()[0][:80], onnxedge="-")
        return row
    try:
        import onnxedge
        sess = onnxedge.InferenceSession(built["path"], providers=["CPUExecutionProvider"])
        got = sess.run(names, built["feeds"])
        test_zoo.compare_outputs(model, names, expected, got)
        row["onnxedge"] = "yes"
    except Exception as exc:
        row["onnxedge"] = "NO: %s" % (str(exc).splitlines() or [type(exc).__name__])[0][:100]
        traceback.print_exc()
    return row


def markdown(rows: List[Dict[str, Any]]) -> str:
    """The zoo table."""
    lines = [HEADER, "| model | made by | non-standard ops | onnxruntime runs it | onnxedge matches |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s/%s | %s | %s | %s | %s |" % (
            r["family"], r["model"], r["tool"], ", ".join("`%s`" % o for o in r["ops"]) or "-",
            r["ort"], r["onnxedge"]))
    ok = sum(r["onnxedge"] == "yes" for r in rows)
    runs = sum(r["ort"] == "yes" for r in rows)
    lines.append("")
    lines.append("onnxedge matches onnxruntime on %d of the %d models onnxruntime runs (%d models)."
                 % (ok, runs, len(rows)))
    return "\n".join(lines) + "\n"


def main() -> int:
    """Build the zoo (cached), compare, write the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(zoo.FAMILIES))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "ZOO.md"))
    args = ap.parse_args()
    rows = []
    cases = zoo.all_models(args.families.split(","))
    for i, (family, model) in enumerate(cases, 1):
        t0 = time.perf_counter()
        rows.append(evaluate(family, model))
        print("[%d/%d] %s/%s: onnxruntime %s, onnxedge %s (%.1f s)" % (
            i, len(cases), family, model.name, rows[-1]["ort"], rows[-1]["onnxedge"],
            time.perf_counter() - t0), flush=True)
    with open(args.out, "w") as f:
        f.write(markdown(rows))
    print("wrote %s" % args.out)
    return 0 if all(r["onnxedge"] in ("yes", "-") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
