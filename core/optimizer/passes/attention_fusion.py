"""Multi-head attention fusion. The subgraph BERT-style exporters write,

    q = Transpose(Reshape(Q, [0, 0, H, D]), [0, 2, 1, 3])      (K: perm [0, 2, 3, 1], V like Q)
    p = Softmax(MatMul(q, k) / c  [* c]  [+ mask], axis=-1)
    Y = Reshape(Transpose(MatMul(p, v), [0, 2, 1, 3]), [0, 0, H * D])

becomes one com.onnxedge MultiHeadAttention(Q, K, V[, mask]) with num_heads = H and scale
(1 / c, or c for a Mul, 1 without either). Q, K, V are the projected [batch, seq, H * D] tensors.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ... import ir
from ..context import FUSED_DOMAIN, PassContext
from ._match import is_op, sole_user
from .reshape_target import dims, root


def _private_producer(ctx: PassContext, name: str, op: str) -> Optional[ir.Node]:
    node = ctx.producer_of(name)
    return node if is_op(node, op) and ctx.private(name) else None


def _perm(node: Optional[ir.Node], perm: List[int]) -> bool:
    return node is not None and [int(p) for p in node.attributes.get("perm", [])] == perm


def _heads(ctx: PassContext, reshape: ir.Node) -> Optional[Tuple[int, int]]:
    """(H, D) when `reshape` splits a [batch, seq, H * D] value into [batch, seq, H, D]."""
    target = ctx.const(reshape.inputs[1]) if len(reshape.inputs) > 1 else None
    if target is None or target.size != 4 or int(reshape.attributes.get("allowzero", 0)):
        return None
    t = [int(v) for v in target.reshape(-1)]
    src = ctx.shape(reshape.inputs[0])
    if -1 in t[2:] and t[2:].count(-1) == 1 and max(t[2:]) > 0 and src is not None \
            and len(src) == 3 and isinstance(src[2], int) and src[2] % max(t[2:]) == 0:
        known = max(t[2:])    # [.., .., -1, D] or [.., .., H, -1] on a statically sized hidden dim
        t[2:] = [src[2] // known if v == -1 else v for v in t[2:]]
    if t[2] <= 0 or t[3] <= 0:
        return None
    if t[:2] != [0, 0]:
        if src is None or len(src) != 3 or t[:2].count(-1) > 1:
            return None
        if any(v not in (0, -1, src[i]) for i, v in enumerate(t[:2])):
            return None
    return t[2], t[3]


def _merges_heads(ctx: PassContext, target: Optional[list], query: str, hidden: int) -> bool:
    """True when a Reshape to `target` turns [batch, seq, H, D] into [batch, seq, H * D]: its
    first dims copy (0) or provably equal the query's batch and sequence dims, at most one -1."""
    if target is None or len(target) != 3 or target[2] not in (-1, hidden):
        return False
    lead = target[:2]
    if target.count(-1) > 1 or any(isinstance(d, int) and d not in (0, -1) for d in lead):
        return False
    return all(isinstance(d, int) or root(ctx, d[0], d[1]) == root(ctx, query, i)
               for i, d in enumerate(lead))


def _split(ctx: PassContext, name: str, perm: List[int]):
    """(source, (H, D), nodes) for Transpose(Reshape(source, [.., .., H, D]), perm)."""
    tr = _private_producer(ctx, name, "Transpose")
    if tr is None:
        return None
    nodes = [tr]
    if perm == [0, 2, 3, 1] and _perm(tr, [0, 1, 3, 2]):   # K as heads-first, then swapped
        inner = _private_producer(ctx, tr.inputs[0], "Transpose")
        if not _perm(inner, [0, 2, 1, 3]):
            return None
        nodes.insert(0, inner)
        tr, perm = inner, [0, 2, 1, 3]
    rs = _private_producer(ctx, tr.inputs[0], "Reshape")
    if not _perm(tr, perm) or rs is None:
        return None
    heads = _heads(ctx, rs)
    return None if heads is None else (rs.inputs[0], heads, [rs] + nodes)


def _scores(ctx: PassContext, name: str):
    """(q, k, scale, nodes) for [MatMul(q, k)] [/ c or * c] feeding the softmax."""
    node = _private_producer(ctx, name, "Div") or _private_producer(ctx, name, "Mul")
    scale, nodes = 1.0, []
    if node is not None:
        for i in (0, 1):
            c = ctx.scalar(node.inputs[1 - i])
            if c is None or (node.op_type == "Div" and i == 1) or c == 0:
                continue
            scale = 1.0 / c if node.op_type == "Div" else c
            name, nodes = node.inputs[i], [node]
            break
        else:
            return None
    mm = _private_producer(ctx, name, "MatMul")
    return None if mm is None else (mm.inputs[0], mm.inputs[1], scale, [mm] + nodes)


def _match(ctx: PassContext, softmax: ir.Node):
    logits, mask, nodes = softmax.inputs[0], "", []
    add = _private_producer(ctx, logits, "Add")
    found = None
    if add is not None:
        for i in (0, 1):
            found = _scores(ctx, add.inputs[i])
            if found is not None:
                mask, nodes = add.inputs[1 - i], [add]
                break
    if found is None:
        found = _scores(ctx, logits)
    if found is None:
        return None
    q_t, k_t, scale, score_nodes = found
    q, k = _split(ctx, q_t, [0, 2, 1, 3]), _split(ctx, k_t, [0, 2, 3, 1])
    ctx_mm = sole_user(ctx, softmax.outputs[0], "MatMul")
    if q is None or k is None or ctx_mm is None or ctx_mm.inputs[0] != softmax.outputs[0]:
        return None
    v = _split(ctx, ctx_mm.inputs[1], [0, 2, 1, 3])
    back = sole_user(ctx, ctx_mm.outputs[0], "Transpose")
    merge = sole_user(ctx, back.outputs[0], "Reshape") if _perm(back, [0, 2, 1, 3]) else None
    if v is None or merge is None or not q[1] == k[1] == v[1]:
        return None
    heads, size = q[1]
    if len(merge.inputs) < 2 or int(merge.attributes.get("allowzero", 0)) \
            or not _merges_heads(ctx, dims(ctx, merge.inputs[1]), q[0], heads * size):
        return None
    all_nodes = q[2] + k[2] + v[2] + score_nodes + nodes + [softmax, ctx_mm, back, merge]
    return [q[0], k[0], v[0], mask], heads, scale, all_nodes


def run(ctx: PassContext) -> bool:
    """Replace every matching attention subgraph by one MultiHeadAttention; True when one was."""
    changed = False
    default_axis = -1 if ctx.opsets.get("", 0) >= 13 else 1
    for softmax in list(ctx.graph.nodes):
        if id(softmax) in ctx.removed or not is_op(softmax, "Softmax") \
                or int(softmax.attributes.get("axis", default_axis)) not in (-1, 3):
            continue
        found = _match(ctx, softmax)
        if found is None or not ctx.is_float(found[0][0]):
            continue
        inputs, heads, scale, nodes = found
        if not inputs[3]:
            inputs = inputs[:3]
        new = ctx.make_node("MultiHeadAttention", inputs, [nodes[-1].outputs[0]],
                            {"num_heads": heads, "scale": float(scale)}, FUSED_DOMAIN, softmax.name)
        ctx.replace(nodes, [new])
        changed = True
    return changed
