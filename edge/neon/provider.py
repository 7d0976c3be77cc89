"""NeonExecutionProvider: runs Conv, Gemm, MatMul, pools, their fused forms and int8 MatMuls on
onnxedge's C kernels (edge/kernels/), loaded with ctypes.

On aarch64 (Raspberry Pi, phones) the library is the NEON build; on x86_64 it is the host build
of the same C kernels (SSE2/AVX2), so the provider also runs natively, which the tests use. The
provider is available only where its library loads.

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


def _int_option(options: Dict[str, Any], key: str, default: int) -> int:
    v = options.get(key, default)
    try:
        n = int(v)
    except (TypeError, ValueError):
        n = -1
    if n < 0:
        raise InvalidArgument("NeonExecutionProvider option %s=%r: expected an integer >= 0" % (key, v))
    return n


class NeonExecutionProvider(ExecutionProvider):
    """onnxedge's C kernels (NEON / host SIMD) for the compute-heavy ops; CPU takes the rest."""

    name = "NeonExecutionProvider"
    cpu_engine = True   # sessions put it before the CPU provider (session.cpu_engine)
    OPTIONS = ("intra_op_num_threads", "library", "library_path", "programs")

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        unknown = sorted(set(self.options) - set(self.OPTIONS))
        if unknown:
            raise InvalidArgument("NeonExecutionProvider: unknown option(s) %s; known: %s"
                                  % (unknown, list(self.OPTIONS)))
        variant = str(self.options.get("library", ""))
        if variant not in ("", "generic"):
            raise InvalidArgument("NeonExecutionProvider option library=%r: expected '' or 'generic'"
                                  % variant)
        self.lib = library.load(variant, self.options.get("library_path") or None)
        self.lib.set_num_threads(_int_option(self.options, "intra_op_num_threads", 0))
        self.use_programs = _int_option(self.options, "programs", 1) != 0
        self._reasons: Dict[int, Optional[str]] = {}

    @classmethod
    def is_available(cls) -> bool:
        """True where this machine's kernel library exists and loads."""
        try:
            library.load()
        except OnnxEdgeError:
            return False
        return True

    # ------------------------------------------------------------------ capability
    @staticmethod
    def _missing(node: ir.Node) -> str:
        return "no NEON kernel for %s (domain %s); NEON runs %s" % (
            node.op_type, node.domain or "ai.onnx", ", ".join(TABLE.ops()))

    def _reason(self, node: ir.Node, facts: Facts, ctx: CompileContext) -> Optional[str]:
        return TABLE.reason(node, ctx.opset_of(node) or None, facts, self._missing)

    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """Every node with a NEON kernel whose declared types and ranks the kernel takes."""
        claimed = []
        facts = Facts(graph, ctx.opsets, ctx.facts)
        for i, node in enumerate(graph.nodes):
            why = self._reason(node, facts, ctx)
            self._reasons[id(node)] = why
            if why is None:
                claimed.append(i)
        return [claimed]

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """Why NEON passes over `node` (the op, a dtype, a rank, an activation), None if it runs it."""
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
                    raise RuntimeException("NeonExecutionProvider: %s reads %s, which no input, "
                                           "initializer or earlier node produced"
                                           % (node.describe(), e)) from None
                except OnnxEdgeError as e:
                    msg = str(e)
                    raise type(e)("%s at opset %d (NeonExecutionProvider): %s"
                                  % (node.describe(), opsets.get(node.domain, 0), msg)) from e
                except Exception as e:
                    raise RuntimeException("%s (NeonExecutionProvider) failed: %s: %s"
                                           % (node.describe(), type(e).__name__, e)) from e
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


__all__ = ["NeonExecutionProvider"]
