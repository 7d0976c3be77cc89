"""The page provider (WasmSimdExecutionProvider) on the engine's normalizations and reductions
(issue #17): LayerNormalization with an offset far larger than the spread, RMS, Instance, Group and
inference Batch normalization, ReduceMax / ReduceMean / ReduceL2 over runs of axes, all claimed and
compiled into one program per step, on the host build over a numpy "wasm memory"
(wasm_host_kernels.py) and on the real wasm32 module under Node.js (wasm_node_kernels.py). The first
run (node by node: one-instruction programs of the same emitters) and the program give the same
bits, both within float32 rounding of the numpy CPU provider."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge.web.wasm import transport

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

pytestmark = pytest.mark.needs_setup   # the host build, node and the wasm build (edge/kernels/build.py)

WASM = "WasmSimdExecutionProvider"


@pytest.fixture(scope="module", params=["host", "node"])
def kernels(request):
    if request.param == "host":
        from onnxedge.edge.neon import library
        if not os.path.isfile(library.library_path()):
            pytest.fail("the host kernel library is missing: run `make setup` (edge/kernels/build.py)")
        from wasm_host_kernels import HostKernels
        k = HostKernels()
    else:
        import wasm_node_kernels as W
        why = W.available()
        if why:
            pytest.skip(why)
        k = W.NodeKernels()
    transport.install(k)
    yield k
    transport.install(None)
    if hasattr(k, "close"):
        k.close()


def _model() -> bytes:
    rng = np.random.default_rng(21)

    def w(name, *shape, positive=False):
        v = rng.standard_normal(shape).astype(np.float32)
        return numpy_helper.from_array(np.abs(v) + np.float32(0.5) if positive else v, name)

    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
             n("SimplifiedLayerNormalization", ["ln", "g"], ["rms"], axis=-1, epsilon=1e-6),
             n("InstanceNormalization", ["rms", "c1", "c2"], ["inn"], epsilon=1e-4),
             n("GroupNormalization", ["inn", "c1", "c2"], ["gn"], num_groups=3, epsilon=1e-5),
             n("BatchNormalization", ["gn", "c1", "c2", "c3", "v"], ["bn"]),
             n("ReduceMax", ["bn", "ax1"], ["mx"], keepdims=1),
             n("Sub", ["bn", "mx"], ["s"]),
             n("ReduceMean", ["s", "ax2"], ["m"], keepdims=1),
             n("ReduceL2", ["m", "ax1"], ["y"], keepdims=0)]
    inits = [w("g", 45), w("b", 45), w("c1", 6), w("c2", 6), w("c3", 6), w("v", 6, positive=True),
             numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             numpy_helper.from_array(np.array([2], np.int64), "ax2")]
    g = helper.make_graph(nodes, "norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 45])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("ln", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("batch", [1, 3])
def test_normalizations_and_reductions_in_one_page_program(kernels, batch):
    model = _model()
    x = (np.random.default_rng(batch).standard_normal((batch, 6, 45)) * 0.5 + 500.0).astype(np.float32)
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    assert {r["provider"] for r in sess.partition_report()} == {WASM}, sess.partition_report()
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "0")
    want = onnxedge.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    first = sess.run(None, {"x": x})
    steps = [s for s in sess._plan.steps if s.provider == WASM]
    assert all(p is not None for s in steps for p in s.programs.programs.values()), \
        [s.programs.refusals for s in steps]
    kernels.counts.clear()
    later = sess.run(None, {"x": x})
    assert kernels.counts.get("program_run") == 1, kernels.counts
    for a, b, c in zip(first, later, want):
        assert a.shape == b.shape == c.shape and a.tobytes() == b.tobytes()
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(c).max())))
