"""Transformer-block kernels: Attention (opsets 23-25), RotaryEmbedding (opset 23) and the fused
MultiHeadAttention (com.onnxedge).

Attention follows the ONNX function body step for step: Q and K are each scaled by sqrt(scale)
(rounded to the input type), past K/V are concatenated in front of K/V, one additive bias is built
from attn_mask, is_causal (bottom-right aligned), the opset-25 sliding window and nonpad_kv_seqlen,
KV heads are repeated for grouped-query attention, and a query row whose bias is -inf everywhere
gets zero probabilities (so Y is 0 there, not NaN). float16 / bfloat16 are computed in float32 with
the same roundings to the input type that the function body makes (scale factor, probabilities).
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from ..dtypes import to_numpy
from ..fused_ops import DOMAIN
from ..errors import InvalidArgument
from ._util import is_narrow_float, widen
from .registry import register

_NEG_INF = float("-inf")


def _work_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if is_narrow_float(dtype) else np.dtype(dtype)


def _round_to(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`x` rounded to `dtype`'s precision but kept in x's (wider) dtype."""
    return x if x.dtype == dtype else x.astype(dtype).astype(x.dtype)


def _heads_first(x: np.ndarray, heads: Optional[int], what: str) -> np.ndarray:
    """A 3-D [batch, seq, heads * size] input as [batch, heads, seq, size]; 4-D passes through."""
    if x.ndim == 4:
        return x
    if heads is None or heads <= 0 or x.shape[2] % heads:
        raise InvalidArgument("Attention: 3-D %s of shape %s needs attribute %s dividing its last "
                              "dimension, got %s" % (what, x.shape, "q_num_heads" if what == "Q"
                                                     else "kv_num_heads", heads))
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _softmax_rows(x: np.ndarray, narrow: Optional[np.dtype] = None) -> np.ndarray:
    """Softmax over the last axis; an all -inf row gives zeros, never NaN. With `narrow`, each
    step is rounded to that type, as a softmax computed in it would be."""
    rnd = (lambda a: a) if narrow is None else (lambda a: _round_to(a, narrow))
    m = np.max(x, axis=-1, keepdims=True)
    m[np.isneginf(m)] = 0
    e = rnd(np.exp(rnd(x - m)))
    s = rnd(np.sum(e, axis=-1, keepdims=True))
    s[s == 0] = 1
    e /= s
    return rnd(e)


def _mask_bias(mask: np.ndarray, work: np.dtype) -> np.ndarray:
    """attn_mask as an additive bias: bool True -> 0, False -> -inf; floats as they are."""
    if mask.dtype == np.bool_:
        return np.where(mask, work.type(0), work.type(_NEG_INF))
    return mask.astype(work)


