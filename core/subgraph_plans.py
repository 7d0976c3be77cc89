"""If / Loop / Scan bodies partitioned like the main graph, so their work reaches the C engine.

An `If` whose condition is known when the model loads is inlined by the optimizer (if_folding);
any other control-flow body runs here: the first time a body runs, it is partitioned over the
session's host providers (the C engine and the CPU: providers whose values stay in host memory)
and compiled into steps, exactly as the main graph is, and every later run of that body runs the
steps. Each branch of an `If` thus becomes engine programs of its own (one per input-shape
signature), as the main graph's groups do. The outer-scope initializers a body reads count as its
constants (weights the engine packs once), unless a feed can override them.
When only the CPU provider is at hand, or a body cannot be partitioned, the body runs node by node
on the CPU kernels (executor.GraphRunner), as before.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import executor, facts as _facts, ir
from .errors import OnnxEdgeError
from .partition import Plan, build_plan
from .providers.base import CompileContext, ExecutionProvider

Env = Dict[str, Any]


class PlannedRunner(executor.GraphRunner):
    """A GraphRunner whose bodies run as partitioned plans over `providers` (see the module)."""

    def __init__(self, graph: ir.Graph, opsets: Dict[str, int], functions: Optional[Dict[Any, ir.Function]],
                 providers: Sequence[ExecutionProvider], outer_constants: Callable[[str], Any]):
        super().__init__(graph, opsets, functions)
        self.providers = list(providers)
        self.outer_constants = outer_constants
        self._plan: Optional[Plan] = None
        self._planned = False
        self._plan_lock = threading.Lock()

    def new_child(self, sub: ir.Graph) -> executor.GraphRunner:
        """A planned runner for `sub`, reading this body's initializers as outer constants too."""
        mine = self.graph.initializers
        outer = self.outer_constants

        def constants(name: str) -> Any:
            v = mine.get(name)
            return v if v is not None else outer(name)
        return PlannedRunner(sub, self.opsets, self.functions, self.providers, constants)

    def plan(self) -> Optional[Plan]:
        """The body's plan (built on first use), None when it runs on the CPU kernels alone."""
        if not self._planned:
            with self._plan_lock:
                if not self._planned:
                    self._plan = self._build()
                    self._planned = True
        return self._plan

    def _build(self) -> Optional[Plan]:
        if all(p.name == "CPUExecutionProvider" for p in self.providers) or not self.graph.nodes:
            return None
        g = self.graph
        consts = {}
        for name in self.outer:
            v = self.outer_constants(name)
            if v is not None:
                consts[name] = v
        body = ir.Graph(g.name, g.nodes, g.inputs, g.outputs, dict(consts, **g.initializers), g.value_info,
                        g.doc_string)
        free = executor.last_uses(body.nodes, self.output_names)
        ctx = CompileContext(self.opsets, {i: f for i, f in enumerate(free)}, self.functions, self.run_child)
        try:
            ctx.facts = _facts.infer(body, self.opsets)
            return build_plan(body, self.providers, ctx)
        except OnnxEdgeError:
            return None   # the CPU kernels run it (and raise what is wrong with it, if anything)

    def run(self, feeds: Dict[str, Any], outer_env: Env) -> List[Any]:
        """The body's outputs for these feeds, outer-scope values read from outer_env."""
        plan = self.plan()
        if plan is None:
            return super().run(feeds, outer_env)
        env = self.start_env(feeds, outer_env)
        for step in plan.steps:
            step.run(env)
        return self.outputs(env)


__all__ = ["PlannedRunner"]
