"""Where onnxedge spends its time on a benchmark model, next to onnxruntime's per-op profile.

    python3 benchmarks/profile_ops.py resnet18 [--runs 5] [--threads 1] [--top 15]
    python3 benchmarks/profile_ops.py ops [--batch 1] [--runs 30] [-k dw]

Lists the hottest functions under cProfile, then times every kernel call (wrapped while the
session compiles, no kernel code changes) and sums the time by op type.
With onnxruntime installed, also prints its per-op-type time from `enable_profiling`.
`ops` instead times one-node models of the known slow paths (`OP_SHAPES`: MobileNet-v2
depthwise layers, ResNeXt grouped convolutions, ResNet's stem MaxPool, AveragePool, a 2x
upsampling ConvTranspose) in both engines, median ms and the ratio.
"""
from __future__ import annotations

import argparse
import cProfile
import glob
import json
import os
import pstats
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import models  # noqa: E402

HERE = os.path.join(ROOT, "benchmarks")


class _OpTimer:
    """Wraps every kernel a session compiles with a timer keyed by the node's op type.

    Patches `onnxedge.executor.compile_node` while the session is built; kernels are untouched."""

    def __init__(self, by_node: bool = False) -> None:
        self.by_node = by_node
        self.totals: Dict[str, List[float]] = {}

    def __enter__(self) -> "_OpTimer":
        from onnxedge import executor
        self._executor, self._orig = executor, executor.compile_node

        def compile_node(node, *a, **k):
            c = self._orig(node, *a, **k)
            op = node.op_type if not node.domain else "%s:%s" % (node.domain, node.op_type)
            c.fn = self._wrap("%s %s" % (op, node.name) if self.by_node else op, c.fn)
            return c

        executor.compile_node = compile_node
        return self

    def __exit__(self, *exc: object) -> None:
        self._executor.compile_node = self._orig

    def _wrap(self, op: str, fn):
        acc = self.totals.setdefault(op, [0, 0.0])
        clock = time.perf_counter

        def timed(*args, **kwargs):
            t = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[0] += 1
                acc[1] += clock() - t
        return timed


def _latencies(sess, feeds: dict, runs: int) -> List[float]:
    """Seconds per run over `runs` runs, after one warm-up run."""
    sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    return times


