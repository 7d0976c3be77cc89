"""Child process of test_runtime_budgets.py: builds small models whose nodes ask for huge tensors
or never-ending loops, runs them under an address-space limit and prints one JSON line per case
(error type, message, seconds, peak RSS growth). Run as `python budget_child.py MODE [CASE]`."""
from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import onnxedge as oe  # noqa: E402
from modelgen import single_node_model  # noqa: E402

HEADROOM = 1 << 30          # address space allowed beyond what the process holds at start
BIG = 1 << 20               # one side of a 2^40-element request
I64 = np.int64
F32 = np.float32


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_address_space() -> None:
    """RLIMIT_AS: what the process maps now plus HEADROOM, so nothing can take gigabytes."""
    soft = _vm_bytes() + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))


def maxrss_bytes() -> int:
    """This process's peak resident size: VmHWM (its own; ru_maxrss keeps the parent's peak
    across exec on Linux, which would hide growth under a big pytest parent)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def options(**config: str) -> "oe.SessionOptions":
    so = oe.SessionOptions()
    for key, value in config.items():
        so.add_session_config_entry(key.replace("_", ".", 1), value)
    return so


def outcome(name: str, fn) -> dict:
    """Run fn(); the error it raised (or none), how long it took and the RSS it grew by."""
    before, t0 = maxrss_bytes(), time.monotonic()
    err_type, msg = None, ""
    try:
        fn()
    except Exception as e:  # the test judges the type and message
        err_type, msg = type(e).__name__, str(e)
    return {"case": name, "error": err_type, "message": msg[:2000],
            "seconds": time.monotonic() - t0, "rss_growth": maxrss_bytes() - before}


# ------------------------------------------------------------------ kernels asking for too much

def kernel_models() -> dict:
    """name -> (model bytes, feeds, config): single nodes whose constant inputs ask for ~2^40
    elements (and one asking 8 MiB under a 1 MiB budget)."""
    x4 = np.zeros((1, 1, 2, 2), F32)
    m = {
        "ConstantOfShape": single_node_model(
            "ConstantOfShape", {}, ["y"], initializers={"s": np.array([BIG, BIG], I64)},
            value=numpy_helper.from_array(np.array([1.0], F32), "v")),
        "Expand": single_node_model("Expand", {"x": np.zeros((1, 1), F32)}, ["y"],
                                    initializers={"s": np.array([BIG, BIG], I64)}),
        "Tile": single_node_model("Tile", {"x": np.zeros((2, 2), F32)}, ["y"],
                                  initializers={"r": np.array([BIG, BIG], I64)}),
        "Range": single_node_model("Range", {}, ["y"], initializers={
            "a": np.array(0, F32), "b": np.array(1e13, F32), "d": np.array(1, F32)}),
        "RangeInt64Max": single_node_model("Range", {}, ["y"], initializers={
            "a": np.array(0, I64), "b": np.array(np.iinfo(I64).max, I64), "d": np.array(1, I64)}),
        "Resize": single_node_model("Resize", {"x": x4}, ["y"], opset=13, initializers={
            "roi": np.zeros(0, F32), "scales": np.array([1, 1, 1e6, 1e6], F32)}),
        "Upsample": single_node_model("Upsample", {"x": x4}, ["y"], opset=9, initializers={
            "scales": np.array([1, 1, 1e6, 1e6], F32)}),
        "Pad": single_node_model("Pad", {"x": np.zeros((2, 2), F32)}, ["y"], opset=13,
                                 initializers={"p": np.array([0, 0, BIG, BIG], I64)}),
        "OneHot": single_node_model("OneHot", {"i": np.zeros(4, I64)}, ["y"], opset=11,
                                    initializers={"d": np.array(1 << 40, I64),
                                                  "v": np.array([0, 1], F32)}),
    }
    cases = {k: (v, {}, {}) for k, v in m.items()}
    feeds = {"Expand": {"x": np.zeros((1, 1), F32)}, "Tile": {"x": np.zeros((2, 2), F32)},
             "Resize": {"x": x4}, "Upsample": {"x": x4}, "Pad": {"x": np.zeros((2, 2), F32)},
             "OneHot": {"i": np.zeros(4, I64)}}
    for k, f in feeds.items():
        cases[k] = (m[k], f, {})
    small = single_node_model("ConstantOfShape", {}, ["y"], initializers={
        "s": np.array([2 << 20], I64)})   # 8 MiB of float32
    cases["ConstantOfShapeOverSessionBudget"] = (small, {}, {"session_max_tensor_bytes": str(1 << 20)})
    return cases


def run_kernels() -> None:
    cases = kernel_models()
    limit_address_space()
    for name, (model, feeds, config) in cases.items():
        def go(model=model, feeds=feeds, config=config):
            sess = oe.InferenceSession(model, options(**config))
            sess.run(None, feeds)
        print(json.dumps(outcome(name, go)), flush=True)


# ------------------------------------------------------------------ constant folding

def folding_models() -> dict:
    """A 1.6 GB ConstantOfShape (a model of ~150 bytes) and a 1.6 GB broadcast Add of two 80 KB
    constants, each feeding a node with a graph input so that folding would keep them."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    cos = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["c"],
                          value=numpy_helper.from_array(np.array([1.0], F32), "v")),
         helper.make_node("Add", ["c", "x"], ["y"])],
        "g", [x], [y], [numpy_helper.from_array(np.array([400_000_000], I64), "s")])
    n = 20000
    outer = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        "g", [x], [y], [numpy_helper.from_array(np.ones((n, 1), F32), "a"),
                        numpy_helper.from_array(np.ones((1, n), F32), "b")])
    out = {}
    for name, graph in (("ConstantOfShape", cos), ("BroadcastAdd", outer)):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        out[name] = model.SerializeToString()
    return out


