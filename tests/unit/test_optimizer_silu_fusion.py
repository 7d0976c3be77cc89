"""SiLU and HardSwish chains become one activation (optimizer pass silu_fusion), and the new
activations (HardSwish, Elu, Softplus, Gelu) fuse into Conv / Gemm / MatMul; outputs against
onnxruntime on the original model (models from onnx.helper and from torch.onnx). onnxruntime's
sigmoid is accurate to about 1e-7 absolute, so its SiLU of x is to about 1e-7 |x|: atol 1e-5."""
from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi

FUSED = "com.onnxedge"
CONV = (["x", "w", "b"], {"pads": [1, 1, 1, 1]})
INITS = {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2), "three": np.array(3.0, np.float32),
         "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32),
         "sixth": np.array(1.0 / 6.0, np.float32)}
X = {"x": rand(2, 3, 7, 6, seed=3) * 4}


def _conv_then(nodes, opset=17, outputs=("y",)):
    data = make_model([helper.make_node("Conv", *CONV[:1], ["c"], **CONV[1])] + nodes,
                      [vi("x", [2, 3, 7, 6])], [vi(o, None) for o in outputs],
                      {k: v for k, v in INITS.items()
                       if any(k in n.input for n in nodes) or k in ("w", "b")}, opset=opset)
    return data, optimized(data)


def _fused(model):
    node, = model.graph.nodes
    return node.domain, node.op_type, node.attributes["activation"]


@pytest.mark.parametrize("order", [["c", "s"], ["s", "c"]])
def test_conv_sigmoid_mul_becomes_fused_silu(order):
    data, model = _conv_then([helper.make_node("Sigmoid", ["c"], ["s"]),
                              helper.make_node("Mul", order, ["y"])])
    assert _fused(model) == (FUSED, "FusedConv", "Silu")
    assert_same_outputs(data, model, X, atol=1e-5)


def test_silu_of_gemm_and_matmul_fuse():
    for prod, ins, attrs, shape in (("Gemm", ["a", "wg", "bg"], {"transB": 1}, [5, 3]),
                                    ("MatMul", ["a", "wm"], {}, [2, 5, 3])):
        nodes = [helper.make_node(prod, ins, ["p"], **attrs), helper.make_node("Sigmoid", ["p"], ["s"]),
                 helper.make_node("Mul", ["s", "p"], ["y"])]
        data = make_model(nodes, [vi("a", shape)], [vi("y", None)],
                          {k: v for k, v in {"wg": rand(4, 3), "bg": rand(4, seed=1),
                                             "wm": rand(3, 4, seed=2)}.items() if k in ins})
        model = optimized(data)
        assert _fused(model) == (FUSED, "Fused" + prod, "Silu")
        assert_same_outputs(data, model, {"a": rand(*shape, seed=5) * 3}, atol=1e-5)


