"""The page's engine (WasmSimdExecutionProvider) on the ops the native engine gained for issue #17:
LSTM / GRU (oxk_rnn, several outputs: node by node a one-node program), 1-D Conv (2-D with H = 1)
and ConvTranspose (oxk_conv_transpose2d_run). Each runs on two stand-ins for the page's module:
the host build of the same C kernels over a numpy "wasm memory" (wasm_host_kernels.py: there the
results must equal the native engine's bits, the same kernels running) and the real oxk.wasm
under node (wasm_node_kernels.py). Everywhere: the first run of a signature (node by node) gives
the bits of the compiled program's runs after it, and both agree with onnxruntime within a
float32 tolerance grown with the reduction length."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge.web.wasm import transport

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import wasm_node_kernels as W  # noqa: E402
from wasm_host_kernels import HostKernels  # noqa: E402
from modelgen import rnn_model  # noqa: E402

pytestmark = pytest.mark.needs_setup   # the host build and the wasm build of the C kernels

WASM = "WasmSimdExecutionProvider"
EPS = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module", params=["host", "node"])
def kernels(request):
    if request.param == "host":
        from onnxedge.edge.neon import library
        if not os.path.isfile(library.library_path()):
            pytest.fail("the host kernel library is missing: run edge/kernels/build.py")
        k: Any = HostKernels(megabytes=256)
    else:
        why = W.available()
        if why:
            pytest.skip(why)
        k = W.NodeKernels()
    k.kind = request.param
    transport.install(k)
    yield k
    transport.install(None)
    if request.param == "node":
        k.close()


def _model(nodes, inputs, outputs, inits, opset=17) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                               for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _ort(model: bytes, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    try:
        import onnxruntime
    except ImportError:   # Python 3.8's venv: the numpy CPU provider alone
        so = onnxedge.SessionOptions()
        so.add_session_config_entry("session.cpu_engine", "0")
        return onnxedge.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    return onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def _native(model: bytes, feeds: Dict[str, np.ndarray]) -> Optional[List[np.ndarray]]:
    """The native C engine's outputs (None where this machine has no native engine)."""
    try:
        from onnxedge.edge.neon.provider import engine_name
        name = engine_name()
    except ImportError:
        name = "NeonExecutionProvider"
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "0")
    try:
        sess = onnxedge.InferenceSession(model, so, providers=[name, "CPUExecutionProvider"])
    except Exception:
        return None
    if {r["provider"] for r in sess.partition_report()} != {name}:
        return None
    sess.run(None, feeds)
    return sess.run(None, feeds)


def _check(kernels, model: bytes, feeds: Dict[str, np.ndarray], tol: float, on_wasm=None,
           programs: int = 1) -> List[np.ndarray]:
    """First run == the program's runs, bit for bit; vs onnxruntime within `tol` (relative to the
    output's magnitude); on the host stand-in, the native engine's bits. Returns the outputs."""
    sess = onnxedge.InferenceSession(model, providers=[(WASM, {"programs": programs}), "CPUExecutionProvider"])
    report = sess.partition_report()
    wasm_ops = {r["op_type"] for r in report if r["provider"] == WASM}
    assert wasm_ops == (on_wasm or {r["op_type"] for r in report}), report
    kernels.counts.clear()
    first = sess.run(None, feeds)
    for _ in range(2):
        kernels.counts.clear()
        got = sess.run(None, feeds)
        for a, b in zip(first, got):
            assert a.tobytes() == b.tobytes() and a.shape == b.shape
        if programs:
            assert kernels.counts.get("program_run") == 1, kernels.counts
    for have, want in zip(got, _ort(model, feeds)):
        assert have.shape == want.shape
        scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
        np.testing.assert_allclose(have, want, rtol=tol, atol=tol * scale)
    if kernels.kind == "host":
        native = _native(model, feeds)
        if native is not None:
            for have, want in zip(got, native):
                assert have.tobytes() == want.tobytes()
    return got


# ----------------------------------------------------------------------------- LSTM / GRU

