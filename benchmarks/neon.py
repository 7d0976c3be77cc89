"""NEON provider benchmark: onnxedge's C kernels vs the numpy CPU provider on the same work.

The headline is instructions executed per inference (one thread, batch as named), as a ratio
CPU-provider instructions / NEON-provider instructions (> 1: the C kernels do the work in fewer
instructions):
- aarch64: both providers run in the aarch64 CPython under `qemu-aarch64 -cpu cortex-a72` (the NEON
  build of the kernels vs numpy's aarch64 wheel); a TCG plugin (edge/kernels/tools/
  qemu_insn_count.c) counts the guest instructions executed between two markers;
- x86_64 host: the host build (SSE2/AVX2) vs numpy, counted by valgrind's callgrind between the
  same markers (edge/kernels/tools/callgrind_mark.c; `perf stat -e instructions` is not supported
  on these virtual machines).
Each workload is warmed up, then two back-to-back regions of --count-runs inferences are counted;
the markers cut out interpreter start-up, imports and model loading. Counts repeat to ~0.1 %
(PYTHONHASHSEED=0); `spread` is the difference between the two regions. Instructions are not
time: a NEON instruction does 4 lanes of work, a load that misses the cache costs as much as
dozens of ALU instructions, so Raspberry Pi wall-clock numbers need a Pi. Native wall-time medians
are kept as secondary information (noisy on a shared machine).
Writes benchmarks/results/neon.json and neon.png and prints a table.

    python benchmarks/neon.py [--count-runs 3] [--runs 10] [--no-qemu] [--no-callgrind] [--names ...]
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# "neon": the C engine; _sessions puts the provider of the machine that runs it first (NeonExecutionProvider
# under qemu-aarch64, X64ExecutionProvider on the x86-64 host)
PROVIDERS = {"neon": ["NeonExecutionProvider", "CPUExecutionProvider"], "cpu": ["CPUExecutionProvider"]}
WORKLOADS = ["matmul_128", "conv3x3_16ch_32px", "depthwise3x3_32ch_32px", "conv1x1_64ch_16px",
             "small_cnn_32px", "mlp_b1", "mlp_b16"]
MARK_FD = 0x4F584B49   # the marker fd qemu_insn_count.c watches for (no process has it open)
WARMUP = 10
COUNT_ENV = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------ workloads
def _conv(rng, c_in: int, c_out: int, k: int, px: int, group: int = 1):
    from onnx import helper, numpy_helper
    w = numpy_helper.from_array(rng.standard_normal((c_out, c_in // group, k, k)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, pads=[k // 2] * 4)
    x = rng.standard_normal((1, c_in, px, px)).astype(np.float32)
    return [node], [w, b], {"x": x}


def _small_cnn(rng):
    """3x32x32 -> Conv3x3(16)+Relu -> MaxPool2 -> Conv3x3(32)+Relu -> MaxPool2 -> Conv1x1(64)+Relu
    -> GlobalAveragePool -> Flatten -> Gemm(10): a CIFAR-sized classifier."""
    from onnx import helper, numpy_helper
    nodes, inits = [], []
    x, c = "x", 3
    for i, (c_out, k) in enumerate([(16, 3), (32, 3), (64, 1)]):
        w = rng.standard_normal((c_out, c, k, k)).astype(np.float32) * np.float32((2.0 / (c * k * k)) ** 0.5)
        inits += [numpy_helper.from_array(w, "w%d" % i),
                  numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32) * 0.1, "b%d" % i)]
        nodes += [helper.make_node("Conv", [x, "w%d" % i, "b%d" % i], ["c%d" % i], pads=[k // 2] * 4),
                  helper.make_node("Relu", ["c%d" % i], ["r%d" % i])]
        x, c = "r%d" % i, c_out
        if i < 2:
            nodes.append(helper.make_node("MaxPool", [x], ["p%d" % i], kernel_shape=[2, 2], strides=[2, 2]))
            x = "p%d" % i
    inits += [numpy_helper.from_array(rng.standard_normal((10, 64)).astype(np.float32) * 0.1, "fc_w"),
              numpy_helper.from_array(np.zeros(10, np.float32), "fc_b")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1)]
    return nodes, inits, {"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}


def _build(name: str):
    """(onnx ModelProto, feeds) of a workload (host only: needs the onnx package)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    if name.startswith("mlp"):
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        from benchmarks import models
        return models.build("mlp"), models.make_inputs("mlp", batch=int(name.split("_b")[1]))
    if name == "matmul_128":
        w = numpy_helper.from_array(rng.standard_normal((128, 128)).astype(np.float32), "w")
        nodes, inits, feeds = [helper.make_node("MatMul", ["x", "w"], ["y"])], [w], \
            {"x": rng.standard_normal((128, 128)).astype(np.float32)}
    elif name == "conv3x3_16ch_32px":
        nodes, inits, feeds = _conv(rng, 16, 16, 3, 32)
    elif name == "depthwise3x3_32ch_32px":
        nodes, inits, feeds = _conv(rng, 32, 32, 3, 32, group=32)
    elif name == "conv1x1_64ch_16px":
        nodes, inits, feeds = _conv(rng, 64, 64, 1, 16)
    elif name == "small_cnn_32px":
        nodes, inits, feeds = _small_cnn(rng)
    else:
        raise KeyError("unknown workload %r (known: %s)" % (name, ", ".join(WORKLOADS)))
    x = feeds["x"]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, feeds


