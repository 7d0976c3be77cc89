"""NEON provider benchmark: onnxedge's C kernels vs the numpy CPU provider on the same work.

Two measurements, both ratios (CPU-provider time / NEON-provider time, > 1 means NEON is faster):
- natively on this machine with the host build of the C kernels (SSE/AVX2) vs numpy (with its BLAS);
- under `qemu-aarch64 -cpu cortex-a72` with the aarch64 NEON build vs numpy's aarch64 wheel, timed
  in the same emulator. Emulated absolute times mean nothing (qemu runs ~500x slower, and NEON and
  scalar code are not slowed alike); only the ratio between two engines in the same emulator is
  reported, and even that is an emulator ratio, not a Pi measurement: Pi numbers need a Pi.
Both use one thread. Writes benchmarks/results/neon.json and neon.png.

    python benchmarks/neon.py [--runs 10] [--qemu-runs 3] [--no-qemu]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, Optional, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROVIDERS = {"neon": ["NeonExecutionProvider", "CPUExecutionProvider"], "cpu": ["CPUExecutionProvider"]}
WORKLOADS = ["matmul_128", "conv3x3_16ch_32px", "depthwise3x3_32ch_32px", "conv1x1_64ch_16px", "mlp_b1",
             "mlp_b16"]


def _build(name: str):
    """(onnx ModelProto, feeds) of a workload (host only: needs the onnx package)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    if name.startswith("mlp"):
        sys.path.insert(0, ROOT)
        from benchmarks import models
        return models.build("mlp"), models.make_inputs("mlp", batch=int(name.split("_b")[1]))

    def conv(c_in, c_out, k, px, group=1):
        w = numpy_helper.from_array(rng.standard_normal((c_out, c_in // group, k, k)).astype(np.float32), "w")
        b = numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32), "b")
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, pads=[k // 2] * 4)
        x = rng.standard_normal((1, c_in, px, px)).astype(np.float32)
        return [node], [w, b], {"x": x}

    if name == "matmul_128":
        w = numpy_helper.from_array(rng.standard_normal((128, 128)).astype(np.float32), "w")
        nodes, inits, feeds = [helper.make_node("MatMul", ["x", "w"], ["y"])], [w], \
            {"x": rng.standard_normal((128, 128)).astype(np.float32)}
    elif name == "conv3x3_16ch_32px":
        nodes, inits, feeds = conv(16, 16, 3, 32)
    elif name == "depthwise3x3_32ch_32px":
        nodes, inits, feeds = conv(32, 32, 3, 32, group=32)
    elif name == "conv1x1_64ch_16px":
        nodes, inits, feeds = conv(64, 64, 1, 16)
    else:
        raise KeyError(name)
    x = feeds["x"]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, feeds


def time_models(d: str, names: Sequence[str], runs: int, warmup: int) -> Dict[str, Dict[str, float]]:
    """Median ms per engine of every workload saved in `d` (runs natively or under qemu)."""
    import onnxedge
    out: Dict[str, Dict[str, float]] = {}
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = 1
    for name in names:
        feeds = dict(np.load(os.path.join(d, name + ".npz")))
        row: Dict[str, float] = {}
        for engine, providers in PROVIDERS.items():
            po = [{"intra_op_num_threads": 1}, {}] if engine == "neon" else None
            sess = onnxedge.InferenceSession(os.path.join(d, name + ".oxe"), opts, providers=providers,
                                             provider_options=po)
            for _ in range(warmup):
                sess.run(None, feeds)
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter()
                sess.run(None, feeds)
                ts.append((time.perf_counter() - t0) * 1e3)
            row[engine + "_ms"] = statistics.median(ts)
        row["speedup"] = row["cpu_ms"] / row["neon_ms"]
        out[name] = row
        print("  %-24s cpu %9.3f ms  neon %9.3f ms  ratio %.2fx" % (name, row["cpu_ms"], row["neon_ms"],
                                                                    row["speedup"]), flush=True)
    return out


def _prepare(d: str, names: Sequence[str]) -> None:
    from onnxedge import model_io
    for name in names:
        model, feeds = _build(name)
        model_io.save(model_io.load(model.SerializeToString()), os.path.join(d, name + ".oxe"))
        np.savez(os.path.join(d, name + ".npz"), **feeds)


def _qemu(d: str, names: Sequence[str], runs: int) -> Optional[Dict[str, Dict[str, float]]]:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import arm_stage
    stage = arm_stage.stage(os.path.join(d, "stage"))
    env = dict(os.environ, PYTHONPATH=stage + os.pathsep + ROOT)
    cmd = [os.path.join(ROOT, "scripts", "qemu-python"), os.path.abspath(__file__), "--worker", d,
           "--runs", str(runs), "--names"] + list(names)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        print("qemu run failed:\n" + r.stderr[-2000:])
        return None
    with open(os.path.join(d, "qemu.json")) as f:
        return json.load(f)


def plot(report: dict, path: str) -> None:
    """Bar chart of the speedups (native host build, qemu NEON build)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(report["native"])
    fig, ax = plt.subplots(figsize=(9, 4))
    xs = np.arange(len(names))
    ax.bar(xs - 0.2, [report["native"][n]["speedup"] for n in names], 0.4,
           label="native x86 host build vs numpy")
    if report.get("qemu"):
        ax.bar(xs + 0.2, [report["qemu"].get(n, {}).get("speedup", 0) for n in names], 0.4,
               label="aarch64 NEON vs numpy, both under qemu cortex-a72")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("CPU provider time / NEON provider time")
    ax.set_yscale("log")
    ax.set_title("NeonExecutionProvider speedup over the numpy CPU provider (1 thread)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the native and emulated comparisons, write neon.json and neon.png."""
    p = argparse.ArgumentParser(description="NEON provider vs numpy CPU provider (ratios).")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--qemu-runs", type=int, default=3)
    p.add_argument("--no-qemu", action="store_true")
    p.add_argument("--names", nargs="+", default=WORKLOADS)
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:   # inside qemu: time and write qemu.json
        res = time_models(args.worker, args.names, args.runs, 1)
        with open(os.path.join(args.worker, "qemu.json"), "w") as f:
            json.dump(res, f)
        return 0
    report = {"machine": platform.machine(), "threads": 1,
              "method": "median wall time ratio (CPU provider / NEON provider); under qemu both engines "
                        "run in the same emulator. Not Raspberry Pi timings."}
    with tempfile.TemporaryDirectory() as d:
        _prepare(d, args.names)
        print("[neon] native, host build of the C kernels vs numpy:")
        report["native"] = time_models(d, args.names, args.runs, 2)
        from onnxedge.edge.neon import library
        report["native_backend"] = library.load().backend
        if not args.no_qemu:
            print("[neon] under qemu-aarch64 -cpu cortex-a72 (NEON build vs numpy aarch64):")
            report["qemu"] = _qemu(d, args.names, args.qemu_runs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "neon.json"), "w") as f:
        json.dump(report, f, indent=2)
    plot(report, os.path.join(args.out, "neon.png"))
    print("[neon] wrote %s/neon.json and neon.png" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
