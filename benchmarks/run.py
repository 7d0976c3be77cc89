"""Benchmark onnxedge against onnxruntime on the three benchmark models.

Every (model, engine, threads) configuration runs in a fresh worker process, so peak RSS is
per configuration and thread settings cannot leak between runs. Writes
`benchmarks/results/latest.json` and `latest.png` and prints a markdown table.

    python3 benchmarks/run.py [--runs 20] [--models mlp resnet18] [--threads 1 default]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import models  # noqa: E402

HERE = os.path.join(ROOT, "benchmarks")
ENGINES = ("onnxruntime", "onnxedge", "onnxedge-engine")
# onnxedge with its C engine in front of the numpy kernels (session.cpu_engine = "1"); left out
# where the engine's library is not available
ENGINE = "onnxedge-engine"
THREADS = ("1", "default")
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _session(engine: str, path: str, threads: str):
    """An `engine` InferenceSession on `path`; threads "1" sets intra_op_num_threads=1."""
    if engine == "onnxruntime":
        import onnxruntime as rt
    else:
        import onnxedge as rt
    opts = rt.SessionOptions()
    if engine != "onnxruntime":   # "onnxedge": the numpy kernels alone; ENGINE: with the C engine
        opts.add_session_config_entry("session.cpu_engine", "1" if engine == ENGINE else "0")
    if threads != "default":
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = int(threads)
    return rt.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def _engine_available() -> bool:
    """True where onnxedge's C engine (its native kernel library) loads."""
    from onnxedge.providers import discovery
    return discovery.cpu_engine() is not None


def _peak_rss_mb() -> Optional[float]:
    """This process's peak resident set, MB (VmHWM: ru_maxrss would carry the parent's peak
    across exec on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024.0 * 1024.0) if sys.platform == "darwin" else kb / 1024.0


def worker(args: argparse.Namespace) -> None:
    """Time one configuration in this process; print one JSON line; save outputs to --save."""
    feeds = models.make_inputs(args.model, batch=args.batch)
    t0 = time.perf_counter()
    sess = _session(args.engine, args.path, args.threads)
    load_s = time.perf_counter() - t0
    times: List[float] = []
    outputs = None
    deadline = time.perf_counter() + args.budget_s
    for i in range(args.warmup + args.runs):
        t = time.perf_counter()
        outputs = sess.run(None, feeds)
        t = time.perf_counter() - t
        if i >= args.warmup:
            times.append(t)
            if time.perf_counter() > deadline and len(times) >= 3:
                break  # a very slow configuration: keep the budget, report what we have
    ms = np.array(times) * 1e3
    if args.save:
        np.save(args.save, outputs[0])
    print(json.dumps({
        "median_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)),
        "min_ms": float(ms.min()), "mean_ms": float(ms.mean()), "runs": int(ms.size),
        "load_s": load_s, "peak_rss_mb": _peak_rss_mb(),
    }))


def _run_config(model: str, path: str, engine: str, threads: str, args: argparse.Namespace,
                save: str) -> Dict[str, object]:
    env = dict(os.environ)
    if threads != "default" and args.blas_env:
        env.update({k: threads for k in BLAS_ENV})
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model,
           "--path", path, "--engine", engine, "--threads", threads, "--runs", str(args.runs),
           "--warmup", str(args.warmup), "--batch", str(args.batch), "--save", save,
           "--budget-s", str(args.budget_s)]
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=args.timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % args.timeout_s}
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1] if lines else "exit status %d" % proc.returncode,
                "stderr_tail": "\n".join(lines[-15:])}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _machine() -> Dict[str, object]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       cpu)
    except OSError:
        pass
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": cpu,
            "cpu_count": os.cpu_count(), "python": platform.python_version()}


def _versions() -> Dict[str, Optional[str]]:
    out: Dict[str, Optional[str]] = {"numpy": np.__version__}
    for mod in ("onnxedge", "onnxruntime", "onnx"):
        try:
            out[mod] = getattr(__import__(mod), "__version__", "unknown")
        except ImportError:
            out[mod] = None
    return out


def _ratios(results: List[Dict[str, object]]) -> Dict[str, Dict[str, Optional[float]]]:
    by_key = {(r["model"], r["engine"], r["threads"]): r for r in results}
    ratios: Dict[str, Dict[str, Optional[float]]] = {}
    for r in results:
        if r["engine"] == "onnxruntime":
            continue
        ref = by_key.get((r["model"], "onnxruntime", r["threads"]), {})
        ok = "median_ms" in r and "median_ms" in ref
        ratios.setdefault(r["model"], {})[_series(r["engine"], r["threads"])] = (
            r["median_ms"] / ref["median_ms"] if ok else None)
    return ratios


def _series(engine: str, threads: str) -> str:
    """A ratio's key: the thread setting, plus " engine" for onnxedge with its C engine."""
    return threads + (" engine" if engine == ENGINE else "")


