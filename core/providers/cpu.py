"""The numpy CPU execution provider: runs every node that has a registered kernel."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from .. import executor, ir
from ..kernels import registry
from .base import CompileContext, ExecutionProvider, Group, Step

if TYPE_CHECKING:
    from .support import SupportTable


def support_table() -> "SupportTable":
    """The CPU provider's op-support records: every registered kernel, with its opset range
    (importing every kernel module; for docs/OPERATORS.md, not for running a graph)."""
    from .support import OpSupport, SupportTable
    registry.import_all()
    table = SupportTable("CPUExecutionProvider")
    for domain, op in registry.registered_ops():
        for spec in registry.specs_of(domain, op):
            if spec.module.startswith(registry.KERNEL_PACKAGE + "."):   # not a user's custom op
                table.add(OpSupport(spec.domain, spec.op_type, spec.since, spec.until, None,
                                    spec.fn))
    return table


class CPUExecutionProvider(ExecutionProvider):
    """Runs nodes with the numpy kernels of `onnxedge.kernels`; the fallback for every graph."""

    name = "CPUExecutionProvider"

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """None when a kernel (or a model-local function) serves the node, else why not."""
        if (node.domain, node.op_type) in ctx.functions:
            return None
        if registry.find(node.domain, node.op_type, ctx.opset_of(node)) is None:
            return "no kernel for %s (domain %s, opset %d)" % (
                node.op_type, node.domain or "ai.onnx", ctx.opset_of(node))
        return None

    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """One group of every node that has a kernel."""
        return [[i for i, n in enumerate(graph.nodes) if self.unsupported_reason(n, ctx) is None]]

    def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
        """Bind kernels and attributes once; the step is a loop of kernel calls."""
        compiled = [executor.compile_node(node, ctx.opsets, free, ctx.functions)
                    for node, free in zip(group.nodes, group.free_after)]
        run_subgraph = ctx.run_subgraph

        def run(env: dict) -> None:
            executor.run_compiled(compiled, env, run_subgraph)

        return Step(self.name, group.node_indices, run)


__all__ = ["CPUExecutionProvider", "support_table"]
