"""Compiles a NEON group into one C program per input-shape signature (issue #16).

The first run with a new signature runs the group node by node (the provider's per-node path) and
records every value's dtype and shape; `ProgramCache.build` then turns the nodes into program
instructions (oxk.h `oxk_instr`: opcode, argument struct, slots), reusing the per-node plans and so
the weights they packed once, and plans one arena from the recorded shapes: a slot is reused once
its last reader has run. Later runs with that signature make one `oxk_program_run` call; only the
group's exported values leave C, written straight into their output arrays. A signature the program
cannot take (a dtype, a broadcast, a plan the kernels refuse) keeps the node-by-node path, and says
why in `ProgramCache.refusals`.
"""
from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import fused_ops, ir
from onnxedge.errors import OnnxEdgeError

from . import library as L
from .library import KernelLibrary, data_address
from .ops import broadcast_shape

F32 = np.dtype(np.float32)
MAX_PROGRAMS = 32    # programs kept per group (one per input-shape signature), as MAX_PLANS
PARAM_MAX = 64       # a run-time parameter input (Reshape's shape, Clip's bounds) up to this size
ALIGN = 64           # arena offsets, bytes
# Inputs read as parameters, not data: their values are baked into the program, so a
# non-constant one is part of the signature.
PARAM_INPUTS = {"Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Clip": (1, 2)}
VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
ACTS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip")
Record = Dict[str, Tuple[np.dtype, Tuple[int, ...], Optional[np.ndarray]]]
_addressof = ctypes.addressof
_char_from_buffer = ctypes.c_char.from_buffer


class Unsupported(Exception):
    """A node this signature's program cannot take; the message says why."""


class _Buf:
    """A float32 buffer of the program: an input, a constant, an output or arena bytes."""

    def __init__(self, kind: int, nbytes: int, index: int = 0, data: Any = None, born: int = -1):
        self.kind, self.nbytes, self.index, self.data, self.born = kind, nbytes, index, data, born
        self.last = born          # index of the last node reading it
        self.offset = 0
        self.slot = -1


def record_values(env: Dict[str, Any], names: Sequence[str], rec: Record) -> None:
    """Note dtype, shape (and small values: parameters) of every array among `names`."""
    for n in names:
        v = env.get(n) if n else None
        if isinstance(v, np.ndarray) and n not in rec:
            rec[n] = (v.dtype, v.shape, v.copy() if v.size <= PARAM_MAX else None)


class _Builder:
    """Turns the group's nodes into instructions over buffers for one recorded signature."""

    def __init__(self, lib: KernelLibrary, rec: Record, consts: Dict[str, np.ndarray],
                 inputs: Sequence[str], opsets: Dict[str, int]):
        self.lib, self.rec, self.consts, self.opsets = lib, rec, consts, opsets
        self.S = lib.structs
        self.bufs: List[_Buf] = []
        self.of: Dict[str, _Buf] = {}      # value name -> its buffer (views share)
        self.in_names: List[str] = []
        self.instrs: List[Tuple[int, int, Any, Tuple[Optional[_Buf], ...]]] = []
        self.keep: List[Any] = []
        self.k = 0
        self.group_inputs = set(inputs)

    # ----------------------------------------------------------------- values
    def shape(self, name: str) -> Tuple[int, ...]:
        if name not in self.rec:
            raise Unsupported("value %r was not recorded (not an array)" % name)
        return tuple(int(d) for d in self.rec[name][1])

    def read(self, name: str) -> _Buf:
        """The buffer of float32 value `name` (an input or constant on first sight), read by the
        current node."""
        buf = self.of.get(name)
        if buf is None:
            if name not in self.group_inputs:
                raise Unsupported("value %r has no buffer" % name)
            dtype = self.rec[name][0] if name in self.rec else None
            if dtype != F32:
                raise Unsupported("input %r is %s; programs move float32 values" % (name, dtype))
            c = self.consts.get(name)
            if c is not None:
                c = np.ascontiguousarray(c, F32)
                self.keep.append(c)
                buf = _Buf(L.SLOT_CONST, c.nbytes, data=c.ctypes.data)
            else:
                buf = _Buf(L.SLOT_INPUT, 4 * int(np.prod(self.shape(name))), index=len(self.in_names))
                self.in_names.append(name)
            self.bufs.append(buf)
            self.of[name] = buf
        buf.last = max(buf.last, self.k)
        return buf

    def write(self, name: str) -> _Buf:
        """A new arena buffer for the current node's float32 output `name`."""
        if self.rec.get(name, (None,))[0] != F32:
            raise Unsupported("output %r is %s; programs make float32 values"
                              % (name, self.rec.get(name, (None,))[0]))
        buf = _Buf(L.SLOT_ARENA, 4 * int(np.prod(self.shape(name))), born=self.k)
        self.bufs.append(buf)
        self.of[name] = buf
        return buf

    def temp(self, nbytes: int) -> _Buf:
        """An arena buffer that lives only within the current node."""
        buf = _Buf(L.SLOT_ARENA, nbytes, born=self.k)
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

    def emit(self, op: int, n: int, args: Any, a: Optional[_Buf], b: Optional[_Buf], y: _Buf) -> None:
        if args is not None:
            self.keep.append(args)
        self.instrs.append((op, n, args, (a, b, y)))


