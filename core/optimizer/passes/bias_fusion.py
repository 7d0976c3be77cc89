"""Bias fusion: Conv/Gemm/MatMul followed by an Add of a constant bias.

Conv gets (or adds to) its B input; Gemm without C gets C; MatMul becomes Gemm when its input is
known to be 2-D, else a com.onnxedge FusedMatMul(A, B, bias).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ..context import FLOAT_TYPES, FUSED_DOMAIN, PassContext


def _conv_bias(ctx: PassContext, conv: ir.Node, bias: np.ndarray) -> Optional[ir.Node]:
    w = ctx.const(conv.inputs[1]) if len(conv.inputs) > 1 else None
    if w is None or bias.ndim > w.ndim:
        return None
    full = (1,) * (w.ndim - bias.ndim) + bias.shape   # aligned to the output [N, M, spatial...]
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, w.shape[0]):
        return None
    add = np.broadcast_to(bias.reshape(-1), (w.shape[0],)).astype(np.float64)
    if len(conv.inputs) > 2 and conv.inputs[2]:
        old = ctx.const(conv.inputs[2])
        if old is None:
            return None
        add = add + old.astype(np.float64)
    b = ctx.add_initializer((conv.name or conv.outputs[0]) + "_bias", add.astype(w.dtype))
    return ir.Node("Conv", [conv.inputs[0], conv.inputs[1], b], [], conv.attributes, name=conv.name)


def _row_bias(bias: np.ndarray, n: int, max_rank: int) -> bool:
    """True when `bias` adds one value per output column, whatever the rows."""
    return bias.ndim <= max_rank and bias.size == n and (bias.ndim == 0 or bias.shape[-1] == n)


def _gemm_bias(ctx: PassContext, gemm: ir.Node, bias: np.ndarray) -> Optional[ir.Node]:
    w = ctx.const(gemm.inputs[1])
    if w is None or w.ndim != 2 or (len(gemm.inputs) > 2 and gemm.inputs[2]):
        return None
    if ctx.opsets.get("", 0) < 11:   # C is optional only from opset 11
        return None
    n = w.shape[0] if gemm.attributes.get("transB", 0) else w.shape[1]
    if not _row_bias(bias, n, 2):
        return None
    attrs = dict(gemm.attributes)
    attrs["beta"] = 1.0
    c = ctx.add_initializer((gemm.name or gemm.outputs[0]) + "_bias", bias.reshape(n))
    return ir.Node("Gemm", gemm.inputs[:2] + [c], [], attrs, name=gemm.name)


def _matmul_bias(ctx: PassContext, mm: ir.Node, bias: np.ndarray) -> Optional[ir.Node]:
    w = ctx.const(mm.inputs[1])
    if w is None or w.ndim != 2:
        return None
    a_shape = ctx.shape(mm.inputs[0])
    max_rank = len(a_shape) if a_shape is not None else 1
    if not _row_bias(bias, w.shape[1], max_rank):
        return None
    c = ctx.add_initializer((mm.name or mm.outputs[0]) + "_bias", bias.reshape(w.shape[1]))
    if a_shape is not None and len(a_shape) == 2 and ctx.opsets.get("", 0) >= 11:
        return ir.Node("Gemm", [mm.inputs[0], mm.inputs[1], c], [], name=mm.name)
    return ctx.make_node("FusedMatMul", [mm.inputs[0], mm.inputs[1], c], [],
                         {"activation": ""}, FUSED_DOMAIN, mm.name)


FUSERS = {"Conv": _conv_bias, "Gemm": _gemm_bias, "MatMul": _matmul_bias}


def run(ctx: PassContext) -> bool:
    """Fuse every constant bias Add into the Conv/Gemm/MatMul before it."""
    changed = False
    for add in list(ctx.graph.nodes):
        if add.op_type != "Add" or add.domain or len(add.inputs) != 2:
            continue
        for i in (0, 1):
            prod = ctx.producer_of(add.inputs[i])
            bias = ctx.const(add.inputs[1 - i])
            if prod is None or prod.domain or prod.op_type not in FUSERS or bias is None \
                    or bias.dtype not in FLOAT_TYPES or not ctx.private(add.inputs[i]) \
                    or ctx.dtype(prod.inputs[1]) != bias.dtype:
                continue
            new = FUSERS[prod.op_type](ctx, prod, bias)
            if new is not None:
                new.outputs = [add.outputs[0]]
                ctx.replace([prod, add], [new])
                changed = True
                break
    return changed
