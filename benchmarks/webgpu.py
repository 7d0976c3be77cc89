"""WebGPU provider vs the numpy CPU provider: per-model latency and MatMul GFLOP/s.

Writes `webgpu.json` (with the adapter's name, backend and whether it is a CPU fallback) and
`webgpu.png` into --out. On lavapipe / SwiftShader (CPU adapters) the numbers prove only that
the path works; `--matmul 4096` measures a square 4096 matmul for a real GPU.

    python benchmarks/webgpu.py [--models mlp resnet18 bert_encoder] [--matmul 256 1024]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="xdg-webgpu-"))

from benchmarks import models  # noqa: E402

import onnxedge  # noqa: E402

WEBGPU = ["WebGpuExecutionProvider", "CPUExecutionProvider"]
CPU = ["CPUExecutionProvider"]


def _time(fn, runs: int, warmup: int) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return {"median_ms": float(np.median(ts)), "p90_ms": float(np.percentile(ts, 90))}


def bench_model(name: str, path: str, runs: int, warmup: int) -> Dict[str, object]:
    """Latency of one model on WebGPU(+CPU) and on CPU alone, and their max output difference."""
    feeds = models.make_inputs(name)
    out: Dict[str, object] = {"model": name}
    results = {}
    for label, providers in (("webgpu", WEBGPU), ("cpu", CPU)):
        sess = onnxedge.InferenceSession(path, providers=providers)
        results[label] = sess.run(None, feeds)[0]
        out[label] = _time(lambda: sess.run(None, feeds), runs, warmup)
        if label == "webgpu":
            report = sess.partition_report()
            out["nodes_on_webgpu"] = sum(r["provider"] == WEBGPU[0] for r in report)
            out["nodes"] = len(report)
    out["max_abs_diff"] = float(np.max(np.abs(results["webgpu"] - results["cpu"])))
    out["gpu_temp_bytes_per_run"] = temp_bytes(path, feeds)
    return out


def temp_bytes(path: str, feeds: Dict[str, np.ndarray]) -> Dict[str, int]:
    """Bytes of temporary device buffers one run draws, without and with in-run reuse."""
    from onnxedge.web.webgpu import runtime
    out = {}
    for label, reuse in (("without_reuse", False), ("with_reuse", True)):
        runtime.Recorder.reuse_in_run = reuse
        try:
            sess = onnxedge.InferenceSession(path, providers=WEBGPU)
            sess.run(None, feeds)
        finally:
            runtime.Recorder.reuse_in_run = True
        parts = [s.run.__self__ for s in sess._plan.steps if s.provider == WEBGPU[0]]
        out[label] = int(sum(p.last_stats.get("temp_bytes", 0) for p in parts))
    return out


def bench_matmul(n: int, runs: int, warmup: int) -> Dict[str, object]:
    """GFLOP/s of an n x n @ n x n MatMul on WebGPU (one upload, dispatch and read-back per run)
    and on the CPU provider."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])],
                          [numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    flop = 2.0 * n * n * n
    out: Dict[str, object] = {"n": n}
    for label, providers in (("webgpu", WEBGPU), ("cpu", CPU)):
        sess = onnxedge.InferenceSession(m, providers=providers)
        t = _time(lambda: sess.run(None, {"a": a}), runs, warmup)
        t["gflops"] = flop / (t["median_ms"] * 1e6)
        out[label] = t
    return out


def plot(report: Dict[str, object], path: str) -> None:
    """Bars: WebGPU and CPU latency per model (log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = report["models"]
    names = [r["model"] for r in rows]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(x - 0.2, [r["webgpu"]["median_ms"] for r in rows], 0.4, label="WebGPU (+CPU)")
    ax.bar(x + 0.2, [r["cpu"]["median_ms"] for r in rows], 0.4, label="CPU provider")
    ax.set_xticks(x)
    ax.set_xticklabels(names)
    ax.set_yscale("log")
    ax.set_ylabel("median latency, ms (batch 1)")
    ax.set_title("onnxedge WebGPU on %s" % report["adapter"]["name"], fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark and write webgpu.json / webgpu.png."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="*", default=list(models.BUILDERS))
    p.add_argument("--matmul", nargs="*", type=int, default=[256, 1024],
                   help="square MatMul sizes (e.g. 4096 on a real GPU)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--model-dir", default=os.path.join(HERE, "build"))
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    if "WebGpuExecutionProvider" not in onnxedge.get_available_providers():
        print("webgpu benchmark: no WebGPU adapter here (make setup-webgpu); skipped")
        return 0
    from onnxedge.web.webgpu.device import default_device
    adapter = default_device().info.as_dict()
    paths = models.build_all(args.model_dir, args.models)
    rows: List[Dict[str, object]] = []
    for name in args.models:
        r = bench_model(name, paths[name], args.runs, args.warmup)
        rows.append(r)
        print("webgpu %-13s WebGPU %9.2f ms   CPU %9.2f ms   (%d/%d nodes on WebGPU, max diff %.2g)"
              % (name, r["webgpu"]["median_ms"], r["cpu"]["median_ms"], r["nodes_on_webgpu"],
                 r["nodes"], r["max_abs_diff"]))
        tb = r["gpu_temp_bytes_per_run"]
        print("webgpu %-13s GPU temporaries per run: %.2f MB without in-run reuse, %.2f MB with"
              % (name, tb["without_reuse"] / 1e6, tb["with_reuse"] / 1e6))
    mm = []
    for n in args.matmul:
        r = bench_matmul(n, args.runs, args.warmup)
        mm.append(r)
        print("webgpu matmul %d: WebGPU %.2f GFLOP/s, CPU %.2f GFLOP/s"
              % (n, r["webgpu"]["gflops"], r["cpu"]["gflops"]))
    report = {"created": datetime.datetime.now().isoformat(timespec="seconds"),
              "adapter": adapter, "models": rows, "matmul": mm,
              "note": "CPU adapters (lavapipe, SwiftShader) prove correctness, not speed"
              if adapter["is_fallback"] else ""}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "webgpu.json"), "w") as f:
        json.dump(report, f, indent=2)
    if rows:
        plot(report, os.path.join(args.out, "webgpu.png"))
    print("wrote %s/webgpu.json and webgpu.png (adapter: %s)" % (args.out, adapter["name"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
