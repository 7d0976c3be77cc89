"""Which ONNX nodes the NNAPI bridge claims, per NNAPI feature level.

A node is claimed when its op maps to NNAPI operations available at the feature level, its
values are float32 (uint8 / int8 only through QuantizeLinear / DequantizeLinear), every shape is
static with rank <= 4, and its attributes fit (constant weights, 2-D convolutions, explicit or
computable padding, ...). `node_reason` says why not, naming the op, the value and the rule.
`Facts` holds what the checks and the translator read about a graph: static shapes (the bridge's
inference extended through Conv, pools and the QDQ ops), producers, consumers and constants; it
is an `onnxedge.providers.support.Facts` whose `level` is the feature level checked against.
`TABLE` holds the `OpSupport` records (build: the NNAPI operations the op becomes).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

import copy

from onnxedge import dtypes, fused_ops, ir
from onnxedge.facts import Fact as Info
from onnxedge.geometry import conv_geometry
from onnxedge.providers import support as _support
from onnxedge.providers.support import OpSupport, SupportTable

from . import codes

FUSED_DOMAIN = fused_ops.DOMAIN
FLOAT = dtypes.FLOAT
QUANT_TYPES = {dtypes.UINT8: 1, dtypes.INT8: 4}    # ONNX type -> feature level needed
# ONNX op -> (lowest feature level, NNAPI operations it becomes)
OPS: Dict[str, tuple] = {
    "Conv": (1, "CONV_2D / DEPTHWISE_CONV_2D"), "FusedConv": (1, "CONV_2D / DEPTHWISE_CONV_2D"),
    "Gemm": (1, "FULLY_CONNECTED"), "FusedGemm": (1, "FULLY_CONNECTED"),
    "MatMul": (1, "FULLY_CONNECTED"), "FusedMatMul": (1, "FULLY_CONNECTED"),
    "Add": (1, "ADD"), "Mul": (1, "MUL"), "Sub": (2, "SUB"), "Div": (2, "DIV"),
    "Relu": (1, "RELU"), "Sigmoid": (1, "LOGISTIC"), "Tanh": (1, "TANH"),
    "Clip": (1, "RELU / RELU1 / RELU6"), "Softmax": (1, "SOFTMAX"),
    "Reshape": (1, "RESHAPE"), "Flatten": (1, "RESHAPE"), "Squeeze": (1, "RESHAPE"),
    "Unsqueeze": (1, "RESHAPE"), "Transpose": (2, "TRANSPOSE"), "Concat": (1, "CONCATENATION"),
    "MaxPool": (1, "MAX_POOL_2D"), "AveragePool": (1, "AVERAGE_POOL_2D"),
    "GlobalAveragePool": (1, "AVERAGE_POOL_2D"), "GlobalMaxPool": (1, "MAX_POOL_2D"),
    "ReduceMean": (2, "MEAN"), "BatchNormalization": (1, "MUL + ADD"),
    "QuantizeLinear": (3, "QUANTIZE"), "DequantizeLinear": (1, "DEQUANTIZE"),
}
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
ACTIVATIONS = {"": None, "Relu": codes.FUSED_RELU}   # FusedConv/FusedGemm activation -> fuse code


def nhwc_axis(axis: int) -> int:
    """Where NCHW axis `axis` sits in NHWC."""
    return (0, 3, 1, 2)[axis]


def is_pure_reshape(dims: Sequence[int], perm: Sequence[int]) -> bool:
    """True when transposing `dims` by `perm` keeps element order (a RESHAPE does the job)."""
    moved = [p for p in perm if dims[p] != 1]
    return moved == sorted(moved)


def clip_fuse(lo: Optional[float], hi: Optional[float]) -> Optional[int]:
    """The fuse code of Clip(lo, hi), None when NNAPI has no activation for it."""
    lo = -np.inf if lo is None else lo
    hi = np.inf if hi is None else hi
    return {(0.0, np.inf): codes.FUSED_RELU, (0.0, 6.0): codes.FUSED_RELU6,
            (-1.0, 1.0): codes.FUSED_RELU1}.get((float(lo), float(hi)))


def activation_fuse(node: ir.Node) -> Optional[int]:
    """Fuse code of a com.onnxedge fused op's activation ("" -> NONE), None when not one."""
    act = fused_ops.activation_name(node)
    if act == "":
        return codes.FUSED_NONE
    if act == "Relu":
        return codes.FUSED_RELU
    if act == "Clip":
        params = list(node.attributes.get("activation_params") or [])
        return clip_fuse(*params[:2]) if len(params) >= 2 else None
    return None


