"""`WasmSimdExecutionProvider`: Conv (1-D, 2-D), ConvTranspose, Gemm, MatMul, pools, LSTM / GRU
and their fused forms on onnxedge's C kernels compiled to wasm32 SIMD (web/wasm/oxk.js), called
from Python inside Pyodide.

Available only in a page where `onnxedgeWasm.init()` has run (onnxedge.js does it before the
first session that asks for the provider). Weights are packed into wasm memory when the session
is created. A step (a run of consecutive claimed nodes) runs as one compiled C program per
input-shape signature (program.py, the shared onnxedge.oxk_program compiler): after a first run
node by node (which records the shapes: Conv/Gemm/MatMul/pools on their wasm kernels with a copy in
and out per node, the program-only ops as one-instruction programs of the same emitters, so the
first run and the program runs give the same bits; LSTM / GRU, with up to three outputs, as
one-node programs too; views on the CPU kernels), each run copies every step input into wasm
memory once, makes one
`oxk_program_run` call into wasm and copies each value used outside the step out once; the
program's buffers and arena are allocated once per signature. A signature the program cannot take
runs node by node: Conv/Gemm/MatMul/pools on their wasm kernels with activations in wasm memory
(buffers allocated once per input shape), or, when the step holds program-only ops (activations,
binary ops, Softmax, views) or inputs the kernels do not take, as the first run does. With
`programs=0` the program-only ops are not claimed (the CPU provider runs them, as before programs).

In a page the provider is the C engine (`cpu_engine`): a session asking for the CPU provider alone
gets it in front of the CPU provider, as natively X64ExecutionProvider / NeonExecutionProvider (session.cpu_engine "0":
numpy alone). onnxedge.js runs a session that is one wasm step with a compiled program for the
feeds straight from JS (`WasmProgram.describe`, oxk.js `runProgram`).

Options: `kernels` (a `transport.Kernels`, for tests: another kernel module), `profile` (bool:
record per-node and copy times in `provider.profile`, milliseconds summed over runs) and
`programs` (1, the default; 0: node by node, for comparison).
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

from onnxedge import executor, ir, oxk_program
from onnxedge.errors import InvalidArgument, OnnxEdgeError, RuntimeException
from onnxedge.providers.base import (CompileContext, ExecutionProvider, Group, Step,
                                     consecutive_runs)
from onnxedge.providers.support import Facts

from . import claims, ops, program, transport

F32 = np.dtype(np.float32)
MAX_SHAPES = 8   # buffer sets kept per step (one per distinct input shapes)


class WasmSimdExecutionProvider(ExecutionProvider):
    """onnxedge's C kernels as wasm32 SIMD in the page; CPU (numpy) takes the other nodes."""

    name = "WasmSimdExecutionProvider"
    # the page's C engine: sessions put it before the CPU provider (session.cpu_engine), as the
    # native X64ExecutionProvider / NeonExecutionProvider; available only where the page's module is initialized
    cpu_engine = True
    OPTIONS = ("kernels", "profile", "programs")

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        unknown = sorted(set(self.options) - set(self.OPTIONS))
        if unknown:
            raise InvalidArgument("WasmSimdExecutionProvider: unknown option(s) %s; known: %s"
                                  % (unknown, list(self.OPTIONS)))
        self.kernels = self.options.get("kernels") or transport.current()
        if self.kernels is None:
            raise InvalidArgument("WasmSimdExecutionProvider: the wasm kernel module is not "
                                  "initialized (await onnxedgeWasm.init() in the page first)")
        self.profile: Optional[Dict[str, float]] = {} if self.options.get("profile") else None
        try:
            self.use_programs = int(self.options.get("programs", 1)) != 0
        except (TypeError, ValueError):
            raise InvalidArgument("WasmSimdExecutionProvider option programs=%r: expected 0 or 1"
                                  % (self.options.get("programs"),)) from None
        self._reasons: Dict[ir.Node, Optional[str]] = {}   # keyed by the node itself, not id()

    @classmethod
    def is_available(cls) -> bool:
        """True inside a page whose onnxedgeWasm module is initialized."""
        return transport.current() is not None

    @property
    def threads(self) -> int:
        """How many threads the kernels split work over (1: no Web Workers)."""
        return int(self.kernels.threads)

    # ------------------------------------------------------------------ capability
    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """Runs of consecutive nodes the kernels take as declared (see claims.reason)."""
        facts = Facts(graph, ctx.opsets, ctx.facts)
        claimed = []
        for i, node in enumerate(graph.nodes):
            why = self._reason(node, facts, ctx.opset_of(node) or None)
            self._reasons[node] = why
            if why is None:
                claimed.append(i)
        return consecutive_runs(claimed)

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """Why a node stays on the CPU: no kernel for the op, a dtype, an attribute, non-constant
        weights (None when the provider runs it)."""
        if node in self._reasons:
            return self._reasons[node]
        return self._reason(node, None, ctx.opset_of(node) or None)

    def _reason(self, node: ir.Node, facts: Optional[Facts], opset: Optional[int]) -> Optional[str]:
        if not self.use_programs and node.domain in ("", "ai.onnx") and \
                node.op_type in oxk_program.PROGRAM_ONLY_OPS:
            return "%s runs only inside a compiled program (the provider option programs=0 is set)" \
                % node.op_type
        return claims.reason(node, facts, opset)

    # ------------------------------------------------------------------ compile
    def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
        """A Step running the group's nodes with their activations in wasm memory."""
        step = _WasmStep(self, graph, group, ctx)
        out = Step(self.name, group.node_indices, step.run)
        out.programs = step.programs  # type: ignore[attr-defined]  # tests and tools read it
        return out


