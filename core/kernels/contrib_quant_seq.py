"""onnxruntime's quantized sequence ops (com.microsoft): DynamicQuantizeLSTM, QAttention and
QEmbedLayerNormalization. DynamicQuantizeLSTM runs ai.onnx LSTM's cell (recurrent.py's set-up and
activations) with onnxruntime's dynamically quantized Gemms; the other two dequantize their
int8/uint8 inputs ((q - zero point) * scale, in float32) and run com.microsoft Attention /
EmbedLayerNormalization (contrib_transformer.py, imported when first used).
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from ..errors import InvalidArgument
from .quantization import dynamic_quantize_linear
from .recurrent import RecurrentSetup, activation_functions, make_clipper
from .registry import register

MS = "com.microsoft"
_F32 = np.float32


def dequantize_along_last(op: str, q: np.ndarray, scale: Any, zero_point: Optional[np.ndarray],
                          what: str) -> np.ndarray:
    """(q - zero_point) * scale in float32; scale / zero point per tensor or per entry of q's
    leading axes and / or last axis (broadcast with numpy's rules after reshaping)."""
    qf = np.asarray(q).astype(_F32)
    s = np.asarray(scale).astype(_F32)
    z = None if zero_point is None else np.asarray(zero_point).astype(_F32)

    def shaped(v: np.ndarray, name: str) -> np.ndarray:
        if v.size == 1:
            return v.reshape(())
        if v.ndim == 1 and v.shape[0] == qf.shape[-1]:
            return v
        if v.ndim == 1 and v.shape[0] == qf.shape[0]:        # one per direction
            return v.reshape((-1,) + (1,) * (qf.ndim - 1))
        if v.ndim == 2 and v.shape == (qf.shape[0], qf.shape[-1]):
            return v.reshape((qf.shape[0],) + (1,) * (qf.ndim - 2) + (qf.shape[-1],))
        raise InvalidArgument("%s: %s %s does not match %s of shape %s (expected a scalar, "
                              "one per direction or one per output column)"
                              % (op, name, v.shape, what, qf.shape))
    if z is not None:
        qf = qf - shaped(z, what + " zero point")
    return qf * shaped(s, what + " scale")


def _qgemm(a: np.ndarray, wq: np.ndarray, w_scale: np.ndarray, w_zp: float) -> np.ndarray:
    """onnxruntime's quantized RNN Gemm: A [M, K] quantized to uint8 with its own range, times
    the int8/uint8 weight [K, N]; float32(acc) * (a_scale * w_scale)."""
    aq, a_scale, a_zp = dynamic_quantize_linear(a.astype(_F32))
    acc = np.matmul(aq.astype(np.float64) - float(a_zp), wq.astype(np.float64) - w_zp)
    return acc.astype(_F32) * (_F32(a_scale) * w_scale).astype(_F32)


def _direction_params(op: str, scale: np.ndarray, zp: Optional[np.ndarray], d: int, dirs: int,
                      cols: int, what: str) -> tuple:
    s = np.asarray(scale).astype(_F32).reshape(dirs, -1)
    if s.shape[1] not in (1, cols):
        raise InvalidArgument("%s: %s_scale must have shape (%d,) or (%d, %d), got %s"
                              % (op, what, dirs, dirs, cols, np.asarray(scale).shape))
    z = 0.0 if zp is None else float(np.asarray(zp).reshape(dirs, -1)[d, 0])
    return s[d] if s.shape[1] == cols else s[d, :1], z


@register("DynamicQuantizeLSTM", domain=MS, since=1)
def dynamic_quantize_lstm(X: np.ndarray, W: np.ndarray, R: np.ndarray,
                          B: Optional[np.ndarray] = None,
                          sequence_lens: Optional[np.ndarray] = None,
                          initial_h: Optional[np.ndarray] = None,
                          initial_c: Optional[np.ndarray] = None,
                          P: Optional[np.ndarray] = None, W_scale: Optional[np.ndarray] = None,
                          W_zero_point: Optional[np.ndarray] = None,
                          R_scale: Optional[np.ndarray] = None,
                          R_zero_point: Optional[np.ndarray] = None, *,
                          activation_alpha: Optional[List[float]] = None,
                          activation_beta: Optional[List[float]] = None,
                          activations: Optional[List[str]] = None, clip: Optional[float] = None,
                          direction: str = "forward", hidden_size: Optional[int] = None,
                          input_forget: int = 0) -> tuple:
    """DynamicQuantizeLSTM: ai.onnx LSTM whose W [dirs, input, 4H] and R [dirs, H, 4H] (note:
    transposed against LSTM's) are int8/uint8 with per-direction or per-column scales and a
    zero point per direction. As onnxruntime, X (all steps at once) and h (each step; each batch
    row on its own where onnxruntime parallelizes over the batch) are quantized to uint8 with
    their own range before each integer Gemm."""
    op = "DynamicQuantizeLSTM"
    if W_scale is None or R_scale is None:
        raise InvalidArgument("%s: W_scale and R_scale are required" % op)
    w, r, x = np.asarray(W), np.asarray(R), np.asarray(X)
    if w.ndim != 3 or r.ndim != 3:
        raise InvalidArgument("%s: W and R must be 3-D ([dirs, input, 4H], [dirs, H, 4H]), got "
                              "%s and %s" % (op, w.shape, r.shape))
    s = RecurrentSetup(op, 4, x, np.zeros(w.shape, _F32).transpose(0, 2, 1),
               np.zeros(r.shape, _F32).transpose(0, 2, 1), B, sequence_lens,
               [("initial_h", initial_h), ("initial_c", initial_c)], direction, hidden_size, 0)
    hid = s.hid
    p = np.zeros((s.dirs, 3 * hid), s.x.dtype) if P is None else np.asarray(P).astype(s.x.dtype)
    if p.shape != (s.dirs, 3 * hid):
        raise InvalidArgument("%s: expected P of shape %s, got %s"
                              % (op, (s.dirs, 3 * hid), p.shape))
    acts = activation_functions(op, activations, ["Sigmoid", "Tanh", "Tanh"], s.dirs, activation_alpha,
                        activation_beta)
    clipped = make_clipper(clip)
    flat = s.x.reshape(-1, s.x.shape[-1])
    # onnxruntime splits the batch over its threads when batch > 4 or (batch >= 2 and H <= 256),
    # quantizing each chunk of h separately; with at least as many threads as rows (the usual
    # case for small batches) every row is its own chunk.
    per_row = s.batch > 4 or (s.batch >= 2 and hid <= 256)
    ys, finals = [], []
    for d in range(s.dirs):
        f, g, h_act = acts[d]
        ws, wz = _direction_params(op, W_scale, W_zero_point, d, s.dirs, 4 * hid, "W")
        rs, rz = _direction_params(op, R_scale, R_zero_point, d, s.dirs, 4 * hid, "R")
        xw = _qgemm(flat, w[d], ws, wz).reshape(s.seq, s.batch, 4 * hid)
        bias = s.b[d, :4 * hid] + s.b[d, 4 * hid:]
        pi, po, pf = p[d, :hid], p[d, hid:2 * hid], p[d, 2 * hid:]
        rq = r[d]

        def cell(xw_t: np.ndarray, h: np.ndarray, c: np.ndarray) -> List[np.ndarray]:
            if per_row:
                hr = np.concatenate([_qgemm(h[i:i + 1], rq, rs, rz) for i in range(h.shape[0])])
            else:
                hr = _qgemm(h, rq, rs, rz)
            gates = (xw_t + hr) + bias
            i = f(clipped(gates[:, :hid] + pi * c))
            fg = 1 - i if input_forget else f(clipped(gates[:, 2 * hid:3 * hid] + pf * c))
            c_new = fg * c + i * g(clipped(gates[:, 3 * hid:]))
            o = f(clipped(gates[:, hid:2 * hid] + po * c_new))
            return [o * h_act(c_new), c_new]
        y, st = s.run(d, xw, [s.initial[0][d], s.initial[1][d]], cell)
        ys.append(y)
        finals.append(st)
    return s.outputs(ys, finals)


@register("QAttention", domain=MS, since=1)
def qattention(ctx: Any, input: np.ndarray, weight: np.ndarray, bias: np.ndarray,  # noqa: A002
               input_scale: np.ndarray, weight_scale: np.ndarray,
               mask_index: Optional[np.ndarray] = None,
               input_zero_point: Optional[np.ndarray] = None,
               weight_zero_point: Optional[np.ndarray] = None,
               past: Optional[np.ndarray] = None, num_heads: int = 0,
               unidirectional: int = 0, do_rotary: int = 0, past_present_share_buffer: int = 0,
               mask_filter_value: float = -10000.0, scale: float = 0.0) -> Any:
    """QAttention: com.microsoft Attention on the dequantized input [B, S, D] (uint8, per-tensor)
    and weight [D, 3D] (int8/uint8, per tensor or per column); bias, past and the outputs are
    float (output and, with past, present)."""
    from .contrib_transformer import attention
    op = "QAttention"
    x = dequantize_along_last(op, input, input_scale, input_zero_point, "input")
    w = dequantize_along_last(op, weight, weight_scale, weight_zero_point, "weight")
    return attention(ctx, x, w, bias, mask_index, past, num_heads=num_heads,
                     mask_filter_value=mask_filter_value, scale=scale,
                     unidirectional=unidirectional, do_rotary=do_rotary,
                     past_present_share_buffer=past_present_share_buffer)


@register("QEmbedLayerNormalization", domain=MS, since=1)
def qembed_layer_normalization(ctx: Any, input_ids: np.ndarray, segment_ids: Optional[np.ndarray],
                               word_embedding_quant: np.ndarray,
                               position_embedding_quant: np.ndarray,
                               segment_embedding: Optional[np.ndarray],
                               gamma_quant: np.ndarray, beta_quant: np.ndarray,
                               mask: Optional[np.ndarray], word_embedding_scale: np.ndarray,
                               position_embedding_scale: np.ndarray,
                               segment_embedding_scale: Optional[np.ndarray],
                               gamma_scale: np.ndarray, beta_scale: np.ndarray,
                               word_embedding_zero_point: np.ndarray,
                               position_embedding_zero_point: np.ndarray,
                               segment_embedding_zero_point: Optional[np.ndarray],
                               gamma_zero_point: np.ndarray, beta_zero_point: np.ndarray,
                               epsilon: float = 1e-12) -> Any:
    """QEmbedLayerNormalization: com.microsoft EmbedLayerNormalization with uint8 embeddings,
    gamma and beta (per-tensor scale and zero point each); outputs the normalized embeddings and
    the mask index."""
    from .contrib_transformer import embed_layer_normalization
    op = "QEmbedLayerNormalization"

    def dq(q: Optional[np.ndarray], s: Optional[np.ndarray], z: Optional[np.ndarray],
           what: str) -> Optional[np.ndarray]:
        if q is None:
            return None
        if s is None:
            raise InvalidArgument("%s: %s has no scale input" % (op, what))
        return dequantize_along_last(op, q, np.asarray(s).reshape(-1)[:1], z, what)
    seg = dq(segment_embedding, segment_embedding_scale, segment_embedding_zero_point,
             "segment_embedding")
    return embed_layer_normalization(
        ctx, input_ids, segment_ids,
        dq(word_embedding_quant, word_embedding_scale, word_embedding_zero_point, "word_embedding"),
        dq(position_embedding_quant, position_embedding_scale, position_embedding_zero_point,
           "position_embedding"),
        seg, dq(gamma_quant, gamma_scale, gamma_zero_point, "gamma"),
        dq(beta_quant, beta_scale, beta_zero_point, "beta"), mask, epsilon=epsilon)
