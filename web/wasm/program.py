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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import ir, oxk_program, oxk_quant, oxk_rnn
from onnxedge.errors import OnnxEdgeError
from onnxedge.oxk_program import (EMIT as SHARED_EMIT, OP_CONV2D, OP_CONVT, OP_POOL2D, Builder, Compiled, Target,
                                  Unsupported, emit_computed_matmul, emit_conv_sum, emit_gemm_plan,
                                  emit_global_pool)

from . import ops
from .transport import Kernels

F32 = np.dtype(np.float32)


class WasmTarget(Target):
    """A program's structs, constants and run-time blocks in the module's memory (freed together)."""

    def __init__(self, kernels: Kernels):
        self.kernels = kernels
        self.blocks: List[int] = []
        self.on_release: List[Callable[[], None]] = []   # called once the blocks are given back

    def _own(self, ptr: int) -> int:
        self.blocks.append(ptr)
        return ptr

    def struct(self, name: str, values: Sequence[Any]) -> int:
        return self._own(self.kernels.put_struct(name, values))

    def array(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        return self._own(self.kernels.put_structs(name, rows))

    def const(self, array: np.ndarray) -> int:
        """A copy of `array` in its own element type (float32, or a quantized op's integers)."""
        a = np.ascontiguousarray(array)
        if a.dtype == F32:
            return self._own(self.kernels.put(a))
        ptr = self._own(self.kernels.alloc(max(4, a.nbytes)))
        if a.nbytes:
            self.kernels.write(ptr, a)
        return ptr

    def block(self, nbytes: int) -> int:
        """A block of at least `nbytes` freed with the program."""
        return self._own(self.kernels.alloc(max(4, int(nbytes))))

    def pointers(self, ptrs: Sequence[int]) -> int:
        """An array of pointers (the module's pointer size) freed with the program."""
        fmt = "<%d%s" % (max(1, len(ptrs)), "I" if self.kernels.pointer_size == 4 else "Q")
        return self._own(self.kernels.put_bytes(struct.pack(fmt, *(list(ptrs) or [0]))))

    def release(self) -> None:
        blocks, self.blocks = self.blocks, []
        hooks, self.on_release = self.on_release, []
        for hook in hooks:   # first: whoever holds the addresses stops using them
            hook()
        for p in blocks:
            self.kernels.free(p)


class WasmProgram:
    """One compiled program with its input, output and arena blocks allocated once."""

    def __init__(self, kernels: Kernels, c: Compiled):
        t = c.target
        assert isinstance(t, WasmTarget)
        self.kernels, self.compiled, self.target = kernels, c, t
        self.in_names, self.exports, self.n_instr = c.in_names, c.exports, c.n_instr
        # blocks sized by element type: float32, or a quantized op's int8/uint8/int32 values
        self.in_ptrs = [t.block(dt.itemsize * n) for n, dt in zip(c.in_sizes, c.in_dtypes)]
        self.out_ptrs = [t.block(dt.itemsize * n) for n, dt in zip(c.out_sizes, c.out_dtypes)]
        self.out_sizes, self.out_dtypes = c.out_sizes, c.out_dtypes
        self.in_dtypes = c.in_dtypes
        self.ins = t.pointers(self.in_ptrs)
        self.outs = t.pointers(self.out_ptrs)
        self.arena = t.block(c.arena_bytes)
        self.published: Any = None   # the JS object of describe() that onnxedge.js runs it from
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
                    y = np.empty(self.out_sizes[j], self.out_dtypes[j])
                    k.read(self.out_ptrs[j], y)
                    made[j] = y
                env[name] = made[j].reshape(shape)

    def describe(self) -> Dict[str, Any]:
        """What a caller outside Python needs to run the program itself (onnxedge.js does, through
        oxk.js's `runProgram`): the oxk_program's address, the pointer arrays and arena, each input
        block {name, ptr, size (elements), type (numpy's name: float32, int64, ...), itemsize} in the
        order the program reads them, and each exported
        value {name, ptr, size, dims}. Valid until the program is released (its target's
        `on_release` hooks are called first)."""
        t = self.compiled
        return {"program": int(t.addr), "ins": int(self.ins), "outs": int(self.outs),
                "arena": int(self.arena),
                "inputs": [{"name": n, "ptr": int(p), "size": int(size), "type": str(dt),
                            "itemsize": int(dt.itemsize)}
                           for n, p, size, dt in zip(self.in_names, self.in_ptrs, t.in_sizes, self.in_dtypes)],
                "outputs": [{"name": n, "ptr": int(self.out_ptrs[j]), "size": int(self.out_sizes[j]),
                             "dims": [int(d) for d in shape]} for n, j, shape in self.exports]}


# ----------------------------------------------------------------------------- emitters

def _gemm(bd: Builder, node: ir.Node, op: Any) -> None:
    if isinstance(op, ops.ComputedMatMulOp):
        emit_computed_matmul(bd, node)
        return
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
        fused = op.fused_plan_for(shape)
        emit_conv_sum(bd, node, plan, count, tuple(out), op.z, op.act, op.params[0], op.params[1],
                      fused_plan=fused[0] if fused else 0)
    else:
        bd.emit(OP_CONV2D, count, plan, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))


