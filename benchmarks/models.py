"""The benchmark models, built deterministically with onnx.helper and seeded numpy weights.

- ``mlp``: 784-128-64-10 (Gemm, Relu, Softmax), input ``input`` float32 [batch, 784].
- ``resnet18``: ResNet-18 at 224x224 with BatchNormalization kept as PyTorch exports it,
  input ``input`` float32 [batch, 3, 224, 224], logits ``output`` [batch, 1000].
- ``bert_encoder``: a 4-layer BERT-style encoder (hidden 256, 4 heads, FFN 1024, sequence 128),
  inputs ``input_ids`` / ``attention_mask`` int64 [batch, 128], output ``last_hidden_state``.
- ``mobilenet_v2``: MobileNet-v2 (torchvision's layer table) at 224x224: inverted residuals of
  1x1 expand + Relu6 (Clip 0..6), 3x3 depthwise stride 1/2 + Relu6, 1x1 project, residual Add,
  BatchNormalization kept; input ``input`` float32 [batch, 3, 224, 224], logits ``output``.
- ``qdq_cnn``: a small int8 QDQ CNN (conv 8 + relu, conv 16 stride 2 + relu, global average
  pool, gemm 10), input ``input`` float32 [batch, 3, 32, 32], output ``output`` int8 [batch, 10].

- the real-model-shaped rows of ``real_models.py`` (torch.onnx exports, batch 1): ``vad_lstm``,
  ``yolo_silu``, ``dbnet_hswish``, ``crnn_lstm``.

All are opset 17. ``build_all(out_dir)`` writes them; ``make_inputs(name)`` gives feeds.
"""
from __future__ import annotations

import argparse
import math
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
BERT_VOCAB = 30522
BERT_HIDDEN = 256
BERT_LAYERS = 4
BERT_HEADS = 4
BERT_FFN = 1024
BERT_SEQ = 128
QDQ_SIZE = 32


class _GraphBuilder:
    """Accumulates nodes and initializers with unique, readable names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self._count: Dict[str, int] = {}

    def name(self, base: str) -> str:
        n = self._count.get(base, 0)
        self._count[base] = n + 1
        return base if n == 0 else "%s_%d" % (base, n)

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def const(self, base: str, value: np.ndarray) -> str:
        """A Constant node (as torch's exporter emits for scalars and shapes)."""
        out = self.name(base)
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=out + "_node",
            value=numpy_helper.from_array(np.asarray(value), out)))
        return out

    def op(self, op_type: str, inputs: Sequence[str], base: Optional[str] = None,
           **attrs: object) -> str:
        out = self.name(base or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out + "_node",
                                           **attrs))
        return out

    def normal(self, shape: Sequence[int], std: float) -> np.ndarray:
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def uniform(self, shape: Sequence[int], lo: float, hi: float) -> np.ndarray:
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def model(self, name: str, inputs: List[onnx.ValueInfoProto],
              outputs: List[onnx.ValueInfoProto]) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="onnxedge-benchmarks")
        model.ir_version = IR_VERSION
        return model


