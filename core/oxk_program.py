"""Compiles a group of nodes into one C-engine program (oxk.h `oxk_program`), for every transport.

The binding's transport-independent half (issue #16): a provider runs a group node by node once per
input-shape signature, recording every value's dtype and shape (`record_values`); `ProgramCache.build`
then turns the nodes into instructions (opcode, argument struct, slots) and plans one arena from the
recorded shapes (a buffer is reused once its last reader has run). Where the structs and constants
go is the transport's business: a `Target` writes them (ctypes natively, wasm memory in the page,
with the layouts the library itself exports: onnxedge.oxk_layout) and the provider runs the
result with one `oxk_program_run` call. Node kinds whose plans come from the provider's per-node
kernels (Gemm, Conv, pools) are emitted by the provider's own emitters; the others (activations,
binary ops, Softmax, global pools, views, MatMul with a computed B) are emitted here.
Pure Python: the page runs it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import fused_ops, ir, oxk_movement
from onnxedge.errors import OnnxEdgeError

F32 = np.dtype(np.float32)
# Integer element types a program's buffers may hold (the quantized ops' operands, issue #17).
QUANTIZED_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32))
MAX_PROGRAMS = 32    # programs kept per group (one per input-shape signature)
PARAM_MAX = 64       # a run-time parameter input (Reshape's shape, Clip's bounds) up to this size
ALIGN = 64           # arena offsets, bytes
INSTR_SLOTS = 8      # operand slots of one instruction (oxk.h OXK_INSTR_SLOTS)
# Inputs read as parameters, not data: their values are baked into the program, so a
# non-constant one is part of the signature.
PARAM_INPUTS = {"Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Clip": (1, 2)}
VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
# Elementwise ops the engine runs as one OXK_OP_ACT (oxk.h OXK_ACT_*; act_name gives the code's name)
ACTS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Elu", "Softplus",
        "Gelu") + fused_ops.MATH
# Program opcodes, slot kinds and binary ops (oxk.h OXK_OP_*, OXK_SLOT_*, OXK_BIN_*).
OP_SGEMM, OP_CONV2D, OP_POOL2D, OP_GLOBAL_POOL, OP_ACT, OP_BINARY, OP_SOFTMAX, OP_LOGSOFTMAX, OP_COPY = \
    range(1, 10)
OP_STRIDED, OP_GATHER, OP_RESAMPLE = 30, 31, 32   # movement.c (onnxedge.oxk_movement's steps)
OP_QCONV, OP_QGEMM, OP_QUANTIZE, OP_DEQUANTIZE, OP_QGLOBAL_POOL, OP_DQL = range(50, 56)   # quantization.c
OP_ATTENTION, OP_MATMUL = 40, 41   # attention.c: com.onnxedge MultiHeadAttention, MatMul of computed B
OP_CONVT = 45   # conv.c: ConvTranspose (oxk_convt_plan)
SLOT_INPUT, SLOT_OUTPUT, SLOT_ARENA, SLOT_CONST = range(4)
BINARY_OPS = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Pow": 4, "Max": 5, "Min": 6}
ACT_CODES = dict(fused_ops.C_CODES)   # activation name -> OXK_ACT_* code
Record = Dict[str, Tuple[np.dtype, Tuple[int, ...], Optional[np.ndarray]]]


class Unsupported(Exception):
    """A node this signature's program cannot take; the message says why."""


