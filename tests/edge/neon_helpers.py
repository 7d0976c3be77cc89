"""Shared pieces of the NEON tests: the kernel library (built when missing), small models."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Set, Tuple

import numpy as np
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from onnxedge.edge.neon.provider import engine_name  # noqa: E402

ENGINE = engine_name()   # the C engine's provider here: X64ExecutionProvider or NeonExecutionProvider
NEON = [ENGINE, "CPUExecutionProvider"]


def ensure_built(targets: str = "host,generic") -> None:
    """Build the kernel libraries if they are missing or stale (make setup normally has)."""
    subprocess.run([sys.executable, os.path.join(REPO, "edge", "kernels", "build.py"),
                    "--targets", targets], check=True, stdout=subprocess.DEVNULL)


def small_cnn(seed: int = 0) -> bytes:
    """A small CNN touching every NEON conv/pool path: 3x3 conv (direct path, 3 input channels),
    depthwise 3x3, 1x1 pointwise, strided dilated conv, grouped conv, Max/Average/Global pools,
    Relu/Clip/Sigmoid, Flatten and Gemm. Input 'x' [batch, 3, 20, 18], output 'y' [batch, 10]."""
    rng = np.random.default_rng(seed)
    inits = []

    def w(name: str, shape: Tuple[int, ...]) -> str:
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * np.sqrt(2.0 / fan)).astype(np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", w("w1", (8, 3, 3, 3)), w("b1", (8,))], ["c1"], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", w("w2", (8, 1, 3, 3)), w("b2", (8,))], ["c2"], group=8, pads=[1, 1, 1, 1],
          strides=[2, 1]),
        n("Clip", ["c2", "lo", "hi"], ["r2"]),
        n("Conv", ["r2", w("w3", (16, 8, 1, 1))], ["c3"]),
        n("MaxPool", ["c3"], ["p3"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1],
          ceil_mode=1),
        n("Conv", ["p3", w("w4", (12, 4, 3, 3)), w("b4", (12,))], ["c4"], group=4,
          dilations=[2, 1], pads=[2, 1, 1, 1]),
        n("Sigmoid", ["c4"], ["r4"]),
        n("AveragePool", ["r4"], ["p4"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1],
          count_include_pad=0),
        n("GlobalAveragePool", ["p4"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", w("wf", (10, 12)), w("bf", (10,))], ["y"], transB=1),
    ]
    inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
              numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    graph = helper.make_graph(nodes, "small_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 20, 18])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def small_cnn_inputs(batch: int = 2, seed: int = 1) -> Dict[str, np.ndarray]:
    """Feeds of small_cnn."""
    return {"x": np.random.default_rng(seed).standard_normal((batch, 3, 20, 18)).astype(np.float32)}


def mlp() -> Tuple[bytes, Dict[str, np.ndarray]]:
    """The benchmark MLP (784-128-64-10) and a batch-3 input."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import models  # noqa: E402  (benchmarks/models.py)
    return models.build("mlp").SerializeToString(), models.make_inputs("mlp", batch=3)


def ort_run(model: bytes, feeds: Dict[str, np.ndarray]) -> list:
    """onnxruntime's outputs (the reference)."""
    import onnxruntime as ort
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def freeze_inputs(model: bytes, feeds: Dict[str, np.ndarray], names) -> Tuple[bytes, Dict[str, np.ndarray]]:
    """`model` with the graph inputs among `names` turned into initializers holding their feeds
    (weights the node suite passes as inputs, which the engine packs only when constant)."""
    import onnx
    m = onnx.load_from_string(model)
    keep = [i for i in m.graph.input if i.name not in names or i.name not in feeds]
    frozen = [i.name for i in m.graph.input if i.name in names and i.name in feeds]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    m.graph.initializer.extend(numpy_helper.from_array(feeds[n], n) for n in frozen)
    return m.SerializeToString(), {k: v for k, v in feeds.items() if k not in frozen}


def node_suite_twice(ops, make_session, provider: str = ENGINE,
                     freeze=()) -> Tuple[int, int]:
    """Run the ONNX node-suite cases of `ops` (ai.onnx, not the _expanded ones) twice through
    `make_session(model bytes)`: the first run goes node by node, the second is the compiled
    program; both must match the suite's expected outputs. Graph inputs named in `freeze` become
    initializers (freeze_inputs). Returns (cases the engine took, cases that ran a compiled
    program); (0, 0) when the case cache is missing (the conformance suite says so itself).
    Node-suite models the session refuses are skipped."""
    sys.path.insert(0, REPO)
    try:
        from tests.conformance import cases
        from tests.conformance.compare import compare_outputs
        infos = cases.load_manifest(cases.ensure_cache(generate=False, verbose=False))
    except Exception:
        return 0, 0
    took = programs = 0
    for info in infos:
        if info.op_type not in ops or info.domain not in ("", "ai.onnx") or info.name.endswith("_expanded"):
            continue
        case = cases.load_case(info)
        took_case = False
        for inputs, want in case.data_sets:
            model, feeds = freeze_inputs(case.model, dict(zip(case.input_names, inputs)), freeze) \
                if freeze else (case.model, dict(zip(case.input_names, inputs)))
            try:
                sess = make_session(model)
            except Exception:
                break
            if not any(r["provider"] == provider for r in sess.partition_report()):
                break
            took_case = True
            for _ in range(2):
                try:
                    compare_outputs(list(sess.run(None, feeds)), want, info.rtol, info.atol, case.output_names)
                except Exception as e:
                    raise AssertionError("%s: %s" % (info.name, e)) from e
        if not took_case:
            continue
        took += 1
        steps = [s for s in sess._plan.steps if s.provider == provider and getattr(s, "programs", None)]
        programs += any(p is not None for s in steps for p in s.programs.programs.values())
    return took, programs


def cpu_flags() -> Set[str]:
    """This CPU's feature flags (/proc/cpuinfo; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()
