"""Translates a claimed ONNX subgraph into an NNAPI model (model.py).

Layout: every 4-D value is NHWC inside the NNAPI model, at every feature level. 4-D model
inputs and outputs are marked LAYOUT_NHWC (the host transposes them at the subgraph edge),
4-D constants and convolution weights are permuted here, axes of Concat / Softmax / ReduceMean /
Transpose are remapped, and where ONNX element order matters (Reshape, Flatten, Squeeze,
Unsqueeze from or to 4-D) a TRANSPOSE (feature level >= 2) reorders the data, or a RESHAPE when
the permutation keeps element order (C == 1 or H * W == 1).

Quantization: QuantizeLinear becomes QUANTIZE and DequantizeLinear DEQUANTIZE (float values in
between), except the QDQ pattern DequantizeLinear(x) -> Conv / Gemm / MatMul with
DequantizeLinear(int8 / uint8 constant weights) [-> Relu] -> QuantizeLinear, which becomes one
CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED on TENSOR_QUANT8_ASYMM(_SIGNED) operands with the
Q/DQ scales and zero points, an int32 bias of scale inputScale * filterScale and the Relu as fuse
code. Float operations left without readers are dropped at the end.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set

import numpy as np

from onnxedge import dtypes, ir
from onnxedge.errors import EPFail

from . import codes
from .model import IO, LAYOUT_NHWC, LAYOUT_ONNX, NCHW_TO_NHWC, NHWC_TO_NCHW, Model, Operation
from .support import (Facts, activation_fuse, clip_fuse, is_pure_reshape, nhwc_axis, window)

QTYPE = {dtypes.UINT8: codes.TENSOR_QUANT8_ASYMM, dtypes.INT8: codes.TENSOR_QUANT8_ASYMM_SIGNED}


def nn_dims(shape: Sequence[int]) -> List[int]:
    """NNAPI dims of an ONNX shape (4-D becomes NHWC; 0-D becomes [1])."""
    shape = [int(d) for d in shape]
    if len(shape) == 4:
        return [shape[p] for p in NCHW_TO_NHWC]
    return shape or [1]


class Translator:
    """One subgraph -> one NNAPI model."""

    def __init__(self, sub: ir.Graph, facts: Facts, level: int):
        self.sub = sub
        self.facts = facts
        self.level = level
        self.m = Model()
        self.ops: Dict[str, int] = {}        # ONNX value -> operand (4-D ones NHWC)
        self.absorbed: Set[int] = set()      # id() of activation nodes fused into their producer
        self.const_cache: Dict[tuple, int] = {}
        self.outputs = {v.name for v in sub.outputs}
        self.nodes = {id(n) for n in sub.nodes}

    # ------------------------------------------------------------------ operands
    def shape(self, name: str) -> List[int]:
        shape = self.facts.shape(name)
        if shape is None:
            raise EPFail("NNAPI translation: value %r has no static shape" % name)
        return shape

    def new(self, name: str, shape: Sequence[int], type: int = codes.TENSOR_FLOAT32,
            scale: float = 0.0, zero_point: int = 0) -> int:
        """A fresh operand for ONNX value `name` (registered)."""
        idx = self.m.add_operand(type, nn_dims(shape), scale, zero_point)
        if name:
            self.ops[name] = idx
        return idx

    def temp(self, like: int, dims: Sequence[int]) -> int:
        """An intermediate operand of the same type/quantization as operand `like`."""
        o = self.m.operands[like]
        return self.m.add_operand(o.type, dims, o.scale, o.zero_point)

    def const_f32(self, value: np.ndarray, out_rank: int) -> int:
        """A float32 constant shaped to broadcast against an output of rank `out_rank`."""
        arr = np.asarray(value, dtype=np.float32)
        if out_rank == 4:
            arr = arr.reshape((1,) * (4 - arr.ndim) + arr.shape).transpose(NCHW_TO_NHWC)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        key = (arr.shape, arr.tobytes())
        if key not in self.const_cache:
            self.const_cache[key] = self.m.add_operand(codes.TENSOR_FLOAT32, arr.shape,
                                                       value=arr)
        return self.const_cache[key]

    def val(self, name: str, out_rank: Optional[int] = None) -> int:
        """The operand of an ONNX value (constants made on first use, laid out for out_rank)."""
        if name in self.ops and (out_rank is None or out_rank == len(self.shape(name))
                                 or out_rank != 4):
            return self.ops[name]
        if name in self.ops:   # a lower-rank value broadcast into a 4-D NHWC one
            shape = self.shape(name)
            full = [1] * (4 - len(shape)) + shape
            flat = self.temp(self.ops[name], full)
            self.m.add_operation(codes.RESHAPE, [self.ops[name], self.m.int_vector(full)], [flat])
            return self.to_nhwc(flat, full)
        value = self.facts.const(name)
        if value is None:
            raise EPFail("NNAPI translation: value %r is neither computed nor constant" % name)
        rank = len(value.shape) if out_rank is None else out_rank
        return self.const_f32(value, rank)

    # ------------------------------------------------------------------ layout
    def _permute(self, src: int, onnx_shape: Sequence[int], perm: Sequence[int],
                 in_dims: Sequence[int]) -> int:
        out_dims = [in_dims[p] for p in perm]
        dst = self.temp(src, out_dims)
        if is_pure_reshape(in_dims, perm):
            self.m.add_operation(codes.RESHAPE, [src, self.m.int_vector(out_dims)], [dst])
        else:
            self.m.add_operation(codes.TRANSPOSE, [src, self.m.int_vector(perm)], [dst])
        return dst

    def to_onnx_order(self, src: int, onnx_shape: Sequence[int]) -> int:
        """NHWC operand -> an operand holding the same 4-D value in NCHW order."""
        return self._permute(src, onnx_shape, NHWC_TO_NCHW, nn_dims(onnx_shape))

    def to_nhwc(self, src: int, onnx_shape: Sequence[int]) -> int:
        """NCHW-ordered 4-D operand -> NHWC."""
        return self._permute(src, onnx_shape, NCHW_TO_NHWC, list(onnx_shape))

    # ------------------------------------------------------------------ activations
    def fuse_after(self, node: ir.Node) -> tuple:
        """(fuse code, output name): a lone Relu / Clip reader of the output is absorbed."""
        out = node.outputs[0]
        readers = self.facts.consumers.get(out, [])
        if out in self.outputs or len(readers) != 1 or id(readers[0]) not in self.nodes:
            return codes.FUSED_NONE, out
        act = readers[0]
        fuse = None
        if act.op_type == "Relu" and not act.domain:
            fuse = codes.FUSED_RELU
        elif act.op_type == "Clip" and not act.domain:
            fuse = clip_fuse(*self._clip_bounds(act))
        if fuse is None:
            return codes.FUSED_NONE, out
        self.absorbed.add(id(act))
        return fuse, act.outputs[0]

    def _clip_bounds(self, node: ir.Node) -> tuple:
        if self.facts.opsets.get("", 13) < 11:
            return node.attributes.get("min"), node.attributes.get("max")
        out = []
        for k in (1, 2):
            name = node.inputs[k] if len(node.inputs) > k else ""
            v = self.facts.const(name) if name else None
            out.append(None if v is None else float(np.asarray(v).reshape(-1)[0]))
        return tuple(out)

    def _fused_activation(self, node: ir.Node, idx: int, out_name: str, shape: List[int]) -> int:
        """Sigmoid / Tanh activations of fused ops, as their own operation."""
        act = str(node.attributes.get("activation", ""))
        code = {"Sigmoid": codes.LOGISTIC, "Tanh": codes.TANH}[act]
        dst = self.new(out_name, shape)
        self.m.add_operation(code, [idx], [dst])
        return dst

    # ------------------------------------------------------------------ ops
    def conv(self, node: ir.Node) -> None:
        x_name, w_name = node.inputs[0], node.inputs[1]
        x_shape, w = self.shape(x_name), self.facts.const(w_name)
        bias = self.facts.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        z = node.inputs[3] if len(node.inputs) > 3 and node.inputs[3] else ""
        y_shape = self.shape(node.outputs[0])
        fused = activation_fuse(node) if node.domain else codes.FUSED_NONE
        out_name = node.outputs[0]
        if fused == codes.FUSED_NONE and not z:
            fused, out_name = self.fuse_after(node)
        extra_act = fused is None
        conv_fuse = codes.FUSED_NONE if (extra_act or z) else fused
        x = self.val(x_name)
        conv_out = self.new("" if (z or extra_act) else out_name, y_shape)
        self._emit_conv(node, x, x_shape, w, bias, conv_out, conv_fuse, quant=None)
        result = conv_out
        if z:
            add_fuse = codes.FUSED_NONE if extra_act else fused
            dst = self.new("" if extra_act else out_name, y_shape)
            self.m.add_operation(codes.ADD, [result, self.val(z, 4), self.m.int32(add_fuse)], [dst])
            result = dst
        if extra_act:
            self._fused_activation(node, result, out_name, y_shape)

    def _emit_conv(self, node: ir.Node, x: int, x_shape: List[int], w: np.ndarray,
                   bias: Optional[np.ndarray], out: int, fuse: int, quant: Optional[dict]) -> None:
        """CONV_2D or DEPTHWISE_CONV_2D; `quant` = {w_type, w_scale, w_zp, w_q, bias_q} for int8."""
        m_out, _, kh, kw = w.shape
        win = window(node, x_shape, [kh, kw])
        top, left, bottom, right = win["pads"]
        sh, sw = win["strides"]
        dh, dw = win["dilations"]
        group = int(node.attributes.get("group", 1))
        depthwise = group != 1
        if quant is None:
            wdata, wtype, wscale, wzp = w.astype(np.float32), codes.TENSOR_FLOAT32, 0.0, 0
            bdata = np.zeros(m_out, np.float32) if bias is None else \
                np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (m_out,))
            btype, bscale = codes.TENSOR_FLOAT32, 0.0
        else:
            wdata, wtype, wscale, wzp = quant["w_q"], quant["w_type"], quant["w_scale"], quant["w_zp"]
            bdata, btype, bscale = quant["bias_q"], codes.TENSOR_INT32, quant["bias_scale"]
        if depthwise:
            filt = wdata.reshape(m_out, kh, kw).transpose(1, 2, 0).reshape(1, kh, kw, m_out)
        else:
            filt = wdata.transpose(0, 2, 3, 1)
        f = self.m.add_operand(wtype, filt.shape, wscale, wzp, value=filt)
        b = self.m.add_operand(btype, (m_out,), bscale, 0, value=np.ascontiguousarray(bdata))
        ins = [x, f, b] + [self.m.int32(v) for v in (left, right, top, bottom, sw, sh)]
        if depthwise:
            ins.append(self.m.int32(m_out // x_shape[1]))
        ins.append(self.m.int32(fuse))
        if (dh, dw) != (1, 1):
            ins += [self.m.scalar(codes.BOOL, 0), self.m.int32(dw), self.m.int32(dh)]
        self.m.add_operation(codes.DEPTHWISE_CONV_2D if depthwise else codes.CONV_2D, ins, [out])

    def _fc_weights(self, node: ir.Node) -> tuple:
        """(weights [N, K] float, bias [N] float) of a Gemm / MatMul with constant B, C."""
        b = self.facts.const(node.inputs[1]).astype(np.float32)
        c_name = node.inputs[2] if len(node.inputs) > 2 else ""
        c = self.facts.const(c_name) if c_name else None
        if node.op_type in ("Gemm", "FusedGemm"):
            w = b if int(node.attributes.get("transB", 0)) else b.T
            alpha = np.float32(node.attributes.get("alpha", 1.0))
            beta = np.float32(node.attributes.get("beta", 1.0))
            if alpha != 1:
                w = w * alpha
            n = w.shape[0]
            bias = np.zeros(n, np.float32) if c is None else \
                np.broadcast_to(np.asarray(c, np.float32).reshape(-1), (n,)) * beta
        else:
            w = b.T
            n = w.shape[0]
            bias = np.zeros(n, np.float32) if c is None else np.asarray(c, np.float32).reshape(n)
        return np.ascontiguousarray(w, np.float32), np.ascontiguousarray(bias, np.float32)

    def gemm(self, node: ir.Node) -> None:
        w, bias = self._fc_weights(node)
        a_shape, y_shape = self.shape(node.inputs[0]), self.shape(node.outputs[0])
        fused = activation_fuse(node) if node.domain else codes.FUSED_NONE
        out_name = node.outputs[0]
        if fused == codes.FUSED_NONE:
            fused, out_name = self.fuse_after(node)
        extra_act = fused is None
        fc_fuse = codes.FUSED_NONE if extra_act else fused
        x = self.val(node.inputs[0])
        rows = int(np.prod(a_shape[:-1]))
        direct = len(y_shape) == 2 and not extra_act
        fc_out = self.new(out_name if direct else "", [rows, w.shape[0]])
        ins = [x, self.m.add_operand(codes.TENSOR_FLOAT32, w.shape, value=w),
               self.m.add_operand(codes.TENSOR_FLOAT32, bias.shape, value=bias),
               self.m.int32(fc_fuse)]
        self.m.add_operation(codes.FULLY_CONNECTED, ins, [fc_out])
        result = fc_out
        if len(y_shape) != 2:
            dst = self.new("" if extra_act else out_name, y_shape)
            self.m.add_operation(codes.RESHAPE, [result, self.m.int_vector(y_shape)], [dst])
            result = dst
        if extra_act:
            self._fused_activation(node, result, out_name, y_shape)

    def binary(self, node: ir.Node) -> None:
        code = {"Add": codes.ADD, "Sub": codes.SUB, "Mul": codes.MUL, "Div": codes.DIV}[node.op_type]
        y_shape = self.shape(node.outputs[0])
        a, b = self.val(node.inputs[0], len(y_shape)), self.val(node.inputs[1], len(y_shape))
        fuse, out_name = self.fuse_after(node)
        self.m.add_operation(code, [a, b, self.m.int32(fuse)], [self.new(out_name, y_shape)])

    def unary(self, node: ir.Node) -> None:
        if node.op_type == "Clip":
            code = {codes.FUSED_RELU: codes.RELU, codes.FUSED_RELU1: codes.RELU1,
                    codes.FUSED_RELU6: codes.RELU6}[clip_fuse(*self._clip_bounds(node))]
        else:
            code = {"Relu": codes.RELU, "Sigmoid": codes.LOGISTIC, "Tanh": codes.TANH}[node.op_type]
        self.m.add_operation(code, [self.val(node.inputs[0])],
                             [self.new(node.outputs[0], self.shape(node.outputs[0]))])

    def softmax(self, node: ir.Node) -> None:
        shape = self.shape(node.inputs[0])
        rank = len(shape)
        opset = self.facts.opsets.get("", 13)
        axis = int(node.attributes.get("axis", -1 if opset >= 13 else 1))
        axis = axis + rank if axis < 0 else axis
        nn_axis = nhwc_axis(axis) if rank == 4 else axis
        ins = [self.val(node.inputs[0]), self.m.scalar(codes.FLOAT32, 1.0)]
        if nn_axis != rank - 1 or rank not in (2, 4):
            ins.append(self.m.int32(nn_axis))
        self.m.add_operation(codes.SOFTMAX, ins, [self.new(node.outputs[0], shape)])

    def reshape(self, node: ir.Node) -> None:
        x_shape, y_shape = self.shape(node.inputs[0]), self.shape(node.outputs[0])
        src = self.val(node.inputs[0])
        if len(x_shape) == 4:
            src = self.to_onnx_order(src, x_shape)
        if len(y_shape) == 4:
            flat = self.temp(src, y_shape)
            self.m.add_operation(codes.RESHAPE, [src, self.m.int_vector(y_shape)], [flat])
            self.ops[node.outputs[0]] = self.to_nhwc(flat, y_shape)
        else:
            dst = self.temp(src, nn_dims(y_shape))
            self.m.add_operation(codes.RESHAPE, [src, self.m.int_vector(nn_dims(y_shape))], [dst])
            self.ops[node.outputs[0]] = dst

    def transpose(self, node: ir.Node) -> None:
        x_shape = self.shape(node.inputs[0])
        rank = len(x_shape)
        perm = [int(p) for p in node.attributes.get("perm") or range(rank - 1, -1, -1)]
        if rank == 4:
            perm = [NHWC_TO_NCHW[perm[NCHW_TO_NHWC[i]]] for i in range(4)]
        src = self.val(node.inputs[0])
        dst = self.new(node.outputs[0], self.shape(node.outputs[0]))
        self.m.add_operation(codes.TRANSPOSE, [src, self.m.int_vector(perm)], [dst])

    def concat(self, node: ir.Node) -> None:
        y_shape = self.shape(node.outputs[0])
        rank = len(y_shape)
        axis = int(node.attributes.get("axis", 0))
        axis = axis + rank if axis < 0 else axis
        ins = [self.val(n, rank) for n in node.inputs if n]
        ins.append(self.m.int32(nhwc_axis(axis) if rank == 4 else axis))
        self.m.add_operation(codes.CONCATENATION, ins, [self.new(node.outputs[0], y_shape)])

    def pool(self, node: ir.Node) -> None:
        x_shape = self.shape(node.inputs[0])
        code = codes.MAX_POOL_2D if "Max" in node.op_type else codes.AVERAGE_POOL_2D
        if node.op_type.startswith("Global"):
            kh, kw = x_shape[2:]
            pads, strides = [0, 0, 0, 0], [1, 1]
        else:
            kh, kw = [int(k) for k in node.attributes["kernel_shape"]]
            win = window(node, x_shape, [kh, kw])
            pads, strides = win["pads"], win["strides"]
        top, left, bottom, right = pads
        fuse, out_name = self.fuse_after(node)
        ins = [self.val(node.inputs[0])] + [self.m.int32(v) for v in (
            left, right, top, bottom, strides[1], strides[0], kw, kh, fuse)]
        self.m.add_operation(code, ins, [self.new(out_name, self.shape(node.outputs[0]))])

    def reduce_mean(self, node: ir.Node) -> None:
        x_shape, y_shape = self.shape(node.inputs[0]), self.shape(node.outputs[0])
        rank = len(x_shape)
        axes = node.attributes.get("axes")
        if len(node.inputs) > 1 and node.inputs[1]:
            axes = [int(a) for a in self.facts.const(node.inputs[1]).reshape(-1)]
        axes = list(range(rank)) if not axes else [int(a) + rank if a < 0 else int(a) for a in axes]
        keep = int(node.attributes.get("keepdims", 1))
        src = self.val(node.inputs[0])
        if rank == 4:
            kept = [1 if i in axes else d for i, d in enumerate(x_shape)]
            mean = self.new(node.outputs[0] if keep else "", kept)
            self.m.add_operation(codes.MEAN, [src, self.m.int_vector(sorted(
                nhwc_axis(a) for a in axes)), self.m.int32(1)], [mean])
            if not keep:
                ordered = self.to_onnx_order(mean, kept)
                dst = self.new(node.outputs[0], y_shape)
                self.m.add_operation(codes.RESHAPE, [ordered, self.m.int_vector(nn_dims(y_shape))],
                                     [dst])
            return
        self.m.add_operation(codes.MEAN, [src, self.m.int_vector(sorted(axes)), self.m.int32(keep)],
                             [self.new(node.outputs[0], y_shape)])

    def batch_norm(self, node: ir.Node) -> None:
        scale, bias, mean, var = [self.facts.const(n).astype(np.float64) for n in node.inputs[1:5]]
        eps = float(node.attributes.get("epsilon", 1e-5))
        s = scale / np.sqrt(var + eps)
        t = bias - mean * s
        y_shape = self.shape(node.outputs[0])
        tail = (1,) * (len(y_shape) - 2)
        s_op = self.const_f32(s.astype(np.float32).reshape((-1,) + tail), len(y_shape))
        t_op = self.const_f32(t.astype(np.float32).reshape((-1,) + tail), len(y_shape))
        mid = self.new("", y_shape)
        self.m.add_operation(codes.MUL, [self.val(node.inputs[0]), s_op, self.m.int32(0)], [mid])
        fuse, out_name = self.fuse_after(node)
        self.m.add_operation(codes.ADD, [mid, t_op, self.m.int32(fuse)], [self.new(out_name, y_shape)])

    def dequantize(self, node: ir.Node) -> None:
        if node.inputs[0] in self.facts.consts:
            if node.outputs[0] in self.outputs:     # a constant leaving the model
                value = self.facts.const(node.outputs[0])
                src = self.const_f32(value, value.ndim)
                dst = self.new(node.outputs[0], value.shape)
                self.m.add_operation(codes.RESHAPE, [src, self.m.int_vector(nn_dims(value.shape))],
                                     [dst])
            return                                   # readers fold it as a constant
        shape = self.shape(node.outputs[0])
        self.m.add_operation(codes.DEQUANTIZE, [self.val(node.inputs[0])],
                             [self.new(node.outputs[0], shape)])

    def quantize(self, node: ir.Node) -> None:
        scale, zp = self.facts.dq_params(node)
        elem = self.facts.elem(node.outputs[0])
        zero = 0 if zp is None else int(zp.reshape(-1)[0])
        shape = self.shape(node.outputs[0])
        if self.quantized_pattern(node, scale, zero, elem):
            return
        self.m.add_operation(codes.QUANTIZE, [self.val(node.inputs[0])],
                             [self.new(node.outputs[0], shape, QTYPE[elem], scale, zero)])

    # ------------------------------------------------------------------ QDQ pattern
    def _private(self, name: str, reader: ir.Node) -> bool:
        readers = self.facts.consumers.get(name, [])
        return name not in self.outputs and len(readers) == 1 and readers[0] is reader

    def _dq_of(self, name: str) -> Optional[ir.Node]:
        node = self.facts.producer.get(name)
        if node is None or node.op_type != "DequantizeLinear" or node.domain \
                or id(node) not in self.nodes:
            return None
        return node

    def quantized_pattern(self, q: ir.Node, out_scale: float, out_zp: int, out_elem: int) -> bool:
        """Emit DQ -> Conv/Gemm/MatMul [-> Relu] -> Q as one quantized operation, if it is one."""
        f = self.facts
        inner = f.producer.get(q.inputs[0])
        if inner is None or id(inner) not in self.nodes:
            return False
        fuse = codes.FUSED_NONE
        if inner.op_type in ("Relu", "Clip") and not inner.domain:
            fuse = codes.FUSED_RELU if inner.op_type == "Relu" else clip_fuse(*self._clip_bounds(inner))
            act = inner
            inner = f.producer.get(act.inputs[0])
            if fuse is None or inner is None or id(inner) not in self.nodes \
                    or not self._private(act.inputs[0], act):
                return False
        kind = inner.op_type
        if kind not in ("Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul"):
            return False
        if inner.domain:
            own = activation_fuse(inner)
            if own is None or (own != codes.FUSED_NONE and fuse != codes.FUSED_NONE):
                return False
            if len(inner.inputs) > 3 and inner.inputs[3]:
                return False          # FusedConv with a residual input
            fuse = own if own != codes.FUSED_NONE else fuse
        if kind in ("Gemm", "FusedGemm") and (float(inner.attributes.get("alpha", 1.0)) != 1.0
                                              or float(inner.attributes.get("beta", 1.0)) != 1.0):
            return False
        if kind in ("MatMul", "FusedMatMul") and len(self.shape(inner.inputs[0])) != 2:
            return False
        x_name = inner.inputs[0]
        flat = f.producer.get(x_name)
        if kind not in ("Conv", "FusedConv") and flat is not None and id(flat) in self.nodes \
                and flat.op_type in ("Flatten", "Reshape") and not flat.domain \
                and self._private(x_name, inner):
            src = self.shape(flat.inputs[0])   # FULLY_CONNECTED flattens its input itself
            if len(src) == 4 and not is_pure_reshape(nn_dims(src), NHWC_TO_NCHW):
                return False
            x_name = flat.inputs[0]
        xd, wd = self._dq_of(x_name), self._dq_of(inner.inputs[1])
        if xd is None or wd is None or xd.inputs[0] not in self.ops \
                or wd.inputs[0] not in f.consts:
            return False
        x = self.ops[xd.inputs[0]]
        x_op = self.m.operands[x]
        if x_op.type != QTYPE.get(out_elem):
            return False                # NNAPI wants input and output of one quantized type
        w_params = f.dq_params(wd)
        w_q = f.consts[wd.inputs[0]]
        if w_params is None or w_q.dtype not in (np.uint8, np.int8):
            return False
        w_scale, w_zp_arr = w_params
        w_zp = 0 if w_zp_arr is None else int(w_zp_arr.reshape(-1)[0])
        w_int = w_q.astype(np.int32)
        if x_op.type == codes.TENSOR_QUANT8_ASYMM and w_q.dtype == np.int8:
            w_int, w_zp = w_int + 128, w_zp + 128            # same reals, uint8 storage
        elif x_op.type == codes.TENSOR_QUANT8_ASYMM_SIGNED and w_q.dtype == np.uint8:
            w_int, w_zp = w_int - 128, w_zp - 128
        w_data = w_int.astype(codes.NUMPY_DTYPE[x_op.type])
        bias_scale = float(np.float32(x_op.scale) * np.float32(w_scale))
        b_name = inner.inputs[2] if len(inner.inputs) > 2 else ""
        b_float = f.const(b_name) if b_name else None
        y_shape = self.shape(q.outputs[0])
        out = self.new(q.outputs[0], y_shape, x_op.type, out_scale, out_zp)
        if kind in ("Conv", "FusedConv"):
            n_out = w_q.shape[0]
            bias_q = np.zeros(n_out, np.int32) if b_float is None else np.round(
                np.asarray(b_float, np.float64).reshape(-1) / bias_scale).astype(np.int32)
            quant = {"w_q": w_data, "w_type": x_op.type, "w_scale": w_scale, "w_zp": w_zp,
                     "bias_q": bias_q, "bias_scale": bias_scale}
            self._emit_conv(inner, x, self.shape(inner.inputs[0]), w_q, None, out, fuse, quant)
            return True
        trans = kind in ("Gemm", "FusedGemm") and int(inner.attributes.get("transB", 0))
        w_nk = w_data if trans else w_data.T
        n_out = w_nk.shape[0]
        bias_q = np.zeros(n_out, np.int32) if b_float is None else np.round(np.broadcast_to(
            np.asarray(b_float, np.float64).reshape(-1), (n_out,)) / bias_scale).astype(np.int32)
        ins = [x, self.m.add_operand(x_op.type, w_nk.shape, w_scale, w_zp,
                                     value=np.ascontiguousarray(w_nk)),
               self.m.add_operand(codes.TENSOR_INT32, (n_out,), bias_scale, 0, value=bias_q),
               self.m.int32(fuse)]
        self.m.add_operation(codes.FULLY_CONNECTED, ins, [out])
        return True

    # ------------------------------------------------------------------ driver
    def inputs(self) -> None:
        for vi in self.sub.inputs:
            shape = self.shape(vi.name)
            elem = self.facts.elem(vi.name)
            if elem in QTYPE:
                dq = next((n for n in self.facts.consumers.get(vi.name, [])
                           if n.op_type == "DequantizeLinear" and id(n) in self.nodes), None)
                params = self.facts.dq_params(dq) if dq is not None else None
                if params is None:
                    raise EPFail("NNAPI translation: quantized input %r has no DequantizeLinear "
                                 "reader giving its scale" % vi.name)
                zp = 0 if params[1] is None else int(params[1].reshape(-1)[0])
                idx = self.new(vi.name, shape, QTYPE[elem], params[0], zp)
            else:
                idx = self.new(vi.name, shape)
            self.m.inputs.append(IO(idx, vi.name, LAYOUT_NHWC if len(shape) == 4 else LAYOUT_ONNX))

    def run(self) -> Model:
        """The NNAPI model of the subgraph (dead operations removed, validated)."""
        self.inputs()
        table = {"Conv": self.conv, "FusedConv": self.conv, "Gemm": self.gemm,
                 "FusedGemm": self.gemm, "MatMul": self.gemm, "FusedMatMul": self.gemm,
                 "Add": self.binary, "Sub": self.binary, "Mul": self.binary, "Div": self.binary,
                 "Relu": self.unary, "Sigmoid": self.unary, "Tanh": self.unary, "Clip": self.unary,
                 "Softmax": self.softmax, "Reshape": self.reshape, "Flatten": self.reshape,
                 "Squeeze": self.reshape, "Unsqueeze": self.reshape, "Transpose": self.transpose,
                 "Concat": self.concat, "MaxPool": self.pool, "AveragePool": self.pool,
                 "GlobalAveragePool": self.pool, "GlobalMaxPool": self.pool,
                 "ReduceMean": self.reduce_mean, "BatchNormalization": self.batch_norm,
                 "QuantizeLinear": self.quantize, "DequantizeLinear": self.dequantize}
        for node in self.sub.nodes:
            if id(node) in self.absorbed:
                continue
            fn = table.get(node.op_type)
            if fn is None:
                raise EPFail("NNAPI translation: %s is not translatable" % node.describe())
            fn(node)
        for vi in self.sub.outputs:
            if vi.name not in self.ops:
                raise EPFail("NNAPI translation: subgraph output %r was not produced" % vi.name)
            rank = len(self.shape(vi.name))
            self.m.outputs.append(IO(self.ops[vi.name], vi.name,
                                     LAYOUT_NHWC if rank == 4 else LAYOUT_ONNX))
        model = prune(self.m)
        model.validate()
        return model


def prune(model: Model) -> Model:
    """The model without operations nothing reads and without unused operands (renumbered)."""
    live = {io.operand for io in model.outputs}
    kept: List[Operation] = []
    for op in reversed(model.operations):
        if any(o in live for o in op.outputs):
            kept.append(op)
            live.update(op.inputs)
    kept.reverse()
    used = sorted(live | {io.operand for io in model.inputs} |
                  {o for op in kept for o in op.outputs})
    new_index = {old: i for i, old in enumerate(used)}
    out = Model()
    out.operands = [model.operands[i] for i in used]
    out.operations = [Operation(op.code, tuple(new_index[i] for i in op.inputs),
                                tuple(new_index[i] for i in op.outputs)) for op in kept]
    out.inputs = [io._replace(operand=new_index[io.operand]) for io in model.inputs]
    out.outputs = [io._replace(operand=new_index[io.operand]) for io in model.outputs]
    return out


def translate(sub: ir.Graph, facts: Facts, level: int) -> Model:
    """The NNAPI model of a claimed subgraph at a feature level."""
    return Translator(sub, facts, level).run()


def required_level(model: Model) -> int:
    """The lowest feature level that has every operation and operand type the model uses."""
    level = 1
    for op in model.operations:
        level = max(level, codes.OPERATION_LEVEL.get(op.code, 1))
        if op.code == codes.SOFTMAX and len(op.inputs) > 2:
            level = max(level, 3)
        if op.code in (codes.CONV_2D, codes.DEPTHWISE_CONV_2D) and len(op.inputs) > 11:
            level = max(level, 3)
    for o in model.operands:
        level = max(level, codes.OPERAND_LEVEL.get(o.type, 1))
    return level