class _Buffers:
    """The wasm blocks of one input-shape signature: a block per value, the bound kernels."""

    def __init__(self, kernels: transport.Kernels):
        self.kernels = kernels
        self.ptr: Dict[str, int] = {}
        self.shape: Dict[str, Tuple[int, ...]] = {}
        self.runs: List[Tuple[Any, List[int], int]] = []

    def add(self, name: str, shape: Tuple[int, ...]) -> int:
        """A block for value `name` of `shape` (float32)."""
        self.shape[name] = shape
        self.ptr[name] = self.kernels.alloc(max(4, 4 * int(np.prod(shape, dtype=np.int64))))
        return self.ptr[name]

    def release(self) -> None:
        """Free every block."""
        for ptr in self.ptr.values():
            self.kernels.free(ptr)
        self.ptr = {}


class _WasmStep:
    """A compiled step: ops bound to the kernels, step inputs/outputs, per-shape buffers."""

    def __init__(self, provider: WasmSimdExecutionProvider, graph: ir.Graph, group: Group,
                 ctx: CompileContext):
        self.provider = provider
        self.kernels = provider.kernels
        consts = claims.constants(graph)
        self.nodes = group.nodes
        self.ops = [claims.TABLE.lookup(n).build(n, self.kernels, consts) for n in self.nodes]
        data: Set[str] = {name for op in self.ops for name in op.data}
        self.inputs: List[str] = [name for name in group.inputs if name in data]
        self.inputs_all = list(group.inputs)
        self.outputs = group.exported
        self.free = group.free_after
        self.fallbacks = [executor.compile_node(n, ctx.opsets, [], ctx.functions) for n in self.nodes]
        self.run_subgraph = ctx.run_subgraph
        self.opsets = ctx.opsets
        self.sets: Dict[Tuple[Tuple[int, ...], ...], Optional[_Buffers]] = {}
        self.freed = group.freed
        self.programs = program.cache(self.kernels, self.nodes, self.ops, group.inputs, group.exported,
                                      {k: consts[k] for k in group.constants if k in consts},
                                      ctx.opsets) if provider.use_programs else None
        # one-instruction programs of the program-only nodes, kept for the signatures the step's
        # program refused (those run node by node every time); a first run releases its own
        self.node_programs: Dict[Any, Optional[program.WasmProgram]] = {}

    def __del__(self) -> None:
        try:
            if self.programs is not None:
                self.programs.release()
            self._release_node_programs()
            for b in self.sets.values():
                if b is not None:
                    b.release()
            for op in self.ops:
                op.release()
        except Exception:   # the page's module may be gone at interpreter exit
            pass

    def _release_node_programs(self) -> None:
        progs, self.node_programs = self.node_programs, {}
        for p in progs.values():
            if p is not None:
                p.target.release()

    def _bind(self, key: Tuple[Tuple[int, ...], ...]) -> Optional[_Buffers]:
        bufs = _Buffers(self.kernels)
        try:
            for name, shape in zip(self.inputs, key):
                bufs.add(name, shape)
            for op in self.ops:
                bound = op.bind([bufs.shape[n] for n in op.data])
                if bound is None:
                    bufs.release()
                    return None
                out = op.node.outputs[0]
                bufs.add(out, bound[0])
                bufs.runs.append((bound[1], [bufs.ptr[n] for n in op.data], bufs.ptr[out]))
        except BaseException:
            bufs.release()
            raise
        if len(self.sets) >= MAX_SHAPES:
            for old in self.sets.values():
                if old is not None:
                    old.release()
            self.sets.clear()
        return bufs

    def run(self, env: Dict[str, Any]) -> None:
        """Run the step: its program for this signature (compiled after a first run node by node,
        which records the shapes), else node by node."""
        progs = self.programs
        sig = progs.signature(env) if progs is not None else None
        if sig is None:
            return self.run_nodes(env)
        prog = progs.get(sig)
        if prog is False:   # first run with this signature: record shapes, then compile
            rec: oxk_program.Record = {}
            oxk_program.record_values(env, self.inputs_all, rec)
            self._run_cpu(env, rec)
            progs.build(sig, rec)
            return None
        if prog is None:
            return self.run_nodes(env)
        prof = self.provider.profile
        t = time.perf_counter() if prof is not None else 0.0
        prog.run(env)
        if prof is not None:
            _tick(prof, "program", t)
        for name in self.freed:
            env.pop(name, None)
        return None

    def run_nodes(self, env: Dict[str, Any]) -> None:
        """Node by node: copy the step's inputs in, run the kernels, copy the values used later out."""
        try:
            xs = [env[n] for n in self.inputs]
        except KeyError as e:
            raise RuntimeException("WasmSimdExecutionProvider: %s reads %s, which no input, "
                                   "initializer or earlier node produced"
                                   % (self.nodes[0].describe(), e)) from None
        if any(type(x) is not np.ndarray or x.dtype != F32 for x in xs):
            return self._run_cpu(env)
        key = tuple(x.shape for x in xs)
        if key not in self.sets:
            self.sets[key] = self._bind(key)
        bufs = self.sets[key]
        if bufs is None:
            return self._run_cpu(env)
        k, prof = self.kernels, self.provider.profile
        t = time.perf_counter() if prof is not None else 0.0
        for name, x in zip(self.inputs, xs):
            k.write(bufs.ptr[name], np.ascontiguousarray(x))
        if prof is not None:
            t = _tick(prof, "copy in", t)
        for (run, ins, out), op in zip(bufs.runs, self.ops):
            try:
                run(ins, out)
            except OnnxEdgeError as e:
                raise type(e)("%s at opset %d (WasmSimdExecutionProvider): %s"
                              % (op.what, self.opsets.get(op.node.domain, 0), e)) from e
            if prof is not None:
                t = _tick(prof, op.node.op_type, t)
        for name in self.outputs:
            y = np.empty(bufs.shape[name], F32)
            k.read(bufs.ptr[name], y)
            env[name] = y
        for names in self.free:
            for name in names:
                env.pop(name, None)
        if prof is not None:
            _tick(prof, "copy out", t)

    def _run_cpu(self, env: Dict[str, Any], rec: Optional[oxk_program.Record] = None) -> None:
        """Node by node, each node on the wasm kernels when they take its inputs (a copy in and
        out per node; program-only ops as one-instruction programs: the same bits as the step's
        program), every other node on its CPU kernel; `rec` (a first run) records the values'
        shapes."""
        keep = None if rec is not None else self.node_programs
        if keep is not None and len(keep) > MAX_SHAPES * len(self.nodes):
            self._release_node_programs()
            keep = self.node_programs
        for node, op, fallback, names in zip(self.nodes, self.ops, self.fallbacks, self.free):
            if not self._run_one(op, env, keep):
                executor.run_compiled([fallback], env, self.run_subgraph)
                if isinstance(op, ops.ProgramOnlyOp) and program.shape_from_cpu(node):
                    self._run_one(op, env, keep)   # the kernels' result replaces the CPU kernel's
            if rec is not None:
                oxk_program.record_values(env, node.outputs, rec)
            for name in names:
                env.pop(name, None)

    def _run_one(self, op: Any, env: Dict[str, Any],
                 keep: Optional[Dict[Any, Optional[program.WasmProgram]]] = None) -> bool:
        """Run one op on its own on the wasm kernels (False: they do not take these inputs);
        `keep` holds program-only ops' one-instruction programs across runs (None: released)."""
        if isinstance(op, ops.NodeProgramOp):   # program-only ops, LSTM / GRU: one-node programs
            try:
                return program.run_node(self.kernels, op.node, env, self.opsets, keep, op)
            except OnnxEdgeError as e:
                raise type(e)("%s at opset %d (WasmSimdExecutionProvider): %s"
                              % (op.what, self.opsets.get(op.node.domain, 0), e)) from e
        xs = [env.get(n) for n in op.data]
        if not xs or any(type(x) is not np.ndarray or x.dtype != F32 for x in xs):
            return False
        bound = op.bind([x.shape for x in xs])
        if bound is None:
            return False
        shape, run = bound
        k = self.kernels
        ptrs: List[int] = []
        try:
            ptrs = [k.put(x) for x in xs]
            ptrs.append(k.alloc(max(4, 4 * int(np.prod(shape, dtype=np.int64)))))
            try:
                run(ptrs[:-1], ptrs[-1])
            except OnnxEdgeError as e:
                raise type(e)("%s at opset %d (WasmSimdExecutionProvider): %s"
                              % (op.what, self.opsets.get(op.node.domain, 0), e)) from e
            y = np.empty(shape, F32)
            k.read(ptrs[-1], y)
        finally:
            for p in ptrs:
                k.free(p)
        env[op.node.outputs[0]] = y
        return True