def build_mlp(seed: int = 0) -> onnx.ModelProto:
    """MLP 784-128-64-10: Gemm(transB=1)+Relu twice, Gemm, Softmax."""
    b = _GraphBuilder(seed)
    x = "input"
    sizes = [784, 128, 64, 10]
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = b.init("fc%d.weight" % (i + 1), b.normal((n_out, n_in), math.sqrt(2.0 / n_in)))
        bias = b.init("fc%d.bias" % (i + 1), b.normal((n_out,), 0.1))
        x = b.op("Gemm", [x, w, bias], "fc%d" % (i + 1), transB=1)
        if i < len(sizes) - 2:
            x = b.op("Relu", [x], "relu%d" % (i + 1))
    b.nodes.append(helper.make_node("Softmax", [x], ["output"], name="softmax", axis=1))
    return b.model(
        "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])])


def _conv_bn(b: _GraphBuilder, x: str, prefix: str, c_in: int, c_out: int, k: int,
             stride: int, relu: bool) -> str:
    """Conv (no bias) + BatchNormalization (+ Relu), as torch exports a training-mode-free module."""
    w = b.init(prefix + ".conv.weight",
               b.normal((c_out, c_in, k, k), math.sqrt(2.0 / (c_in * k * k))))
    pad = k // 2
    y = b.op("Conv", [x, w], prefix + ".conv", kernel_shape=[k, k], strides=[stride, stride],
             pads=[pad, pad, pad, pad], dilations=[1, 1], group=1)
    scale = b.init(prefix + ".bn.weight", b.uniform((c_out,), 0.5, 1.0))
    bias = b.init(prefix + ".bn.bias", b.normal((c_out,), 0.1))
    mean = b.init(prefix + ".bn.running_mean", b.normal((c_out,), 0.1))
    var = b.init(prefix + ".bn.running_var", b.uniform((c_out,), 0.5, 1.5))
    y = b.op("BatchNormalization", [y, scale, bias, mean, var], prefix + ".bn",
             epsilon=1e-5, momentum=0.9)
    return b.op("Relu", [y], prefix + ".relu") if relu else y


def _basic_block(b: _GraphBuilder, x: str, prefix: str, c_in: int, c_out: int,
                 stride: int) -> str:
    y = _conv_bn(b, x, prefix + ".1", c_in, c_out, 3, stride, relu=True)
    y = _conv_bn(b, y, prefix + ".2", c_out, c_out, 3, 1, relu=False)
    if stride != 1 or c_in != c_out:
        x = _conv_bn(b, x, prefix + ".downsample", c_in, c_out, 1, stride, relu=False)
    y = b.op("Add", [y, x], prefix + ".add")
    return b.op("Relu", [y], prefix + ".out")


def build_resnet18(seed: int = 0) -> onnx.ModelProto:
    """ResNet-18-shaped CNN for 224x224 RGB input, 1000 logits."""
    b = _GraphBuilder(seed)
    x = _conv_bn(b, "input", "stem", 3, 64, 7, 2, relu=True)
    x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for stage, c_out in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            x = _basic_block(b, x, "layer%d.%d" % (stage + 1, block), c_in, c_out, stride)
            c_in = c_out
    x = b.op("GlobalAveragePool", [x], "avgpool")
    x = b.op("Flatten", [x], "flatten", axis=1)
    w = b.init("fc.weight", b.normal((1000, 512), math.sqrt(1.0 / 512)))
    bias = b.init("fc.bias", b.normal((1000,), 0.01))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["output"], name="fc",
                                    alpha=1.0, beta=1.0, transB=1))
    return b.model(
        "resnet18",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1000])])


# torchvision's MobileNet-v2 inverted residual settings: expansion t, channels c, repeats n, stride s
MOBILENET_V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]


