"""Ops that need no kernel: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference)
are views of the same buffer under a new shape; Constant and Shape produce host values."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ..runtime import Recorder, is_gpu
from .table import attr, register

_OK = {np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_)}


def _view(x: Any, shape: Sequence[int]) -> Any:
    return x.view(shape) if is_gpu(x) else np.asarray(x).reshape(shape)


def _check_data(node: Any, facts: Any) -> Optional[str]:
    dt = facts.dtype(node.inputs[0])
    if dt not in _OK:
        return "input %r has element type %s" % (node.inputs[0], dt)
    return None


def reshape_target(shape: Sequence[int], target: Sequence[int], allowzero: bool) -> List[int]:
    """ONNX Reshape's output shape: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out = [int(d) for d in target]
    if not allowzero:
        out = [shape[k] if d == 0 else d for k, d in enumerate(out)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        total = int(np.prod(shape, dtype=np.int64))
        out[out.index(-1)] = total // known if known else 0
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(shape, dtype=np.int64)):
        raise ValueError("cannot reshape %s to %s" % (list(shape), list(target)))
    return out


@register(["Reshape"], check=_check_data, host_inputs=(1,), raw=True)
def run_reshape(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Reshape as a view."""
    shape = reshape_target(ins[0].shape, ins[1].reshape(-1), bool(attr(node, "allowzero", 0)))
    return [_view(ins[0], shape)]


@register(["Flatten"], check=_check_data, raw=True)
def run_flatten(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Flatten as a view."""
    shape = ins[0].shape
    axis = int(attr(node, "axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    return [_view(ins[0], [outer, int(np.prod(shape[axis:], dtype=np.int64))])]


def _axes(node: Any, ins: List[Any], opset: int, since: int) -> Optional[List[int]]:
    if opset >= since:
        return None if len(ins) < 2 or ins[1] is None else [int(a) for a in ins[1].reshape(-1)]
    a = attr(node, "axes")
    return None if a is None else [int(v) for v in a]


@register(["Squeeze"], check=_check_data, host_inputs=(1,), raw=True)
def run_squeeze(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Squeeze as a view."""
    shape = list(ins[0].shape)
    axes = _axes(node, ins, opset, 13)
    if axes is None:
        axes = [k for k, d in enumerate(shape) if d == 1]
    axes = [a + len(shape) if a < 0 else a for a in axes]
    for a in axes:
        if shape[a] != 1:
            raise ValueError("Squeeze axis %d has size %d, not 1" % (a, shape[a]))
    return [_view(ins[0], [d for k, d in enumerate(shape) if k not in axes])]


@register(["Unsqueeze"], check=_check_data, host_inputs=(1,), raw=True)
def run_unsqueeze(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Unsqueeze as a view."""
    shape = list(ins[0].shape)
    axes = _axes(node, ins, opset, 13) or []
    rank = len(shape) + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)
    for a in axes:
        shape.insert(a, 1)
    return [_view(ins[0], shape)]


@register(["Identity"], check=_check_data, raw=True)
def run_identity(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Identity: the same tensor."""
    return [ins[0]]


def _check_dropout(node: Any, facts: Any) -> Optional[str]:
    if len(node.outputs) > 1 and node.outputs[1]:
        return "Dropout's mask output is not produced on WebGPU"
    if len(node.inputs) > 2 and node.inputs[2]:
        return "Dropout with a training_mode input runs on CPU"
    return _check_data(node, facts)


@register(["Dropout"], check=_check_dropout, raw=True)
def run_dropout(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Dropout at inference: the input unchanged."""
    return [ins[0]]


def _check_constant(node: Any, facts: Any) -> Optional[str]:
    v = node.attributes
    if not any(k in v for k in ("value", "value_float", "value_floats", "value_int",
                                "value_ints")):
        return "Constant without a dense numeric value"
    if "value" in v and not isinstance(v["value"], np.ndarray):
        return "Constant value is not a dense tensor"
    return None


@register(["Constant"], check=_check_constant, raw=True)
def run_constant(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Constant: its value as a host array (`value` is the same object every run, so its
    upload is cached)."""
    a = node.attributes
    if "value" in a:
        return [a["value"]]
    if "value_float" in a:
        return [np.array(a["value_float"], np.float32)]
    if "value_floats" in a:
        return [np.array(a["value_floats"], np.float32)]
    if "value_int" in a:
        return [np.array(a["value_int"], np.int64)]
    return [np.array(a["value_ints"], np.int64)]


@register(["Shape"], raw=True)
def run_shape(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Shape (with start/end): a host int64 array; no read-back needed."""
    shape = list(ins[0].shape)
    start = int(attr(node, "start", 0))
    end = attr(node, "end")
    sl = shape[start:] if end is None else shape[start:int(end)]
    return [np.array(sl, np.int64)]


@register(["Size"], raw=True)
def run_size(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Size: a host int64 scalar."""
    return [np.array(int(np.prod(ins[0].shape, dtype=np.int64)), np.int64)]
