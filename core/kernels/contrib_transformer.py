"""onnxruntime's transformer contrib ops (domain com.microsoft, opset 1), with onnxruntime's
CPU semantics: what `onnxruntime.transformers.optimizer.optimize_model` writes (Attention,
MultiHeadAttention, EmbedLayerNormalization, SkipLayerNormalization, the Gelu family, ...),
what a session saved with `optimized_model_filepath` holds (FusedMatMul, FusedGemm, ...) and the
LLM ops (GroupQueryAttention, RotaryEmbedding).

Also registered: SimplifiedLayerNormalization in the default domain (onnxruntime registers it
there although ONNX has no such op). LayerNormalization below opset 17 (onnxruntime's contrib
registration in the default domain, opsets 1-16) is in `normalization`.

Masks follow onnxruntime's CPU kernels: a padding mask *adds* `mask_filter_value` (default
-10000) to the scaled scores (a fully padded row is not all -inf); the causal mask sets future
positions to the lowest float. float16 / bfloat16 inputs are
computed in float32 and the results cast back to the input type.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgument, NotImplemented
from ..fused_ops import apply_activation, gelu as gelu_math
from ._util import pick_outputs, widen
from .activation import (celu_math, elu_math, selu_math, softplus_math, softsign_math,
                         thresholded_relu_math)
from .matmul import gemm, matmul
from .registry import register

MS = "com.microsoft"


# ----------------------------------------------------------------------------- helpers

def _f32(x: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """x in the float type the kernels compute in (float32 for narrow floats, else itself)."""
    return None if x is None else widen(np.asarray(x))


def _back(y: np.ndarray, like: np.ndarray) -> np.ndarray:
    """y cast to `like`'s dtype (the op's input type)."""
    return y if y.dtype == like.dtype else y.astype(like.dtype)


def _heads(x: np.ndarray, n: int, op: str, what: str) -> np.ndarray:
    """[B, S, N*H] -> [B, N, S, H]."""
    if x.ndim != 3 or n <= 0 or x.shape[2] % n:
        raise InvalidArgument("%s: %s of shape %s cannot be split into num_heads=%d heads "
                              "(expected [batch, seq, num_heads * head_size])"
                              % (op, what, x.shape, n))
    b, s, d = x.shape
    return x.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)


def _merge(x: np.ndarray) -> np.ndarray:
    """[B, N, S, H] -> [B, S, N*H]."""
    b, n, s, h = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, s, n * h)


def _softmax_(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place."""
    x -= np.max(x, axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=-1, keepdims=True)
    return x


def _mask_bias(op: str, mask: Optional[np.ndarray], batch: int, q_len: int, past: int,
               kv_len: int, causal: bool, filt: float) -> Optional[np.ndarray]:
    """onnxruntime's PrepareMask: an additive [B, 1, S, T] bias (T = past + kv_len) from a mask
    index or raw attention mask, plus the causal part; None when there is neither."""
    total = past + kv_len
    causal = causal and q_len > 1
    if mask is None and not causal:
        return None
    bias = np.zeros((batch, q_len, total), dtype=np.float32)
    if mask is not None:
        m = np.asarray(mask)
        cols = np.arange(total)
        if m.ndim == 1 and m.shape[0] in (batch, 2 * batch):
            end = m[:batch].astype(np.int64).reshape(batch, 1)
            hit = cols.reshape(1, total) >= end
            if m.shape[0] == 2 * batch:
                start = np.minimum(m[batch:].astype(np.int64), total).reshape(batch, 1)
                hit |= cols.reshape(1, total) < start
            bias[:] = np.where(hit, np.float32(filt), np.float32(0)).reshape(batch, 1, total)
        elif m.ndim == 2 and m.shape == (batch, total):
            bias[:] = np.where(m > 0, np.float32(0), np.float32(filt)).reshape(batch, 1, total)
        elif m.ndim == 3 and m.shape == (batch, q_len, total):
            bias[:] = np.where(m > 0, np.float32(0), np.float32(filt))
        elif m.ndim == 1 and m.shape[0] == 3 * batch + 2 or m.ndim == 4:
            raise NotImplemented("%s: mask of shape %s (packed sequence lengths or a 4-D Megatron "
                                 "mask) is not supported on CPU, as in onnxruntime"
                                 % (op, m.shape))
        else:
            raise InvalidArgument(
                "%s: mask of shape %s does not fit batch %d, sequence %d, total sequence %d "
                "(expected (batch), (2 * batch), (batch, total) or (batch, seq, total))"
                % (op, m.shape, batch, q_len, total))
    if causal:
        i = np.arange(q_len).reshape(q_len, 1)
        j = np.arange(total).reshape(1, total)
        bias[:, j > past + i] = np.finfo(np.float32).min   # onnxruntime: lowest(), not added
    return bias.reshape(batch, 1, q_len, total)


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
            bias: Optional[np.ndarray], extra: Optional[np.ndarray], op: str) -> np.ndarray:
    """softmax(q @ k^T * scale + bias + extra) @ v on [B, N, S, H] heads; returns [B, N, S, Hv]."""
    scores = np.matmul(q, k.transpose(0, 1, 3, 2))
    scores *= np.float32(scale)
    for add in (bias, extra):
        if add is not None:
            try:
                scores += add.astype(np.float32, copy=False)
            except ValueError:
                raise InvalidArgument("%s: attention bias of shape %s does not broadcast to the "
                                      "scores [batch, heads, seq, total_seq] = %s"
                                      % (op, add.shape, scores.shape)) from None
    return np.matmul(_softmax_(scores), v)


