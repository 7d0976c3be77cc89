"""WasmSimdExecutionProvider's programs on the page's real wasm module, natively: oxk.js and
oxk.wasm (wasm32) run in Node.js (wasm_node_kernels.py) in place of Pyodide's JS bridge. The MLP
and a small CNN compile into one oxk_program per step, written into wasm memory with the module's
own layouts; each run copies the input in once, makes one oxk_program_run call into wasm and
copies the output out once; outputs equal onnxruntime's (the numpy CPU provider's where onnxruntime is
not installed: the Python 3.8 venv)."""
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))
import models  # noqa: E402
import wasm_node_kernels as W  # noqa: E402

pytestmark = pytest.mark.needs_setup   # node and the wasm build (edge/kernels/build.py --targets wasm)

RTOL, ATOL = 1e-4, 1e-5
WASM = "WasmSimdExecutionProvider"


@pytest.fixture(scope="module")
def kernels():
    why = W.available()
    if why:
        pytest.skip(why)
    k = W.NodeKernels()
    transport.install(k)
    yield k
    transport.install(None)
    k.close()


def small_cnn() -> bytes:
    """Conv+Relu, MaxPool, Conv + residual Add + Relu, GlobalAveragePool, Flatten, Gemm, Softmax."""
    rng = np.random.default_rng(5)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "p1"], ["s2"]),
             helper.make_node("Relu", ["s2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 8, 3, 3), w("b2", 8), w("wf", 10, 8),
                           w("bf", 10)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _check_one_program_per_run(kernels, model: bytes, feeds) -> None:
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    assert {r["provider"] for r in sess.partition_report()} == {WASM}
    try:
        import onnxruntime
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    except ImportError:   # numpy alone (the installed module is the C engine here, as in a page)
        so = onnxedge.SessionOptions()
        so.add_session_config_entry("session.cpu_engine", "0")
        want = onnxedge.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    # node by node, recording shapes (program-only ops as one-instruction programs); then the
    # program is compiled: its runs give the first run's bits
    first = sess.run(None, feeds)
    for _ in range(2):
        kernels.counts.clear()
        got = sess.run(None, feeds)
        for have, w, f in zip(got, want, first):
            np.testing.assert_allclose(have, w, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(w).max())))
            assert have.tobytes() == f.tobytes()
        assert kernels.counts == {"write": 1, "program_run": 1, "read": 1}, kernels.counts


def test_mlp_runs_as_one_wasm_program(kernels, tmp_path):
    path = models.build_all(str(tmp_path), ["mlp"])["mlp"]
    with open(path, "rb") as f:
        _check_one_program_per_run(kernels, f.read(), models.make_inputs("mlp"))


def test_small_cnn_runs_as_one_wasm_program(kernels):
    x = np.random.default_rng(6).standard_normal((2, 3, 16, 16)).astype(np.float32)
    _check_one_program_per_run(kernels, small_cnn(), {"x": x})


def test_program_memory_is_given_back_with_the_session(kernels):
    import gc
    gc.collect()
    before = len(kernels.live)
    sess = onnxedge.InferenceSession(small_cnn(), providers=[WASM, "CPUExecutionProvider"])
    x = np.ones((1, 3, 16, 16), np.float32)
    for _ in range(2):
        sess.run(None, {"x": x})
    assert len(kernels.live) > before
    from onnxedge.web.wasm.provider import direct_program
    released = []   # what runtime.py hangs on a published program: JS stops using it
    direct_program(sess, {"x": x}).target.on_release.append(lambda: released.append(len(kernels.live)))
    del sess
    gc.collect()
    assert len(kernels.live) == before
    assert len(released) == 1 and released[0] > before   # told before its memory was given back


def test_js_runs_the_described_program_as_python_does(kernels, tmp_path):
    # what onnxedge.js does once Python compiled a session's only step: oxk.js's runProgram copies
    # the feeds in, makes one oxk_program_run call and copies the outputs out, no Python between
    from onnxedge.web.wasm.provider import direct_program
    path = models.build_all(str(tmp_path), ["mlp"])["mlp"]
    sess = onnxedge.InferenceSession(path, providers=[WASM, "CPUExecutionProvider"])
    feeds = models.make_inputs("mlp", batch=3)
    (x,) = feeds.values()
    first = sess.run(None, feeds)        # node by node (records shapes), then the program is built
    assert direct_program(sess, {name: x[:1] for name in feeds}) is None   # another signature
    prog = direct_program(sess, feeds)
    assert prog is not None and prog.in_names == list(feeds)
    desc = prog.describe()
    assert [i["size"] for i in desc["inputs"]] == [x.size]
    kernels.counts.clear()
    got = kernels.run_described(desc, [x])
    assert kernels.counts == {"runProgram": 1}
    names = [o.name for o in sess.get_outputs()]
    by_name = {o["name"]: (j, o["dims"]) for j, o in enumerate(desc["outputs"])}
    for name, y, want in zip(names, first, sess.run(None, feeds)):
        j, dims = by_name[name]
        assert got[j].reshape(dims).tobytes() == y.tobytes() == want.tobytes()
    with pytest.raises(RuntimeError, match="holds %d values of 4 bytes" % x.size):
        kernels.run_described(desc, [x[:1]])
    with pytest.raises(RuntimeError, match="got %d of 8" % x.size):
        kernels.run_described(desc, [x.astype(np.float64)])


