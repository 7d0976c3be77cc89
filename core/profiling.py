"""Run profiles in onnxruntime's format: a Chrome trace (a JSON array of complete events) with
one "Session" event per run and one "Node" event per node, naming op, provider and the input and
output types and shapes. The file opens in Perfetto or chrome://tracing, and tools written for
onnxruntime's profiles read it.

A session with `SessionOptions.enable_profiling` owns a `Profiler`; while it runs, the profiler is
this thread's `current()`, which the executor asks for per node (a step of another provider is
one event naming its nodes). `InferenceSession.end_profiling()` writes the file.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

_LOCAL = threading.local()

# numpy dtype names -> the element names onnxruntime's profiles use in "input_type_shape"
_ORT_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "float16",
                   "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
                   "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
                   "bool": "bool", "object": "string", "bfloat16": "bfloat16"}


def now_us() -> float:
    """Microseconds on the profiler's clock."""
    return time.perf_counter_ns() / 1000.0


def type_shape(value: Any) -> Dict[str, Any]:
    """{element type: shape} of a value, as onnxruntime writes it ({"seq": n} for sequences)."""
    if isinstance(value, np.ndarray):
        return {_ORT_TYPE_NAMES.get(value.dtype.name, value.dtype.name): list(value.shape)}
    if isinstance(value, list):
        return {"seq": len(value)}
    if value is None:
        return {"none": []}
    return {type(value).__name__: []}


class Profiler:
    """Collects one session's events; `write` saves them as onnxruntime's JSON."""

    def __init__(self, prefix: str = "onnxruntime_profile_"):
        self.prefix = prefix or "onnxruntime_profile_"
        self.origin = now_us()
        self.events: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def add(self, cat: str, name: str, start_us: float, end_us: float,
            args: Optional[Dict[str, Any]] = None) -> None:
        """Record one complete ("X") event."""
        event = {"cat": cat, "pid": self.pid, "tid": threading.get_ident() % 2 ** 31,
                 "dur": int(round(end_us - start_us)), "ts": int(round(start_us - self.origin)),
                 "ph": "X", "name": name, "args": args or {}}
        with self._lock:
            self.events.append(event)

    def node(self, node: Any, provider: str, start_us: float, end_us: float,
             inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """Record a node's kernel time with its op, provider and types and shapes."""
        self.add("Node", "%s_kernel_time" % (node.name or node.op_type), start_us, end_us, {
            "op_name": node.op_type, "provider": provider,
            "input_type_shape": [type_shape(v) for v in inputs],
            "output_type_shape": [type_shape(v) for v in outputs]})

    def step(self, nodes: Sequence[Any], provider: str, start_us: float, end_us: float) -> None:
        """Record a step another provider ran as one event (its nodes are not timed apart)."""
        names = [n.name or n.op_type for n in nodes]
        label = names[0] if len(names) == 1 else "%s..%s" % (names[0], names[-1])
        self.add("Node", "%s_kernel_time" % label, start_us, end_us, {
            "op_name": nodes[0].op_type if len(nodes) == 1 else "%d nodes" % len(nodes),
            "provider": provider, "nodes": names,
            "op_types": [n.op_type for n in nodes]})

    def write(self, folder: str = ".") -> str:
        """Write the profile as `<prefix><timestamp>.json` in `folder`; returns its path."""
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        path = os.path.join(folder, "%s%s.json" % (self.prefix, stamp))
        n = 1
        while os.path.exists(path):
            n += 1
            path = os.path.join(folder, "%s%s_%d.json" % (self.prefix, stamp, n))
        with self._lock:
            events = list(self.events)
        import json   # here, not at import: the page need not compile json's sources
        with open(path, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in events) + "\n]\n")
        return path


def current() -> Optional[Profiler]:
    """The profiler of the run on this thread, or None."""
    return getattr(_LOCAL, "profiler", None)


class active:
    """Context manager: make `profiler` this thread's current one for a run (None: no-op)."""

    def __init__(self, profiler: Optional[Profiler]):
        self.profiler = profiler
        self.saved: Optional[Profiler] = None

    def __enter__(self) -> Optional[Profiler]:
        self.saved = current()
        _LOCAL.profiler = self.profiler
        return self.profiler

    def __exit__(self, *exc: Any) -> None:
        _LOCAL.profiler = self.saved


def summarize(events: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per (op, provider): calls, total and mean microseconds and share of node time, slowest
    first (the table `onnxedge profile` prints)."""
    rows: Dict[tuple, Dict[str, Any]] = {}
    total = 0
    for e in events:
        if e.get("cat") != "Node":
            continue
        key = (e["args"].get("op_name", "?"), e["args"].get("provider", "?"))
        row = rows.setdefault(key, {"op": key[0], "provider": key[1], "calls": 0, "total_us": 0})
        row["calls"] += 1
        row["total_us"] += e["dur"]
        total += e["dur"]
    out = sorted(rows.values(), key=lambda r: -r["total_us"])
    for r in out:
        r["mean_us"] = r["total_us"] / r["calls"]
        r["share"] = r["total_us"] / total if total else 0.0
    return out


__all__ = ["Profiler", "current", "active", "summarize", "type_shape", "now_us"]
