"""onnxruntime's transformer contrib ops (com.microsoft) onto onnxedge's own forms, so that the
providers that claim onnxedge's fused ops (WebGPU, the C kernels, ...) run them too:

    Gelu(X)                      -> Gelu(X, approximate="none")
    BiasGelu(A, B)               -> Gelu(Add(A, B), approximate="none")
    FastGelu(X[, bias])          -> Gelu([Add(X, bias)], approximate="tanh")
    SkipLayerNormalization(x, skip, gamma[, beta][, bias])
                                 -> LayerNormalization(Add(Add(x, skip), bias), gamma, beta)
                                    (its input_skip_bias_sum output is the Add's; only when
                                    the mean / inv_std_var outputs are unused)
    SkipSimplifiedLayerNormalization(x, skip, gamma[, bias])
                                 -> SimplifiedLayerNormalization(Add(Add(x, skip), bias), gamma)
                                    (default domain, onnxruntime's RMS normalization; same
                                    conditions)
    MultiHeadAttention(q, k, v[, bias]) with 3-D q/k/v, no mask, past or present
                                 -> com.onnxedge MultiHeadAttention([q + bq], [k + bk], [v + bv])
    Attention(x, W, b[, mask_index]) with constant W and b, no past / present / attention_bias,
    unidirectional=0, a mask of valid lengths (B) or a raw 2-D mask (B, S) or none
                                 -> three com.onnxedge FusedMatMul (x @ Wq + bq, ...) and a
                                    com.onnxedge MultiHeadAttention whose additive mask is built
                                    from the mask index: mask_filter_value where masked, else 0

Gelu is ai.onnx's from opset 20 and LayerNormalization ai.onnx's from opset 17 (com.onnxedge's
before). Only float32 nodes are mapped (their fused forms take float32 masks). The numbers stay
onnxruntime's: the mask is additive with mask_filter_value, as its CPU kernels apply it.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional

import numpy as np

from ... import ir
from ..context import FUSED_DOMAIN, PassContext

MS = "com.microsoft"


def _unused(ctx: PassContext, name: str) -> bool:
    return not name or (name not in ctx.outputs and not ctx.live_users(name))


def _input(node: ir.Node, i: int) -> str:
    return node.inputs[i] if len(node.inputs) > i else ""


def _is_f32(ctx: PassContext, *names: str) -> bool:
    """True when the node's float inputs among `names` are float32 (at least one known, none
    of another float type; inputs inferred as non-float are ignored, since a contrib op's
    inputs share one float type T)."""
    kinds = [ctx.dtype(n) for n in names if n]
    floats = [d for d in kinds if d is not None and d.kind in "fV"]
    return bool(floats) and all(d == np.dtype(np.float32) for d in floats)


def _gelu(ctx: PassContext, x: str, out: str, approximate: str, name: str) -> ir.Node:
    attrs = {"approximate": approximate}
    if ctx.opsets.get("", 0) >= 20:
        return ir.Node("Gelu", [x], [out], attrs, name=name)
    return ctx.make_node("Gelu", [x], [out], attrs, FUSED_DOMAIN, name)


def _map_gelu(ctx: PassContext, node: ir.Node) -> bool:
    x = node.inputs[0]
    bias = _input(node, 1) if node.op_type != "Gelu" else ""
    if not _is_f32(ctx, x, bias):
        return False
    nodes: List[ir.Node] = []
    if bias:
        summed = ctx.fresh_name(node.outputs[0] + "_biased")
        nodes.append(ir.Node("Add", [x, bias], [summed], name=node.name + "_bias"))
        x = summed
    approximate = "tanh" if node.op_type == "FastGelu" else "none"
    nodes.append(_gelu(ctx, x, node.outputs[0], approximate, node.name))
    ctx.replace([node], nodes)
    return True


def _map_skip_layer_norm(ctx: PassContext, node: ir.Node) -> bool:
    outs = list(node.outputs) + [""] * (4 - len(node.outputs))
    if not (_unused(ctx, outs[1]) and _unused(ctx, outs[2])):
        return False
    simplified = node.op_type == "SkipSimplifiedLayerNormalization"
    if simplified:   # (input, skip, gamma[, bias]): no beta
        x, skip, gamma, bias = (_input(node, i) for i in range(4))
        beta = ""
    else:
        x, skip, gamma, beta, bias = (_input(node, i) for i in range(5))
    if not _is_f32(ctx, x, skip, gamma, beta, bias):
        return False
    eps = float(node.attributes.get("epsilon", 1e-12))
    has_sum = not _unused(ctx, outs[3])
    first = outs[3] if has_sum and not bias else ctx.fresh_name(outs[0] + "_skip_sum")
    nodes = [ir.Node("Add", [x, skip], [first], name=node.name + "_skip")]
    total = first
    if bias:
        total = outs[3] if has_sum else ctx.fresh_name(outs[0] + "_skip_bias_sum")
        nodes.append(ir.Node("Add", [first, bias], [total], name=node.name + "_bias"))
    ln_in = [total, gamma] + ([beta] if beta else [])
    attrs = {"axis": -1, "epsilon": eps}
    if simplified:   # onnxruntime's RMS normalization, registered in the default domain
        nodes.append(ir.Node("SimplifiedLayerNormalization", ln_in, [outs[0]], attrs, name=node.name))
    elif ctx.opsets.get("", 0) >= 17:
        nodes.append(ir.Node("LayerNormalization", ln_in, [outs[0]], attrs, name=node.name))
    else:
        nodes.append(ctx.make_node("LayerNormalization", ln_in, [outs[0]], attrs, FUSED_DOMAIN,
                                   node.name))
    ctx.replace([node], nodes)
    return True


def _static_dim(ctx: PassContext, name: str, axis: int) -> Optional[int]:
    shape = ctx.shape(name)
    if shape is None or not -len(shape) <= axis < len(shape):
        return None
    d = shape[axis]
    return d if isinstance(d, int) else None


def _mha_node(ctx: PassContext, q: str, k: str, v: str, mask: str, out: str, heads: int,
              scale: float, name: str) -> ir.Node:
    ins = [q, k, v] + ([mask] if mask else [])
    return ctx.make_node("MultiHeadAttention", ins, [out],
                         {"num_heads": heads, "scale": scale}, FUSED_DOMAIN, name)


def _map_mha(ctx: PassContext, node: ir.Node) -> bool:
    q, k, v, bias = (_input(node, i) for i in range(4))
    rest = [i for i in node.inputs[4:] if i]
    if rest or not k or not v or any(not _unused(ctx, o) for o in node.outputs[1:]):
        return False
    if int(node.attributes.get("unidirectional", 0)):
        return False
    if any(ctx.shape(n) is None or len(ctx.shape(n)) != 3 for n in (q, k, v)) \
            or not _is_f32(ctx, q, k, v, bias):
        return False
    heads = int(node.attributes.get("num_heads", 0))
    hidden = _static_dim(ctx, q, 2)
    b = ctx.const(bias) if bias else None
    if heads <= 0 or hidden is None or hidden % heads or (bias and b is None):
        return False
    scale = float(node.attributes.get("scale", 0.0)) or 1.0 / math.sqrt(hidden // heads)
    nodes: List[ir.Node] = []
    parts = [q, k, v]
    if b is not None:
        b = b.astype(np.float32).reshape(-1)
        bounds = [(0, hidden), (hidden, 2 * hidden), (2 * hidden, b.shape[0])]
        for i, (lo, hi) in enumerate(bounds):
            c = ctx.add_initializer(node.name + "_bias%d" % i, np.ascontiguousarray(b[lo:hi]))
            out = ctx.fresh_name(parts[i] + "_biased")
            nodes.append(ir.Node("Add", [parts[i], c], [out], name=node.name + "_bias%d" % i))
            parts[i] = out
    nodes.append(_mha_node(ctx, parts[0], parts[1], parts[2], "", node.outputs[0], heads, scale,
                           node.name))
    ctx.replace([node], nodes)
    return True


def _const_i64(ctx: PassContext, base: str, values: Any) -> str:
    return ctx.add_initializer(base, np.asarray(values, dtype=np.int64))


def _mask_nodes(ctx: PassContext, node: ir.Node, x: str, mask: str, filt: float,
                nodes: List[ir.Node]) -> Optional[str]:
    """Nodes computing the additive [B, 1, 1, S] float32 mask from a (B) mask of valid lengths
    or a raw (B, S) 0/1 mask; returns its name (None when the mask has another form)."""
    shape = ctx.shape(mask)
    maker = ctx.producer_of(mask)
    if maker is not None and maker.domain == MS and maker.op_type == "EmbedLayerNormalization" \
            and maker.outputs[1:2] == [mask]:
        shape = ["batch"]           # its mask_index output: one valid length per batch row
    elif shape is None or len(shape) not in (1, 2):
        return None
    elif len(shape) == 1:
        xs = ctx.shape(x)
        if not xs or shape[0] is None or shape[0] != xs[0]:
            return None   # (B) lengths only: a (2B) start/end mask needs a proof of its length
    base = node.name or "attention"

    def fresh(tag: str) -> str:
        return ctx.fresh_name("%s_mask_%s" % (base, tag))

    valid = fresh("valid")
    if len(shape) == 1:
        shp, seq, pos, lens, col = (fresh(t) for t in ("shape", "seq", "pos", "len", "lencol"))
        nodes += [
            ir.Node("Shape", [x], [shp], name=shp),
            ir.Node("Gather", [shp, _const_i64(ctx, base + "_one", 1)], [seq], {"axis": 0},
                    name=seq),
            ir.Node("Range", [_const_i64(ctx, base + "_zero", 0), seq,
                              _const_i64(ctx, base + "_step", 1)], [pos], name=pos),
            ir.Node("Cast", [mask], [lens], {"to": 7}, name=lens),
            ir.Node("Reshape", [lens, _const_i64(ctx, base + "_col", [-1, 1])], [col],
                    name=col),
            ir.Node("Less", [pos, col], [valid], name=valid),
        ]
    else:
        nodes.append(ir.Node("Greater", [mask, ctx.add_initializer(
            base + "_zero_i", np.zeros((), dtype=np.dtype(ctx.dtype(mask) or np.int32)))],
            [valid], name=valid))
    flat, out = fresh("add2d"), fresh("add")
    zero = ctx.add_initializer(base + "_f0", np.zeros((), dtype=np.float32))
    low = ctx.add_initializer(base + "_filter", np.asarray(filt, dtype=np.float32))
    nodes += [ir.Node("Where", [valid, zero, low], [flat], name=flat),
              ir.Node("Reshape", [flat, _const_i64(ctx, base + "_b11s", [0, 1, 1, -1])], [out],
                      name=out)]
    return out


def _map_attention(ctx: PassContext, node: ir.Node) -> bool:
    x, w, bias, mask = (_input(node, i) for i in range(4))
    if [i for i in node.inputs[4:] if i] or any(not _unused(ctx, o) for o in node.outputs[1:]):
        return False
    a = node.attributes
    if int(a.get("unidirectional", 0)) or int(a.get("do_rotary", 0)) \
            or int(a.get("past_present_share_buffer", 0)):
        return False
    wt, bt = ctx.const(w), ctx.const(bias) if bias else None
    if wt is None or bt is None or wt.ndim != 2 or not _is_f32(ctx, x, w, bias):
        return False
    heads = int(a.get("num_heads", 0))
    total = wt.shape[1]
    sizes = [int(s) for s in a.get("qkv_hidden_sizes") or []] or [total // 3] * 3
    if heads <= 0 or len(sizes) != 3 or sum(sizes) != total or sizes[0] != sizes[1] \
            or sizes[0] % heads or sizes[2] % heads:
        return False
    nodes: List[ir.Node] = []
    mask_name = ""
    if mask:
        mask_name = _mask_nodes(ctx, node, x, mask, float(a.get("mask_filter_value", -10000.0)),
                                nodes) or ""
        if not mask_name:
            return False
    parts = []
    lo = 0
    base = node.name or "attention"
    for tag, size in zip("qkv", sizes):
        wi = ctx.add_initializer("%s_W%s" % (base, tag),
                                 np.ascontiguousarray(wt[:, lo:lo + size].astype(np.float32)))
        bi = ctx.add_initializer("%s_b%s" % (base, tag),
                                 np.ascontiguousarray(bt.reshape(-1)[lo:lo + size]
                                                      .astype(np.float32)))
        out = ctx.fresh_name("%s_%s" % (base, tag))
        nodes.append(ctx.make_node("FusedMatMul", [x, wi, bi], [out], {}, FUSED_DOMAIN,
                                   "%s_%s" % (base, tag)))
        parts.append(out)
        lo += size
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(sizes[0] // heads)
    nodes.append(_mha_node(ctx, parts[0], parts[1], parts[2], mask_name, node.outputs[0], heads,
                           scale, node.name))
    ctx.replace([node], nodes)
    return True


_MAPS = {"Gelu": _map_gelu, "BiasGelu": _map_gelu, "FastGelu": _map_gelu,
         "SkipLayerNormalization": _map_skip_layer_norm,
         "SkipSimplifiedLayerNormalization": _map_skip_layer_norm, "MultiHeadAttention": _map_mha,
         "Attention": _map_attention}


def run(ctx: PassContext) -> bool:
    """Map every com.microsoft node that has an onnxedge form; True when any was mapped."""
    changed = False
    for node in list(ctx.graph.nodes):
        if node.domain != MS or id(node) in ctx.removed:
            continue
        fn = _MAPS.get(node.op_type)
        if fn is not None and fn(ctx, node):
            changed = True
    return changed
