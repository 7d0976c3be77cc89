"""Which nodes the wasm SIMD provider runs, and why it passes over the others.

Pure Python (no `js`), so the claims are tested natively. A node is claimed when the C kernels
take it as declared: float32, 1-D and 2-D convolutions (1-D as 2-D with H = 1) and transposed
convolutions with constant weights, 2-D pools, LSTM / GRU with constant weights
(onnxedge.oxk_rnn.reason), the quantized ops (int8/uint8/int32: onnxedge.oxk_quant.CHECKS),
GEMMs against constant 2-D weights
(pre-packed into wasm memory once) or computed (MatMul over broadcast batches, B unpacked:
onnxedge.oxk_program.matmul_reason), com.onnxedge MultiHeadAttention (one C op:
oxk_program.attention_reason), epilogue activations the kernels have; and the ops only a
compiled program runs (activations and unary math, Add/Sub/Mul/Div/Pow/Max/Min whose broadcast
folds into three axes, Softmax/LogSoftmax over the last axis, Reshape/Flatten/Squeeze/Unsqueeze/
Identity: onnxedge.oxk_program.program_op_reason). `TABLE` holds the
`OpSupport` records; their checks read `facts` (`onnxedge.providers.support.Facts`: declared
types and the initializers no feed can override, `facts.consts`).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Set, Tuple

import numpy as np

from onnxedge import fused_ops, ir, oxk_program, oxk_quant, oxk_rnn
from onnxedge.fused_ops import DOMAIN as FUSED, MS_DOMAIN
from onnxedge.providers.support import Facts, NoFacts, OpSupport, SupportTable

FLOAT = 1
# Epilogue activations of the C kernels (oxk.h OXK_ACT_*), by com.onnxedge activation name.
ACT = {name: fused_ops.C_CODES[name] for name in fused_ops.C_EPILOGUE}


def activation(node: ir.Node) -> Tuple[str, Tuple[float, float]]:
    """(activation name, (p0, p1) for the C epilogue) of a fused node ("" for plain ops)."""
    name = fused_ops.activation_name(node) if node.op_type.startswith("Fused") else ""
    return name, fused_ops.epilogue_params(name, node.attributes.get("activation_params"))


def _declared(facts: Facts, name: str) -> Tuple[int, Optional[int]]:
    if not name:
        return 0, None
    return facts.elem_type(name), facts.rank(name)


def _float(facts: Facts, names: Sequence[str]) -> Optional[str]:
    for n in names:
        et, _ = _declared(facts, n)
        if n and et not in (0, FLOAT):
            return "input %r is not float32 (ONNX element type %d); the wasm kernels are float32" % (n, et)
    return None


def _rank(facts: Facts, name: str, ok: Sequence[int], what: str) -> Optional[str]:
    _, rank = _declared(facts, name)
    if rank is not None and rank not in ok:
        return "input %r has rank %d; the wasm provider runs %s" % (name, rank, what)
    return None


def _const(consts: Dict[str, Any], name: str, ndim: Any, what: str) -> Optional[str]:
    """Why `name` is not a constant float32 initializer of rank `ndim` (an int or a tuple of them)."""
    ranks = ndim if isinstance(ndim, tuple) else (ndim,)
    w = consts.get(name)
    if not isinstance(w, np.ndarray):
        return "%s %r is not a constant initializer (weights are pre-packed into wasm memory once)" \
            % (what, name)
    if w.dtype != np.float32 or w.ndim not in ranks:
        return "%s %r is %s of rank %d; expected float32 of rank %s" % (
            what, name, w.dtype, w.ndim, " or ".join(str(r) for r in ranks))
    return None


def _act_reason(node: ir.Node) -> Optional[str]:
    name, _ = activation(node)
    if name not in ACT:
        return "activation %r has no wasm epilogue (it has: %s)" % (
            name, ", ".join(a for a in ACT if a))
    return None


def _conv(node: ir.Node, facts: Facts) -> Optional[str]:
    """Conv / FusedConv: 2-D, or 1-D (NCL: run as 2-D with H = 1), constant float32 weights."""
    ins = list(node.inputs) + [""] * 4
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) not in (1, 2):
        return "kernel_shape %s is not 1-D or 2-D; the wasm provider runs 1-D and 2-D convolutions" \
            % (list(ks),)
    why = _act_reason(node) or _float(facts, ins[:4]) or \
        _rank(facts, ins[0], (3, 4), "NCL / NCHW 1-D and 2-D convolutions") or \
        _const(facts.consts, ins[1], (3, 4), "weight")
    if why:
        return why
    w = facts.consts[ins[1]]
    _, rank = _declared(facts, ins[0])
    if rank is not None and rank != w.ndim:
        return "input %r has rank %d, weight %r rank %d" % (ins[0], rank, ins[1], w.ndim)
    group = int(node.attributes.get("group", 1))
    if group < 1 or w.shape[0] % group:
        return "group %d does not divide the %d output channels" % (group, w.shape[0])
    if ins[2]:
        bias = facts.consts.get(ins[2])
        return _const(facts.consts, ins[2], 1, "bias") or \
            (None if bias.shape == (w.shape[0],) else "bias %r has shape %s, expected (%d,)"
             % (ins[2], bias.shape, w.shape[0]))
    return None


def _convt(node: ir.Node, facts: Facts) -> Optional[str]:
    """ConvTranspose: 1-D or 2-D, float32, constant weights (packed once) and bias."""
    ins = list(node.inputs) + [""] * 3
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) not in (1, 2):
        return "kernel_shape %s is not 1-D or 2-D; the wasm provider runs 1-D and 2-D transposed " \
            "convolutions" % (list(ks),)
    why = _float(facts, ins[:3]) or \
        _rank(facts, ins[0], (3, 4), "NCL / NCHW transposed convolutions") or \
        _const(facts.consts, ins[1], (3, 4), "weight")
    if why:
        return why
    w = facts.consts[ins[1]]
    group = int(node.attributes.get("group", 1))
    if group < 1 or w.shape[0] % group:
        return "group %d does not divide the %d input channels" % (group, w.shape[0])
    if ins[2]:
        bias = facts.consts.get(ins[2])
        cout = w.shape[1] * group
        return _const(facts.consts, ins[2], 1, "bias") or \
            (None if bias.shape == (cout,) else "bias %r has shape %s, expected (%d,)"
             % (ins[2], bias.shape, cout))
    return None


def _rnn(node: ir.Node, facts: Facts) -> Optional[str]:
    """LSTM / GRU: the rule every engine provider shares (onnxedge.oxk_rnn.reason)."""
    return oxk_rnn.reason(node, facts, "wasm")


def _gemm(node: ir.Node, facts: Facts) -> Optional[str]:
    a = node.attributes
    ins = list(node.inputs) + [""] * 3
    if int(a.get("transA", 0)):
        return "transA=1 is not supported (the wasm kernels read A row-major)"
    why = _act_reason(node) or _float(facts, ins[:3]) or \
        _rank(facts, ins[0], (2,), "2-D Gemm") or _const(facts.consts, ins[1], 2, "B")
    if why or not ins[2] or float(a.get("beta", 1.0)) == 0.0:
        return why
    b, c = facts.consts[ins[1]], facts.consts.get(ins[2])
    n = b.shape[0] if int(a.get("transB", 0)) else b.shape[1]
    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.size != n or c.ndim > 2 or \
            (c.ndim == 2 and c.shape[0] != 1):
        return "C %r is not a constant per-column bias of %d values (the wasm epilogue adds one " \
               "bias per column)" % (ins[2], n)
    return None


def _matmul(node: ir.Node, facts: Facts) -> Optional[str]:
    ins = list(node.inputs) + [""] * 3
    if ins[1] not in facts.consts:   # B computed at run time: oxk_matmul, B unpacked
        why = _act_reason(node) or oxk_program.matmul_reason(node, facts, "wasm")
        if why or not ins[2]:
            return why
        return _const(facts.consts, ins[2], 1, "bias (with a computed B)")
    why = _act_reason(node) or _float(facts, ins[:3]) or \
        _const(facts.consts, ins[1], 2, "B (a constant B must be 2-D)")
    if why:
        return why
    _, rank = _declared(facts, ins[0])
    if rank == 0:
        return "input %r is a scalar; MatMul needs rank >= 1" % ins[0]
    if ins[2]:
        n = facts.consts[ins[1]].shape[1]
        return _const(facts.consts, ins[2], 1, "bias") or \
            (None if facts.consts[ins[2]].shape == (n,) else "bias %r has shape %s, expected (%d,)"
             % (ins[2], facts.consts[ins[2]].shape, n))
    return None


def _pool(node: ir.Node, facts: Facts) -> Optional[str]:
    if node.op_type in ("MaxPool", "AveragePool"):
        if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
            return "MaxPool's Indices output is not produced by the wasm kernel"
        ks = node.attributes.get("kernel_shape") or []
        if len(ks) != 2:
            return "kernel_shape %s is not 2-D; the wasm provider runs 2-D pooling" % (list(ks),)
        bad = _rank(facts, node.inputs[0], (4,), "NCHW 2-D pooling")
    else:
        bad = _rank(facts, node.inputs[0], range(3, 64), "global pooling of rank >= 3")
    return _float(facts, node.inputs[:1]) or bad


def _attention(node: ir.Node, facts: Facts) -> Optional[str]:
    """com.onnxedge MultiHeadAttention: the rule every engine provider shares."""
    return oxk_program.attention_reason(node, facts, "wasm")


def _program_only(node: ir.Node, facts: Facts) -> Optional[str]:
    """Activations, binary ops, Softmax and views: run inside the group's compiled program (node
    by node, the CPU kernels run them)."""
    return oxk_program.program_op_reason(node, facts, "wasm")


def _build(node: ir.Node, kernels: Any, consts: Dict[str, np.ndarray]) -> Any:
    from . import ops   # the kernels' side (pure Python too, but not needed for claims)
    return ops.build(node, kernels, consts)


TABLE = SupportTable("WasmSimdExecutionProvider")
for _dom, _op, _check in (("", "Conv", _conv), (FUSED, "FusedConv", _conv), ("", "ConvTranspose", _convt),
                          ("", "LSTM", _rnn), ("", "GRU", _rnn),
                          (MS_DOMAIN, "FusedConv", _conv), ("", "Gemm", _gemm),
                          (FUSED, "FusedGemm", _gemm), ("", "MatMul", _matmul),
                          (FUSED, "FusedMatMul", _matmul), ("", "MaxPool", _pool),
                          ("", "AveragePool", _pool), ("", "GlobalAveragePool", _pool),
                          ("", "GlobalMaxPool", _pool),
                          (FUSED, fused_ops.MULTI_HEAD_ATTENTION, _attention)):
    TABLE.add(OpSupport(_dom, _op, check=_check, build=_build))
for _dom, _op, _check in oxk_quant.CHECKS:   # int8 / uint8 / int32: the rules every engine shares
    TABLE.add(OpSupport(_dom, _op, check=_check, build=_build))
for _op in oxk_program.PROGRAM_ONLY_OPS:
    TABLE.add(OpSupport("", _op, check=_program_only, build=_build))
for _op in oxk_program.FUSED_PROGRAM_OPS:
    TABLE.add(OpSupport(FUSED, _op, check=_program_only, build=_build))
OPS = TABLE.keys()   # (domain, op) pairs the provider may claim


def support_table() -> SupportTable:
    """The wasm provider's op-support records (docs/OPERATORS.md reads them)."""
    return TABLE


def constants(graph: ir.Graph) -> Dict[str, np.ndarray]:
    """The initializers no feed can override (graph inputs of the same name can)."""
    fed: Set[str] = {v.name for v in graph.inputs}
    return {k: v for k, v in graph.initializers.items() if k not in fed and isinstance(v, np.ndarray)}


def _missing(node: ir.Node) -> str:
    return "no wasm SIMD kernel for %s (domain %s); it runs %s" % (
        node.op_type, node.domain or "ai.onnx", ", ".join(TABLE.ops()))


def reason(node: ir.Node, facts: Optional[Facts] = None, opset: Optional[int] = None
           ) -> Optional[str]:
    """Why the wasm provider does not run `node` (None: it does); `facts` None: nothing known."""
    facts = facts if facts is not None else NoFacts()
    if TABLE.lookup(node, opset) is not None and node.subgraphs():
        return "%s has subgraphs" % node.op_type
    return TABLE.reason(node, opset, facts, _missing)


__all__ = ["ACT", "OPS", "TABLE", "activation", "constants", "reason", "support_table"]