def direct_program(session: Any, feeds: Dict[str, Any]) -> Optional[program.WasmProgram]:
    """The compiled program that computes every output of `session` (float32) from exactly `feeds`
    (numpy arrays of the element types the program reads), when the session's plan is one
    WasmSimdExecutionProvider step and that step has a program for the feeds' signature (built by
    an earlier run); None otherwise. onnxedge.js runs such a program straight from JS
    (`WasmProgram.describe`), without a call into Python."""
    steps = session.plan.steps
    if len(steps) != 1 or steps[0].provider != WasmSimdExecutionProvider.name:
        return None
    progs = getattr(steps[0], "programs", None)
    if progs is None or any(type(v) is not np.ndarray for v in feeds.values()):
        return None
    sig = progs.signature(feeds)
    prog = progs.get(sig) if sig is not None else None
    if not isinstance(prog, program.WasmProgram) or set(prog.in_names) != set(feeds) \
            or len(prog.in_names) != len(feeds) or any(dt != F32 for dt in prog.out_dtypes) \
            or any(feeds[n].dtype != dt for n, dt in zip(prog.in_names, prog.in_dtypes)):
        return None
    exported = {name for name, _, _ in prog.exports}
    if any(o.name not in exported for o in session.get_outputs()):
        return None
    return prog


def _tick(prof: Dict[str, float], key: str, t0: float) -> float:
    t = time.perf_counter()
    prof[key] = prof.get(key, 0.0) + (t - t0) * 1000.0
    return t


__all__ = ["WasmSimdExecutionProvider", "direct_program"]