def _prepare(d: str, names: Sequence[str]) -> None:
    """Write every workload as DIR/<name>.oxe + DIR/<name>.npz (readable without onnx, under qemu)."""
    from onnxedge import model_io
    for name in names:
        model, feeds = _build(name)
        model_io.save(model_io.load(model.SerializeToString()), os.path.join(d, name + ".oxe"))
        np.savez(os.path.join(d, name + ".npz"), **feeds)


def _sessions(d: str, name: str):
    """{engine: (session, feeds)} of one workload, each provider on one thread."""
    import onnxedge
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.add_session_config_entry("session.cpu_engine", "0")   # "cpu" means the numpy kernels
    feeds = dict(np.load(os.path.join(d, name + ".npz")))
    out = {}
    from onnxedge.edge.neon.provider import engine_name
    for engine, providers in PROVIDERS.items():
        po = [{"intra_op_num_threads": 1}, {}] if engine == "neon" else None
        if engine == "neon":
            providers = [engine_name()] + providers[1:]
        out[engine] = onnxedge.InferenceSession(os.path.join(d, name + ".oxe"), opts, providers=providers,
                                                provider_options=po), feeds
    return out


# ------------------------------------------------------------------------ worker side
def time_models(d: str, names: Sequence[str], runs: int, warmup: int) -> Dict[str, Dict[str, float]]:
    """Median wall ms per engine of every workload saved in `d` (secondary: noisy when shared)."""
    out: Dict[str, Dict[str, float]] = {}
    for name in names:
        row: Dict[str, float] = {}
        for engine, (sess, feeds) in _sessions(d, name).items():
            for _ in range(warmup):
                sess.run(None, feeds)
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter()
                sess.run(None, feeds)
                ts.append((time.perf_counter() - t0) * 1e3)
            row[engine + "_ms"] = statistics.median(ts)
        row["ratio"] = row["cpu_ms"] / row["neon_ms"]
        out[name] = row
        print("  %-24s cpu %9.3f ms  neon %9.3f ms  ratio %.2fx" % (name, row["cpu_ms"], row["neon_ms"],
                                                                    row["ratio"]), flush=True)
    return out


def marker(counter: str) -> Callable[[int], None]:
    """mark(label): tells the instruction counter around this process to record its count now."""
    if counter == "qemu":
        def mark(label: int) -> None:
            try:
                os.lseek(MARK_FD, label, 0)   # EBADF; the plugin records the syscall
            except OSError:
                pass
        return mark
    import ctypes
    lib = ctypes.CDLL(_tools().CALLGRIND_MARK)
    lib.oxk_insn_mark.argtypes = [ctypes.c_long]
    return lambda label: lib.oxk_insn_mark(label)


def marked_runs(sess: Any, feeds: Dict[str, np.ndarray], runs: int, warmup: int,
                mark: Callable[[int], None], label: int) -> List[int]:
    """Warm up, then mark / `runs` inferences / mark / `runs` inferences / mark (labels after
    `label`, garbage collection off between the marks); the three labels."""
    for _ in range(warmup):
        sess.run(None, feeds)
    gc.collect()
    gc.disable()
    marks = []
    for part in range(3):
        if part:
            for _ in range(runs):
                sess.run(None, feeds)
        label += 1
        mark(label)
        marks.append(label)
    gc.enable()
    return marks


def count_regions(d: str, names: Sequence[str], runs: int, counter: str) -> List[dict]:
    """Warm up, then mark / `runs` inferences / mark / `runs` inferences / mark, per workload and
    engine; returns the regions as {name, engine, runs, marks}."""
    mark = marker(counter)
    regions, label = [], 0
    for name in names:
        for engine, (sess, feeds) in _sessions(d, name).items():
            marks = marked_runs(sess, feeds, runs, WARMUP, mark, label)
            label = marks[-1]
            regions.append({"name": name, "engine": engine, "runs": runs, "marks": marks})
        print("  [%s] counted %s" % (counter, name), flush=True)
    return regions


