"""Opening a model with ~45 MB of weights: `.oxe` (mmap, zero-copy) vs `onnx.load` + onnxedge's
`.onnx` import, and InferenceSession creation from each (with the default optimization level,
and with ORT_DISABLE_ALL as for a model optimized at conversion). Also the peak memory of each.

    python3 benchmarks/load_oxe.py [--runs 9] [--out benchmarks/results]

Model: the BERT-style encoder of benchmarks/models.py (its weights, word embeddings included,
are ~44 MB). Each kind runs in its own worker process: imports and one warm-up load first
(the files are then in the page cache), then the median of `--runs` timed loads in that process;
then one more load under tracemalloc for the peak of Python/numpy allocations. Writes
load_oxe.json and load_oxe.png; exits 1 when `.oxe` is not >= 10x faster to open or when its
load allocates more than 10 % of the weight bytes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any, Callable, Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KINDS = ("oxe_load", "onnx_load", "oxe_session", "onnx_session", "oxe_session_noopt",
         "onnx_session_noopt", "oxe_optimized_session")
MODEL = "bert_encoder"


def _loader(kind: str, path: str) -> Callable[[], Any]:
    import onnxedge
    from onnxedge import model_io, onnx_loader
    if kind == "oxe_load":
        return lambda: model_io.load(path)
    if kind == "onnx_load":
        import onnx

        def load() -> Any:
            proto = onnx.load(path)
            return onnx_loader.model_from_proto(proto, os.path.dirname(os.path.abspath(path)))
        return load
    if kind in ("oxe_session", "onnx_session", "oxe_optimized_session"):
        return lambda: onnxedge.InferenceSession(path)
    if kind in ("oxe_session_noopt", "onnx_session_noopt"):   # a model optimized when converted
        opts = onnxedge.SessionOptions()
        opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
        return lambda: onnxedge.InferenceSession(path, opts)
    raise ValueError("unknown kind %r" % kind)


def worker(kind: str, path: str, runs: int) -> Dict[str, Any]:
    """Time `runs` loads of one kind in this process (after one warm-up), then its peak memory."""
    load = _loader(kind, path)
    load()
    times: List[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = load()
        times.append(time.perf_counter() - t0)
        del result
    tracemalloc.start()
    result = load()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    times.sort()
    return {"kind": kind, "median_ms": 1000 * times[len(times) // 2],
            "min_ms": 1000 * times[0], "runs": runs, "tracemalloc_peak_bytes": peak}


def _weights_bytes(path: str) -> int:
    from onnxedge import model_io
    model = model_io.load(path)
    return int(sum(v.nbytes for v in model.graph.initializers.values()))


def plot(report: Dict[str, Any], path: str) -> None:
    """Two panels: median open time (log scale) and peak allocation of each kind."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    res = report["results"]
    kinds = [k for k in KINDS if k in res]
    colors = ["#2b8a3e" if k.startswith("oxe") else "#868e96" for k in kinds]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    a.bar(kinds, [res[k]["median_ms"] for k in kinds], color=colors)
    a.set_yscale("log")
    a.set_ylabel("median ms (log)")
    a.set_title("open %.0f MB of weights: load %.0fx, session %.1fx (no opt %.1fx, saved "
                "optimized %.1fx) faster" % (report["weights_bytes"] / 1e6, report["speedup_load"],
                                             report["speedup_session"],
                                             report["speedup_session_noopt"],
                                             report["speedup_session_preoptimized"]), fontsize=9)
    b.bar(kinds, [res[k]["tracemalloc_peak_bytes"] / 1e6 for k in kinds], color=colors)
    b.axhline(report["weights_bytes"] / 1e6, color="k", ls="--", lw=1)
    b.set_ylabel("peak allocation, MB (dashed: weight bytes)")
    b.set_title("memory allocated while opening", fontsize=9)
    for ax in (a, b):
        ax.tick_params(axis="x", labelsize=7, labelrotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Build the model as .onnx and .oxe, time every kind in its own process, report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--worker", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.runs)))
        return 0
    import onnx
    from benchmarks import models
    from onnxedge import format as oxe
    from onnxedge import model_io
    from onnxedge.optimizer import optimize
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, MODEL + ".onnx")
        oxe_path = os.path.join(tmp, MODEL + ".oxe")
        onnx.save(models.build(MODEL), onnx_path)
        oxe.save(model_io.load(onnx_path), oxe_path)
        optimized_path = os.path.join(tmp, MODEL + ".optimized.oxe")   # what a device receives
        oxe.save(optimize(model_io.load(onnx_path), "all"), optimized_path)
        results = {}
        for kind in KINDS:
            path = (optimized_path if kind == "oxe_optimized_session"
                    else oxe_path if kind.startswith("oxe") else onnx_path)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kind,
                                   path, "--runs", str(args.runs)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=600)
            if proc.returncode:
                sys.stderr.write(proc.stderr)
                return 1
            results[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
            print("%-13s median %9.3f ms  peak alloc %8.2f MB" % (
                kind, results[kind]["median_ms"], results[kind]["tracemalloc_peak_bytes"] / 1e6))
        weights = _weights_bytes(onnx_path)
        report = {
            "created": datetime.datetime.now().isoformat(timespec="seconds"),
            "model": MODEL, "weights_bytes": weights,
            "onnx_bytes": os.path.getsize(onnx_path), "oxe_bytes": os.path.getsize(oxe_path),
            "method": "one worker process per kind; imports and one warm-up load, then the "
                      "median of %d loads (files in the page cache); tracemalloc peak of one "
                      "more load" % args.runs,
            "results": results,
            "speedup_load": results["onnx_load"]["median_ms"] / results["oxe_load"]["median_ms"],
            "speedup_session": results["onnx_session"]["median_ms"]
            / results["oxe_session"]["median_ms"],
            "speedup_session_noopt": results["onnx_session_noopt"]["median_ms"]
            / results["oxe_session_noopt"]["median_ms"],
            "speedup_session_preoptimized": results["onnx_session"]["median_ms"]
            / results["oxe_optimized_session"]["median_ms"],
        }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "load_oxe.json"), "w") as f:
        json.dump(report, f, indent=2)
    plot(report, os.path.join(args.out, "load_oxe.png"))
    oxe_peak = results["oxe_load"]["tracemalloc_peak_bytes"]
    print("weights %.1f MB; .oxe opens %.0fx faster than onnx.load + import (session %.1fx, "
          "%.1fx without the optimizer, %.1fx from an .oxe saved optimized); .oxe load allocated "
          "%.2f MB (%.2f%% of the weights)"
          % (weights / 1e6, report["speedup_load"], report["speedup_session"],
             report["speedup_session_noopt"], report["speedup_session_preoptimized"],
             oxe_peak / 1e6, 100.0 * oxe_peak / weights))
    print("wrote %s/load_oxe.json and load_oxe.png" % args.out)
    return 0 if report["speedup_load"] >= 10 and oxe_peak < 0.1 * weights else 1


if __name__ == "__main__":
    sys.exit(main())