def _rnn(op: str, *args: Any, **kw: Any) -> Tuple[bytes, Dict[str, np.ndarray]]:
    """A one-node LSTM/GRU model and its feeds (tests/modelgen.py rnn_model)."""
    return rnn_model(op, *args, **kw)[:2]


@pytest.mark.parametrize("op, seq, batch, inp, hid, kw", [
    ("LSTM", 5, 3, 7, 6, dict(direction="bidirectional", peep=True)),
    ("LSTM", 1, 1, 3, 5, dict(direction="reverse", states=False)),
    ("LSTM", 4, 2, 9, 4, dict(clip=0.7, outputs=["", "Yh", "Yc"])),
    ("LSTM", 3, 2, 5, 3, dict(outputs=["Y"])),
    ("GRU", 6, 2, 5, 7, dict(lbr=1, direction="bidirectional")),
    ("GRU", 4, 1, 8, 3, dict(lbr=0, states=False, clip=1.5)),
])
def test_rnn_first_run_programs_native_and_onnxruntime(kernels, op, seq, batch, inp, hid, kw):
    model, feeds = _rnn(op, seq, batch, inp, hid, **kw)
    _check(kernels, model, feeds, 4e-6 * (inp + hid + 8))


def test_rnn_node_by_node_has_every_output_and_new_lengths(kernels):
    # programs=0: the LSTM still runs on the kernels as its one-node program (three outputs);
    # then a new sequence length is a new signature with its own program
    model, feeds = _rnn("LSTM", 4, 2, 6, 5, direction="bidirectional")
    _check(kernels, model, feeds, 4e-6 * 19, programs=0)
    assert kernels.counts.get("program_run") == 1 and kernels.counts.get("read") == 3
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    for seq in (4, 1, 7):
        f = dict(feeds, X=np.random.default_rng(seq).standard_normal((seq, 2, 6)).astype(np.float32))
        for have, want in zip(sess.run(None, f), _ort(model, f)):
            np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-4)


def test_rnn_the_engine_does_not_take_stays_on_cpu_with_a_reason(kernels):
    model, feeds = _rnn("LSTM", 3, 2, 4, 3)
    import onnx
    m = onnx.load_from_string(model)
    m.graph.node[0].attribute.append(helper.make_attribute("layout", 0))
    m.graph.node[0].attribute.append(helper.make_attribute("activations", ["Sigmoid", "Relu", "Tanh"]))
    sess = onnxedge.InferenceSession(m.SerializeToString(), providers=[WASM, "CPUExecutionProvider"])
    (row,) = sess.partition_report()
    assert row["provider"] == "CPUExecutionProvider"
    assert "activations" in row["fallback_reasons"][WASM]


# ----------------------------------------------------------------------------- 1-D Conv

def _conv1d(shape, w_shape, bias=True, relu=False, z=False, seed=1, **attrs) -> Tuple[bytes, Dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.3).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), "b"))
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], **attrs)]
    last = "c"
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", shape[1], "L"])]
    if z:
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
        last = "s"
        vis.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["r"]))
        last = "r"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    model = _model(nodes, vis, ["y"], inits)
    if z:
        feeds["z"] = _ort(_model(nodes[:1], vis[:1], ["c"], inits), {"x": feeds["x"]})[0] * 0 + \
            rng.standard_normal(1).astype(np.float32)
    return model, feeds


@pytest.mark.parametrize("shape, w_shape, kw", [
    ((1, 4, 37), (6, 4, 5), dict(pads=[2, 2])),
    ((2, 6, 50), (6, 2, 3), dict(group=3, strides=[2], dilations=[2], pads=[1, 0])),
    ((1, 3, 9), (5, 3, 9), dict(bias=False)),
    ((1, 1, 1), (3, 1, 1), dict()),
    ((1, 8, 40), (8, 1, 3), dict(group=8, pads=[1, 1], relu=True)),
    ((2, 4, 21), (4, 4, 3), dict(auto_pad="SAME_UPPER", strides=[2], relu=True, z=True)),
])
def test_conv1d_first_run_programs_native_and_onnxruntime(kernels, shape, w_shape, kw):
    model, feeds = _conv1d(shape, w_shape, **kw)
    k = w_shape[1] * w_shape[2]
    _check(kernels, model, feeds, 4 * (np.sqrt(k) + 1) * EPS * 4)