# ----------------------------------------------------------------------------- emitters

def _gemm(bd: _Builder, node: ir.Node, run: Any) -> None:
    plan = getattr(run, "plan", None)
    an = node.inputs[0]
    shape = bd.shape(an)
    if plan is not None:
        K, N, ta = plan.struct.K, plan.struct.N, plan.struct.transA
        if node.op_type in ("Gemm", "FusedGemm"):
            if len(shape) != 2 or shape[0 if ta else 1] != K:
                raise Unsupported("A of shape %s does not fit the plan (K=%d)" % (shape, K))
            M = shape[1] if ta else shape[0]
        else:
            if not shape or shape[-1] != K:
                raise Unsupported("A of shape %s does not fit the plan (K=%d)" % (shape, K))
            M = int(np.prod(shape)) // K if K else 0
        if M == 0 or K == 0 or N == 0:
            raise Unsupported("an empty GEMM")
        args = bd.S["oxk_gemm_args"](plan.addr, 1, 0, 0, 0)
        bd.keep.append(plan)
        bd.emit(L.OP_SGEMM, M, args, bd.read(an), None, bd.write(node.outputs[0]))
        return
    if node.op_type != "MatMul":
        raise Unsupported("%s with a weight computed at run time or a C that is not a per-column "
                          "bias runs node by node" % node.op_type)
    bn = node.inputs[1]
    bshape = bd.shape(bn)
    if len(shape) < 2 or len(bshape) < 2 or shape[-1] != bshape[-2]:
        raise Unsupported("MatMul of shapes %s and %s" % (shape, bshape))
    M, K, N = shape[-2], shape[-1], bshape[-1]
    if len(bshape) == 2:
        batch, M, sb = 1, int(np.prod(shape[:-1])), 0
    elif shape[:-2] == bshape[:-2]:
        batch, sb = int(np.prod(shape[:-2])), K * N
    else:
        raise Unsupported("MatMul's batch dimensions %s and %s differ (broadcast batches run node "
                          "by node)" % (shape[:-2], bshape[:-2]))
    if M == 0 or K == 0 or N == 0:
        raise Unsupported("an empty GEMM")
    plan = bd.lib.sgemm_plan(N, K)
    bd.keep.append(plan)
    args = bd.S["oxk_gemm_args"](plan.addr, batch, M * K, sb, M * N)
    bd.emit(L.OP_SGEMM, M, args, bd.read(node.inputs[0]), bd.read(bn), bd.write(node.outputs[0]))


def _planned(bd: _Builder, node: ir.Node, run: Any, op: int) -> None:
    plan_for = getattr(run, "plan_for", None)
    if plan_for is None:
        raise Unsupported("%s with weights computed at run time runs node by node" % node.op_type)
    shape = bd.shape(node.inputs[0])
    if len(shape) != 4:
        raise Unsupported("input of rank %d" % len(shape))
    ent = plan_for(shape)
    if ent is None:
        raise Unsupported("the kernel has no plan for input shape %s" % (shape,))
    addr, _, oshape, count, plan = ent
    if tuple(oshape) != bd.shape(node.outputs[0]):
        raise Unsupported("planned output %s differs from the recorded %s" % (oshape, bd.shape(node.outputs[0])))
    bd.keep.append(plan)
    z = getattr(run, "sum_input", None)
    if z is None:
        bd.emit(op, count, plan.struct, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))
        return
    _conv_sum(bd, node, run, shape, oshape, count)