def _window_allowed(q_len: int, kv_len: int, offset: Any, left: int, right: int,
                    causal: bool) -> np.ndarray:
    """Where a query (at absolute position offset + i) may attend key j: [q, kv], or
    [batch, 1, q, kv] when `offset` is per batch."""
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    off = np.asarray(offset)
    if off.ndim:
        i = i + off.reshape(-1, 1, 1, 1)
    else:
        i = i + int(off)
    diff = i - j
    allowed = np.ones(diff.shape, dtype=bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    return allowed


@register("Attention", since=23)
def attention(ctx, q: np.ndarray, k: np.ndarray, v: np.ndarray,
              attn_mask: Optional[np.ndarray] = None, past_key: Optional[np.ndarray] = None,
              past_value: Optional[np.ndarray] = None,
              nonpad_kv_seqlen: Optional[np.ndarray] = None, *, is_causal: int = 0,
              kv_num_heads: Optional[int] = None, q_num_heads: Optional[int] = None,
              qk_matmul_output_mode: int = 0, scale: Optional[float] = None,
              softcap: float = 0.0, softmax_precision: Optional[int] = None,
              left_window_size: int = -1, right_window_size: int = -1) -> Tuple[np.ndarray, ...]:
    """ONNX Attention: returns (Y, present_key, present_value, qk_matmul_output)."""
    dtype = q.dtype
    work = _work_dtype(dtype)
    if not (q.ndim == k.ndim == v.ndim and q.ndim in (3, 4)):
        raise InvalidArgument("Attention: Q, K and V must all be 3-D or all 4-D, got shapes %s, "
                              "%s, %s" % (q.shape, k.shape, v.shape))
    if ctx.opset >= 25 and q.ndim == 4 and (q_num_heads is not None or kv_num_heads is not None):
        raise InvalidArgument("Attention: q_num_heads / kv_num_heads must not be set for 4-D "
                              "inputs (opset %d)" % ctx.opset)
    if (past_key is None) != (past_value is None):
        raise InvalidArgument("Attention: past_key and past_value must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise InvalidArgument("Attention: nonpad_kv_seqlen cannot be combined with past_key / "
                              "past_value")
    if qk_matmul_output_mode not in (0, 1, 2, 3):
        raise InvalidArgument("Attention: qk_matmul_output_mode must be 0..3, got %d"
                              % qk_matmul_output_mode)
    if left_window_size < -1 or right_window_size < -1:
        raise InvalidArgument("Attention: left_window_size / right_window_size must be -1 or >= 0, "
                              "got %d / %d" % (left_window_size, right_window_size))
    rank3 = q.ndim == 3
    qh = _heads_first(q, q_num_heads, "Q")
    kh = _heads_first(k, kv_num_heads, "K")
    vh = _heads_first(v, kv_num_heads, "V")
    batch, n_q, q_len, head = qh.shape
    if kh.shape[0] != batch or vh.shape[0] != batch or kh.shape[1] != vh.shape[1] \
            or kh.shape[3] != head or kh.shape[2] != vh.shape[2]:
        raise InvalidArgument("Attention: K %s and V %s (as [batch, heads, seq, size]) do not fit "
                              "Q %s" % (kh.shape, vh.shape, qh.shape))
    if past_key is not None:
        want = (batch, kh.shape[1], None, head)
        for name, past, cur in (("past_key", past_key, kh), ("past_value", past_value, vh)):
            if past.ndim != 4 or past.shape[:2] != cur.shape[:2] or past.shape[3] != cur.shape[3]:
                raise InvalidArgument("Attention: %s must have shape [%d, %d, past_len, %d], got %s"
                                      % (name, want[0], want[1], cur.shape[3], past.shape))
        kh = np.concatenate((past_key, kh), axis=2)
        vh = np.concatenate((past_value, vh), axis=2)
    present_key, present_value = kh, vh
    n_kv, kv_len = kh.shape[1], kh.shape[2]
    if n_q % n_kv:
        raise InvalidArgument("Attention: the number of query heads (%d) must be a multiple of the "
                              "number of key/value heads (%d)" % (n_q, n_kv))

    bias = _build_bias(attn_mask, past_key, nonpad_kv_seqlen, batch, q_len, kv_len, work,
                       bool(is_causal), int(left_window_size), int(right_window_size))

    # narrow inputs: round to the input type wherever the function body computes in it
    rnd = (lambda a: _round_to(a, dtype)) if is_narrow_float(dtype) else (lambda a: a)
    if scale is None:
        scale = 1.0 / math.sqrt(head)
    root = np.array(math.sqrt(scale), dtype=dtype).astype(work)
    qs = rnd(qh.astype(work) * root)
    ks = rnd(kh.astype(work) * root)
    if n_q != n_kv:
        ks = np.repeat(ks, n_q // n_kv, axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        qk = rnd(np.matmul(qs, ks.transpose(0, 1, 3, 2)))
        if softcap and softcap > 0:
            cap = np.array(softcap, dtype).astype(work)
            qk = rnd(np.tanh(rnd(qk / cap)) * cap)
        try:
            logits = rnd(qk + bias)
        except ValueError:
            raise InvalidArgument("Attention: attn_mask of shape %s does not broadcast to the "
                                  "attention scores [%d, %d, %d, %d]"
                                  % (attn_mask.shape, batch, n_q, q_len, kv_len)) from None
        qk_out = logits if qk_matmul_output_mode == 2 else qk
        probs = _softmax_in(logits, softmax_precision, dtype, work)
    row_masked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    if row_masked.any():
        probs = np.where(row_masked, work.type(0), probs)
    if qk_matmul_output_mode == 3:
        qk_out = probs
    probs = rnd(probs)
    vw = vh.astype(work)
    if n_q != n_kv:
        vw = np.repeat(vw, n_q // n_kv, axis=1)
    y = np.matmul(probs, vw)
    if rank3:
        y = y.transpose(0, 2, 1, 3).reshape(batch, q_len, -1)
    outs = [y.astype(dtype, copy=False), present_key, present_value]
    if ctx.num_outputs > 3:
        full = (batch, n_q, q_len, kv_len)
        outs.append(np.ascontiguousarray(np.broadcast_to(qk_out, full)).astype(dtype, copy=False))
    return outs[0] if ctx.num_outputs <= 1 else tuple(outs[:ctx.num_outputs])


def _softmax_in(logits: np.ndarray, precision: Optional[int], dtype: np.dtype,
                work: np.dtype) -> np.ndarray:
    """Softmax of `logits` at `softmax_precision` (an ONNX element type), returned in `work`."""
    if precision is None or precision == 0:
        return _softmax_rows(logits, dtype if is_narrow_float(dtype) else None)
    if precision == 11:
        return _softmax_rows(logits.astype(np.float64)).astype(work)
    if precision == 1:
        return _softmax_rows(logits.astype(np.float32)).astype(work)
    if precision in (10, 16):
        narrow = to_numpy(precision)
        x = logits.astype(narrow).astype(np.float32)
        return _softmax_rows(x, narrow).astype(work)
    raise InvalidArgument("Attention: softmax_precision must be 1 (float), 10 (float16), "
                          "11 (double) or 16 (bfloat16), got %d" % precision)


def _build_bias(attn_mask: Optional[np.ndarray], past_key: Optional[np.ndarray],
                nonpad: Optional[np.ndarray], batch: int, q_len: int, kv_len: int,
                work: np.dtype, causal: bool, left: int, right: int) -> np.ndarray:
    """The additive attention bias, broadcastable to [batch, heads, q_len, kv_len]."""
    bias = np.zeros((q_len, kv_len), work)
    if attn_mask is not None:
        if attn_mask.ndim == 0 or attn_mask.ndim > 4:
            raise InvalidArgument("Attention: attn_mask must have rank 1..4, got shape %s"
                                  % (attn_mask.shape,))
        pad = kv_len - attn_mask.shape[-1]
        if pad < 0:
            raise InvalidArgument("Attention: attn_mask's last dimension (%d) exceeds the total "
                                  "key length %d" % (attn_mask.shape[-1], kv_len))
        m = _mask_bias(attn_mask, work)
        if pad:
            m = np.concatenate((m, np.full(m.shape[:-1] + (pad,), _NEG_INF, work)), axis=-1)
        bias = bias + m
    if nonpad is not None:
        nonpad = np.asarray(nonpad).reshape(-1).astype(np.int64)
        if nonpad.shape != (batch,):
            raise InvalidArgument("Attention: nonpad_kv_seqlen must have shape (%d,), got %s"
                                  % (batch, nonpad.shape))
    if causal or left >= 0 or right >= 0:
        if past_key is not None:
            offset = past_key.shape[2]
        elif nonpad is not None:
            offset = nonpad - q_len
        else:
            offset = 0
        allowed = _window_allowed(q_len, kv_len, offset, left, right, causal)
        bias = bias + np.where(allowed, work.type(0), work.type(_NEG_INF))
    if nonpad is not None:
        keep = np.arange(kv_len) < nonpad[:, None]
        bias = bias + np.where(keep, work.type(0), work.type(_NEG_INF)).reshape(batch, 1, 1, kv_len)
    return bias


@register("RotaryEmbedding", since=23)
def rotary_embedding(x: np.ndarray, cos_cache: np.ndarray, sin_cache: np.ndarray,
                     position_ids: Optional[np.ndarray] = None, *, interleaved: int = 0,
                     num_heads: int = 0, rotary_embedding_dim: int = 0) -> np.ndarray:
    """ONNX RotaryEmbedding on [batch, heads, seq, size] or [batch, seq, heads * size] input."""
    dtype = x.dtype
    work = _work_dtype(dtype)
    if x.ndim == 4:
        xs = x.transpose(0, 2, 1, 3)                          # [batch, seq, heads, size]
    elif x.ndim == 3:
        if num_heads <= 0 or x.shape[2] % num_heads:
            raise InvalidArgument("RotaryEmbedding: 3-D input of shape %s needs attribute "
                                  "num_heads dividing its last dimension, got %d"
                                  % (x.shape, num_heads))
        xs = x.reshape(x.shape[0], x.shape[1], num_heads, x.shape[2] // num_heads)
    else:
        raise InvalidArgument("RotaryEmbedding: input must be 3-D or 4-D, got shape %s"
                              % (x.shape,))
    batch, seq, _, head = xs.shape
    rot = rotary_embedding_dim or head
    if rot > head or rot % 2:
        raise InvalidArgument("RotaryEmbedding: rotary_embedding_dim must be even and at most the "
                              "head size %d, got %d" % (head, rot))
    half = rot // 2
    if position_ids is not None:
        pos = np.asarray(position_ids).astype(np.int64)
        if pos.shape != (batch, seq):
            raise InvalidArgument("RotaryEmbedding: position_ids must have shape %s, got %s"
                                  % ((batch, seq), pos.shape))
        if cos_cache.ndim != 2 or pos.size and (pos.min() < 0 or pos.max() >= cos_cache.shape[0]):
            raise InvalidArgument("RotaryEmbedding: position_ids must index the rows of the 2-D "
                                  "cos/sin caches (shape %s)" % (cos_cache.shape,))
        cos, sin = cos_cache[pos], sin_cache[pos]
    else:
        cos, sin = cos_cache, sin_cache
    if cos.shape != (batch, seq, half) or sin.shape != cos.shape:
        raise InvalidArgument("RotaryEmbedding: cos/sin caches give shapes %s and %s, expected %s "
                              "(batch, sequence, rotary_embedding_dim / 2)"
                              % (cos.shape, sin.shape, (batch, seq, half)))
    cos = cos.astype(work)[:, :, None, :]
    sin = sin.astype(work)[:, :, None, :]
    out = xs.astype(work)                                 # always a fresh, writable copy
    if interleaved:
        x1, x2 = out[..., 0:rot:2], out[..., 1:rot:2]
    else:
        x1, x2 = out[..., :half], out[..., half:rot]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    x1[...] = real
    x2[...] = imag
    out = out.astype(dtype, copy=False)
    if x.ndim == 4:
        return np.ascontiguousarray(out.transpose(0, 2, 1, 3))
    return out.reshape(x.shape)


@register("MultiHeadAttention", domain=DOMAIN, since=1)
def multi_head_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                         mask: Optional[np.ndarray] = None, num_heads: int = 1,
                         scale: float = 1.0, nan_to_zero: int = 0) -> np.ndarray:
    """MultiHeadAttention: scaled dot-product attention over `num_heads` heads.

    query [batch, q_seq, H * D], key and value [batch, kv_seq, H * D] (already projected; the
    first two dims are kept as they are, the rest split into H heads of size D), optional additive
    `mask` broadcastable to the scores [batch, H, q_seq, kv_seq] (a mask that would make the
    scores larger is an error). Per head: p = softmax(q @ k^T * scale + mask) over the last axis;
    with `nan_to_zero` = 1 (default 0) every NaN in p becomes 0 (a row whose scores are all -inf,
    or hold NaN or +inf: torch's exported scaled_dot_product_attention guards its softmax with
    Where(IsNaN(p), 0, p)); result p @ v, heads concatenated back to [batch, q_seq, H * D].
    nan_to_zero was added later (its default keeps earlier models' meaning): a provider kernel
    without it must refuse nodes that set it (WebGPU's claim does; NEON does not claim the op).
    """
    heads = int(num_heads)
    for what, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim < 2 or heads <= 0 or (x.size and x.size % (x.shape[0] * x.shape[1] * heads)):
            raise InvalidArgument("MultiHeadAttention: %s of shape %s cannot be split into %d "
                                  "heads after its first two dimensions" % (what, x.shape, heads))
    dtype = query.dtype
    q, k, v = widen(query), widen(key), widen(value)

    def split(x: np.ndarray) -> np.ndarray:
        return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)

    scores = np.matmul(split(q), split(k).transpose(0, 1, 3, 2))
    if scale != 1.0:
        scores *= scores.dtype.type(scale)
    if mask is not None:
        bias = widen(mask).astype(scores.dtype, copy=False)
        try:
            grown = np.broadcast(scores, bias).shape != scores.shape
        except ValueError:
            grown = True
        if grown:
            raise InvalidArgument("MultiHeadAttention: mask of shape %s does not broadcast to the "
                                  "scores [batch, heads, q_seq, kv_seq] = %s"
                                  % (mask.shape, scores.shape))
        scores += bias   # in place: a fresh array costs page faults on every run
    with np.errstate(invalid="ignore"):   # a row of -inf scores: NaN, as ai.onnx Softmax gives
        scores -= np.max(scores, axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= np.sum(scores, axis=-1, keepdims=True)
    if int(nan_to_zero):
        scores[np.isnan(scores)] = 0
    out = np.matmul(scores, split(v)).transpose(0, 2, 1, 3)
    out = out.reshape(out.shape[0], out.shape[1], -1)
    return out if out.dtype == dtype else out.astype(dtype)