# -------------------------------------------------------------------------- host side
def _tools():
    """edge/kernels/build.py as a module (paths of the counting tools), building them if needed."""
    spec = importlib.util.spec_from_file_location("oxk_build", os.path.join(ROOT, "edge", "kernels", "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stream(cmd: List[str], env: Dict[str, str], timeout: float) -> int:
    """Run cmd, echoing its output lines as they come; returns the exit status."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + timeout
    tail: List[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if not line.startswith("=="):   # valgrind's own chatter
            sys.stdout.write(line)
            sys.stdout.flush()
        tail = (tail + [line])[-30:]
        if time.time() > deadline:
            proc.kill()
            print("[neon] %s ran past %d s, stopped" % (cmd[0], timeout))
            break
    rc = proc.wait()
    if rc != 0:
        print("[neon] %s failed (exit %d):\n%s" % (cmd[0], rc, "".join(tail)))
    return rc


def _worker_cmd(d: str, names: Sequence[str], runs: int, counter: str) -> List[str]:
    return [os.path.abspath(__file__), "--worker", d, "--counter", counter, "--count-runs", str(runs),
            "--names"] + list(names)


def read_qemu_counts(path: str) -> Dict[int, int]:
    """{label: guest instructions executed before that marker} from the plugin's out= file."""
    marks: Dict[int, int] = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "mark":
                marks[int(parts[1])] = int(parts[2])
            elif parts and parts[0] == "dropped":
                raise RuntimeError("%s: the plugin dropped %s markers" % (path, parts[1]))
    return marks


def read_callgrind_counts(folder: str) -> Dict[int, int]:
    """{label: instructions before that marker}: the running sum of callgrind's per-marker dumps."""
    parts = []
    for fn in os.listdir(folder):
        if fn.startswith("cg.out."):
            label, total = None, None
            with open(os.path.join(folder, fn)) as f:
                for line in f:
                    if line.startswith("desc: Trigger: Client Request: oxk-mark "):
                        label = int(line.rsplit(" ", 1)[1])
                    elif line.startswith("totals:"):
                        total = int(line.split()[1])
            if label is not None and total is not None:
                parts.append((int(fn.rsplit(".", 1)[1]), label, total))
    marks, running = {}, 0
    for _, label, total in sorted(parts):
        running += total
        marks[label] = running
    return marks


def per_run(regions: List[dict], marks: Dict[int, int]) -> Dict[str, Dict[str, float]]:
    """{name: {cpu, neon, ratio, spread}} in instructions per inference from counted regions."""
    out: Dict[str, Dict[str, float]] = {}
    for r in regions:
        a, b, c = (marks[m] for m in r["marks"])
        s1, s2 = (b - a) / r["runs"], (c - b) / r["runs"]
        row = out.setdefault(r["name"], {})
        row[r["engine"]] = (s1 + s2) / 2
        row["spread"] = max(row.get("spread", 0.0), abs(s1 - s2) / max((s1 + s2) / 2, 1.0))
    for row in out.values():
        row["ratio"] = row["cpu"] / row["neon"]
    return out


def count_qemu(d: str, names: Sequence[str], runs: int) -> Optional[Dict[str, Dict[str, float]]]:
    """aarch64 instructions per inference, both providers under qemu-aarch64 -cpu cortex-a72."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import arm_stage
    stage = arm_stage.stage(os.path.join(d, "stage"))
    out = os.path.join(d, "qemu-insns.txt")
    env = dict(os.environ, PYTHONPATH=stage, QEMU_PLUGIN="%s,out=%s" % (_tools().QEMU_PLUGIN, out),
               QEMU_CPU="cortex-a72", **COUNT_ENV)
    cmd = [os.path.join(ROOT, "scripts", "qemu-python")] + _worker_cmd(d, names, runs, "qemu")
    if _stream(cmd, env, 1800) != 0:
        return None
    with open(os.path.join(d, "regions-qemu.json")) as f:
        return per_run(json.load(f), read_qemu_counts(out))


def count_callgrind(d: str, names: Sequence[str], runs: int) -> Optional[Dict[str, Dict[str, float]]]:
    """x86_64 instructions per inference natively (host build vs numpy), counted by callgrind."""
    if shutil.which("valgrind") is None or not os.path.exists(_tools().CALLGRIND_MARK):
        print("[neon] valgrind or the callgrind marker is missing (make setup-neon installs them)")
        return None
    folder = os.path.join(d, "callgrind")
    os.makedirs(folder, exist_ok=True)
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           "--callgrind-out-file=" + os.path.join(folder, "cg.out"), sys.executable] + \
        _worker_cmd(d, names, runs, "callgrind")
    if _stream(cmd, dict(os.environ, **COUNT_ENV), 1800) != 0:
        return None
    with open(os.path.join(d, "regions-callgrind.json")) as f:
        return per_run(json.load(f), read_callgrind_counts(folder))


# ------------------------------------------------------------------------- reporting
def table(report: dict) -> str:
    """Markdown table: instructions per inference and ratios (+ native wall-time ratio)."""
    q, n, w = report.get("qemu_insns") or {}, report.get("native_insns") or {}, report.get("native_ms") or {}
    lines = ["| workload | aarch64 insns numpy | aarch64 insns NEON | **ratio** | x86 insns numpy | "
             "x86 insns host build | **ratio** | native wall ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def cells(row: Optional[dict]) -> List[str]:
        if not row:
            return ["-", "-", "-"]
        return ["%.3g M" % (row["cpu"] / 1e6), "%.3g M" % (row["neon"] / 1e6), "**%.2fx**" % row["ratio"]]
    for name in report["names"]:
        wall = "%.2fx" % w[name]["ratio"] if name in w else "-"
        lines.append("| %s | %s | %s |" % (name, " | ".join(cells(q.get(name)) + cells(n.get(name))), wall))
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    """Bars per workload: aarch64 and x86 instruction ratios, native wall-time ratio (hatched)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    names = report["names"]
    series = [("qemu_insns", "aarch64 instructions: numpy / NEON build (qemu cortex-a72)", None),
              ("native_insns", "x86_64 instructions: numpy / host build (callgrind)", None),
              ("native_ms", "x86_64 wall time: numpy / host build (secondary, noisy)", "//")]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    xs = np.arange(len(names))
    for i, (key, label, hatch) in enumerate(series):
        data = report.get(key) or {}
        ax.bar(xs + (i - 1) * 0.27, [data.get(nm, {}).get("ratio", 0) for nm in names], 0.27, label=label,
               hatch=hatch, alpha=0.6 if hatch else 1.0)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("CPU provider / NEON provider (> 1: C kernels win)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.2gx"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.2gx"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_title("the C engine vs the numpy CPU provider, per inference, 1 thread")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Count (qemu, callgrind) and time (native) every workload; write neon.json and neon.png."""
    p = argparse.ArgumentParser(description="NEON provider vs numpy CPU provider: instruction ratios.")
    p.add_argument("--count-runs", type=int, default=3, help="inferences per counted region (two regions)")
    p.add_argument("--runs", type=int, default=10, help="timed native runs per engine (wall time)")
    p.add_argument("--no-qemu", action="store_true", help="skip the aarch64 count under qemu")
    p.add_argument("--no-callgrind", action="store_true", help="skip the native count under callgrind")
    p.add_argument("--names", nargs="+", default=WORKLOADS, choices=WORKLOADS, metavar="NAME")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--counter", choices=["qemu", "callgrind"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:   # inside qemu or valgrind: count regions, write regions-<counter>.json
        regions = count_regions(args.worker, args.names, args.count_runs, args.counter)
        with open(os.path.join(args.worker, "regions-%s.json" % args.counter), "w") as f:
            json.dump(regions, f)
        return 0
    t_start = time.time()
    built = subprocess.run([sys.executable, os.path.join(ROOT, "edge", "kernels", "build.py"), "--targets",
                            "tools"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if built.returncode != 0:
        print("[neon] cannot build the instruction counters, counting skipped:\n" + built.stderr[-2000:])
        args.no_qemu = args.no_callgrind = True
    report = {"machine": platform.machine(), "threads": 1, "names": list(args.names),
              "count_runs": args.count_runs,
              "method": "instructions per inference = (count at marker B - count at marker A) / runs, "
                        "after %d warm-up runs; ratio = CPU provider / NEON provider. aarch64: qemu-aarch64 "
                        "-cpu cortex-a72 TCG plugin; x86_64: valgrind callgrind (Ir). Instruction counts "
                        "are not Raspberry Pi timings." % WARMUP}
    with tempfile.TemporaryDirectory() as d:
        _prepare(d, args.names)
        from onnxedge.edge.neon import library
        report["native_backend"] = library.load().backend
        print("[neon] native wall time, host build of the C kernels (%s) vs numpy:" % report["native_backend"],
              flush=True)
        report["native_ms"] = time_models(d, args.names, args.runs, WARMUP)
        if not args.no_callgrind:
            print("[neon] native instruction counts under callgrind (host build vs numpy):", flush=True)
            report["native_insns"] = count_callgrind(d, args.names, args.count_runs)
        if not args.no_qemu:
            print("[neon] aarch64 instruction counts under qemu-aarch64 -cpu cortex-a72 (NEON build vs "
                  "numpy):", flush=True)
            report["qemu_insns"] = count_qemu(d, args.names, args.count_runs)
    report["elapsed_s"] = time.time() - t_start
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "neon.json"), "w") as f:
        json.dump(report, f, indent=2)
    plot(report, os.path.join(args.out, "neon.png"))
    print()
    print(table(report))
    print("\n[neon] wrote %s/neon.json and neon.png in %.0f s" % (args.out, report["elapsed_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