def _conv_sum(bd: _Builder, node: ir.Node, run: Any, shape: Tuple[int, ...], oshape: Tuple[int, ...],
              count: int) -> None:
    """FusedConv with Z: conv + bias (no activation) into a temporary, + Z, then the activation."""
    zn, act, params = run.sum_input
    folded = L.fold_broadcast(bd.shape(zn), oshape, oshape)
    if folded is None or broadcast_shape(bd.shape(zn), oshape) != tuple(oshape):
        raise Unsupported("Z of shape %s does not broadcast to the output %s" % (bd.shape(zn), oshape))
    plain = run.plan_for(shape, False)
    bd.keep.append(plain[4])
    x = bd.read(node.inputs[0])
    t = bd.temp(4 * int(np.prod(oshape)))
    bd.emit(L.OP_CONV2D, count, plain[4].struct, x, None, t)
    zb = bd.read(zn)
    y = bd.write(node.outputs[0])
    bd.emit(L.OP_BINARY, 0, bd.S["oxk_binary_args"](L.BINARY_OPS["Add"], *folded), zb, t, y)
    if act:
        p0, p1 = fused_ops.epilogue_params(act, params)
        bd.emit(L.OP_ACT, int(np.prod(oshape)), bd.S["oxk_epilogue"](L.ACT[act], p0, p1), y, None, y)


def _global_pool(bd: _Builder, node: ir.Node, run: Any) -> None:
    shape = bd.shape(node.inputs[0])
    if len(shape) < 3 or 0 in shape:
        raise Unsupported("global pool of shape %s" % (shape,))
    args = bd.S["oxk_global_pool_args"](0 if "Max" in node.op_type else 1, int(np.prod(shape[2:])))
    bd.emit(L.OP_GLOBAL_POOL, shape[0] * shape[1], args, bd.read(node.inputs[0]), None,
            bd.write(node.outputs[0]))


def _act(bd: _Builder, node: ir.Node, run: Any) -> None:
    op, a = node.op_type, node.attributes
    p0 = p1 = 0.0
    if op == "LeakyRelu":
        p0 = float(a.get("alpha", 0.01))
    elif op == "Clip":
        lo, hi = float(a.get("min", -np.inf)), float(a.get("max", np.inf))
        ins = list(node.inputs) + ["", ""]
        for i, name in ((1, ins[1]), (2, ins[2])):
            v = bd.param(name)
            if v is not None:
                if v.size != 1:
                    raise Unsupported("Clip bound %r is not a scalar" % name)
                if i == 1:
                    lo = float(v.reshape(()))
                else:
                    hi = float(v.reshape(()))
        p0, p1 = min(lo, hi), hi   # min > max: every value is max (as max(min(x, ...)) gives)
    args = bd.S["oxk_epilogue"](L.ACT[op], p0, p1)
    x = bd.read(node.inputs[0])
    bd.emit(L.OP_ACT, int(np.prod(bd.shape(node.inputs[0]))), args, x, None, bd.write(node.outputs[0]))


def _binary(bd: _Builder, node: ir.Node, run: Any) -> None:
    sa, sb = bd.shape(node.inputs[0]), bd.shape(node.inputs[1])
    out = bd.shape(node.outputs[0])
    folded = L.fold_broadcast(sa, sb, out)
    if folded is None:
        raise Unsupported("the broadcast of %s and %s needs more than 3 axes" % (sa, sb))
    args = bd.S["oxk_binary_args"](L.BINARY_OPS[node.op_type], *folded)
    bd.emit(L.OP_BINARY, 0, args, bd.read(node.inputs[0]), bd.read(node.inputs[1]), bd.write(node.outputs[0]))


def _softmax(bd: _Builder, node: ir.Node, run: Any) -> None:
    shape = bd.shape(node.inputs[0])
    rank = len(shape)
    opset = bd.opsets.get(node.domain, 13)
    axis = int(node.attributes.get("axis", -1 if opset >= 13 else 1))
    axis = axis + rank if axis < 0 else axis
    if opset >= 13 and axis != rank - 1:
        raise Unsupported("axis %d is not the last axis" % axis)
    cols = int(np.prod(shape[axis:])) if rank else 1
    rows = int(np.prod(shape)) // cols if cols else 0
    args = bd.S["oxk_softmax_args"](cols)
    op = L.OP_LOGSOFTMAX if node.op_type == "LogSoftmax" else L.OP_SOFTMAX
    bd.emit(op, rows, args, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))


def _view(bd: _Builder, node: ir.Node, run: Any) -> None:
    for i in PARAM_INPUTS.get(node.op_type, ()):
        if i < len(node.inputs):
            bd.param(node.inputs[i])   # refuses a large computed parameter
    out = node.outputs[0]
    if bd.rec.get(out, (None,))[0] != F32:
        raise Unsupported("output %r is not float32" % out)
    bd.of[out] = bd.read(node.inputs[0])


