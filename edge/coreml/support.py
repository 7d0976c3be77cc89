"""What the CoreML bridge claims: per node, None when it translates it, else the reason why not.

A node is claimed when its op is one the translator emits as Core ML ML Program (MIL) ops, its
data inputs are float32/float16 (int8/uint8 for DequantizeLinear), the ranks of its non-constant
inputs are known (dims may be symbolic or unknown: the translation gives them a bounded range),
the inputs MIL needs as constants are initializers, and the deployment target has the MIL ops
(DequantizeLinear of a constant weight: iOS16+ keeps it int8 through constexpr_affine_dequantize,
below that it is folded to float; activation QuantizeLinear / DequantizeLinear need iOS17's
quantize / dequantize).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import numpy as np

from onnxedge import dtypes, fused_ops, ir
from onnxedge.facts import Fact as Info
from onnxedge.providers import support as _support
from onnxedge.providers.support import OpSupport, SupportTable

FUSED = fused_ops.DOMAIN

# Deployment targets by name -> MIL opset level (iOS major version; macOS12 = iOS15 ...).
TARGETS = {"iOS15": 15, "iOS16": 16, "iOS17": 17, "iOS18": 18,
           "macOS12": 15, "macOS13": 16, "macOS14": 17, "macOS15": 18}
FLOATS = (dtypes.FLOAT, dtypes.FLOAT16)
ACTIVATIONS = ("", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid", "Gelu", "GeluTanh", "Silu",
               "HardSwish")
UNARY = ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp", "Abs", "Identity", "Dropout")
BINARY = ("Add", "Sub", "Mul", "Div", "Pow")


def target_level(name: Any) -> int:
    """The MIL opset level (15..18) of a `minimum_deployment_target` name; InvalidArgument else."""
    from onnxedge.errors import InvalidArgument
    if str(name) not in TARGETS:
        raise InvalidArgument("CoreMLExecutionProvider option minimum_deployment_target=%r: "
                              "expected one of %s" % (name, sorted(TARGETS)))
    return TARGETS[str(name)]


class Ctx(_support.Facts):
    """What a check needs (its `facts`): the graph, its shapes, the node's opset and the
    deployment target level."""

    def __init__(self, graph: ir.Graph, shapes: Dict[str, Info], opset: int, level: int):
        self.graph = graph
        self.shapes = shapes
        self.opset = opset
        self.level = level
        self._fed = {v.name for v in graph.inputs}
        self.opsets = {}
        self.consts = {}   # not used: const() reads the graph

    def elem_type(self, name: str) -> int:
        """ONNX element type of a value, 0 when unknown."""
        info = self.info(name)
        return info.elem_type if info is not None else 0

    def shape(self, name: str) -> Optional[List[Any]]:
        """The value's shape (None when its rank is unknown)."""
        info = self.info(name)
        return None if info is None or info.shape is None else list(info.shape)

    def const(self, name: str) -> Optional[np.ndarray]:
        """The initializer `name` (not one a caller may override), else None."""
        v = self.graph.initializers.get(name) if name and name not in self._fed else None
        return v if isinstance(v, np.ndarray) else None

    def producer(self, name: str) -> Optional[ir.Node]:
        """The node that outputs `name`, None for inputs and initializers."""
        for n in self.graph.nodes:
            if name in n.outputs:
                return n
        return None

    def consumers(self, name: str) -> List[ir.Node]:
        """The nodes reading `name`."""
        return [n for n in self.graph.nodes if name in n.inputs]

    def const_like(self, name: str) -> bool:
        """An initializer, or the DequantizeLinear of initializers (a QDQ model's weights: the
        translation folds it or keeps it as MIL constexpr_affine_dequantize)."""
        if self.const(name) is not None:
            return True
        p = self.producer(name) if name else None
        return p is not None and p.op_type == "DequantizeLinear" and not p.domain and \
            all(self.const(i) is not None for i in p.inputs if i)

    def info(self, name: str) -> Optional[Info]:
        """Known element type / shape of a value."""
        c = self.const(name)
        if c is not None:
            try:
                return Info(dtypes.from_numpy(c.dtype), list(c.shape))
            except KeyError:
                return None
        info = self.shapes.get(name)
        if info is None:
            t = self.graph.type_of(name)
            if t is not None and t.kind == "tensor":
                info = Info(t.elem_type, t.shape)
        return info

    def rank(self, name: str) -> Optional[int]:
        """The rank of a value, None when unknown."""
        info = self.info(name)
        return None if info is None or info.shape is None else len(info.shape)


