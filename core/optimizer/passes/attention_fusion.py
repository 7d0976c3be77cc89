"""Multi-head attention fusion. The subgraph exporters write,

    q = Transpose(Reshape(Q, [b, s, H, D]), [0, 2, 1, 3])      (K: perm [0, 2, 3, 1], V like Q)
    p = Softmax(MatMul(q [* a], k [* b]) [/ c or * c] [+ mask], axis=-1)   [Where(IsNaN(p), 0, p)]
    Y = Reshape(Transpose(MatMul(p, v), [0, 2, 1, 3]), [b, s, H * D])

becomes one com.onnxedge MultiHeadAttention(Q, K, V[, mask]) with num_heads = H, scale (1 / c,
or c for a Mul, times a * b when Q and K are each scaled, 1 without any) and nan_to_zero = 1
when the Where(IsNaN) guard is there. Q, K, V are the projected [batch, seq, H * D] tensors.

Two exporters' forms are known: torch's TorchScript exporter (Div of the scores, K transposed
[0, 2, 3, 1]) and its dynamo exporter (`dynamo=True`: Q and K each multiplied by sqrt(scale), K
transposed heads-first then [0, 1, 3, 2] through 3-D Reshapes, which this pass first rewrites
to one Transpose; targets [b, s, ...] read from the shape of another value, allowzero=1; the
Where(IsNaN) guard after the Softmax). A merge Reshape that is not provably [batch, seq, H * D]
but ends in H * D (GPT-2's [-1, H * D]) stays, reading the fused node's output. Shape nodes
reading the heads-first Q, K or V (is_causal=True builds its mask from them) are rebuilt from the
projections' dims and the constants H and D.

A target dim read at run time (`(value, axis)`) counts as a dim of the reshaped value when both
trace back to the same value's axis (see reshape_target.root), have the same static size, or are
declared with the same symbolic name where one is a computed value with a declared value info
(the dynamo exporter writes one for every value; ONNX: equal dim_params denote equal sizes).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ... import ir
from ..context import FUSED_DOMAIN, PassContext
from ._match import is_op, scale_operand, sole_user
from .reshape_target import dims, root

Dim = Any   # an int, or (value name, axis) read at run time


def _private_producer(ctx: PassContext, name: str, op: str) -> Optional[ir.Node]:
    node = ctx.producer_of(name)
    return node if is_op(node, op) and ctx.private(name) else None


def _perm(node: Optional[ir.Node], perm: List[int]) -> bool:
    return node is not None and [int(p) for p in node.attributes.get("perm", [])] == perm


def _static_dim(ctx: PassContext, name: str, axis: int) -> Any:
    shape = ctx.shape(name)
    return shape[axis] if shape is not None and 0 <= axis < len(shape) else None


def _declared_dim(ctx: PassContext, name: str, axis: int) -> Any:
    """Dim `axis` of `name` as the model declares it (a value info, graph input or output)."""
    info = ctx.graph.value_info.get(name)
    if info is None:
        info = next((v for v in list(ctx.graph.inputs) + list(ctx.graph.outputs)
                     if v.name == name), None)
    shape = info.type.shape if info is not None and info.type is not None \
        and info.type.kind == "tensor" else None
    return shape[axis] if shape is not None and 0 <= axis < len(shape) else None


def _dims_equal(ctx: PassContext, a: str, a_axis: int, b: str, b_axis: int) -> bool:
    """True when dim `a_axis` of `a` provably equals dim `b_axis` of `b`: both trace back to one
    value's axis, both are the same known size, or the model declares both with the same symbolic
    name and at least one of them is a computed value (an exporter's statement about what the
    graph computes; two graph inputs sharing a name are only a promise about the feeds)."""
    if (a, a_axis) == (b, b_axis) or root(ctx, a, a_axis) == root(ctx, b, b_axis):
        return True
    x, y = _static_dim(ctx, a, a_axis), _static_dim(ctx, b, b_axis)
    if isinstance(x, int) and x == y:
        return True
    x, y = _declared_dim(ctx, a, a_axis), _declared_dim(ctx, b, b_axis)
    return isinstance(x, str) and bool(x) and x == y \
        and (a in ctx.graph.value_info or b in ctx.graph.value_info)


def _same_dim(ctx: PassContext, d: Dim, name: str, axis: int) -> bool:
    """True when the target entry `d` (not a 0 or -1) provably equals dim `axis` of `name`."""
    if isinstance(d, int):
        return d > 0 and d == _static_dim(ctx, name, axis)
    return _dims_equal(ctx, d[0], d[1], name, axis)


def _target(ctx: PassContext, reshape: ir.Node) -> Optional[List[Dim]]:
    """The Reshape's target as dims, or None when unknown or when allowzero=1 meets a literal 0
    (so that a 0 left in a target always means "copy the input's dim")."""
    if len(reshape.inputs) < 2:
        return None
    target = dims(ctx, reshape.inputs[1])
    if target is None or (int(reshape.attributes.get("allowzero", 0))
                          and any(isinstance(d, int) and d == 0 for d in target)):
        return None
    return target


def _heads(ctx: PassContext, reshape: ir.Node) -> Optional[Tuple[int, int]]:
    """(H, D) when `reshape` splits a [batch, seq, H * D] value into [batch, seq, H, D]."""
    t = _target(ctx, reshape)
    if t is None or len(t) != 4 or not all(isinstance(v, int) for v in t[2:]):
        return None
    src = reshape.inputs[0]
    hidden = _static_dim(ctx, src, 2) if len(ctx.shape(src) or []) == 3 else None
    hidden = hidden if isinstance(hidden, int) else None
    h, d = t[2], t[3]
    if (h == -1) != (d == -1) and hidden is not None and max(h, d) > 0 and hidden % max(h, d) == 0:
        h, d = (hidden // d, d) if h == -1 else (h, hidden // h)   # [.., .., -1, D] or [H, -1]
    if h <= 0 or d <= 0:
        return None
    lead = t[:2]
    if -1 in lead and (lead.count(-1) > 1 or hidden != h * d):
        return None   # a -1 there is the query's dim only on a [batch, seq, H * D] source
    for i, v in enumerate(lead):
        if not (isinstance(v, int) and v in (0, -1)) and not _same_dim(ctx, v, src, i):
            return None
    return h, d


def _with_shapes(ctx: PassContext, name: str, op: str):
    """(node, shape_readers) for the `op` node making `name` when one node reads it as a fusion
    may swallow it and any other readers are Shape nodes (the causal mask's sizes, say)."""
    node = ctx.producer_of(name)
    if not is_op(node, op) or name in ctx.outputs:
        return None
    users = ctx.live_users(name)
    shapes = [u for u in users if is_op(u, "Shape")]
    others = [u for u in users if not is_op(u, "Shape")]
    if len(others) != 1 or others[0].inputs.count(name) != 1 \
            or any(name in sub.outer_references() for _, sub in others[0].subgraphs()):
        return None
    return node, shapes


def _split(ctx: PassContext, name: str, perm: List[int]):
    """(source, (H, D), nodes, taps) for Transpose(Reshape(source, [.., .., H, D]), perm); taps
    are (Shape node, layout) for Shape readers of the transposed values: dim i they read is dim
    layout[i] of [batch, seq, H, D]."""
    found = _with_shapes(ctx, name, "Transpose")
    if found is None:
        return None
    tr, shapes = found
    nodes, taps = [tr], [(s, [int(p) for p in tr.attributes.get("perm", [])]) for s in shapes]
    if perm == [0, 2, 3, 1] and _perm(tr, [0, 1, 3, 2]):   # K as heads-first, then swapped
        inner = _with_shapes(ctx, tr.inputs[0], "Transpose")
        if inner is None or not _perm(inner[0], [0, 2, 1, 3]):
            return None
        taps = [(s, [[0, 2, 1, 3][i] for i in layout]) for s, layout in taps]
        taps += [(s, [0, 2, 1, 3]) for s in inner[1]]
        nodes.insert(0, inner[0])
        tr, perm = inner[0], [0, 2, 1, 3]
    rs = _private_producer(ctx, tr.inputs[0], "Reshape")
    if not _perm(tr, perm) or rs is None:
        return None
    heads = _heads(ctx, rs)
    return None if heads is None else (rs.inputs[0], heads, [rs] + nodes, taps)


def _shape_from_source(ctx: PassContext, shape: ir.Node, layout: List[int], src: str,
                       heads: int, size: int) -> Optional[List[ir.Node]]:
    """Nodes giving what `shape` read off the heads-first value, now from its [batch, seq, H * D]
    source: dims 0 and 1 of the source, H and D as constants (None for an empty read)."""
    start, end = int(shape.attributes.get("start", 0)), shape.attributes.get("end")
    start = min(max(start + 4 if start < 0 else start, 0), 4)
    end = 4 if end is None else min(max(int(end) + 4 if int(end) < 0 else int(end), 0), 4)
    if start >= end:
        return None
    out, nodes, parts = shape.outputs[0], [], []
    for i in range(start, end):
        j, name = layout[i], ctx.fresh_name("%s_dim%d" % (out, i))
        if j >= 2:
            parts.append(ctx.add_initializer(name, np.array([heads if j == 2 else size], np.int64)))
        elif ctx.opsets.get("", 0) >= 15:
            nodes.append(ir.Node("Shape", [src], [name], {"start": j, "end": j + 1}))
            parts.append(name)
        else:
            index = ctx.add_initializer(name + "_index", np.array([j], np.int64))
            full = ctx.fresh_name(name + "_all")
            nodes += [ir.Node("Shape", [src], [full]),
                      ir.Node("Gather", [full, index], [name], {"axis": 0})]
            parts.append(name)
    return nodes + [ir.Node("Concat", parts, [out], {"axis": 0}, name=shape.name)]


def _scaled(ctx: PassContext, name: str):
    """(source, factor, nodes) for name = source [* c or / c] (a private, scalar scaling)."""
    node = _private_producer(ctx, name, "Mul") or _private_producer(ctx, name, "Div")
    found = scale_operand(ctx, node, 4) if node is not None else None
    return (name, 1.0, []) if found is None else (found[0], found[1], [node])


def _scores(ctx: PassContext, name: str):
    """(q, k, scale, nodes) for MatMul(q [* a], k [* b]) [/ c or * c] feeding the softmax."""
    node = _private_producer(ctx, name, "Div") or _private_producer(ctx, name, "Mul")
    scale, nodes = 1.0, []
    if node is not None:
        found = scale_operand(ctx, node, 4)
        if found is None:
            return None
        name, scale, nodes = found[0], found[1], [node]
    mm = _private_producer(ctx, name, "MatMul")
    if mm is None:
        return None
    q, a, q_nodes = _scaled(ctx, mm.inputs[0])
    k, b, k_nodes = _scaled(ctx, mm.inputs[1])
    return q, k, scale * a * b, [mm] + nodes + q_nodes + k_nodes


def _nan_guard(ctx: PassContext, probs: str):
    """(guarded, nodes) when `probs` is read only by Where(IsNaN(probs), 0, probs)."""
    users = ctx.live_users(probs)
    if len(users) != 2 or probs in ctx.outputs:
        return None
    isnan = next((u for u in users if is_op(u, "IsNaN")), None)
    where = next((u for u in users if is_op(u, "Where")), None)
    if isnan is None or where is None or sole_user(ctx, isnan.outputs[0], "Where") is not where \
            or where.inputs[0] != isnan.outputs[0] or where.inputs[2] != probs \
            or where.inputs.count(probs) != 1 or isnan.inputs[0] != probs:
        return None
    zero = ctx.const(where.inputs[1])
    if zero is None or zero.size != 1 or zero.ndim > 4 or float(zero.reshape(-1)[0]) != 0.0:
        return None
    return where.outputs[0], [isnan, where]


def _mask_fits(ctx: PassContext, mask: str, query: str, key: str, heads: int) -> bool:
    """True unless the additive mask statically cannot broadcast to the scores [batch, H, q_seq,
    kv_seq] (read off the query and key sources [batch, seq, H * D]): a rank over 4, a dim that
    is neither 1 nor the scores', another type than the query's. What is not known statically
    the kernel checks (a mask that would grow the scores is an error there, as in the graph)."""
    dtype = ctx.dtype(mask)
    if dtype is not None and dtype != ctx.dtype(query):
        return False
    shape = ctx.shape(mask)
    if shape is None:
        return True
    if len(shape) > 4:
        return False
    scores = [_static_dim(ctx, query, 0), heads, _static_dim(ctx, query, 1),
              _static_dim(ctx, key, 1)]
    return not any(isinstance(d, int) and isinstance(s, int) and d not in (1, s)
                   for d, s in zip(shape[::-1], scores[::-1]))


def _merge(ctx: PassContext, merge: ir.Node, query: str, heads: int, size: int):
    """None when the Reshape `merge` of the [batch, q_seq, H, D] result cannot follow the fused
    node; else True when it gives [batch, q_seq, H * D] (it can go: its leading dims copy, or
    provably equal the query's), False when it must stay (a rank-2 or rank-3 target ending in
    H * D or -1, so that it reshapes the fused [batch, q_seq, H * D] result the same way).
    A mask that would grow the scores' batch, heads or q_seq is refused by the kernel."""
    target = _target(ctx, merge)
    if target is None or len(target) not in (2, 3) or target.count(-1) > 1 \
            or not (isinstance(target[-1], int) and target[-1] in (-1, heads * size)):
        return None
    if len(target) != 3:
        return False
    for i, d in enumerate(target[:2]):
        if isinstance(d, int) and (d == 0 or (d == -1 and target[2] != -1)):
            continue   # copies, or is the result's own dim as the other two are
        if not _same_dim(ctx, d, query, i):
            return False
    return True


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
    probs, guard = softmax.outputs[0], _nan_guard(ctx, softmax.outputs[0])
    if guard is not None:
        probs = guard[0]
    ctx_mm = sole_user(ctx, probs, "MatMul")
    if q is None or k is None or ctx_mm is None or ctx_mm.inputs[0] != probs:
        return None
    v = _split(ctx, ctx_mm.inputs[1], [0, 2, 1, 3])
    back = sole_user(ctx, ctx_mm.outputs[0], "Transpose")
    merge = sole_user(ctx, back.outputs[0], "Reshape") if _perm(back, [0, 2, 1, 3]) else None
    if v is None or merge is None or not q[1] == k[1] == v[1]:
        return None
    heads, size = q[1]
    if mask and not _mask_fits(ctx, mask, q[0], k[0], heads):
        return None
    drop = _merge(ctx, merge, q[0], heads, size)
    if drop is None:
        return None
    rewrites = []
    for src, taps in ((q[0], q[3]), (k[0], k[3]), (v[0], v[3])):
        for shape, layout in taps:
            rewrites.append((shape, _shape_from_source(ctx, shape, layout, src, heads, size)))
            if rewrites[-1][1] is None:
                return None
    all_nodes = q[2] + k[2] + v[2] + score_nodes + nodes + [softmax] + (guard[1] if guard else []) \
        + [ctx_mm, back, merge]
    return [q[0], k[0], v[0], mask], heads, scale, guard is not None, all_nodes, drop, rewrites


def _key_swap(ctx: PassContext, tr: ir.Node) -> Optional[Tuple[str, List[ir.Node]]]:
    """(x, nodes) when Transpose `tr` is the middle of Reshape(Transpose(Reshape(x, [-1, S, D]),
    [0, 2, 1]), [B, H, D, S]) on a 4-D x [B, H, S, D]: x with its last two axes swapped."""
    if not _perm(tr, [0, 2, 1]):
        return None
    first = _private_producer(ctx, tr.inputs[0], "Reshape")
    second = sole_user(ctx, tr.outputs[0], "Reshape")
    if first is None or second is None or second.inputs[0] != tr.outputs[0]:
        return None
    x = first.inputs[0]
    if len(ctx.shape(x) or []) != 4:
        return None
    t1, t2 = _target(ctx, first), _target(ctx, second)
    if t1 is None or t2 is None or len(t1) != 3 or len(t2) != 4 or t1[0] != -1:
        return None
    if all(_same_dim(ctx, d, x, axis) for d, axis in zip(t1[1:] + t2, [2, 3, 0, 1, 3, 2])):
        return x, [first, tr, second]
    return None


def _canonical_key_swaps(ctx: PassContext) -> bool:
    """Rewrite the dynamo exporter's K transpose through 3-D Reshapes to Transpose [0, 1, 3, 2]."""
    changed = False
    for node in list(ctx.graph.nodes):
        if id(node) in ctx.removed or not is_op(node, "Transpose"):
            continue
        found = _key_swap(ctx, node)
        if found is not None:
            x, nodes = found
            ctx.replace(nodes, [ir.Node("Transpose", [x], list(nodes[-1].outputs),
                                        {"perm": [0, 1, 3, 2]}, name=nodes[-1].name)])
            changed = True
    return changed


def run(ctx: PassContext) -> bool:
    """Replace every matching attention subgraph by one MultiHeadAttention; True when one was."""
    changed = _canonical_key_swaps(ctx)
    default_axis = -1 if ctx.opsets.get("", 0) >= 13 else 1
    for softmax in list(ctx.graph.nodes):
        if id(softmax) in ctx.removed or not is_op(softmax, "Softmax") \
                or int(softmax.attributes.get("axis", default_axis)) not in (-1, 3):
            continue
        found = _match(ctx, softmax)
        if found is None or not ctx.is_float(found[0][0]):
            continue
        inputs, heads, scale, guarded, nodes, drop, rewrites = found
        if not inputs[3]:
            inputs = inputs[:3]
        merge = nodes[-1]
        attrs = {"num_heads": heads, "scale": float(scale)}
        if guarded:
            attrs["nan_to_zero"] = 1
        out = merge.outputs[0] if drop else ctx.fresh_name(merge.inputs[0] + "_attention")
        new = [ctx.make_node("MultiHeadAttention", inputs, [out], attrs, FUSED_DOMAIN,
                             softmax.name)]
        if not drop:
            new.append(ir.Node("Reshape", [out, merge.inputs[1]], list(merge.outputs),
                               dict(merge.attributes), name=merge.name))
        ctx.replace(nodes, new)
        for shape, replacement in rewrites:
            ctx.replace([shape], replacement)
        changed = True
    return changed
