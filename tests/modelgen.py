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


def rnn_model(op: str, seq: int, batch: int, inp: int, hid: int, direction="forward", lbr=0, clip=None, peep=False, seed=0,
           outputs=None, states=True, extra=None):
    """A one-node LSTM/GRU model (W, R, B and P initializers, scaled random weights), its feeds (X,
    initial states) and the weights {W, R, B, P}."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    G = 4 if op == "LSTM" else 3
    W = (rng.standard_normal((dirs, G * hid, inp)) * 0.4).astype(np.float32)
    R = (rng.standard_normal((dirs, G * hid, hid)) * 0.4).astype(np.float32)
    B = (rng.standard_normal((dirs, 2 * G * hid)) * 0.4).astype(np.float32)
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")]
    st = [dirs, batch, hid]
    ins = ["X", "W", "R", "B", "", "h0" if states else ""]
    vis = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["S", batch, inp])]
    feeds = {"X": rng.standard_normal((seq, batch, inp)).astype(np.float32)}
    if states:
        vis.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, st))
        feeds["h0"] = rng.standard_normal(st).astype(np.float32)
    if op == "LSTM":
        ins.append("c0" if states else "")
        if states:
            vis.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, st))
            feeds["c0"] = rng.standard_normal(st).astype(np.float32)
        if peep:
            inits.append(numpy_helper.from_array((rng.standard_normal((dirs, 3 * hid)) * 0.4).astype(np.float32), "P"))
            ins.append("P")
    outs = outputs or (["Y", "Yh", "Yc"] if op == "LSTM" else ["Y", "Yh"])
    attrs = dict(hidden_size=hid, direction=direction)
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    if clip is not None:
        attrs["clip"] = clip
    attrs.update(extra or {})
    node = helper.make_node(op, ins, outs, **attrs)
    g = helper.make_graph([node], "rnn", vis, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                               for o in outs if o], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    return m.SerializeToString(), feeds, dict(W=W, R=R, B=B, P=None if not peep else
                                              numpy_helper.to_array(inits[-1]))
