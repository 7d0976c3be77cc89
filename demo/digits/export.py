"""Write the trained digit CNN (`cnn.py`'s parameters) as an ONNX model with onnx.helper.

Input "image" float32 [batch, 1, 8, 8] (values in [0, 1], ink = 1), output "probabilities"
[batch, 10], opset 17; metadata_props "onnxedge.page" tells the page to show a drawing canvas.
"""
from __future__ import annotations

import json
from typing import Dict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
LABELS = [str(d) for d in range(10)]
PAGE_META = {"labels": LABELS,
             "image": {"input": "image", "channels": 1, "ink": True, "range": [0, 1]}}


def to_onnx(params: Dict[str, np.ndarray]) -> onnx.ModelProto:
    """The model proto for these float32 parameters (checked by onnx.checker)."""
    inits = [numpy_helper.from_array(np.ascontiguousarray(v, np.float32), k)
             for k, v in sorted(params.items())]
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", "w2", "b2"], ["conv2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("Flatten", ["relu2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="onnxedge-demo-digits")
    model.ir_version = IR_VERSION
    helper.set_model_props(model, {"onnxedge.page": json.dumps(PAGE_META)})
    onnx.checker.check_model(model)
    return model
