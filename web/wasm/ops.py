"""Per-node kernels of the wasm provider: weights packed into wasm memory once, a plan per shape.

`build(node, kernels, consts)` returns an `Op`: `data` names the values the kernel reads from
wasm memory (X, and FusedConv's Z), and `bind(shapes)` gives, for those input shapes, the output
shape and a `run(in_ptrs, out_ptr)` calling the kernel, or None when the kernel does not take
them (the provider then runs the group with the CPU kernels, which raise the errors).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import ir, oxk_program

from . import claims, transport
from .transport import Kernels

Shape = Tuple[int, ...]
Run = Callable[[Sequence[int], int], None]
Bound = Tuple[Shape, Run]


class Op:
    """One claimed node bound to the kernel module (see the module docstring)."""

    def __init__(self, node: ir.Node, kernels: Kernels, data: List[str]):
        self.node = node
        self.kernels = kernels
        self.data = data
        self.what = node.describe()
        self.blocks: List[int] = []     # wasm memory this op owns (weights, plans)
        self._bound: Dict[Tuple[Shape, ...], Optional[Bound]] = {}
        self._plans: Dict[Shape, Optional[Tuple[int, Shape, int]]] = {}   # plan_for's, per input shape

    def keep(self, ptr: int) -> int:
        """Remember a block to free with the op; returns it."""
        self.blocks.append(ptr)
        return ptr

    def bind(self, shapes: Sequence[Shape]) -> Optional[Bound]:
        """(output shape, run) for these input shapes (cached), or None."""
        key = tuple(shapes)
        if key not in self._bound:
            self._bound[key] = self._bind(key)
        return self._bound[key]

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        raise NotImplementedError

    def release(self) -> None:
        """Free the op's wasm memory."""
        for ptr in self.blocks:
            self.kernels.free(ptr)
        self.blocks = []
        self._bound = {}
        self._plans = {}


# ------------------------------------------------------------------------------ Gemm/MatMul

class GemmOp(Op):
    """Gemm / FusedGemm (2-D A) and MatMul / FusedMatMul (A of any rank >= 1) against a packed
    constant B, bias and activation in the kernel's epilogue."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        super().__init__(node, kernels, [node.inputs[0]])
        a, ins = node.attributes, list(node.inputs) + [""] * 3
        self.matmul = node.op_type in ("MatMul", "FusedMatMul")
        tb = 0 if self.matmul else int(a.get("transB", 0))
        alpha = 1.0 if self.matmul else float(a.get("alpha", 1.0))
        w = np.ascontiguousarray(consts[ins[1]], np.float32)
        self.K, self.N = (w.shape[1], w.shape[0]) if tb else w.shape
        bias = None
        if ins[2]:
            beta = 1.0 if self.matmul else float(a.get("beta", 1.0))
            if beta != 0.0:
                bias = (np.float32(beta) * consts[ins[2]].reshape(self.N)).astype(np.float32)
        k = kernels
        raw = k.put(w)
        packed = self.keep(k.alloc(4 * k.call("oxk_pack_b_size", self.N, self.K)))
        rc = k.call("oxk_pack_b", tb, self.N, self.K, raw, w.shape[1], packed)
        k.free(raw)
        k.check(rc, "%s: packing B" % self.what)
        bias_ptr = self.keep(k.put(bias)) if bias is not None else 0
        act, (p0, p1) = claims.activation(node)
        self.plan = self.keep(k.put_struct("oxk_sgemm_plan", (
            0, tb, self.N, self.K, alpha, 0.0, 0, packed, bias_ptr,
            transport.BIAS_COL if bias is not None else transport.BIAS_NONE, claims.ACT[act], p0, p1)))

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        shape = shapes[0]
        if self.matmul:
            if not shape or shape[-1] != self.K:
                return None
            out = shape[:-1] + (self.N,)
        else:
            if len(shape) != 2 or shape[1] != self.K:
                return None
            out = (shape[0], self.N)
        m = int(np.prod(shape[:-1], dtype=np.int64))
        if m == 0 or self.N == 0 or self.K == 0:
            return None
        k, plan, what = self.kernels, self.plan, self.what

        def run(ins: Sequence[int], y: int) -> None:
            rc = k.sgemm_run(plan, m, ins[0], 0, y)
            if rc:
                k.check(rc, what)

        return out, run


# ------------------------------------------------------------------------------------ Conv

def as_2d(w: np.ndarray) -> np.ndarray:
    """A 1-D convolution's weight (O, I, k) as the 2-D kernels take it, (O, I, 1, k)."""
    return w.reshape(w.shape[:2] + (1,) + w.shape[2:]) if w.ndim == 3 else w