def _convt(bd: Builder, node: ir.Node, op: Any) -> None:
    shape = bd.shape(node.inputs[0])
    ent = op.plan_for(shape) if isinstance(op, ops.ConvTransposeOp) else None
    if ent is None:
        raise Unsupported("the kernel has no plan for input shape %s" % (shape,))
    plan, out, count = ent
    if tuple(out) != bd.shape(node.outputs[0]):
        raise Unsupported("planned output %s differs from the recorded %s" % (out, bd.shape(node.outputs[0])))
    bd.emit(OP_CONVT, count, plan, bd.read(node.inputs[0]), None, bd.write(node.outputs[0]))


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
             "GlobalAveragePool": _pool, "GlobalMaxPool": _pool, "ConvTranspose": _convt,
             "LSTM": oxk_rnn.emit, "GRU": oxk_rnn.emit})
EMIT.update(oxk_quant.EMIT)   # QLinearConv, QLinearMatMul, QGemm, Q/DQ, ... (int8/uint8/int32 buffers)


# program-only ops whose output has the shape of their first input (binary ops broadcast; for the
# others run_node takes the shape the CPU kernel gave)
SAME_SHAPE = oxk_program.ACTS + ("Softmax", "LogSoftmax")
NodeKey = Tuple[Any, ...]


def _node_output(node: ir.Node, rec: oxk_program.Record, env: Dict[str, Any]) -> Optional[Tuple[int, ...]]:
    op, out = node.op_type, node.outputs[0]
    if op in oxk_program.BINARY_OPS:
        return oxk_program.broadcast_shape(rec[node.inputs[0]][1], rec[node.inputs[1]][1])
    if op in SAME_SHAPE:
        return tuple(rec[node.inputs[0]][1])
    y = env.get(out)
    return tuple(y.shape) if type(y) is np.ndarray and y.dtype == F32 else None


def shape_from_cpu(node: ir.Node) -> bool:
    """True for a program-only op `run_node` takes only after its CPU kernel ran (the output's
    shape comes from that run)."""
    op = node.op_type
    return op in EMIT and op not in oxk_program.VIEWS and op not in SAME_SHAPE and \
        op not in oxk_program.BINARY_OPS