def _scale(scale: float, head_size: int) -> float:
    return float(scale) if float(scale) != 0.0 else 1.0 / math.sqrt(head_size)


# ----------------------------------------------------------------------------- attention

@register("Attention", domain=MS, since=1)
def attention(ctx: Any, input: np.ndarray, weights: np.ndarray,  # noqa: A002
              bias: Optional[np.ndarray] = None, mask_index: Optional[np.ndarray] = None,
              past: Optional[np.ndarray] = None, attention_bias: Optional[np.ndarray] = None,
              past_sequence_length: Optional[np.ndarray] = None, num_heads: int = 0,
              mask_filter_value: float = -10000.0, qkv_hidden_sizes: Optional[List[int]] = None,
              scale: float = 0.0, unidirectional: int = 0, do_rotary: int = 0,
              past_present_share_buffer: int = 0, rotary_embedding_dim: int = 0) -> Any:
    """com.microsoft Attention: self-attention with merged Q/K/V projection weights.

    input [B, S, Din] @ weights [Din, Dq + Dk + Dv] (+ bias) gives Q, K, V, split into num_heads
    heads (qkv_hidden_sizes = [Dq, Dk, Dv], default equal thirds). past [2, B, N, P, H] is put in
    front of K and V; present (second output) is [2, B, N, P + S, H]. mask_index: (B) valid
    lengths, (2B) end then start positions, (B, P+S) or (B, S, P+S) raw 0/1 masks; masked scores
    get mask_filter_value added; with unidirectional=1 future positions get the lowest float.
    attention_bias [B or 1, N or 1, S, P+S] is added to the scores. scale defaults to
    1/sqrt(head_size).
    """
    op = "Attention"
    n = int(num_heads)
    if int(do_rotary) or int(past_present_share_buffer):
        raise NotImplemented("Attention: do_rotary and past_present_share_buffer are not "
                             "supported on CPU")
    if input.ndim != 3 or weights.ndim != 2 or weights.shape[0] != input.shape[2]:
        raise InvalidArgument("Attention: input [batch, seq, hidden] %s and weights [hidden, "
                              "3 * hidden] %s do not fit" % (input.shape, weights.shape))
    total_w = weights.shape[1]
    sizes = [int(s) for s in qkv_hidden_sizes] if qkv_hidden_sizes else [total_w // 3] * 3
    if len(sizes) != 3 or sum(sizes) != total_w or n <= 0 or sizes[0] % n or sizes[2] % n \
            or sizes[0] != sizes[1]:
        raise InvalidArgument("Attention: qkv_hidden_sizes %s do not fit weights of shape %s "
                              "with num_heads=%d" % (sizes, weights.shape, n))
    x = _f32(input)
    proj = matmul(x, _f32(weights))
    if bias is not None:
        proj += _f32(bias)
    dq, dk = sizes[0], sizes[1]
    q = _heads(proj[..., :dq], n, op, "Q")
    k = _heads(proj[..., dq:dq + dk], n, op, "K")
    v = _heads(proj[..., dq + dk:], n, op, "V")
    batch, seq = input.shape[0], input.shape[1]
    p = 0
    if past is not None:
        pw = _f32(past)
        if pw.ndim != 5 or pw.shape[0] != 2 or pw.shape[1:3] != (batch, n) \
                or pw.shape[4] != k.shape[3]:
            raise InvalidArgument("Attention: past of shape %s is not [2, %d, %d, past_seq, %d]"
                                  % (past.shape, batch, n, k.shape[3]))
        p = pw.shape[3]
        k = np.concatenate([pw[0], k], axis=2)
        v = np.concatenate([pw[1], v], axis=2)
    mask = _mask_bias(op, mask_index, batch, seq, p, seq, bool(int(unidirectional)),
                      mask_filter_value)
    out = _attend(q, k, v, _scale(scale, dq // n), mask, _f32(attention_bias), op)
    y = _back(_merge(out), input)
    if ctx is None or ctx.num_outputs < 2:
        return y
    present = np.stack([k, v]) if k.shape == v.shape else None
    if present is None:
        raise InvalidArgument("Attention: present needs K and V of the same head size")
    return y, _back(present, input)


def _mha_kv(op: str, key: Optional[np.ndarray], value: Optional[np.ndarray],
            query: np.ndarray, n: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(q [B,S,D], k, v, kv_heads_first): unpack packed QKV / packed KV forms."""
    if query.ndim == 5:
        if query.shape[3] != 3 or key is not None or value is not None:
            raise InvalidArgument("%s: packed QKV query must be [batch, seq, heads, 3, head] "
                                  "without key and value, got %s" % (op, query.shape))
        b, s, heads, _, h = query.shape
        return (query[:, :, :, 0].reshape(b, s, heads * h),
                query[:, :, :, 1].reshape(b, s, heads * h),
                query[:, :, :, 2].reshape(b, s, heads * h), False)
    if key is None:
        raise InvalidArgument("%s: key is required unless query is packed QKV" % op)
    if key.ndim == 5:
        if key.shape[3] != 2 or value is not None:
            raise InvalidArgument("%s: packed KV key must be [batch, kv_seq, heads, 2, head] "
                                  "without value, got %s" % (op, key.shape))
        b, s, heads, _, h = key.shape
        return (query, key[:, :, :, 0].reshape(b, s, heads * h),
                key[:, :, :, 1].reshape(b, s, heads * h), False)
    if value is None:
        raise InvalidArgument("%s: value is required with an unpacked key" % op)
    if key.ndim == 4:
        if value.ndim != 4 or key.shape[1] != n:
            raise InvalidArgument("%s: 4-D key/value must be [batch, num_heads, kv_seq, head], "
                                  "got %s and %s" % (op, key.shape, value.shape))
        return query, key, value, True
    return query, key, value, False


@register("MultiHeadAttention", domain=MS, since=1)
def multi_head_attention(ctx: Any, query: np.ndarray, key: Optional[np.ndarray] = None,
                         value: Optional[np.ndarray] = None, bias: Optional[np.ndarray] = None,
                         key_padding_mask: Optional[np.ndarray] = None,
                         attention_bias: Optional[np.ndarray] = None,
                         past_key: Optional[np.ndarray] = None,
                         past_value: Optional[np.ndarray] = None,
                         past_sequence_length: Optional[np.ndarray] = None,
                         cache_indirection: Optional[np.ndarray] = None, num_heads: int = 0,
                         mask_filter_value: float = -10000.0, scale: float = 0.0,
                         unidirectional: int = 0) -> Any:
    """com.microsoft MultiHeadAttention: attention over already projected Q, K, V.

    query [B, S, D]; key/value [B, L, D] / [B, L, Dv] (bias [D + D + Dv] added to all three), or
    [B, N, L, H] (used as they are: cross attention with a cached K/V). Packed forms: query
    [B, S, N, 3, H] (QKV) or key [B, L, N, 2, H] (KV). past_key / past_value [B, N, P, H] go in
    front of K / V; outputs: output [B, S, Dv], present_key / present_value [B, N, P+L, H].
    key_padding_mask as Attention's mask_index (B), (2B), (B, P+L), (B, S, P+L);
    attention_bias [B or 1, N or 1, S, P+L]; unidirectional adds the causal mask.
    """
    op = "MultiHeadAttention"
    n = int(num_heads)
    if cache_indirection is not None:
        raise NotImplemented("MultiHeadAttention: cache_indirection (beam search) is not supported")
    q3, k_in, v_in, heads_first = _mha_kv(op, key, value, query, n)
    q3 = _f32(q3)
    d = q3.shape[-1]
    bw = _f32(bias)
    if bw is not None:
        q3 = q3 + bw[:d]
    q = _heads(q3, n, op, "query")
    if heads_first:
        k, v = _f32(k_in), _f32(v_in)
    else:
        k3, v3 = _f32(k_in), _f32(v_in)
        if bw is not None:
            k3 = k3 + bw[d:2 * d]
            v3 = v3 + bw[2 * d:]
        k, v = _heads(k3, n, op, "key"), _heads(v3, n, op, "value")
    p = 0
    if past_key is not None and past_value is not None and not heads_first:
        k = np.concatenate([_f32(past_key), k], axis=2)
        v = np.concatenate([_f32(past_value), v], axis=2)
        p = past_key.shape[2]
    batch, seq = q.shape[0], q.shape[2]
    mask = _mask_bias(op, key_padding_mask, batch, seq, p, k.shape[2] - p,
                      bool(int(unidirectional)), mask_filter_value)
    out = _attend(q, k, v, _scale(scale, q.shape[3]), mask, _f32(attention_bias), op)
    outs = [_back(_merge(out), query), _back(k, query), _back(v, query)]
    return pick_outputs(ctx, outs)


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """Rotary embedding of x [..., S, H] with cos/sin [..., S, R/2] (R <= H; the rest passes)."""
    half = cos.shape[-1]
    rot = 2 * half
    out = x.copy()
    if interleaved:
        x1, x2 = x[..., 0:rot:2], x[..., 1:rot:2]
        out[..., 0:rot:2] = x1 * cos - x2 * sin
        out[..., 1:rot:2] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., :half], x[..., half:rot]
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half:rot] = x2 * cos + x1 * sin
    return out


def _cache_rows(op: str, cache: np.ndarray, pos: np.ndarray) -> np.ndarray:
    if pos.size and (pos.min() < 0 or pos.max() >= cache.shape[0]):
        raise InvalidArgument("%s: position ids %d..%d are outside the cos/sin cache of %d rows"
                              % (op, pos.min(), pos.max(), cache.shape[0]))
    return cache[pos]


@register("RotaryEmbedding", domain=MS, since=1)
def rotary_embedding(input: np.ndarray, position_ids: np.ndarray,  # noqa: A002
                     cos_cache: np.ndarray, sin_cache: np.ndarray, interleaved: int = 0,
                     is_packed_batching: int = 0, num_heads: int = 0,
                     rotary_embedding_dim: int = 0, scale: float = 1.0) -> np.ndarray:
    """com.microsoft RotaryEmbedding: rotate the first rotary_embedding_dim dims of each head.

    input [B, S, N*H] (num_heads, or H = 2 * cos_cache.shape[1], tells the head size) or
    [B, N, S, H]; position_ids [B, S], or one offset (shape [1]) giving positions offset + s;
    cos_cache / sin_cache [max_position, R/2]. interleaved=1 rotates pairs (x[2i], x[2i+1]),
    else halves (x[i], x[i + R/2]).
    """
    op = "RotaryEmbedding"
    if int(is_packed_batching):
        raise NotImplemented("RotaryEmbedding: is_packed_batching is not supported")
    x = _f32(input)
    cos, sin = _f32(cos_cache), _f32(sin_cache)
    half = int(rotary_embedding_dim) // 2 if int(rotary_embedding_dim) else cos.shape[1]
    cos, sin = cos[:, :half], sin[:, :half]
    if x.ndim == 4:
        b, _, s, _ = x.shape
        xh = x
    elif x.ndim == 3:
        b, s, d = x.shape
        h = d // int(num_heads) if int(num_heads) else 2 * cos_cache.shape[1]
        if d % h:
            raise InvalidArgument("RotaryEmbedding: hidden size %d is not a multiple of the head "
                                  "size %d" % (d, h))
        xh = x.reshape(b, s, d // h, h).transpose(0, 2, 1, 3)
    else:
        raise InvalidArgument("RotaryEmbedding: input must be 3-D or 4-D, got %s" % (x.shape,))
    pos = np.asarray(position_ids).astype(np.int64)
    if pos.size == 1 and pos.ndim <= 1:
        pos = np.broadcast_to(int(pos.reshape(-1)[0]) + np.arange(s), (b, s))
    elif pos.shape != (b, s):
        pos = np.broadcast_to(pos, (b, s))
    c = _cache_rows(op, cos, pos)[:, None]
    sn = _cache_rows(op, sin, pos)[:, None]
    y = _rotate(xh, c, sn, bool(int(interleaved)))
    if x.ndim == 3:
        y = y.transpose(0, 2, 1, 3).reshape(x.shape)
    return _back(np.ascontiguousarray(y), input)


@register("GroupQueryAttention", domain=MS, since=1)
def group_query_attention(ctx: Any, query: np.ndarray, key: Optional[np.ndarray] = None,
                          value: Optional[np.ndarray] = None,
                          past_key: Optional[np.ndarray] = None,
                          past_value: Optional[np.ndarray] = None,
                          seqlens_k: Optional[np.ndarray] = None,
                          total_sequence_length: Optional[np.ndarray] = None,
                          cos_cache: Optional[np.ndarray] = None,
                          sin_cache: Optional[np.ndarray] = None,
                          position_ids: Optional[np.ndarray] = None,
                          attention_bias: Optional[np.ndarray] = None,
                          head_sink: Optional[np.ndarray] = None, num_heads: int = 0,
                          kv_num_heads: int = 0, scale: float = 0.0, softcap: float = 0.0,
                          local_window_size: int = -1, do_rotary: int = 0,
                          rotary_interleaved: int = 0, smooth_softmax: int = 0,
                          qk_output: int = 0) -> Any:
    """com.microsoft GroupQueryAttention: causal attention with fewer K/V heads than Q heads.

    query [B, S, N*H] (or packed [B, S, (N + 2 kvN) * H] without key/value), key/value
    [B, S, kvN*H], past_key/past_value [B, kvN, P, H]; seqlens_k [B] = each batch's total length
    - 1; total_sequence_length (scalar) = the longest. A first prompt (S = total length) writes
    K/V from position 0; otherwise batch b's new tokens go at seqlens_k[b] + 1 - S. With
    do_rotary, Q and K get RotaryEmbedding at those positions (or position_ids) from cos/sin
    caches. Each query attends causally to the keys up to its position (and, with
    local_window_size w >= 0, the last w + 1 of them); softcap c > 0 maps scores to
    c * tanh(scores / c); smooth_softmax / head_sink add an extra logit (0 or the head's sink)
    to each softmax. Q head h reads K/V head h // (N / kvN). Outputs: output [B, S, N*H],
    present_key / present_value [B, kvN, max(P, total length), H].
    """
    op = "GroupQueryAttention"
    n, kvn = int(num_heads), int(kv_num_heads)
    if int(qk_output):
        raise NotImplemented("GroupQueryAttention: qk_output is not supported")
    if n <= 0 or kvn <= 0 or n % kvn:
        raise InvalidArgument("GroupQueryAttention: num_heads %d must be a multiple of "
                              "kv_num_heads %d" % (n, kvn))
    qx = _f32(query)
    b, s = qx.shape[0], qx.shape[1]
    if key is None:
        h = qx.shape[2] // (n + 2 * kvn)
        qx, kx, vx = (qx[..., :n * h], qx[..., n * h:(n + kvn) * h], qx[..., (n + kvn) * h:])
    else:
        kx, vx = _f32(key), _f32(value)
    h = qx.shape[2] // n
    q = _heads(qx, n, op, "query")
    k = _heads(kx, kvn, op, "key")
    v = _heads(vx, kvn, op, "value")
    if seqlens_k is None or total_sequence_length is None:
        raise InvalidArgument("GroupQueryAttention: seqlens_k and total_sequence_length are "
                              "required")
    total = int(np.asarray(total_sequence_length).reshape(-1)[0])
    lens = np.asarray(seqlens_k).astype(np.int64).reshape(-1) + 1
    buf = past_key.shape[2] if past_key is not None else 0
    present_len = max(buf, total)
    first_prompt = past_key is None or (s == total and s > 1)
    starts = [0 if first_prompt else int(lens[i]) - s for i in range(b)]
    if do_rotary:
        if cos_cache is None or sin_cache is None:
            raise InvalidArgument("GroupQueryAttention: do_rotary needs cos_cache and sin_cache")
        if position_ids is not None:
            pos = np.broadcast_to(np.asarray(position_ids).astype(np.int64), (b, s))
        else:
            pos = np.array([[st + i for i in range(s)] for st in starts], dtype=np.int64)
            if first_prompt:
                pos = np.broadcast_to(np.arange(s), (b, s))
        cos, sin = _f32(cos_cache), _f32(sin_cache)
        c = _cache_rows(op, cos, pos)[:, None]
        sn = _cache_rows(op, sin, pos)[:, None]
        q = _rotate(q, c, sn, bool(int(rotary_interleaved)))
        k = _rotate(k, c, sn, bool(int(rotary_interleaved)))
    pk = np.zeros((b, kvn, present_len, h), dtype=np.float32)
    pv = np.zeros((b, kvn, present_len, v.shape[3]), dtype=np.float32)
    out = np.zeros((b, n, s, v.shape[3]), dtype=np.float32)
    sc = _scale(scale, h)
    group = n // kvn
    bias = _f32(attention_bias)
    for i in range(b):
        st = starts[i]
        if past_key is not None and st > 0:
            pk[i, :, :st] = _f32(past_key)[i, :, :st]
            pv[i, :, :st] = _f32(past_value)[i, :, :st]
        pk[i, :, st:st + s] = k[i]
        pv[i, :, st:st + s] = v[i]
        seen = st + s if not first_prompt else int(lens[i])
        kk = np.repeat(pk[i, :, :seen], group, axis=0)
        vv = np.repeat(pv[i, :, :seen], group, axis=0)
        scores = np.matmul(q[i], kk.transpose(0, 2, 1)) * np.float32(sc)
        if float(softcap) > 0:
            scores = np.float32(softcap) * np.tanh(scores / np.float32(softcap))
        if bias is not None:
            bb = np.broadcast_to(bias, (b, n) + bias.shape[2:])[i]
            scores = scores + bb[:, :, :seen]
        qpos = (st + np.arange(s)).reshape(s, 1)
        kpos = np.arange(seen).reshape(1, seen)
        allowed = kpos <= qpos
        if int(local_window_size) >= 0:
            allowed &= kpos > qpos - int(local_window_size)
        scores = np.where(allowed, scores, np.float32(-np.inf))
        m = np.max(scores, axis=-1, keepdims=True)
        sink = None
        if head_sink is not None:
            sink = _f32(head_sink).reshape(n, 1, 1)
        elif int(smooth_softmax):
            sink = np.zeros((n, 1, 1), dtype=np.float32)
        if sink is not None:
            m = np.maximum(m, sink)
        m[np.isneginf(m)] = 0
        e = np.exp(scores - m)
        denom = np.sum(e, axis=-1, keepdims=True)
        if sink is not None:
            denom = denom + np.exp(sink - m)
        denom[denom == 0] = 1
        out[i] = np.matmul(e / denom, vv)
    return pick_outputs(ctx, [_back(_merge(out), query), _back(pk, query), _back(pv, query)])


# ----------------------------------------------------------------------------- normalization

def _ln(x: np.ndarray, gamma: Optional[np.ndarray], beta: Optional[np.ndarray], eps: float,
        simplified: bool) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, inv_std) of a layer (or RMS, when simplified) norm over the last axis."""
    if simplified:
        mean = np.zeros(x.shape[:-1] + (1,), dtype=x.dtype)
        inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))
        y = x * inv
    else:
        mean = np.mean(x, axis=-1, keepdims=True)
        d = x - mean
        inv = 1.0 / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + np.float32(eps))
        y = d * inv
    if gamma is not None:
        y *= gamma
    if beta is not None:
        y += beta
    return y, mean.astype(np.float32), inv.astype(np.float32)


def _skip_norm(ctx: Any, op: str, input: np.ndarray, skip: np.ndarray,  # noqa: A002
               gamma: np.ndarray, beta: Optional[np.ndarray], bias: Optional[np.ndarray],
               epsilon: float, simplified: bool) -> Any:
    hidden = input.shape[-1]
    for name, p in (("gamma", gamma), ("beta", beta), ("bias", bias)):
        if p is not None and p.size != hidden:
            raise InvalidArgument("%s: %s must have %d elements (the input's last dimension), "
                                  "got shape %s" % (op, name, hidden, p.shape))
    try:
        total = _f32(input) + _f32(skip)
    except ValueError:
        raise InvalidArgument("%s: skip of shape %s does not broadcast to input %s"
                              % (op, skip.shape, input.shape)) from None
    if bias is not None:
        total += _f32(bias).reshape(-1)
    y, mean, inv = _ln(total, _f32(gamma).reshape(-1),
                       None if beta is None else _f32(beta).reshape(-1), epsilon, simplified)
    return pick_outputs(ctx, [_back(y, input), mean, inv, _back(total, input)])


@register("SkipLayerNormalization", domain=MS, since=1)
def skip_layer_normalization(ctx: Any, input: np.ndarray, skip: np.ndarray,  # noqa: A002
                             gamma: np.ndarray, beta: Optional[np.ndarray] = None,
                             bias: Optional[np.ndarray] = None,
                             epsilon: float = 1e-12) -> Any:
    """com.microsoft SkipLayerNormalization: LayerNorm(input + skip + bias) * gamma + beta over
    the last axis. skip has input's shape or broadcasts to it ([S, H], [1, S, H]). Outputs:
    output, mean, inv_std_var ([..., 1], float32) and input_skip_bias_sum (input + skip + bias).
    """
    return _skip_norm(ctx, "SkipLayerNormalization", input, skip, gamma, beta, bias, epsilon,
                      False)


@register("SkipSimplifiedLayerNormalization", domain=MS, since=1)
def skip_simplified_layer_normalization(ctx: Any, input: np.ndarray,  # noqa: A002
                                        skip: np.ndarray, gamma: np.ndarray,
                                        bias: Optional[np.ndarray] = None,
                                        epsilon: float = 1e-12) -> Any:
    """com.microsoft SkipSimplifiedLayerNormalization: RMSNorm(input + skip + bias) * gamma.
    Outputs: output, mean (zeros), inv_std_var, input_skip_bias_sum."""
    return _skip_norm(ctx, "SkipSimplifiedLayerNormalization", input, skip, gamma, None, bias,
                      epsilon, True)


@register("SimplifiedLayerNormalization", domain="", since=1)
def simplified_layer_normalization(ctx: Any, X: np.ndarray, scale: np.ndarray,
                                   axis: int = -1, epsilon: float = 1e-5,
                                   stash_type: int = 1) -> Any:
    """SimplifiedLayerNormalization (onnxruntime's, default domain): RMS normalization,
    Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale; optional inv_std_var."""
    a = int(axis) + X.ndim if int(axis) < 0 else int(axis)
    if not 0 <= a < X.ndim:
        raise InvalidArgument("SimplifiedLayerNormalization: axis %d is out of range for rank %d"
                              % (axis, X.ndim))
    x = _f32(X)
    if x.dtype != np.float64:
        x = x.astype(np.float32, copy=False)
    axes = tuple(range(a, X.ndim))
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + x.dtype.type(epsilon))
    y = x * inv * _f32(scale)
    return pick_outputs(ctx, [_back(y, X), inv.astype(np.float32)])


@register("EmbedLayerNormalization", domain=MS, since=1)
def embed_layer_normalization(ctx: Any, input_ids: np.ndarray,
                              segment_ids: Optional[np.ndarray],
                              word_embedding: np.ndarray, position_embedding: np.ndarray,
                              segment_embedding: Optional[np.ndarray] = None,
                              gamma: Optional[np.ndarray] = None,
                              beta: Optional[np.ndarray] = None,
                              mask: Optional[np.ndarray] = None,
                              position_ids: Optional[np.ndarray] = None,
                              epsilon: float = 1e-12, mask_index_type: int = 1) -> Any:
    """com.microsoft EmbedLayerNormalization: BERT's embeddings and their LayerNorm.

    sum = word_embedding[input_ids] + position_embedding[position_ids or 0..S-1]
    (+ segment_embedding[segment_ids]); output = LayerNorm(sum) * gamma + beta over the hidden
    axis. Outputs: output [B, S, H], mask_index [B] (int32: the count of 1s in each mask row, 0
    without a mask; mask_index_type=0 leaves it out) and embedding_sum [B, S, H].
    """
    op = "EmbedLayerNormalization"
    ids = np.asarray(input_ids).astype(np.int64)
    if ids.ndim != 2:
        raise InvalidArgument("%s: input_ids must be [batch, seq], got %s" % (op, ids.shape))
    b, s = ids.shape

    def rows(table: np.ndarray, index: np.ndarray, what: str) -> np.ndarray:
        if index.size and (index.min() < 0 or index.max() >= table.shape[0]):
            raise InvalidArgument("%s: %s index %d..%d is outside the table of %d rows"
                                  % (op, what, index.min(), index.max(), table.shape[0]))
        return _f32(table)[index]

    if position_ids is not None:
        pos = np.broadcast_to(np.asarray(position_ids).astype(np.int64), (b, s))
    else:
        pos = np.broadcast_to(np.arange(s), (b, s))
    total = rows(word_embedding, ids, "input_ids") + rows(position_embedding, pos, "position")
    if segment_embedding is not None and segment_ids is not None:
        total += rows(segment_embedding, np.asarray(segment_ids).astype(np.int64), "segment")
    y, _, _ = _ln(total.astype(np.float32, copy=False), _f32(gamma), _f32(beta), epsilon, False)
    if mask is not None:
        mask_index = np.sum(np.asarray(mask) == 1, axis=1).astype(np.int32)
    else:
        mask_index = np.zeros((b,), dtype=np.int32)
    return pick_outputs(ctx, [_back(y, word_embedding), mask_index,
                              _back(total, word_embedding)])


# ----------------------------------------------------------------------------- activations

def _gelu_of(x: np.ndarray, approximate: str, like: np.ndarray) -> np.ndarray:
    return _back(gelu_math(x, approximate), like)


@register("Gelu", domain=MS, since=1)
def gelu(X: np.ndarray) -> np.ndarray:
    """com.microsoft Gelu: X * 0.5 * (1 + erf(X / sqrt 2))."""
    return _gelu_of(_f32(X), "none", X)


@register("BiasGelu", domain=MS, since=1)
def bias_gelu(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """com.microsoft BiasGelu: Gelu(A + B) (exact erf form), B a 1-D bias of A's last dim."""
    return _gelu_of(_f32(A) + _f32(B), "none", A)


@register("FastGelu", domain=MS, since=1)
def fast_gelu(X: np.ndarray, bias: Optional[np.ndarray] = None) -> np.ndarray:
    """com.microsoft FastGelu: the tanh approximation of Gelu of X (+ bias),
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = _f32(X) + _f32(bias) if bias is not None else _f32(X)
    return _gelu_of(x, "tanh", X)


@register("QuickGelu", domain=MS, since=1)
def quick_gelu(X: np.ndarray, alpha: float = 1.702) -> np.ndarray:
    """com.microsoft QuickGelu: X * sigmoid(alpha * X)."""
    x = _f32(X)
    with np.errstate(over="ignore"):
        y = x / (1 + np.exp(-x * x.dtype.type(alpha)))
    return _back(y, X)


@register("BiasAdd", domain=MS, since=1)
def bias_add(X: np.ndarray, bias: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """com.microsoft BiasAdd: X + bias + skip (X and skip [N, S, C], bias [C])."""
    return _back(_f32(X) + _f32(bias) + _f32(skip), X)


@register("BiasSplitGelu", domain=MS, since=1)
def bias_split_gelu(X: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """com.microsoft BiasSplitGelu: left, right = split(X + bias) in halves on the last axis;
    left * Gelu(right) (exact erf form)."""
    x = _f32(X) + _f32(bias)
    half = x.shape[-1] // 2
    return _back(x[..., :half] * gelu_math(np.ascontiguousarray(x[..., half:]), "none"), X)


# ----------------------------------------------------------------------------- matmul / gemm

def _batch_trans(x: np.ndarray) -> np.ndarray:
    """[d0, d1, ..., dk, n] -> [d1, ..., dk, d0, n] (FusedMatMul's transBatch)."""
    r = x.ndim
    return x.transpose(list(range(1, r - 1)) + [0, r - 1])


@register("FusedMatMul", domain=MS, since=1)
def fused_matmul(A: np.ndarray, B: np.ndarray, alpha: float = 1.0, transA: int = 0,  # noqa: N803
                 transB: int = 0, transBatchA: int = 0, transBatchB: int = 0  # noqa: N803
                 ) -> np.ndarray:
    """com.microsoft FusedMatMul: alpha * op(A) @ op(B), MatMul broadcasting. transBatchX moves
    X's first dimension just before the last ([d0, ..., dk, n] -> [d1, ..., dk, d0, n]); then
    transX swaps the last two. Neither applies to a 1-D operand."""
    a, b = A, B
    if (int(transBatchA) or int(transBatchB)) and not (a.ndim == b.ndim and a.ndim > 2):
        raise InvalidArgument("FusedMatMul: transBatchA/transBatchB need inputs of the same rank "
                              ">= 3, got shapes %s and %s" % (A.shape, B.shape))
    if int(transBatchA):
        a = _batch_trans(a)
    if int(transBatchB):
        b = _batch_trans(b)
    if int(transA) and a.ndim > 1:
        a = np.swapaxes(a, -1, -2)
    if int(transB) and b.ndim > 1:
        b = np.swapaxes(b, -1, -2)
    y = matmul(np.ascontiguousarray(a), np.ascontiguousarray(b))
    if float(alpha) != 1.0:
        y = _back(widen(y) * np.float32(alpha), y)
    return y


def _fused_activation(y: np.ndarray, name: str, alpha: Optional[float], beta: Optional[float],
                      gamma: Optional[float]) -> np.ndarray:
    """onnxruntime's activation functors by name, with activation_alpha/beta/gamma."""
    def a(default: float) -> float:
        return default if alpha is None else float(alpha)

    if name in ("Relu", "Tanh", "Sigmoid"):
        return apply_activation(name, y, None, "FusedGemm")
    if name == "LeakyRelu":
        return apply_activation(name, y, [a(0.01)], "FusedGemm")
    if name == "HardSigmoid":
        return apply_activation(name, y, [a(0.2), 0.5 if beta is None else float(beta)],
                                "FusedGemm")
    if name == "Elu":
        return elu_math(y, a(1.0))
    if name == "Selu":
        return selu_math(y, a(1.67326319217681884765625),
                     1.05070102214813232421875 if gamma is None else float(gamma))
    if name == "Celu":
        return celu_math(y, a(1.0))
    if name == "Softsign":
        return softsign_math(y)
    if name == "Softplus":
        return softplus_math(y)
    if name == "ThresholdedRelu":
        return thresholded_relu_math(y, a(1.0))
    if name == "ScaledTanh":
        return a(1.0) * np.tanh((1.0 if beta is None else float(beta)) * y)
    if name == "ParametricSoftplus":
        return a(1.0) * np.log1p(np.exp((1.0 if beta is None else float(beta)) * y))
    raise InvalidArgument("FusedGemm: unsupported activation %r" % name)


@register("FusedGemm", domain=MS, since=1)
def fused_gemm(A: np.ndarray, B: np.ndarray, C: Optional[np.ndarray] = None,  # noqa: N803
               alpha: float = 1.0, beta: float = 1.0, transA: int = 0,  # noqa: N803
               transB: int = 0, activation: str = "",  # noqa: N803
               activation_alpha: Optional[float] = None, activation_beta: Optional[float] = None,
               activation_gamma: Optional[float] = None) -> np.ndarray:
    """com.microsoft FusedGemm: activation(alpha * op(A) @ op(B) + beta * C) with ai.onnx Gemm's
    inputs and attributes; activation names an elementwise op (Relu, LeakyRelu, Tanh, Sigmoid,
    HardSigmoid, Elu, Selu, Softsign, Softplus, ThresholdedRelu, ...) whose attributes come from
    activation_alpha / activation_beta / activation_gamma."""
    y = gemm(A, B, C, alpha=alpha, beta=beta, transA=transA, transB=transB)
    name = str(activation)
    if not name:
        return y
    w = widen(y)
    w = w.copy() if w is y or not w.flags.writeable else w
    r = _fused_activation(w, name, activation_alpha, activation_beta, activation_gamma)
    return _back(np.asarray(r), y)