def _ms(v: float) -> str:
    return "%.3g" % v if v < 10 else "%.1f" % v


def markdown_table(results: List[Dict[str, object]]) -> str:
    """The results as a markdown table, one row per (model, threads)."""
    by_key = {(r["model"], r["engine"], r["threads"]): r for r in results}
    rows = ["| model | threads | onnxruntime median (p90) ms | onnxedge median (p90) ms "
            "| ratio | onnxedge / ort peak RSS MB | max abs diff | onnxedge + C engine median "
            "(p90) ms | engine ratio | engine max abs diff |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    seen = []
    for r in results:
        key = (r["model"], r["threads"])
        if key in seen:
            continue
        seen.append(key)
        ort_r = by_key.get((key[0], "onnxruntime", key[1]), {})
        edge = by_key.get((key[0], "onnxedge", key[1]), {})
        eng = by_key.get((key[0], ENGINE, key[1]), {})

        def cell(x: Dict[str, object]) -> str:
            if "median_ms" in x:
                return "%s (%s)" % (_ms(x["median_ms"]), _ms(x["p90_ms"]))
            return "error: %s" % str(x.get("error", "not run"))[:60].replace("|", "/")

        def ratio(x: Dict[str, object]) -> str:
            return ("%.2fx" % (x["median_ms"] / ort_r["median_ms"])
                    if "median_ms" in x and "median_ms" in ort_r else "-")

        def diff(x: Dict[str, object]) -> str:
            d = x.get("max_abs_diff")
            return "-" if d is None else "%.1e" % d

        rss = "%s / %s" % tuple("%.0f" % x["peak_rss_mb"] if x.get("peak_rss_mb") else "-"
                                for x in (edge, ort_r))
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], cell(ort_r), cell(edge), ratio(edge), rss, diff(edge),
            cell(eng) if eng else "-", ratio(eng), diff(eng)))
    return "\n".join(rows)


