"""Small helpers that build ONNX models for tests (works with onnx 1.14 and 1.23)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def tensor_info(name: str, elem: int = TensorProto.FLOAT, shape: Optional[Sequence[Any]] = None):
    """A tensor ValueInfoProto."""
    return helper.make_tensor_value_info(name, elem, shape)


def single_node_model(op: str, inputs: Dict[str, np.ndarray], outputs: List[str], opset: int = 17,
                      initializers: Optional[Dict[str, np.ndarray]] = None, domain: str = "",
                      ir_version: int = 8, **attrs: Any) -> bytes:
    """Serialized model with one node; inputs are declared from the example arrays' dtypes/shapes."""
    init = initializers or {}
    node = helper.make_node(op, list(inputs) + list(init), outputs, domain=domain, **attrs)
    vin = [tensor_info(n, helper.np_dtype_to_tensor_dtype(a.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype")
                       else _np_to_onnx(a.dtype), list(a.shape)) for n, a in inputs.items()]
    vout = [helper.make_empty_tensor_value_info(o) if hasattr(helper, "make_empty_tensor_value_info")
            else helper.make_tensor_value_info(o, 0, None) for o in outputs]
    graph = helper.make_graph([node], "g", vin, vout,
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = ir_version
    return model.SerializeToString()


def _np_to_onnx(dtype: np.dtype) -> int:
    from onnx.mapping import NP_TYPE_TO_TENSOR_TYPE  # onnx < 1.13 fallback
    return NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
