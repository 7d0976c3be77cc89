"""Compiles a C engine group (NeonExecutionProvider / X64ExecutionProvider) into one C program per
input-shape signature (issue #16).

The first run with a new signature runs the group node by node (the provider's per-node path) and
records every value's dtype and shape; `ProgramCache.build` (the shared binding's,
onnxedge.oxk_program) then turns the nodes into program instructions (oxk.h `oxk_instr`: opcode, argument struct, slots), reusing the per-node plans and so
the weights they packed once, and plans one arena from the recorded shapes: a slot is reused once
its last reader has run. Later runs with that signature make one `oxk_program_run` call; only the
group's exported values leave C, written straight into their output arrays. A signature the program
cannot take (a dtype, a broadcast, a plan the kernels refuse) keeps the node-by-node path, and says
why in `ProgramCache.refusals`.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import fused_ops, ir, oxk_program, oxk_rnn
from onnxedge.oxk_program import (ALIGN, EMIT as SHARED_EMIT, MAX_PROGRAMS, Buf as _Buf,  # noqa: F401
                                  Builder, Compiled, Record, Target, Unsupported, emit_conv_sum,
                                  emit_computed_matmul, emit_gemm_plan, plan_arena as _plan_arena,
                                  record_values)

from . import library as L, quantized
from .library import KernelLibrary, data_address

F32 = np.dtype(np.float32)
_addressof = ctypes.addressof
_char_from_buffer = ctypes.c_char.from_buffer


class CtypesTarget(Target):
    """A program's structs as ctypes Structures built from the library's own layout table; the
    constants are the group's arrays themselves (kept alive with the program)."""

    def __init__(self, lib: KernelLibrary):
        self.S = lib.structs
        self.keep: List[Any] = []

    def struct(self, name: str, values: Sequence[Any]) -> int:
        st = self.S[name](*values)
        self.keep.append(st)
        return _addressof(st)

    def array(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        cls = self.S[name]
        arr = (cls * max(1, len(rows)))(*[cls(*r) for r in rows])
        self.keep.append(arr)
        return _addressof(arr)

    def const(self, array: np.ndarray) -> int:
        self.keep.append(array)
        return array.ctypes.data

    def release(self) -> None:
        self.keep = []


# ----------------------------------------------------------------------------- emitters
# Gemm/Conv/pools reuse the per-node runs' plans (and so the weights they packed once).

def _gemm(bd: Builder, node: ir.Node, run: Any) -> None:
    plan = getattr(run, "plan", None)
    if plan is not None:
        bd.keep.append(plan)
        emit_gemm_plan(bd, node, plan.addr, plan.struct.K, plan.struct.N, bool(plan.struct.transA))
        return
    if node.op_type not in ("MatMul", "FusedMatMul"):
        raise Unsupported("%s with a weight computed at run time or a C that is not a per-column "
                          "bias runs node by node" % node.op_type)
    emit_computed_matmul(bd, node)


def _planned(bd: Builder, node: ir.Node, run: Any, op: int) -> None:
    plan_for = getattr(run, "plan_for", None)
    if plan_for is None:
        raise Unsupported("%s with weights computed at run time runs node by node" % node.op_type)
    shape = bd.shape(node.inputs[0])
    if len(shape) != 4 and not (len(shape) == 3 and op in (L.OP_CONV2D, oxk_program.OP_CONVT)):
        raise Unsupported("input of rank %d" % len(shape))
    ent = plan_for(shape)
    if ent is None:
        raise Unsupported("the kernel has no plan for input shape %s" % (shape,))
    addr, _, oshape, count, plan = ent
    if tuple(oshape) != bd.shape(node.outputs[0]):
        raise Unsupported("planned output %s differs from the recorded %s"
                          % (oshape, bd.shape(node.outputs[0])))
    bd.keep.append(plan)
    z = getattr(run, "sum_input", None)
    if z is None:
        bd.emit(op, count, plan.addr, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))
        return
    zn, act, params = z
    plain = run.plan_for(shape, False)
    bd.keep.append(plain[4])
    p0, p1 = fused_ops.epilogue_params(act, params) if act else (0.0, 0.0)
    emit_conv_sum(bd, node, plain[4].addr, count, tuple(oshape), zn, act, p0, p1, fused_plan=plan.addr)


