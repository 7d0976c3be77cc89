"""A small static type and shape propagation for the optimizer.

Starts from what the model declares (inputs, outputs, value infos, initializers) and carries
element types and shapes through the ops passes care about (elementwise, Cast, Reshape,
Transpose, Squeeze/Unsqueeze, Flatten, MatMul, Gemm, Shape, Constant). Dims are ints, symbolic
names or None; a value missing from the result is unknown.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from .. import dtypes, ir

_UNARY = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs",
          "Identity", "Dropout", "Softmax", "LogSoftmax", "Gelu", "Clip", "HardSigmoid", "Elu",
          "Selu", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "BatchNormalization",
          "LayerNormalization", "Softplus", "HardSwish", "Mish", "Not", "Sign"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "PRelu"}
_SAME_TYPE = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
              "GlobalMaxPool", "LpPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
              "Concat", "Slice", "Gather", "Expand", "Tile", "Pad", "Resize",
              "InstanceNormalization", "DepthToSpace", "SpaceToDepth"}
_COMPARE = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}


class Info:
    """Element type (ONNX code, 0 when unknown) and shape (None when the rank is unknown)."""

    __slots__ = ("elem_type", "shape")

    def __init__(self, elem_type: int, shape: Optional[List[Any]]):
        self.elem_type = elem_type
        self.shape = None if shape is None else list(shape)

    def numpy_dtype(self) -> Optional[np.dtype]:
        """numpy dtype of the element type, None when unknown or not a numpy type."""
        if not self.elem_type or not dtypes.has_numpy(self.elem_type):
            return None
        return dtypes.to_numpy(self.elem_type)

    def static(self) -> Optional[List[int]]:
        """The shape as ints when every dim is a known non-negative size."""
        if self.shape is None or not all(isinstance(d, int) and d >= 0 for d in self.shape):
            return None
        return list(self.shape)


def static_shape(info: Optional[Info]) -> Optional[List[int]]:
    """`info.static()`, or None for an unknown value."""
    return None if info is None else info.static()


def _broadcast(a: List[Any], b: List[Any]) -> Optional[List[Any]]:
    out: List[Any] = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            return None
        else:
            out.append(None)
    return out[::-1]


def _product(dims: List[Any]) -> Any:
    """The product of known dims, None when any is symbolic or unknown."""
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims, dtype=np.int64))
    return None


def _ints(graph: ir.Graph, name: str) -> Optional[List[int]]:
    value = graph.initializers.get(name) if name else None
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return [int(v) for v in value.reshape(-1)]
    return None


def _reshape(shape: Optional[List[Any]], target: List[int], allowzero: int) -> Optional[List[Any]]:
    out: List[Any] = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if shape is None or i >= len(shape):
                return None
            out.append(shape[i])
        else:
            out.append(t)
    if -1 in out:
        known = [d for d in out if d != -1]
        if shape is None or not all(isinstance(d, int) for d in list(shape) + known):
            out = [None if d == -1 else d for d in out]
        else:
            rest = int(np.prod(known, dtype=np.int64))
            total = int(np.prod(shape, dtype=np.int64))
            out = [total // rest if d == -1 and rest else d for d in out]
    return out


def _axes(node: ir.Node, graph: ir.Graph, opset: int) -> Optional[List[int]]:
    if "axes" in node.attributes:
        return [int(a) for a in node.attributes["axes"]]
    if len(node.inputs) > 1 and node.inputs[1]:
        return _ints(graph, node.inputs[1])
    return [] if opset >= 13 else None


# Ops whose first output has the element type of their (first known) data input.
_KEEPS_TYPE = _UNARY | _BINARY | _SAME_TYPE | {"Reshape", "Transpose", "Flatten", "Squeeze",
                                               "Unsqueeze", "MatMul", "Gemm"}
# com.onnxedge ops and the ai.onnx op whose shape rule fits them (MultiHeadAttention: query's)
_FUSED = {"FusedMatMul": "MatMul", "FusedGemm": "Gemm", "FusedConv": "Conv", "Gelu": "Gelu",
          "LayerNormalization": "LayerNormalization", "MultiHeadAttention": "Identity"}


def _reduce(node: ir.Node, x: Info, graph: ir.Graph, opset: int) -> Optional[Info]:
    if x.shape is None or int(node.attributes.get("noop_with_empty_axes", 0)):
        return None
    axes = _axes(node, graph, opset if node.op_type != "ReduceMean" or opset >= 18 else 1)
    if axes is None:
        return None
    rank = len(x.shape)
    axes_set = {a + rank if a < 0 else a for a in axes} or set(range(rank))
    keep = int(node.attributes.get("keepdims", 1))
    shape = [1 if i in axes_set else d for i, d in enumerate(x.shape) if keep or i not in axes_set]
    return Info(x.elem_type, shape)


def _indexing(node: ir.Node, op: str, ins: List[Optional[Info]], graph: ir.Graph) -> Optional[Info]:
    """Gather, GatherElements, Expand, Where, ConstantOfShape and Range outputs, when known."""
    x = ins[0] if ins else None
    second = ins[1] if len(ins) > 1 else None
    if op == "Gather" and x is not None and second is not None and x.shape is not None \
            and second.shape is not None and x.shape:
        axis = int(node.attributes.get("axis", 0))
        axis = axis + len(x.shape) if axis < 0 else axis
        return Info(x.elem_type, x.shape[:axis] + second.shape + x.shape[axis + 1:])
    if op == "GatherElements" and x is not None and second is not None:
        return Info(x.elem_type, second.shape)
    if op == "Expand" and x is not None and x.shape is not None and second is not None \
            and second.shape is not None and len(second.shape) == 1 and isinstance(second.shape[0], int):
        target = _ints(graph, node.inputs[1]) or [None] * second.shape[0]
        shape = _broadcast(x.shape, target)
        return None if shape is None else Info(x.elem_type, shape)
    if op == "Where" and len(ins) == 3 and all(i is not None and i.shape is not None for i in ins):
        shape = _broadcast(ins[0].shape, ins[1].shape)
        shape = None if shape is None else _broadcast(shape, ins[2].shape)
        return None if shape is None else Info(ins[1].elem_type, shape)
    if op == "ConstantOfShape" and x is not None and x.shape is not None and len(x.shape) == 1 \
            and isinstance(x.shape[0], int):
        value = node.attributes.get("value")
        elem = dtypes.from_numpy(value.dtype) if isinstance(value, np.ndarray) else dtypes.FLOAT
        return Info(elem, _ints(graph, node.inputs[0]) or [None] * x.shape[0])
    if op == "Range" and x is not None:
        return Info(x.elem_type, [None])
    if op == "Concat" and x is not None and x.shape is not None \
            and all(i is not None and i.shape is not None and len(i.shape) == len(x.shape)
                    for i in ins):
        axis = int(node.attributes.get("axis", 0))
        axis = axis + len(x.shape) if axis < 0 else axis
        shape = list(x.shape)
        sizes = [i.shape[axis] for i in ins]
        shape[axis] = sum(sizes) if all(isinstance(s, int) for s in sizes) else None
        return Info(x.elem_type, shape)
    return None


def _window(node: ir.Node, op: str, ins: List[Optional[Info]]) -> Optional[Info]:
    """Conv and pooling outputs from the input's and kernel's static sizes (None if unknown)."""
    x = ins[0] if ins else None
    if op not in ("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool") \
            or x is None or x.shape is None or len(x.shape) < 3:
        return None
    if op.startswith("Global"):
        return Info(x.elem_type, list(x.shape[:2]) + [1] * (len(x.shape) - 2))
    a = node.attributes
    channels = x.shape[1]
    kernel = a.get("kernel_shape")
    if op == "Conv":
        w = ins[1] if len(ins) > 1 else None
        if w is None or w.shape is None or len(w.shape) != len(x.shape):
            return None
        channels, kernel = w.shape[0], kernel or w.shape[2:]
    spatial = x.shape[2:]
    n = len(spatial)
    if kernel is None or len(kernel) != n:
        return None
    strides = list(a.get("strides") or [1] * n)
    dil = list(a.get("dilations") or [1] * n)
    pads = list(a.get("pads") or [0] * (2 * n))
    auto_pad = a.get("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    ceil_mode = int(a.get("ceil_mode", 0))
    out: List[Any] = []
    for i, d in enumerate(spatial):
        k = kernel[i]
        if not isinstance(d, int) or not isinstance(k, int):
            out.append(None)
            continue
        span = int(dil[i]) * (k - 1) + 1
        s = int(strides[i])
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-d // s))
        elif auto_pad == "VALID":
            out.append((d - span) // s + 1)
        else:
            total = d + int(pads[i]) + int(pads[i + n]) - span
            out.append((-(-total // s) if ceil_mode else total // s) + 1)
    return Info(x.elem_type, [x.shape[0], channels] + out)


def _infer_node(node: ir.Node, ins: List[Optional[Info]], graph: ir.Graph,
                opset: int) -> List[Optional[Info]]:
    out = _infer_known(node, ins, graph, opset)
    if out or node.domain not in ("", "com.onnxedge"):
        return out
    if node.domain or node.op_type in _KEEPS_TYPE:
        elem = next((i.elem_type for i in ins if i is not None and i.elem_type), 0)
        return [Info(elem, None)] if elem else []
    return []


def _infer_known(node: ir.Node, ins: List[Optional[Info]], graph: ir.Graph,
                 opset: int) -> List[Optional[Info]]:
    op = node.op_type
    x = ins[0] if ins else None
    if node.domain == "com.onnxedge":
        if op not in _FUSED:
            return []
        op = _FUSED[op]
    elif node.domain:
        return []
    if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin") and x is not None:
        info = _reduce(node, x, graph, opset)
        return [info] if info is not None else []
    indexed = _indexing(node, op, ins, graph)
    if indexed is not None:
        return [indexed]
    if op in ("QuantizeLinear", "DequantizeLinear") and x is not None:
        zp = ins[2] if len(ins) > 2 else None
        scale = ins[1] if len(ins) > 1 else None
        if op == "DequantizeLinear":
            elem = scale.elem_type if scale is not None and scale.elem_type else dtypes.FLOAT
        else:
            elem = int(node.attributes.get("output_dtype", 0)) or (
                zp.elem_type if zp is not None and zp.elem_type else dtypes.UINT8)
        return [Info(elem, x.shape)]
    windowed = _window(node, op, ins)
    if windowed is not None:
        return [windowed]
    if op in _SAME_TYPE and x is not None:   # rank kept, sizes not worked out
        return [Info(x.elem_type, None if x.shape is None else [None] * len(x.shape))]
    if op in _UNARY and x is not None:
        return [Info(x.elem_type, x.shape)]
    if op in _BINARY | _COMPARE and len(ins) == 2 and x is not None and ins[1] is not None:
        if x.shape is None or ins[1].shape is None:
            return []
        shape = _broadcast(x.shape, ins[1].shape)
        elem = dtypes.BOOL if op in _COMPARE else x.elem_type
        return [] if shape is None else [Info(elem, shape)]
    if op == "Cast" and x is not None:
        return [Info(int(node.attributes.get("to", 0)), x.shape)]
    if op == "Shape" and x is not None and x.shape is not None:
        rank = len(x.shape)
        start = int(node.attributes.get("start", 0))
        end = int(node.attributes.get("end", rank))
        start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
        return [Info(dtypes.INT64, [max(end - start, 0)])]
    if op == "Size":
        return [Info(dtypes.INT64, [])]
    if x is None:
        return []
    if op == "Reshape":
        target = _ints(graph, node.inputs[1]) if len(node.inputs) > 1 else None
        length = ins[1].shape if len(ins) > 1 and ins[1] is not None else None
        if target is None and length is not None and len(length) == 1 \
                and isinstance(length[0], int):
            return [Info(x.elem_type, [None] * length[0])]   # rank known, sizes not
        if target is None:
            return []
        shape = _reshape(x.shape, target, int(node.attributes.get("allowzero", 0)))
        return [] if shape is None else [Info(x.elem_type, shape)]
    if x.shape is None:
        return []
    rank = len(x.shape)
    if op == "Transpose":
        perm = node.attributes.get("perm") or list(range(rank))[::-1]
        return [Info(x.elem_type, [x.shape[int(p)] for p in perm])] if len(perm) == rank else []
    if op == "Flatten":
        axis = int(node.attributes.get("axis", 1))
        axis = axis + rank if axis < 0 else axis
        head, tail = x.shape[:axis], x.shape[axis:]
        return [Info(x.elem_type, [_product(head), _product(tail)])]
    if op == "Unsqueeze":
        axes = _axes(node, graph, opset)
        if not axes:
            return []
        out_rank = rank + len(axes)
        axes = sorted(a + out_rank if a < 0 else a for a in axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        return [Info(x.elem_type, shape)]
    if op == "Squeeze":
        axes = _axes(node, graph, opset)
        if axes is None:
            return []
        if not axes:
            if not all(isinstance(d, int) for d in x.shape):
                return []
            return [Info(x.elem_type, [d for d in x.shape if d != 1])]
        axes = {a + rank if a < 0 else a for a in axes}
        return [Info(x.elem_type, [d for i, d in enumerate(x.shape) if i not in axes])]
    if op in ("MatMul", "Gemm") and len(ins) > 1 and ins[1] is not None and ins[1].shape:
        b = ins[1].shape
        if op == "Gemm":
            if rank != 2 or len(b) != 2:
                return []
            m = x.shape[1] if node.attributes.get("transA", 0) else x.shape[0]
            n = b[0] if node.attributes.get("transB", 0) else b[1]
            return [Info(x.elem_type, [m, n])]
        if rank >= 2 and len(b) >= 2:
            batch = _broadcast(x.shape[:-2], b[:-2])
            return [] if batch is None else [Info(x.elem_type, batch + [x.shape[-2], b[-1]])]
        if rank >= 2 and len(b) == 1:
            return [Info(x.elem_type, x.shape[:-1])]
    return []


def infer(graph: ir.Graph, opsets: Dict[str, int]) -> Dict[str, Info]:
    """Known element types and shapes of the graph's values, by name."""
    known: Dict[str, Info] = {}
    for name, value in graph.initializers.items():
        if isinstance(value, np.ndarray):
            try:
                known[name] = Info(dtypes.from_numpy(value.dtype), list(value.shape))
            except KeyError:
                pass
    declared = list(graph.inputs) + list(graph.value_info.values()) + list(graph.outputs)
    for vi in declared:
        t = vi.type
        if t is not None and t.kind == "tensor" and vi.name not in known:
            known[vi.name] = Info(t.elem_type, t.shape)
    opset = opsets.get("", 0)
    for node in graph.nodes:
        if node.op_type == "Constant":
            continue   # folded into an initializer by the basic level before anyone asks
        ins = [known.get(n) if n else None for n in node.inputs]
        for out, info in zip(node.outputs, _infer_node(node, ins, graph, opset)):
            if out and info is not None and out not in known:
                known[out] = info
    return known
