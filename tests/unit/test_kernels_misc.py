"""Kernels for quantization, losses, signal, random, text, image/detection and ai.onnx.ml ops,
called directly (the conformance suite covers them through sessions)."""
from __future__ import annotations

import numpy as np
import pytest

import onnxedge
from onnxedge import dtypes
from onnxedge.kernels import image, loss, ml, quantization, random, signal, text
from onnxedge.kernels import registry


class _Ctx:
    def __init__(self, n: int):
        self.num_outputs = n


# ---------------------------------------------------------------- quantization

def test_quantize_per_tensor_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -1000.0, 1000.0], dtype=np.float32)
    y = quantization.quantize_linear(x, np.float32(1.0), np.uint8(10))
    assert y.dtype == np.uint8
    assert y.tolist() == [10, 12, 12, 0, 255]


def test_quantize_per_axis_and_blocked():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = quantization.quantize_linear(x, np.array([1.0, 2.0], dtype=np.float32),
                                     np.array([0, 0], dtype=np.int8), axis=0)
    assert y.tolist() == [[0, 1, 2, 3], [2, 2, 3, 4]]
    scales = np.array([[1.0, 2.0], [1.0, 4.0]], dtype=np.float32)
    yb = quantization.quantize_linear(x, scales, None, axis=1, block_size=2, output_dtype=3)
    assert yb.dtype == np.int8
    assert yb.tolist() == [[0, 1, 1, 2], [4, 5, 2, 2]]


def test_dequantize_round_trip_keeps_scale_dtype():
    q = np.array([0, 128, 255], dtype=np.uint8)
    y = quantization.dequantize_linear(q, np.float32(0.5), np.uint8(128))
    assert y.dtype == np.float32 and y.tolist() == [-64.0, 0.0, 63.5]
    y16 = quantization.dequantize_linear(q, np.float16(0.5), np.uint8(128))
    assert y16.dtype == np.float16


def test_quantize_rejects_bad_scale_shape():
    with pytest.raises(onnxedge.InvalidArgument, match="QuantizeLinear"):
        quantization.quantize_linear(np.zeros((2, 3), np.float32), np.ones(4, np.float32), axis=1)


def test_quantize_int4_needs_ml_dtypes_or_works():
    if dtypes.has_numpy(22):
        y = quantization.quantize_linear(np.array([9.0, -9.0], np.float32), np.float32(1),
                                         output_dtype=22)
        assert y.astype(np.int8).tolist() == [7, -8]
    else:
        with pytest.raises(onnxedge.NotImplemented, match="ml_dtypes"):
            quantization.quantize_linear(np.zeros(2, np.float32), np.float32(1), output_dtype=22)


def test_dynamic_quantize_linear():
    x = np.array([0.0, 2.0, -3.0, 1000.0], dtype=np.float32)
    y, scale, zp = quantization.dynamic_quantize_linear(x)
    assert scale.dtype == np.float32 and zp.dtype == np.uint8 and y.dtype == np.uint8
    np.testing.assert_allclose(scale, np.float32(1003.0) / 255, rtol=1e-6)
    assert int(zp) == 1 and y[-1] == 255


def test_qlinear_matmul_matches_float_math():
    a = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    b = np.array([[5, 6], [7, 8]], dtype=np.uint8)
    y = quantization.qlinear_matmul(a, np.float32(1), np.uint8(0), b, np.float32(1), np.uint8(0),
                                    np.float32(2), np.uint8(0))
    assert y.dtype == np.uint8 and y.tolist() == [[10, 11], [22, 25]]


def test_qlinear_conv_identity_kernel():
    x = np.arange(9, dtype=np.uint8).reshape(1, 1, 3, 3)
    w = np.ones((1, 1, 1, 1), dtype=np.uint8)
    y = quantization.qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(1), np.uint8(0),
                                  np.float32(1), np.uint8(0))
    assert y.dtype == np.uint8 and (y == x).all()


# ---------------------------------------------------------------- losses

def test_nll_loss_reductions_weights_and_ignore_index():
    logp = np.log(np.array([[0.1, 0.9], [0.8, 0.2], [0.5, 0.5]], dtype=np.float32))
    t = np.array([1, 0, 1], dtype=np.int64)
    none = loss.negative_log_likelihood_loss(logp, t, reduction="none")
    assert none.dtype == np.float32 and none.shape == (3,)
    np.testing.assert_allclose(none, -logp[[0, 1, 2], [1, 0, 1]], rtol=1e-6)
    w = np.array([2.0, 1.0], dtype=np.float32)
    mean = loss.negative_log_likelihood_loss(logp, t, w, ignore_index=1)
    np.testing.assert_allclose(mean, -logp[1, 0], rtol=1e-6)
    assert mean.shape == ()


