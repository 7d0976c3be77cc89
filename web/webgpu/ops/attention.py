"""MultiHeadAttention (com.onnxedge, made by the optimizer): strided GEMMs read the heads in
place, a broadcasting add applies the mask, the softmax template normalizes the rows and a
strided copy puts the heads back together."""
from __future__ import annotations

from typing import Any, List, Optional

from ..runtime import Recorder, strides_of
from .elementwise import binary
from .matmul import FUSED_DOMAIN, gemm
from .movement import strided_copy
from .normalization import softmax_rows
from .table import F32, attr, float_inputs, register


def _check(node: Any, facts: Any) -> Optional[str]:
    return float_inputs(node, facts, [0, 1, 2, 3])


@register(["MultiHeadAttention"], check=_check, domain=FUSED_DOMAIN)
def run_mha(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """softmax(q @ k^T * scale + mask) @ v per head; [batch, seq, H * D] in and out."""
    q, k, v = ins[0], ins[1], ins[2]
    mask = ins[3] if len(ins) > 3 else None
    H = int(attr(node, "num_heads", 1))
    for t in (q, k, v):
        if len(t.shape) != 3 or t.shape[2] % H:
            raise ValueError("MultiHeadAttention on WebGPU takes [batch, seq, heads*dim] inputs, "
                             "got %s for %d heads" % (list(t.shape), H))
    B, Sq, HD = q.shape
    Skv = k.shape[1]
    D = HD // H
    Dv = v.shape[2] // H
    scores = gemm(rt, q, k, Sq, Skv, D, (HD, 1), (1, k.shape[2]), [B, H], [Sq * HD, D],
                  [Skv * k.shape[2], D], [B, H, Sq, Skv], alpha=float(attr(node, "scale", 1.0)))
    if mask is not None:
        scores = binary(rt, scores, mask, "a + b")
    # nan_to_zero: a fully masked (all -inf) row gives zeros instead of 0/0
    probs = softmax_rows(rt, scores, B * H * Sq, Skv, 1,
                         zero_empty_rows=bool(int(attr(node, "nan_to_zero", 0))))
    ctx = gemm(rt, probs, v, Sq, Dv, Skv, (Skv, 1), (v.shape[2], 1), [B, H], [H * Sq * Skv, Sq * Skv],
               [Skv * v.shape[2], Dv], [B, H, Sq, Dv])
    out = rt.new([B, Sq, H * Dv], F32)
    # ctx [B, H, Sq, Dv] -> out [B, Sq, H, Dv]
    cs = strides_of([B, H, Sq, Dv])
    strided_copy(rt, ctx, out, [B, Sq, H, Dv], [cs[0], cs[2], cs[1], cs[3]],
                 strides_of([B, Sq, H, Dv]))
    return [out]