def _conv_bn_relu6(b: _GraphBuilder, x: str, prefix: str, c_in: int, c_out: int, k: int,
                   stride: int, group: int = 1, relu6: bool = True) -> str:
    """Conv (no bias) + BatchNormalization (+ Clip(0, 6)), as torch exports ConvBNReLU6."""
    w = b.init(prefix + ".conv.weight",
               b.normal((c_out, c_in // group, k, k), math.sqrt(2.0 / (c_in // group * k * k))))
    pad = k // 2
    y = b.op("Conv", [x, w], prefix + ".conv", kernel_shape=[k, k], strides=[stride, stride],
             pads=[pad, pad, pad, pad], dilations=[1, 1], group=group)
    scale = b.init(prefix + ".bn.weight", b.uniform((c_out,), 0.5, 1.0))
    bias = b.init(prefix + ".bn.bias", b.normal((c_out,), 0.1))
    mean = b.init(prefix + ".bn.running_mean", b.normal((c_out,), 0.1))
    var = b.init(prefix + ".bn.running_var", b.uniform((c_out,), 0.5, 1.5))
    y = b.op("BatchNormalization", [y, scale, bias, mean, var], prefix + ".bn",
             epsilon=1e-5, momentum=0.9)
    if not relu6:
        return y
    return b.op("Clip", [y, b.const(prefix + ".min", np.float32(0.0)),
                         b.const(prefix + ".max", np.float32(6.0))], prefix + ".relu6")


def build_mobilenet_v2(seed: int = 0) -> onnx.ModelProto:
    """MobileNet-v2-shaped CNN (width 1.0) for 224x224 RGB input, 1000 logits."""
    b = _GraphBuilder(seed)
    x = _conv_bn_relu6(b, "input", "features.0", 3, 32, 3, 2)
    c_in, index = 32, 1
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        for i in range(n):
            prefix, stride, hidden = "features.%d" % index, s if i == 0 else 1, c_in * t
            y = x
            if t != 1:
                y = _conv_bn_relu6(b, y, prefix + ".expand", c_in, hidden, 1, 1)
            y = _conv_bn_relu6(b, y, prefix + ".dw", hidden, hidden, 3, stride, group=hidden)
            y = _conv_bn_relu6(b, y, prefix + ".project", hidden, c, 1, 1, relu6=False)
            x = b.op("Add", [x, y], prefix + ".add") if stride == 1 and c_in == c else y
            c_in, index = c, index + 1
    x = _conv_bn_relu6(b, x, "features.%d" % index, c_in, 1280, 1, 1)
    x = b.op("GlobalAveragePool", [x], "avgpool")
    x = b.op("Flatten", [x], "flatten", axis=1)
    w = b.init("classifier.weight", b.normal((1000, 1280), math.sqrt(1.0 / 1280)))
    bias = b.init("classifier.bias", b.normal((1000,), 0.01))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["output"], name="classifier",
                                    alpha=1.0, beta=1.0, transB=1))
    return b.model(
        "mobilenet_v2",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1000])])


def _linear(b: _GraphBuilder, x: str, prefix: str, n_in: int, n_out: int) -> str:
    """MatMul + Add with a [in, out] weight, as torch exports nn.Linear on 3-D input."""
    w = b.init(prefix + ".weight", b.normal((n_in, n_out), 0.02))
    bias = b.init(prefix + ".bias", b.normal((n_out,), 0.02))
    y = b.op("MatMul", [x, w], prefix + ".matmul")
    return b.op("Add", [y, bias], prefix + ".add")


def _layer_norm(b: _GraphBuilder, x: str, prefix: str) -> str:
    scale = b.init(prefix + ".weight", 1.0 + b.normal((BERT_HIDDEN,), 0.05))
    bias = b.init(prefix + ".bias", b.normal((BERT_HIDDEN,), 0.05))
    return b.op("LayerNormalization", [x, scale, bias], prefix, axis=-1, epsilon=1e-12)


def _gelu(b: _GraphBuilder, x: str, prefix: str) -> str:
    """Exact GELU as torch exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt 2))."""
    y = b.op("Div", [x, b.const(prefix + ".sqrt2", np.float32(math.sqrt(2.0)))], prefix + ".div")
    y = b.op("Erf", [y], prefix + ".erf")
    y = b.op("Add", [y, b.const(prefix + ".one", np.float32(1.0))], prefix + ".add")
    y = b.op("Mul", [x, y], prefix + ".mul")
    return b.op("Mul", [y, b.const(prefix + ".half", np.float32(0.5))], prefix + ".mul_half")


