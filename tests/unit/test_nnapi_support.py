"""What NnapiExecutionProvider claims, per feature level, and the reasons it gives otherwise."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxedge import InferenceSession, get_available_providers
from onnxedge.errors import EPFail, InvalidArgument

NNAPI = "NnapiExecutionProvider"
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          [numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _report(model: bytes, **opts) -> Dict[str, Optional[str]]:
    """op_type -> None when on NNAPI, else NNAPI's fallback reason."""
    sess = InferenceSession(model, providers=[NNAPI, "CPUExecutionProvider"],
                            provider_options=[dict({"reference": True}, **opts), {}])
    return {r["op_type"]: (None if r["provider"] == NNAPI else r["fallback_reasons"][NNAPI])
            for r in sess.partition_report()}


def _chain(op: str, **attrs) -> bytes:
    """x -> Relu -> op(., c) with a constant c, so the run is not trivial."""
    c = np.full((1, 4), 2.0, np.float32)
    return _model([helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node(op, ["r", "c"], ["y"], **attrs)],
                  [_vi("x", [1, 4])], [_vi("y", [1, 4])], {"c": c})


def test_not_available_off_android():
    """Off Android NNAPI is not listed; without `reference` a session falls back to the CPU."""
    from onnxedge.edge.nnapi import runtime
    assert not runtime.available()
    assert NNAPI not in get_available_providers()
    sess = InferenceSession(_chain("Add"), providers=[NNAPI, "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.parametrize("op,level,ok", [("Add", 1, True), ("Mul", 1, True), ("Sub", 1, False),
                                         ("Sub", 2, True), ("Div", 1, False), ("Div", 2, True)])
def test_binary_feature_levels(op, level, ok):
    why = _report(_chain(op), feature_level=level)[op]
    if ok:
        assert why is None
    else:
        assert "needs feature level >= 2 (have 1)" in why and ("SUB" in why or "DIV" in why)


def test_quantize_needs_level_3_and_int8_level_4():
    scale, zp8, zpu8 = np.array(0.1, np.float32), np.array(3, np.int8), np.array(3, np.uint8)
    for zp, level, expect in ((zpu8, 2, "QUANTIZE, which needs feature level >= 3"),
                              (zp8, 3, "TENSOR_QUANT8_ASYMM_SIGNED (feature level >= 4"),
                              (zp8, 4, None), (zpu8, 3, None)):
        m = _model([helper.make_node("Relu", ["x"], ["r"]),
                    helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"]),
                    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                   [_vi("x", [2, 8])], [_vi("y", [2, 8])], {"s": scale, "z": zp})
        why = _report(m, feature_level=level)["QuantizeLinear"]
        assert (why is None) if expect is None else (expect in why), (level, why)


def test_reasons_name_the_rule():
    x = _vi("x", ["n", 4])
    assert "no static shape" in _report(_model([helper.make_node("Relu", ["x"], ["y"])], [x],
                                               [_vi("y", ["n", 4])]))["Relu"]
    # the dims option fixes the symbolic batch
    assert _report(_model([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Sigmoid", ["r"], ["y"])], [x], [_vi("y", ["n", 4])]),
                   dims={"n": 2})["Relu"] is None
    m = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Erf", ["r"], ["y"])],
               [_vi("x", [1, 4])], [_vi("y", [1, 4])])
    assert "Erf has no NNAPI translation" in _report(m)["Erf"]
    m = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "x2"], ["y"])],
               [_vi("x", [2, 4]), _vi("x2", [4, 3])], [_vi("y", [2, 3])])
    assert "B 'x2' is not a constant" in _report(m)["MatMul"]
    m = _model([helper.make_node("Relu", ["x"], ["r"]),
                helper.make_node("Clip", ["r", "lo", "hi"], ["y"])],
               [_vi("x", [1, 4])], [_vi("y", [1, 4])],
               {"lo": np.array(-2, np.float32), "hi": np.array(2, np.float32)})
    assert "Clip(-2.0, 2.0) is not RELU, RELU1 or RELU6" in _report(m)["Clip"]


