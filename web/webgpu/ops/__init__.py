"""The WebGPU op table: one module per op family registers its ops here.

An op is `fn(rt, node, inputs, opset) -> list of outputs` (inputs are GpuTensors or host numpy
arrays; see `runtime.Recorder`) plus `check(node, dtypes, opset) -> reason or None` that says
whether the provider can claim the node (`facts.dtype(name)` is a value's inferred numpy dtype or
None). `host_inputs` are input positions the op needs on the host (shapes, axes, pads…);
`raw` ops (views, Shape, Constant) get their inputs untouched, never uploaded.
"""
from __future__ import annotations

from .table import (F32, OPS, TABLE, OpSpec, attr, float_inputs, register,  # noqa: F401
                    support_table)


def _load_families() -> None:
    from . import (elementwise, activation, cast, matmul, conv, pool, normalization,  # noqa: F401
                   reduction, movement, shape, indexing, attention, resize)


_load_families()

__all__ = ["OPS", "TABLE", "OpSpec", "register", "support_table", "attr", "float_inputs", "F32"]
