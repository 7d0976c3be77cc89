"""The C engine's int8 path (issue #17): quantization.c's kernels against an integer numpy reference
(exact), the qdq_fusion pass on models onnxruntime's quantizers write (static QDQ and QOperator,
per tensor and per channel; dynamic) against onnxruntime, programs against the node-by-node path
(bitwise), and the ONNX node cases of the quantized ops through the default (engine) session."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import REPO, ensure_built

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon import library as L  # noqa: E402

sys.path.insert(0, REPO)
from benchmarks import models as bm  # noqa: E402

ort = pytest.importorskip("onnxruntime")
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
RNG = np.random.default_rng(17)


@pytest.fixture(scope="module")
def lib():
    return L.load()


# ------------------------------------------------------------------------------ references

def _requant(acc, scale, zero, dtype):
    """onnxruntime's requantization: float32(acc) * scale, round half to even, + zero, saturate."""
    info = np.iinfo(dtype)
    f = acc.astype(np.float32) * np.asarray(scale, np.float32)
    return np.clip(np.rint(f) + zero, info.min, info.max).astype(dtype)


def _conv_ref(x, xz, w, wz, group, strides, pads, dil):
    """int64 sums of (x - xz) * (w - wz[c]), NCHW, pads (t, l, b, r)."""
    N, C, H, W = x.shape
    co, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64) - xz, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    wv = w.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    OH = (H + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    OW = (W + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((N, co, OH, OW), np.int64)
    cog = co // group
    for g in range(group):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i * dil[0]:i * dil[0] + strides[0] * OH:strides[0],
                           j * dil[1]:j * dil[1] + strides[1] * OW:strides[1]]
                y[:, g * cog:(g + 1) * cog] += np.einsum("nchw,oc->nohw", patch, wv[g * cog:(g + 1) * cog, :, i, j])
    return y


def _q(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


# ------------------------------------------------------------------------------ kernels

CONV_CASES = [  # (N, C, H, W, Cout, k, group, stride, pads, dil)
    (1, 3, 32, 32, 8, 3, 1, 1, (1, 1, 1, 1), 1),
    (1, 8, 16, 16, 16, 3, 1, 2, (1, 1, 1, 1), 1),
    (2, 5, 7, 9, 3, 1, 1, 1, (0, 0, 0, 0), 1),
    (1, 4, 9, 6, 6, 3, 2, 1, (2, 0, 1, 1), 2),
    (1, 6, 5, 5, 6, 3, 6, 1, (1, 1, 1, 1), 1),      # depthwise
    (1, 1, 1, 1, 1, 1, 1, 1, (0, 0, 0, 0), 1),      # all sizes 1
    (3, 2, 11, 4, 17, 2, 1, 3, (1, 2, 0, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("xt,wt,per_channel,out", [
    (np.int8, np.int8, False, np.int8), (np.uint8, np.int8, True, np.uint8),
    (np.uint8, np.uint8, True, np.int32), (np.int8, np.uint8, False, np.int32)])
def test_qconv_kernel_exact(lib, case, xt, wt, per_channel, out):
    N, C, H, W, co, k, group, s, pads, d = case
    x, w = _q((N, C, H, W), xt), _q((co, C // group, k, k), wt)
    xz = int(_q((), xt))
    wz = _q((co,), wt) if per_channel else np.full(1, _q((), wt))
    acc = _conv_ref(x, xz, w, wz if per_channel else np.full(co, wz[0]), group, (s, s), pads, (d, d))
    bias = RNG.integers(-5000, 5000, co).astype(np.int32) if out != np.int32 else None
    scale = (RNG.random(co if per_channel else 1) * 1e-3 + 1e-5).astype(np.float32)
    yz = int(_q((), out)) if out != np.int32 else 0
    packed = lib.qpack_rows(w.reshape(co, -1), wz)
    plan = lib.qconv_plan(x.shape, x.dtype, xz, packed, co, (k, k), group, (s, s), (d, d), pads,
                          acc.shape[2:], np.dtype(out), yz, bias, scale if out != np.int32 else None)
    y = np.empty(acc.shape, out)
    assert plan.fn(plan.addr, N, x.ctypes.data, None, y.ctypes.data) == 0
    if out == np.int32:
        want = acc.astype(np.int32)
    else:
        want = _requant(acc + bias.reshape(1, -1, 1, 1), scale.reshape((1, -1, 1, 1) if per_channel else ()),
                        yz, out)
    np.testing.assert_array_equal(y, want)
    # a runtime zero point (ConvInteger behind DynamicQuantizeLinear) replaces the plan's
    z = np.array(xz, xt)
    plan0 = lib.qconv_plan(x.shape, x.dtype, 0, packed, co, (k, k), group, (s, s), (d, d), pads,
                           acc.shape[2:], np.dtype(out), yz, bias, scale if out != np.int32 else None)
    y2 = np.empty_like(y)
    assert plan0.fn(plan0.addr, N, x.ctypes.data, z.ctypes.data, y2.ctypes.data) == 0
    np.testing.assert_array_equal(y2, y)


@pytest.mark.parametrize("M,K,N", [(1, 16, 10), (7, 33, 19), (64, 200, 48), (3, 1, 1), (5, 8, 16)])
@pytest.mark.parametrize("at,bt,per_col,trans_b,out", [
    (np.uint8, np.int8, False, False, np.int32), (np.int8, np.int8, True, True, np.int8),
    (np.uint8, np.uint8, True, False, np.uint8), (np.int8, np.uint8, False, True, np.int8)])
def test_qgemm_kernel_exact(lib, M, K, N, at, bt, per_col, trans_b, out):
    a, b = _q((M, K), at), _q((N, K) if trans_b else (K, N), bt)
    az = int(_q((), at))
    bz = _q((N,), bt) if per_col else np.full(1, _q((), bt))
    bm_ = (b.T if trans_b else b).astype(np.int64) - bz.astype(np.int64).reshape(1, -1)
    acc = (a.astype(np.int64) - az) @ bm_
    bias = RNG.integers(-3000, 3000, N).astype(np.int32) if out != np.int32 else None
    scale = (RNG.random(N if per_col else 1) * 1e-3 + 1e-5).astype(np.float32)
    yz = int(_q((), out)) if out != np.int32 else 0
    plan = lib.qgemm_plan(N, K, lib.qpack_cols(b, bz, trans_b), a.dtype, az, np.dtype(out), yz, bias,
                          scale if out != np.int32 else None)
    y = np.empty((M, N), out)
    assert plan.fn(plan.addr, M, a.ctypes.data, None, y.ctypes.data) == 0
    want = acc.astype(np.int32) if out == np.int32 else _requant(acc + bias, scale, yz, out)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 1000])
def test_quantize_dequantize_exact(lib, dtype, n):
    x = (RNG.standard_normal(n) * 3).astype(np.float32)
    x[: n // 4] = np.round(x[: n // 4] * 2) / 2 * np.float32(0.05)     # halves: round half to even
    scale, zero = np.float32(0.05), int(_q((), dtype))
    info = np.iinfo(dtype)
    want = np.clip(np.rint(x / scale) + zero, info.min, info.max).astype(dtype)
    got = lib.quantize(x, scale, zero, dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(lib.dequantize(got, scale, zero),
                                  (got.astype(np.int32) - zero).astype(np.float32) * scale)
    i32 = RNG.integers(-2 ** 30, 2 ** 30, n).astype(np.int32)
    np.testing.assert_array_equal(lib.dequantize(i32), i32.astype(np.float32))   # Cast


@pytest.mark.parametrize("n", [0, 1, 9, 1000])
def test_cast_of_int64_and_bool_rounds_as_numpy(lib, n):
    # oxk_dequantize as Cast: int64 beyond 2^24 rounds to nearest (ties to even) as numpy's astype
    big = RNG.integers(-2 ** 62, 2 ** 62, n, dtype=np.int64)
    big[: n // 3] = (RNG.integers(-2 ** 30, 2 ** 30, n // 3) * 2 + 1) << 24   # halfway cases
    big[n // 3: n // 2] = RNG.integers(-1000, 1000, n // 2 - n // 3)
    np.testing.assert_array_equal(lib.dequantize(big), big.astype(np.float32))
    flags = RNG.random(n) < 0.5
    np.testing.assert_array_equal(lib.dequantize(flags), flags.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape", [(1, 16, 16, 16), (2, 3, 5), (1, 1, 1, 1)])
def test_qglobal_pool_exact(lib, dtype, shape):
    x = _q(shape, dtype)
    xz, yz = int(_q((), dtype)), int(_q((), dtype))
    hw = int(np.prod(shape[2:]))
    scale = np.float32(0.02) / (np.float32(0.01) * np.float32(hw))
    acc = x.reshape(shape[0], shape[1], -1).astype(np.int64).sum(-1) - xz * hw
    want = _requant(acc, scale, yz, dtype).reshape(shape[:2] + (1,) * (len(shape) - 2))
    np.testing.assert_array_equal(lib.qglobal_pool(x, xz, yz, scale), want)


@pytest.mark.parametrize("x", [RNG.standard_normal((3, 50)).astype(np.float32), np.zeros(4, np.float32),
                               np.abs(RNG.standard_normal(9)).astype(np.float32) + 1,
                               -np.abs(RNG.standard_normal(9)).astype(np.float32)])
def test_dynamic_quantize_matches_onnxruntime(lib, x):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.UINT8, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = lib.dynamic_quantize(x)
    for g_, w_ in zip(got, want):
        np.testing.assert_array_equal(g_, w_)


def test_bad_arguments_are_refused(lib):
    plan = lib.qgemm_plan(4, 4, lib.qpack_cols(_q((4, 4), np.int8), np.zeros(1)), np.int8, 0,
                          np.dtype(np.int8), 200, None, np.ones(1, np.float32))   # zero out of range
    y = np.empty((1, 4), np.int8)
    x = _q((1, 4), np.int8)
    assert plan.fn(plan.addr, 1, x.ctypes.data, None, y.ctypes.data) == -1
    assert lib._lib.oxk_qconv_run(None, 1, None, None, None) == -1
    with pytest.raises(onnxedge.errors.InvalidArgument):
        lib.dequantize(np.zeros(3, np.float32))


# ------------------------------------------------------------------------------ models

def _torch_models(tmp):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(16, 10)

        def forward(self, x):
            x = torch.relu(self.c2(torch.relu(self.c1(x))))
            return self.fc(x.mean((2, 3)))

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(20, 32), torch.nn.Linear(32, 5)

        def forward(self, x):
            return self.l2(torch.relu(self.l1(x)))

    out = {}
    for name, mod, shape in (("cnn", CNN(), (1, 3, 16, 16)), ("mlp", MLP(), (4, 20))):
        path = os.path.join(tmp, name + ".onnx")
        torch.onnx.export(mod.eval(), torch.randn(*shape), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
        out[name] = (path, shape)
    return out


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    return _torch_models(str(tmp_path_factory.mktemp("int8")))


def _static(path, shape, out, fmt, per_channel):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    quantize_static(path, out, Reader(), quant_format=fmt, per_channel=per_channel,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return out


def _engine_session(path, **opts):
    so = onnxedge.SessionOptions()
    so.intra_op_num_threads = 1
    return onnxedge.InferenceSession(path, so, providers=[ENGINE, "CPUExecutionProvider"],
                                     provider_options=[dict(opts), {}])


def _ort(path, optimized=True):
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", ["cnn", "mlp"])
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_static_quantized_models_match_onnxruntime(float_models, tmp_path, name, fmt, per_channel):
    from onnxruntime.quantization import QuantFormat
    src, shape = float_models[name]
    path = _static(src, shape, str(tmp_path / "q.onnx"), getattr(QuantFormat, fmt), per_channel)
    sess = _engine_session(path)
    report = sess.partition_report()
    int_ops = {r["op_type"] for r in report if r["provider"] == ENGINE}
    assert {"QLinearConv" if name == "cnn" else "QLinearMatMul"} & int_ops or "QGemm" in int_ops, report
    for seed in range(3):
        x = np.random.default_rng(seed + 5).standard_normal(shape).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        want = _ort(path).run(None, {"x": x})[0]
        # the engine's integer kernels requantize as onnxruntime's; what stays float (the
        # float ops onnxruntime fuses differently) may round a value the other way: 1 step
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        step = float(np.abs(want).max()) / 127 + 1e-12 if want.dtype == np.float32 else 1.0
        assert diff.max() <= step * 1.01, (diff.max(), step)


def test_qdq_cnn_benchmark_model_exact(tmp_path):
    """benchmarks' qdq_cnn: all on the engine in one program, equal to onnxruntime's (optimized)."""
    path = bm.build_all(str(tmp_path), ["qdq_cnn"])["qdq_cnn"]
    sess = _engine_session(path)
    assert all(r["provider"] == ENGINE for r in sess.partition_report())
    for batch in (1, 3):
        feeds = bm.make_inputs("qdq_cnn", batch=batch, seed=batch)
        want = _ort(path).run(None, feeds)[0]
        first = sess.run(None, feeds)[0]     # node by node (records shapes)
        again = sess.run(None, feeds)[0]     # the program
        np.testing.assert_array_equal(first, want)
        np.testing.assert_array_equal(again, want)
    step = [s for s in sess._plan.steps if s.provider == ENGINE][0]
    assert len([p for p in step.programs.programs.values() if p is not None]) == 2, step.programs.refusals


def test_programs_equal_node_by_node(float_models, tmp_path):
    from onnxruntime.quantization import QuantFormat
    src, shape = float_models["cnn"]
    path = _static(src, shape, str(tmp_path / "q.onnx"), QuantFormat.QDQ, True)
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    progs, nodes = _engine_session(path), _engine_session(path, programs=0)
    outs = [progs.run(None, {"x": x})[0] for _ in range(3)] + [nodes.run(None, {"x": x})[0]]
    for o in outs[1:]:
        assert o.tobytes() == outs[0].tobytes()


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_dynamic_quantized_models_run_in_c(float_models, tmp_path, name):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src, shape = float_models[name]
    path = str(tmp_path / "d.onnx")
    quantize_dynamic(src, path, weight_type=QuantType.QInt8)
    sess = _engine_session(path)
    report = sess.partition_report()
    on_cpu = [(r["op_type"], r["fallback_reasons"]) for r in report if r["provider"] != ENGINE]
    assert not [o for o in on_cpu if o[0] in ("DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                                              "Cast", "Mul", "Add")], on_cpu
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    want = _ort(path, optimized=False).run(None, {"x": x})[0]
    for _ in range(2):   # node by node, then the program: the same float32 arithmetic as onnxruntime's
        got = sess.run(None, {"x": x})[0]   # unfused graph, up to float summation order
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


# ------------------------------------------------------------------------------ ONNX node cases

NODE_OPS = ("QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger", "DynamicQuantizeLinear",
            "QuantizeLinear", "DequantizeLinear")


def _node_cases():
    sys.path.insert(0, os.path.join(REPO, "tests", "conformance"))
    try:
        import cases
        root = cases.ensure_cache(generate=False, verbose=False)
        return [c for c in cases.load_manifest(root) if c.op_type in NODE_OPS and not c.domain], cases
    except Exception:   # no cache on this machine
        return [], None


NODE_CASES, _CASES = _node_cases()


@pytest.mark.parametrize("info", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_onnx_node_cases_on_the_engine(info):
    """Every input but the first made a constant (as a model's weights and scales are), so the
    engine's kernels take the node; outputs equal the case's."""
    import onnx
    case = _CASES.load_case(info)
    model = onnx.load_from_string(case.model)
    feeds, expected = case.data_sets[0]
    g = model.graph
    keep = case.input_names[0]
    for name, value in zip(case.input_names[1:], feeds[1:]):
        g.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    sess = onnxedge.InferenceSession(model.SerializeToString())
    for _ in range(2):
        got = sess.run(None, {keep: feeds[0]})
        for gv, wv in zip(got, expected):
            assert gv.dtype == wv.dtype
            if wv.dtype == np.float32:
                np.testing.assert_allclose(gv, wv, rtol=1e-6)
            else:
                np.testing.assert_array_equal(gv, wv)


def test_generic_build_gives_the_same_bits(lib):
    """The plain-C tile (every target without SSE2/AVX2/NEON) against the host build's."""
    gen = L.load("generic")
    for N, C, H, W, co, k, group, s, pads, d in CONV_CASES[:4]:
        x, w = _q((N, C, H, W), np.uint8), _q((co, C // group, k, k), np.int8)
        outs = []
        for lb in (lib, gen):
            packed = lb.qpack_rows(w.reshape(co, -1), np.zeros(1))
            OH = (H + pads[0] + pads[2] - d * (k - 1) - 1) // s + 1
            OW = (W + pads[1] + pads[3] - d * (k - 1) - 1) // s + 1
            plan = lb.qconv_plan(x.shape, x.dtype, 7, packed, co, (k, k), group, (s, s), (d, d), pads,
                                 (OH, OW), np.dtype(np.int32))
            y = np.empty((N, co, OH, OW), np.int32)
            assert plan.fn(plan.addr, N, x.ctypes.data, None, y.ctypes.data) == 0
            outs.append(y)
        np.testing.assert_array_equal(outs[0], outs[1])