def _conv_model(group: int, c_in: int, c_out: int, **attrs) -> bytes:
    w = np.ones((c_out, c_in // group, 3, 3), np.float32)
    return _model([helper.make_node("Conv", ["x", "w"], ["c"], group=group, pads=[1, 1, 1, 1], **attrs),
                   helper.make_node("Relu", ["c"], ["y"])],
                  [_vi("x", [1, c_in, 6, 6])], [_vi("y", None)], {"w": w})


def _conv_reason(model: bytes, **opts) -> Optional[str]:
    rep = _report(model, **opts)
    return rep["FusedConv"] if "FusedConv" in rep else rep["Conv"]   # the optimizer fuses Relu


def test_conv_rules():
    assert _conv_reason(_conv_model(1, 4, 8)) is None
    assert _conv_reason(_conv_model(4, 4, 8)) is None                  # depthwise, multiplier 2
    assert "only plain (group 1) and depthwise" in _conv_reason(_conv_model(2, 4, 8))
    assert "dilations [2, 2] need feature level >= 3" in _conv_reason(
        _conv_model(1, 4, 8, dilations=[2, 2]), feature_level=2)


def test_conv_variants_match_cpu():
    """Depthwise (multiplier 2), dilated, SAME_UPPER strided convolutions vs the CPU."""
    rng = np.random.default_rng(3)
    for group, attrs in ((4, {}), (1, {"dilations": [2, 2]}),
                         (1, {"strides": [2, 2], "auto_pad": "SAME_UPPER"})):
        w = rng.standard_normal((8, 4 // group, 3, 3)).astype(np.float32)
        if "auto_pad" not in attrs:
            attrs = dict(attrs, pads=[1, 2, 0, 1])
        m = _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, **attrs),
                    helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
                   [_vi("x", [2, 4, 9, 7])], [_vi("y", None)],
                   {"w": w, "b": rng.standard_normal(8).astype(np.float32),
                    "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)})
        nn = InferenceSession(m, providers=[NNAPI, "CPUExecutionProvider"],
                              provider_options=[{"reference": True}, {}])
        assert all(r["provider"] == NNAPI for r in nn.partition_report()), nn.partition_report()
        feeds = {"x": rng.standard_normal((2, 4, 9, 7)).astype(np.float32) * 3}
        want = InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(nn.run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)


def test_layout_rules_at_feature_level_1():
    """4-D values are NHWC inside NNAPI: Flatten of C x H x W needs TRANSPOSE (level 2), but not
    when H * W == 1; Softmax over channels is NNAPI's last axis."""
    def flat(h):
        return _model([helper.make_node("Relu", ["x"], ["r"]),
                       helper.make_node("Flatten", ["r"], ["y"])],
                      [_vi("x", [1, 3, h, h])], [_vi("y", [1, 3 * h * h])])
    assert "needs TRANSPOSE (feature level >= 2, have 1)" in _report(flat(2), feature_level=1)["Flatten"]
    assert _report(flat(1), feature_level=1)["Flatten"] is None
    assert _report(flat(2), feature_level=2)["Flatten"] is None
    sm = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=2)],
                [_vi("x", [1, 3, 4, 5])], [_vi("y", [1, 3, 4, 5])])
    assert "SOFTMAX's axis (feature level >= 3" in _report(sm, feature_level=2)["Softmax"]
    assert _report(sm, feature_level=3)["Softmax"] is None


def test_float_layout_paths_match_cpu():
    """Flatten through TRANSPOSE, Softmax with an axis, Concat on channels, Unsqueeze to 4-D:
    translated outputs equal the CPU's."""
    rng = np.random.default_rng(0)
    m = _model([helper.make_node("Relu", ["x"], ["r"]),
                helper.make_node("Concat", ["r", "k"], ["c"], axis=1),
                helper.make_node("Softmax", ["c"], ["s"], axis=2),
                helper.make_node("Flatten", ["s"], ["f"]),
                helper.make_node("Unsqueeze", ["f", "ax"], ["u"]),
                helper.make_node("Transpose", ["u"], ["y"], perm=[1, 0, 3, 2])],
               [_vi("x", [2, 3, 4, 5])], [_vi("y", None)],
               {"k": rng.standard_normal((2, 2, 4, 5)).astype(np.float32),
                "ax": np.array([2, 3], np.int64)})
    nn = InferenceSession(m, providers=[NNAPI, "CPUExecutionProvider"],
                          provider_options=[{"reference": True}, {}])
    assert all(r["provider"] == NNAPI for r in nn.partition_report())
    feeds = {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)}
    want = InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(nn.run(None, feeds)[0], want, rtol=1e-5, atol=1e-6)


def test_bad_options():
    for opts, msg in (({"feature_level": 0}, "feature_level=0"), ({"feature_level": "4"}, "feature_level"),
                      ({"preference": "turbo"}, "preference='turbo'"), ({"bogus": 1}, "unknown option")):
        with pytest.raises((InvalidArgument, EPFail), match=msg):
            InferenceSession(_chain("Add"), providers=[NNAPI, "CPUExecutionProvider"],
                             provider_options=[dict({"reference": True}, **opts), {}])


def test_fused_activations():
    """FusedConv / FusedGemm with Sigmoid / Tanh get a LOGISTIC / TANH after them (vs the CPU);
    LeakyRelu has neither fuse code nor operation here, and says so."""
    rng = np.random.default_rng(4)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "g": rng.standard_normal((4 * 4 * 4, 5)).astype(np.float32)}
    for act, ok in (("Sigmoid", True), ("Tanh", True), ("LeakyRelu", False)):
        m = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node(act, ["c"], ["a"]),
                    helper.make_node("Flatten", ["a"], ["f"]),
                    helper.make_node("Gemm", ["f", "g"], ["m"]),
                    helper.make_node("Tanh", ["m"], ["y"])],
                   [_vi("x", [2, 3, 4, 4])], [_vi("y", [2, 5])], inits)
        nn = InferenceSession(m, providers=[NNAPI, "CPUExecutionProvider"],
                              provider_options=[{"reference": True}, {}])
        rep = {r["op_type"]: r for r in nn.partition_report()}
        assert rep["FusedConv"]["provider"] == NNAPI if ok else \
            rep["FusedConv"]["provider"] in ("CPUExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider")
        assert rep["FusedGemm"]["provider"] == NNAPI
        if not ok:
            assert "activation LeakyRelu has no NNAPI fuse code" in rep["FusedConv"]["fallback_reasons"][NNAPI]
        feeds = {"x": rng.standard_normal((2, 3, 4, 4)).astype(np.float32)}
        want = InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(nn.run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)


def test_inspect_dim_gives_the_bridge_static_shapes(tmp_path, capsys):
    """`onnxedge inspect --dim batch=1` fixes the symbolic batch the NNAPI bridge needs static."""
    import onnx

    from onnxedge import cli
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", F, ["batch", 4])],
        [helper.make_tensor_value_info("y", F, ["batch", 4])], [w]),
        opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    args = ["inspect", path, "--optimize", "disable", "--providers",
            "NnapiExecutionProvider,CPUExecutionProvider"]
    assert cli.main(args) == 0
    assert "no static shape" in capsys.readouterr().out
    assert cli.main(args + ["--dim", "batch=1"]) == 0
    out = capsys.readouterr().out
    assert "NnapiExecutionProvider       2 nodes" in out and "fell back" not in out