def profile_onnxedge(path: str, feeds: dict, runs: int, threads: int, top: int,
                     by_node: bool = False) -> Tuple[float, List[Tuple[str, int, float]]]:
    """Median ms per run, and [(op type, calls per run, ms per run)] sorted by time."""
    import onnxedge
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = onnxedge.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
    times = _latencies(sess, feeds, runs)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        sess.run(None, feeds)
    prof.disable()
    print("\n-- hottest functions by own time (%d cProfiled runs) --" % runs)
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)
    with _OpTimer(by_node) as timer:
        timed = onnxedge.InferenceSession(path, sess_options=opts,
                                          providers=["CPUExecutionProvider"])
    if not timer.totals:
        print("note: the per-op hook saw no kernels (did onnxedge.executor.compile_node change?)")
    per_run = []
    for _ in range(runs + 1):
        for acc in timer.totals.values():
            acc[:] = [0, 0.0]
        timed.run(None, feeds)
        per_run.append({k: (n, t * 1e3) for k, (n, t) in timer.totals.items()})
    rows = _median_rows(per_run[1:])
    times.sort()
    return times[len(times) // 2] * 1e3, rows


def profile_onnxruntime(path: str, feeds: dict, runs: int, threads: int,
                        by_node: bool = False) -> Tuple[float, List[Tuple[str, int, float]]]:
    """Median ms per run, and onnxruntime's [(op type, calls per run, ms per run)]."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
    times = _latencies(sess, feeds, runs)
    with tempfile.TemporaryDirectory() as tmp:
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            sess.run(None, feeds)
        sess.end_profiling()
        with open(glob.glob(os.path.join(tmp, "ort*.json"))[0]) as f:
            events = json.load(f)
    per_run: List[Dict[str, Tuple[int, float]]] = [{} for _ in range(runs + 1)]
    seen: Dict[str, int] = {}
    for ev in events:
        name = ev.get("name", "")
        if ev.get("cat") == "Node" and name.endswith("_kernel_time"):
            run = seen.get(name, 0)  # the k-th time a node shows up is run k
            seen[name] = run + 1
            op = ev["args"].get("op_name", "?")
            if by_node:
                op = "%s %s" % (op, name[:-len("_kernel_time")])
            if run < len(per_run):
                n, t = per_run[run].get(op, (0, 0.0))
                per_run[run][op] = (n + 1, t + ev["dur"] / 1e3)
    rows = _median_rows(per_run[1:])
    times.sort()
    return times[len(times) // 2] * 1e3, rows


def _median_rows(per_run: List[Dict[str, Tuple[int, float]]]) -> List[Tuple[str, int, float]]:
    """[(key, calls per run, median ms per run)] over runs, slowest first (medians resist the
    other processes of a busy machine better than means)."""
    keys = {k for r in per_run for k in r}
    rows = []
    for k in keys:
        vals = sorted(r.get(k, (0, 0.0))[1] for r in per_run)
        rows.append((k, per_run[-1].get(k, (0, 0.0))[0], vals[len(vals) // 2]))
    return sorted(rows, key=lambda r: -r[2])


def _table(title: str, median_ms: float, rows: List[Tuple[str, int, float]]) -> None:
    print("\n%s: median %.3g ms per untraced run" % (title, median_ms))
    print("| op (node) | calls/run | median ms/run | % of run |")
    print("|---|---|---|---|")
    for op, calls, ms in rows:
        print("| %s | %d | %.3g | %.0f%% |" % (op, calls, ms, 100.0 * ms / median_ms))


# (name, op, input shape at batch 1, weight shape or None, attributes)
OP_SHAPES = [
    ("dw 32x112x112 3x3 s1", "Conv", (1, 32, 112, 112), (32, 1, 3, 3),
     dict(group=32, pads=[1, 1, 1, 1])),
    ("dw 96x112x112 3x3 s2", "Conv", (1, 96, 112, 112), (96, 1, 3, 3),
     dict(group=96, pads=[1, 1, 1, 1], strides=[2, 2])),
    ("dw 144x56x56 3x3 s1", "Conv", (1, 144, 56, 56), (144, 1, 3, 3),
     dict(group=144, pads=[1, 1, 1, 1])),
    ("dw 384x14x14 3x3 s1", "Conv", (1, 384, 14, 14), (384, 1, 3, 3),
     dict(group=384, pads=[1, 1, 1, 1])),
    ("dw 960x7x7 3x3 s1", "Conv", (1, 960, 7, 7), (960, 1, 3, 3),
     dict(group=960, pads=[1, 1, 1, 1])),
    ("grouped 256x56x56 g32 s1", "Conv", (1, 256, 56, 56), (256, 8, 3, 3),
     dict(group=32, pads=[1, 1, 1, 1])),
    ("grouped 512x56x56 g32 s2", "Conv", (1, 512, 56, 56), (512, 16, 3, 3),
     dict(group=32, pads=[1, 1, 1, 1], strides=[2, 2])),
    ("MaxPool 64x112x112 3x3 s2 (stem)", "MaxPool", (1, 64, 112, 112), None,
     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool 64x56x56 3x3 s1 p1", "AveragePool", (1, 64, 56, 56), None,
     dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("AveragePool 128x56x56 2x2 s2", "AveragePool", (1, 128, 56, 56), None,
     dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("ConvTranspose 64x28x28 k4 s2 p1", "ConvTranspose", (1, 64, 28, 28), (64, 64, 4, 4),
     dict(strides=[2, 2], pads=[1, 1, 1, 1])),
]


def _op_model(op: str, x_shape: Sequence[int], w_shape: Optional[Sequence[int]],
              attrs: dict) -> bytes:
    """A one-node float32 model `op(x[, w, b])` with random weights as initializers."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.RandomState(0)
    inputs, inits = ["x"], []
    if w_shape is not None:
        m = w_shape[1] * attrs.get("group", 1) if op == "ConvTranspose" else w_shape[0]
        for name, arr in (("w", rng.standard_normal(w_shape) * 0.1), ("b", rng.standard_normal(m))):
            inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
            inputs.append(name)
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], **attrs)], op,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def profile_op_shapes(batch: int, runs: int, threads: int, only: str = "") -> None:
    """Median ms of each `OP_SHAPES` node in onnxedge and onnxruntime, as a markdown table."""
    import numpy as np
    import onnxedge
    import onnxruntime as ort
    eo = onnxedge.SessionOptions()
    eo.intra_op_num_threads = threads
    ro = ort.SessionOptions()
    ro.intra_op_num_threads = threads
    print("| node (batch %d, %d thread(s)) | onnxruntime ms | onnxedge ms | ratio | max abs diff |"
          % (batch, threads))
    print("|---|---:|---:|---:|---:|")
    for name, op, xs, ws, attrs in OP_SHAPES:
        if only and only not in name:
            continue
        data = _op_model(op, (batch,) + tuple(xs[1:]), ws, attrs)
        feeds = {"x": np.random.RandomState(1).standard_normal((batch,) + tuple(xs[1:]))
                 .astype(np.float32)}
        ref = ort.InferenceSession(data, sess_options=ro, providers=["CPUExecutionProvider"])
        edge = onnxedge.InferenceSession(data, sess_options=eo,
                                         providers=["CPUExecutionProvider"])
        diff = float(np.abs(ref.run(None, feeds)[0] - edge.run(None, feeds)[0]).max())
        t_ref = sorted(_latencies(ref, feeds, runs))[runs // 2] * 1e3
        t_edge = sorted(_latencies(edge, feeds, runs))[runs // 2] * 1e3
        print("| %s | %.3f | %.3f | %.2fx | %.1e |" % (name, t_ref, t_edge, t_edge / t_ref, diff),
              flush=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """CLI: profile one model with both engines and print per-op tables."""
    p = argparse.ArgumentParser(description="Per-op profile of onnxedge vs onnxruntime.")
    p.add_argument("model", choices=list(models.BUILDERS) + ["ops"],
                   help="a benchmark model, or `ops` for the one-node slow-path shapes")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--top", type=int, default=15, help="hottest functions to list")
    p.add_argument("--by-node", action="store_true", help="time each node, not each op type")
    p.add_argument("--model-dir", default=os.path.join(HERE, "build"))
    p.add_argument("-k", dest="only", default="", help="ops: only shapes whose name has this")
    args = p.parse_args(argv)
    if args.model == "ops":
        profile_op_shapes(args.batch, max(args.runs, 30), args.threads, args.only)
        return
    path = models.build_all(args.model_dir, [args.model])[args.model]
    feeds = models.make_inputs(args.model, batch=args.batch)
    edge = profile_onnxedge(path, feeds, args.runs, args.threads, args.top, args.by_node)
    try:
        ref = profile_onnxruntime(path, feeds, args.runs, args.threads, args.by_node)
    except ImportError:
        ref = None
    _table("onnxedge (timed kernels)", *edge)
    if ref is not None:
        _table("onnxruntime (enable_profiling, after its graph fusions)", *ref)
        print("\nratio onnxedge / onnxruntime (median, untraced runs): %.2fx"
              % (edge[0] / ref[0]))


if __name__ == "__main__":
    main()