class Target:
    """Where one program's structs and constants live (a transport's side of the binding); it
    keeps them until `release`. Addresses are ints (0: NULL)."""

    def struct(self, name: str, values: Sequence[Any]) -> int:
        """Write oxk.h struct `name` with `values` (oxk_layout.FIELDS order); its address."""
        raise NotImplementedError

    def array(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        """Write an array of struct `name`, one element per row; its address."""
        raise NotImplementedError

    def const(self, array: np.ndarray) -> int:
        """The address of a float32 C-contiguous copy (or the array itself) the program reads."""
        raise NotImplementedError

    def release(self) -> None:
        """Give back what the program's structs and constants hold (the program is dropped)."""


class Buf:
    """A buffer of the program (float32, or an integer type of QUANTIZED_DTYPES): an input, a
    constant, an output or arena bytes."""

    def __init__(self, kind: int, nbytes: int, index: int = 0, data: Any = None, born: int = -1,
                 dtype: np.dtype = F32):
        self.kind, self.nbytes, self.index, self.data, self.born = kind, nbytes, index, data, born
        self.dtype = dtype
        self.last = born          # index of the last node reading it
        self.offset = 0
        self.slot = -1


def record_values(env: Dict[str, Any], names: Sequence[str], rec: Record) -> None:
    """Note dtype, shape (and small values: parameters) of every array among `names`."""
    for n in names:
        v = env.get(n) if n else None
        if isinstance(v, np.ndarray) and n not in rec:
            rec[n] = (v.dtype, v.shape, v.copy() if v.size <= PARAM_MAX else None)


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> Optional[Tuple[int, ...]]:
    """numpy's broadcast of two shapes, None when they do not broadcast."""
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + [int(d) for d in a]
    b = [1] * (rank - len(b)) + [int(d) for d in b]
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        return None
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def fold_broadcast(a: Sequence[int], b: Sequence[int], out: Sequence[int]
                   ) -> Optional[Tuple[int, ...]]:
    """oxk_binary_args' (d0, d1, d2, sa0, sa1, sa2, sb0, sb1, sb2) for a op b -> out under numpy
    broadcasting: the output's axes folded into at most 3 runs along which each operand is either
    read or repeated (stride 0); None when more runs are needed."""
    rank = len(out)
    a = [1] * (rank - len(a)) + [int(d) for d in a]
    b = [1] * (rank - len(b)) + [int(d) for d in b]
    runs: List[List[int]] = []   # [size, a present, b present]
    for d, da, db in zip(out, a, b):
        d = int(d)
        if d == 1:
            continue
        key = [int(da == d), int(db == d)]
        if runs and runs[-1][1:] == key:
            runs[-1][0] *= d
        else:
            runs.append([d] + key)
    if len(runs) > 3:
        return None
    runs = [[1, 0, 0]] * (3 - len(runs)) + runs
    dims = [r[0] for r in runs]
    strides: List[int] = []
    for col in (1, 2):
        st, acc = [0, 0, 0], 1
        for i in (2, 1, 0):
            if runs[i][col]:
                st[i] = acc
                acc *= dims[i]
        strides += st
    return tuple(dims) + tuple(strides)


class Builder:
    """Turns the group's nodes into instructions over buffers for one recorded signature."""

    def __init__(self, target: Target, rec: Record, consts: Dict[str, np.ndarray],
                 inputs: Sequence[str], opsets: Dict[str, int]):
        self.target, self.rec, self.consts, self.opsets = target, rec, consts, opsets
        self.bufs: List[Buf] = []
        self.of: Dict[str, Buf] = {}      # value name -> its buffer (views share)
        self.in_names: List[str] = []
        self.instrs: List[Tuple[int, int, int, Tuple[Optional[Buf], ...]]] = []   # slots: INSTR_SLOTS
        self.keep: List[Any] = []          # provider objects the program's pointers lead into
        self.k = 0
        self.group_inputs = set(inputs)

    def struct(self, name: str, *values: Any) -> int:
        """Write an argument struct through the target; its address."""
        return self.target.struct(name, values)

    def shape(self, name: str) -> Tuple[int, ...]:
        """The recorded shape of value `name` (Unsupported when it was not an array)."""
        if name not in self.rec:
            raise Unsupported("value %r was not recorded (not an array)" % name)
        return tuple(int(d) for d in self.rec[name][1])

    def read(self, name: str, dtypes: Sequence[np.dtype] = (F32,)) -> Buf:
        """The buffer of value `name` (an input or constant on first sight), read by the current
        node, which takes the element types `dtypes` (float32 unless it says more)."""
        buf = self.of.get(name)
        if buf is None:
            if name not in self.group_inputs:
                raise Unsupported("value %r has no buffer" % name)
            dtype = self.rec[name][0] if name in self.rec else None
            if dtype not in dtypes:
                raise Unsupported("input %r is %s; the node reads %s here" % (
                    name, dtype, "/".join(str(np.dtype(d)) for d in dtypes)))
            c = self.consts.get(name)
            if c is not None:
                c = np.ascontiguousarray(c, dtype)
                buf = Buf(SLOT_CONST, c.nbytes, data=self.target.const(c), dtype=dtype)
            else:
                buf = Buf(SLOT_INPUT, dtype.itemsize * int(np.prod(self.shape(name))),
                          index=len(self.in_names), dtype=dtype)
                self.in_names.append(name)
            self.bufs.append(buf)
            self.of[name] = buf
        elif buf.dtype not in dtypes:
            raise Unsupported("value %r is %s; the node reads %s here" % (
                name, buf.dtype, "/".join(str(np.dtype(d)) for d in dtypes)))
        buf.last = max(buf.last, self.k)
        return buf

    def write(self, name: str, dtypes: Sequence[np.dtype] = (F32,)) -> Buf:
        """A new arena buffer for the current node's output `name`, of its recorded element type,
        which must be one of `dtypes` (float32 unless the node says more)."""
        dtype = self.rec.get(name, (None,))[0]
        if dtype not in dtypes:
            raise Unsupported("output %r is %s; programs make %s values here"
                              % (name, dtype, "/".join(str(np.dtype(d)) for d in dtypes)))
        buf = Buf(SLOT_ARENA, dtype.itemsize * int(np.prod(self.shape(name))), born=self.k, dtype=dtype)
        self.bufs.append(buf)
        self.of[name] = buf
        return buf

    def temp(self, nbytes: int) -> Buf:
        """An arena buffer that lives only within the current node."""
        buf = Buf(SLOT_ARENA, nbytes, born=self.k)
        self.bufs.append(buf)
        return buf

    def param(self, name: str) -> Optional[np.ndarray]:
        """A parameter input's value (constant, or recorded: it is in the signature)."""
        if not name:
            return None
        if name in self.consts:
            return np.asarray(self.consts[name])
        v = self.rec.get(name, (None, None, None))[2]
        if v is None:
            raise Unsupported("parameter input %r is not a small array" % name)
        return v

    def emit(self, op: int, n: int, args: int, a: Optional[Buf], b: Optional[Buf], y: Buf,
             extra: Sequence[Optional[Buf]] = ()) -> None:
        """Append an instruction: opcode, count, argument struct address (0: none), slots (a, b,
        y, then up to INSTR_SLOTS - 3 `extra` operands in the order the op states)."""
        if len(extra) > INSTR_SLOTS - 3:
            raise Unsupported("an instruction takes at most %d operands" % INSTR_SLOTS)
        slots = (a, b, y) + tuple(extra) + (None,) * (INSTR_SLOTS - 3 - len(extra))
        self.instrs.append((op, n, int(args or 0), slots))


Emitter = Callable[[Builder, ir.Node, Any], None]

# ----------------------------------------------------------------------------- emitters


INT_MAX = 2 ** 31 - 1


def matmul_geometry(a: Sequence[int], b: Sequence[int], trans_b: bool = False
                    ) -> Optional[Tuple[int, int, int, Tuple[int, ...], Tuple[int, ...]]]:
    """(M, K, N, oxk_matmul_args' (d0, d1, d2, sa0, sa1, sa2, sb0, sb1, sb2), output shape) for
    MatMul of A `a` (rank >= 1) by B `b` (rank >= 2; with `trans_b` B holds op(B) transposed: its
    last two axes swapped) under numpy's batch broadcasting; strides are in floats. A B without
    batches (or only 1s) folds A's batches into M: one GEMM. None when the engine does not take it:
    shapes that do not match or broadcast, an empty GEMM, batch axes that do not fold into three
    runs, sizes beyond int32."""
    a, b = [int(d) for d in a], [int(d) for d in b]
    if not a or len(b) < 2:
        return None
    K, N = (b[-1], b[-2]) if trans_b else (b[-2], b[-1])
    vec = len(a) == 1
    a2 = [1] + a if vec else a
    if a2[-1] != K:
        return None
    M = a2[-2]
    abatch, bbatch = a2[:-2], b[:-2]
    batch = broadcast_shape(abatch, bbatch)
    if batch is None:
        return None
    out = tuple(batch) + (() if vec else (M,)) + (N,)
    total = int(np.prod(batch)) if batch else 1
    if M == 0 or K == 0 or N == 0 or total == 0 or \
            max(total * M * K, int(np.prod(bbatch or [1])) * K * N, total * M * N) > INT_MAX:
        return None
    if all(d == 1 for d in bbatch) and int(np.prod(abatch or [1])) == total:
        return total * M, K, N, (1, 1, 1, 0, 0, 0, 0, 0, 0), out
    folded = fold_broadcast(abatch, bbatch, batch)
    if folded is None:
        return None
    dims, sa, sb = folded[:3], folded[3:6], folded[6:]
    return M, K, N, tuple(dims) + tuple(s * M * K for s in sa) + tuple(s * K * N for s in sb), out


def emit_matmul(bd: Builder, node: ir.Node, bias: int = 0, act: str = "", p0: float = 0.0,
                p1: float = 0.0) -> None:
    """MatMul (FusedMatMul: `bias` the address of its constant bias, 0 for none, and the
    activation) with both operands in the program (B computed at run time): one oxk_matmul over
    the broadcast batches, B unpacked."""
    an, bn = node.inputs[0], node.inputs[1]
    geo = matmul_geometry(bd.shape(an), bd.shape(bn))
    if geo is None:
        raise Unsupported("MatMul of shapes %s and %s (the engine takes matching, non-empty shapes "
                          "whose batches broadcast over at most 3 axes)" % (bd.shape(an), bd.shape(bn)))
    M, K, N, folded, _ = geo
    plan = bd.struct("oxk_sgemm_plan", 0, 0, N, K, 1.0, 0.0, 0, 0, bias, 2 if bias else 0,
                     ACT_CODES[act], p0, p1)
    args = bd.struct("oxk_matmul_args", plan, *folded)
    bd.emit(OP_MATMUL, M, args, bd.read(an), bd.read(bn), bd.write(node.outputs[0]))


def emit_computed_matmul(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """MatMul / FusedMatMul whose B is computed at run time (FusedMatMul: a constant bias and the
    activation go to the plan's epilogue)."""
    bias, act, p0, p1 = 0, "", 0.0, 0.0
    if node.op_type == fused_ops.FUSED_MATMUL:
        act, params = fused_ops.activation_name(node), node.attributes.get("activation_params")
        if act not in ACT_CODES:
            raise Unsupported("activation %r has no C epilogue" % act)
        p0, p1 = fused_ops.epilogue_params(act, params)
        bn = node.inputs[2] if len(node.inputs) > 2 else ""
        if bn:
            c = bd.consts.get(bn)
            N = bd.shape(node.inputs[1])[-1]
            if c is None or np.asarray(c).dtype != F32 or np.asarray(c).shape != (N,):
                raise Unsupported("bias %r is not a constant float32 (%d,)" % (bn, N))
            bias = bd.target.const(np.ascontiguousarray(c, F32))
    emit_matmul(bd, node, bias, act, p0, p1)


def emit_gemm_plan(bd: Builder, node: ir.Node, plan: int, K: int, N: int, trans_a: bool) -> None:
    """A Gemm/MatMul whose plan (packed B, bias, activation) the provider bound once: M rows."""
    an = node.inputs[0]
    shape = bd.shape(an)
    if node.op_type in ("Gemm", "FusedGemm"):
        if len(shape) != 2 or shape[0 if trans_a else 1] != K:
            raise Unsupported("A of shape %s does not fit the plan (K=%d)" % (shape, K))
        M = shape[1] if trans_a else shape[0]
    else:
        if not shape or shape[-1] != K:
            raise Unsupported("A of shape %s does not fit the plan (K=%d)" % (shape, K))
        M = int(np.prod(shape)) // K if K else 0
    if M == 0 or K == 0 or N == 0:
        raise Unsupported("an empty GEMM")
    args = bd.struct("oxk_gemm_args", plan, 1, 0, 0, 0)
    bd.emit(OP_SGEMM, M, args, bd.read(an), None, bd.write(node.outputs[0]))


def emit_conv_sum(bd: Builder, node: ir.Node, plain_plan: int, count: int, oshape: Tuple[int, ...],
                  z: str, act: str, p0: float, p1: float, fused_plan: int = 0) -> None:
    """FusedConv with Z. Z of the output's shape and a `fused_plan` (the plan with the activation):
    one CONV2D with Z as operand b (oxk_conv2d_run_z: Z added in the conv's store, then the
    activation). Otherwise (Z broadcasts): conv + bias (no activation, `plain_plan`) into a
    temporary, + Z, then the activation `act` ("" for none) with its epilogue parameters. Both
    round conv + bias, + Z, then the activation: the same bits."""
    if fused_plan and bd.shape(z) == tuple(oshape):
        x = bd.read(node.inputs[0])
        zb = bd.read(z)
        bd.emit(OP_CONV2D, count, fused_plan, x, zb, bd.write(node.outputs[0]))
        return
    folded = fold_broadcast(bd.shape(z), oshape, oshape)
    if folded is None or broadcast_shape(bd.shape(z), oshape) != tuple(oshape):
        raise Unsupported("Z of shape %s does not broadcast to the output %s" % (bd.shape(z), oshape))
    x = bd.read(node.inputs[0])
    t = bd.temp(4 * int(np.prod(oshape)))
    bd.emit(OP_CONV2D, count, plain_plan, x, None, t)
    zb = bd.read(z)
    y = bd.write(node.outputs[0])
    bd.emit(OP_BINARY, 0, bd.struct("oxk_binary_args", BINARY_OPS["Add"], *folded), zb, t, y)
    if act:
        bd.emit(OP_ACT, int(np.prod(oshape)), bd.struct("oxk_epilogue", ACT_CODES[act], p0, p1), y, None, y)


def emit_global_pool(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """GlobalAveragePool / GlobalMaxPool over every axis after the first two."""
    shape = bd.shape(node.inputs[0])
    if len(shape) < 3 or 0 in shape:
        raise Unsupported("global pool of shape %s" % (shape,))
    args = bd.struct("oxk_global_pool_args", 0 if "Max" in node.op_type else 1, int(np.prod(shape[2:])))
    bd.emit(OP_GLOBAL_POOL, shape[0] * shape[1], args, bd.read(node.inputs[0]), None,
            bd.write(node.outputs[0]))


def act_name(node: ir.Node) -> str:
    """The OXK_ACT_* function (fused_ops.Activation name) an ACTS node runs: its op type, but
    GeluTanh for Gelu with approximate="tanh"."""
    if node.op_type == "Gelu" and str(node.attributes.get("approximate", "none")) == "tanh":
        return fused_ops.Activation.GELU_TANH.op
    return node.op_type


def act_params(node: ir.Node, value_of: Callable[[str], Optional[np.ndarray]]
               ) -> Optional[Tuple[float, float]]:
    """The epilogue parameters (p0, p1) of an ACTS node: LeakyRelu's and Elu's alpha,
    HardSigmoid's alpha and beta, Clip's bounds from its attributes or its inputs
    (`value_of(name)`: the value, None when there is none to read); None when a bound is not a
    scalar. The program and the node-by-node path both read them here, so both give the same bits."""
    op, a = node.op_type, node.attributes
    if op == "LeakyRelu":
        return float(a.get("alpha", 0.01)), 0.0
    if op == "Elu":
        return float(a.get("alpha", 1.0)), 0.0
    if op == "HardSigmoid":
        return float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if op != "Clip":
        return 0.0, 0.0
    lo, hi = float(a.get("min", -np.inf)), float(a.get("max", np.inf))
    ins = list(node.inputs) + ["", ""]
    for i in (1, 2):
        v = value_of(ins[i]) if ins[i] else None
        if v is None:
            continue
        if v.size != 1:
            return None
        if i == 1:
            lo = float(v.reshape(()))
        else:
            hi = float(v.reshape(()))
    return min(lo, hi), hi   # min > max: every value is max (as max(min(x, ...)) gives)


def emit_act(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """The ACTS ops (activations and unary math; Clip with scalar bounds, constant or in the
    signature): one OXK_OP_ACT."""
    params = act_params(node, bd.param)
    if params is None:
        raise Unsupported("a Clip bound of %s is not a scalar" % node.describe())
    args = bd.struct("oxk_epilogue", ACT_CODES[act_name(node)], *params)
    x = bd.read(node.inputs[0])
    bd.emit(OP_ACT, int(np.prod(bd.shape(node.inputs[0]))), args, x, None, bd.write(node.outputs[0]))


def emit_binary(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """Add / Sub / Mul / Div / Pow / Max / Min (two inputs) when the broadcast folds into three
    axes."""
    if len(node.inputs) != 2:
        raise Unsupported("%s has %d inputs; the engine takes 2" % (node.op_type, len(node.inputs)))
    sa, sb = bd.shape(node.inputs[0]), bd.shape(node.inputs[1])
    out = bd.shape(node.outputs[0])
    folded = fold_broadcast(sa, sb, out)
    if folded is None:
        raise Unsupported("the broadcast of %s and %s needs more than 3 axes" % (sa, sb))
    args = bd.struct("oxk_binary_args", BINARY_OPS[node.op_type], *folded)
    bd.emit(OP_BINARY, 0, args, bd.read(node.inputs[0]), bd.read(node.inputs[1]), bd.write(node.outputs[0]))


def emit_softmax(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """Softmax / LogSoftmax over the last axis (opset >= 13), or the 2-D flattening before it."""
    shape = bd.shape(node.inputs[0])
    rank = len(shape)
    opset = bd.opsets.get(node.domain, 13)
    axis = int(node.attributes.get("axis", -1 if opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    if opset >= 13 and axis != rank - 1:
        raise Unsupported("axis %d is not the last axis" % axis)
    cols = int(np.prod(shape[axis:])) if rank else 1
    rows = int(np.prod(shape)) // cols if cols else 0
    args = bd.struct("oxk_softmax_args", cols)
    op = OP_LOGSOFTMAX if node.op_type == "LogSoftmax" else OP_SOFTMAX
    bd.emit(op, rows, args, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))


def emit_view(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """Reshape / Flatten / Squeeze / Unsqueeze / Identity: the output shares the input's buffer."""
    for i in PARAM_INPUTS.get(node.op_type, ()):
        if i < len(node.inputs):
            bd.param(node.inputs[i])   # refuses a large computed parameter
    out = node.outputs[0]
    if bd.rec.get(out, (None,))[0] != F32:
        raise Unsupported("output %r is not float32" % out)
    bd.of[out] = bd.read(node.inputs[0])


def attention_geometry(q: Sequence[int], k: Sequence[int], v: Sequence[int],
                       mask: Optional[Sequence[int]], heads: int) -> Optional[Tuple[List[Any], int]]:
    """(oxk_attention_args' fields from batch to v_head_size and the mask strides as one tuple
    (scale and nan_to_zero left out), scratch floats) for com.onnxedge MultiHeadAttention on Q
    `q`, K `k`, V `v` [batch, seq, heads * size] and an additive mask of shape `mask` (None: none)
    broadcast to the scores [batch, heads, q_seq, kv_seq]; None when the engine does not take them
    (another rank, shapes that do not fit, which the CPU kernel reports, empty sizes, int32)."""
    q, k, v = [int(d) for d in q], [int(d) for d in k], [int(d) for d in v]
    if len(q) != 3 or len(k) != 3 or len(v) != 3 or heads < 1:
        return None
    B, Sq, hidden = q
    Skv = k[1]
    if k[0] != B or v[0] != B or v[1] != Skv or k[2] != hidden or hidden % heads or v[2] % heads:
        return None
    if 0 in (B, Sq, Skv, hidden, v[2]):
        return None
    scores = (B, heads, Sq, Skv)
    stride = [0, 0, 0, 0]
    if mask is not None:
        m = [int(d) for d in mask]
        if len(m) > 4 or broadcast_shape(m, scores) != scores:
            return None
        m = [1] * (4 - len(m)) + m
        acc = 1
        for i in (3, 2, 1, 0):
            stride[i] = acc if m[i] == scores[i] and m[i] != 1 else 0
            acc *= m[i]
    scratch = B * heads * Sq * Skv
    if max(scratch, B * Sq * hidden, B * Skv * max(hidden, v[2]), B * Sq * v[2]) > INT_MAX:
        return None
    return [B, heads, Sq, Skv, hidden // heads, v[2] // heads, tuple(stride)], scratch


def attention_attrs(node: ir.Node) -> Tuple[int, float, int]:
    """MultiHeadAttention's (num_heads, scale, nan_to_zero) with their defaults."""
    a = node.attributes
    return int(a.get("num_heads", 1)), float(a.get("scale", 1.0)), int(a.get("nan_to_zero", 0))


def attention_args(node: ir.Node, q: Sequence[int], k: Sequence[int], v: Sequence[int],
                   mask: Optional[Sequence[int]]) -> Optional[Tuple[List[Any], int]]:
    """(oxk_attention_args' values in field order, scratch floats) for `node` on these shapes,
    None when the engine does not take them (see attention_geometry)."""
    heads, scale, nan_to_zero = attention_attrs(node)
    geo = attention_geometry(q, k, v, mask, heads)
    if geo is None:
        return None
    fields, scratch = geo
    return fields[:6] + [scale, nan_to_zero, fields[6]], scratch


def emit_attention(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """com.onnxedge MultiHeadAttention: one OXK_OP_ATTENTION with its scores in a temporary."""
    ins = list(node.inputs) + [""]
    mn = ins[3]
    found = attention_args(node, bd.shape(ins[0]), bd.shape(ins[1]), bd.shape(ins[2]),
                           bd.shape(mn) if mn else None)
    if found is None:
        raise Unsupported("attention on Q %s, K %s, V %s%s (the engine takes 3-D [batch, seq, "
                          "heads * size] operands and a mask that broadcasts to the scores)"
                          % (bd.shape(ins[0]), bd.shape(ins[1]), bd.shape(ins[2]),
                             ", mask %s" % (bd.shape(mn),) if mn else ""))
    values, scratch = found
    args = bd.struct("oxk_attention_args", *values)
    q, k, v = bd.read(ins[0]), bd.read(ins[1]), bd.read(ins[2])
    m = bd.read(mn) if mn else None
    t = bd.temp(4 * scratch)
    bd.emit(OP_ATTENTION, 0, args, q, k, bd.write(node.outputs[0]), (v, m, t))


# ----------------------------------------------------------------- normalizations and reductions
# (issue #17: normalization.c). The argument functions below are shared by the program emitters
# and the providers' node-by-node runs, so both call the C kernels with the same arguments and
# give the same bits; Unsupported says why the engine does not take a node on these shapes.

OP_NORM, OP_BATCHNORM, OP_REDUCE = 10, 11, 12   # oxk.h OXK_OP_NORM, _BATCHNORM, _REDUCE
# Reduce op -> OXK_RED_* kind
REDUCE_KINDS = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3, "ReduceL1": 4,
                "ReduceL2": 5, "ReduceSumSquare": 6}
# LayerNormalization (ai.onnx, and com.onnxedge's below opset 17), RMS normalizations, the
# per-channel ones and inference BatchNormalization.
NORM_OPS = ("LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
            "InstanceNormalization", "GroupNormalization", "BatchNormalization")
PARAM_INPUTS.update({op: (1,) for op in REDUCE_KINDS})   # opset 13/18: axes as an input


def _strip_ones(shape: Sequence[int]) -> Tuple[int, ...]:
    shape = [int(d) for d in shape]
    while shape and shape[0] == 1:
        shape = shape[1:]
    return tuple(shape)


def _extra_outputs(node: ir.Node) -> bool:
    return any(node.outputs[1:])


def norm_args(node: ir.Node, shape: Sequence[int], params: Sequence[Optional[Sequence[int]]]
              ) -> Tuple[int, Tuple[Any, ...]]:
    """(rows, oxk_norm_args values) of a LayerNormalization / SimplifiedLayerNormalization /
    RMSNormalization / InstanceNormalization / GroupNormalization on input `shape` with scale and
    bias of shapes `params` (None: absent); Unsupported with the reason otherwise."""
    op, a = node.op_type, node.attributes
    shape = tuple(int(d) for d in shape)
    rank = len(shape)
    eps = float(a.get("epsilon", 1e-5))
    if _extra_outputs(node):
        raise Unsupported("%s's statistics outputs are not produced by the engine" % op)
    if int(a.get("stash_type", 1)) != 1:
        raise Unsupported("stash_type %d (the engine keeps float32 statistics)" % int(a.get("stash_type")))
    scale = params[0] if params else None
    bias = params[1] if len(params) > 1 else None
    if op in ("LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization"):
        axis = int(a.get("axis", -1))
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise Unsupported("axis %d for an input of rank %d" % (int(a.get("axis", -1)), rank))
        cols = int(np.prod(shape[axis:]))
        if cols == 0:
            raise Unsupported("an empty normalized shape %s" % (shape[axis:],))
        for name, p in (("scale", scale), ("bias", bias)):
            if p is not None and _strip_ones(p) != _strip_ones(shape[axis:]):
                raise Unsupported("%s of shape %s is not the normalized shape %s"
                                  % (name, tuple(p), shape[axis:]))
        if scale is None:
            raise Unsupported("no scale input")
        rows = int(np.prod(shape[:axis]))
        return rows, (1, cols, 1, int(op != "LayerNormalization"), 0, eps)
    if rank < (3 if op == "InstanceNormalization" else 2):
        raise Unsupported("an input of rank %d" % rank)
    N, C = shape[0], shape[1]
    inner = int(np.prod(shape[2:]))
    groups = C if op == "InstanceNormalization" else int(a.get("num_groups", 0))
    if groups < 1 or C % groups or inner == 0 or C == 0:
        raise Unsupported("%d groups of %d channels of %d values" % (groups, C, inner))
    sizes = [int(np.prod(p)) if p is not None else None for p in (scale, bias)]
    if None in sizes or sizes[0] != sizes[1] or sizes[0] not in (C, groups) \
            or any(len(_strip_ones(p)) > 1 for p in (scale, bias) if p is not None):
        raise Unsupported("scale and bias of shapes %s and %s (the engine takes one value per channel "
                          "or per group)" % (scale, bias))
    per_group = int(sizes[0] == groups and groups != C)
    return N * groups, (groups, C // groups, inner, 0, per_group, eps)


def batchnorm_args(node: ir.Node, shape: Sequence[int], params: Sequence[Optional[Sequence[int]]]
                   ) -> Tuple[int, Tuple[Any, ...]]:
    """(outer, oxk_batchnorm_args values) of an inference BatchNormalization on input `shape`
    with scale, B, mean and var of shapes `params`; Unsupported with the reason otherwise."""
    a = node.attributes
    shape = tuple(int(d) for d in shape)
    if _extra_outputs(node) or int(a.get("training_mode", 0)):
        raise Unsupported("training mode (the engine runs inference BatchNormalization)")
    if not int(a.get("spatial", 1)):
        raise Unsupported("spatial=0 (per-activation statistics)")
    if len(shape) < 2 or shape[1] == 0:
        raise Unsupported("an input of shape %s" % (shape,))
    C = shape[1]
    if len(params) != 4 or any(p is None or tuple(int(d) for d in p) != (C,) for p in params):
        raise Unsupported("scale, B, mean and var of shapes %s (the engine takes (%d,) each)"
                          % ([None if p is None else tuple(p) for p in params], C))
    return shape[0], (C, int(np.prod(shape[2:])), float(a.get("epsilon", 1e-5)))


def reduce_args(node: ir.Node, shape: Sequence[int], axes: Optional[Sequence[int]]
                ) -> Optional[Tuple[int, Tuple[int, int, int], Tuple[int, ...]]]:
    """(outer, oxk_reduce_args values, output shape) of a Reduce* op over input `shape`; `axes`
    are the attribute's or the input's (None or empty: none given). None: the op is the identity
    (empty axes with noop_with_empty_axes). Unsupported when the reduced axes (size-1 axes aside)
    are not one contiguous run, or an axis is out of range."""
    a = node.attributes
    shape = tuple(int(d) for d in shape)
    rank = len(shape)
    if axes is None or len(axes) == 0:
        if int(a.get("noop_with_empty_axes", 0)):
            return None
        red = set(range(rank))
    else:
        red = set()
        for ax in axes:
            ax = int(ax)
            if not -rank <= ax < rank:
                raise Unsupported("axis %d for an input of rank %d" % (ax, rank))
            red.add(ax + rank if ax < 0 else ax)
    kept = [i for i in range(rank) if shape[i] != 1]
    runs = [i for i in kept if i in red]
    if runs and any(i not in red for i in kept if runs[0] < i < runs[-1]):
        raise Unsupported("axes %s of shape %s are not one contiguous run" % (sorted(red), shape))
    if runs:
        outer = int(np.prod([shape[i] for i in kept if i < runs[0]]))
        r = int(np.prod([shape[i] for i in runs]))
        inner = int(np.prod([shape[i] for i in kept if i > runs[-1]]))
    else:
        outer, r, inner = int(np.prod(shape)), 1, 1
    if max(outer * max(inner, 1), r * max(inner, 1)) > 2 ** 31 - 1:
        raise Unsupported("sizes beyond int32")
    keep = int(a.get("keepdims", 1))
    out = tuple(1 if i in red else d for i, d in enumerate(shape) if keep or i not in red)
    return outer, (REDUCE_KINDS[node.op_type], r, inner), out


def reduce_axes(node: ir.Node, value_of: Callable[[str], Optional[np.ndarray]]) -> Optional[List[int]]:
    """A Reduce* node's axes: its `axes` input's value (value_of(name)), else its attribute; None
    when neither is given."""
    if len(node.inputs) > 1 and node.inputs[1]:
        v = value_of(node.inputs[1])
        if v is None:
            raise Unsupported("the axes input %r is not known" % node.inputs[1])
        return [int(x) for x in np.asarray(v).reshape(-1)]
    axes = node.attributes.get("axes")
    return None if axes is None else [int(x) for x in axes]


def _input(node: ir.Node, i: int) -> str:
    return node.inputs[i] if len(node.inputs) > i else ""


def emit_norm(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """The normalizations (NORM_OPS): one OXK_OP_NORM (OXK_OP_BATCHNORM) instruction; scale, bias
    (and BatchNormalization's statistics) are operands, constant or computed."""
    xn = node.inputs[0]
    shape = bd.shape(xn)
    if node.op_type == "BatchNormalization":
        names = [_input(node, i) for i in range(1, 5)]
        outer, values = batchnorm_args(node, shape, [bd.shape(n) if n else None for n in names])
        bufs = [bd.read(n) for n in names]
        bd.emit(OP_BATCHNORM, outer, bd.struct("oxk_batchnorm_args", *values), bd.read(xn), bufs[0],
                bd.write(node.outputs[0]), bufs[1:])
        return
    names = [_input(node, 1), "" if node.op_type in ("SimplifiedLayerNormalization", "RMSNormalization")
             else _input(node, 2)]
    rows, values = norm_args(node, shape, [bd.shape(n) if n else None for n in names])
    bufs = [bd.read(n) if n else None for n in names]
    bd.emit(OP_NORM, rows, bd.struct("oxk_norm_args", *values), bd.read(xn), bufs[0],
            bd.write(node.outputs[0]), bufs[1:])


def emit_reduce(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """ReduceSum / Mean / Max / Min / L1 / L2 / SumSquare over one contiguous run of axes."""
    xn = node.inputs[0]
    found = reduce_args(node, bd.shape(xn), reduce_axes(node, bd.param))
    if found is None:   # noop_with_empty_axes: the output is the input
        emit_view(bd, node)
        return
    outer, values, _ = found
    bd.emit(OP_REDUCE, outer, bd.struct("oxk_reduce_args", *values), bd.read(xn), None,
            bd.write(node.outputs[0]))


def norm_op_reason(node: ir.Node, facts: Any, engine: str) -> Optional[str]:
    """Why a program cannot take normalization or reduction `node` as the graph declares it (None:
    it can; the shapes met at run time decide the rest, node by node on the CPU kernel when the
    engine does not take them)."""
    op = node.op_type
    bad = _not_float(facts, [n for n in node.inputs[:1 if op in REDUCE_KINDS else 5] if n], engine)
    if bad:
        return bad
    if op in REDUCE_KINDS:
        shape = facts.shape(node.inputs[0])
        axes: Optional[List[int]] = None
        if len(node.inputs) > 1 and node.inputs[1]:
            c = facts.const(node.inputs[1])
            if c is None:
                return None   # a computed axes input is part of the program's signature
            axes = [int(v) for v in np.asarray(c).reshape(-1)]
        elif node.attributes.get("axes") is not None:
            axes = [int(v) for v in node.attributes["axes"]]
        if _known(shape):
            try:
                reduce_args(node, shape, axes)
            except Unsupported as e:
                return "%s; %s reduces one contiguous run of axes" % (e, engine)
        return None
    if _extra_outputs(node):
        return "%s's statistics outputs (or training outputs) are used; %s computes output 0 only" \
            % (op, engine)
    if int(node.attributes.get("stash_type", 1)) != 1:
        return "stash_type %d; %s keeps float32 statistics" % (int(node.attributes["stash_type"]), engine)
    if op == "BatchNormalization" and (int(node.attributes.get("training_mode", 0))
                                       or not int(node.attributes.get("spatial", 1))):
        return "training-mode or per-activation BatchNormalization; %s runs inference" % engine
    return None


PARAM_INPUTS.update(oxk_movement.PARAM_INPUTS)


def emit_movement(bd: Builder, node: ir.Node, run: Any = None) -> None:
    """Transpose, Concat, Slice, Split, Pad, Gather, Expand, Tile, DepthToSpace, SpaceToDepth and
    Resize: the steps of onnxedge.oxk_movement's plan as strided copies, gathers and resamplings
    (a fill reads a one-value constant; index and weight tables are constants of the program)."""
    names = [node.inputs[i] for i in oxk_movement.data_inputs(node)]
    param = lambda i: bd.param(node.inputs[i]) if i < len(node.inputs) else None   # noqa: E731
    index = None   # Gather's indices when they are read at run time
    if node.op_type == "Gather":
        if node.inputs[1] not in bd.consts:
            index = node.inputs[1]
        param = lambda i: bd.consts.get(node.inputs[i])   # noqa: E731  (never baked from a record)
    try:
        plan = oxk_movement.plan(node, [bd.shape(n) for n in names + ([index] if index else [])], param,
                                 bd.opsets.get(node.domain, 13))
    except oxk_movement.Refused as e:
        raise Unsupported(str(e))
    for name, shape in zip(node.outputs, plan.out_shapes):
        if name and bd.shape(name) != shape:
            raise Unsupported("planned output %s differs from the recorded %s" % (shape, bd.shape(name)))
    ins = [bd.read(n) for n in names]
    idx = bd.read(index, (np.dtype(np.int32), np.dtype(np.int64))) if index else None
    outs = [bd.write(n) if n else bd.temp(4 * int(np.prod(s))) for n, s in zip(node.outputs, plan.out_shapes)]

    def const(array: np.ndarray) -> Buf:
        buf = Buf(SLOT_CONST, array.nbytes, data=bd.target.const(array))
        bd.bufs.append(buf)
        return buf

    def table(array: np.ndarray) -> int:   # an int32 table travels as float32 bits (targets copy bits)
        return bd.target.const(np.ascontiguousarray(array).view(F32))

    for st in plan.steps:
        y = outs[st.dst]
        if st.kind == "fill":
            bd.emit(OP_STRIDED, 0, bd.struct("oxk_copy_args", *st.args),
                    const(np.array([st.value], F32)), None, y)
        elif st.kind == "copy":
            bd.emit(OP_STRIDED, 0, bd.struct("oxk_copy_args", *st.args),
                    outs[-1 - st.src] if st.src < 0 else ins[st.src], None, y)
        elif st.kind == "gather":
            if st.tables:
                bd.emit(OP_GATHER, 0, bd.struct("oxk_gather_args", *st.args, 0, table(st.tables[0])),
                        ins[st.src], None, y)
            else:
                assert idx is not None
                bd.emit(OP_GATHER, 0, bd.struct("oxk_gather_args", *st.args, int(idx.dtype.itemsize == 8), 0),
                        ins[st.src], idx, y)
        else:
            iy, wy, ix, wx = st.tables
            args = bd.struct("oxk_resample_args", *st.args, table(iy), bd.target.const(wy), table(ix),
                             bd.target.const(wx))
            bd.emit(OP_RESAMPLE, 0, args, ins[st.src], None, y)


# The emitters of ops whose instructions need nothing of the provider's per-node kernels.
EMIT: Dict[str, Emitter] = {"GlobalAveragePool": emit_global_pool, "GlobalMaxPool": emit_global_pool,
                            "Add": emit_binary, "Sub": emit_binary, "Mul": emit_binary, "Div": emit_binary,
                            "Pow": emit_binary, "Max": emit_binary, "Min": emit_binary,
                            "Softmax": emit_softmax, "LogSoftmax": emit_softmax,
                            fused_ops.MULTI_HEAD_ATTENTION: emit_attention}
EMIT.update({op: emit_act for op in ACTS})
EMIT.update({op: emit_view for op in VIEWS})
EMIT.update({op: emit_norm for op in NORM_OPS})
EMIT.update({op: emit_reduce for op in REDUCE_KINDS})
EMIT.update({op: emit_movement for op in oxk_movement.OPS})


# ----------------------------------------------------------------------------- claims
# Which nodes of the program-only ops (no per-node kernel: activations, binary ops, Softmax,
# views) a program takes, for any provider; `engine` names it in the reasons.

def _not_float(facts: Any, names: Sequence[str], engine: str) -> Optional[str]:
    for n in names:
        et = facts.elem_type(n) if n else 0
        if et not in (0, 1):
            return "input %r is not float32 (ONNX element type %d); %s programs hold float32 values" \
                % (n, et, engine)
    return None


def _known(shape: Any) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) for d in shape)


def program_op_reason(node: ir.Node, facts: Any, engine: str) -> Optional[str]:
    """Why a program cannot take program-only op `node` as the graph declares it (None: it can);
    `facts` is a providers.support.Facts (or NoFacts)."""
    op = node.op_type
    if op in VIEWS:
        return _not_float(facts, node.inputs[:1], engine)
    if op in ACTS:
        bad = _not_float(facts, node.inputs[:1], engine)
        if op == "Gelu" and str(node.attributes.get("approximate", "none")) not in ("none", "tanh"):
            return "Gelu's approximate is %r; %s has 'none' and 'tanh'" \
                % (node.attributes.get("approximate"), engine)
        if bad or op != "Clip":
            return bad
        for n in node.inputs[1:3]:
            shape = facts.shape(n) if n else None
            if shape is not None and (len(shape) > 1 or (len(shape) == 1 and shape[0] != 1)):
                return "Clip bound %r is not a scalar (shape %s)" % (n, shape)
        return _not_float(facts, node.inputs[1:3], engine)
    if op in BINARY_OPS:
        if len(node.inputs) != 2:
            return "%s with %d inputs; %s takes two" % (op, len(node.inputs), engine)
        bad = _not_float(facts, node.inputs[:2], engine)
        if bad:
            return bad
        sa, sb = facts.shape(node.inputs[0]), facts.shape(node.inputs[1])
        if _known(sa) and _known(sb):
            out = broadcast_shape(sa, sb)
            if out is None:
                return "shapes %s and %s do not broadcast" % (list(sa), list(sb))
            if fold_broadcast(sa, sb, out) is None:
                return "the broadcast of %s and %s needs more than 3 axes; %s folds broadcasts into 3" \
                    % (list(sa), list(sb), engine)
        return None
    if op in ("Softmax", "LogSoftmax"):
        bad = _not_float(facts, node.inputs[:1], engine)
        if bad:
            return bad
        opset = facts.opset_of(node) if hasattr(facts, "opset_of") else 13
        if opset and opset < 13:
            return None
        axis = int(node.attributes.get("axis", -1))
        rank = facts.rank(node.inputs[0])
        if axis == -1 or (rank is not None and axis == rank - 1):
            return None
        if rank is None:
            return "axis %d may not be the last axis (the input's rank is unknown); %s normalizes " \
                "over the last axis" % (axis, engine)
        return "axis %d is not the last axis of a rank-%d input; %s normalizes over the last axis" \
            % (axis, rank, engine)
    if op in NORM_OPS or op in REDUCE_KINDS:
        return norm_op_reason(node, facts, engine)
    if op in oxk_movement.OPS:
        return oxk_movement.reason(node, facts, engine)
    return "%s is not a program-only op" % op


def attention_reason(node: ir.Node, facts: Any, engine: str) -> Optional[str]:
    """Why the engine cannot take com.onnxedge MultiHeadAttention `node` as the graph declares it
    (None: it can; shapes it cannot take at run time go to the CPU kernel, which reports errors)."""
    heads, _, _ = attention_attrs(node)
    if heads < 1:
        return "num_heads %d is not positive" % heads
    bad = _not_float(facts, node.inputs[:4], engine)
    if bad:
        return bad
    for n in node.inputs[:3]:
        rank = facts.rank(n)
        if rank is not None and rank != 3:
            return "input %r has rank %d; %s runs attention on 3-D [batch, seq, heads * size] " \
                "operands" % (n, rank, engine)
    if len(node.inputs) > 3 and node.inputs[3]:
        rank = facts.rank(node.inputs[3])
        if rank is not None and rank > 4:
            return "mask %r has rank %d; it must broadcast to the 4-D scores" % (node.inputs[3], rank)
    return None


def matmul_reason(node: ir.Node, facts: Any, engine: str) -> Optional[str]:
    """Why the engine cannot take MatMul `node` with a computed B as the graph declares it (None:
    it can): float32, A of rank >= 1, B of rank >= 2, batches that broadcast over at most three
    runs where the shapes are known."""
    bad = _not_float(facts, node.inputs[:2], engine)
    if bad:
        return bad
    ra, rb = facts.rank(node.inputs[0]), facts.rank(node.inputs[1])
    if ra == 0:
        return "input %r is a scalar; MatMul needs rank >= 1" % node.inputs[0]
    if rb is not None and rb < 2:
        return "B %r has rank %d; %s runs MatMul with a B of rank >= 2" % (node.inputs[1], rb, engine)
    sa, sb = facts.shape(node.inputs[0]), facts.shape(node.inputs[1])
    if _known(sa) and _known(sb) and 0 not in list(sa) + list(sb) \
            and matmul_geometry(sa, sb) is None:
        return "MatMul of shapes %s and %s: the batches do not broadcast over at most 3 axes, or " \
            "the shapes do not match" % (list(sa), list(sb))
    return None


PROGRAM_ONLY_OPS = ACTS + tuple(BINARY_OPS) + ("Softmax", "LogSoftmax") + VIEWS
PROGRAM_ONLY_OPS += NORM_OPS + tuple(REDUCE_KINDS) + oxk_movement.OPS
# Program-only ops of com.onnxedge (fused_ops.DOMAIN) that follow the same rules: LayerNormalization
# below opset 17.
FUSED_PROGRAM_OPS = ("LayerNormalization", fused_ops.GELU)


# ----------------------------------------------------------------------------- the program

def _aligned(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN or ALIGN


def plan_arena(bufs: List[Buf], n_nodes: int) -> int:
    """Offsets for the arena buffers, in node order: a node's outputs are placed (first fit)
    before the buffers its inputs die with are released. Returns the arena's size in bytes."""
    born: Dict[int, List[Buf]] = {}
    dies: Dict[int, List[Buf]] = {}
    for b in bufs:
        if b.kind == SLOT_ARENA:
            born.setdefault(b.born, []).append(b)
            dies.setdefault(max(b.last, b.born), []).append(b)
    free: List[Tuple[int, int]] = []    # (offset, size), sorted by offset
    top = 0
    for k in range(n_nodes):
        for b in born.get(k, ()):
            need = _aligned(b.nbytes)
            for i, (off, size) in enumerate(free):
                if size >= need:
                    b.offset = off
                    free[i:i + 1] = [(off + need, size - need)] if size > need else []
                    break
            else:
                b.offset, top = top, top + need
        for b in dies.get(k, ()):
            free.append((b.offset, _aligned(b.nbytes)))
            free.sort()
            merged: List[Tuple[int, int]] = []
            for off, size in free:
                if merged and merged[-1][0] + merged[-1][1] == off:
                    merged[-1] = (merged[-1][0], merged[-1][1] + size)
                else:
                    merged.append((off, size))
            free = merged
    return top


class Compiled:
    """One compiled program for one signature: the address of its oxk_program (in the target),
    the arena size, the group inputs it reads (in order), each output's element count and type
    (out_sizes, out_dtypes; in_sizes, in_dtypes for the inputs) and how each
    exported value comes out of it: (name, output index, shape)."""

    def __init__(self, bd: Builder, exported: Sequence[str], n_nodes: int):
        outs: List[Buf] = []
        self.exports: List[Tuple[str, int, Tuple[int, ...]]] = []
        for name in exported:
            buf = bd.of.get(name)
            if buf is None:
                raise Unsupported("exported value %r has no buffer" % name)
            if buf.kind in (SLOT_INPUT, SLOT_CONST):   # a view of a feed or a weight: copied out
                if buf.dtype != F32:
                    raise Unsupported("exported value %r is a view of an %s input" % (name, buf.dtype))
                bd.k = n_nodes
                src = buf
                buf = Buf(SLOT_ARENA, src.nbytes, born=n_nodes)
                bd.bufs.append(buf)
                bd.emit(OP_COPY, src.nbytes // 4, 0, src, None, buf)
                bd.of[name] = buf
            if buf.kind == SLOT_ARENA:
                buf.kind, buf.index = SLOT_OUTPUT, len(outs)
                outs.append(buf)
            self.exports.append((name, buf.index, bd.shape(name)))
        ins = sorted((b for b in bd.bufs if b.kind == SLOT_INPUT), key=lambda b: b.index)
        self.out_sizes = [b.nbytes // b.dtype.itemsize for b in outs]   # elements
        self.out_dtypes = [b.dtype for b in outs]
        self.in_sizes = [b.nbytes // b.dtype.itemsize for b in ins]
        self.in_dtypes = [b.dtype for b in ins]
        self.arena_bytes = plan_arena(bd.bufs, n_nodes + 1)
        used = [b for b in bd.bufs if any(b is s for ins in bd.instrs for s in ins[3])]
        for i, b in enumerate(used):
            b.slot = i
        t = bd.target
        slots = t.array("oxk_slot", [(b.kind, b.index, b.offset, b.data) for b in used])
        instrs = t.array("oxk_instr", [(op, n, args, tuple(-1 if s is None else s.slot for s in sl))
                                       for op, n, args, sl in bd.instrs])
        self.addr = t.struct("oxk_program", (len(bd.instrs), len(used), instrs, slots))
        self.target = t
        self.keep = bd.keep
        self.in_names = list(bd.in_names)
        self.n_instr = len(bd.instrs)


class ProgramCache:
    """The programs of one group, one per input-shape signature (bounded: MAX_PROGRAMS; an evicted
    program's target is released). `emit` maps op types to emitters (EMIT plus the provider's own);
    `new_target()` makes the target one program writes into; `finish(compiled)` wraps a compiled
    program for the provider (what `get` returns)."""

    def __init__(self, nodes: Sequence[ir.Node], runs: Sequence[Any], inputs: Sequence[str],
                 exported: Sequence[str], consts: Dict[str, np.ndarray], opsets: Dict[str, int],
                 emit: Dict[str, Emitter], new_target: Callable[[], Target],
                 finish: Optional[Callable[[Compiled], Any]] = None):
        self.nodes, self.runs = list(nodes), list(runs)
        self.inputs, self.exported, self.consts, self.opsets = list(inputs), list(exported), consts, opsets
        self.emitters, self.new_target = emit, new_target
        self.finish = finish or (lambda c: c)
        params = {n.inputs[i] for n in self.nodes for i in PARAM_INPUTS.get(n.op_type, ())
                  if i < len(n.inputs) and n.inputs[i]}
        self.dynamic = [(name, name in params) for name in self.inputs if name not in consts]
        self.programs: "OrderedDict[Tuple[Any, ...], Any]" = OrderedDict()
        self.refusals: Dict[Tuple[Any, ...], str] = {}
        self.enabled = all(n.op_type in emit for n in self.nodes)
        self._lock = threading.Lock()

    def signature(self, env: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
        """The key of this run's program: dtype and shape of every non-constant input, and the
        values of parameter inputs; None when the group cannot have a program."""
        if not self.enabled:
            return None
        key: List[Any] = []
        for name, is_param in self.dynamic:
            v = env.get(name)
            if type(v) is not np.ndarray:
                return None
            if is_param:
                if v.size > PARAM_MAX:
                    return None
                key.append((v.dtype.str, v.shape, v.tobytes()))
            else:
                key.append((v.dtype.num, v.shape))
        return tuple(key)

    def get(self, sig: Tuple[Any, ...]) -> Any:
        """The program for `sig`, None when the signature has none, False when not built yet."""
        return self.programs.get(sig, False)

    def build(self, sig: Tuple[Any, ...], rec: Record) -> Any:
        """Compile the program for `sig` from one node-by-node run's record; cache it (or the
        refusal: None)."""
        prog: Any = None
        target = self.new_target()
        bd = Builder(target, rec, self.consts, self.inputs, self.opsets)
        try:
            for k, (node, run) in enumerate(zip(self.nodes, self.runs)):
                bd.k = k
                self.emitters[node.op_type](bd, node, run)
            prog = self.finish(Compiled(bd, self.exported, len(self.nodes)))
        except Unsupported as e:
            self.refusals[sig] = "%s: %s" % (self.nodes[bd.k].describe() if bd.k < len(self.nodes)
                                             else "an exported value", e)
        except OnnxEdgeError as e:   # a plan the kernels refuse: node by node it is
            self.refusals[sig] = "%s: %s" % (self.nodes[min(bd.k, len(self.nodes) - 1)].describe(), e)
        if prog is None:
            target.release()
        with self._lock:
            if len(self.programs) >= MAX_PROGRAMS:
                _, old = self.programs.popitem(last=False)
                if old is not None:
                    old.target.release()
            self.programs[sig] = prog
        return prog

    def release(self) -> None:
        """Release every program's target (the group is dropped)."""
        with self._lock:
            for p in self.programs.values():
                if p is not None:
                    p.target.release()
            self.programs.clear()


__all__ = ["PROGRAM_ONLY_OPS", "program_op_reason", "ACTS", "act_name", "act_params", "ALIGN", "BINARY_OPS", "Buf", "Builder",
           "Compiled", "EMIT", "Emitter", "INSTR_SLOTS", "MAX_PROGRAMS", "PARAM_INPUTS", "ProgramCache", "Record",
           "Target", "Unsupported", "VIEWS", "broadcast_shape", "emit_act", "emit_binary",
           "emit_attention", "emit_computed_matmul", "emit_conv_sum", "emit_gemm_plan", "emit_global_pool", "emit_matmul",
           "emit_softmax", "attention_args", "attention_attrs", "attention_geometry", "attention_reason",
           "matmul_geometry", "matmul_reason", "OP_ATTENTION", "OP_MATMUL", "OP_CONVT",
           "emit_view", "fold_broadcast", "plan_arena", "record_values",
           "FUSED_PROGRAM_OPS", "NORM_OPS", "OP_BATCHNORM", "OP_NORM", "OP_REDUCE", "REDUCE_KINDS",
           "batchnorm_args", "emit_norm", "emit_reduce", "norm_args", "norm_op_reason", "reduce_args",
           "reduce_axes"]
