"""Every WebGPU kernel against the CPU provider (numpy) on shapes with edges: sizes that are not
multiples of the 64x64 / 256 tiles, batches, broadcasting, strides, groups, negative steps."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .helpers import compare, model

mk = helper.make_node
rng = np.random.default_rng(0)


def f(*shape, lo=None, hi=None):
    if lo is not None:
        return rng.uniform(lo, hi, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def i64(*v):
    return np.array(v, np.int64)


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "Floor", "Ceil", "Round",
         "Sin", "Cos", "Sign", "Softplus", "Softsign", "HardSwish", "Identity"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(webgpu, op):
    compare(model([mk(op, ["x"], ["y"])], {"x": f(3, 70, 33) * 3}), {"x": f(3, 70, 33) * 3})


@pytest.mark.parametrize("op", ["Log", "Sqrt", "Reciprocal"])
def test_unary_positive(webgpu, op):
    x = f(5, 301, lo=0.1, hi=10.0)
    compare(model([mk(op, ["x"], ["y"])], {"x": x}), {"x": x})


@pytest.mark.parametrize("node", [
    mk("LeakyRelu", ["x"], ["y"], alpha=0.2), mk("Elu", ["x"], ["y"], alpha=0.7),
    mk("Selu", ["x"], ["y"]), mk("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4),
    mk("ThresholdedRelu", ["x"], ["y"], alpha=0.5), mk("Celu", ["x"], ["y"], alpha=2.0),
    mk("Gelu", ["x"], ["y"]), mk("Gelu", ["x"], ["y"], approximate="tanh")],
    ids=lambda n: n.op_type)
def test_unary_attributes(webgpu, node):
    x = f(4, 77) * 3
    compare(model([node], {"x": x}, opset=20), {"x": x})


def test_clip_inputs_and_attributes(webgpu):
    x = f(6, 50) * 3
    compare(model([mk("Clip", ["x", "lo", "hi"], ["y"])], {"x": x},
                  {"lo": np.float32(-1.0), "hi": np.float32(0.5)}), {"x": x})
    compare(model([mk("Clip", ["x"], ["y"], min=-0.5)], {"x": x}, opset=6), {"x": x})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu", "Pow"])
@pytest.mark.parametrize("shapes", [((2, 3, 70), (2, 3, 70)), ((2, 3, 70), (70,)),
                                    ((4, 1, 5), (3, 1)), ((), (3, 257)), ((2, 1, 3, 1), (5, 1, 4))])
def test_binary_broadcast(webgpu, op, shapes):
    a, b = f(*shapes[0]), f(*shapes[1])
    if op == "PRelu":
        b = f(*shapes[0][-1:])   # PRelu's slope broadcasts one way only
    if op == "Pow":
        b = np.round(b * 2).astype(np.float32)
    if op == "Div":
        b = b + np.float32(3.0)
    compare(model([mk(op, ["a", "b"], ["y"])], {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_and_where(webgpu, op):
    a, b = np.round(f(3, 40)), np.round(f(40))
    compare(model([mk(op, ["a", "b"], ["c"]), mk("Where", ["c", "a", "b"], ["y"])],
                  {"a": a, "b": b}, outputs=["c", "y"]), {"a": a, "b": b})


def test_variadic(webgpu):
    a, b, c = f(3, 4), f(4), f(2, 1, 1)
    for op in ("Sum", "Mean", "Max", "Min"):
        compare(model([mk(op, ["a", "b", "c"], ["y"])], {"a": a, "b": b, "c": c}),
                {"a": a, "b": b, "c": c})


def test_cast_on_device_and_host(webgpu):
    x = f(5, 7) * 10
    compare(model([mk("Relu", ["x"], ["r"]), mk("Cast", ["r"], ["i"], to=7),
                   mk("Cast", ["i"], ["y"], to=1)], {"x": x}), {"x": x})
    ids = np.arange(12, dtype=np.int64).reshape(3, 4)
    compare(model([mk("Cast", ["ids"], ["c"], to=1), mk("Relu", ["c"], ["y"])], {"ids": ids}),
            {"ids": ids})


@pytest.mark.parametrize("a,b", [((70, 33), (33, 130)), ((2, 3, 70, 33), (3, 33, 5)),
                                 ((2, 3, 7, 33), (33, 65)), ((33,), (2, 33, 65)),
                                 ((5, 1, 8), (8,)), ((1, 1), (1, 1)), ((129, 200), (200, 67))])
def test_matmul(webgpu, a, b):
    x, y = f(*a), f(*b)
    compare(model([mk("MatMul", ["a", "b"], ["y"])], {"a": x, "b": y}), {"a": x, "b": y},
            rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ta,tb,c", [(0, 0, (3,)), (1, 1, (70, 1)), (0, 1, ()), (1, 0, None)])
def test_gemm(webgpu, ta, tb, c):
    a = f(33, 70) if ta else f(70, 33)
    b = f(20, 33) if tb else f(33, 20)
    feeds = {"a": a, "b": b}
    ins = ["a", "b"]
    if c is not None:
        feeds["c"] = f(*c) if c != (3,) else f(20)
        ins.append("c")
    compare(model([mk("Gemm", ins, ["y"], transA=ta, transB=tb, alpha=0.5, beta=2.0)], feeds),
            feeds, atol=1e-4)


@pytest.mark.parametrize("x,w,attrs", [
    ((2, 5, 17, 19), (7, 5, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    ((1, 6, 11, 9), (6, 1, 3, 3), dict(group=6, dilations=[2, 1], pads=[0, 1, 2, 1])),
    ((1, 4, 9, 9), (6, 2, 3, 3), dict(group=2, auto_pad="SAME_UPPER")),
    ((2, 3, 20), (4, 3, 5), dict(strides=[2])),
    ((1, 70, 9, 10), (65, 70, 1, 1), {}),
])
def test_conv(webgpu, x, w, attrs):
    feeds = {"x": f(*x), "w": f(*w), "b": f(w[0])}
    compare(model([mk("Conv", ["x", "w", "b"], ["y"], **attrs)], feeds), feeds, atol=1e-4)


@pytest.mark.parametrize("act", ["Relu", "LeakyRelu", "Sigmoid", "Clip"])
def test_fused_conv(webgpu, act):
    feeds = {"x": f(1, 3, 8, 8), "w": f(4, 3, 3, 3), "b": f(4)}
    params = {"LeakyRelu": [0.1], "Clip": [-0.5, 0.5]}.get(act, [])
    extra = {"activation_params": params} if params else {}
    node = mk("FusedConv", ["x", "w", "b"], ["y"], domain="com.microsoft", activation=act,
              pads=[1, 1, 1, 1], **extra)
    compare(model([node], feeds, domains=["com.microsoft"]), feeds, atol=1e-4)
    feeds["z"] = f(1, 4, 8, 8)
    node = mk("FusedConv", ["x", "w", "b", "z"], ["y"], domain="com.onnxedge", activation=act,
              pads=[1, 1, 1, 1], **extra)
    compare(model([node], feeds, domains=["com.onnxedge"]), feeds, atol=1e-4)


@pytest.mark.parametrize("x,w,attrs", [
    ((1, 4, 5, 6), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ((2, 4, 5, 6), (4, 2, 2, 3), dict(group=2, strides=[3, 2])),
    ((1, 2, 7), (2, 3, 4), dict(strides=[2], dilations=[2])),
])
def test_conv_transpose(webgpu, x, w, attrs):
    feeds = {"x": f(*x), "w": f(*w), "b": f(w[1] * attrs.get("group", 1))}
    compare(model([mk("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], feeds), feeds, atol=1e-4)


@pytest.mark.parametrize("node", [
    mk("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    mk("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2]),
    mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 1, 1, 0],
       count_include_pad=1),
    mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    mk("GlobalAveragePool", ["x"], ["y"]), mk("GlobalMaxPool", ["x"], ["y"])],
    ids=lambda n: n.op_type)
def test_pools(webgpu, node):
    x = f(2, 3, 13, 12)
    compare(model([node], {"x": x}), {"x": x})


def test_normalizations(webgpu):
    x = f(3, 5, 33)
    feeds = {"x": x, "s": f(33), "b": f(33)}
    compare(model([mk("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)], feeds), feeds)
    feeds = {"x": f(2, 3, 4, 5), "s": f(3), "b": f(3), "m": f(3), "v": f(3, lo=0.5, hi=2.0)}
    compare(model([mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], feeds), feeds)
    feeds = {"x": f(2, 3, 4, 5), "s": f(3), "b": f(3)}
    compare(model([mk("InstanceNormalization", ["x", "s", "b"], ["y"])], feeds), feeds)


@pytest.mark.parametrize("op,axis,opset", [("Softmax", 1, 17), ("Softmax", -1, 17),
                                           ("Softmax", 1, 11), ("LogSoftmax", 0, 17)])
def test_softmax(webgpu, op, axis, opset):
    x = f(3, 5, 70) * 4
    compare(model([mk(op, ["x"], ["y"], axis=axis)], {"x": x}, opset=opset), {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                "ReduceL1", "ReduceL2", "ReduceSumSquare"])
@pytest.mark.parametrize("axes,keep", [([0, 2], 0), ([-1], 1), (None, 1)])
def test_reduce(webgpu, op, axes, keep):
    x = f(2, 3, 5)
    inits = {} if axes is None else {"a": i64(*axes)}
    ins = ["x"] if axes is None else ["x", "a"]
    compare(model([mk(op, ins, ["y"], keepdims=keep)], {"x": x}, inits, opset=18), {"x": x})


def test_movement(webgpu):
    x = f(5, 6, 7)
    compare(model([mk("Transpose", ["x"], ["y"], perm=[2, 0, 1])], {"x": x}), {"x": x})
    compare(model([mk("Slice", ["x", "s", "e", "a", "st"], ["y"])], {"x": x},
                  {"s": i64(4, 1), "e": i64(-10, 100), "a": i64(0, 2), "st": i64(-2, 3)}), {"x": x})
    y = f(3, 1)
    compare(model([mk("Expand", ["x", "s"], ["y"])], {"x": y}, {"s": i64(2, 3, 4)}), {"x": y})
    compare(model([mk("Tile", ["x", "s"], ["y"])], {"x": y}, {"s": i64(2, 3)}), {"x": y})
    z = f(5, 2, 7)
    compare(model([mk("Concat", ["x", "z"], ["y"], axis=1)], {"x": x, "z": z}), {"x": x, "z": z})
    compare(model([mk("Split", ["x", "s"], ["p", "q"], axis=1)], {"x": x}, {"s": i64(2, 4)},
                  outputs=["p", "q"]), {"x": x})
    compare(model([mk("Gather", ["x", "i"], ["y"], axis=1)], {"x": x},
                  {"i": np.array([[0, -1], [4, 2]], np.int64)}), {"x": x})
    for mode in ("constant", "reflect", "edge"):
        compare(model([mk("Pad", ["x", "p"], ["y"], mode=mode)], {"x": x},
                      {"p": i64(0, 2, 1, 0, 2, 3)}), {"x": x})


def test_views(webgpu):
    x = f(2, 3, 4)
    nodes = [mk("Relu", ["x"], ["r"]), mk("Reshape", ["r", "s"], ["a"]),
             mk("Unsqueeze", ["a", "ax"], ["b"]), mk("Squeeze", ["b", "ax"], ["c"]),
             mk("Flatten", ["c"], ["d"], axis=1), mk("Neg", ["d"], ["y"])]
    compare(model(nodes, {"x": x}, {"s": i64(0, -1), "ax": i64(1)}), {"x": x})


def test_fused_gemm_matmul_attention(webgpu):
    d = ["com.onnxedge"]
    feeds = {"a": f(7, 9), "b": f(9, 5), "c": f(5)}
    compare(model([mk("FusedGemm", ["a", "b", "c"], ["y"], domain=d[0], activation="Relu")],
                  feeds, domains=d), feeds)
    feeds = {"a": f(2, 7, 9), "b": f(9, 5), "c": f(5)}
    compare(model([mk("FusedMatMul", ["a", "b", "c"], ["y"], domain=d[0], activation="Tanh")],
                  feeds, domains=d), feeds)
    feeds = {"q": f(2, 9, 16), "k": f(2, 11, 16), "v": f(2, 11, 16), "m": f(2, 1, 1, 11)}
    compare(model([mk("MultiHeadAttention", ["q", "k", "v", "m"], ["y"], domain=d[0],
                      num_heads=4, scale=0.5)], feeds, domains=d), feeds)
    feeds = {"x": f(3, 8, 16), "s": f(16)}
    compare(model([mk("LayerNormalization", ["x", "s"], ["y"], domain=d[0])], feeds, domains=d),
            feeds)


@pytest.mark.parametrize("skv", [11, 300])   # one thread per row, and one workgroup per row
def test_attention_nan_to_zero_zeroes_fully_masked_rows(webgpu, skv):
    d = ["com.onnxedge"]
    mask = np.zeros((2, 1, 9, skv), np.float32)
    mask[0, 0, 3, :] = -np.inf                       # a row with nothing to attend to
    mask[1, 0, :, skv // 2:] = -np.inf
    feeds = {"q": f(2, 9, 16), "k": f(2, skv, 16), "v": f(2, skv, 16), "m": mask}
    got = compare(model([mk("MultiHeadAttention", ["q", "k", "v", "m"], ["y"], domain=d[0],
                            num_heads=4, scale=0.5, nan_to_zero=1)], feeds, domains=d), feeds)[0]
    assert np.all(got[0, 3] == 0) and np.isfinite(got).all()


def test_mish_matches_float64_reference(webgpu):
    import onnxedge
    x = np.linspace(-30, 30, 12001).astype(np.float32)
    sess = onnxedge.InferenceSession(model([mk("Mish", ["x"], ["y"])], {"x": x}, opset=18),
                                     providers=webgpu)
    assert sess.partition_report()[0]["provider"] == "WebGpuExecutionProvider"
    x64 = x.astype(np.float64)
    want = x64 * np.tanh(np.log1p(np.exp(x64)))
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=2e-6, atol=1e-30)


def test_conv_transpose_claim_uses_weight_rank(webgpu):
    import onnxedge
    from onnx import TensorProto
    x = f(1, 2, 5, 6)
    w = f(2, 3, 3, 3)
    feeds = {"x": x, "w": w}
    compare(model([mk("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])], feeds), feeds,
            atol=1e-4)   # no kernel_shape, weight rank from its declared shape: on WebGPU
    x3, w3 = f(1, 1, 3, 4, 5), f(1, 2, 3, 3, 3)
    m = model([mk("ConvTranspose", ["x", "w"], ["y"])], {"x": x3}, {"w": w3})
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    (row,) = sess.partition_report()
    assert row["provider"] == "CPUExecutionProvider"
    assert "3-D convolution" in row["fallback_reasons"]["WebGpuExecutionProvider"]
    np.testing.assert_allclose(sess.run(None, {"x": x3})[0], onnxedge.InferenceSession(
        m, providers=["CPUExecutionProvider"]).run(None, {"x": x3})[0])
    g = helper.make_graph(
        [mk("ConvTranspose", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    (row,) = onnxedge.InferenceSession(m, providers=webgpu).partition_report()
    assert row["provider"] == "CPUExecutionProvider"
    assert "rank of weight 'w' is unknown" in row["fallback_reasons"]["WebGpuExecutionProvider"]
