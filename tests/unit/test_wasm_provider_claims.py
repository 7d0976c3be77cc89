"""WasmSimdExecutionProvider's claims and reasons, natively (no browser, the JS module mocked):
which nodes it takes, how consecutive ones group into steps, and the reason it gives for each
node it leaves to the CPU. Runs under Python 3.8 + numpy 1.17 (the page's) and 3.11."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import model_io
from onnxedge.errors import InvalidArgument
from onnxedge.providers.base import CompileContext
from onnxedge.web.wasm import claims, transport
from onnxedge.web.wasm.provider import WasmSimdExecutionProvider

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _graph(nodes: List[onnx.NodeProto], inputs: Sequence, outputs: Sequence, inits: Sequence = ()):
    g = helper.make_graph(nodes, "g", list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.onnxedge", 1)])
    m.ir_version = 8
    return model_io.load(m.SerializeToString()).graph


def _vi(name: str, shape: Optional[Sequence] = None, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


@pytest.fixture
def ep() -> WasmSimdExecutionProvider:
    return WasmSimdExecutionProvider({"kernels": transport.Kernels()})


def _claims(ep: WasmSimdExecutionProvider, graph) -> List[List[int]]:
    return ep.get_capability(graph, CompileContext({"": 17}, {}))


def _reasons(ep: WasmSimdExecutionProvider, graph) -> Dict[str, Optional[str]]:
    _claims(ep, graph)
    ctx = CompileContext({"": 17}, {})
    return {n.name: ep.unsupported_reason(n, ctx) for n in graph.nodes}


def test_claims_conv_pool_gemm_chain_as_one_step(ep):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv", pads=[1, 1, 1, 1]),
             helper.make_node("FusedConv", ["c", "w2", "", "c"], ["f"], "fused", domain="com.onnxedge",
                              activation="Relu", pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["f"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], "gap"),
             helper.make_node("Flatten", ["g"], ["flat"], "flatten"),
             helper.make_node("FusedGemm", ["flat", "fw", "fb"], ["y1"], "gemm", domain="com.onnxedge",
                              transB=1, activation="LeakyRelu", activation_params=[0.2]),
             helper.make_node("MatMul", ["y1", "mw"], ["y"], "matmul")]
    g = _graph(nodes, [_vi("x", [1, 4, 8, 8])], [_vi("y")],
               [_w("w", 4, 4, 3, 3), _w("b", 4), _w("w2", 4, 4, 3, 3), _w("fw", 6, 4), _w("fb", 6),
                _w("mw", 6, 3)])
    assert _claims(ep, g) == [[0, 1, 2, 3, 4, 5, 6]]   # Flatten: free inside the step's program
    assert set(_reasons(ep, g).values()) == {None}
    node_by_node = WasmSimdExecutionProvider({"kernels": transport.Kernels(), "programs": 0})
    assert _claims(node_by_node, g) == [[0, 1, 2, 3], [5, 6]]
    reasons = _reasons(node_by_node, g)
    assert "runs only inside a compiled program" in reasons.pop("flatten")
    assert set(reasons.values()) == {None}


def test_claims_program_only_ops_with_reasons(ep):
    nodes = [helper.make_node("Add", ["x", "b4"], ["a"], "add4"),             # 4-axis broadcast
             helper.make_node("Softmax", ["x"], ["s"], "softmax1", axis=1),  # not the last axis
             helper.make_node("Clip", ["x", "lo"], ["c"], "clipv"),         # a vector bound
             helper.make_node("Mul", ["x", "ch"], ["m"], "mul"),             # per-channel: folds
             helper.make_node("LogSoftmax", ["x"], ["l"], "logsoftmax"),
             helper.make_node("Reshape", ["x", "shape"], ["r"], "reshape")]
    g = _graph(nodes, [_vi("x", [2, 3, 4, 5])], [_vi(n) for n in ("a", "s", "c", "m", "l", "r")],
               [_w("b4", 2, 1, 4, 1), _w("lo", 2), _w("ch", 3, 1, 1),
                numpy_helper.from_array(np.array([6, 20], np.int64), "shape")])
    reasons = _reasons(ep, g)
    assert "needs more than 3 axes" in reasons.pop("add4")
    assert "axis 1 is not the last axis" in reasons.pop("softmax1")
    assert "Clip bound 'lo' is not a scalar" in reasons.pop("clipv")
    assert set(reasons.values()) == {None}


@pytest.mark.parametrize("case, expected", [
    ("gemm_transA", "transA=1 is not supported"),
    ("gemm_row_bias", "is not a constant per-column bias of 3 values"),
    ("conv_softsign", "activation 'Softsign' has no wasm epilogue"),
    ("conv_3d", "kernel_shape [3, 3, 3] is not 1-D or 2-D"),
    ("conv_weight_fed", "weight 'w' is not a constant initializer"),
    ("conv_weight_overridable", "weight 'w' is not a constant initializer"),
    ("matmul_batched_b", "expected float32 of rank 2"),
    ("matmul_int", "is not float32 (ONNX element type 6)"),
    ("maxpool_indices", "MaxPool's Indices output is not produced by the wasm kernel"),
    ("conv_rank3_input", "input 'x' has rank 3, weight 'w' rank 4"),
    ("convt_weight_fed", "weight 'w' is not a constant initializer"),
    ("convt_3d", "kernel_shape [3, 3, 3] is not 1-D or 2-D"),
    ("lstm_sequence_lens", "input sequence_lens is given"),
    ("gru_weights_fed", "W ('w') is not a constant"),
])
def test_reasons_for_nodes_left_to_the_cpu(ep, case, expected):
    inits = [_w("w", 4, 4, 3, 3)]
    inputs = [_vi("x", [1, 4, 8, 8])]
    if case == "gemm_transA":
        node = helper.make_node("Gemm", ["x", "w"], ["y"], "n", transA=1)
        inputs, inits = [_vi("x", [4, 2])], [_w("w", 4, 3)]
    elif case == "gemm_row_bias":
        node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], "n")
        inputs, inits = [_vi("x", [2, 4])], [_w("w", 4, 3), _w("c", 2, 1)]
    elif case == "conv_softsign":
        node = helper.make_node("FusedConv", ["x", "w"], ["y"], "n", domain="com.onnxedge",
                                activation="Softsign")
    elif case == "conv_3d":
        node = helper.make_node("Conv", ["x", "w"], ["y"], "n", kernel_shape=[3, 3, 3])
        inputs, inits = [_vi("x", [1, 4, 8, 8, 8])], [_w("w", 4, 4, 3, 3, 3)]
    elif case == "conv_weight_fed":
        node = helper.make_node("Conv", ["x", "w"], ["y"], "n")
        inputs, inits = inputs + [_vi("w", [4, 4, 3, 3])], []
    elif case == "conv_weight_overridable":
        node = helper.make_node("Conv", ["x", "w"], ["y"], "n")
        inputs = inputs + [_vi("w", [4, 4, 3, 3])]   # an initializer a feed may replace
    elif case == "matmul_batched_b":
        node = helper.make_node("MatMul", ["x", "w"], ["y"], "n")
        inputs, inits = [_vi("x", [2, 3, 4])], [_w("w", 2, 4, 5)]
    elif case == "matmul_int":
        node = helper.make_node("MatMul", ["x", "w"], ["y"], "n")
        inputs = [_vi("x", [2, 4], TensorProto.INT32)]
        inits = [numpy_helper.from_array(np.ones((4, 3), np.int32), "w")]
    elif case == "convt_weight_fed":
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], "n")
        inputs, inits = inputs + [_vi("w", [4, 4, 3, 3])], []
    elif case == "convt_3d":
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], "n", kernel_shape=[3, 3, 3])
        inputs, inits = [_vi("x", [1, 4, 8, 8, 8])], [_w("w", 4, 4, 3, 3, 3)]
    elif case in ("lstm_sequence_lens", "gru_weights_fed"):
        lstm = case.startswith("lstm")
        g4 = 4 if lstm else 3
        inputs = [_vi("x", [5, 1, 4]), _vi("lens", [1], TensorProto.INT32)]
        inits = [_w("w", 1, g4 * 2, 4), _w("r", 1, g4 * 2, 2)]
        if not lstm:
            inputs, inits = inputs[:1] + [_vi("w", [1, 6, 4])], inits[1:]
        node = helper.make_node("LSTM" if lstm else "GRU", ["x", "w", "r", "", "lens" if lstm else ""],
                                ["y"], "n", hidden_size=2)
    elif case == "maxpool_indices":
        node = helper.make_node("MaxPool", ["x"], ["y", "idx"], "n", kernel_shape=[2, 2])
        inits = []
    else:
        node = helper.make_node("Conv", ["x", "w"], ["y"], "n")
        inputs = [_vi("x", [4, 8, 8])]
    outputs = [_vi(o) for o in node.output]
    g = _graph([node], inputs, outputs, inits)
    assert _claims(ep, g) == []
    why = _reasons(ep, g)["n"]
    assert why is not None and expected in why, why


def test_fused_activation_params_reach_the_epilogue():
    g = _graph([helper.make_node("FusedGemm", ["x", "w"], ["y"], "n", domain="com.onnxedge",
                                 activation="Clip", activation_params=[-1.0, 2.5])],
               [_vi("x", [2, 4])], [_vi("y")], [_w("w", 4, 3)])
    assert claims.activation(g.nodes[0]) == ("Clip", (-1.0, 2.5))
    lr = helper.make_node("FusedMatMul", ["x", "w"], ["y"], domain="com.onnxedge", activation="LeakyRelu")
    g2 = _graph([lr], [_vi("x", [2, 4])], [_vi("y")], [_w("w", 4, 3)])
    assert claims.activation(g2.nodes[0]) == ("LeakyRelu", (0.01, 0.0))   # ONNX's default alpha
    assert claims.ACT["Relu"] == 1 and claims.ACT["Tanh"] == 6   # oxk.h's OXK_ACT_* values


def test_not_available_natively_and_options_checked():
    transport.install(None)
    assert not WasmSimdExecutionProvider.is_available()
    assert "WasmSimdExecutionProvider" not in onnxedge.get_available_providers()
    with pytest.raises(InvalidArgument, match=r"onnxedgeWasm.init"):
        WasmSimdExecutionProvider()
    with pytest.raises(InvalidArgument, match=r"unknown option\(s\) \['threads'\]"):
        WasmSimdExecutionProvider({"kernels": transport.Kernels(), "threads": 2})