def run_node(kernels: Kernels, node: ir.Node, env: Dict[str, Any], opsets: Dict[str, int],
             cache: Optional[Dict[NodeKey, Optional[WasmProgram]]] = None, op: Any = None) -> bool:
    """Run a node on its own on the wasm kernels as a one-instruction program made by the same
    emitter as the step's program, so a node-by-node run and a program run give the same bits
    (edge/neon/ops.py's `_engine_op` natively): a program-only node (activation, binary op,
    Softmax, ...), or an `op` whose node-by-node run is such a program (ops.NodeProgramOp with
    `node_outputs`: LSTM / GRU, several outputs). Inputs are copied in, one oxk_program_run call,
    the outputs are copied out into env. False when it cannot: a view (the CPU kernel gives the
    same values without a copy), an input that is not an array (or, for program-only ops, not
    float32), a signature the emitter refuses, an op whose output shape only its CPU kernel tells
    (run that first, then call again: the result is replaced by the kernels'). With `cache`,
    programs are kept per node and signature (None: a refusal); without, released after the run."""
    outs_of = getattr(op, "node_outputs", None)
    kernel_op = isinstance(op, ops.NodeProgramOp) and not isinstance(op, ops.ProgramOnlyOp)
    op_type = node.op_type
    if not kernel_op and (op_type in oxk_program.VIEWS or op_type not in EMIT or not node.outputs
                          or not node.outputs[0]):
        return False
    params = oxk_program.PARAM_INPUTS.get(op_type, ())
    rec: oxk_program.Record = {}
    key: List[Any] = [node]
    for i, name in enumerate(node.inputs):
        if not name:
            continue
        v = env.get(name)
        if type(v) is not np.ndarray or (not kernel_op and i not in params and v.dtype != F32):
            return False
        oxk_program.record_values(env, [name], rec)
        key.append((v.dtype.str, v.shape, v.tobytes() if i in params and v.size <= oxk_program.PARAM_MAX
                    else None))
    if kernel_op:
        made = outs_of(rec)
        if made is None:
            return False
        for name, ent in zip(node.outputs, made):
            if name and ent is not None:
                rec[name] = (np.dtype(ent[0]), tuple(ent[1]), None)
    else:
        shape = _node_output(node, rec, env)
        if shape is None or any(n and n not in env for n in node.outputs[1:]):
            return False   # outputs beyond the first: shapes from the CPU kernel's run
        rec[node.outputs[0]] = (F32, shape, None)
        for name in node.outputs[1:]:
            v = env.get(name) if name else None
            if type(v) is np.ndarray:
                rec[name] = (v.dtype, v.shape, None)
    sig = tuple(key)
    if cache is not None and sig in cache:
        prog = cache[sig]
    else:
        prog = _node_program(kernels, node, rec, opsets, op if kernel_op else None)
        if cache is not None:
            cache[sig] = prog
    if prog is None:
        return False
    try:
        prog.run(env)
    finally:
        if cache is None:
            prog.target.release()
    return True


def _node_program(kernels: Kernels, node: ir.Node, rec: oxk_program.Record, opsets: Dict[str, int],
                  op: Any) -> Optional[WasmProgram]:
    target = WasmTarget(kernels)
    bd = Builder(target, rec, {}, [n for n in node.inputs if n], opsets)
    try:
        EMIT[node.op_type](bd, node, op)
        return WasmProgram(kernels, Compiled(bd, [n for n in node.outputs if n], 1))
    except (Unsupported, OnnxEdgeError):
        target.release()
        return None


def cache(kernels: Kernels, nodes: Sequence[ir.Node], op_list: Sequence[Any], inputs: Sequence[str],
          exported: Sequence[str], consts: Dict[str, np.ndarray],
          opsets: Dict[str, int]) -> oxk_program.ProgramCache:
    """The program cache of one wasm group (programs are WasmProgram)."""
    return oxk_program.ProgramCache(nodes, op_list, inputs, exported, consts, opsets, EMIT,
                                    lambda: WasmTarget(kernels), lambda c: WasmProgram(kernels, c))


__all__ = ["EMIT", "SAME_SHAPE", "WasmProgram", "WasmTarget", "cache", "run_node", "shape_from_cpu"]