EMIT: Dict[str, Callable[[_Builder, ir.Node, Any], None]] = {
    "Gemm": _gemm, "FusedGemm": _gemm, "MatMul": _gemm, "FusedMatMul": _gemm,
    "Conv": lambda bd, n, r: _planned(bd, n, r, L.OP_CONV2D),
    "FusedConv": lambda bd, n, r: _planned(bd, n, r, L.OP_CONV2D),
    "MaxPool": lambda bd, n, r: _planned(bd, n, r, L.OP_POOL2D),
    "AveragePool": lambda bd, n, r: _planned(bd, n, r, L.OP_POOL2D),
    "GlobalAveragePool": _global_pool, "GlobalMaxPool": _global_pool,
    "Add": _binary, "Sub": _binary, "Mul": _binary, "Div": _binary,
    "Softmax": _softmax, "LogSoftmax": _softmax,
}
EMIT.update({op: _act for op in ACTS})
EMIT.update({op: _view for op in VIEWS})


# ----------------------------------------------------------------------------- the program

def _plan_arena(bufs: List[_Buf], n_nodes: int) -> int:
    """Offsets for the arena buffers, in node order: a node's outputs are placed (first fit)
    before the buffers its inputs die with are released. Returns the arena's size in bytes."""
    born: Dict[int, List[_Buf]] = {}
    dies: Dict[int, List[_Buf]] = {}
    for b in bufs:
        if b.kind == L.SLOT_ARENA:
            born.setdefault(b.born, []).append(b)
            dies.setdefault(max(b.last, b.born), []).append(b)
    free: List[Tuple[int, int]] = []    # (offset, size), sorted by offset
    top = 0
    for k in range(n_nodes):
        for b in born.get(k, ()):
            need = (b.nbytes + ALIGN - 1) // ALIGN * ALIGN or ALIGN
            for i, (off, size) in enumerate(free):
                if size >= need:
                    b.offset = off
                    free[i:i + 1] = [(off + need, size - need)] if size > need else []
                    break
            else:
                b.offset, top = top, top + need
        for b in dies.get(k, ()):
            need = (b.nbytes + ALIGN - 1) // ALIGN * ALIGN or ALIGN
            free.append((b.offset, need))
            free.sort()
            merged: List[Tuple[int, int]] = []
            for off, size in free:
                if merged and merged[-1][0] + merged[-1][1] == off:
                    merged[-1] = (merged[-1][0], merged[-1][1] + size)
                else:
                    merged.append((off, size))
            free = merged
    return top