def test_direct_program_only_for_one_wasm_step_and_its_exact_feeds(kernels):
    from onnxedge.web.wasm.provider import direct_program
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype(np.float32)
    sess = onnxedge.InferenceSession(small_cnn(), providers=[WASM, "CPUExecutionProvider"])
    sess.run(None, {"x": x})
    assert direct_program(sess, {"x": x}) is not None
    assert direct_program(sess, {"x": x.astype(np.float64)}) is None
    assert direct_program(sess, {"x": x, "other": x}) is None
    # the Softmax on the CPU: two steps, Python runs them
    sess = onnxedge.InferenceSession(small_cnn(), providers=[(WASM, {"programs": 0}), "CPUExecutionProvider"])
    sess.run(None, {"x": x})
    sess.run(None, {"x": x})
    assert direct_program(sess, {"x": x}) is None


def masked_attention() -> bytes:
    """An encoder's attention with HuggingFace's mask chain on int64 feeds: ids [1, S] -> Gather
    (embeddings); mask [1, S] -> Unsqueeze -> Cast -> (1 - m) * -10000 added to the scores."""
    rng = np.random.default_rng(12)
    n = helper.make_node
    nodes = [n("Gather", ["emb", "ids"], ["h"]),
             n("Transpose", ["h"], ["ht"], perm=[0, 2, 1]),
             n("MatMul", ["h", "ht"], ["scores"]),
             n("Unsqueeze", ["mask", "ax"], ["m1"]),
             n("Cast", ["m1"], ["mf"], to=TensorProto.FLOAT),
             n("Sub", ["one", "mf"], ["inv"]),
             n("Mul", ["inv", "big"], ["add"]),
             n("Add", ["scores", "add"], ["masked"]),
             n("Softmax", ["masked"], ["p"], axis=-1),
             n("MatMul", ["p", "h"], ["y"])]
    ints = TensorProto.INT64
    g = helper.make_graph(nodes, "masked_attention",
                          [helper.make_tensor_value_info("ids", ints, [1, "S"]),
                           helper.make_tensor_value_info("mask", ints, [1, "S"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array((rng.standard_normal((50, 16)) * 0.5).astype(np.float32), "emb"),
                           numpy_helper.from_array(np.array([1], np.int64), "ax"),
                           numpy_helper.from_array(np.array(1.0, np.float32), "one"),
                           numpy_helper.from_array(np.array(-10000.0, np.float32), "big")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_an_int64_attention_mask_stays_in_the_program_and_js_runs_it(kernels):
    # the mask's Cast moves above its Unsqueeze (cast_hoist) and casts int64 in wasm: one wasm
    # step, one program per run, and onnxedge.js may run it from the int64 feeds themselves
    from onnxedge.web.wasm.provider import direct_program
    model = masked_attention()
    rng = np.random.default_rng(3)
    feeds = {"ids": rng.integers(0, 50, (1, 12)).astype(np.int64), "mask": np.ones((1, 12), np.int64)}
    feeds["mask"][0, 9:] = 0
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    assert [s.provider for s in sess._plan.steps] == [WASM]
    first = sess.run(None, feeds)[0]
    kernels.counts.clear()
    got = sess.run(None, feeds)[0]
    assert kernels.counts == {"write": 2, "program_run": 1, "read": 1}, kernels.counts
    assert got.tobytes() == first.tobytes()
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "0")
    want = onnxedge.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(want).max())))
    assert np.abs(got[0, 9:] - got[0, :1]).max() > 0   # the masked keys changed something
    prog = direct_program(sess, feeds)
    assert prog is not None
    assert direct_program(sess, {k: v.astype(np.int32) for k, v in feeds.items()}) is None
    desc = prog.describe()
    assert {i["name"]: i["type"] for i in desc["inputs"]} == {"ids": "int64", "mask": "int64"}
    by_name = {o["name"]: j for j, o in enumerate(desc["outputs"])}
    js = kernels.run_described(desc, [feeds[i["name"]] for i in desc["inputs"]])
    assert js[by_name["y"]].tobytes() == got.tobytes()
