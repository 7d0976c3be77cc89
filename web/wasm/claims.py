"""Which nodes the wasm SIMD provider runs, and why it passes over the others.

Pure Python (no `js`), so the claims are tested natively. A node is claimed when the C kernels
take it as declared: float32, 2-D convolutions and pools, GEMMs against constant 2-D weights
(pre-packed into wasm memory once), epilogue activations the kernels have. `consts` is the set
of initializer names no feed can override.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Set, Tuple

import numpy as np

from onnxedge import ir

FLOAT = 1
TypeOf = Callable[[str], Optional[ir.TypeInfo]]
# Epilogue activations of the C kernels (oxk.h OXK_ACT_*), by com.onnxedge activation name.
ACT = {"": 0, "Relu": 1, "Clip": 2, "Sigmoid": 3, "LeakyRelu": 5, "Tanh": 6}
OPS = {("", "Conv"), ("com.onnxedge", "FusedConv"), ("com.microsoft", "FusedConv"),
       ("", "Gemm"), ("com.onnxedge", "FusedGemm"), ("", "MatMul"), ("com.onnxedge", "FusedMatMul"),
       ("", "MaxPool"), ("", "AveragePool"), ("", "GlobalAveragePool"), ("", "GlobalMaxPool")}


def text(v: Any) -> str:
    """An attribute string (bytes or str) as str."""
    return v.decode() if isinstance(v, bytes) else str(v)


def activation(node: ir.Node) -> Tuple[str, Tuple[float, float]]:
    """(activation name, (p0, p1) for the C epilogue) of a fused node ("" for plain ops)."""
    a = node.attributes
    name = text(a.get("activation", "")) if node.op_type.startswith("Fused") else ""
    p = [float(v) for v in (a.get("activation_params") or [])]
    if name == "Clip":
        return name, (p[0] if p else float("-inf"), p[1] if len(p) > 1 else float("inf"))
    if name == "LeakyRelu":
        return name, (p[0] if p else 0.01, 0.0)
    return name, (0.0, 0.0)


def _declared(type_of: TypeOf, name: str) -> Tuple[int, Optional[int]]:
    t = type_of(name) if name else None
    if t is None or t.kind != "tensor":
        return 0, None
    return t.elem_type, (None if t.shape is None else len(t.shape))


def _float(type_of: TypeOf, names: Sequence[str]) -> Optional[str]:
    for n in names:
        et, _ = _declared(type_of, n)
        if n and et not in (0, FLOAT):
            return "input %r is not float32 (ONNX element type %d); the wasm kernels are float32" % (n, et)
    return None


def _rank(type_of: TypeOf, name: str, ok: Sequence[int], what: str) -> Optional[str]:
    _, rank = _declared(type_of, name)
    if rank is not None and rank not in ok:
        return "input %r has rank %d; the wasm provider runs %s" % (name, rank, what)
    return None


def _const(consts: Dict[str, Any], name: str, ndim: int, what: str) -> Optional[str]:
    w = consts.get(name)
    if not isinstance(w, np.ndarray):
        return "%s %r is not a constant initializer (weights are pre-packed into wasm memory once)" \
            % (what, name)
    if w.dtype != np.float32 or w.ndim != ndim:
        return "%s %r is %s of rank %d; expected float32 of rank %d" % (what, name, w.dtype, w.ndim, ndim)
    return None


def _act_reason(node: ir.Node) -> Optional[str]:
    name, _ = activation(node)
    if name not in ACT:
        return "activation %r has no wasm epilogue (it has: %s)" % (
            name, ", ".join(a for a in ACT if a))
    return None


def _conv(node: ir.Node, type_of: TypeOf, consts: Dict[str, Any]) -> Optional[str]:
    ins = list(node.inputs) + [""] * 4
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) != 2:
        return "kernel_shape %s is not 2-D; the wasm provider runs 2-D convolutions" % (list(ks),)
    why = _act_reason(node) or _float(type_of, ins[:4]) or \
        _rank(type_of, ins[0], (4,), "NCHW 2-D convolutions") or _const(consts, ins[1], 4, "weight")
    if why:
        return why
    w = consts[ins[1]]
    group = int(node.attributes.get("group", 1))
    if group < 1 or w.shape[0] % group:
        return "group %d does not divide the %d output channels" % (group, w.shape[0])
    if ins[2]:
        return _const(consts, ins[2], 1, "bias") or \
            (None if consts[ins[2]].shape == (w.shape[0],) else "bias %r has shape %s, expected (%d,)"
             % (ins[2], consts[ins[2]].shape, w.shape[0]))
    return None


def _gemm(node: ir.Node, type_of: TypeOf, consts: Dict[str, Any]) -> Optional[str]:
    a = node.attributes
    ins = list(node.inputs) + [""] * 3
    if int(a.get("transA", 0)):
        return "transA=1 is not supported (the wasm kernels read A row-major)"
    why = _act_reason(node) or _float(type_of, ins[:3]) or \
        _rank(type_of, ins[0], (2,), "2-D Gemm") or _const(consts, ins[1], 2, "B")
    if why or not ins[2] or float(a.get("beta", 1.0)) == 0.0:
        return why
    b, c = consts[ins[1]], consts.get(ins[2])
    n = b.shape[0] if int(a.get("transB", 0)) else b.shape[1]
    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.size != n or c.ndim > 2 or \
            (c.ndim == 2 and c.shape[0] != 1):
        return "C %r is not a constant per-column bias of %d values (the wasm epilogue adds one " \
               "bias per column)" % (ins[2], n)
    return None


def _matmul(node: ir.Node, type_of: TypeOf, consts: Dict[str, Any]) -> Optional[str]:
    ins = list(node.inputs) + [""] * 3
    why = _act_reason(node) or _float(type_of, ins[:3]) or \
        _const(consts, ins[1], 2, "B (batched B is not supported)")
    if why:
        return why
    _, rank = _declared(type_of, ins[0])
    if rank == 0:
        return "input %r is a scalar; MatMul needs rank >= 1" % ins[0]
    if ins[2]:
        n = consts[ins[1]].shape[1]
        return _const(consts, ins[2], 1, "bias") or \
            (None if consts[ins[2]].shape == (n,) else "bias %r has shape %s, expected (%d,)"
             % (ins[2], consts[ins[2]].shape, n))
    return None


def _pool(node: ir.Node, type_of: TypeOf, consts: Dict[str, Any]) -> Optional[str]:
    if node.op_type in ("MaxPool", "AveragePool"):
        if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
            return "MaxPool's Indices output is not produced by the wasm kernel"
        ks = node.attributes.get("kernel_shape") or []
        if len(ks) != 2:
            return "kernel_shape %s is not 2-D; the wasm provider runs 2-D pooling" % (list(ks),)
        bad = _rank(type_of, node.inputs[0], (4,), "NCHW 2-D pooling")
    else:
        bad = _rank(type_of, node.inputs[0], range(3, 64), "global pooling of rank >= 3")
    return _float(type_of, node.inputs[:1]) or bad


_CHECKS: Dict[str, Callable[[ir.Node, TypeOf, Dict[str, Any]], Optional[str]]] = {
    "Conv": _conv, "FusedConv": _conv, "Gemm": _gemm, "FusedGemm": _gemm, "MatMul": _matmul,
    "FusedMatMul": _matmul, "MaxPool": _pool, "AveragePool": _pool, "GlobalAveragePool": _pool,
    "GlobalMaxPool": _pool}


def constants(graph: ir.Graph) -> Dict[str, np.ndarray]:
    """The initializers no feed can override (graph inputs of the same name can)."""
    fed: Set[str] = {v.name for v in graph.inputs}
    return {k: v for k, v in graph.initializers.items() if k not in fed and isinstance(v, np.ndarray)}


def reason(node: ir.Node, type_of: TypeOf, consts: Dict[str, Any]) -> Optional[str]:
    """Why the wasm provider does not run `node` (None: it does)."""
    if (node.domain, node.op_type) not in OPS:
        return "no wasm SIMD kernel for %s (domain %s); it runs %s" % (
            node.op_type, node.domain or "ai.onnx", ", ".join(sorted({op for _, op in OPS})))
    if node.subgraphs():
        return "%s has subgraphs" % node.op_type
    return _CHECKS[node.op_type](node, type_of, consts)


__all__ = ["ACT", "OPS", "activation", "constants", "reason", "text"]
