"""Activation fusion: Conv/Gemm/MatMul (or their fused forms without an activation) followed by
Relu, LeakyRelu, Sigmoid, Tanh, Clip, HardSigmoid, HardSwish, Elu, Softplus or Gelu (ai.onnx, or
com.onnxedge's from the Gelu fusion; approximate="tanh" is the GeluTanh activation) become one
com.onnxedge FusedConv, FusedGemm or FusedMatMul carrying `activation` and `activation_params`
(names: onnxedge.fused_ops.FUSABLE). `fuse` is the step other passes reuse (SiLU, HardSwish
chains: silu_fusion)."""
from __future__ import annotations

from typing import List, Optional

from ... import ir
from ..context import FUSED_DOMAIN, PassContext

FUSED = {"Conv": "FusedConv", "Gemm": "FusedGemm", "MatMul": "FusedMatMul"}
INF = float("inf")


def _activation(act: ir.Node) -> Optional[str]:
    """The `activation` name node `act` becomes, None when it is no activation."""
    if act.op_type == "Gelu" and act.domain in ("", FUSED_DOMAIN):
        mode = str(act.attributes.get("approximate", "none"))
        return {"none": "Gelu", "tanh": "GeluTanh"}.get(mode)
    return None if act.domain else act.op_type


def _params(ctx: PassContext, act: ir.Node) -> Optional[List[float]]:
    """The activation's parameters as FusedConv takes them, or None when not fusable."""
    op, attrs = act.op_type, act.attributes
    if op in ("Relu", "Sigmoid", "Tanh", "HardSwish", "Softplus", "Gelu"):
        return []
    if op == "LeakyRelu":
        return [float(attrs.get("alpha", 0.01))]
    if op == "Elu":
        return [float(attrs.get("alpha", 1.0))]
    if op == "HardSigmoid":
        return [float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))]
    if op == "Clip":
        if ctx.opsets.get("", 0) < 11:
            return [float(attrs.get("min", -INF)), float(attrs.get("max", INF))]
        bounds = []
        for i, default in ((1, -INF), (2, INF)):
            name = act.inputs[i] if len(act.inputs) > i else ""
            value = ctx.scalar(name) if name else default
            if value is None:
                return None
            bounds.append(value)
        return bounds
    return None


def _fused(ctx: PassContext, prod: ir.Node) -> Optional[ir.Node]:
    """The producer as a fused node without activation yet, or None."""
    if prod.domain == FUSED_DOMAIN and prod.op_type in FUSED.values():
        return None if prod.attributes.get("activation") else prod
    if prod.domain or prod.op_type not in FUSED:
        return None
    if prod.op_type == "Gemm" and ctx.opsets.get("", 0) < 7:
        return None
    return ctx.make_node(FUSED[prod.op_type], prod.inputs, prod.outputs, prod.attributes,
                         FUSED_DOMAIN, prod.name)


def fuse(ctx: PassContext, prod: ir.Node, nodes: List[ir.Node], out: str, activation: str,
         params: List[float]) -> bool:
    """Replace `prod` (a Conv/Gemm/MatMul or a fused one without activation) and the `nodes`
    computing `activation` of its output into `out` by one fused node; False (nothing changed)
    when `prod` cannot take an activation."""
    base = _fused(ctx, prod)
    if base is None:
        return False
    attrs = dict(base.attributes)
    attrs["activation"] = activation
    attrs["activation_params"] = params
    new = ctx.make_node(base.op_type, base.inputs, [out], attrs, FUSED_DOMAIN, base.name)
    ctx.replace([prod] + nodes, [new])
    return True


def run(ctx: PassContext) -> bool:
    """Fuse every supported activation into the Conv/Gemm/MatMul whose only reader it is."""
    changed = False
    for act in list(ctx.graph.nodes):
        name = _activation(act) if act.inputs and id(act) not in ctx.removed else None
        if name is None:
            continue
        params = _params(ctx, act)
        prod = ctx.producer_of(act.inputs[0]) if params is not None else None
        if prod is None or not ctx.private(act.inputs[0]) or not ctx.is_float(act.inputs[0]):
            continue
        changed |= fuse(ctx, prod, [act], act.outputs[0], name, params)
    return changed