def test_silu_stays_where_the_input_is_shared_or_not_a_producer_output():
    data, model = _conv_then([helper.make_node("Sigmoid", ["c"], ["s"]),
                              helper.make_node("Mul", ["c", "s"], ["y"])], outputs=("y", "c"))
    assert ops(model) == ["Conv", "Sigmoid", "Mul"]
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3])], [vi("y", None)])
    assert ops(optimized(data)) == ["Sigmoid", "Mul"]
    # x * Sigmoid(z) with z != x is no SiLU
    nodes = [helper.make_node("Conv", *CONV[:1], ["c"], **CONV[1]), helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Mul", ["c", "s"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3, 7, 6])], [vi("y", None)], {"w": INITS["w"], "b": INITS["b"]})
    assert "FusedConv" not in ops(optimized(data))


def _clip_chain(form):
    add = helper.make_node("Add", ["c", "three"], ["a"])
    clip = helper.make_node("Clip", ["a", "zero", "six"], ["g"])
    if form == "div_after":    # x * Clip(x + 3, 0, 6) / 6
        return [add, clip, helper.make_node("Mul", ["c", "g"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    if form == "mul_after":    # (Clip(x + 3, 0, 6) * x) * (1/6)
        return [add, clip, helper.make_node("Mul", ["g", "c"], ["m"]), helper.make_node("Mul", ["m", "sixth"], ["y"])]
    # x * (Clip(x + 3, 0, 6) / 6)
    return [add, clip, helper.make_node("Div", ["g", "six"], ["d"]), helper.make_node("Mul", ["c", "d"], ["y"])]


@pytest.mark.parametrize("form", ["div_after", "mul_after", "div_first"])
@pytest.mark.parametrize("opset", [13, 17])
def test_hardswish_chains(form, opset):
    data, model = _conv_then(_clip_chain(form), opset=opset)
    assert _fused(model) == (FUSED, "FusedConv", "HardSwish")
    assert_same_outputs(data, model, X, atol=1e-5)


def test_hardsigmoid_form_and_standalone_hardswish():
    nodes = [helper.make_node("HardSigmoid", ["c"], ["g"], alpha=1.0 / 6.0, beta=0.5),
             helper.make_node("Mul", ["c", "g"], ["y"])]
    data, model = _conv_then(nodes)
    assert _fused(model) == (FUSED, "FusedConv", "HardSwish")
    assert_same_outputs(data, model, X, atol=1e-5)
    # no producer to fuse into: ai.onnx HardSwish from opset 14
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["g"]),
             helper.make_node("Mul", ["x", "g"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    data = make_model(nodes, [vi("x", [4, 5])], [vi("y", None)],
                      {k: INITS[k] for k in ("three", "zero", "six")})
    model = optimized(data)
    assert ops(model) == ["HardSwish"]
    assert_same_outputs(data, model, {"x": rand(4, 5, seed=6) * 5})
    # other constants are no HardSwish
    nodes = [helper.make_node("HardSigmoid", ["x"], ["g"], alpha=0.2, beta=0.5), helper.make_node("Mul", ["x", "g"], ["y"])]
    assert ops(optimized(make_model(nodes, [vi("x", [4])], [vi("y", None)]))) == ["HardSigmoid", "Mul"]


@pytest.mark.parametrize("act,attrs,name,params,opset", [
    ("HardSwish", {}, "HardSwish", [], 17), ("Elu", {"alpha": 0.7}, "Elu", [0.7], 17),
    ("Softplus", {}, "Softplus", [], 17), ("Gelu", {}, "Gelu", [], 20),
    ("Gelu", {"approximate": "tanh"}, "GeluTanh", [], 20)])
def test_new_activations_fuse_into_conv(act, attrs, name, params, opset):
    data, model = _conv_then([helper.make_node(act, ["c"], ["y"], **attrs)], opset=opset)
    node, = model.graph.nodes
    assert (node.op_type, node.attributes["activation"]) == ("FusedConv", name)
    assert [float(p) for p in node.attributes["activation_params"]] == pytest.approx(params)
    assert_same_outputs(data, model, X, rtol=1e-5, atol=1e-5)


def test_erf_gelu_after_matmul_fuses_into_fused_matmul():
    """The exporters' erf Gelu after MatMul + bias: one FusedMatMul with activation Gelu."""
    s2 = np.array(np.sqrt(2.0), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["h"]),
             helper.make_node("Div", ["h", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["h", "p"], ["q"]),
             helper.make_node("Mul", ["q", "half"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 5, 8])], [vi("y", None)],
                      {"w": rand(8, 16, seed=1), "bias": rand(16, seed=2), "s2": s2,
                       "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32)})
    model = optimized(data)
    assert ops(model) == ["FusedMatMul"] and model.graph.nodes[0].attributes["activation"] == "Gelu"
    assert_same_outputs(data, model, {"x": rand(2, 5, 8, seed=3)}, rtol=1e-5, atol=1e-5)


def _torch_model(module, shape, opset):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module.eval(), torch.randn(*shape), buf, opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamo=False)
    return buf.getvalue()


@pytest.mark.parametrize("act,opset,name", [("SiLU", 13, "Silu"), ("SiLU", 17, "Silu"),
                                            ("Hardswish", 13, "HardSwish"), ("Hardswish", 17, "HardSwish")])
def test_torch_exports(act, opset, name):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    module = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), getattr(nn, act)(),
                           nn.Conv2d(8, 4, 1), getattr(nn, act)())
    data = _torch_model(module, (1, 3, 12, 10), opset)
    model = optimized(data)
    assert [(n.op_type, n.attributes.get("activation")) for n in model.graph.nodes] == \
        [("FusedConv", name)] * 2
    assert_same_outputs(data, model, {"x": rand(1, 3, 12, 10, seed=7) * 2}, rtol=1e-5, atol=1e-5)
