"""Quantized zoo models: small float models made with onnx.helper (random weights, fixed seeds),
quantized with onnxruntime's own tools as users do.

- quantize_static, QOperator format (QLinearConv, QLinearAdd/Mul/Concat/Sigmoid/LeakyRelu,
  QLinearAveragePool, QLinearGlobalAveragePool, QGemm, QLinearSoftmax, QLinearMatMul) and QDQ
  format, uint8 and int8 activations; QDQ with 16-bit activations (com.microsoft Q/DQ);
- quantize_dynamic of an MLP, a CNN (ConvInteger after DynamicQuantizeLinear) and an LSTM
  (DynamicQuantizeLSTM), and the MLP saved by an onnxruntime session with
  `optimized_model_filepath` (MatMulIntegerToFloat, DynamicQuantizeMatMul);
- MatMulNBitsQuantizer 4 and 8 bits (block 32) of an MLP, and of an opset-21 embedding Gather
  (GatherBlockQuantized).
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List

import numpy as np

from zoo.zoo import ZooModel

try:
    import onnxruntime as _ort
    ORT_VERSION = _ort.__version__
except ImportError:      # the zoo test skips without onnxruntime
    ORT_VERSION = "missing"

REQ = ("onnx", "onnxruntime")
REQ_NBITS = REQ + ("onnx_ir",)     # MatMulNBitsQuantizer imports onnx_ir (PyPI onnx-ir)
Feeds = Dict[str, np.ndarray]


# ----------------------------------------------------------------------------- float models

def _init(rng: np.random.RandomState, name: str, shape, scale: float = 0.3):
    from onnx import numpy_helper
    return numpy_helper.from_array((rng.randn(*shape) * scale).astype(np.float32), name)


def _save(nodes, inputs, outputs, inits, path: str, opset: int = 13) -> None:
    import onnx
    from onnx import helper
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 21 else 10
    onnx.checker.check_model(model)
    onnx.save(model, path)


def float_cnn(path: str) -> None:
    """Conv/LeakyRelu, Conv/Sigmoid/Mul (swish), a residual Add, AveragePool, a Concat with a
    1x1 Conv branch, GlobalAveragePool, Flatten, Gemm and Softmax: [1, 3, 16, 16] -> [1, 10]."""
    from onnx import TensorProto, helper
    rng = np.random.RandomState(0)
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        n("LeakyRelu", ["c1"], ["r1"], alpha=0.1),
        n("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        n("Sigmoid", ["c2"], ["s2"]),
        n("Mul", ["c2", "s2"], ["m2"]),
        n("Add", ["m2", "r1"], ["a2"]),
        n("AveragePool", ["a2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p2", "w3", "b3"], ["c3"]),
        n("Concat", ["p2", "c3"], ["cat"], axis=1),
        n("GlobalAveragePool", ["cat"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", "wg", "bg"], ["logits"]),
        n("Softmax", ["logits"], ["y"], axis=-1),
    ]
    inits = [_init(rng, "w1", (8, 3, 3, 3)), _init(rng, "b1", (8,), 0.1),
             _init(rng, "w2", (8, 8, 3, 3), 0.2), _init(rng, "b2", (8,), 0.1),
             _init(rng, "w3", (4, 8, 1, 1)), _init(rng, "b3", (4,), 0.1),
             _init(rng, "wg", (12, 10), 1.0), _init(rng, "bg", (10,), 0.1)]
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits, path)


def float_mlp(path: str, dims=(32, 64, 64, 10), opset: int = 13) -> None:
    """MatMul+Add, Relu, MatMul+Add, Sigmoid, Mul, Gemm, Softmax on [4, dims[0]]."""
    from onnx import TensorProto, helper
    rng = np.random.RandomState(1)
    d0, d1, d2, d3 = dims
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["h1"]), n("Add", ["h1", "b1"], ["h1b"]),
        n("Relu", ["h1b"], ["r1"]),
        n("MatMul", ["r1", "w2"], ["h2"]), n("Add", ["h2", "b2"], ["h2b"]),
        n("Sigmoid", ["h2b"], ["s2"]), n("Mul", ["h2b", "s2"], ["m2"]),
        n("Gemm", ["m2", "w3", "b3"], ["logits"]), n("Softmax", ["logits"], ["y"], axis=-1),
    ]
    inits = [_init(rng, "w1", (d0, d1), 0.25), _init(rng, "b1", (d1,), 0.1),
             _init(rng, "w2", (d1, d2), 0.2), _init(rng, "b2", (d2,), 0.1),
             _init(rng, "w3", (d2, d3), 0.5), _init(rng, "b3", (d3,), 0.1)]
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, d0])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, d3])], inits, path, opset)


def float_two_heads(path: str) -> None:
    """One activation read by two MatMuls (onnxruntime then fuses MatMulIntegerToFloat, not
    DynamicQuantizeMatMul): [4, 32] -> MatMul+Add, Relu -> two MatMuls -> Add, Tanh -> MatMul."""
    from onnx import TensorProto, helper
    rng = np.random.RandomState(4)
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w1"], ["h1"]), n("Add", ["h1", "b1"], ["h1b"]),
             n("Relu", ["h1b"], ["r1"]), n("MatMul", ["r1", "wa"], ["ya"]),
             n("MatMul", ["r1", "wb"], ["yb"]), n("Add", ["ya", "yb"], ["s"]),
             n("Tanh", ["s"], ["t"]), n("MatMul", ["t", "w3"], ["y"])]
    inits = [_init(rng, "w1", (32, 48), 0.25), _init(rng, "b1", (48,), 0.1),
             _init(rng, "wa", (48, 24), 0.2), _init(rng, "wb", (48, 24), 0.2),
             _init(rng, "w3", (24, 10), 0.5)]
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])], inits, path)


def float_deep_cnn(path: str, layers: int = 10) -> None:
    """`layers` 3x3 Convs with Sigmoid / swish activations (dynamic quantization's worst case:
    every ConvInteger re-quantizes a float activation), GlobalAveragePool, Flatten, MatMul:
    [1, 3, 16, 16] -> [1, 10]."""
    from onnx import TensorProto, helper
    rng = np.random.RandomState(7)
    n = helper.make_node
    nodes, inits, prev, cin = [], [], "x", 3
    for i in range(layers):
        c = "c%d" % i
        nodes.append(n("Conv", [prev, "w%d" % i, "b%d" % i], [c], pads=[1, 1, 1, 1]))
        inits += [_init(rng, "w%d" % i, (8, cin, 3, 3), 1.2 / np.sqrt(9 * cin)),
                  _init(rng, "b%d" % i, (8,), 0.1)]
        nodes.append(n("Sigmoid", [c], ["s%d" % i]))
        if i % 2:
            nodes.append(n("Mul", [c, "s%d" % i], ["a%d" % i]))
            prev = "a%d" % i
        else:
            prev = "s%d" % i
        cin = 8
    nodes += [n("GlobalAveragePool", [prev], ["g"]), n("Flatten", ["g"], ["f"]),
              n("MatMul", ["f", "wo"], ["y"])]
    inits.append(_init(rng, "wo", (8, 10), 2.0))
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits, path)


def float_lstm(path: str) -> None:
    """An LSTM (5 steps, batch 2, 8 -> 16, bidirectional) followed by MatMul: Y and Y_h out."""
    from onnx import TensorProto, helper
    rng = np.random.RandomState(2)
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Y_h"], hidden_size=16,
                              direction="bidirectional"),
             helper.make_node("Transpose", ["Y"], ["Yt"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["Yt", "shape"], ["Yr"]),
             helper.make_node("MatMul", ["Yr", "wo"], ["out"])]
    from onnx import numpy_helper
    inits = [_init(rng, "W", (2, 64, 8), 0.4), _init(rng, "R", (2, 64, 16), 0.3),
             _init(rng, "B", (2, 128), 0.1), _init(rng, "wo", (32, 4), 0.5),
             numpy_helper.from_array(np.array([5, 2, 32], np.int64), "shape")]
    _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, 8])],
          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [5, 2, 4]),
           helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [2, 2, 16])], inits, path)


def float_embedding(path: str) -> None:
    """Opset 21: token ids -> embedding Gather [100, 64] -> MatMul [64, 32] -> ReduceMean."""
    from onnx import TensorProto, helper
    rng = np.random.RandomState(3)
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], axis=0),
             helper.make_node("MatMul", ["e", "w"], ["y"])]
    inits = [_init(rng, "emb", (100, 64), 1.0), _init(rng, "w", (64, 32), 0.2)]
    _save(nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 7])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 32])], inits, path, 21)


# ----------------------------------------------------------------------------- feeds and calibratio

def _images(n: int, seed: int) -> List[np.ndarray]:
    rng = np.random.RandomState(seed)
    return [rng.rand(1, 3, 16, 16).astype(np.float32) * 2 - 1 for _ in range(n)]


def _vectors(n: int, seed: int, width: int = 32) -> List[np.ndarray]:
    rng = np.random.RandomState(seed)
    return [rng.randn(4, width).astype(np.float32) for _ in range(n)]


class _Reader:
    """A CalibrationDataReader over a list of arrays for one input."""

    def __init__(self, name: str, arrays: List[np.ndarray]):
        self._it = iter([{name: a} for a in arrays])

    def get_next(self):
        return next(self._it, None)


def _tmp(path: str, name: str) -> str:
    return os.path.join(os.path.dirname(path), name)


# ----------------------------------------------------------------------------- recipes

def static(make_float: Callable[[str], None], data: Callable[[int, int], List[np.ndarray]],
           fmt: str, activation: str = "QUInt8", weight: str = "QInt8", per_channel: bool = False,
           extra: Dict = None) -> Callable[[str], Feeds]:
    """quantize_static of a float model with calibration data; returns a build(path)."""
    def build(path: str) -> Feeds:
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
        fp = _tmp(path, "float.onnx")
        make_float(fp)
        quantize_static(fp, path, _Reader("x", data(16, 10)),
                        quant_format=getattr(QuantFormat, fmt),
                        activation_type=getattr(QuantType, activation),
                        weight_type=getattr(QuantType, weight), per_channel=per_channel,
                        extra_options=dict(extra or {}))
        return {"x": data(1, 99)[0]}
    return build


def dynamic(make_float: Callable[[str], None], feeds: Callable[[], Feeds],
            op_types: List[str] = None) -> Callable[[str], Feeds]:
    """quantize_dynamic (int8 weights) of a float model; returns a build(path)."""
    def build(path: str) -> Feeds:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        fp = _tmp(path, "float.onnx")
        make_float(fp)
        quantize_dynamic(fp, path, weight_type=QuantType.QInt8, op_types_to_quantize=op_types)
        return feeds()
    return build


def ort_optimized_dynamic_mlp(path: str) -> Feeds:
    """A dynamically quantized MLP with a shared activation (float_two_heads) as an onnxruntime
    session saves it after its graph optimizations (MatMulIntegerToFloat, DynamicQuantizeMatMul)."""
    import onnxruntime as ort
    qp = _tmp(path, "dynamic.onnx")
    dynamic(float_two_heads, lambda: {})(qp)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = path
    ort.InferenceSession(qp, opts, providers=["CPUExecutionProvider"])
    return {"x": _vectors(1, 98)[0]}


def nbits(make_float: Callable[[str], None], feeds: Callable[[], Feeds], bits: int,
          op_types=("MatMul",), symmetric: bool = False, axes=None) -> Callable[[str], Feeds]:
    """MatMulNBitsQuantizer (block 32, QOperator format) of a float model."""
    def build(path: str) -> Feeds:
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
        fp = _tmp(path, "float.onnx")
        make_float(fp)
        q = MatMulNBitsQuantizer(onnx.load(fp), bits=bits, block_size=32, is_symmetric=symmetric,
                                 op_types_to_quantize=tuple(op_types), quant_axes=axes)
        q.process()
        q.model.save_model_to_file(path)
        return feeds()
    return build


def _mlp_feeds() -> Feeds:
    return {"x": _vectors(1, 97)[0]}


def _lstm_feeds() -> Feeds:
    return {"x": np.random.RandomState(5).randn(5, 2, 8).astype(np.float32)}


def _ids_feeds() -> Feeds:
    return {"ids": np.random.RandomState(6).randint(0, 100, size=(2, 7)).astype(np.int64)}


def _tool(what: str) -> str:
    return "onnxruntime %s (%s)" % (ORT_VERSION, what)


def _mlp_wide(path: str) -> None:
    float_mlp(path, dims=(64, 128, 64, 10))


def _wide_feeds() -> Feeds:
    return {"x": _vectors(1, 96, 64)[0]}


QDQ16 = {"UseQDQContribOps": True}
# QDQ models output floats dequantized from the last QuantizeLinear (the Softmax's, scale 1/255):
# onnxruntime runs them as fused integer kernels, onnxedge as float ops, so a tie may round to
# the neighbouring step.
STEP8 = 1.01 / 255

MODELS = [
    ZooModel("static_qop_cnn_u8", _tool("quantize_static QOperator, uint8 activations"),
             static(float_cnn, _images, "QOperator"), compare="quantized", atol=1, requires=REQ),
    ZooModel("static_qop_cnn_s8", _tool("quantize_static QOperator, int8, per-channel"),
             static(float_cnn, _images, "QOperator", "QInt8", per_channel=True),
             compare="quantized", atol=1, requires=REQ),
    ZooModel("static_qop_mlp_u8", _tool("quantize_static QOperator, uint8 activations"),
             static(float_mlp, _vectors, "QOperator"), compare="quantized", atol=1, requires=REQ),
    ZooModel("static_qdq_cnn_u8", _tool("quantize_static QDQ"),
             static(float_cnn, _images, "QDQ"), compare="quantized", rtol=0, atol=STEP8,
             requires=REQ),
    ZooModel("static_qdq_mlp_s8", _tool("quantize_static QDQ, int8 activations"),
             static(float_mlp, _vectors, "QDQ", "QInt8"), compare="quantized", rtol=0, atol=STEP8,
             requires=REQ),
    ZooModel("static_qdq16_cnn", _tool("quantize_static QDQ, uint16 activations, UseQDQContribOps"),
             static(float_cnn, _images, "QDQ", "QUInt16", "QInt8", extra=QDQ16),
             compare="quantized", rtol=0, atol=1e-3, requires=REQ),
    ZooModel("static_qdq16_mlp", _tool("quantize_static QDQ, int16 activations and weights, "
                                       "UseQDQContribOps"),
             static(float_mlp, _vectors, "QDQ", "QInt16", "QInt16", extra=QDQ16),
             compare="quantized", rtol=0, atol=1e-3, requires=REQ),
    ZooModel("dynamic_mlp", _tool("quantize_dynamic int8"),
             dynamic(float_mlp, _mlp_feeds), compare="quantized", rtol=1e-4, atol=1e-5,
             requires=REQ),
    ZooModel("dynamic_cnn", _tool("quantize_dynamic int8, Conv and MatMul"),
             dynamic(float_cnn, lambda: {"x": _images(1, 95)[0]}, ["Conv", "MatMul"]),
             compare="quantized", rtol=1e-3, atol=1e-4, requires=REQ),
    ZooModel("dynamic_deep_cnn", _tool("quantize_dynamic int8, 10 Conv layers with Sigmoid/swish"),
             dynamic(float_deep_cnn, lambda: {"x": _images(1, 94)[0]}, ["Conv", "MatMul"]),
             compare="quantized", rtol=1e-3, atol=1e-4, requires=REQ),
    ZooModel("dynamic_lstm", _tool("quantize_dynamic int8, LSTM"),
             dynamic(float_lstm, _lstm_feeds, ["LSTM", "MatMul"]), compare="quantized",
             rtol=1e-4, atol=1e-5, requires=REQ),
    ZooModel("ort_optimized_dynamic_mlp", _tool("quantize_dynamic int8, then a session's "
                                                "optimized_model_filepath (extended)"),
             ort_optimized_dynamic_mlp, key="2", compare="quantized", rtol=1e-4, atol=1e-5,
             requires=REQ),
    ZooModel("nbits4_mlp", _tool("MatMulNBitsQuantizer 4 bits, block 32, asymmetric"),
             nbits(_mlp_wide, _wide_feeds, 4), rtol=1e-4, atol=1e-5, requires=REQ_NBITS),
    ZooModel("nbits4_sym_mlp", _tool("MatMulNBitsQuantizer 4 bits, block 32, symmetric"),
             nbits(_mlp_wide, _wide_feeds, 4, symmetric=True), rtol=1e-4, atol=1e-5,
             requires=REQ_NBITS),
    ZooModel("nbits8_mlp", _tool("MatMulNBitsQuantizer 8 bits, block 32"),
             nbits(_mlp_wide, _wide_feeds, 8), rtol=1e-4, atol=1e-5, requires=REQ_NBITS),
    ZooModel("nbits4_gather_embedding", _tool("MatMulNBitsQuantizer 4 bits, Gather and MatMul, "
                                              "opset 21"),
             nbits(float_embedding, _ids_feeds, 4, op_types=("Gather", "MatMul"),
                   axes=(("MatMul", 0), ("Gather", 1))), rtol=1e-4, atol=1e-5, requires=REQ_NBITS),
]