def test_softmax_cross_entropy_returns_log_prob_when_asked():
    x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    out, logp = loss.softmax_cross_entropy_loss(_Ctx(2), x, np.array([2]), reduction="sum")
    ref = x - np.log(np.exp(x).sum())
    np.testing.assert_allclose(logp, ref, rtol=1e-6)
    np.testing.assert_allclose(out, -ref[0, 2], rtol=1e-6)
    single = loss.softmax_cross_entropy_loss(_Ctx(1), x, np.array([2]))
    assert isinstance(single, np.ndarray)


def test_loss_rejects_bad_target_shape():
    with pytest.raises(onnxedge.InvalidArgument, match="target must have shape"):
        loss.negative_log_likelihood_loss(np.zeros((2, 3), np.float32), np.zeros(3, np.int64))


# ---------------------------------------------------------------- signal

def test_dft_matches_numpy_fft_and_inverse_round_trips():
    rng = np.random.RandomState(0)
    x = rng.rand(2, 8, 1).astype(np.float32)
    y = signal.dft_20(x)
    ref = np.fft.fft(x[..., 0], axis=1)
    np.testing.assert_allclose(y[..., 0], ref.real, atol=1e-5)
    np.testing.assert_allclose(y[..., 1], ref.imag, atol=1e-5)
    back = signal.dft_20(y, inverse=1)
    np.testing.assert_allclose(back[..., 0], x[..., 0], atol=1e-5)
    half = signal.dft_17(x, onesided=1)
    assert half.shape == (2, 5, 2)


def test_dft_rejects_bad_axis():
    with pytest.raises(onnxedge.InvalidArgument, match="DFT: axis"):
        signal.dft_20(np.zeros((2, 8, 1), np.float32), None, np.array(2, np.int64))


def test_windows_match_their_formulas():
    n = 8
    k = np.arange(n)
    np.testing.assert_allclose(signal.hann_window(np.array(n)), 0.5 - 0.5 * np.cos(2 * np.pi * k / n),
                               atol=1e-6)
    sym = signal.hamming_window(np.array(n), periodic=0, output_datatype=11)
    assert sym.dtype == np.float64
    np.testing.assert_allclose(sym, np.hamming(n), atol=1e-2)
    np.testing.assert_allclose(signal.blackman_window(np.array(n), periodic=0), np.blackman(n),
                               atol=1e-6)


def test_stft_frames_and_bins():
    x = np.random.RandomState(1).rand(1, 16, 1).astype(np.float32)
    y = signal.stft(x, np.array(4), None, np.array(8))
    assert y.shape == (1, 3, 5, 2)
    ref = np.fft.rfft(x[0, 4:12, 0])
    np.testing.assert_allclose(y[0, 1, :, 0], ref.real, atol=1e-5)


def test_mel_weight_matrix_shape():
    m = signal.mel_weight_matrix(np.array(8), np.array(16), np.array(8192), np.array(0.0),
                                 np.array(4096.0))
    assert m.shape == (9, 8) and m.dtype == np.float32


# ---------------------------------------------------------------- random

def test_random_ops_are_reproducible_with_a_seed():
    a = random.random_normal(shape=[3, 4], seed=5.0)
    b = random.random_normal(shape=[3, 4], seed=5.0)
    assert a.dtype == np.float32 and (a == b).all()
    u = random.random_uniform_like(np.zeros((100,), np.float64), low=2.0, high=3.0, seed=1.0)
    assert u.dtype == np.float64 and (u >= 2).all() and (u < 3).all()
    bern = random.bernoulli(np.array([0.0, 1.0, 1.0], np.float32), seed=3.0)
    assert bern.tolist() == [0.0, 1.0, 1.0]
    m = random.multinomial(np.log(np.array([[0.0001, 1000.0]], np.float32)), sample_size=5,
                           seed=2.0)
    assert m.dtype == np.int32 and m.shape == (1, 5) and (m == 1).all()


def test_random_normal_needs_shape():
    with pytest.raises(onnxedge.InvalidArgument, match="shape"):
        random.random_normal()


# ---------------------------------------------------------------- text

def _s(*items):
    a = np.empty(len(items), dtype=object)
    a[:] = items
    return a