def _attention(b: _GraphBuilder, x: str, mask: str, prefix: str) -> str:
    head = BERT_HIDDEN // BERT_HEADS
    to_heads = b.const(prefix + ".heads_shape", np.array([0, 0, BERT_HEADS, head], np.int64))
    q, k, v = [b.op("Reshape", [_linear(b, x, prefix + "." + n, BERT_HIDDEN, BERT_HIDDEN),
                                to_heads], prefix + "." + n + ".reshape")
               for n in ("query", "key", "value")]
    q = b.op("Transpose", [q], prefix + ".query.transpose", perm=[0, 2, 1, 3])
    k = b.op("Transpose", [k], prefix + ".key.transpose", perm=[0, 2, 3, 1])
    v = b.op("Transpose", [v], prefix + ".value.transpose", perm=[0, 2, 1, 3])
    scores = b.op("MatMul", [q, k], prefix + ".scores")
    scores = b.op("Div", [scores, b.const(prefix + ".scale", np.float32(math.sqrt(head)))],
                  prefix + ".scaled")
    scores = b.op("Add", [scores, mask], prefix + ".masked")
    probs = b.op("Softmax", [scores], prefix + ".probs", axis=-1)
    ctx = b.op("MatMul", [probs, v], prefix + ".context")
    ctx = b.op("Transpose", [ctx], prefix + ".context.transpose", perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, b.const(prefix + ".merge_shape",
                                        np.array([0, 0, BERT_HIDDEN], np.int64))],
               prefix + ".context.reshape")
    out = _linear(b, ctx, prefix + ".output.dense", BERT_HIDDEN, BERT_HIDDEN)
    out = b.op("Add", [out, x], prefix + ".output.residual")
    return _layer_norm(b, out, prefix + ".output.LayerNorm")


def _encoder_layer(b: _GraphBuilder, x: str, mask: str, prefix: str) -> str:
    x = _attention(b, x, mask, prefix + ".attention")
    y = _linear(b, x, prefix + ".intermediate.dense", BERT_HIDDEN, BERT_FFN)
    y = _gelu(b, y, prefix + ".intermediate.gelu")
    y = _linear(b, y, prefix + ".output.dense", BERT_FFN, BERT_HIDDEN)
    y = b.op("Add", [y, x], prefix + ".output.residual")
    return _layer_norm(b, y, prefix + ".output.LayerNorm")


def build_bert_encoder(seed: int = 0) -> onnx.ModelProto:
    """4-layer BERT-style encoder with a HuggingFace-style additive attention mask."""
    b = _GraphBuilder(seed)
    words = b.init("embeddings.word_embeddings.weight", b.normal((BERT_VOCAB, BERT_HIDDEN), 0.02))
    positions = b.init("embeddings.position_embeddings.weight",
                       b.normal((512, BERT_HIDDEN), 0.02))
    position_ids = b.init("embeddings.position_ids",
                          np.arange(BERT_SEQ, dtype=np.int64).reshape(1, BERT_SEQ))
    x = b.op("Gather", [words, "input_ids"], "embeddings.word", axis=0)
    p = b.op("Gather", [positions, position_ids], "embeddings.position", axis=0)
    x = b.op("Add", [x, p], "embeddings.sum")
    x = _layer_norm(b, x, "embeddings.LayerNorm")
    # [batch, seq] ints -> [batch, 1, 1, seq] float: 0 where attended, -10000 where masked
    m = b.op("Unsqueeze", ["attention_mask", b.const("mask.axes", np.array([1, 2], np.int64))],
             "mask.unsqueeze")
    m = b.op("Cast", [m], "mask.float", to=TensorProto.FLOAT)
    m = b.op("Sub", [b.const("mask.one", np.float32(1.0)), m], "mask.inverted")
    mask = b.op("Mul", [m, b.const("mask.min", np.float32(-10000.0))], "mask.additive")
    for i in range(BERT_LAYERS):
        x = _encoder_layer(b, x, mask, "encoder.layer.%d" % i)
    b.nodes[-1].output[0] = "last_hidden_state"
    ids_type = helper.make_tensor_value_info
    return b.model(
        "bert_encoder",
        [ids_type("input_ids", TensorProto.INT64, ["batch", BERT_SEQ]),
         ids_type("attention_mask", TensorProto.INT64, ["batch", BERT_SEQ])],
        [ids_type("last_hidden_state", TensorProto.FLOAT, ["batch", BERT_SEQ, BERT_HIDDEN])])


