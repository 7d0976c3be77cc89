"""onnxruntime's transformer contrib ops (core/kernels/contrib_transformer.py) against onnxruntime
itself: one node per case, small random inputs, tolerances scaled to the outputs' magnitude."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

import onnxedge  # noqa: E402

try:
    import onnx
    from onnx import helper, numpy_helper
except ImportError:     # pragma: no cover
    onnx = None
try:    # without onnxruntime (Python 3.8 + numpy 1.17) the kernels run against the mapped ops
    import onnxruntime as ort
except ImportError:     # pragma: no cover
    ort = None

MS = "com.microsoft"
RNG = np.random.default_rng(7) if hasattr(np.random, "default_rng") else np.random.RandomState(7)


def _r(*shape: int, scale: float = 1.0, dtype: Any = np.float32) -> np.ndarray:
    return (np.asarray(RNG.standard_normal(shape)) * scale).astype(dtype)


def _dtype_code(dtype: np.dtype) -> int:
    return {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.float16): onnx.TensorProto.FLOAT16,
            np.dtype(np.int32): onnx.TensorProto.INT32, np.dtype(np.int64): onnx.TensorProto.INT64,
            }[np.dtype(dtype)]


def _model(op: str, inputs: Sequence[Tuple[str, Optional[np.ndarray]]], n_out: int, domain: str,
           opset: int, attrs: Dict[str, Any], const: Sequence[str] = ()) -> bytes:
    """One-node model; inputs named "" are left out (optional), names in `const` become
    initializers."""
    outs = ["y%d" % i for i in range(n_out)]
    node = helper.make_node(op, [n for n, _ in inputs], outs, domain=domain, **attrs)
    vin = [helper.make_tensor_value_info(n, _dtype_code(a.dtype), list(a.shape))
           for n, a in inputs if n and n not in const]
    init = [numpy_helper.from_array(a, n) for n, a in inputs if n in const]
    vout = [onnx.ValueInfoProto(name=o) for o in outs]
    graph = helper.make_graph([node], "g", vin, vout, init)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def run_both(op: str, inputs: Sequence[Tuple[str, Optional[np.ndarray]]], n_out: int = 1,
             domain: str = MS, opset: int = 17, const: Sequence[str] = (),
             **attrs: Any) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """(onnxruntime's outputs, onnxedge's outputs) of one node. Without onnxruntime (the
    Python 3.8 venv) the kernels' outputs are only compared with the optimized model's."""
    if onnx is None:
        pytest.skip("onnx is not installed")
    blob = _model(op, inputs, n_out, domain, opset, attrs, const)
    feeds = {n: a for n, a in inputs if n and n not in const}
    names = ["y%d" % i for i in range(n_out)]
    expected = None
    if ort is not None:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        ref = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
        expected = ref.run(names, feeds)
    got = None
    for level in (onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL,     # the contrib kernels
                  onnxedge.GraphOptimizationLevel.ORT_ENABLE_ALL):     # mapped onto onnxedge's ops
        opts = onnxedge.SessionOptions()
        opts.graph_optimization_level = level
        out = onnxedge.InferenceSession(blob, opts, providers=["CPUExecutionProvider"]).run(
            names, feeds)
        if got is not None:
            check(got, out, rtol=1e-5)
        got = out
    return (got if expected is None else expected), got


def check(expected: List[np.ndarray], got: List[np.ndarray], rtol: float = 1e-4,
          skip: Sequence[int] = ()) -> None:
    """Same dtypes and shapes; values within rtol of the output's magnitude."""
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        if i in skip:
            continue
        e, g = np.asarray(e), np.asarray(g)
        assert g.dtype == e.dtype, "output %d: dtype %s, onnxruntime %s" % (i, g.dtype, e.dtype)
        assert g.shape == e.shape, "output %d: shape %s, onnxruntime %s" % (i, g.shape, e.shape)
        if e.dtype.kind in "iub":
            np.testing.assert_array_equal(g, e)
            continue
        mag = float(np.max(np.abs(e.astype(np.float64)), initial=0.0)) or 1.0
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                   atol=rtol * mag, err_msg="output %d" % i)


# ----------------------------------------------------------------------------- Attention

B, S, N, H = 2, 5, 2, 4
D = N * H


