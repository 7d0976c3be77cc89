"""Custom ops as Python functions (onnxedge.custom_op, like onnxruntime-extensions' @onnx_op):
a model using them runs, attributes arrive as keyword arguments, several outputs come back, a
reduced build's kernel restriction does not hide them, and bad registrations are refused."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge.kernels import registry


def _model(op, domain, n_out=1, **attrs):
    outs = ["y%d" % i for i in range(n_out)]
    node = helper.make_node(op, ["x"], outs, domain=domain, **attrs)
    graph = helper.make_graph([node, helper.make_node("Relu", [outs[0]], ["r"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)] +
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs[1:]])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid(domain, 1)])
    m.ir_version = 8
    return m.SerializeToString()


def test_custom_op_with_attributes_runs():
    @onnxedge.custom_op("ScaleRows", domain="test.custom")
    def scale_rows(x, scale=1.0):
        return x * np.float32(scale)

    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    sess = onnxedge.InferenceSession(_model("ScaleRows", "test.custom", scale=3.0))
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x * 3, 0))


def test_custom_op_with_two_outputs():
    def split_sign(x):
        return np.maximum(x, 0), np.minimum(x, 0)
    onnxedge.register_custom_op("SplitSign", split_sign, domain="test.custom")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    r, neg = onnxedge.InferenceSession(_model("SplitSign", "test.custom", n_out=2)).run(None, {"x": x})
    np.testing.assert_array_equal(r, np.maximum(x, 0))
    np.testing.assert_array_equal(neg, np.minimum(x, 0))


def test_custom_op_survives_a_reduced_builds_restriction():
    onnxedge.register_custom_op("Twice", lambda x: x * 2, domain="test.custom")
    registry.restrict({("", "Relu")})
    try:
        sess = onnxedge.InferenceSession(_model("Twice", "test.custom"))
        x = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], 2 * x)
    finally:
        registry.restrict(None)


@pytest.mark.parametrize("op,domain,match", [("Bad Op", "test.custom", "identifier"),
                                              ("Ok", "", "ONNX's own"),
                                              ("Ok", "a;b", "dotted identifiers"),
                                              ('X"""', "test.custom", "identifier")])
def test_bad_registrations_are_refused(op, domain, match):
    with pytest.raises(onnxedge.InvalidArgument, match=match):
        onnxedge.register_custom_op(op, lambda x: x, domain=domain)