def _conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """NCHW float conv (im2col), only to calibrate qdq_cnn's activation ranges."""
    n, c, h, wd = x.shape
    m, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    cols = np.stack([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                     for i in range(k) for j in range(k)], axis=2)   # n, c, k*k, oh, ow
    out = np.einsum("nckhw,mck->nmhw", cols, w.reshape(m, c, k * k))
    return out + b.reshape(1, m, 1, 1)


def _qparams(lo: float, hi: float) -> tuple:
    """int8 asymmetric (scale, zero point) covering [lo, hi] (and 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32(max(hi - lo, 1e-6) / 255.0)
    zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
    return scale, zp


def build_qdq_cnn(seed: int = 0) -> onnx.ModelProto:
    """QDQ int8 CNN as onnxruntime's static quantizer writes it: conv 8ch 3x3 + Relu, conv 16ch
    3x3 stride 2 + Relu, GlobalAveragePool, Gemm 10, each weight and activation wrapped in
    QuantizeLinear/DequantizeLinear (int8 activations with zero points, int8 symmetric weights,
    int32 biases); activation ranges calibrated on seeded inputs. Output: int8 logits."""
    b = _GraphBuilder(seed)
    calib = np.random.default_rng(seed + 1).standard_normal((8, 3, QDQ_SIZE, QDQ_SIZE)).astype(np.float32)

    def qconst(base: str, w: np.ndarray) -> tuple:
        scale = np.float32(np.abs(w).max() / 127.0)
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        return b.init(base + "_quantized", q), scale, q.astype(np.float32) * scale

    def dq(x: str, scale: np.float32, zp: int, dtype: type, base: str) -> str:
        s = b.init(base + "_scale", np.array(scale, np.float32))
        z = b.init(base + "_zero_point", np.array(zp, dtype))
        return b.op("DequantizeLinear", [x, s, z], base + "_dequantized")

    def qdq(x: str, lo: float, hi: float, base: str) -> tuple:
        scale, zp = _qparams(lo, hi)
        s = b.init(base + "_scale", np.array(scale, np.float32))
        z = b.init(base + "_zero_point", np.array(zp, np.int8))
        q = b.op("QuantizeLinear", [x, s, z], base + "_quantized")
        return b.op("DequantizeLinear", [q, s, z], base + "_dequantized"), scale

    x, s_in = qdq("input", float(calib.min()), float(calib.max()), "input")
    act = calib
    for i, (c_in, c_out, stride) in enumerate([(3, 8, 1), (8, 16, 2)]):
        wq, sw, wf = qconst("conv%d.weight" % (i + 1), b.normal((c_out, c_in, 3, 3),
                                                                 math.sqrt(2.0 / (c_in * 9))))
        bias = b.normal((c_out,), 0.1)
        bq = np.round(bias / (s_in * sw)).astype(np.int32)
        w = dq(wq, sw, 0, np.int8, "conv%d.weight" % (i + 1))
        bd = dq(b.init("conv%d.bias_quantized" % (i + 1), bq), np.float32(s_in * sw), 0, np.int32,
                "conv%d.bias" % (i + 1))
        y = b.op("Conv", [x, w, bd], "conv%d" % (i + 1), kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                 strides=[stride, stride])
        y = b.op("Relu", [y], "relu%d" % (i + 1))
        act = np.maximum(_conv2d(act, wf, bq.astype(np.float32) * s_in * sw, stride, 1), 0)
        x, s_in = qdq(y, 0.0, float(act.max()), "relu%d" % (i + 1))
    act = act.mean(axis=(2, 3))
    x = b.op("GlobalAveragePool", [x], "pool")
    x, s_in = qdq(x, 0.0, float(act.max()), "pool")
    x = b.op("Flatten", [x], "flatten", axis=1)
    wq, sw, wf = qconst("fc.weight", b.normal((10, 16), math.sqrt(1.0 / 16)))
    bq = np.round(b.normal((10,), 0.1) / (s_in * sw)).astype(np.int32)
    logits = act @ wf.T + bq.astype(np.float32) * s_in * sw
    x = b.op("Gemm", [x, dq(wq, sw, 0, np.int8, "fc.weight"),
                      dq(b.init("fc.bias_quantized", bq), np.float32(s_in * sw), 0, np.int32,
                         "fc.bias")], "fc", transB=1)
    scale, zp = _qparams(float(logits.min()), float(logits.max()))
    b.nodes.append(helper.make_node(
        "QuantizeLinear", [x, b.init("output_scale", np.array(scale, np.float32)),
                           b.init("output_zero_point", np.array(zp, np.int8))],
        ["output"], name="output_quantize"))
    return b.model(
        "qdq_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, QDQ_SIZE, QDQ_SIZE])],
        [helper.make_tensor_value_info("output", TensorProto.INT8, ["batch", 10])])


BUILDERS: Dict[str, Callable[[int], onnx.ModelProto]] = {
    "mlp": build_mlp,
    "resnet18": build_resnet18,
    "mobilenet_v2": build_mobilenet_v2,
    "bert_encoder": build_bert_encoder,
    "qdq_cnn": build_qdq_cnn,
}
try:   # the real-model-shaped rows (torch.onnx exports): benchmarks/real_models.py
    from . import real_models
except ImportError:   # benchmarks/ itself is on sys.path
    import real_models  # type: ignore[no-redef]
BUILDERS.update(real_models.BUILDERS)


def build(name: str, seed: int = 0) -> onnx.ModelProto:
    """Build one model by name, checked and shape-inferred (raises if either fails)."""
    if name not in BUILDERS:
        raise KeyError("unknown model %r; expected one of %s" % (name, sorted(BUILDERS)))
    model = BUILDERS[name](seed)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return model


def build_all(out_dir: str, names: Optional[Sequence[str]] = None,
              overwrite: bool = False) -> Dict[str, str]:
    """Write `<name>.onnx` for every model into out_dir; returns {name: path}.

    Existing files are kept unless `overwrite` (the builders are deterministic)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name in names or list(BUILDERS):
        path = os.path.join(out_dir, name + ".onnx")
        if overwrite or not os.path.exists(path):
            tmp = path + ".tmp"
            onnx.save(build(name), tmp)
            os.replace(tmp, path)
        paths[name] = path
    return paths