# ----------------------------------------------------------------------------- ConvTranspose

def _convt(shape, w_shape, bias=True, seed=2, **attrs) -> Tuple[bytes, Dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.3).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        cout = w_shape[1] * int(attrs.get("group", 1))
        inits.append(numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b"))
        ins.append("b")
    spatial = ["H", "W"][:len(shape) - 2] if len(shape) == 4 else ["L"]
    vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", shape[1]] + spatial)]
    nodes = [helper.make_node("ConvTranspose", ins, ["c"], **attrs), helper.make_node("Sigmoid", ["c"], ["y"])]
    return _model(nodes, vis, ["y"], inits), {"x": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("shape, w_shape, kw", [
    ((1, 4, 9, 7), (4, 3, 2, 2), dict(group=2, strides=[2, 2])),
    ((2, 4, 9, 7), (4, 3, 3, 3), dict(pads=[1, 0, 1, 2], output_padding=[1, 0], strides=[2, 1])),
    ((1, 6, 5, 5), (6, 2, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2], dilations=[1, 2], bias=False)),
    ((2, 4, 20), (4, 3, 4), dict(strides=[2], pads=[1, 1])),
    ((1, 2, 1), (2, 5, 3), dict()),
    ((1, 2, 4, 4), (2, 3, 3, 3), dict(output_shape=[10, 10], strides=[2, 2])),   # the end pad is -1
])
def test_conv_transpose_first_run_programs_native_and_onnxruntime(kernels, shape, w_shape, kw):
    model, feeds = _convt(shape, w_shape, **kw)
    k = w_shape[0] * int(np.prod(w_shape[2:]))
    _check(kernels, model, feeds, 4 * (np.sqrt(k) + 1) * EPS * 4)


def test_conv_transpose_negative_pads_run_on_cpu_node_by_node(kernels):
    # an output_shape past the full output (9 here) by 2 asks for a negative pad at the start: the
    # kernel does not take it, the CPU kernel runs the node (onnxruntime refuses such a shape: the
    # numpy CPU provider is the reference)
    model, feeds = _convt((1, 2, 4, 4), (2, 3, 3, 3), output_shape=[11, 11], strides=[2, 2])
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "0")
    (want,) = onnxedge.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert want.shape == (1, 3, 11, 11)
    for _ in range(2):
        kernels.counts.clear()
        np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-5, atol=1e-6)
        assert "oxk_conv_transpose2d_run" not in kernels.counts


# ----------------------------------------------------------------------------- int8

def _has_ort() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("batch", [1, 3])
def test_qdq_cnn_int8_program_exact(kernels, tmp_path, batch):
    # benchmarks' qdq_cnn: QDQ groups fused into QLinearConv / QLinearGlobalAveragePool / QGemm with
    # Q/DQ between; int8 buffers in the program; equal to onnxruntime's (optimized) exactly
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))
    import models
    path = models.build_all(str(tmp_path), ["qdq_cnn"])["qdq_cnn"]
    with open(path, "rb") as f:
        model = f.read()
    feeds = models.make_inputs("qdq_cnn", batch=batch, seed=batch)
    got = _check(kernels, model, feeds, 0.0)   # first run == program == onnxruntime (== native)
    assert got[0].dtype == np.int8
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    on_wasm = {r["op_type"] for r in sess.partition_report()}
    assert {"QLinearConv", "QuantizeLinear"} <= on_wasm


