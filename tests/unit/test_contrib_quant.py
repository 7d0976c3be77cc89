"""onnxruntime's quantized contrib ops (com.microsoft): one node on small random inputs, run by
onnxedge and by onnxruntime (the reference). Integer outputs equal (within one quantization
step where onnxruntime sums in another order or meets an exact tie), float outputs at a
tolerance scaled to their magnitude."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge.kernels import contrib_quant
from onnxedge.kernels import matmul as matmul_kernels

MS = "com.microsoft"
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
        np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8,
        np.dtype(np.uint16): TensorProto.UINT16, np.dtype(np.int16): TensorProto.INT16,
        np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64}


def _model(op: str, inputs: Sequence[Optional[tuple]], out_types: Sequence[int],
           attrs: Dict[str, Any],
           domain: str = MS, opset: int = 17) -> bytes:
    """One node; `inputs` are (name, array, is_constant) or None for an empty optional input."""
    names, vin, inits = [], [], []
    for item in inputs:
        if item is None:
            names.append("")
            continue
        name, arr, const = item
        names.append(name)
        if const:
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            vin.append(helper.make_tensor_value_info(name, ELEM[arr.dtype], list(arr.shape)))
    while names and not names[-1]:
        names.pop()
    outs = ["y%d" % i for i in range(len(out_types))]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    vout = [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)]
    graph = helper.make_graph([node], "g", vin, vout, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model.SerializeToString()


def _both(op: str, inputs: Sequence[Optional[tuple]], out_types: Sequence[int],
          **attrs: Any) -> tuple:
    ort = pytest.importorskip("onnxruntime")
    model = _model(op, inputs, out_types, attrs, domain="" if op == "Sigmoid" else MS)
    feeds = {i[0]: i[1] for i in inputs if i is not None and not i[2]}
    expected = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxedge.InferenceSession(model).run(None, feeds)
    return expected, got


def _assert_close(got: np.ndarray, expected: np.ndarray, steps: int = 0,
                  rtol: float = 1e-5) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, \
        (got.shape, got.dtype, expected.shape, expected.dtype)
    if expected.dtype.kind in "iu":
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
        assert diff.max(initial=0) <= steps, "off by %d steps" % diff.max()
    else:
        scale = float(np.abs(expected).max(initial=1.0))
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=rtol * scale)


def _q(rng: np.random.RandomState, shape: Sequence[int], dtype=np.uint8) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.randint(info.min, int(info.max) + 1, size=shape).astype(dtype)


def _c(value: Any, dtype=np.float32) -> np.ndarray:
    return np.array(value, dtype=dtype)


# ----------------------------------------------------------------------------- numpy references
# (these run without onnxruntime, e.g. under Python 3.8 + numpy 1.17)

def test_matmul_nbits_against_a_loop():
    rng = np.random.RandomState(20)
    K, N, block = 40, 3, 16
    kb = 3
    b = _q(rng, (N, kb, block // 2))
    scales = rng.rand(N * kb).astype(np.float32)
    zps = _q(rng, (N * 2,))                   # ceil(3 blocks * 4 bits / 8) = 2 bytes per row
    a = rng.randn(2, K).astype(np.float32)
    w = np.zeros((N, K), np.float32)
    for n in range(N):
        for k in range(K):
            byte = b[n, k // block, (k % block) // 2]
            code = (byte >> 4) if k % 2 else (byte & 15)
            zbyte = zps[n * 2 + (k // block) // 2]
            zp = (zbyte >> 4) if (k // block) % 2 else (zbyte & 15)
            w[n, k] = (float(code) - float(zp)) * scales[n * kb + k // block]
    got = matmul_kernels.matmul_nbits(a, b, scales, zps, K=K, N=N, bits=4, block_size=block)
    np.testing.assert_allclose(got, a @ w.T, rtol=1e-5, atol=1e-5)


def test_gather_block_quantized_against_a_loop():
    rng = np.random.RandomState(21)
    data = _q(rng, (6, 16))                   # 32 4-bit codes per row, blocks of 16
    scales = rng.rand(6, 2).astype(np.float32)
    got = contrib_quant.gather_block_quantized(data, np.array([5, -6, 9]), scales, block_size=16)
    for row, idx in enumerate([5, 0]):
        for k in range(32):
            byte = data[idx, k // 2]
            code = (byte >> 4) if k % 2 else (byte & 15)
            assert got[row, k] == np.float32((int(code) - 8) * scales[idx, k // 16])
    assert not got[2].any()                   # out of range: zeros, as onnxruntime


def test_qlinear_softmax_and_global_pool_near_float():
    rng = np.random.RandomState(22)
    x = _q(rng, (3, 9))
    y = contrib_quant.qlinear_softmax(x, _c(0.05), np.array(100, np.uint8), _c(1 / 256.0),
                                      np.array(0, np.uint8))
    xf = (x.astype(np.float64) - 100) * 0.05
    ref = np.exp(xf - xf.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    assert np.abs(y / 256.0 - ref).max() <= 1.5 / 256
    img = _q(rng, (2, 3, 4, 5))
    g = contrib_quant.qlinear_global_average_pool(img, _c(0.1), np.array(7, np.uint8), _c(0.07),
                                                  np.array(3, np.uint8))
    mean = ((img.astype(np.float64) - 7) * 0.1).mean(axis=(2, 3), keepdims=True)
    assert np.abs(g.astype(np.float64) - np.clip(mean / 0.07 + 3, 0, 255)).max() <= 0.5 + 1e-6


# ----------------------------------------------------------------------------- integer matmuls

@pytest.mark.parametrize("bdtype", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_integer_to_float(bdtype, per_column):
    rng = np.random.RandomState(0)
    a, b = _q(rng, (2, 3, 16)), _q(rng, (16, 5), bdtype)
    bs = (rng.rand(5).astype(np.float32) * 0.02 + 0.001) if per_column else _c(0.013)
    bz = _q(rng, (5,), bdtype) if per_column else np.array(3, bdtype)
    inputs = [("A", a, False), ("B", b, True), ("a_scale", _c(0.021), True), ("b_scale", bs, True),
              ("a_zero_point", np.array(128, np.uint8), True), ("b_zero_point", bz, True),
              ("bias", rng.randn(5).astype(np.float32), True)]
    e, g = _both("MatMulIntegerToFloat", inputs, [TensorProto.FLOAT])
    _assert_close(g[0], e[0])


@pytest.mark.parametrize("bias", [False, True])
def test_dynamic_quantize_matmul(bias):
    rng = np.random.RandomState(1)
    a = rng.randn(4, 32).astype(np.float32)
    inputs = [("A", a, False), ("B", _q(rng, (32, 8), np.int8), True),
              ("b_scale", (rng.rand(8) * 0.01 + 0.001).astype(np.float32), True), None,
              ("bias", rng.randn(8).astype(np.float32), True) if bias else None]
    e, g = _both("DynamicQuantizeMatMul", inputs, [TensorProto.FLOAT])
    _assert_close(g[0], e[0])


@pytest.mark.parametrize("trans_b,quantized_out,per_column", [
    (0, True, False), (1, True, True), (0, False, True), (1, False, False)])
def test_qgemm(trans_b, quantized_out, per_column):
    rng = np.random.RandomState(2)
    a = _q(rng, (3, 16))
    b = _q(rng, (8, 16) if trans_b else (16, 8), np.int8)
    bs = (rng.rand(8) * 0.02 + 0.001).astype(np.float32) if per_column else _c(0.01)
    bz = np.zeros(8, np.int8) if per_column else np.array(0, np.int8)
    inputs = [("A", a, False), ("a_scale", _c(0.02), True),
              ("a_zero_point", np.array(120, np.uint8), True),
              ("B", b, True), ("b_scale", bs, True), ("b_zero_point", bz, True),
              ("C", rng.randint(-500, 500, size=(8,)).astype(np.int32), True)]
    if quantized_out:
        inputs += [("y_scale", _c(0.5), True), ("y_zero_point", np.array(100, np.uint8), True)]
    out = TensorProto.UINT8 if quantized_out else TensorProto.FLOAT
    e, g = _both("QGemm", inputs, [out], alpha=0.75, transB=trans_b)
    _assert_close(g[0], e[0])


# ----------------------------------------------------------------------------- block-quantized

def _nbits_inputs(rng, K, N, bits, block, zp: str, bias: bool):
    kb = -(-K // block)
    blob = block * bits // 8
    a = rng.randn(3, K).astype(np.float32)
    inputs = [("A", a, False), ("B", _q(rng, (N, kb, blob)), True),
              ("scales", (rng.rand(N * kb) * 0.1 + 0.01).astype(np.float32), True)]
    if zp == "packed":
        inputs.append(("zero_points", _q(rng, (N * -(-kb * bits // 8),)), True))
    elif zp == "float":
        inputs.append(("zero_points", rng.rand(N * kb).astype(np.float32) * (1 << bits), True))
    else:
        inputs.append(None)
    inputs.append(None)   # g_idx
    inputs.append(("bias", rng.randn(N).astype(np.float32), True) if bias else None)
    return inputs


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("zp", ["none", "packed", "float"])
def test_matmul_nbits(bits, zp):
    if zp == "float" and bits == 8:
        pytest.skip("onnxruntime takes float zero points for 4 bits only")
    rng = np.random.RandomState(3)
    K, N, block = 80, 7, 32     # K not a multiple of the block; odd number of blocks
    inputs = _nbits_inputs(rng, K, N, bits, block, zp, bias=(zp == "packed"))
    e, g = _both("MatMulNBits", inputs, [TensorProto.FLOAT], K=K, N=N, bits=bits, block_size=block)
    _assert_close(g[0], e[0], rtol=1e-4)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("with_zp", [False, True])
def test_gather_block_quantized_uint8(bits, with_zp):
    rng = np.random.RandomState(4)
    V, D, block = 10, 64, 16
    data = _q(rng, (V, D * bits // 8))
    nb = D // block
    inputs = [("data", data, True), ("indices", np.array([[0, 3, 9], [2, 2, 5]], np.int64), False),
              ("scales", (rng.rand(V, nb) * 0.1 + 0.01).astype(np.float32), True)]
    if with_zp:
        inputs.append(("zero_points", _q(rng, (V, -(-nb * bits // 8))), True))
    e, g = _both("GatherBlockQuantized", inputs, [TensorProto.FLOAT], block_size=block,
                 gather_axis=0, quantize_axis=1, bits=bits)
    _assert_close(g[0], e[0])


def test_gather_block_quantized_int4_other_axes():
    ort = pytest.importorskip("onnxruntime")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.RandomState(5)
    data = rng.randint(-8, 8, size=(4, 32, 6)).astype(ml_dtypes.int4)
    scales = (rng.rand(4, 2, 6) * 0.1 + 0.01).astype(np.float32)
    zps = rng.randint(-8, 8, size=(4, 2, 6)).astype(ml_dtypes.int4)
    model = _model("GatherBlockQuantized",
                   [("data", data, True), ("indices", np.array([1, 0, 3], np.int32), False),
                    ("scales", scales, True), ("zero_points", zps, True)],
                   [TensorProto.FLOAT], dict(block_size=16, gather_axis=2, quantize_axis=1, bits=4))
    feeds = {"indices": np.array([1, 0, 3], np.int32)}
    e = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    g = onnxedge.InferenceSession(model).run(None, feeds)
    _assert_close(g[0], e[0])


# ----------------------------------------------------------------------------- elementwise QLinear

@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_binary(op, dtype):
    rng = np.random.RandomState(6)
    a, b = _q(rng, (2, 3, 8), dtype), _q(rng, (3, 1), dtype)
    zp = (lambda v: np.array(v, dtype))
    inputs = [("A", a, False), ("A_scale", _c(0.05), True), ("A_zero_point", zp(7), True),
              ("B", b, False), ("B_scale", _c(0.11), True),
              ("B_zero_point", zp(-3 if dtype == np.int8 else 131), True),
              ("C_scale", _c(0.2 if op == "QLinearAdd" else 1.7), True),
              ("C_zero_point", zp(5), True)]
    e, g = _both(op, inputs, [ELEM[np.dtype(dtype)]])
    _assert_close(g[0], e[0], steps=1 if op == "QLinearAdd" else 0)   # Add: rare exact ties


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1})])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_lookup_ops(op, attrs, dtype):
    info = np.iinfo(dtype)
    codes = np.arange(info.min, int(info.max) + 1).astype(dtype).reshape(2, 128)
    if op == "QLinearSigmoid":
        yzp = 0 if dtype == np.uint8 else -128
    else:
        yzp = 9
    inputs = [("X", codes, False), ("X_scale", _c(0.07), True),
              ("X_zero_point", np.array(3, dtype), True),
              ("Y_scale", _c(1 / 256.0 if op == "QLinearSigmoid" else 0.05), True),
              ("Y_zero_point", np.array(yzp, dtype), True)]
    e, g = _both(op, inputs, [ELEM[np.dtype(dtype)]], **attrs)
    _assert_close(g[0], e[0])


def test_qlinear_concat():
    rng = np.random.RandomState(7)
    a, b, c = _q(rng, (2, 3, 4)), _q(rng, (2, 5, 4)), _q(rng, (2, 1, 4))
    inputs = [("Y_scale", _c(0.1), True), ("Y_zero_point", np.array(128, np.uint8), True),
              ("a", a, False), ("sa", _c(0.1), True), ("za", np.array(128, np.uint8), True),
              ("b", b, False), ("sb", _c(0.037), True), ("zb", np.array(3, np.uint8), True),
              ("c", c, False), ("sc", _c(0.5), True), ("zc", np.array(200, np.uint8), True)]
    e, g = _both("QLinearConcat", inputs, [TensorProto.UINT8], axis=1)
    _assert_close(g[0], e[0])


# ----------------------------------------------------------------------------- pools and softmax

@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[2, 2], count_include_pad=1, pads=[0, 0, 1, 1]),
    dict(kernel_shape=[3, 2], ceil_mode=1, strides=[2, 2], channels_last=1)])
def test_qlinear_average_pool(attrs):
    rng = np.random.RandomState(8)
    x = _q(rng, (2, 7, 7, 3) if attrs.get("channels_last") else (2, 3, 7, 7))
    inputs = [("X", x, False), ("x_scale", _c(0.03), True),
              ("x_zero_point", np.array(100, np.uint8), True),
              ("y_scale", _c(0.025), True), ("y_zero_point", np.array(90, np.uint8), True)]
    e, g = _both("QLinearAveragePool", inputs, [TensorProto.UINT8], **attrs)
    _assert_close(g[0], e[0], steps=1)        # float sums in another order: rare ties differ


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_global_average_pool(channels_last, dtype):
    rng = np.random.RandomState(9)
    x = _q(rng, (2, 5, 6, 4), dtype)
    inputs = [("X", x, False), ("x_scale", _c(0.03), True),
              ("x_zero_point", np.array(10, dtype), True), ("y_scale", _c(0.011), True),
              ("y_zero_point", np.array(-5 if dtype == np.int8 else 5, dtype), True)]
    e, g = _both("QLinearGlobalAveragePool", inputs, [ELEM[np.dtype(dtype)]],
                 channels_last=channels_last)
    _assert_close(g[0], e[0])


@pytest.mark.parametrize("dtype,opset,axis", [(np.uint8, 13, -1), (np.int8, 13, 1),
                                              (np.uint8, 12, 1), (np.int8, 11, 2)])
def test_qlinear_softmax(dtype, opset, axis):
    rng = np.random.RandomState(10)
    x = _q(rng, (2, 4, 5), dtype)
    zp = -128 if dtype == np.int8 else 0
    inputs = [("X", x, False), ("X_scale", _c(0.08), True),
              ("x_zero_point", np.array(zp + 3, dtype), True),
              ("y_scale", _c(1 / 256.0), True), ("y_zero_point", np.array(zp, dtype), True)]
    e, g = _both("QLinearSoftmax", inputs, [ELEM[np.dtype(dtype)]], axis=axis, opset=opset)
    _assert_close(g[0], e[0], steps=0)


# ----------------------------------------------------------------------------- Q / DQ (com.microsof

@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.uint8, np.int8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_ms_quantize_dequantize(dtype, per_axis):
    rng = np.random.RandomState(11)
    x = (rng.randn(2, 3, 4) * 50).astype(np.float32)
    x[0, 0, :2] = [0.5 * 0.3, 1.5 * 0.3]      # ties: round half to even
    scale = _c([0.3, 0.07, 0.011]) if per_axis else _c(0.3)
    zp = np.array([1, 2, 3] if per_axis else 7, dtype)
    inputs = [("x", x, False), ("s", scale, True), ("z", zp, True)]
    e, g = _both("QuantizeLinear", inputs, [ELEM[np.dtype(dtype)]], axis=1)
    _assert_close(g[0], e[0], steps=0)
    e2, g2 = _both("DequantizeLinear", [("q", e[0], False), ("s", scale, True), ("z", zp, True)],
                   [TensorProto.FLOAT], axis=1)
    _assert_close(g2[0], e2[0])


# ----------------------------------------------------------------------------- sequence ops

@pytest.mark.parametrize("direction,per_column,lens", [
    ("forward", False, None), ("bidirectional", True, None), ("reverse", True, [3, 5])])
def test_dynamic_quantize_lstm(direction, per_column, lens):
    rng = np.random.RandomState(12)
    dirs, hid, inp, seq, batch = (2 if direction == "bidirectional" else 1), 6, 5, 5, 2
    shape_s = (dirs, 4 * hid) if per_column else (dirs,)
    inputs = [("X", rng.randn(seq, batch, inp).astype(np.float32), False),
              ("W", _q(rng, (dirs, inp, 4 * hid), np.int8), True),
              ("R", _q(rng, (dirs, hid, 4 * hid), np.int8), True),
              ("B", (rng.randn(dirs, 8 * hid) * 0.1).astype(np.float32), True),
              ("sequence_lens", np.array(lens, np.int32), True) if lens else None,
              ("initial_h", rng.randn(dirs, batch, hid).astype(np.float32), True),
              None, None,
              ("W_scale", (rng.rand(*shape_s) * 0.01 + 0.002).astype(np.float32), True),
              ("W_zero_point", np.zeros(shape_s, np.int8), True),
              ("R_scale", (rng.rand(*shape_s) * 0.01 + 0.002).astype(np.float32), True),
              ("R_zero_point", np.zeros(shape_s, np.int8), True)]
    e, g = _both("DynamicQuantizeLSTM", inputs, [TensorProto.FLOAT] * 3, hidden_size=hid,
                 direction=direction)
    for got, exp in zip(g, e):
        _assert_close(got, exp, rtol=1e-4)


def test_qattention():
    pytest.importorskip("onnxedge.kernels.contrib_transformer")
    rng = np.random.RandomState(13)
    b, s, d, heads = 2, 4, 8, 2
    inputs = [("input", _q(rng, (b, s, d)), False), ("weight", _q(rng, (d, 3 * d), np.int8), True),
              ("bias", (rng.randn(3 * d) * 0.1).astype(np.float32), True),
              ("input_scale", _c(0.02), True), ("weight_scale", _c(0.015), True),
              ("mask_index", np.array([4, 3], np.int32), True),
              ("input_zero_point", np.array(120, np.uint8), True),
              ("weight_zero_point", np.array(0, np.int8), True)]
    e, g = _both("QAttention", inputs, [TensorProto.FLOAT], num_heads=heads)
    _assert_close(g[0], e[0], rtol=1e-4)


def test_qembed_layer_normalization():
    pytest.importorskip("onnxedge.kernels.contrib_transformer")
    rng = np.random.RandomState(14)
    b, s, h, vocab = 2, 5, 8, 20
    u8 = (lambda v: np.array(v, np.uint8))
    inputs = [("input_ids", rng.randint(0, vocab, size=(b, s)).astype(np.int32), False),
              ("segment_ids", rng.randint(0, 2, size=(b, s)).astype(np.int32), False),
              ("word", _q(rng, (vocab, h)), True), ("pos", _q(rng, (16, h)), True),
              ("seg", _q(rng, (2, h)), True), ("gamma", _q(rng, (h,)), True),
              ("beta", _q(rng, (h,)), True),
              ("mask", np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32), False),
              ("ws", _c(0.01), True), ("ps", _c(0.02), True), ("ss", _c(0.03), True),
              ("gs", _c(0.004), True), ("bs", _c(0.002), True),
              ("wz", u8(128), True), ("pz", u8(120), True), ("sz", u8(100), True),
              ("gz", u8(10), True), ("bz", u8(128), True)]
    e, g = _both("QEmbedLayerNormalization", inputs, [TensorProto.FLOAT, TensorProto.INT32],
                 epsilon=1e-5)
    _assert_close(g[0], e[0], rtol=1e-4)
    np.testing.assert_array_equal(g[1], e[1])


def _has_fma() -> bool:
    import platform
    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    try:
        with open("/proc/cpuinfo") as f:
            return " fma " in f.read().replace("\n", " ")
    except OSError:
        return False


def test_mlas_logistic_is_onnxruntimes_sigmoid():
    """The float Sigmoid behind QLinearSigmoid's table is onnxruntime's, bit for bit (FMA
    build): numpy's 1/(1+exp(-x)) differs by up to 1.8e-7 and flips quantizer roundings."""
    if not _has_fma():
        pytest.skip("onnxruntime takes its non-FMA logistic kernel on this CPU")
    rng = np.random.RandomState(15)
    x = np.concatenate([(rng.randn(20000) * 8).astype(np.float32),
                        np.array([0, 17.9, -17.9, 18, -18, 40, -40], np.float32)])
    e, g = _both("Sigmoid", [("x", x, False)], [TensorProto.FLOAT])
    np.testing.assert_array_equal(contrib_quant.mlas_logistic(x), e[0])


def test_matmul_nbits_g_idx_and_float16():
    rng = np.random.RandomState(16)
    K, N, block = 64, 5, 32
    for zp in ("float", "packed"):
        inputs = _nbits_inputs(rng, K, N, 4, block, zp, bias=False)
        inputs[4] = ("g_idx", rng.randint(0, 2, size=K).astype(np.int32), True)
        e, g = _both("MatMulNBits", inputs, [TensorProto.FLOAT], K=K, N=N, bits=4,
                     block_size=block)
        _assert_close(g[0], e[0], rtol=1e-4)
    half = _nbits_inputs(rng, K, N, 4, block, "none", bias=True)
    half = [None if i is None else (i[0], i[1].astype(np.float16) if i[1].dtype == np.float32
                                    else i[1], i[2]) for i in half]
    e, g = _both("MatMulNBits", half, [TensorProto.FLOAT16], K=K, N=N, bits=4, block_size=block)
    _assert_close(g[0], e[0], rtol=2e-3)