def make_inputs(name: str, batch: int = 1, seed: int = 0) -> Dict[str, np.ndarray]:
    """Deterministic feeds for model `name` with the given batch size."""
    rng = np.random.default_rng(seed)
    if name == "mlp":
        return {"input": rng.standard_normal((batch, 784)).astype(np.float32)}
    if name in ("resnet18", "mobilenet_v2"):
        return {"input": rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}
    if name == "bert_encoder":
        ids = rng.integers(0, BERT_VOCAB, (batch, BERT_SEQ)).astype(np.int64)
        mask = np.ones((batch, BERT_SEQ), np.int64)
        for row in range(batch):  # pad the tail of each row, a different length per row
            mask[row, BERT_SEQ - 16 * (row % 4 + 1):] = 0
        return {"input_ids": ids, "attention_mask": mask}
    if name == "qdq_cnn":
        return {"input": rng.standard_normal((batch, 3, QDQ_SIZE, QDQ_SIZE)).astype(np.float32)}
    if name in real_models.INPUTS:
        if batch != 1:
            raise ValueError("model %r is exported with batch 1 (its recurrent state or fixed "
                             "shapes); got batch %d" % (name, batch))
        return real_models.INPUTS[name](seed)
    raise KeyError("unknown model %r; expected one of %s" % (name, sorted(BUILDERS)))


def main(argv: Optional[Sequence[str]] = None) -> None:
    """CLI: write the benchmark models into a folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "build"))
    parser.add_argument("--models", nargs="*", choices=sorted(BUILDERS))
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    for name, path in build_all(args.out_dir, args.models, args.overwrite).items():
        print("%-13s %s (%.1f MB)" % (name, path, os.path.getsize(path) / 1e6))


if __name__ == "__main__":
    main()
