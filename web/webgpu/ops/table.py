"""The WebGPU op table itself (the family modules register into it; `ops/__init__.py` loads
them and re-exports this module's names)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from onnxedge.providers.support import MAX_OPSET, OpSupport, SupportTable

F32 = np.dtype(np.float32)


class OpSpec:
    """How the provider runs one op type."""

    __slots__ = ("fn", "check", "host_inputs", "raw")

    def __init__(self, fn: Callable[..., Any], check: Optional[Callable[..., Optional[str]]],
                 host_inputs: Sequence[int], raw: bool):
        self.fn = fn
        self.check = check
        self.host_inputs = frozenset(host_inputs)
        self.raw = raw


TABLE = SupportTable("WebGpuExecutionProvider")
OPS: Dict[Tuple[str, str], OpSpec] = {}


def register(op_types: Sequence[str], check: Optional[Callable[..., Optional[str]]] = None,
             host_inputs: Sequence[int] = (), raw: bool = False, domain: str = "",
             since: int = 1, until: int = MAX_OPSET
             ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register fn for these op types over opsets since..until (with its check)."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in op_types:
            spec = OpSpec(fn, check, host_inputs, raw)
            TABLE.add(OpSupport(domain, op, since, until, check, spec))
            OPS[(domain, op)] = spec
        return fn
    return wrap


def support_table() -> SupportTable:
    """The WebGPU provider's op-support records (docs/OPERATORS.md reads them)."""
    return TABLE


def attr(node: Any, name: str, default: Any = None) -> Any:
    """A node attribute or its default."""
    return node.attributes.get(name, default)


def float_inputs(node: Any, facts: Any, positions: Sequence[int] = (0,)) -> Optional[str]:
    """Reason unless the inputs at these positions are float32 (missing optional ones pass)."""
    for i in positions:
        if i >= len(node.inputs) or not node.inputs[i]:
            continue
        dt = facts.dtype(node.inputs[i])
        if dt is None:
            return "input %r has an unknown element type" % node.inputs[i]
        if dt != F32:
            return "input %r is %s; the WebGPU kernels take float32" % (node.inputs[i], dt)
    return None
