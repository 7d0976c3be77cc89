"""Builds one-node (or small) models and compares WebGPU with the CPU provider."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxedge

PROVIDERS = ["WebGpuExecutionProvider", "CPUExecutionProvider"]


def model(nodes: Sequence[onnx.NodeProto], inputs: Dict[str, np.ndarray],
          inits: Optional[Dict[str, np.ndarray]] = None, opset: int = 17,
          outputs: Optional[List[str]] = None, domains: Sequence[str] = ()) -> bytes:
    """Model bytes: inputs typed from the arrays, outputs untyped."""
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
            for o in (outputs or list(nodes[-1].output))]
    g = helper.make_graph(list(nodes), "g", ins, outs,
                          [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(g, opset_imports=ops).SerializeToString()


def compare(m: bytes, feeds: Dict[str, np.ndarray], rtol: float = 1e-4, atol: float = 1e-5,
            all_on_gpu: bool = True) -> List[np.ndarray]:
    """Run on WebGPU and on CPU; assert every node ran on WebGPU and the outputs agree."""
    sess = onnxedge.InferenceSession(m, providers=PROVIDERS)
    report = sess.partition_report()
    if all_on_gpu:
        off = [(r["op_type"], r["fallback_reasons"]) for r in report
               if r["provider"] != "WebGpuExecutionProvider"]
        assert not off, off
    got = sess.run(None, feeds)
    want = onnxedge.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got
