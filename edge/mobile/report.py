"""Partition reports of the bridge providers on the benchmark models, as markdown for
docs/MOBILE.md:

    python -m onnxedge.edge.mobile.report [--models mlp resnet18 ...] [--update docs/MOBILE.md]

For each target (CoreML, NNAPI) and model: sessions with [bridge (reference mode), CPU] on the
model optimized as a package holds it (symbolic dims = 1), nodes per provider, the groups (ops and
artifact sizes), why the other nodes fell back, and the largest difference between the session's
outputs (bridge subgraphs in the reference interpreter) and the CPU provider's.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from onnxedge import InferenceSession, SessionOptions, model_io, optimizer

from . import package

BEGIN = "<!-- partition-report:begin (python -m onnxedge.edge.mobile.report --update) -->"
END = "<!-- partition-report:end -->"
MODELS = ("mlp", "resnet18", "bert_encoder", "qdq_cnn")


def _benchmarks():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks import models
    return models


def _ops_text(ops: List[str]) -> str:
    counts = collections.Counter(ops)
    return ", ".join("%s x%d" % (op, n) if n > 1 else op for op, n in counts.items())


def _diff(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype.kind in "iu":
        return "%d LSB" % int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max())
    return "%.2g" % float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())


# (target, target options, models) reported again with options other than the defaults
VARIANTS = [("ios", {"minimum_deployment_target": "iOS17"}, ("qdq_cnn",))]


def model_section(oxe: str, name: str, target: str, feeds: Dict[str, np.ndarray],
                  target_options: Optional[Dict[str, Any]] = None) -> List[str]:
    """Markdown lines for one model on one target."""
    tgt = package.TARGETS[target]
    opts = dict(target_options or {}, dims=package.default_dims(oxe))
    part = package.partition(oxe, tgt.provider, opts)
    part.pop("_artifacts")
    numpy_only = SessionOptions()   # "vs CPU" means the numpy kernels the references mirror
    numpy_only.add_session_config_entry("session.cpu_engine", "0")
    sess = InferenceSession(oxe, numpy_only, providers=[(tgt.provider, dict(opts, reference=True)),
                                                        "CPUExecutionProvider"])
    cpu = InferenceSession(oxe, numpy_only, providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    want = cpu.run(None, feeds)
    short = tgt.provider.replace("ExecutionProvider", "")
    counts = ", ".join("%s %d" % (p.replace("ExecutionProvider", ""), n)
                       for p, n in sorted(part["nodes_per_provider"].items()))
    lines = ["**%s** (%d nodes after optimization): %s; %d group(s); outputs vs CPU: %s" % (
        name, part["nodes"], counts, len(part["groups"]),
        ", ".join(_diff(g, w) for g, w in zip(got, want)))]
    lines.append("")
    for i, g in enumerate(part["groups"]):
        lines.append("- group %d (%s, artifact %s..., %d bytes): %s" % (
            i + 1, short, g["artifact"][:10], g["bytes"], _ops_text(g["ops"])))
    reasons: Dict[str, List[str]] = collections.OrderedDict()
    for a in part["assignments"]:
        if a["fallback_reason"]:
            reasons.setdefault(a["fallback_reason"], []).append(a["op_type"])
    for why, ops in reasons.items():
        if len(why) > 120 and "; " in why:
            why = why.split("; ")[0] + " (...)"   # the rest lists every op the bridge takes
        lines.append("- to CPU: %s: %s" % (_ops_text(ops), why))
    lines.append("")
    return lines


def render(models: Sequence[str] = MODELS, targets: Sequence[str] = ("ios", "android")) -> str:
    """The markdown of every target and model."""
    bm = _benchmarks()
    out: List[str] = []
    with tempfile.TemporaryDirectory(prefix="onnxedge-report-") as tmp:
        paths = bm.build_all(tmp, list(models))
        oxes = {}
        for name in models:
            oxes[name] = os.path.join(tmp, name + ".oxe")
            model_io.save(optimizer.optimize(model_io.load(paths[name]), "all"), oxes[name])
        for target in targets:
            tgt = package.TARGETS[target]
            out += ["### %s (`%s`, default options)" % (target, tgt.provider), ""]
            for name in models:
                out += model_section(oxes[name], name, target, bm.make_inputs(name, batch=1))
            for v_target, v_opts, v_models in VARIANTS:
                for name in (m for m in v_models if m in models and v_target == target):
                    out += ["### %s with %s" % (target, ", ".join(
                        "%s=%s" % kv for kv in sorted(v_opts.items()))), ""]
                    out += model_section(oxes[name], name, target, bm.make_inputs(name, batch=1),
                                         v_opts)
    return "\n".join(out).rstrip() + "\n"


def update(doc: str, text: str) -> None:
    """Replace the text between the BEGIN/END markers of `doc`."""
    with open(doc) as f:
        body = f.read()
    if BEGIN not in body or END not in body:
        raise SystemExit("%s has no partition-report markers" % doc)
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(doc, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI: print the reports, or write them into a doc between the markers."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--targets", nargs="*", default=["ios", "android"])
    ap.add_argument("--update", metavar="DOC", help="write into DOC between the markers")
    args = ap.parse_args(argv)
    text = render(args.models, args.targets)
    if args.update:
        update(args.update, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