def conv_pads(node: ir.Node, in_hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
              dilations: Sequence[int]) -> Optional[List[int]]:
    """ONNX pads [top, left, bottom, right] with auto_pad resolved; None for an unknown mode."""
    mode = node.attributes.get("auto_pad", "NOTSET")
    mode = str(mode)
    if mode in ("NOTSET", ""):
        pads = list(node.attributes.get("pads") or [0, 0, 0, 0])
        return [int(p) for p in pads] if len(pads) == 4 else None
    if mode == "VALID":
        return [0, 0, 0, 0]
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    begin, end, _ = conv_geometry(node.op_type, list(in_hw), kernel, strides, dilations, None, mode)
    return begin + end


def window(node: ir.Node, x_shape: Sequence[int], kernel: Sequence[int]) -> dict:
    """Strides, dilations, pads [t, l, b, r] and output H, W of a 2-D conv or pool node."""
    strides = [int(s) for s in node.attributes.get("strides") or [1, 1]]
    dil = [int(d) for d in node.attributes.get("dilations") or [1, 1]]
    pads = conv_pads(node, x_shape[2:], kernel, strides, dil)
    out = None
    if pads is not None:
        ceil = int(node.attributes.get("ceil_mode", 0))
        out = []
        for i in range(2):
            span = x_shape[2 + i] + pads[i] + pads[i + 2] - dil[i] * (kernel[i] - 1) - 1
            out.append((-(-span // strides[i]) if ceil else span // strides[i]) + 1)
    return {"strides": strides, "dilations": dil, "pads": pads, "out": out}


class Facts(_support.Facts):
    """Static shapes, producers, consumers and constants of one graph (checks and translation);
    `level` is the feature level the checks hold the graph against (`at_level`)."""

    level = 8

    def __init__(self, graph: ir.Graph, shapes: Dict[str, Info], opsets: Dict[str, int]):
        self.graph = graph
        self.opsets = opsets
        self.shapes = dict(shapes)
        self.producer: Dict[str, ir.Node] = {}
        self.consumers: Dict[str, List[ir.Node]] = {}
        fed = {v.name for v in graph.inputs}
        self.consts = {k: v for k, v in graph.initializers.items()
                       if k not in fed and isinstance(v, np.ndarray)}
        self.outputs = {v.name for v in graph.outputs}
        for node in graph.nodes:
            for name in node.inputs:
                if name:
                    self.consumers.setdefault(name, []).append(node)
            for name in node.outputs:
                if name:
                    self.producer[name] = node
            self._infer(node)

    def at_level(self, level: int) -> "Facts":
        """These facts, checked against feature level `level` (a shallow copy)."""
        if level == self.level:
            return self
        view = copy.copy(self)
        view.level = level
        return view

    # ------------------------------------------------------------------ values
    def elem_type(self, name: str) -> int:
        """ONNX element type of a value (0 when unknown): `elem`."""
        return self.elem(name)

    def rank(self, name: str) -> Optional[int]:
        """The rank of a value with a static shape, else None."""
        shape = self.shape(name)
        return None if shape is None else len(shape)

    def shape(self, name: str) -> Optional[List[int]]:
        """The static shape of a value, None when unknown or dynamic."""
        if name in self.consts:
            return list(self.consts[name].shape)
        info = self.shapes.get(name)
        return None if info is None else info.static()

    def elem(self, name: str) -> int:
        """ONNX element type of a value (0 when unknown)."""
        if name in self.consts:
            return dtypes.from_numpy(self.consts[name].dtype)
        info = self.shapes.get(name)
        return info.elem_type if info is not None else 0

    def dq_params(self, node: ir.Node) -> Optional[tuple]:
        """(scale, zero_point array) of a per-tensor Q/DQ node with constant parameters."""
        scale = self.consts.get(node.inputs[1]) if len(node.inputs) > 1 else None
        zp_name = node.inputs[2] if len(node.inputs) > 2 else ""
        zp = self.consts.get(zp_name) if zp_name else None
        if scale is None or scale.size != 1 or (zp_name and (zp is None or zp.size != 1)):
            return None
        if int(node.attributes.get("block_size", 0)):
            return None
        return float(scale.reshape(-1)[0]), zp

    def const(self, name: str) -> Optional[np.ndarray]:
        """A constant's value: an initializer, or DequantizeLinear of one (folded here)."""
        if name in self.consts:
            return self.consts[name]
        node = self.producer.get(name)
        if node is None or node.op_type != "DequantizeLinear" or node.domain:
            return None
        q = self.consts.get(node.inputs[0])
        params = self.dq_params(node)
        if q is None or params is None:
            return None
        scale, zp = params
        zero = 0 if zp is None else int(zp.reshape(-1)[0])
        return ((q.astype(np.int64) - zero) * np.float32(scale)).astype(np.float32)

    def _set(self, name: str, elem: int, shape: Optional[List[int]]) -> None:
        old = self.shapes.get(name)
        if name and shape is not None and (old is None or old.static() is None):
            self.shapes[name] = Info(elem or (old.elem_type if old else 0), shape)

    def _infer(self, node: ir.Node) -> None:
        """Fill in the shapes core inference leaves open for ops the bridge translates."""
        op = node.op_type
        if not node.inputs or not node.outputs:
            return
        x = self.shape(node.inputs[0]) if node.inputs[0] else None
        if x is None:
            return
        out = node.outputs[0]
        elem = self.elem(node.inputs[0])
        if op in ("Conv", "FusedConv") and len(x) == 4 and len(node.inputs) > 1:
            w = self.shape(node.inputs[1])
            if w is not None and len(w) == 4:
                win = window(node, x, w[2:])
                if win["out"] is not None:
                    self._set(out, elem, [x[0], w[0]] + win["out"])
        elif op in ("MaxPool", "AveragePool") and len(x) == 4:
            kernel = [int(k) for k in node.attributes.get("kernel_shape") or []]
            if len(kernel) == 2:
                win = window(node, x, kernel)
                if win["out"] is not None:
                    self._set(out, elem, x[:2] + win["out"])
        elif op in ("GlobalAveragePool", "GlobalMaxPool"):
            self._set(out, elem, x[:2] + [1] * (len(x) - 2))
        elif op == "BatchNormalization":
            self._set(out, elem, x)
        elif op == "QuantizeLinear":
            zp = self.consts.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
            to = int(node.attributes.get("output_dtype", 0)) or (
                dtypes.from_numpy(zp.dtype) if zp is not None else dtypes.UINT8)
            self._set(out, to, x)
        elif op == "DequantizeLinear":
            self._set(out, FLOAT, x)


def _float_io(node: ir.Node, facts: Facts, skip: Sequence[int] = ()) -> Optional[str]:
    """Why the node's values are not all static float32 tensors of rank 1..4 (None if they are)."""
    names = [(n, "input") for k, n in enumerate(node.inputs) if n and k not in skip]
    names += [(n, "output") for n in node.outputs if n]
    for name, kind in names:
        shape = facts.shape(name)
        if shape is None:
            return "%s %r has no static shape (NNAPI needs static shapes; set the provider " \
                   "options input_shapes or dims)" % (kind, name)
        if len(shape) > 4:
            return "%s %r has rank %d (NNAPI tensors have rank <= 4)" % (kind, name, len(shape))
        if not shape and name not in facts.consts:
            return "%s %r is a 0-D tensor (not an NNAPI tensor operand)" % (kind, name)
        if facts.elem(name) != FLOAT:
            return "%s %r is %s (the bridge claims float32 here)" % (
                kind, name, dtypes.lookup(facts.elem(name)).ort_name if facts.elem(name) else "of unknown type")
    return None


def _needs_const(node: ir.Node, facts: Facts, index: int, what: str) -> Optional[str]:
    name = node.inputs[index] if len(node.inputs) > index else ""
    if name and facts.const(name) is None:
        return "%s %r is not a constant (NNAPI's layout and weights are fixed at translation)" % (
            what, name)
    return None


def _conv(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    x = facts.shape(node.inputs[0])
    if len(x) != 4:
        return "only 2-D convolutions (4-D input) are translated; input has rank %d" % len(x)
    why = _needs_const(node, facts, 1, "weight") or _needs_const(node, facts, 2, "bias")
    if why:
        return why
    if node.op_type == "FusedConv" and activation_fuse(node) is None \
            and str(node.attributes.get("activation", "")) not in ("Sigmoid", "Tanh"):
        return "activation %s has no NNAPI fuse code or operation" % node.attributes.get("activation")
    w = facts.shape(node.inputs[1])
    group = int(node.attributes.get("group", 1))
    if group != 1 and not (group == x[1] and w[1] == 1):
        return "group=%d with %d input channels: only plain (group 1) and depthwise " \
               "convolutions are translated" % (group, x[1])
    win = window(node, x, w[2:])
    if win["pads"] is None:
        return "auto_pad %r / pads %s are not translatable" % (
            node.attributes.get("auto_pad"), node.attributes.get("pads"))
    if win["dilations"] != [1, 1] and level < 3:
        return "dilations %s need feature level >= 3 (have %d)" % (win["dilations"], level)
    return None


def _pool(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    x = facts.shape(node.inputs[0])
    if len(x) != 4:
        return "only 2-D pools (4-D input) are translated; input has rank %d" % len(x)
    if node.op_type.startswith("Global"):
        return None
    if len([o for o in node.outputs if o]) > 1:
        return "the Indices output is not an NNAPI pool output"
    kernel = [int(k) for k in node.attributes.get("kernel_shape") or []]
    if len(kernel) != 2:
        return "kernel_shape %s is not 2-D" % kernel
    win = window(node, x, kernel)
    if win["pads"] is None:
        return "auto_pad %r is not translatable" % node.attributes.get("auto_pad")
    if win["dilations"] != [1, 1]:
        return "dilations %s: NNAPI pools have none" % win["dilations"]
    if int(node.attributes.get("ceil_mode", 0)):
        node_floor = ir.Node(node.op_type, node.inputs, node.outputs,
                             dict(node.attributes, ceil_mode=0))
        if window(node_floor, x, kernel)["out"] != win["out"]:
            return "ceil_mode=1 changes the output size here (NNAPI rounds down)"
    if node.op_type == "AveragePool" and int(node.attributes.get("count_include_pad", 0)) \
            and any(win["pads"]):
        return "count_include_pad=1 with padding (NNAPI averages over the input elements only)"
    return None


def _gemm(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    a = facts.shape(node.inputs[0])
    op = node.op_type
    if node.domain and activation_fuse(node) is None \
            and str(node.attributes.get("activation", "")) not in ("Sigmoid", "Tanh"):
        return "activation %s has no NNAPI fuse code or operation" % node.attributes.get("activation")
    why = _needs_const(node, facts, 1, "B") or _needs_const(node, facts, 2, "C/bias")
    if why:
        return why
    b = facts.shape(node.inputs[1])
    if len(b) != 2:
        return "B has rank %d (FULLY_CONNECTED weights are 2-D)" % len(b)
    if op in ("Gemm", "FusedGemm"):
        if int(node.attributes.get("transA", 0)):
            return "transA=1 (FULLY_CONNECTED takes A as is)"
        n = b[0] if int(node.attributes.get("transB", 0)) else b[1]
        if len(node.inputs) > 2 and node.inputs[2]:
            c = facts.shape(node.inputs[2])
            if int(np.prod(c)) not in (1, n) or (c and c[-1] not in (1, n)):
                return "C of shape %s does not broadcast as one bias row of %d" % (c, n)
    elif len(a) not in (2, 3):
        return "A has rank %d (translated for rank 2 or 3)" % len(a)
    return None


def _softmax(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    x = facts.shape(node.inputs[0])
    rank = len(x)
    opset = facts.opsets.get("", 13)
    axis = int(node.attributes.get("axis", -1 if opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    if opset < 13 and axis != rank - 1 and any(d != 1 for d in x[axis + 1:]):
        return "opset %d Softmax over the flattened axes %d.. is not one NNAPI axis" % (opset, axis)
    nn_axis = nhwc_axis(axis) if rank == 4 else axis
    if level < 3 and (rank not in (2, 4) or nn_axis != rank - 1):
        return "Softmax over axis %d of a rank-%d tensor needs SOFTMAX's axis (feature level " \
               ">= 3, have %d)" % (axis, rank, level)
    return None


def _reshape(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    if node.op_type == "Reshape" and facts.const(node.inputs[1]) is None:
        return "shape %r is not a constant" % node.inputs[1]
    if level >= 2:
        return None
    x, y = facts.shape(node.inputs[0]), facts.shape(node.outputs[0])
    for dims, kind in ((x, "input"), (y, "output")):
        if len(dims) == 4 and not is_pure_reshape(dims, (0, 2, 3, 1)):
            return "4-D %s %s is NHWC inside NNAPI: reordering it needs TRANSPOSE (feature " \
                   "level >= 2, have %d)" % (kind, dims, level)
    return None


def _qdq(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    params = facts.dq_params(node)
    if params is None:
        return "scale / zero point must be constant scalars (per-tensor quantization)"
    quant = node.inputs[0] if node.op_type == "DequantizeLinear" else node.outputs[0]
    flt = node.outputs[0] if node.op_type == "DequantizeLinear" else node.inputs[0]
    qt = facts.elem(quant)
    if node.op_type == "DequantizeLinear" and quant in facts.consts \
            and qt in (dtypes.UINT8, dtypes.INT8, dtypes.INT32):
        readers = facts.consumers.get(flt, [])
        if flt in facts.outputs or not readers:
            return "a constant dequantized into a graph output stays on the CPU"
        return None     # folded into its readers' constant weights / bias at translation
    if qt not in QUANT_TYPES:
        return "quantized type %s is not uint8 / int8" % (
            dtypes.lookup(qt).ort_name if qt else "unknown")
    if QUANT_TYPES[qt] > level:
        return "int8 tensors need TENSOR_QUANT8_ASYMM_SIGNED (feature level >= 4, have %d)" % level
    for name in (quant, flt):
        shape = facts.shape(name)
        if shape is None or not 1 <= len(shape) <= 4:
            return "value %r needs a static shape of rank 1..4 (has %s)" % (name, shape)
    if facts.elem(flt) != FLOAT:
        return "float side %r is not float32" % flt
    return None


def _binary(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    y = facts.shape(node.outputs[0])
    for name in node.inputs:
        if facts.const(name) is None and len(facts.shape(name)) < len(y) == 4 \
                and level < 2 and not is_pure_reshape([1] * (4 - len(facts.shape(name)))
                                                      + facts.shape(name), (0, 2, 3, 1)):
            return "broadcasting %r into a 4-D NHWC tensor needs TRANSPOSE (feature level >= 2)" \
                   % name
    return None


def _check_op(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    op = node.op_type
    if op in ("Conv", "FusedConv"):
        return _conv(node, facts, level)
    if op in ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"):
        return _pool(node, facts, level)
    if op in ("Gemm", "FusedGemm", "MatMul", "FusedMatMul"):
        return _gemm(node, facts, level)
    if op in ("Add", "Sub", "Mul", "Div"):
        return _binary(node, facts, level)
    if op == "Softmax":
        return _softmax(node, facts, level)
    if op in RESHAPES:
        return _reshape(node, facts, level)
    if op == "Clip":
        bounds = (list(node.inputs) + ["", ""])[1:3]
        for name in bounds:
            if name and facts.const(name) is None:
                return "Clip bound %r is not a constant" % name
        lo, hi = [facts.const(n) if n else None for n in bounds]
        if facts.opsets.get("", 13) < 11:
            lo, hi = node.attributes.get("min"), node.attributes.get("max")
        for v, name in ((lo, "min"), (hi, "max")):
            if isinstance(v, np.ndarray) and v.size != 1:
                return "Clip %s is not a scalar" % name
        lo = None if lo is None else float(np.asarray(lo).reshape(-1)[0])
        hi = None if hi is None else float(np.asarray(hi).reshape(-1)[0])
        if clip_fuse(lo, hi) is None:
            return "Clip(%s, %s) is not RELU, RELU1 or RELU6" % (lo, hi)
        return None
    if op == "ReduceMean":
        axes = node.attributes.get("axes")
        if facts.opsets.get("", 13) >= 18 and len(node.inputs) > 1 and node.inputs[1]:
            if facts.const(node.inputs[1]) is None:
                return "axes %r is not a constant" % node.inputs[1]
        elif facts.opsets.get("", 13) >= 18 and int(node.attributes.get("noop_with_empty_axes", 0)):
            return "noop_with_empty_axes=1 without axes"
        return None if axes is None or isinstance(axes, list) else "axes %r are not ints" % axes
    if op == "BatchNormalization":
        if len([o for o in node.outputs if o]) > 1 or int(node.attributes.get("training_mode", 0)):
            return "training mode (running statistics outputs) is not inference"
        for k in range(1, 5):
            why = _needs_const(node, facts, k, "parameter")
            if why:
                return why
        return None
    return None


def _check(node: ir.Node, facts: Facts) -> Optional[str]:
    """The record check: the feature level, then the values' types and shapes, then the op's
    own rules (facts.level is the feature level)."""
    key, level = node.op_type, facts.level
    need, nn_ops = OPS[key]
    if need > level:
        return "%s becomes %s, which needs feature level >= %d (have %d)" % (key, nn_ops, need, level)
    if key in ("QuantizeLinear", "DequantizeLinear"):
        return _qdq(node, facts, level)
    skip: Sequence[int] = ()
    if key in ("Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul"):
        skip = (1, 2)      # weights may be DequantizeLinear of int8 constants
    elif key in RESHAPES or key in ("Clip", "ReduceMean"):
        skip = (1, 2)      # shape / axes / bounds: int64 or scalar constants
    elif key == "BatchNormalization":
        skip = (1, 2, 3, 4)
    why = _float_io(node, facts, skip)
    return why or _check_op(node, facts, level)


TABLE = SupportTable("NnapiExecutionProvider", [
    OpSupport(FUSED_DOMAIN if op in fused_ops.FUSED_BASE else "", op, check=_check,
              build=nn_ops, conditional=True)
    for op, (_need, nn_ops) in OPS.items()])


def support_table() -> SupportTable:
    """The NNAPI bridge's op-support records (docs/OPERATORS.md reads them)."""
    return TABLE


def _missing(node: ir.Node) -> str:
    key = node.op_type
    if node.domain not in ("", FUSED_DOMAIN) or key in OPS or \
            (node.domain == FUSED_DOMAIN and not key.startswith("Fused")):
        return "%s (domain %s) has no NNAPI translation" % (key, node.domain or "ai.onnx")
    return "%s has no NNAPI translation; the bridge translates %s" % (key, ", ".join(sorted(OPS)))


def node_reason(node: ir.Node, facts: Facts, level: int) -> Optional[str]:
    """None when the bridge claims `node` at this feature level, else why not."""
    return TABLE.reason(node, None, facts.at_level(level), _missing)


__all__ = ["Facts", "OPS", "TABLE", "node_reason", "support_table", "is_pure_reshape",
           "nhwc_axis", "window",
           "activation_fuse", "clip_fuse"]