def plot(ratios: Dict[str, Dict[str, Optional[float]]], path: str, title: str) -> None:
    """Bar chart of onnxedge/onnxruntime median-time ratios per model and thread setting."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(ratios)
    threads = [t for t in [_series(e, t) for e in ENGINES[1:] for t in THREADS]
               if any(t in ratios[m] for m in names)]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(threads), 1)
    values = [v for m in names for v in ratios[m].values() if v]
    for i, t in enumerate(threads):
        xs = [j + (i - (len(threads) - 1) / 2.0) * width for j in range(len(names))]
        ys = [ratios[m].get(t) or float("nan") for m in names]
        bars = ax.bar(xs, ys, width, label="threads=%s" % t.replace(" engine", ", C engine"))
        for bar, y in zip(bars, ys):
            ok = y == y  # not NaN
            ax.annotate("%.2fx" % y if ok else "n/a", (bar.get_x() + bar.get_width() / 2,
                                                       y if ok else 1.0),
                        ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel("onnxedge / onnxruntime median time")
    ax.set_title(title, fontsize=9)
    if threads:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Benchmark onnxedge against onnxruntime.")
    p.add_argument("--runs", type=int, default=20, help="timed runs per configuration")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--models", nargs="+", default=list(models.BUILDERS),
                   choices=list(models.BUILDERS))
    p.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    p.add_argument("--threads", nargs="+", default=list(THREADS), choices=THREADS)
    p.add_argument("--blas-env", action="store_true",
                   help="also set OPENBLAS/OMP/MKL_NUM_THREADS in the worker for threads=1")
    p.add_argument("--model-dir", default=os.path.join(HERE, "build"),
                   help="where the models are built (cached)")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--timeout-s", type=int, default=240, help="per configuration")
    p.add_argument("--budget-s", type=float, default=60.0,
                   help="stop timing a configuration after this long (min 3 runs)")
    p.add_argument("--no-neon", action="store_true",
                   help="skip the NEON provider comparison (benchmarks/neon.py)")
    p.add_argument("--no-aarch64", action="store_true",
                   help="skip onnxedge vs onnxruntime aarch64 under qemu (benchmarks/aarch64_ort.py)")
    p.add_argument("--no-webgpu", action="store_true",
                   help="skip the WebGPU provider comparison (benchmarks/webgpu.py)")
    p.add_argument("--no-oxe", action="store_true",
                   help="skip the .oxe vs .onnx load benchmark (benchmarks/load_oxe.py)")
    p.add_argument("--no-browser", action="store_true",
                   help="skip onnxedge in Pyodide vs onnxruntime-web (benchmarks/browser.py)")
    p.add_argument("--no-serve", action="store_true",
                   help="skip the `onnxedge serve` requests/s benchmark (benchmarks/serve.py)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--save", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run every configuration, write latest.json / latest.png, print the table."""
    args = _parse(argv)
    if args.worker:
        args.threads = args.threads if isinstance(args.threads, str) else args.threads[0]
        worker(args)
        return 0
    started = time.perf_counter()
    paths = models.build_all(args.model_dir, args.models)
    engines = [e for e in args.engines if e != ENGINE or _engine_available()]
    configs = [(m, t, e) for m in args.models for t in args.threads for e in engines]
    results: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (model, threads, engine) in enumerate(configs):
            print("[%d/%d] %s %s threads=%s ..." % (i + 1, len(configs), model, engine, threads),
                  end=" ", flush=True)
            save = os.path.join(tmp, "%s-%s-%s.npy" % (model, engine, threads))
            r = _run_config(model, paths[model], engine, threads, args, save)
            r.update(model=model, engine=engine, threads=threads)
            ref = os.path.join(tmp, "%s-onnxruntime-%s.npy" % (model, threads))
            if engine != "onnxruntime" and "median_ms" in r and os.path.exists(ref):
                r["max_abs_diff"] = float(np.max(np.abs(np.load(save) - np.load(ref))))
            results.append(r)
            print("median %s ms, p90 %s ms" % (_ms(r["median_ms"]), _ms(r["p90_ms"]))
                  if "median_ms" in r else "FAILED: %s" % r["error"], flush=True)
    ratios = _ratios(results)
    report = {
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": _machine(), "versions": _versions(),
        "settings": {"runs": args.runs, "warmup": args.warmup, "batch": args.batch,
                     "blas_env": args.blas_env, "process_per_config": True},
        "results": results, "ratios_onnxedge_over_onnxruntime": ratios,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "latest.json"), "w") as f:
        json.dump(report, f, indent=2)
    title = "onnxedge vs onnxruntime, %s, %s cores" % (report["machine"]["cpu"],
                                                        report["machine"]["cpu_count"])
    plot(ratios, os.path.join(args.out, "latest.png"), title)
    print()
    print(markdown_table(results))
    print("\nwrote %s/latest.json and latest.png in %.0f s" % (args.out, report["elapsed_s"]))
    # Mesa's Vulkan loader complains on every adapter probe when this is unset (servers, CI)
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="xdg-onnxedge-"))
    from onnxedge.edge.neon.provider import engine_name
    if not args.no_neon and engine_name() in __import__("onnxedge").get_available_providers():
        from benchmarks import neon   # NEON provider vs numpy CPU provider: neon.json / neon.png
        neon.main(["--out", args.out])
    if not args.no_aarch64:
        from benchmarks import aarch64_ort   # onnxedge vs onnxruntime's aarch64 wheel under qemu: aarch64.json
        if aarch64_ort.main(["--out", args.out]):   # (prints why and returns 0 without the ARM sysroot)
            return 1
    if not args.no_webgpu and "WebGpuExecutionProvider" in __import__("onnxedge").get_available_providers():
        from benchmarks import webgpu   # WebGPU provider vs CPU provider: webgpu.json / webgpu.png
        webgpu.main(["--out", args.out, "--model-dir", args.model_dir])
    if not args.no_oxe:
        from benchmarks import load_oxe   # .oxe vs .onnx open time and memory: load_oxe.json / .png
        if load_oxe.main(["--out", args.out]):
            return 1
    if not args.no_serve:
        from benchmarks import serve   # `onnxedge serve` req/s and p99, 1 and 32 clients: serve.json / .png
        if serve.main(["--out", args.out, "--model-dir", args.model_dir]):
            return 1
    if not args.no_browser:
        from benchmarks import browser   # Pyodide vs onnxruntime-web: browser.json / .png
        # every browser model on a full run; only the ones asked for after --models
        wanted = [m for m in args.models if m in browser.MODELS]
        only = [] if args.models == list(models.BUILDERS) else ["--models"] + wanted
        if only == ["--models"]:
            print("browser benchmark skipped: none of %s runs in the page" % args.models)
        elif browser.main(["--out", args.out, "--model-dir", args.model_dir] + only):
            return 1
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
