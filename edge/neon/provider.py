"""The native C engine's providers: onnxedge's C kernels (edge/kernels/) loaded with ctypes, named
for the build they load: NeonExecutionProvider on aarch64 (Raspberry Pi, phones: the NEON build,
dotprod chosen at run time) and X64ExecutionProvider on x86-64 (SSE2 baseline, AVX2+FMA or
AVX-512 chosen at load). One class serves both; each is available only on its own architecture,
where its library loads. Sessions add the one of this machine in front of the CPU provider
(session.cpu_engine); `engine_name()` says which it is.

Options (provider_options): `intra_op_num_threads` (int, 0 = one per CPU; defaults to the
session's SessionOptions.intra_op_num_threads when that is set; the kernel library's
thread pool is process-wide, so the last session created decides), `library` ("" or "generic":
the plain-C vector build), `library_path` (an explicit .so), `programs` (1, the default: each
group runs as one compiled C program per input-shape signature; 0: node by node, for comparison).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from onnxedge import executor, ir, profiling
from onnxedge.errors import InvalidArgument, OnnxEdgeError, RuntimeException
from onnxedge.providers.base import CompileContext, ExecutionProvider, Group, Step
from onnxedge.providers.support import Facts, NoFacts

from . import library
from .ops import TABLE, Run
from .program import ProgramCache, Record, record_values


def _int_option(options: Dict[str, Any], key: str, default: int, who: str) -> int:
    v = options.get(key, default)
    try:
        n = int(v)
    except (TypeError, ValueError):
        n = -1
    if n < 0:
        raise InvalidArgument("%s option %s=%r: expected an integer >= 0" % (who, key, v))
    return n


class NeonExecutionProvider(ExecutionProvider):
    """onnxedge's C engine on aarch64 (the NEON build) for the ops it claims; CPU takes the rest."""

    name = "NeonExecutionProvider"
    ARCH = "aarch64"    # library.machine_arch() where this provider is available
    cpu_engine = True   # sessions put it before the CPU provider (session.cpu_engine)
    OPTIONS = ("intra_op_num_threads", "library", "library_path", "programs")

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        unknown = sorted(set(self.options) - set(self.OPTIONS))
        if unknown:
            raise InvalidArgument("%s: unknown option(s) %s; known: %s"
                                  % (self.name, unknown, list(self.OPTIONS)))
        variant = str(self.options.get("library", ""))
        if variant not in ("", "generic"):
            raise InvalidArgument("%s option library=%r: expected '' or 'generic'" % (self.name, variant))
        self.lib = library.load(variant, self.options.get("library_path") or None)
        self.lib.set_num_threads(_int_option(self.options, "intra_op_num_threads", 0, self.name))
        self.use_programs = _int_option(self.options, "programs", 1, self.name) != 0
        self._reasons: Dict[int, Optional[str]] = {}

    @classmethod
    def is_available(cls) -> bool:
        """True on this provider's architecture where the kernel library exists and loads."""
        if library.machine_arch() != cls.ARCH:
            return False
        try:
            library.load()
        except OnnxEdgeError:
            return False
        return True

    # ------------------------------------------------------------------ capability
    @staticmethod
    def _missing(node: ir.Node) -> str:
        return "no C engine kernel for %s (domain %s); the C engine runs %s" % (
            node.op_type, node.domain or "ai.onnx", ", ".join(TABLE.ops()))

    def _reason(self, node: ir.Node, facts: Facts, ctx: CompileContext) -> Optional[str]:
        return TABLE.reason(node, ctx.opset_of(node) or None, facts, self._missing)

    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """Every node with a C engine kernel whose declared types and ranks the kernel takes."""
        claimed = []
        facts = Facts(graph, ctx.opsets, ctx.facts)
        for i, node in enumerate(graph.nodes):
            why = self._reason(node, facts, ctx)
            self._reasons[id(node)] = why
            if why is None:
                claimed.append(i)
        return [claimed]

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """Why the engine passes over `node` (the op, a dtype, a rank, an activation), None if it
        runs it."""
        if id(node) in self._reasons:
            return self._reasons[id(node)]
        return self._reason(node, NoFacts(ctx.opsets), ctx)

    # ------------------------------------------------------------------ compile
    def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
        """Bind each node to its C kernel, packing constant weights once; the group runs as one C
        program per input-shape signature (program.py) after a first node-by-node run."""
        consts = {k: graph.initializers[k] for k in group.constants
                  if isinstance(graph.initializers.get(k), np.ndarray)}
        plan: List[Tuple[ir.Node, Run, Any, List[str]]] = []
        for node, free in zip(group.nodes, group.free_after):
            run = TABLE.lookup(node).build(node, self.lib, consts)
            fallback = executor.compile_node(node, ctx.opsets, [], ctx.functions)
            plan.append((node, run, fallback, free))
        run_subgraph = ctx.run_subgraph
        opsets = ctx.opsets
        me = self.name
        programs = ProgramCache(self.lib, group.nodes, [p[1] for p in plan], group.inputs, group.exported,
                                consts, opsets) if self.use_programs else None
        # after a program run only values that entered env can be freed: not the constants
        # (the session's own arrays) nor the program's inner values (never in env)
        freed = [name for name in group.freed if name not in consts]

        def node_by_node(env: Dict[str, Any], rec: Optional[Record], prof: Any = None) -> None:
            for node, run, fallback, free in plan:
                if prof is not None:
                    t0 = profiling.now_us()
                    args = [env.get(name) if name else None for name in node.inputs]
                try:
                    outs = run(env)
                except KeyError as e:
                    raise RuntimeException("%s: %s reads %s, which no input, initializer or earlier "
                                           "node produced" % (me, node.describe(), e)) from None
                except OnnxEdgeError as e:
                    msg = str(e)
                    raise type(e)("%s at opset %d (%s): %s"
                                  % (node.describe(), opsets.get(node.domain, 0), me, msg)) from e
                except Exception as e:
                    raise RuntimeException("%s (%s) failed: %s: %s"
                                           % (node.describe(), me, type(e).__name__, e)) from e
                if outs is None:   # an input the kernel does not take: the CPU kernel runs it
                    executor.run_compiled([fallback], env, run_subgraph)
                else:
                    for name, val in zip(node.outputs, outs):
                        if name:
                            env[name] = val
                    if prof is not None:
                        prof.node(node, self.name, t0, profiling.now_us(), args, outs)
                if rec is not None:
                    record_values(env, node.outputs, rec)
                for name in free:
                    env.pop(name, None)

        def step(env: Dict[str, Any]) -> None:
            prof = profiling.current()
            if prof is not None:   # one event per node; node by node gives the program's bits
                node_by_node(env, None, prof)
                return
            sig = programs.signature(env) if programs is not None else None
            if sig is None:
                node_by_node(env, None)
                return
            prog = programs.get(sig)
            if prog is False:   # first run with this signature: record shapes, then compile
                rec: Record = {}
                record_values(env, group.inputs, rec)
                node_by_node(env, rec)
                programs.build(sig, rec)
            elif prog is None:
                node_by_node(env, None)
            else:
                prog.run(env, programs.arena(prog.arena_bytes))
                for name in freed:
                    env.pop(name, None)

        out = Step(self.name, group.node_indices, step)
        out.profiles_nodes = True   # records its own Node events while profiling
        out.programs = programs  # type: ignore[attr-defined]  # tests and tools read it
        return out


class X64ExecutionProvider(NeonExecutionProvider):
    """onnxedge's C engine on x86-64 (SSE2 baseline; AVX2+FMA or AVX-512 cores chosen at load)
    for the ops it claims; CPU takes the rest. Options as NeonExecutionProvider's."""

    name = "X64ExecutionProvider"
    ARCH = "x86_64"


ENGINES = (NeonExecutionProvider, X64ExecutionProvider)


def engine_name(arch: Optional[str] = None) -> str:
    """The name of the C engine's provider for `arch` (default: this machine): NeonExecutionProvider
    on aarch64, X64ExecutionProvider on x86-64, "" where there is none."""
    arch = arch or library.machine_arch()
    return next((cls.name for cls in ENGINES if cls.ARCH == arch), "")


__all__ = ["ENGINES", "NeonExecutionProvider", "X64ExecutionProvider", "engine_name"]
