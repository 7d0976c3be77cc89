"""aarch64: onnxedge vs onnxruntime's own aarch64 wheel, instructions per inference under qemu.

The Raspberry Pi's stand-in for a speed comparison until a Pi is at hand (issue #16). Three
engines run the same models in the aarch64 CPython of the ARM sysroot (`scripts/arm_sysroot.sh`:
Debian's arm64 CPython 3.11, numpy's and onnxruntime's manylinux aarch64 wheels from PyPI) under
`qemu-aarch64 -cpu cortex-a72` (a Pi 4's core), one thread, batch 1:
- `neon`: onnxedge, providers ["NeonExecutionProvider", "CPUExecutionProvider"] (the C kernels'
  aarch64 NEON build, edge/neon/lib/aarch64/);
- `cpu`: onnxedge, providers ["CPUExecutionProvider"] (the numpy kernels);
- `ort`: onnxruntime's CPUExecutionProvider (MLAS), intra_op_num_threads=1, default graph
  optimizations.
The TCG plugin of benchmarks/neon.py (edge/kernels/tools/qemu_insn_count.c) counts the guest
instructions between markers: after warm-up runs, mark / N runs / mark / N runs / mark per engine
and model, so interpreter start-up, imports and session creation are not counted. Inside the same
run the worker compares the engines' outputs (onnxedge NEON and numpy against onnxruntime).

Models: the MLP (benchmarks/models.py), the small CNN of benchmarks/neon.py, and the benchmark
models reduced to what finishes under TCG: ResNet-18 at 64x64 input instead of 224x224 (same
layers, ~1/12 of the work), MobileNet-v2 at 112x112 instead of 224x224 (same layers, 1/4 of the
work), the BERT-style encoder at sequence length 32 instead of 128, and the QDQ int8 CNN as it
is; the real-model-shaped rows of benchmarks/real_models.py as they are (vad_lstm, crnn_lstm, and
yolo_silu / dbnet_hswish at their 256x256: ~5-30 s per emulated inference, so one inference per
counted region and two warm-up runs); `--full` adds ResNet-18 at 224x224 and the encoder at 128 (`resnet18`,
`bert_encoder`: ~20 s and ~5 s per emulated inference, one inference per counted region).
`make bench` runs it (benchmarks/run.py) after benchmarks/neon.py; without the ARM sysroot it
says why and does nothing.

Instruction counts are not Raspberry Pi timings: a NEON instruction does 4 lanes of work, loads
that miss the cache cost dozens of ALU instructions, and MLAS and onnxedge use the memory system
differently. Writes benchmarks/results/aarch64.json and aarch64.png and prints a table.

    python benchmarks/aarch64_ort.py [--count-runs 2] [--full] [--names mlp resnet18_64px ...]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import neon  # noqa: E402  (the marker, the plugin's reader, the tools' paths)

ARM = os.environ.get("ARM_DIR", os.path.join(ROOT, ".arm"))
QEMU_PY = os.path.join(ROOT, "scripts", "qemu-python")
MODELS = ["mlp", "small_cnn_32px", "resnet18_64px", "mobilenet_v2_112px", "bert_encoder_seq32", "qdq_cnn",
          "vad_lstm", "crnn_lstm", "yolo_silu", "dbnet_hswish"]
REAL_MODELS = ["vad_lstm", "crnn_lstm", "yolo_silu", "dbnet_hswish"]   # benchmarks/real_models.py
FULL_SIZE = ["resnet18", "bert_encoder"]   # 224x224 / sequence 128: --full (~20 s / 5 s per inference)
ENGINES = ["neon", "cpu", "ort"]
ONNXEDGE_PROVIDERS = {"neon": ["NeonExecutionProvider", "CPUExecutionProvider"],
                      "cpu": ["CPUExecutionProvider"]}
RESNET_PX = 64
MOBILENET_PX = 112
BERT_SEQ = 32
# warm-up runs before counting: the plan / program caches of onnxedge and onnxruntime's first-run
# allocations settle within a couple of runs; the big models keep it short (TCG is slow)
WARMUP = {"mlp": 10, "small_cnn_32px": 10, "qdq_cnn": 10, "resnet18_64px": 3, "bert_encoder_seq32": 3,
          "mobilenet_v2_112px": 3, "vad_lstm": 10, "crnn_lstm": 3, "yolo_silu": 2, "dbnet_hswish": 2,
          "resnet18": 2, "bert_encoder": 2}
# inferences per counted region at most (slow models)
MAX_RUNS = {"resnet18": 1, "bert_encoder": 1, "yolo_silu": 1, "dbnet_hswish": 1}


# ------------------------------------------------------------------------------ models (host)
def _cnn_small(name: str, px: int):
    """benchmarks/models.py's `name` CNN (resnet18, mobilenet_v2) with a px x px input (same weights
    and layers; the global pool makes the classifier independent of the resolution)."""
    from benchmarks import models
    model = models.build(name)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_value = 1
    dims[2].dim_value = dims[3].dim_value = px
    x = np.random.default_rng(0).standard_normal((1, 3, px, px)).astype(np.float32)
    return model, {"input": x}


def _bert_short(seq: int):
    """benchmarks/models.py's BERT-style encoder at sequence length `seq` (position ids cut to
    seq; the last seq // 4 tokens masked, as make_inputs pads a row's tail)."""
    from onnx import numpy_helper
    from benchmarks import models
    model = models.build("bert_encoder")
    for i, t in enumerate(model.graph.initializer):
        if t.name == "embeddings.position_ids":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                np.arange(seq, dtype=np.int64).reshape(1, seq), t.name))
    for vi in list(model.graph.input) + list(model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        dims[0].dim_value = 1
        dims[1].dim_value = seq
    rng = np.random.default_rng(0)
    mask = np.ones((1, seq), np.int64)
    mask[:, seq - seq // 4:] = 0
    return model, {"input_ids": rng.integers(0, models.BERT_VOCAB, (1, seq)).astype(np.int64),
                   "attention_mask": mask}


def build(name: str):
    """(onnx ModelProto, feeds) of one model of this benchmark (host only: needs `onnx`)."""
    import onnx
    from benchmarks import models
    if name == "mlp":
        model, feeds = models.build("mlp"), models.make_inputs("mlp", batch=1)
    elif name == "small_cnn_32px":
        model, feeds = neon._build(name)
    elif name == "resnet18_64px":
        model, feeds = _cnn_small("resnet18", RESNET_PX)
    elif name == "mobilenet_v2_112px":
        model, feeds = _cnn_small("mobilenet_v2", MOBILENET_PX)
    elif name == "bert_encoder_seq32":
        model, feeds = _bert_short(BERT_SEQ)
    elif name in ["qdq_cnn", "resnet18", "bert_encoder"] + REAL_MODELS:
        model, feeds = models.build(name), models.make_inputs(name, batch=1)
    else:
        raise KeyError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
    if name in ("resnet18_64px", "mobilenet_v2_112px", "bert_encoder_seq32"):   # reshaped here: check shapes again
        onnx.checker.check_model(model, full_check=True)
    return model, feeds


def prepare(d: str, names: Sequence[str]) -> Dict[str, np.ndarray]:
    """Write DIR/<name>.onnx (onnxruntime), .oxe (onnxedge: the sysroot has no `onnx` package) and
    .npz (feeds) per model; returns host onnxruntime's first output per model."""
    import onnxruntime
    from onnxedge import model_io
    host = {}
    for name in names:
        model, feeds = build(name)
        data = model.SerializeToString()
        with open(os.path.join(d, name + ".onnx"), "wb") as f:
            f.write(data)
        model_io.save(model_io.load(data), os.path.join(d, name + ".oxe"))
        np.savez(os.path.join(d, name + ".npz"), **feeds)
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1
        host[name] = onnxruntime.InferenceSession(data, opts, providers=["CPUExecutionProvider"]) \
            .run(None, feeds)[0]
    return host


# ------------------------------------------------------------------------ worker (under qemu)
def session(d: str, name: str, engine: str):
    """An InferenceSession of `engine` on model `name` saved in `d`, one thread."""
    if engine == "ort":
        import onnxruntime
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        return onnxruntime.InferenceSession(os.path.join(d, name + ".onnx"), opts,
                                            providers=["CPUExecutionProvider"])
    import onnxedge
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.add_session_config_entry("session.cpu_engine", "0")   # "cpu" means the numpy kernels
    po = [{"intra_op_num_threads": 1}, {}] if engine == "neon" else None
    return onnxedge.InferenceSession(os.path.join(d, name + ".oxe"), opts,
                                     providers=ONNXEDGE_PROVIDERS[engine], provider_options=po)


def agreement(got: np.ndarray, ref: np.ndarray) -> float:
    """Largest |got - ref| relative to ref's magnitude (max |ref|, at least 1); for integer
    outputs (the QDQ model's int8 logits) the largest difference in steps."""
    if got.shape != ref.shape:
        return float("inf")
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    if np.issubdtype(ref.dtype, np.integer):
        return float(diff.max(initial=0.0))
    return float(diff.max(initial=0.0) / max(float(np.abs(ref).max(initial=0.0)), 1.0))


def count_regions(d: str, names: Sequence[str], runs: int) -> Tuple[List[dict], dict]:
    """Per model and engine: warm up, then mark / runs / mark / runs / mark; keep the outputs and
    compare each onnxedge engine with onnxruntime. Returns (regions, checks)."""
    mark = neon.marker("qemu")
    regions, checks, label = [], {}, 0
    for name in names:
        feeds = dict(np.load(os.path.join(d, name + ".npz")))
        outs, n = {}, min(runs, MAX_RUNS.get(name, runs))
        for engine in ENGINES:
            t0 = time.time()
            sess = session(d, name, engine)
            marks = neon.marked_runs(sess, feeds, n, WARMUP.get(name, 3), mark, label)
            label = marks[-1]
            outs[engine] = np.asarray(sess.run(None, feeds)[0])
            np.save(os.path.join(d, "out_%s_%s.npy" % (name, engine)), outs[engine])
            regions.append({"name": name, "engine": engine, "runs": n, "marks": marks})
            if engine != "ort":
                report = sess.partition_report()
                on_neon = sum(r["provider"] == "NeonExecutionProvider" for r in report)
                checks.setdefault(name, {})["%s_nodes_on_neon" % engine] = on_neon
                checks[name]["nodes"] = len(report)
                if engine == "neon":   # op types the NEON session left to numpy (what to look at first)
                    off: Dict[str, int] = {}
                    for r in report:
                        if r["provider"] != "NeonExecutionProvider":
                            off[r["op_type"]] = off.get(r["op_type"], 0) + 1
                    checks[name]["neon_off_ops"] = off
            del sess
            print("  [aarch64] %-20s %-4s counted (%.0f s emulated)" % (name, engine, time.time() - t0),
                  flush=True)
        for engine in ("neon", "cpu"):
            checks[name]["%s_vs_ort" % engine] = agreement(outs[engine], outs["ort"])
    return regions, checks


def worker(d: str, names: Sequence[str], runs: int) -> None:
    """Inside qemu: count every model and engine; write DIR/regions-aarch64.json."""
    import onnxruntime
    from onnxedge.edge.neon import library
    regions, checks = count_regions(d, names, runs)
    info = {"machine": platform.machine(), "python": platform.python_version(), "numpy": np.__version__,
            "onnxruntime": onnxruntime.__version__, "onnxedge_backend": library.load().backend}
    with open(os.path.join(d, "regions-aarch64.json"), "w") as f:
        json.dump({"regions": regions, "checks": checks, "guest": info}, f)


# -------------------------------------------------------------------------- host side
def per_run(regions: List[dict], marks: Dict[int, int]) -> Dict[str, Dict[str, float]]:
    """{model: {engine: instructions per inference, "spread": worst gap between the two regions,
    "neon_vs_ort", "cpu_vs_ort": onnxedge / onnxruntime}}."""
    out: Dict[str, Dict[str, float]] = {}
    for r in regions:
        a, b, c = (marks[m] for m in r["marks"])
        s1, s2 = (b - a) / r["runs"], (c - b) / r["runs"]
        row = out.setdefault(r["name"], {"spread": 0.0})
        row[r["engine"]] = (s1 + s2) / 2
        row["spread"] = max(row["spread"], abs(s1 - s2) / max((s1 + s2) / 2, 1.0))
    for row in out.values():
        if row.get("ort"):
            for engine in ("neon", "cpu"):
                if engine in row:
                    row[engine + "_vs_ort"] = row[engine] / row["ort"]
    return out


def count(d: str, names: Sequence[str], runs: int, timeout: float) -> Optional[dict]:
    """Run the worker under qemu-aarch64 -cpu cortex-a72 with the counting plugin; the parsed
    regions (per_run) and the worker's checks, or None when it failed."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import arm_stage
    stage = arm_stage.stage(os.path.join(d, "stage"))
    out = os.path.join(d, "qemu-insns.txt")
    env = dict(os.environ, PYTHONPATH=stage, QEMU_PLUGIN="%s,out=%s" % (neon._tools().QEMU_PLUGIN, out),
               QEMU_CPU="cortex-a72", ARM_DIR=ARM, **neon.COUNT_ENV)
    cmd = [QEMU_PY, os.path.abspath(__file__), "--worker", d, "--count-runs", str(runs), "--names"] + list(names)
    if neon._stream(cmd, env, timeout) != 0:
        return None
    with open(os.path.join(d, "regions-aarch64.json")) as f:
        got = json.load(f)
    return {"insns": per_run(got["regions"], neon.read_qemu_counts(out)), "checks": got["checks"],
            "guest": got["guest"]}


def table(report: dict) -> str:
    """Markdown table: instructions per inference of the three engines and the ratios."""
    lines = ["| model | onnxruntime aarch64 | onnxedge NEON | onnxedge numpy | **NEON / ORT** | numpy / ORT "
             "| NEON nodes | NEON vs ORT output |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in report["names"]:
        row, chk = report["insns"].get(name), report["checks"].get(name, {})
        if not row:
            lines.append("| %s | - | - | - | - | - | - | - |" % name)
            continue
        unit = "steps" if name == "qdq_cnn" else "rel"
        lines.append("| %s | %.3g M | %.3g M | %.3g M | **%.2fx** | %.2fx | %s / %s | %.1e %s |" % (
            name, row["ort"] / 1e6, row["neon"] / 1e6, row["cpu"] / 1e6, row["neon_vs_ort"], row["cpu_vs_ort"],
            chk.get("neon_nodes_on_neon", "?"), chk.get("nodes", "?"), chk.get("neon_vs_ort", float("nan")), unit))
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    """Bars per model: onnxedge / onnxruntime instructions per inference (NEON and numpy)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    names = [n for n in report["names"] if n in report["insns"]]
    xs = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(11, 4.4))
    for i, (engine, label) in enumerate([("neon", "onnxedge NEON provider / onnxruntime"),
                                         ("cpu", "onnxedge numpy CPU provider / onnxruntime")]):
        vals = [report["insns"][n][engine + "_vs_ort"] for n in names]
        bars = ax.bar(xs + (i - 0.5) * 0.38, vals, 0.38, label=label)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, "%.2fx" % v, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=15, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.2gx"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.2gx"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    top = max(report["insns"][n][e + "_vs_ort"] for n in names for e in ("neon", "cpu"))
    ax.set_ylim(top=top * 1.8)   # room for the legend above the bars
    ax.set_ylabel("instructions per inference, onnxedge / onnxruntime\n(< 1: onnxedge needs fewer)",
                  fontsize=8)
    ax.set_title("aarch64 (qemu-aarch64 -cpu cortex-a72, 1 thread, batch 1): onnxedge vs onnxruntime %s"
                 % report.get("guest", {}).get("onnxruntime", ""), fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def missing() -> Optional[str]:
    """Why this benchmark cannot run here (no sysroot, no onnxruntime in it, no aarch64 library),
    or None."""
    if not os.path.exists(os.path.join(ARM, "sysroot", "usr", "bin", "python3.11")):
        return "no aarch64 sysroot at %s (make setup-neon)" % ARM
    if not os.path.isdir(os.path.join(ARM, "site", "onnxruntime")):
        return "no onnxruntime in %s/site (scripts/arm_sysroot.sh installs its aarch64 wheel)" % ARM
    lib = os.path.join(ROOT, "edge", "neon", "lib", "aarch64", "libonnxedge_kernels.so")
    if not os.path.exists(lib):
        return "no aarch64 build of the C kernels at %s (edge/kernels/build.py)" % lib
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Count every model under qemu for the three engines; write aarch64.json / .png, print a table."""
    p = argparse.ArgumentParser(description="aarch64 instructions per inference: onnxedge vs onnxruntime.")
    p.add_argument("--count-runs", type=int, default=2, help="inferences per counted region (two regions)")
    p.add_argument("--names", nargs="+", default=MODELS, choices=MODELS + FULL_SIZE, metavar="NAME")
    p.add_argument("--full", action="store_true", help="also ResNet-18 at 224x224 and the encoder at 128")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--timeout", type=float, default=3600, help="seconds the qemu run may take")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.names, args.count_runs)
        return 0
    if args.full:
        args.names = list(args.names) + [n for n in FULL_SIZE if n not in args.names]
    why = missing()
    if why:
        print("[aarch64] skipped: " + why)
        return 0
    built = subprocess.run([sys.executable, os.path.join(ROOT, "edge", "kernels", "build.py"), "--targets",
                            "tools"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if built.returncode != 0:
        print("[aarch64] cannot build the instruction counter:\n" + built.stderr[-2000:])
        return 1
    t_start = time.time()
    report = {"names": list(args.names), "threads": 1, "batch": 1, "count_runs": args.count_runs,
              "warmup": {n: WARMUP[n] for n in args.names}, "host": platform.machine(),
              "variants": {"resnet18_64px": "benchmarks/models.py resnet18 at %dx%d input (224x224 is too "
                                            "slow under TCG)" % (RESNET_PX, RESNET_PX),
                           "mobilenet_v2_112px": "benchmarks/models.py mobilenet_v2 at %dx%d input (same "
                                                 "layers, 1/4 of the 224x224 work)" % (MOBILENET_PX, MOBILENET_PX),
                           "bert_encoder_seq32": "benchmarks/models.py bert_encoder at sequence %d "
                                                 "(128 is too slow under TCG)" % BERT_SEQ},
              "method": "instructions per inference = (count at marker B - count at marker A) / runs, "
                        "two regions per engine after warm-up, counted by a TCG plugin in qemu-aarch64 "
                        "-cpu cortex-a72; ratio = onnxedge / onnxruntime (< 1: onnxedge executes fewer "
                        "instructions). Instruction counts are not Raspberry Pi timings."}
    with tempfile.TemporaryDirectory() as d:
        print("[aarch64] models: %s" % ", ".join(args.names), flush=True)
        host = prepare(d, args.names)
        print("[aarch64] counting under qemu-aarch64 -cpu cortex-a72 (onnxedge NEON, onnxedge numpy, "
              "onnxruntime aarch64):", flush=True)
        got = count(d, args.names, args.count_runs, args.timeout)
        if got is None:
            return 1
        report.update(got)
        for name in args.names:   # the aarch64 onnxruntime against the host's, as a sanity check
            ort = np.load(os.path.join(d, "out_%s_ort.npy" % name))
            report["checks"][name]["ort_aarch64_vs_host"] = agreement(ort, host[name])
    bad = {n: c for n, c in report["checks"].items()
           if max(c["neon_vs_ort"], c["cpu_vs_ort"]) > (1.0 if n == "qdq_cnn" else 1e-3)}
    report["outputs_agree"] = not bad
    report["elapsed_s"] = time.time() - t_start
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "aarch64.json"), "w") as f:
        json.dump(report, f, indent=2)
    plot(report, os.path.join(args.out, "aarch64.png"))
    print()
    print(table(report))
    if bad:
        print("\n[aarch64] OUTPUTS DISAGREE with onnxruntime: %s" % json.dumps(bad))
    print("\n[aarch64] wrote %s/aarch64.json and aarch64.png in %.0f s" % (args.out, report["elapsed_s"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