class ConvOp(Op):
    """Conv / FusedConv (2-D NCHW, or 1-D NCL run as 2-D with H = 1) with packed constant weights;
    FusedConv's Z (a residual of the output's shape) goes to oxk_conv2d_run_z with the plan that
    has the activation (conv + bias, + Z, then the activation: the program's bits)."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        ins = list(node.inputs) + [""] * 4
        super().__init__(node, kernels, [ins[0]] + ([ins[3]] if ins[3] else []))
        from onnxedge.geometry import auto_pad_mode, spatial_attr
        a = node.attributes
        w = np.ascontiguousarray(consts[ins[1]], np.float32)
        self.nd = w.ndim - 2      # 1: a 1-D convolution (NCL), run as 2-D with H = 1
        self.w = as_2d(w)
        self.group = int(a.get("group", 1))
        self.strides = spatial_attr(node.op_type, "strides", a.get("strides"), self.nd, 1, 1)
        self.dil = spatial_attr(node.op_type, "dilations", a.get("dilations"), self.nd, 1, 1)
        self.auto_pad = auto_pad_mode(node.op_type, a.get("auto_pad", "NOTSET"))
        self.pads = a.get("pads")
        self.ks = a.get("kernel_shape")
        self.act, self.params = claims.activation(node)
        k = kernels
        co, ci, kh, kw = self.w.shape
        self.weight = self.keep(k.put(self.w))
        self.packed = self.keep(k.alloc(4 * k.call("oxk_conv_pack_size", co, ci, kh, kw, self.group)))
        k.check(k.call("oxk_conv_pack", self.weight, co, ci, kh, kw, self.group, self.packed),
                "%s: packing W" % self.what)
        self.bias = self.keep(k.put(consts[ins[2]])) if ins[2] else 0
        self.z = ins[3]
        self._fused: Dict[Shape, Optional[Tuple[int, Shape, int]]] = {}
        self._winograd = 0   # the weights packed for Winograd F(2x2, 3x3), made on first need

    def _path_for(self, strides: Sequence[int], dil: Sequence[int], hw: Sequence[int]) -> Tuple[int, int]:
        """(path, packed weights) for outputs hw: Winograd where oxk_conv_winograd_size takes the
        conv (3x3 stride 1 of group 1 with many channels and outputs), else the auto path."""
        co, ci, kh, kw = self.w.shape
        k = self.kernels
        size = k.call("oxk_conv_winograd_size", co, ci, kh, kw, self.group, strides[0], strides[1],
                      dil[0], dil[1], int(hw[0]), int(hw[1]))
        if not size:
            return transport.CONV_AUTO, self.packed
        if not self._winograd:
            self._winograd = self.keep(k.alloc(4 * size))
            k.check(k.call("oxk_conv_pack_winograd", self.weight, co, ci, self._winograd),
                    "%s: packing W for Winograd" % self.what)
        return transport.CONV_WINOGRAD, self._winograd

    def plan_for(self, x: Shape) -> Optional[Tuple[int, Shape, int]]:
        """(plan pointer, output shape, batch) for inputs of shape `x` (made once per shape; with a
        Z input the plan has no activation: it follows the addition), None when the kernel does
        not take them."""
        x = tuple(int(d) for d in x)
        if x not in self._plans:
            self._plans[x] = self._plan(x, not self.z)
        return self._plans[x]

    def fused_plan_for(self, x: Shape) -> Optional[Tuple[int, Shape, int]]:
        """plan_for's entry of the plan with the activation, which a Z input's oxk_conv2d_run_z
        takes (the same as plan_for's without Z)."""
        x = tuple(int(d) for d in x)
        if not self.z:
            return self.plan_for(x)
        if x not in self._fused:
            self._fused[x] = self._plan(x, True)
        return self._fused[x]

    def release(self) -> None:
        super().release()
        self._fused = {}
        self._winograd = 0

    def _plan(self, x: Shape, fused: bool) -> Optional[Tuple[int, Shape, int]]:
        from onnxedge.geometry import conv_geometry
        co, ci, kh, kw = self.w.shape
        ks = self.w.shape[4 - self.nd:]
        if len(x) != self.nd + 2 or 0 in x or x[1] != ci * self.group or \
                (self.ks and [int(v) for v in self.ks] != list(ks)):
            return None
        beg, end, hw = conv_geometry(self.node.op_type, x[2:], ks, self.strides, self.dil,
                                     self.pads, self.auto_pad)
        if min(hw) <= 0:
            return None
        out = (x[0], co) + tuple(int(v) for v in hw)
        if self.nd == 1:   # H = 1: no padding, stride or dilation along it
            x, hw = x[:2] + (1,) + x[2:], (1, int(hw[0]))
            strides, dil, beg, end = (1,) + tuple(self.strides), (1,) + tuple(self.dil), \
                [0] + list(beg), [0] + list(end)
        else:
            strides, dil = self.strides, self.dil
        p0, p1 = self.params if fused else (0.0, 0.0)
        path, packed = self._path_for(strides, dil, hw)
        plan = self.keep(self.kernels.put_struct("oxk_conv_plan", (
            x[1], x[2], x[3], co, kh, kw, self.group, strides[0], strides[1],
            dil[0], dil[1], beg[0], beg[1], end[0], end[1], int(hw[0]), int(hw[1]),
            claims.ACT[self.act] if fused else 0, path, p0, p1,
            self.weight, packed, self.bias)))
        return plan, out, x[0]

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        ent = self.fused_plan_for(shapes[0])
        if ent is None:
            return None
        plan, out, _ = ent
        if len(shapes) > 1 and tuple(shapes[1]) != out:
            return None   # a Z that broadcasts: the CPU kernel adds it
        k, what = self.kernels, self.what
        n = out[0]

        def run(ins: Sequence[int], y: int) -> None:
            rc = k.conv_run(plan, n, ins[0], y) if len(ins) == 1 else \
                k.call("oxk_conv2d_run_z", plan, n, ins[0], ins[1], y)
            if rc:
                k.check(rc, what)

        return out, run


# ------------------------------------------------------------------------------------ pools

class PoolOp(Op):
    """MaxPool / AveragePool (2-D) through pool plans; the global pools through oxk_global_pool."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        super().__init__(node, kernels, [node.inputs[0]])
        self.kind = transport.MAX if "Max" in node.op_type else transport.AVG

    def plan_for(self, x: Shape) -> Optional[Tuple[int, Shape, int]]:
        """(plan pointer, output shape, N*C) of a windowed pool over inputs of shape `x` (made once
        per shape), None when the kernel does not take them."""
        x = tuple(int(d) for d in x)
        if x not in self._plans:
            self._plans[x] = self._plan(x)
        return self._plans[x]

    def _plan(self, x: Shape) -> Optional[Tuple[int, Shape, int]]:
        if len(x) != 4 or 0 in x or self.node.op_type.startswith("Global"):
            return None
        from onnxedge.geometry import auto_pad_mode, pool_geometry, spatial_attr
        op, a = self.node.op_type, self.node.attributes
        kernel = spatial_attr(op, "kernel_shape", a.get("kernel_shape"), 2, 1, 1)
        strides = spatial_attr(op, "strides", a.get("strides"), 2, 1, 1)
        dil = spatial_attr(op, "dilations", a.get("dilations"), 2, 1, 1)
        beg, end, hw = pool_geometry(op, x[2:], kernel, strides, dil, a.get("pads"),
                                     auto_pad_mode(op, a.get("auto_pad", "NOTSET")),
                                     int(a.get("ceil_mode", 0)))
        if min(hw) <= 0:
            return None
        plan = self.keep(self.kernels.put_struct("oxk_pool_plan", (
            x[2], x[3], self.kind, kernel[0], kernel[1], strides[0], strides[1], dil[0], dil[1],
            beg[0], beg[1], end[0], end[1], int(a.get("count_include_pad", 0)), hw[0], hw[1])))
        return plan, (x[0], x[1], int(hw[0]), int(hw[1])), x[0] * x[1]

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        x = shapes[0]
        k, what, kind = self.kernels, self.what, self.kind
        if 0 in x or len(x) < 3:
            return None
        nc = x[0] * x[1]
        if self.node.op_type.startswith("Global"):
            hw = int(np.prod(x[2:]))

            def run_global(ins: Sequence[int], y: int) -> None:
                rc = k.global_pool(ins[0], nc, hw, kind, y)
                if rc:
                    k.check(rc, what)

            return x[:2] + (1,) * (len(x) - 2), run_global
        ent = self.plan_for(x)
        if ent is None:
            return None
        plan, out, _ = ent

        def run(ins: Sequence[int], y: int) -> None:
            rc = k.pool_run(plan, nc, ins[0], y)
            if rc:
                k.check(rc, what)

        return out, run


class ComputedMatMulOp(Op):
    """MatMul / FusedMatMul whose B is computed at run time: oxk_matmul over the broadcast
    batches (onnxedge.oxk_program.matmul_geometry), the call the program's OXK_OP_MATMUL makes
    (same plan), so node by node and in programs it gives the same bits. FusedMatMul's constant
    bias and activation go to the plan's epilogue."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        super().__init__(node, kernels, [node.inputs[0], node.inputs[1]])
        ins = list(node.inputs) + [""] * 3
        self.bias = consts.get(ins[2]) if ins[2] else None
        self.act, (self.p0, self.p1) = claims.activation(node)

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        from onnxedge import oxk_program
        geo = oxk_program.matmul_geometry(shapes[0], shapes[1])
        if geo is None:
            return None
        m, kk, n, folded, out = geo
        k, what = self.kernels, self.what
        bias = 0
        if self.bias is not None:
            if self.bias.shape != (n,):
                return None
            bias = self.keep(k.put(self.bias))
        plan = self.keep(k.put_struct("oxk_sgemm_plan", (
            0, 0, n, kk, 1.0, 0.0, 0, 0, bias, transport.BIAS_COL if bias else transport.BIAS_NONE,
            claims.ACT[self.act], self.p0, self.p1)))
        args = self.keep(k.put_struct("oxk_matmul_args", (plan,) + tuple(folded)))

        def run(ins: Sequence[int], y: int) -> None:
            rc = k.call("oxk_matmul", args, m, ins[0], ins[1], y)
            if rc:
                k.check(rc, what)

        return tuple(out), run


class AttentionOp(Op):
    """com.onnxedge MultiHeadAttention through oxk_attention (the program's OXK_OP_ATTENTION
    call, with the same arguments: onnxedge.oxk_program.attention_args), a scores scratch block
    per bound shape."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        super().__init__(node, kernels, [n for n in node.inputs[:4] if n])
        self.masked = len(self.data) > 3

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        from onnxedge import oxk_program
        found = oxk_program.attention_args(self.node, shapes[0], shapes[1], shapes[2],
                                           shapes[3] if self.masked else None)
        if found is None:
            return None
        values, scratch = found
        k, what, masked = self.kernels, self.what, self.masked
        args = self.keep(k.put_struct("oxk_attention_args", values))
        work = self.keep(k.alloc(4 * max(1, scratch)))
        out = (values[0], values[2], values[1] * values[5])

        def run(ins: Sequence[int], y: int) -> None:
            rc = k.call("oxk_attention", args, ins[0], ins[1], ins[2], ins[3] if masked else 0, work, y)
            if rc:
                k.check(rc, what)

        return out, run


class ConvTransposeOp(Op):
    """ConvTranspose (2-D, or 1-D run with H = 1) through oxk_conv_transpose2d_run, the weights
    packed once (oxk_convt_pack); the program's OXK_OP_CONVT runs the same plan."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        super().__init__(node, kernels, [node.inputs[0]])
        ins = list(node.inputs) + [""] * 3
        w = np.ascontiguousarray(consts[ins[1]], np.float32)
        self.nd = w.ndim - 2
        self.ks = tuple(w.shape[2:])
        self.w = as_2d(w)
        self.group = int(node.attributes.get("group", 1))
        k = kernels
        c, cog, kh, kw = self.w.shape
        self.weight = self.keep(k.put(self.w))
        self.packed = self.keep(k.alloc(4 * max(1, k.call("oxk_convt_pack_size", c, cog, kh, kw, self.group))))
        k.check(k.call("oxk_convt_pack", self.weight, c, cog, kh, kw, self.group, self.packed),
                "%s: packing W" % self.what)
        self.bias = self.keep(k.put(consts[ins[2]])) if ins[2] else 0

    def plan_for(self, x: Shape) -> Optional[Tuple[int, Shape, int]]:
        """(plan pointer, output shape, batch) for inputs of shape `x` (made once per shape), None
        when the kernel does not take them (negative pads from an output_shape: the CPU kernel)."""
        x = tuple(int(d) for d in x)
        if x not in self._plans:
            self._plans[x] = self._plan(x)
        return self._plans[x]

    def _plan(self, x: Shape) -> Optional[Tuple[int, Shape, int]]:
        from onnxedge.geometry import auto_pad_mode, spatial_attr, transpose_geometry
        op, a, nd = self.node.op_type, self.node.attributes, self.nd
        c, cog, kh, kw = self.w.shape
        ks = a.get("kernel_shape")
        if len(x) != nd + 2 or 0 in x or x[1] != c or (ks and [int(v) for v in ks] != list(self.ks)):
            return None
        strides = spatial_attr(op, "strides", a.get("strides"), nd, 1, 1)
        dil = spatial_attr(op, "dilations", a.get("dilations"), nd, 1, 1)
        opad = spatial_attr(op, "output_padding", a.get("output_padding"), nd, 0, 0)
        beg, hw = transpose_geometry(op, x[2:], self.ks, strides, dil, a.get("pads"),
                                     auto_pad_mode(op, a.get("auto_pad", "NOTSET")), opad,
                                     a.get("output_shape"))
        if min(beg) < 0 or min(hw) <= 0:
            return None
        out = (x[0], cog * self.group) + tuple(int(v) for v in hw)
        if nd == 1:
            x, strides, dil, beg, hw = x[:2] + (1,) + x[2:], (1,) + tuple(strides), \
                (1,) + tuple(dil), (0,) + tuple(beg), (1,) + tuple(hw)
        plan = self.keep(self.kernels.put_struct("oxk_convt_plan", (
            c, x[2], x[3], cog * self.group, kh, kw, self.group, strides[0], strides[1], dil[0], dil[1],
            beg[0], beg[1], int(hw[0]), int(hw[1]), 0, 0.0, 0.0, self.weight, self.packed, self.bias)))
        return plan, out, x[0]

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        ent = self.plan_for(shapes[0])
        if ent is None:
            return None
        plan, out, n = ent
        k, what = self.kernels, self.what

        def run(ins: Sequence[int], y: int) -> None:
            rc = k.call("oxk_conv_transpose2d_run", plan, n, ins[0], y)
            if rc:
                k.check(rc, what)

        return out, run


class NodeProgramOp(Op):
    """An op whose node-by-node run is a one-instruction program of the step's own emitter
    (program.run_node), so a first run and the program runs give the same bits; `bind` gives None
    (the step's buffered node-by-node path does not take it)."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        super().__init__(node, kernels, [])

    def _bind(self, shapes: Tuple[Shape, ...]) -> Optional[Bound]:
        return None

    def node_outputs(self, rec: oxk_program.Record) -> Optional[List[Optional[Tuple[np.dtype, Shape]]]]:
        """(dtype, shape) of each of the node's outputs (None for an absent one) for the inputs
        recorded in `rec`; None when the kernels do not take them."""
        raise NotImplementedError


class RnnOp(NodeProgramOp):
    """LSTM / GRU through oxk_rnn: per direction three GEMM plans (onnxedge.oxk_rnn.weights: the
    projection, R, GRU's Rh), B packed once with oxk_pack_b, written as one contiguous array of
    oxk_sgemm_plan structs; `rnn` (oxk_rnn.RnnPlans) holds their wasm addresses, which the shared
    emitter (oxk_rnn.emit) reads. Several outputs: node by node it runs as a one-node program."""

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        from onnxedge import oxk_rnn
        super().__init__(node, kernels, consts)
        op, ins = node.op_type, list(node.inputs) + [""] * 8
        w, r = consts[ins[1]], consts[ins[2]]
        b = consts[ins[3]] if ins[3] else None
        p = consts[ins[7]] if ins[7] and op == "LSTM" else None
        dirs, _, inp = w.shape
        hid = r.shape[-1]
        lbr = bool(int(node.attributes.get("linear_before_reset", 0))) if op == "GRU" else False
        k = kernels
        rows: List[Tuple[object, ...]] = []
        for per_dir in oxk_rnn.weights(op, w, r, b, lbr):
            for operand in per_dir:
                if operand is None:   # LSTM's third plan: never read
                    rows.append(rows[-1])
                    continue
                mat, bias = operand
                n, kk = mat.shape
                raw = k.put(mat)
                packed = self.keep(k.alloc(4 * max(1, k.call("oxk_pack_b_size", n, kk))))
                rc = k.call("oxk_pack_b", 1, n, kk, raw, kk, packed)
                k.free(raw)
                k.check(rc, "%s: packing weights" % self.what)
                bias_ptr = self.keep(k.put(bias)) if bias is not None else 0
                rows.append((0, 1, n, kk, 1.0, 0.0, 0, packed, bias_ptr,
                             transport.BIAS_COL if bias is not None else transport.BIAS_NONE, 0, 0.0, 0.0))
        plans = self.keep(k.put_structs("oxk_sgemm_plan", rows))
        peep = self.keep(k.put(np.ascontiguousarray(p, np.float32).reshape(dirs, 3 * hid))) \
            if p is not None else 0
        self.rnn = oxk_rnn.RnnPlans(node, plans, peep, inp, hid, dirs, [])

    def node_outputs(self, rec: oxk_program.Record) -> Optional[List[Optional[Tuple[np.dtype, Shape]]]]:
        ins = list(self.node.inputs) + [""] * 8
        x = rec.get(ins[0])
        if x is None or x[0] != np.float32 or self.rnn.check_input(x[1]) or ins[4]:
            return None
        shapes = self.rnn.out_shapes(int(x[1][0]), int(x[1][1]))
        return [(np.dtype(np.float32), s) if name else None
                for name, s in zip(self.node.outputs, shapes)]


class QPlan:
    """A quantized kernel plan in wasm memory, as the shared emitters read it (`addr`)."""

    __slots__ = ("addr",)

    def __init__(self, addr: int):
        self.addr = addr


class _QuantPacker:
    """onnxedge.oxk_quant's packer over wasm memory: the quantized operands and plans of one op
    (owned by it, freed with it), with edge/neon/library.py's signatures."""

    def __init__(self, op: Op):
        self.op, self.k = op, op.kernels

    def _bytes(self, a: np.ndarray) -> int:
        return self.k.put_bytes(np.ascontiguousarray(a).tobytes())

    def _pack(self, fn: str, size: int, m: np.ndarray, zero: np.ndarray, dims: Sequence[int]) -> int:
        from onnxedge.oxk_quant import QT
        k = self.k
        z = np.ascontiguousarray(np.asarray(zero).astype(np.int32).reshape(-1))
        src, zp = self._bytes(m), self._bytes(z)
        out = self.op.keep(k.alloc(max(4, int(size))))
        rc = k.call(fn, src, QT[m.dtype], *dims, zp, int(z.size > 1), out)
        k.free(src)
        k.free(zp)
        k.check(rc, "%s: %s" % (self.op.what, fn))
        return out

    def qpack_rows(self, w: np.ndarray, zero: np.ndarray) -> int:
        rows, kk = w.shape
        return self._pack("oxk_qpack_rows", self.k.call("oxk_qpack_rows_size", rows, kk), w, zero,
                          (rows, kk, kk, 1))

    def qpack_cols(self, b: np.ndarray, zero: np.ndarray, trans_b: bool = False) -> int:
        kk, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
        sk, sn = (1, kk) if trans_b else (n, 1)
        return self._pack("oxk_qpack_cols", self.k.call("oxk_qpack_cols_size", n, kk), b, zero,
                          (n, kk, sk, sn))

    def _tail(self, bias: Optional[np.ndarray], scale: Optional[np.ndarray]) -> Tuple[int, int, int]:
        b = self.op.keep(self._bytes(np.asarray(bias, np.int32))) if bias is not None else 0
        sc = None if scale is None else np.asarray(scale, np.float32).reshape(-1)
        return int(sc is not None and sc.size > 1), b, self.op.keep(self.k.put(sc)) if sc is not None else 0

    def qconv_plan(self, x_shape: Sequence[int], x_type: np.dtype, x_zero: int, packed_w: int, cout: int,
                   kernel: Sequence[int], group: int, strides: Sequence[int], dilations: Sequence[int],
                   pads: Sequence[int], out_hw: Sequence[int], y_type: np.dtype, y_zero: int = 0,
                   bias: Optional[np.ndarray] = None, scale: Optional[np.ndarray] = None,
                   qmin: int = -(1 << 30), qmax: int = 1 << 30) -> QPlan:
        from onnxedge.oxk_quant import QT
        per, b, sc = self._tail(bias, scale)
        return QPlan(self.op.keep(self.k.put_struct("oxk_qconv_plan", tuple(int(v) for v in (
            x_shape[1], x_shape[2], x_shape[3], cout, kernel[0], kernel[1], group, strides[0], strides[1],
            dilations[0], dilations[1], pads[0], pads[1], pads[2], pads[3], out_hw[0], out_hw[1],
            QT[np.dtype(x_type)], x_zero, QT[np.dtype(y_type)], y_zero, qmin, qmax, per)) + (packed_w, b, sc))))

    def qgemm_plan(self, n: int, k: int, packed_b: int, a_type: np.dtype, a_zero: int, y_type: np.dtype,
                   y_zero: int = 0, bias: Optional[np.ndarray] = None, scale: Optional[np.ndarray] = None,
                   qmin: int = -(1 << 30), qmax: int = 1 << 30) -> QPlan:
        from onnxedge.oxk_quant import QT
        per, b, sc = self._tail(bias, scale)
        return QPlan(self.op.keep(self.k.put_struct("oxk_qgemm_plan", tuple(int(v) for v in (
            n, k, QT[np.dtype(a_type)], a_zero, QT[np.dtype(y_type)], y_zero, qmin, qmax, per))
            + (packed_b, b, sc))))


class QuantOp(NodeProgramOp):
    """The quantized ops (onnxedge.oxk_quant: QLinearConv / ConvInteger, QLinearMatMul /
    MatMulInteger / QGemm, Q/DQ, Cast, DynamicQuantizeLinear, QLinearGlobalAveragePool): constant
    weights packed into wasm memory once, plans per shape and dtype; node by node a one-node
    program of the shared emitters (int8 / uint8 / int32 buffers, DynamicQuantizeLinear's three
    outputs). The attributes the emitters read (`qplan`, `qargs`, `qpool`) are set only where the
    kernels take the node's constants."""

    CONV, GEMM = ("QLinearConv", "ConvInteger"), ("QLinearMatMul", "MatMulInteger", "QGemm")

    def __init__(self, node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]):
        from onnxedge import oxk_quant
        super().__init__(node, kernels, consts)
        op = node.op_type
        if op in self.CONV or op in self.GEMM:
            make = oxk_quant.conv_plans if op in self.CONV else oxk_quant.gemm_plans
            q = make(node, _QuantPacker(self), consts)
            if q is not None:
                self.qplan = q
        elif op in ("QuantizeLinear", "DequantizeLinear"):
            p = oxk_quant.qdq_params(node, consts)
            if p is not None:
                self.qargs = (p[2], p[0], p[1])
        elif op == "QLinearGlobalAveragePool":
            params = oxk_quant.qpool_params(node, consts)
            if params is not None:
                self.qpool = params

    def node_outputs(self, rec: oxk_program.Record) -> Optional[List[Optional[Tuple[np.dtype, Shape]]]]:
        from onnxedge.oxk_quant import CAST_FROM, Q8, U8
        x = rec.get(self.node.inputs[0])
        if x is None:
            return None
        dt, shape, op = np.dtype(x[0]), tuple(int(d) for d in x[1]), self.node.op_type
        f32 = np.dtype(np.float32)
        q = getattr(self, "qplan", None)
        if op in self.CONV:
            ent = q[0](shape, dt) if q is not None and dt in Q8 else None
            return None if ent is None else [(q[3], tuple(ent[1]))]
        if op in self.GEMM:
            ok = q is not None and dt in Q8 and shape and shape[-1] == q[4] and (op != "QGemm" or len(shape) == 2)
            return [(q[3], shape[:-1] + (q[5],))] if ok else None
        if op in ("QuantizeLinear", "DequantizeLinear"):
            qa = getattr(self, "qargs", None)
            if qa is None or dt != (f32 if op == "QuantizeLinear" else qa[0]):
                return None
            return [(qa[0] if op == "QuantizeLinear" else f32, shape)]
        if op == "Cast":
            return [(f32, shape)] if dt in CAST_FROM and int(self.node.attributes.get("to", 0)) == 1 else None
        if op == "DynamicQuantizeLinear":
            return [(U8, shape), (f32, ()), (U8, ())] if dt == f32 else None
        if op == "QLinearGlobalAveragePool":
            params = getattr(self, "qpool", None)
            if params is None or dt not in Q8 or params(dt, shape) is None:
                return None
            return [(dt, shape[:2] + (1,) * (len(shape) - 2))]
        return None


class ProgramOnlyOp(NodeProgramOp):
    """An op only the compiled program runs (activations, binary ops, Softmax, views): node by node
    it runs as a one-instruction program (its output's shape from the inputs, or from its CPU
    kernel's run: program.shape_from_cpu)."""

    def node_outputs(self, rec: oxk_program.Record) -> Optional[List[Optional[Tuple[np.dtype, Shape]]]]:
        return None


_BUILDERS: Dict[str, Callable[..., Op]] = {
    "Conv": ConvOp, "FusedConv": ConvOp, "Gemm": GemmOp, "FusedGemm": GemmOp, "MatMul": GemmOp,
    "FusedMatMul": GemmOp, "MaxPool": PoolOp, "AveragePool": PoolOp, "GlobalAveragePool": PoolOp,
    "GlobalMaxPool": PoolOp, "ConvTranspose": ConvTransposeOp, "LSTM": RnnOp, "GRU": RnnOp}
_BUILDERS.update({op: QuantOp for op in QuantOp.CONV + QuantOp.GEMM + (
    "QuantizeLinear", "DequantizeLinear", "Cast", "DynamicQuantizeLinear", "QLinearGlobalAveragePool")})


def build(node: ir.Node, kernels: Kernels, consts: Dict[str, np.ndarray]) -> Op:
    """The Op of a claimed node (claims.reason(node) is None)."""
    if node.op_type in ("MatMul", "FusedMatMul") and node.inputs[1] not in consts:
        return ComputedMatMulOp(node, kernels, consts)
    if node.op_type == "MultiHeadAttention":
        return AttentionOp(node, kernels, consts)
    return _BUILDERS.get(node.op_type, ProgramOnlyOp)(node, kernels, consts)


__all__ = ["Op", "GemmOp", "ComputedMatMulOp", "AttentionOp", "ConvOp", "ConvTransposeOp", "NodeProgramOp",
           "PoolOp", "ProgramOnlyOp", "QuantOp", "RnnOp", "as_2d", "build"]