def _dtype_name(code: int) -> str:
    try:
        return dtypes.lookup(code).name.lower()
    except Exception:
        return "type %d" % code if code else "an unknown type"


def _float_inputs(node: ir.Node, facts: Ctx, names: Optional[List[str]] = None) -> Optional[str]:
    for name in names if names is not None else node.inputs:
        if not name:
            continue
        info = facts.info(name)
        if info is None or not info.elem_type:
            return "input %r has an unknown element type" % name
        if info.elem_type not in FLOATS:
            return "input %r is %s; Core ML runs this op on float32/float16" % (
                name, _dtype_name(info.elem_type))
        if not facts.const_like(name) and info.shape is None:
            return "dynamic shape: the rank of input %r is unknown" % name
        if info.shape is not None and len(info.shape) > 5:
            return "input %r has rank %d; Core ML tensors have rank <= 5" % (name, len(info.shape))
        if not facts.const_like(name) and info.shape == []:
            return "input %r is a rank-0 (scalar) tensor; ML Program inputs have rank >= 1" % name
    return None


def _needs_const(node: ir.Node, facts: Ctx, positions: List[int], what: str) -> Optional[str]:
    for p in positions:
        if p < len(node.inputs) and node.inputs[p] and not facts.const_like(node.inputs[p]):
            return "%s %r must be a constant (initializer) for Core ML" % (what, node.inputs[p])
    return None


def _unused_outputs(node: ir.Node, facts: Ctx, first: int = 1) -> Optional[str]:
    used = set()
    for n in facts.graph.nodes:
        used.update(n.inputs)
    used.update(v.name for v in facts.graph.outputs)
    for name in node.outputs[first:]:
        if name and name in used:
            return "its optional output %r is used; Core ML gives only the first output" % name
    return None


def _rank_is(node: ir.Node, facts: Ctx, ranks: tuple, what: str = "2-D (NCHW)") -> Optional[str]:
    r = facts.rank(node.inputs[0])
    if r not in ranks:
        return "input %r has rank %s; the bridge translates %s only" % (
            node.inputs[0], "unknown" if r is None else r, what)
    return None


def _activation(node: ir.Node) -> Optional[str]:
    act = node.attributes.get("activation", "")
    act = str(act)
    if act not in ACTIVATIONS:
        return "fused activation %r has no Core ML op (supported: %s)" % (
            act, ", ".join(a for a in ACTIVATIONS if a))
    return None


def _auto_pad(node: ir.Node) -> Optional[str]:
    pad = node.attributes.get("auto_pad", "NOTSET")
    pad = str(pad)
    if pad not in ("NOTSET", "VALID", "SAME_UPPER"):
        return "auto_pad=%s is not translated (NOTSET, VALID and SAME_UPPER are)" % pad
    return None


def _conv(node: ir.Node, facts: Ctx) -> Optional[str]:
    return (_float_inputs(node, facts) or _rank_is(node, facts, (4,)) or
            _needs_const(node, facts, [1, 2], "weight/bias") or _auto_pad(node) or
            (_activation(node) if node.domain == FUSED else None))