class Program:
    """One compiled program for one signature: its C structs, what they point to, the arena size,
    the group inputs it reads and how each exported value comes out of it."""

    def __init__(self, lib: KernelLibrary, bd: _Builder, exported: Sequence[str], n_nodes: int):
        S = lib.structs
        outs: List[_Buf] = []
        self.exports: List[Tuple[str, int, Tuple[int, ...]]] = []
        for name in exported:
            buf = bd.of.get(name)
            if buf is None:
                raise Unsupported("exported value %r has no buffer" % name)
            if buf.kind in (L.SLOT_INPUT, L.SLOT_CONST):   # a view of a feed or a weight: copied out
                bd.k = n_nodes
                src = buf
                buf = _Buf(L.SLOT_ARENA, src.nbytes, born=n_nodes)
                bd.bufs.append(buf)
                bd.emit(L.OP_COPY, src.nbytes // 4, None, src, None, buf)
                bd.of[name] = buf
            if buf.kind == L.SLOT_ARENA:
                buf.kind, buf.index = L.SLOT_OUTPUT, len(outs)
                outs.append(buf)
            self.exports.append((name, buf.index, bd.shape(name)))
        self.out_shapes = [(b.nbytes // 4,) for b in outs]
        self.arena_bytes = _plan_arena(bd.bufs, n_nodes + 1)
        used = [b for b in bd.bufs if any(b is s for ins in bd.instrs for s in ins[3])]
        for i, b in enumerate(used):
            b.slot = i
        self._slots = (S["oxk_slot"] * max(1, len(used)))(*[
            S["oxk_slot"](b.kind, b.index, b.offset, b.data) for b in used])
        self._instr = (S["oxk_instr"] * max(1, len(bd.instrs)))(*[
            S["oxk_instr"](op, n, None if args is None else _addressof(args),
                           tuple(-1 if s is None else s.slot for s in sl))
            for op, n, args, sl in bd.instrs])
        self._prog = S["oxk_program"](len(bd.instrs), len(used), _addressof(self._instr),
                                      _addressof(self._slots))
        self.addr = _addressof(self._prog)
        self.keep = bd.keep
        self.in_names = list(bd.in_names)
        self.n_instr = len(bd.instrs)
        self.fn = lib.function("oxk_program_run")
        self.lib = lib
        self._tls = threading.local()

    def _arrays(self) -> Tuple[Any, Any]:
        t = self._tls
        arrs = getattr(t, "arrs", None)
        if arrs is None:
            vp = ctypes.c_void_p
            arrs = t.arrs = ((vp * max(1, len(self.in_names)))(), (vp * max(1, len(self.out_shapes)))())
        return arrs

    def run(self, env: Dict[str, Any], arena: int) -> None:
        """Run the program on env's inputs; set the exported values in env."""
        ins, outs = self._arrays()
        held = []
        for i, name in enumerate(self.in_names):
            a, addr = data_address(env[name])
            held.append(a)
            ins[i] = addr
        made = []
        for j, shape in enumerate(self.out_shapes):
            y = np.empty(shape, F32)
            made.append(y)
            outs[j] = _addressof(_char_from_buffer(y)) if y.size else y.__array_interface__["data"][0]
        rc = self.fn(self.addr, ins, outs, arena)
        if rc:
            self.lib.check(rc, "program of %d instructions" % self.n_instr)
        for name, j, shape in self.exports:
            env[name] = made[j].reshape(shape)


class ProgramCache:
    """The programs of one group, one per input-shape signature (bounded, like the plan cache)."""

    def __init__(self, lib: KernelLibrary, nodes: Sequence[ir.Node], runs: Sequence[Any],
                 inputs: Sequence[str], exported: Sequence[str], consts: Dict[str, np.ndarray],
                 opsets: Dict[str, int]):
        self.lib, self.nodes, self.runs = lib, list(nodes), list(runs)
        self.inputs, self.exported, self.consts, self.opsets = list(inputs), list(exported), consts, opsets
        params = {n.inputs[i] for n in self.nodes for i in PARAM_INPUTS.get(n.op_type, ())
                  if i < len(n.inputs) and n.inputs[i]}
        self.dynamic = [(name, name in params) for name in self.inputs if name not in consts]
        self.programs: "OrderedDict[Tuple[Any, ...], Optional[Program]]" = OrderedDict()
        self.refusals: Dict[Tuple[Any, ...], str] = {}
        self.enabled = all(n.op_type in EMIT for n in self.nodes)
        self._lock = threading.Lock()
        self._tls = threading.local()

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

    def build(self, sig: Tuple[Any, ...], rec: Record) -> Optional[Program]:
        """Compile the program for `sig` from one node-by-node run's record; cache it (or the
        refusal: None)."""
        prog: Optional[Program] = None
        bd = _Builder(self.lib, rec, self.consts, self.inputs, self.opsets)
        try:
            for k, (node, run) in enumerate(zip(self.nodes, self.runs)):
                bd.k = k
                EMIT[node.op_type](bd, node, run)
            prog = Program(self.lib, bd, self.exported, len(self.nodes))
        except Unsupported as e:
            self.refusals[sig] = "%s: %s" % (self.nodes[bd.k].describe() if bd.k < len(self.nodes)
                                             else "an exported value", e)
        except OnnxEdgeError as e:   # a plan the kernels refuse: node by node it is
            self.refusals[sig] = "%s: %s" % (self.nodes[min(bd.k, len(self.nodes) - 1)].describe(), e)
        with self._lock:
            if len(self.programs) >= MAX_PROGRAMS:
                self.programs.popitem(last=False)
            self.programs[sig] = prog
        return prog

    def arena(self, nbytes: int) -> int:
        """This thread's arena of at least `nbytes` (64-byte aligned address), kept across runs."""
        t = self._tls
        buf = getattr(t, "buf", None)
        if buf is None or buf.nbytes < nbytes + ALIGN:
            buf = t.buf = np.empty(nbytes + ALIGN, np.uint8)
            addr = buf.ctypes.data
            t.addr = addr + (-addr % ALIGN)
        return t.addr


__all__ = ["ProgramCache", "Program", "record_values", "EMIT", "MAX_PROGRAMS", "Unsupported"]