def _quantized(kind: str, tmp_path) -> Tuple[bytes, Dict[str, np.ndarray]]:
    """A torch CNN / MLP quantized by onnxruntime.quantization: static QOperator (per channel) or
    dynamic (DynamicQuantizeLinear -> MatMulInteger / ConvInteger -> Cast -> Mul)."""
    torch = pytest.importorskip("torch")
    q = pytest.importorskip("onnxruntime.quantization")
    torch.manual_seed(0)
    cnn = kind.endswith("cnn")
    if cnn:
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                  torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
                                  torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
        shape = (1, 3, 16, 16)
    else:
        net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
        shape = (4, 20)
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    torch.onnx.export(net.eval(), torch.randn(*shape), src, input_names=["x"], output_names=["y"],
                      opset_version=17, dynamo=False)
    if kind.startswith("dynamic"):
        q.quantize_dynamic(src, out, weight_type=q.QuantType.QInt8)
    else:
        class Reader(q.CalibrationDataReader):
            def __init__(self):
                rng = np.random.default_rng(1)
                self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

            def get_next(self):
                return next(self.data, None)
        q.quantize_static(src, out, Reader(), quant_format=q.QuantFormat.QOperator, per_channel=True,
                          activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8)
    with open(out, "rb") as f:
        return f.read(), {"x": np.random.default_rng(5).standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("kind, int_ops", [
    ("static_cnn", {"QLinearConv", "QuantizeLinear", "DequantizeLinear"}),
    ("dynamic_mlp", {"DynamicQuantizeLinear", "MatMulInteger", "Cast"}),
])
def test_quantized_models_on_the_page_engine(kernels, tmp_path, kind, int_ops):
    model, feeds = _quantized(kind, tmp_path)
    sess = onnxedge.InferenceSession(model, providers=[WASM, "CPUExecutionProvider"])
    report = sess.partition_report()
    assert int_ops <= {r["op_type"] for r in report if r["provider"] == WASM}, report
    first = sess.run(None, feeds)
    kernels.counts.clear()
    (got,) = sess.run(None, feeds)
    assert got.tobytes() == first[0].tobytes()
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (want,) = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    # the integer kernels requantize as onnxruntime's; what stays float may round one way or the
    # other: one quantization step of the output at most
    step = float(np.abs(want).max()) / 127
    assert float(np.abs(got.astype(np.float64) - want).max()) <= step * 1.01
    if kernels.kind == "host":
        native = _native(model, feeds)
        if native is not None:
            assert native[0].tobytes() == got.tobytes()


def test_dynamic_quantize_linear_three_outputs_and_integer_ops(kernels):
    # DynamicQuantizeLinear's three outputs feed MatMulInteger (computed A zero point) and a
    # ConvInteger; the int32 sums leave as float through Cast; a QLinearGlobalAveragePool of a
    # quantized input; every output exact against onnxruntime
    rng = np.random.default_rng(3)
    b = rng.integers(-128, 128, (6, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(w, "W"),
             numpy_helper.from_array(np.array(3, np.int8), "bz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(-3, np.int8), "z"),
             numpy_helper.from_array(np.array(0.11, np.float32), "ys"),
             numpy_helper.from_array(np.array(7, np.int8), "yz")]
    n = helper.make_node
    nodes = [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             n("MatMulInteger", ["xq", "B", "xz"], ["mi"]),
             n("Cast", ["mi"], ["mf"], to=TensorProto.FLOAT),
             n("Mul", ["mf", "xs"], ["y1"]),
             n("QuantizeLinear", ["img", "s", "z"], ["iq"]),
             n("ConvInteger", ["iq", "W", "z"], ["ci"], pads=[1, 1, 1, 1], strides=[2, 1]),
             n("Cast", ["ci"], ["y2"], to=TensorProto.FLOAT),
             n("QLinearGlobalAveragePool", ["iq", "s", "z", "ys", "yz"], ["gp"], domain="com.microsoft"),
             n("DequantizeLinear", ["gp", "ys", "yz"], ["y3"])]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", 6]),
                                       helper.make_tensor_value_info("img", TensorProto.FLOAT, ["N", 3, 7, 6])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y1", "y2", "y3")]
                          + [helper.make_tensor_value_info("xs", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    feeds = {"x": rng.standard_normal((3, 6)).astype(np.float32),
             "img": rng.standard_normal((2, 3, 7, 6)).astype(np.float32)}
    got = _check(kernels, m.SerializeToString(), feeds, 1e-6 if _has_ort() else 1e-5)
    assert [y.shape for y in got] == [(3, 5), (2, 4, 4, 6), (2, 3, 1, 1), ()]