def test_string_ops():
    assert text.string_concat(_s("a", "b"), _s("!")).tolist() == ["a!", "b!"]
    y, z = text.string_split(_s("a,b,c", "d"), delimiter=",")
    assert y.tolist() == [["a", "b", "c"], ["d", "", ""]] and z.tolist() == [3, 1]
    assert text.regex_full_match(_s("ab12", "ab"), pattern=r"[a-z]+\d+").tolist() == [True, False]
    out = text.string_normalizer(_s("Mon", "tue"), case_change_action="UPPER", stopwords=["mon"])
    assert out.tolist() == ["TUE"]


def test_tfidf_bigrams():
    x = np.array([1, 2, 1, 2, 3], dtype=np.int64)
    y = text.tfidf_vectorizer(x, max_gram_length=2, min_gram_length=1, mode="TF",
                              ngram_counts=[0, 2], ngram_indexes=[0, 1, 2],
                              pool_int64s=[1, 2, 1, 2])
    assert y.dtype == np.float32 and y.tolist() == [2.0, 2.0, 2.0]


def test_regex_bad_pattern_is_invalid_argument():
    with pytest.raises(onnxedge.InvalidArgument, match="RegexFullMatch"):
        text.regex_full_match(_s("a"), pattern="(")


# ---------------------------------------------------------------- image & detection

def test_grid_sample_identity_grid_returns_input():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], dtype=np.float32)
    grid = image.affine_grid(theta, np.array([1, 1, 4, 4]), align_corners=0)
    for mode in ("linear", "nearest", "cubic"):
        y = image.grid_sample_20(x, grid, mode=mode)
        np.testing.assert_allclose(y, x, atol=1e-5)
    assert image.grid_sample_16(x, grid, mode="bilinear").shape == (1, 1, 4, 4)


def test_non_max_suppression_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 10, 1, 11]]], dtype=np.float32)
    scores = np.array([[[0.9, 0.95, 0.3]]], dtype=np.float32)
    sel = image.non_max_suppression(boxes, scores, np.array([3]), np.array([0.5]))
    assert sel.dtype == np.int64 and sel.tolist() == [[0, 0, 1], [0, 0, 2]]


def test_roi_align_constant_image():
    x = np.full((1, 2, 8, 8), 3.0, dtype=np.float32)
    y = image.roi_align_16(x, np.array([[0, 0, 4, 4]], np.float32), np.array([0]),
                           output_height=2, output_width=2)
    assert y.shape == (1, 2, 2, 2)
    np.testing.assert_allclose(y, 3.0)


def test_col2im_sums_overlaps_and_center_crop_pad():
    cols = np.ones((1, 4, 4), dtype=np.float32)       # 2x2 blocks over a 3x3 image
    img = image.col2im(cols, np.array([3, 3]), np.array([2, 2]))
    assert img[0, 0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = image.center_crop_pad(x, np.array([4, 1]))
    assert out.tolist() == [[0], [1], [4], [0]]


# ---------------------------------------------------------------- ai.onnx.ml

def test_label_encoder_and_tree_ensemble():
    y = ml.label_encoder_2(_s("a", "z"), keys_strings=["a"], values_int64s=[7])
    assert y.tolist() == [7, -1]
    x = np.array([[1.0], [5.0]], dtype=np.float32)
    out = ml.tree_ensemble(x, n_targets=1, tree_roots=[0], nodes_modes=np.array([0], np.uint8),
                           nodes_featureids=[0], nodes_splits=np.array([3.0]),
                           nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1],
                           nodes_falseleafs=[1], leaf_targetids=[0, 0],
                           leaf_weights=np.array([10.0, 20.0]))
    assert out.dtype == np.float32 and out.tolist() == [[10.0], [20.0]]


def test_ml_small_ops():
    assert ml.binarizer(np.array([0.5, 2.0], np.float32), threshold=1.0).tolist() == [0.0, 1.0]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert ml.array_feature_extractor(x, np.array([2])).tolist() == [[2.0], [5.0]]


def test_registrations_resolve_by_opset():
    assert registry.resolve("", "DFT", 17).fn is signal.dft_17
    assert registry.resolve("", "DFT", 20).fn is signal.dft_20
    assert registry.resolve("", "GridSample", 16).fn is image.grid_sample_16
    assert registry.resolve("ai.onnx.ml", "TreeEnsemble", 5).fn is ml.tree_ensemble
    assert registry.resolve("", "QuantizeLinear", 28).fn is quantization.quantize_linear
