"""RNN / GRU / LSTM, Attention and RotaryEmbedding kernels: against numpy references written here
and, where it is installed, against onnxruntime on what the node suite does not cover
(sequence_lens, every activation with alpha / beta, clip, input_forget, float16)."""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge

RNN_INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
ATT_INPUTS = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]


def _elem(a: np.ndarray) -> int:
    return {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
            np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int32): TensorProto.INT32,
            np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL}[a.dtype]


def _model(op: str, order: List[str], feeds: Dict[str, np.ndarray], outputs: List[str],
           opset: int, **attrs) -> bytes:
    ins = [n if n in feeds else "" for n in order]
    while ins and not ins[-1]:
        ins.pop()
    node = helper.make_node(op, ins, outputs, **attrs)
    vin = [helper.make_tensor_value_info(n, _elem(feeds[n]), list(feeds[n].shape))
           for n in ins if n]
    out_elem = _elem(feeds[order[0]])
    vout = [helper.make_tensor_value_info(o, out_elem, None) for o in outputs if o]
    model = helper.make_model(helper.make_graph([node], "g", vin, vout),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _run(model: bytes, feeds: Dict[str, np.ndarray]) -> list:
    return onnxedge.InferenceSession(model).run(None, feeds)


def _ort(model: bytes, feeds: Dict[str, np.ndarray]) -> list:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def _rnn_feeds(op: str, direction: str, rng: np.random.RandomState, seq: int = 5, batch: int = 4,
               inp: int = 3, hid: int = 6, lens=None, dtype=np.float32) -> Dict[str, np.ndarray]:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    d = 2 if direction == "bidirectional" else 1
    f = {"X": rng.randn(seq, batch, inp), "W": rng.randn(d, gates * hid, inp),
         "R": rng.randn(d, gates * hid, hid) * 0.5, "B": rng.randn(d, 2 * gates * hid),
         "initial_h": rng.randn(d, batch, hid)}
    if op == "LSTM":
        f["initial_c"] = rng.randn(d, batch, hid)
        f["P"] = rng.randn(d, 3 * hid)
    f = {k: v.astype(dtype) for k, v in f.items()}
    if lens is not None:
        f["sequence_lens"] = np.array(lens, np.int32)
    return f


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --- recurrent: numpy references --------------------------------------------------------------

def _ref_lstm_forward(f: Dict[str, np.ndarray]) -> tuple:
    x, w, r, b, p = f["X"], f["W"][0], f["R"][0], f["B"][0], f["P"][0]
    h, c = f["initial_h"][0], f["initial_c"][0]
    hid = r.shape[-1]
    ys = []
    for t in range(x.shape[0]):
        g = x[t] @ w.T + h @ r.T + b[:4 * hid] + b[4 * hid:]
        i = _sigmoid(g[:, :hid] + p[:hid] * c)
        fg = _sigmoid(g[:, 2 * hid:3 * hid] + p[2 * hid:] * c)
        c = fg * c + i * np.tanh(g[:, 3 * hid:])
        o = _sigmoid(g[:, hid:2 * hid] + p[hid:2 * hid] * c)
        h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys)[:, None], h[None], c[None]


def test_lstm_forward_matches_numpy_reference():
    f = _rnn_feeds("LSTM", "forward", np.random.RandomState(0))
    got = _run(_model("LSTM", RNN_INPUTS, f, ["Y", "Y_h", "Y_c"], 14, hidden_size=6), f)
    for g, e in zip(got, _ref_lstm_forward(f)):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_gru_sequence_lens_reverse_runs_within_each_length():
    rng = np.random.RandomState(1)
    f = _rnn_feeds("GRU", "reverse", rng, lens=[5, 2])
    f["X"] = f["X"][:, :2]
    f["initial_h"] = f["initial_h"][:, :2]
    y, yh = _run(_model("GRU", RNN_INPUTS, f, ["Y", "Y_h"], 14, direction="reverse"), f)
    assert np.all(y[2:, :, 1] == 0)
    short = {k: v for k, v in f.items() if k != "sequence_lens"}
    short["X"] = f["X"][:2, 1:2]
    short["initial_h"] = f["initial_h"][:, 1:2]
    y2, yh2 = _run(_model("GRU", RNN_INPUTS, short, ["Y", "Y_h"], 14, direction="reverse"), short)
    np.testing.assert_allclose(y[:2, :, 1:2], y2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(yh[:, 1:2], yh2, rtol=1e-5, atol=1e-6)


def test_rnn_layout_1_is_layout_0_transposed():
    f = _rnn_feeds("RNN", "bidirectional", np.random.RandomState(2))
    y0, h0 = _run(_model("RNN", RNN_INPUTS, f, ["Y", "Y_h"], 14, direction="bidirectional"), f)
    g = dict(f, X=f["X"].transpose(1, 0, 2), initial_h=f["initial_h"].transpose(1, 0, 2))
    y1, h1 = _run(_model("RNN", RNN_INPUTS, g, ["Y", "Y_h"], 14, direction="bidirectional",
                         layout=1), g)
    np.testing.assert_allclose(y1, y0.transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h1, h0.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)


def test_lstm_float16_computes_in_float32_and_returns_float16():
    f = _rnn_feeds("LSTM", "forward", np.random.RandomState(3), dtype=np.float16)
    got = _run(_model("LSTM", RNN_INPUTS, f, ["Y", "Y_h", "Y_c"], 14), f)
    want = _ref_lstm_forward({k: v.astype(np.float32) for k, v in f.items()})
    for g, e in zip(got, want):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype(np.float32), e, rtol=2e-3, atol=2e-3)


