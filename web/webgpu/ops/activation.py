"""Activations on the GPU: each is a WGSL expression over `x` run by the elementwise unary
template (PRelu, with its slope tensor, by the broadcasting binary one); attributes travel as the
uniforms `u.alpha`, `u.beta`, `u.gamma`.
"""
from __future__ import annotations

from typing import Any, List, Optional

from onnxedge import fused_ops

from ..runtime import Recorder
from .elementwise import binary, unary
from .table import F32, attr, float_inputs, register

# op -> (expression, {attribute: default} in the order alpha, beta, gamma)
ACTIVATIONS = {
    "Relu": ("max(x, 0.0)", {}),
    "Sigmoid": ("sigmoid_(x)", {}),
    "Tanh": ("tanh_(x)", {}),
    "Softplus": ("softplus_(x)", {}),
    "Softsign": ("x / (1.0 + abs(x))", {}),
    "Mish": ("mish_(x)", {}),
    "LeakyRelu": ("select(u.alpha * x, x, x >= 0.0)", {"alpha": 0.01}),
    "Elu": ("select(u.alpha * (exp(x) - 1.0), x, x >= 0.0)", {"alpha": 1.0}),
    "Celu": ("max(x, 0.0) + min(0.0, u.alpha * (exp(x / u.alpha) - 1.0))", {"alpha": 1.0}),
    "Selu": ("u.beta * select(u.alpha * (exp(x) - 1.0), x, x > 0.0)",
             {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
    "ThresholdedRelu": ("select(0.0, x, x > u.alpha)", {"alpha": 1.0}),
    "HardSigmoid": ("clamp(u.alpha * x + u.beta, 0.0, 1.0)", {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": ("x * clamp(x / 6.0 + 0.5, 0.0, 1.0)", {}),
    "Gelu": ("0.5 * x * (1.0 + erf_(x * 0.70710678118654752))", {}),
}
GELU_TANH = "0.5 * x * (1.0 + tanh_(0.7978845608028654 * (x + 0.044715 * x * x * x)))"
PRELU = "select(a * b, a, a >= 0.0)"


def _check_activation(node: Any, facts: Any) -> Optional[str]:
    if node.op_type == "PRelu":
        return float_inputs(node, facts, [0, 1])
    why = float_inputs(node, facts, [0])
    if why:
        return why
    if node.op_type == "Gelu" and attr(node, "approximate", "none") not in ("none", "tanh"):
        return "Gelu approximate=%r is not 'none' or 'tanh'" % attr(node, "approximate")
    return None


@register(["Gelu"], check=_check_activation, domain=fused_ops.DOMAIN)
@register(list(ACTIVATIONS) + ["PRelu"], check=_check_activation)
def run_activation(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Every op of the ACTIVATIONS table, and PRelu (x, slope broadcast as numpy does)."""
    op = node.op_type
    if op == "PRelu":
        return [binary(rt, ins[0], ins[1], PRELU, F32)]
    expr, defaults = ACTIVATIONS[op]
    if op == "Gelu" and attr(node, "approximate", "none") == "tanh":
        expr = GELU_TANH
    params = [float(attr(node, k, v)) for k, v in defaults.items()]
    if op == "Selu":
        params = [params[0], params[1]]
    return [unary(rt, ins[0], expr, F32, params)]


__all__ = ["ACTIVATIONS", "GELU_TANH", "run_activation"]