def _conv_transpose(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = (_float_inputs(node, facts) or _rank_is(node, facts, (4,)) or
           _needs_const(node, facts, [1, 2], "weight/bias"))
    if why:
        return why
    pad = node.attributes.get("auto_pad", "NOTSET")
    pad = str(pad)
    if pad not in ("NOTSET", "VALID"):
        return "ConvTranspose auto_pad=%s is not translated (NOTSET and VALID are)" % pad
    if node.attributes.get("output_shape") is not None:
        return "ConvTranspose with output_shape is not translated"
    if any(int(v) for v in node.attributes.get("output_padding") or []):
        return "ConvTranspose with output_padding is not translated"
    return None


def _gemm(node: ir.Node, facts: Ctx) -> Optional[str]:
    if facts.rank(node.inputs[0]) != 2 or facts.rank(node.inputs[1]) != 2:
        return "Gemm inputs must be 2-D"
    return _float_inputs(node, facts) or (_activation(node) if node.domain == FUSED else None)


def _matmul(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts)
    if why:
        return why
    if (facts.rank(node.inputs[0]) or 0) < 2 or (facts.rank(node.inputs[1]) or 0) < 2:
        return "MatMul with a 1-D (or unknown-rank) operand is not translated"
    if node.domain == FUSED:
        return _activation(node)
    return None


def _clip(node: ir.Node, facts: Ctx) -> Optional[str]:
    return _float_inputs(node, facts, node.inputs[:1]) or _needs_const(node, facts, [1, 2], "min/max")


def _softmax(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts)
    if why or facts.opset >= 13:
        return why
    rank = facts.rank(node.inputs[0]) or 0
    axis = int(node.attributes.get("axis", 1))
    if axis not in (-1, rank - 1):
        return ("Softmax-%d with axis=%d flattens to 2-D first; only axis=-1 is translated below "
                "opset 13" % (facts.opset, axis))
    return None


def _batch_norm(node: ir.Node, facts: Ctx) -> Optional[str]:
    if int(node.attributes.get("training_mode", 0)):
        return "training_mode=1 is not supported"
    return (_float_inputs(node, facts) or _rank_is(node, facts, (3, 4, 5), "ranks 3-5") or
            _needs_const(node, facts, [1, 2, 3, 4], "scale/bias/mean/var") or _unused_outputs(node, facts))


def _layer_norm(node: ir.Node, facts: Ctx) -> Optional[str]:
    return (_float_inputs(node, facts) or _needs_const(node, facts, [1, 2], "scale/bias") or
            _unused_outputs(node, facts))


def _pool(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts) or _rank_is(node, facts, (4,)) or _auto_pad(node) or \
        _unused_outputs(node, facts)
    if why:
        return why
    if any(int(d) != 1 for d in node.attributes.get("dilations") or []):
        return "pooling with dilations is not supported by Core ML"
    if int(node.attributes.get("storage_order", 0)):
        return "storage_order=1 is not supported"
    if int(node.attributes.get("ceil_mode", 0)):
        return _ceil_mode(node, facts)
    return None


def _ceil_mode(node: ir.Node, facts: Ctx) -> Optional[str]:
    """ceil_mode=1 where MIL's output size is ONNX's: symmetric pads, and no last window that
    starts past the input without padding (ONNX drops it, MIL drops it only when padded)."""
    a = node.attributes
    if _name(a.get("auto_pad", "NOTSET")) != "NOTSET":
        return "ceil_mode=1 with auto_pad is not translated"
    shape = facts.info(node.inputs[0]).shape
    k = [int(v) for v in a["kernel_shape"]]
    sp = len(k)
    s = [int(v) for v in a.get("strides") or [1] * sp]
    p = [int(v) for v in a.get("pads") or [0] * (2 * sp)]
    if p[:sp] != p[sp:]:
        return "ceil_mode=1 with asymmetric pads %s: Core ML needs symmetric ones" % p
    for i in range(sp):
        size = shape[2 + i]
        if not isinstance(size, int):
            return "ceil_mode=1 needs static spatial dims (input %r: %s)" % (node.inputs[0], shape)
        o = -(-(size + 2 * p[i] - k[i]) // s[i]) + 1
        if (o - 1) * s[i] >= size + p[i] and not p[i]:
            return ("ceil_mode=1 here gives a last window outside the input, which ONNX drops "
                    "and Core ML (without padding) keeps")
    return None


def _name(value: Any) -> str:
    return str(value)


def _global_pool(node: ir.Node, facts: Ctx) -> Optional[str]:
    return _float_inputs(node, facts) or _rank_is(node, facts, (3, 4, 5), "ranks 3-5")


def _axes_const(node: ir.Node, facts: Ctx, since: int, attr: str = "axes") -> Optional[str]:
    if facts.opset >= since and len(node.inputs) > 1 and node.inputs[1] and \
            facts.const(node.inputs[1]) is None:
        return "its axes input %r must be a constant" % node.inputs[1]
    return None


def _reshape(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts, node.inputs[:1]) or _needs_const(node, facts, [1], "shape")
    if why:
        return why
    target = facts.const(node.inputs[1])
    if int(node.attributes.get("allowzero", 0)) and 0 in target.tolist():
        return "allowzero=1 with a 0 in the shape is not supported"
    shape = facts.info(node.inputs[0]).shape or []
    dims = [(shape[i] if i < len(shape) and isinstance(shape[i], int) else -1) if d == 0 else d
            for i, d in enumerate(target.reshape(-1).tolist())]
    if dims.count(-1) > 1:
        return "reshape to %s leaves more than one dim dynamic (input shape %s)" % (
            target.reshape(-1).tolist(), shape)
    return None


def _flatten(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts)
    if why:
        return why
    shape = facts.info(node.inputs[0]).shape
    axis = int(node.attributes.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    head, tail = shape[:axis], shape[axis:]
    if not all(isinstance(d, int) for d in head) and not all(isinstance(d, int) for d in tail):
        return "Flatten of shape %s: dims on both sides of axis %d are dynamic" % (shape, axis)
    return None


def _squeeze(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts, node.inputs[:1]) or _axes_const(node, facts, 13)
    if why:
        return why
    has_axes = node.attributes.get("axes") or (len(node.inputs) > 1 and node.inputs[1])
    if node.op_type == "Unsqueeze":
        n_axes = len(node.attributes.get("axes") or []) if facts.opset < 13 else (
            facts.const(node.inputs[1]).size if len(node.inputs) > 1 and node.inputs[1] else 0)
        if facts.rank(node.inputs[0]) + n_axes > 5:
            return "Unsqueeze to rank %d; Core ML tensors have rank <= 5" % (
                facts.rank(node.inputs[0]) + n_axes)
    if not has_axes and node.op_type == "Squeeze":
        shape = facts.info(node.inputs[0]).shape
        if not all(isinstance(d, int) for d in shape):
            return "Squeeze without axes of a dynamic shape %s" % shape
    return None


def _reduce_mean(node: ir.Node, facts: Ctx) -> Optional[str]:
    return _float_inputs(node, facts, node.inputs[:1]) or _axes_const(node, facts, 18)


def _concat(node: ir.Node, facts: Ctx) -> Optional[str]:
    return _float_inputs(node, facts)


def _quantize(node: ir.Node, facts: Ctx) -> Optional[str]:
    if facts.level < 17:
        return ("activation QuantizeLinear needs MIL quantize (deployment target iOS17 / macOS14 "
                "or newer; this one is iOS%d)" % facts.level)
    why = _qparams(node, facts) or _float_inputs(node, facts, node.inputs[:1])
    if why:
        return why
    out = node.outputs[0]
    if out in {v.name for v in facts.graph.outputs} or \
            any(n.op_type != "DequantizeLinear" for n in facts.consumers(out)):
        return ("its int8 output %r leaves Core ML (a graph output or read by other ops than "
                "DequantizeLinear); ML Program inputs/outputs are float/int32" % out)
    return None


def _dequantize(node: ir.Node, facts: Ctx) -> Optional[str]:
    x = node.inputs[0]
    info = facts.info(x)
    why = _qparams(node, facts)
    if why:
        return why
    if facts.const(x) is not None:
        return None    # a constant weight: constexpr_affine_dequantize (iOS16+) or folded
    if info is None or info.elem_type not in (dtypes.INT8, dtypes.UINT8):
        return "activation DequantizeLinear of %s: MIL dequantize takes int8/uint8" % x
    if facts.level < 17:
        return ("activation DequantizeLinear needs MIL dequantize (deployment target iOS17 / "
                "macOS14 or newer; this one is iOS%d)" % facts.level)
    if info.shape is None:
        return "dynamic shape: the rank of input %r is unknown" % x
    p = facts.producer(x)
    if p is None or p.op_type != "QuantizeLinear":
        return ("its int8 input %r comes from outside Core ML (not a QuantizeLinear); ML Program "
                "inputs are float/int32" % x)
    return None


def _qparams(node: ir.Node, facts: Ctx) -> Optional[str]:
    if int(node.attributes.get("block_size", 0)):
        return "blocked quantization (block_size) is not supported"
    for name in node.inputs[1:3]:
        if name and facts.const(name) is None:
            return "scale/zero point %r must be an initializer" % name
    scale = facts.const(node.inputs[1])
    if scale.ndim > 1 or scale.dtype != np.float32:
        return "scale must be a float32 scalar or 1-D (per-axis) constant"
    zp = facts.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    if zp is not None and zp.dtype not in (np.int8, np.uint8) and node.op_type == "QuantizeLinear":
        return "zero point of type %s: Core ML quantizes to int8/uint8" % zp.dtype
    if zp is not None and zp.dtype not in (np.int8, np.uint8, np.int32):
        return "zero point of type %s is not supported" % zp.dtype
    return None


def _attention(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts)
    if why:
        return why
    if int(node.attributes.get("nan_to_zero", 0)):
        return "nan_to_zero=1 is not translated"
    heads = int(node.attributes.get("num_heads", 1))
    for name in node.inputs[:3]:
        shape = facts.info(name).shape
        if len(shape) != 3:
            return "%r has rank %d; the bridge splits rank-3 [batch, seq, heads * dim] only" % (
                name, len(shape))
        if not isinstance(shape[2], int) or heads <= 0 or shape[2] % heads:
            return "%r's last dim %s is not a known multiple of num_heads=%d" % (
                name, shape[2], heads)
        if not isinstance(shape[0], int) and not isinstance(shape[1], int):
            return "%r of shape %s: both batch and sequence are dynamic" % (name, shape)
    return None


def _elementwise(node: ir.Node, facts: Ctx) -> Optional[str]:
    why = _float_inputs(node, facts)
    if why or node.op_type != "Dropout":
        return why
    return _unused_outputs(node, facts)


CHECKS: Dict[tuple, Callable[[ir.Node, Ctx], Optional[str]]] = {
    ("", "Conv"): _conv, (FUSED, "FusedConv"): _conv, ("", "ConvTranspose"): _conv_transpose,
    ("", "Gemm"): _gemm, (FUSED, "FusedGemm"): _gemm,
    ("", "MatMul"): _matmul, (FUSED, "FusedMatMul"): _matmul,
    ("", "LeakyRelu"): _elementwise, ("", "Gelu"): _elementwise, (FUSED, "Gelu"): _elementwise,
    ("", "Clip"): _clip, ("", "Softmax"): _softmax,
    ("", "BatchNormalization"): _batch_norm,
    ("", "LayerNormalization"): _layer_norm, (FUSED, "LayerNormalization"): _layer_norm,
    ("", "MaxPool"): _pool, ("", "AveragePool"): _pool,
    ("", "GlobalAveragePool"): _global_pool,
    ("", "Reshape"): _reshape, ("", "Flatten"): _flatten, ("", "Transpose"): _elementwise,
    ("", "Concat"): _concat, ("", "Squeeze"): _squeeze, ("", "Unsqueeze"): _squeeze,
    ("", "ReduceMean"): _reduce_mean,
    ("", "QuantizeLinear"): _quantize, ("", "DequantizeLinear"): _dequantize,
    (FUSED, "MultiHeadAttention"): _attention,
}
for _op in UNARY + BINARY:
    CHECKS[("", _op)] = _elementwise


TABLE = SupportTable("CoreMLExecutionProvider", [
    OpSupport(dom, op, check=check, conditional=True) for (dom, op), check in CHECKS.items()])


def support_table() -> SupportTable:
    """The Core ML bridge's op-support records (docs/OPERATORS.md reads them)."""
    return TABLE


def _missing(node: ir.Node) -> str:
    return "%s (domain %s) is not an op the Core ML bridge translates" % (
        node.op_type, node.domain or "ai.onnx")


def node_reason(node: ir.Node, graph: ir.Graph, shapes: Dict[str, Info], opset: int,
                level: int) -> Optional[str]:
    """None when the CoreML bridge translates `node`, else why not (op, dtype, shape, target)."""
    if TABLE.lookup(node, opset or None) is not None and list(node.subgraphs()):
        return "nodes with subgraphs are not translated"
    return TABLE.reason(node, opset or None, Ctx(graph, shapes, opset, level), _missing)


def claimed_ops() -> List[str]:
    """Every (domain.)op the bridge may claim, sorted."""
    return sorted(("%s.%s" % k) if k[0] else k[1] for k in CHECKS)


__all__ = ["CHECKS", "TABLE", "TARGETS", "claimed_ops", "node_reason", "support_table",
           "target_level"]