EMIT = dict(SHARED_EMIT)
EMIT.update({
    "Gemm": _gemm, "FusedGemm": _gemm, "MatMul": _gemm, "FusedMatMul": _gemm,
    "Conv": lambda bd, n, r: _planned(bd, n, r, L.OP_CONV2D),
    "FusedConv": lambda bd, n, r: _planned(bd, n, r, L.OP_CONV2D),
    "ConvTranspose": lambda bd, n, r: _planned(bd, n, r, oxk_program.OP_CONVT),
    "MaxPool": lambda bd, n, r: _planned(bd, n, r, L.OP_POOL2D),
    "AveragePool": lambda bd, n, r: _planned(bd, n, r, L.OP_POOL2D),
    "LSTM": oxk_rnn.emit, "GRU": oxk_rnn.emit,
})
EMIT.update(quantized.EMIT)   # QLinearConv, QLinearMatMul, QGemm, Q/DQ, ... (issue #17)


# ----------------------------------------------------------------------------- the program

class Program:
    """One compiled program run through ctypes: inputs and outputs are numpy arrays' own memory."""

    def __init__(self, lib: KernelLibrary, c: Compiled):
        self.compiled = c
        self.target = c.target
        self.addr = c.addr
        self.arena_bytes = c.arena_bytes
        self.in_names = c.in_names
        self.out_shapes = [(n,) for n in c.out_sizes]
        self.exports = c.exports
        self.n_instr = c.n_instr
        self.fn = lib.function("oxk_program_run")
        self.lib = lib
        self._tls = threading.local()
        # what a run does, worked out once: an output read by one exported value is made in that
        # value's shape (no reshape); the others are made flat and each value is a reshaped view
        users = [[e for e in c.exports if e[1] == j] for j in range(len(c.out_sizes))]
        self._alloc = [(users[j][0][2] if len(users[j]) == 1 else (n,), c.out_dtypes[j])
                       for j, n in enumerate(c.out_sizes)]
        self._sets = [(name, j, None if len(users[j]) == 1 else shape)
                      for name, j, shape in c.exports]

    def _arrays(self) -> Tuple[Any, Any]:
        t = self._tls
        arrs = getattr(t, "arrs", None)
        if arrs is None:
            vp = ctypes.c_void_p
            arrs = t.arrs = ((vp * max(1, len(self.in_names)))(), (vp * max(1, len(self.out_shapes)))())
        return arrs

    def run(self, env: Dict[str, Any], arena: int) -> None:
        """Run the program on env's inputs; set the exported values in env."""
        try:
            ins, outs = self._tls.arrs
        except AttributeError:
            ins, outs = self._arrays()
        held = []   # the arrays the C call reads (contiguous copies included) stay alive through it
        i = 0
        for name in self.in_names:
            a, ins[i] = data_address(env[name])
            held.append(a)
            i += 1
        made = [np.empty(shape, dt) for shape, dt in self._alloc]
        j = 0
        for y in made:
            outs[j] = data_address(y)[1]
            j += 1
        rc = self.fn(self.addr, ins, outs, arena)
        if rc:
            self.lib.check(rc, "program of %d instructions" % self.n_instr)
        for name, j, shape in self._sets:
            env[name] = made[j] if shape is None else made[j].reshape(shape)


class ProgramCache(oxk_program.ProgramCache):
    """The C engine programs of one group, one per input-shape signature (bounded, like the plan cache),
    written with ctypes; `arena` gives each thread its own arena."""

    def __init__(self, lib: KernelLibrary, nodes: Sequence[ir.Node], runs: Sequence[Any],
                 inputs: Sequence[str], exported: Sequence[str], consts: Dict[str, np.ndarray],
                 opsets: Dict[str, int]):
        super().__init__(nodes, runs, inputs, exported, consts, opsets, EMIT,
                         lambda: CtypesTarget(lib), lambda c: Program(lib, c))
        self.lib = lib
        self._tls = threading.local()

    def arena(self, nbytes: int) -> int:
        """This thread's arena of at least `nbytes` (64-byte aligned address), kept across runs."""
        t = self._tls
        buf = getattr(t, "buf", None)
        if buf is None or buf.nbytes < nbytes + ALIGN:
            buf = t.buf = np.empty(nbytes + ALIGN, np.uint8)
            addr = buf.ctypes.data
            t.addr = addr + (-addr % ALIGN)
        return t.addr


__all__ = ["CtypesTarget", "ProgramCache", "Program", "record_values", "EMIT", "MAX_PROGRAMS", "Unsupported"]