def test_recurrent_bad_shapes_and_attributes_raise_named_errors():
    f = _rnn_feeds("GRU", "forward", np.random.RandomState(4))
    bad = dict(f, W=f["W"][:, :5])
    with pytest.raises(onnxedge.InvalidArgument, match="GRU: expected W"):
        _run(_model("GRU", RNN_INPUTS, bad, ["Y"], 14), bad)
    with pytest.raises(onnxedge.OnnxEdgeError, match="GRU.*activation 'Swish'"):
        _run(_model("GRU", RNN_INPUTS, f, ["Y"], 14, activations=["Swish", "Tanh"]), f)
    lens = dict(f, sequence_lens=np.array([9, 1, 1, 1], np.int32))
    with pytest.raises(onnxedge.InvalidArgument, match="GRU: sequence_lens"):
        _run(_model("GRU", RNN_INPUTS, lens, ["Y"], 14), lens)


# --- recurrent: against onnxruntime ---------------------------------------------------------

@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_sequence_lens_match_onnxruntime(op, direction):
    f = _rnn_feeds(op, direction, np.random.RandomState(5), lens=[5, 3, 0, 1])
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    model = _model(op, RNN_INPUTS, f, outs, 14, direction=direction, hidden_size=6, **extra)
    for g, e in zip(_run(model, f), _ort(model, f)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


ACTIVATIONS = [("Relu", [], []), ("Tanh", [], []), ("Sigmoid", [], []), ("Affine", [0.7], [0.2]),
               ("LeakyRelu", [0.3], []), ("LeakyRelu", [], []), ("ThresholdedRelu", [0.4], []),
               ("ScaledTanh", [1.5], [0.6]), ("HardSigmoid", [0.3], [0.4]), ("HardSigmoid", [], []),
               ("Elu", [0.9], []), ("Softsign", [], []), ("Softplus", [], [])]


@pytest.mark.parametrize("name,alpha,beta", ACTIVATIONS)
def test_rnn_activation_matches_onnxruntime(name, alpha, beta):
    f = _rnn_feeds("RNN", "forward", np.random.RandomState(6))
    attrs = {"activations": [name], "hidden_size": 6}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    model = _model("RNN", RNN_INPUTS, f, ["Y", "Y_h"], 14, **attrs)
    for g, e in zip(_run(model, f), _ort(model, f)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_clip_and_activation_list_match_onnxruntime(lbr):
    f = _rnn_feeds("GRU", "bidirectional", np.random.RandomState(7), lens=[4, 5, 1, 2])
    model = _model("GRU", RNN_INPUTS, f, ["Y", "Y_h"], 14, direction="bidirectional", clip=0.8,
                   hidden_size=6,
                   linear_before_reset=lbr,
                   activations=["HardSigmoid", "Affine", "Sigmoid", "LeakyRelu"],
                   activation_alpha=[0.25, 0.9, 0.05], activation_beta=[0.45, 0.1])
    for g, e in zip(_run(model, f), _ort(model, f)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_lstm_input_forget_and_clip_match_onnxruntime():
    f = _rnn_feeds("LSTM", "forward", np.random.RandomState(8))
    model = _model("LSTM", RNN_INPUTS, f, ["Y", "Y_h", "Y_c"], 14, input_forget=1, clip=1.5,
                   hidden_size=6)
    for g, e in zip(_run(model, f), _ort(model, f)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


# --- Attention and RotaryEmbedding ------------------------------------------------------------

def _ref_attention(q, k, v, bias=None, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    reps = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if bias is not None:
        s = s + bias
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def test_attention_gqa_causal_with_past_matches_numpy_reference():
    rng = np.random.RandomState(9)
    f = {"Q": rng.randn(2, 4, 3, 8), "K": rng.randn(2, 2, 3, 8), "V": rng.randn(2, 2, 3, 5),
         "past_key": rng.randn(2, 2, 4, 8), "past_value": rng.randn(2, 2, 4, 5)}
    f = {n: a.astype(np.float32) for n, a in f.items()}
    y, pk, pv = _run(_model("Attention", ATT_INPUTS, f, ["Y", "present_key", "present_value"], 23,
                            is_causal=1), f)
    k = np.concatenate([f["past_key"], f["K"]], axis=2)
    v = np.concatenate([f["past_value"], f["V"]], axis=2)
    allowed = np.arange(7)[None, :] <= np.arange(3)[:, None] + 4
    want = _ref_attention(f["Q"], k, v, np.where(allowed, 0, -np.inf))
    assert y.dtype == np.float32 and y.shape == (2, 4, 3, 5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(pk, k)
    np.testing.assert_array_equal(pv, v)


def test_attention_3d_fully_masked_row_is_zero_and_fp16_stays_fp16():
    rng = np.random.RandomState(10)
    f = {"Q": rng.randn(1, 2, 12).astype(np.float16), "K": rng.randn(1, 3, 12).astype(np.float16),
         "V": rng.randn(1, 3, 12).astype(np.float16),
         "attn_mask": np.array([[True, False, True], [False, False, False]])}
    y, qk = _run(_model("Attention", ATT_INPUTS, f, ["Y", "", "", "qk"], 23, q_num_heads=3,
                        kv_num_heads=3, qk_matmul_output_mode=3), f)
    assert y.dtype == np.float16 and y.shape == (1, 2, 12)
    assert np.all(y[0, 1] == 0) and np.all(qk[..., 1, :] == 0)
    assert not np.isnan(y).any()
    np.testing.assert_allclose(qk[..., 0, :].sum(-1), 1, rtol=2e-3)


def test_attention_matches_onnxruntime_with_float_mask_and_softcap():
    rng = np.random.RandomState(11)
    f = {"Q": rng.randn(2, 3, 4, 8), "K": rng.randn(2, 3, 6, 8), "V": rng.randn(2, 3, 6, 8),
         "attn_mask": rng.randn(4, 6)}
    f = {n: a.astype(np.float32) for n, a in f.items()}
    model = _model("Attention", ATT_INPUTS, f, ["Y"], 23, softcap=2.0, scale=0.3)
    np.testing.assert_allclose(_run(model, f)[0], _ort(model, f)[0], rtol=1e-4, atol=1e-5)


def test_attention_bad_heads_raise_invalid_argument():
    f = {"Q": np.zeros((1, 2, 12), np.float32), "K": np.zeros((1, 2, 12), np.float32),
         "V": np.zeros((1, 2, 12), np.float32)}
    with pytest.raises(onnxedge.InvalidArgument, match="Attention: 3-D Q"):
        _run(_model("Attention", ATT_INPUTS, f, ["Y"], 23, q_num_heads=5, kv_num_heads=3), f)
    f["Q"] = np.zeros((1, 2, 8), np.float32)
    with pytest.raises(onnxedge.InvalidArgument, match="multiple"):
        _run(_model("Attention", ATT_INPUTS, f, ["Y"], 23, q_num_heads=2, kv_num_heads=3), f)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_partial_dim_matches_numpy(interleaved):
    rng = np.random.RandomState(12)
    x = rng.randn(2, 3, 4, 8).astype(np.float32)              # [batch, heads, seq, size]
    cos, sin = rng.randn(10, 2).astype(np.float32), rng.randn(10, 2).astype(np.float32)
    pos = np.array([[0, 1, 2, 3], [5, 6, 7, 9]], np.int64)
    f = {"X": x, "cos": cos, "sin": sin, "pos": pos}
    model = _model("RotaryEmbedding", ["X", "cos", "sin", "pos"], f, ["Y"], 23,
                   interleaved=interleaved, rotary_embedding_dim=4)
    y = _run(model, f)[0]
    c, s = cos[pos][:, None], sin[pos][:, None]               # [batch, 1, seq, 2]
    want = x.copy()
    i1, i2 = ([0, 2], [1, 3]) if interleaved else ([0, 1], [2, 3])
    want[..., i1] = c * x[..., i1] - s * x[..., i2]
    want[..., i2] = s * x[..., i1] + c * x[..., i2]
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
