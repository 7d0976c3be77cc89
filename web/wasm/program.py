"""A wasm provider's group as one C program in the page (issue #16): the shared binding's compiler
(onnxedge.oxk_program) with wasm memory as its target.

The first run with a new input-shape signature goes node by node (recording shapes); then the
nodes become `oxk_program` instructions over one arena, written into wasm memory with the module's
own struct layouts. Each later run copies every program input into wasm memory once, makes one
`oxk_program_run` call into wasm, and copies every exported value out once. Gemm/MatMul and Conv
reuse the per-node ops' plans and so the weights they packed into wasm memory once.
"""
from __future__ import annotations

import struct
import threading
from typing import Any, Dict, List, Sequence

import numpy as np

from onnxedge import ir, oxk_program
from onnxedge.oxk_program import (EMIT as SHARED_EMIT, OP_CONV2D, OP_POOL2D, Builder, Compiled, Target,
                                  Unsupported, emit_conv_sum, emit_gemm_plan, emit_global_pool)

from . import ops
from .transport import Kernels

F32 = np.dtype(np.float32)


class WasmTarget(Target):
    """A program's structs, constants and run-time blocks in the module's memory (freed together)."""

    def __init__(self, kernels: Kernels):
        self.kernels = kernels
        self.blocks: List[int] = []

    def _own(self, ptr: int) -> int:
        self.blocks.append(ptr)
        return ptr

    def struct(self, name: str, values: Sequence[Any]) -> int:
        return self._own(self.kernels.put_struct(name, values))

    def array(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        return self._own(self.kernels.put_structs(name, rows))

    def const(self, array: np.ndarray) -> int:
        return self._own(self.kernels.put(array))

    def block(self, nbytes: int) -> int:
        """A block of at least `nbytes` freed with the program."""
        return self._own(self.kernels.alloc(max(4, int(nbytes))))

    def pointers(self, ptrs: Sequence[int]) -> int:
        """An array of pointers (the module's pointer size) freed with the program."""
        fmt = "<%d%s" % (max(1, len(ptrs)), "I" if self.kernels.pointer_size == 4 else "Q")
        return self._own(self.kernels.put_bytes(struct.pack(fmt, *(list(ptrs) or [0]))))

    def release(self) -> None:
        blocks, self.blocks = self.blocks, []
        for p in blocks:
            self.kernels.free(p)


class WasmProgram:
    """One compiled program with its input, output and arena blocks allocated once."""

    def __init__(self, kernels: Kernels, c: Compiled):
        t = c.target
        assert isinstance(t, WasmTarget)
        self.kernels, self.compiled, self.target = kernels, c, t
        self.in_names, self.exports, self.n_instr = c.in_names, c.exports, c.n_instr
        self.in_ptrs = [t.block(4 * n) for n in c.in_sizes]
        self.out_ptrs = [t.block(4 * n) for n in c.out_sizes]
        self.out_sizes = c.out_sizes
        self.ins = t.pointers(self.in_ptrs)
        self.outs = t.pointers(self.out_ptrs)
        self.arena = t.block(c.arena_bytes)
        self._lock = threading.Lock()   # the blocks are the program's own: one run at a time

    def run(self, env: Dict[str, Any]) -> None:
        """Copy the inputs in, run the whole program in one call, copy the exported values out."""
        k = self.kernels
        with self._lock:
            for name, ptr in zip(self.in_names, self.in_ptrs):
                k.write(ptr, np.ascontiguousarray(env[name]))
            rc = k.program_run(self.compiled.addr, self.ins, self.outs, self.arena)
            if rc:
                k.check(rc, "program of %d instructions" % self.n_instr)
            made: Dict[int, np.ndarray] = {}
            for name, j, shape in self.exports:
                if j not in made:
                    y = np.empty(self.out_sizes[j], F32)
                    k.read(self.out_ptrs[j], y)
                    made[j] = y
                env[name] = made[j].reshape(shape)


# ----------------------------------------------------------------------------- emitters

def _gemm(bd: Builder, node: ir.Node, op: Any) -> None:
    if not isinstance(op, ops.GemmOp):
        raise Unsupported("%s has no packed plan" % node.op_type)
    emit_gemm_plan(bd, node, op.plan, op.K, op.N, False)


def _conv(bd: Builder, node: ir.Node, op: Any) -> None:
    shape = bd.shape(node.inputs[0])
    ent = op.plan_for(shape)
    if ent is None:
        raise Unsupported("the kernel has no plan for input shape %s" % (shape,))
    plan, out, count = ent
    if tuple(out) != bd.shape(node.outputs[0]):
        raise Unsupported("planned output %s differs from the recorded %s" % (out, bd.shape(node.outputs[0])))
    if op.z:
        emit_conv_sum(bd, node, plan, count, tuple(out), op.z, op.act, op.params[0], op.params[1])
    else:
        bd.emit(OP_CONV2D, count, plan, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))


def _pool(bd: Builder, node: ir.Node, op: Any) -> None:
    if node.op_type.startswith("Global"):
        emit_global_pool(bd, node)
        return
    shape = bd.shape(node.inputs[0])
    ent = op.plan_for(shape)
    if ent is None:
        raise Unsupported("the kernel has no plan for input shape %s" % (shape,))
    plan, out, count = ent
    bd.emit(OP_POOL2D, count, plan, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))


EMIT = dict(SHARED_EMIT)
EMIT.update({"Gemm": _gemm, "FusedGemm": _gemm, "MatMul": _gemm, "FusedMatMul": _gemm,
             "Conv": _conv, "FusedConv": _conv, "MaxPool": _pool, "AveragePool": _pool,
             "GlobalAveragePool": _pool, "GlobalMaxPool": _pool})


def cache(kernels: Kernels, nodes: Sequence[ir.Node], op_list: Sequence[Any], inputs: Sequence[str],
          exported: Sequence[str], consts: Dict[str, np.ndarray],
          opsets: Dict[str, int]) -> oxk_program.ProgramCache:
    """The program cache of one wasm group (programs are WasmProgram)."""
    return oxk_program.ProgramCache(nodes, op_list, inputs, exported, consts, opsets, EMIT,
                                    lambda: WasmTarget(kernels), lambda c: WasmProgram(kernels, c))


__all__ = ["EMIT", "WasmProgram", "WasmTarget", "cache"]