def run_folding() -> None:
    """One model per process (the peak RSS only ever grows): the one named in argv[2]."""
    for name, model in folding_models().items():
        if name != sys.argv[2]:
            continue
        result = {}

        def go(model=model, result=result):
            sess = oe.InferenceSession(model)
            result["ops"] = [n.op_type for n in sess.model.graph.nodes]
        rec = outcome(name, go)
        rec.update(result, model_bytes=len(model))
        print(json.dumps(rec), flush=True)


# ------------------------------------------------------------------ loops that never end

def loop_model(trip_count: bool = True, body_nodes: bool = True, scan_bytes: int = 0) -> bytes:
    """Loop with trip count 2^62 (or none) and an always-true condition, carrying v += 1; with
    scan_bytes, each iteration also emits a fresh float32 tensor of that size as a scan output."""
    vi = helper.make_tensor_value_info
    b_in = [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []),
            vi("v", TensorProto.FLOAT, [1])]
    nodes, b_out = [], [vi("cond", TensorProto.BOOL, []), vi("v", TensorProto.FLOAT, [1])]
    if body_nodes:
        nodes = [helper.make_node("Identity", ["cond"], ["cond_out"]),
                 helper.make_node("Add", ["v", "one"], ["v_out"])]
        b_out = [vi("cond_out", TensorProto.BOOL, []), vi("v_out", TensorProto.FLOAT, [1])]
    if scan_bytes:
        nodes.append(helper.make_node("Add", ["big", "v"], ["s_out"]))
        b_out.append(vi("s_out", TensorProto.FLOAT, [scan_bytes // 4]))
    body = helper.make_graph(nodes, "body", b_in, b_out)
    outs = ["v_final"] + (["scan"] if scan_bytes else [])
    loop = helper.make_node("Loop", ["M" if trip_count else "", "c0", "v0"], outs, body=body,
                            name="the_loop")
    init = [numpy_helper.from_array(np.array(1 << 62, I64), "M"),
            numpy_helper.from_array(np.array(True), "c0"),
            numpy_helper.from_array(np.zeros(1, F32), "v0"),
            numpy_helper.from_array(np.ones(1, F32), "one"),
            numpy_helper.from_array(np.ones(max(scan_bytes // 4, 1), F32), "big")]
    graph = helper.make_graph([loop], "g", [], [vi(o, TensorProto.FLOAT, None) for o in outs],
                              init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    return model.SerializeToString()


def run_loops() -> None:
    models = {"body": loop_model(), "no_trip_count": loop_model(trip_count=False),
              "empty_body": loop_model(body_nodes=False),
              "scan": loop_model(scan_bytes=1 << 20)}
    limit_address_space()

    def terminate_after(opts, seconds):
        timer = threading.Timer(seconds, lambda: setattr(opts, "terminate", True))
        timer.daemon = True
        timer.start()

    for name in ("body", "no_trip_count", "empty_body"):
        def by_terminate(model=models[name]):
            sess = oe.InferenceSession(model)
            ro = oe.RunOptions()
            terminate_after(ro, 0.3)
            sess.run(None, {}, ro)
        print(json.dumps(outcome("terminate/" + name, by_terminate)), flush=True)

        def by_run_option(model=models[name]):
            ro = oe.RunOptions()
            ro.run_timeout_ms = 300
            oe.InferenceSession(model).run(None, {}, ro)
        print(json.dumps(outcome("run_timeout_ms/" + name, by_run_option)), flush=True)

    def by_session_config():
        sess = oe.InferenceSession(models["body"], options(session_run_timeout_ms="300"))
        sess.run(None, {})
    print(json.dumps(outcome("session_config_timeout", by_session_config)), flush=True)

    def scan_budget():
        sess = oe.InferenceSession(models["scan"],
                                   options(session_max_tensor_bytes=str(32 << 20)))
        sess.run(None, {})
    print(json.dumps(outcome("scan_budget", scan_budget)), flush=True)


if __name__ == "__main__":
    {"kernels": run_kernels, "folding": run_folding, "loops": run_loops}[sys.argv[1]]()