def _attention_inputs(mask: Optional[np.ndarray] = None, past: Optional[np.ndarray] = None,
                      sizes: Tuple[int, int, int] = (D, D, D), bias: bool = True,
                      attn_bias: Optional[np.ndarray] = None, dtype: Any = np.float32):
    x = _r(B, S, D, dtype=dtype)
    w = _r(D, sum(sizes), scale=0.4, dtype=dtype)
    ins = [("x", x), ("w", w), ("b", _r(sum(sizes), dtype=dtype)) if bias else ("", None),
           ("mask", mask) if mask is not None else ("", None),
           ("past", past) if past is not None else ("", None),
           ("ab", attn_bias) if attn_bias is not None else ("", None)]
    while ins[-1][0] == "":
        ins.pop()
    return ins


MASKS = {
    "none": None,
    "1d_lengths": np.array([3, 5], dtype=np.int32),
    "1d_end_start": np.array([4, 5, 1, 0], dtype=np.int32),
    "2d_raw": np.array([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=np.int32),
    "3d_raw": (RNG.random((B, S, S)) > 0.3).astype(np.int32) if hasattr(RNG, "random")
    else (RNG.random_sample((B, S, S)) > 0.3).astype(np.int32),
}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masks(mask, unidirectional):
    check(*run_both("Attention", _attention_inputs(MASKS[mask]), num_heads=N,
                    unidirectional=unidirectional))


def test_attention_qkv_hidden_sizes_and_scale():
    ins = _attention_inputs(sizes=(D, D, 2 * N * 3))
    check(*run_both("Attention", ins, num_heads=N, qkv_hidden_sizes=[D, D, 2 * N * 3],
                    scale=0.3))


def test_attention_without_bias_is_zero_bias():
    """(onnxruntime 1.31's CPU Attention crashes without a bias: compare with a zero bias.)"""
    from onnxedge.kernels.contrib_transformer import attention
    x, w = _r(B, S, D), _r(D, 3 * D)
    np.testing.assert_allclose(attention(None, x, w, num_heads=N),
                               attention(None, x, w, np.zeros(3 * D, np.float32), num_heads=N))


def test_attention_past_present_unidirectional():
    past = _r(2, B, N, 3, H)
    mask = np.array([[1] * 8, [0, 1, 1, 1, 1, 1, 1, 1]], dtype=np.int32)
    ins = _attention_inputs(mask, past)
    check(*run_both("Attention", ins, n_out=2, num_heads=N, unidirectional=1))


def test_attention_bias_input():
    check(*run_both("Attention", _attention_inputs(attn_bias=_r(1, N, S, S)), num_heads=N))


def test_attention_constant_weights_float16():
    ins = _attention_inputs(MASKS["1d_lengths"], dtype=np.float16)
    e, g = run_both("Attention", ins, num_heads=N, const=("w", "b"))
    check(e, g, rtol=5e-3)


# ----------------------------------------------------------------------------- MultiHeadAttention

L = 6


@pytest.mark.parametrize("mask", ["none", "1d", "2d", "3d"])
def test_mha_separate_qkv_bias_masks(mask):
    q, k, v = _r(B, S, D), _r(B, L, D), _r(B, L, D)
    m = {"none": None, "1d": np.array([4, 6], dtype=np.int32),
         "2d": np.array([[1, 1, 1, 0, 1, 0], [1] * 6], dtype=np.int32),
         "3d": np.ones((B, S, L), dtype=np.int32) * np.array([1, 0, 1, 1, 1, 1], dtype=np.int32)}[mask]
    ins = [("q", q), ("k", k), ("v", v), ("bias", _r(3 * D))]
    if m is not None:
        ins.append(("m", m))
    check(*run_both("MultiHeadAttention", ins, num_heads=N))


def test_mha_past_present_causal_attention_bias():
    q, k, v = _r(B, S, D), _r(B, S, D), _r(B, S, D)
    pk, pv = _r(B, N, 3, H), _r(B, N, 3, H)
    ins = [("q", q), ("k", k), ("v", v), ("", None), ("", None), ("ab", _r(B, N, S, S + 3)),
           ("pk", pk), ("pv", pv)]
    check(*run_both("MultiHeadAttention", ins, n_out=3, num_heads=N, unidirectional=1,
                    scale=0.25))


def test_mha_kv_heads_first():
    q, k, v = _r(B, S, D), _r(B, N, L, H), _r(B, N, L, H)
    check(*run_both("MultiHeadAttention", [("q", q), ("k", k), ("v", v)], num_heads=N))


def test_mha_packed_forms_match_unpacked():
    """Packed QKV / KV (onnxruntime's CPU kernel refuses them): same result as unpacked."""
    from onnxedge.kernels.contrib_transformer import multi_head_attention
    q, k, v = _r(B, S, D), _r(B, S, D), _r(B, S, D)
    plain = multi_head_attention(None, q, k, v, num_heads=N)[0]
    packed = np.stack([x.reshape(B, S, N, H) for x in (q, k, v)], axis=3)
    np.testing.assert_allclose(multi_head_attention(None, packed, num_heads=N)[0], plain,
                               rtol=1e-5, atol=1e-6)
    kv = np.stack([x.reshape(B, S, N, H) for x in (k, v)], axis=3)
    np.testing.assert_allclose(multi_head_attention(None, q, kv, num_heads=N)[0], plain,
                               rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- norms

@pytest.mark.parametrize("variant", ["full", "no_beta_bias", "skip_broadcast", "fp16"])
def test_skip_layer_normalization(variant):
    dt = np.float16 if variant == "fp16" else np.float32
    x = _r(B, S, D, dtype=dt)
    skip = _r(S, D, dtype=dt) if variant == "skip_broadcast" else _r(B, S, D, dtype=dt)
    ins = [("x", x), ("skip", skip), ("gamma", _r(D, dtype=dt))]
    if variant != "no_beta_bias":
        ins += [("beta", _r(D, dtype=dt)), ("bias", _r(D, dtype=dt))]
    n_out = 1 if variant == "skip_broadcast" else 4
    e, g = run_both("SkipLayerNormalization", ins, n_out=n_out, epsilon=1e-5)
    check(e, g, rtol=3e-3 if dt == np.float16 else 1e-4)


def test_skip_simplified_layer_normalization():
    ins = [("x", _r(B, S, D)), ("skip", _r(B, S, D)), ("gamma", _r(D)), ("bias", _r(D))]
    check(*run_both("SkipSimplifiedLayerNormalization", ins, n_out=4, epsilon=1e-6))


@pytest.mark.parametrize("axis", [-1, 1])
def test_simplified_layer_normalization_default_domain(axis):
    x = _r(B, S, D)
    scale = _r(*x.shape[axis:]) if axis != -1 else _r(D)
    check(*run_both("SimplifiedLayerNormalization", [("x", x), ("s", scale)], n_out=2,
                    domain="", axis=axis, epsilon=1e-6))


def test_layer_normalization_below_opset_17():
    ins = [("x", _r(B, S, D)), ("s", _r(D)), ("b", _r(D))]
    check(*run_both("LayerNormalization", ins, domain="", opset=14, epsilon=1e-5))


@pytest.mark.parametrize("variant", ["full", "no_segment_no_mask", "position_ids"])
def test_embed_layer_normalization(variant):
    vocab, max_pos = 11, 9
    ids = RNG.integers(0, vocab, (B, S)).astype(np.int32) if hasattr(RNG, "integers") \
        else RNG.randint(0, vocab, (B, S)).astype(np.int32)
    seg = (np.arange(B * S).reshape(B, S) % 2).astype(np.int32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    ins = [("ids", ids), ("seg", seg) if variant == "full" else ("", None),
           ("we", _r(vocab, D)), ("pe", _r(max_pos, D)),
           ("se", _r(2, D)) if variant == "full" else ("", None),
           ("gamma", _r(D)), ("beta", _r(D))]
    if variant != "no_segment_no_mask":
        ins.append(("mask", mask))
    if variant == "position_ids":
        ins.append(("pos", np.array([[3, 1, 4, 1, 5], [8, 2, 6, 5, 3]], dtype=np.int32)))
    check(*run_both("EmbedLayerNormalization", ins, n_out=3, epsilon=1e-12, const=("we", "pe", "se")))


# ----------------------------------------------------------------------------- activations

@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_gelu_family(dt):
    x, bias = _r(B, S, D, scale=3, dtype=dt), _r(D, dtype=dt)
    tol = 3e-3 if dt == np.float16 else 1e-5
    check(*run_both("Gelu", [("x", x)]), rtol=tol)
    check(*run_both("BiasGelu", [("x", x), ("b", bias)]), rtol=tol)
    check(*run_both("FastGelu", [("x", x)]), rtol=tol)
    check(*run_both("FastGelu", [("x", x), ("b", bias)]), rtol=tol)
    check(*run_both("QuickGelu", [("x", x)]), rtol=tol)
    check(*run_both("QuickGelu", [("x", x)], alpha=1.1), rtol=tol)


def test_bias_add_and_bias_split_gelu():
    # onnxruntime has BiasAdd and BiasSplitGelu on CUDA only: compare with the formulas
    import math
    from onnxedge.kernels.contrib_transformer import bias_add, bias_split_gelu
    x, b, s = _r(B, S, D), _r(D), _r(B, S, D)
    np.testing.assert_allclose(bias_add(x, b, s), x + b + s, rtol=1e-6)
    x, bias = _r(2, 3, 8), _r(8)
    t = (x + bias).astype(np.float64)
    right = t[..., 4:]
    want = t[..., :4] * 0.5 * right * (1 + np.vectorize(math.erf)(right / math.sqrt(2)))
    np.testing.assert_allclose(bias_split_gelu(x, bias), want, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- matmul / gemm

@pytest.mark.parametrize("shapes,attrs", [
    (((3, 4), (4, 5)), {}),
    (((4, 3), (4, 5)), {"transA": 1, "alpha": 0.5}),
    (((2, 3, 4), (5, 4)), {"transB": 1}),
    (((2, 3, 4), (2, 5, 4)), {"transB": 1, "alpha": 2.0}),
    (((3, 2, 4), (2, 4, 5)), {"transBatchA": 1, "alpha": 0.7}),
    (((2, 3, 4), (4, 2, 5)), {"transBatchB": 1}),
    (((4, 2, 3), (5, 2, 4)), {"transBatchA": 1, "transA": 1, "transBatchB": 1, "transB": 1}),
    (((4,), (4, 5)), {}),
])
def test_fused_matmul(shapes, attrs):
    """(transBatch needs equal ranks >= 3 in onnxruntime.)"""
    a, b = _r(*shapes[0]), _r(*shapes[1])
    check(*run_both("FusedMatMul", [("a", a), ("b", b)], **attrs))


@pytest.mark.parametrize("act,extra", [
    ("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}), ("Tanh", {}),
    ("Sigmoid", {}), ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
    ("Elu", {"activation_alpha": 0.8}),
])
def test_fused_gemm(act, extra):
    a, b, c = _r(3, 4), _r(5, 4), _r(5)
    attrs = dict(extra, transB=1, alpha=0.9, beta=0.5)
    if act:
        attrs["activation"] = act
    check(*run_both("FusedGemm", [("a", a), ("b", b), ("c", c)], **attrs))


# ----------------------------------------------------------------------------- rotary / GQA

def _cos_sin(max_pos: int, half: int) -> Tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(max_pos).reshape(-1, 1) * inv.reshape(1, -1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


@pytest.mark.parametrize("layout,interleaved,rot,pos", [
    ("bsd", 0, 0, "ids"), ("bsd", 1, 0, "offset"), ("bnsh", 0, 0, "ids"),
    ("bsd", 0, 4, "ids"), ("bnsh", 1, 4, "offset"),
])
def test_rotary_embedding(layout, interleaved, rot, pos):
    hs = 8
    half = (rot or hs) // 2
    cos, sin = _cos_sin(12, half)
    x = _r(B, S, N * hs) if layout == "bsd" else _r(B, N, S, hs)
    p = (np.arange(B * S).reshape(B, S) % 12).astype(np.int64) if pos == "ids" \
        else np.array([3], dtype=np.int64)
    attrs = {"interleaved": interleaved}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if layout == "bsd" or rot:
        attrs["num_heads"] = N
    check(*run_both("RotaryEmbedding", [("x", x), ("p", p), ("cos", cos), ("sin", sin)],
                    **attrs), rtol=1e-5)


@pytest.mark.parametrize("case", ["prompt", "prompt_rotary_window", "decode", "packed_softcap"])
def test_group_query_attention(case):
    nq, nkv, b = 4, 2, 2
    hs = 16 if case in ("prompt_rotary_window", "decode") else 8   # onnxruntime: rotary needs 16k
    attrs: Dict[str, Any] = {"num_heads": nq, "kv_num_heads": nkv}
    if case == "decode":
        s, past = 1, 5
    else:
        s, past = 6, 0
    total = past + s
    q, k, v = _r(b, s, nq * hs), _r(b, s, nkv * hs), _r(b, s, nkv * hs)
    ins = [("q", q), ("k", k), ("v", v)]
    if case == "packed_softcap":
        ins = [("q", np.concatenate([q, k, v], axis=-1)), ("", None), ("", None)]
        attrs["softcap"] = 2.0
    if past:
        ins += [("pk", _r(b, nkv, past, hs)), ("pv", _r(b, nkv, past, hs))]
    else:
        ins += [("", None), ("", None)]
    ins += [("seqlens", np.full((b,), total - 1, dtype=np.int32)),
            ("total", np.array(total, dtype=np.int32))]
    if case in ("prompt_rotary_window", "decode"):
        cos, sin = _cos_sin(16, hs // 2)
        ins += [("cos", cos), ("sin", sin)]
        attrs["do_rotary"] = 1
    if case == "prompt_rotary_window":
        attrs["local_window_size"] = 2
    check(*run_both("GroupQueryAttention", ins, n_out=3, **attrs))


# ----------------------------------------------------------------------------- mapping pass

def _mapped_ops(op: str, inputs: Sequence[Tuple[str, Optional[np.ndarray]]], n_out: int = 1,
                opset: int = 17, const: Sequence[str] = (), **attrs: Any) -> List[Tuple[str, str]]:
    """(domain, op) of each node after onnxedge's optimizer (contrib_mapping) ran."""
    if onnx is None:
        pytest.skip("onnx is not installed")
    from onnxedge import onnx_loader
    from onnxedge.optimizer import optimize
    model = optimize(onnx_loader.load_model(_model(op, inputs, n_out, MS, opset, attrs, const)),
                     "extended")
    return [(n.domain, n.op_type) for n in model.graph.nodes]


def test_mapping_gelu_family_and_skip_layer_norm():
    x, bias = _r(B, S, D), _r(D)
    assert _mapped_ops("FastGelu", [("x", x), ("b", bias)]) == [("", "Add"),
                                                               ("com.onnxedge", "Gelu")]
    assert _mapped_ops("BiasGelu", [("x", x), ("b", bias)], opset=20) == [("", "Add"), ("", "Gelu")]
    ins = [("x", x), ("skip", _r(B, S, D)), ("gamma", _r(D)), ("beta", _r(D)), ("bias", _r(D))]
    got = _mapped_ops("SkipLayerNormalization", ins, n_out=4)
    assert got == [("com.microsoft", "SkipLayerNormalization")]      # mean / inv_std wanted
    ops = _mapped_ops("SkipLayerNormalization", ins, n_out=1)
    assert ("", "LayerNormalization") in ops and ("com.microsoft", "SkipLayerNormalization") \
        not in ops


def test_mapping_skip_simplified_layer_norm():
    """Without its statistics outputs, SkipSimplifiedLayerNormalization becomes Adds and
    onnxruntime's default-domain SimplifiedLayerNormalization (which the C engine runs)."""
    ins = [("x", _r(B, S, D)), ("skip", _r(B, S, D)), ("gamma", _r(D)), ("bias", _r(D))]
    assert _mapped_ops("SkipSimplifiedLayerNormalization", ins, n_out=4) == \
        [("com.microsoft", "SkipSimplifiedLayerNormalization")]      # inv_std_var wanted
    assert _mapped_ops("SkipSimplifiedLayerNormalization", ins, n_out=1) == \
        [("", "Add"), ("", "Add"), ("", "SimplifiedLayerNormalization")]
    check(*run_both("SkipSimplifiedLayerNormalization", ins, n_out=1, epsilon=1e-6))
    check(*run_both("SkipSimplifiedLayerNormalization", ins[:3], n_out=1, epsilon=1e-6))


def test_mapping_attention_onto_onnxedge_mha():
    for mask in ("1d_lengths", "2d_raw", "none"):
        ops = _mapped_ops("Attention", _attention_inputs(MASKS[mask]), num_heads=N,
                          const=("w", "b"))
        assert ("com.onnxedge", "MultiHeadAttention") in ops, (mask, ops)
        assert not [o for d, o in ops if d == MS], (mask, ops)
    # kept: a causal, a 3-D mask, non-constant weights
    assert ("com.microsoft", "Attention") in _mapped_ops(
        "Attention", _attention_inputs(), num_heads=N, unidirectional=1, const=("w", "b"))
    assert ("com.microsoft", "Attention") in _mapped_ops(
        "Attention", _attention_inputs(MASKS["3d_raw"]), num_heads=N, const=("w", "b"))
    assert ("com.microsoft", "Attention") in _mapped_ops(
        "Attention", _attention_inputs(), num_heads=N)
    ins = [("q", _r(B, S, D)), ("k", _r(B, L, D)), ("v", _r(B, L, D)), ("bias", _r(3 * D))]
    ops = _mapped_ops("MultiHeadAttention", ins, num_heads=N, const=("bias",))
    assert ("com.onnxedge", "MultiHeadAttention") in ops, ops


@pytest.mark.parametrize("mask", ["1d_lengths", "2d_raw", "none"])
def test_mapped_attention_matches_onnxruntime(mask):
    """Constant weights: the mapping applies, and the optimized model still gives onnxruntime's
    numbers (run_both compares onnxedge optimized and not)."""
    check(*run_both("Attention", _attention_inputs(MASKS[mask]), num_heads=N, const=("w", "b")))
    ins = [("q", _r(B, S, D)), ("k", _r(B, L, D)), ("v", _r(B, L, D)), ("bias", _r(3 * D))]
    check(*run_both("MultiHeadAttention", ins, num_heads=N, const=("bias",)))
