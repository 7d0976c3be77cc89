"""Unit tests of the elementwise, activation, reduction and linear-algebra kernels.

Each kernel is called through the registry at a given opset (so the opset ranges are tested too)
and compared with numpy, math, or onnx's reference evaluator, on the shapes and dtypes that break
kernels: broadcasting, empty tensors, 0-d tensors, negative axes, float16, integers, old opsets.
Runs on Python 3.8 + numpy 1.17 + onnx 1.14 as well as on current versions.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxedge.kernels.activation  # noqa: F401  (registers the kernels)
import onnxedge.kernels.elementwise  # noqa: F401
import onnxedge.kernels.matmul  # noqa: F401
import onnxedge.kernels.reduction  # noqa: F401
from onnxedge.errors import InvalidArgument
from onnxedge.kernels import registry

RNG = np.random.RandomState(1234)


def run(op, opset, *inputs, **attrs):
    """Call the kernel that serves `op` at `opset`."""
    return registry.resolve("", op, opset).fn(*inputs, **attrs)


def reference(op, opset, inputs, attrs=None, n_out=1):
    """onnx's reference evaluator on a one-node model (skips when onnx is missing)."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    ref = pytest.importorskip("onnx.reference")
    names = ["in%d" % i if x is not None else "" for i, x in enumerate(inputs)]
    outs = ["out%d" % i for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype)
                                       if hasattr(helper, "np_dtype_to_tensor_dtype")
                                       else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[x.dtype], None)
         for n, x in zip(names, inputs) if x is not None],
        [helper.make_tensor_value_info(o, 0, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    feeds = {n: x for n, x in zip(names, inputs) if x is not None}
    return ref.ReferenceEvaluator(model).run(None, feeds)


def rand(*shape, dtype=np.float32, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def assert_same(got, want, rtol=1e-6, atol=1e-6):
    """Same type, dtype and shape, close values (NaNs in the same places)."""
    assert type(got) is np.ndarray, type(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ registration

@pytest.mark.parametrize("op, opset, attr, present", [
    ("Add", 6, "broadcast", True), ("Add", 7, "broadcast", False),
    ("Abs", 1, "consumed_inputs", True), ("Abs", 6, "consumed_inputs", False),
    ("ReduceSum", 12, "axes", True), ("ReduceSum", 13, "noop_with_empty_axes", True),
    ("ReduceMean", 17, "axes", True), ("ReduceMean", 18, "noop_with_empty_axes", True),
    ("Clip", 6, "min", True), ("Clip", 11, "min", False),
    ("TopK", 9, "k", True), ("TopK", 10, "k", False),
    ("Gemm", 6, "broadcast", True), ("Gemm", 7, "broadcast", False),
    ("Selu", 1, "consumed_inputs", True), ("Pow", 6, "broadcast", True),
])
def test_opset_ranges_pick_the_right_attributes(op, opset, attr, present):
    accepts = registry.signature(registry.resolve("", op, opset).fn).accepts
    assert (attr in accepts) == present


def test_every_op_resolves_at_its_newest_opset():
    for op in ["Erf", "IsInf", "BitShift", "Mod", "Celu", "Gelu", "Mish", "Swish", "SwiGLU",
               "ReduceLogSumExp", "CumProd", "TopK", "Einsum", "Det", "Trilu", "MatMulInteger"]:
        assert registry.find("", op, 28) is not None, op


# ------------------------------------------------------------------------------------- unary

UNARY = [("Abs", np.abs), ("Neg", np.negative), ("Floor", np.floor), ("Ceil", np.ceil),
         ("Round", np.rint), ("Exp", np.exp), ("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan),
         ("Atan", np.arctan), ("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh),
         ("Sign", np.sign), ("Tanh", np.tanh), ("Softsign", lambda v: v / (1 + np.abs(v)))]


@pytest.mark.parametrize("op, fn", UNARY)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 5)])
def test_unary_keeps_dtype_and_shape(op, fn, dtype, shape):
    x = rand(*shape, dtype=dtype)
    want = fn(x.astype(np.float64)).astype(dtype)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    assert_same(run(op, 22, x), want, rtol=tol, atol=tol)


def test_unary_domain_errors_give_nan_quietly():
    x = np.array([-1.0, 0.0, 4.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(run("Sqrt", 13, x), np.array([np.nan, 0, 2], np.float32))
        assert_same(run("Log", 13, x), np.array([np.nan, -np.inf, np.log(4)], np.float32))
        assert_same(run("Reciprocal", 13, x), np.array([-1, np.inf, 0.25], np.float32))
        assert_same(run("Acosh", 22, x), np.array([np.nan, np.nan, math.acosh(4)], np.float32))


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6], dtype=np.float32)
    assert_same(run("Round", 11, x), np.array([0, 2, 2, -0, -2, 2, 3], np.float32))


def test_erf_matches_math_erf():
    x64 = np.concatenate([RNG.standard_normal(20000) * 2, [0.0, -0.0, 1e-30, -1e-8, 3.9, 6.5, -40]])
    want = np.array([math.erf(v) for v in x64])
    got64 = run("Erf", 13, x64)
    nz = want != 0
    assert np.max(np.abs(got64 - want)[nz] / np.abs(want[nz])) < 1e-14
    x32 = x64.astype(np.float32)
    want32 = np.array([math.erf(float(v)) for v in x32])
    got32 = run("Erf", 13, x32)
    assert got32.dtype == np.float32
    nz = want32 != 0
    assert np.max(np.abs(got32.astype(np.float64) - want32)[nz] / np.abs(want32[nz])) < 1e-6
    special = run("Erf", 9, np.array([np.nan, np.inf, -np.inf], np.float32))
    assert np.isnan(special[0]) and special[1] == 1 and special[2] == -1
    assert_same(run("Erf", 13, np.zeros((2, 0), np.float16)), np.zeros((2, 0), np.float16))


def test_isinf_isnan_and_logic():
    x = np.array([np.inf, -np.inf, np.nan, 1.0], dtype=np.float32)
    assert_same(run("IsInf", 20, x), [True, True, False, False])
    assert_same(run("IsInf", 20, x, detect_negative=0), [True, False, False, False])
    assert_same(run("IsInf", 20, x, detect_positive=0), [False, True, False, False])
    assert_same(run("IsInf", 20, x, detect_positive=0, detect_negative=0), [False] * 4)
    assert_same(run("IsNaN", 13, x.astype(np.float16)), [False, False, True, False])
    assert_same(run("Not", 1, np.array([True, False])), [False, True])
    assert_same(run("BitwiseNot", 18, np.array([0, 5], np.uint8)), np.array([255, 250], np.uint8))


# ------------------------------------------------------------------------------------ binary

@pytest.mark.parametrize("op, fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                    ("Div", np.divide)])
@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (3, 1)), ((1,), (2, 1, 5)), ((0, 3), (3,)),
                                    ((), ()), ((4, 1), (1, 0))])
def test_arithmetic_broadcasts(op, fn, sa, sb):
    a, b = rand(*sa), rand(*sb, lo=0.5, hi=2.0)
    assert_same(run(op, 14, a, b), fn(a, b).astype(np.float32))


def test_broadcast_mismatch_raises_invalid_argument():
    with pytest.raises(InvalidArgument, match="Add.*cannot be broadcast"):
        run("Add", 14, rand(2, 3), rand(4))
    with pytest.raises(InvalidArgument, match="Max"):
        run("Max", 13, rand(2, 3), rand(3), rand(2))


def test_integer_division_truncates_toward_zero():
    a = np.array([-7, 7, -7, 7, 0, -1], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], dtype=np.int32)
    assert_same(run("Div", 14, a, b), np.array([-3, 3, 3, -3, 0, 0], np.int32))
    assert_same(run("Div", 14, a.astype(np.int64), np.int64(-2) * np.ones(1, np.int64)),
                np.array([3, -3, 3, -3, 0, 0], np.int64))
    assert_same(run("Div", 14, np.array([7, 200], np.uint8), np.array([2], np.uint8)),
                np.array([3, 100], np.uint8))


def test_integer_arithmetic_keeps_dtype():
    for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        a, b = np.array([1, 2, 3], dt), np.array([2], dt)
        for op, want in (("Add", a + b), ("Mul", a * b), ("Sub", a - b)):
            assert_same(run(op, 14, a, b), want.astype(dt))


def test_pow_result_has_base_dtype():
    x = np.array([2.0, 3.0, 4.0], np.float32)
    assert_same(run("Pow", 15, x, np.array([2, 3, -1], np.int64)),
                np.array([4, 27, 0.25], np.float32))
    assert_same(run("Pow", 15, x, np.array(2.0, np.float32)), x * x)
    assert_same(run("Pow", 15, np.array([2, 3, -4], np.int32),
                    np.array([0.5, 2.0, 2.0], np.float32)), np.array([1, 9, 16], np.int32))
    assert_same(run("Pow", 15, np.array([2, 1, -1], np.int64), np.array([-1, -2, -3], np.int64)),
                np.array([0, 1, -1], np.int64))
    assert run("Pow", 15, rand(2, 3, dtype=np.float16, lo=0.5, hi=2),
               np.array([0.5], np.float32)).dtype == np.float16


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.float32, np.float64])
def test_mod_signs(dtype):
    a = np.array([-4, 7, 5, 4, -7, 8], dtype)
    b = np.array([2, -3, 8, -2, 3, 5], dtype)
    py = np.array([int(x) % int(y) if dtype in (np.int32, np.int8) else float(x) % float(y)
                   for x, y in zip(a, b)], dtype)
    c = np.array([math.fmod(float(x), float(y)) for x, y in zip(a, b)]).astype(dtype)
    assert_same(run("Mod", 13, a, b), py)
    assert_same(run("Mod", 13, a, b, fmod=1), c)
    with pytest.raises(InvalidArgument, match="fmod"):
        run("Mod", 13, a, b, fmod=2)


def test_bitshift_edges():
    x = np.array([-8, 8, 1, -1], np.int8)
    assert_same(run("BitShift", 28, x, np.array([1, 1, 7, 9], np.int8), direction="RIGHT"),
                np.array([-4, 4, 0, -1], np.int8))
    assert_same(run("BitShift", 28, x, np.array([1, 4, 7, -1], np.int8), direction="LEFT"),
                np.array([-16, -128, -128, 0], np.int8))
    u = np.array([1, 2 ** 63], np.uint64)
    assert_same(run("BitShift", 11, u, np.array([63, 64], np.uint64), direction="RIGHT"),
                np.array([0, 0], np.uint64))
    assert_same(run("BitShift", 11, u, np.array([63], np.uint64), direction="LEFT"),
                np.array([2 ** 63, 0], np.uint64))
    with pytest.raises(InvalidArgument, match="direction"):
        run("BitShift", 11, u, u, direction="UP")


def test_legacy_broadcast_attribute():
    a = rand(2, 3, 4, 5)
    b = rand(3, 4)
    assert_same(run("Add", 6, a, b, broadcast=1, axis=1), a + b.reshape(1, 3, 4, 1))
    c = rand(5)
    assert_same(run("Mul", 1, a, c, broadcast=1), a * c)
    assert_same(run("Sub", 6, a, np.array([2.0], np.float32), broadcast=1), a - 2)
    with pytest.raises(InvalidArgument, match="same shape"):
        run("Add", 6, a, c)
    with pytest.raises(InvalidArgument, match="does not fit"):
        run("Add", 6, a, rand(4, 3), broadcast=1, axis=1)
    assert_same(run("Pow", 1, a, np.array([2.0], np.float32), broadcast=1), a * a, rtol=1e-6)
    assert_same(run("Greater", 1, a, c, broadcast=1), a > c)


def test_comparisons_and_logic():
    a, b = rand(3, 4), rand(4)
    for op, fn in (("Greater", np.greater), ("Less", np.less), ("Equal", np.equal),
                   ("GreaterOrEqual", np.greater_equal), ("LessOrEqual", np.less_equal)):
        assert_same(run(op, 16 if "Or" in op else 13, a, b), fn(a, b))
    s = np.array(["a", "bc", ""], dtype=object)
    assert_same(run("Equal", 19, s, np.array(["bc"], dtype=object)), [False, True, False])
    t, f = np.array([True, False, True]), np.array([[True], [False]])
    assert_same(run("Xor", 7, t, f), np.logical_xor(t, f))
    assert_same(run("And", 7, t, f), np.logical_and(t, f))
    assert_same(run("BitwiseXor", 18, np.array([5, 3], np.int16), np.array([1], np.int16)),
                np.array([4, 2], np.int16))


def test_variadic_ops_broadcast_and_do_not_alias():
    xs = [rand(2, 1, 3), rand(4, 1), rand(3)]
    assert_same(run("Sum", 13, *xs), xs[0] + xs[1] + xs[2])
    assert_same(run("Mean", 13, *xs), (xs[0] + xs[1] + xs[2]) / np.float32(3))
    assert_same(run("Max", 13, *xs), np.maximum(np.maximum(xs[0], xs[1]), xs[2]))
    assert_same(run("Min", 8, *xs), np.minimum(np.minimum(xs[0], xs[1]), xs[2]))
    one = rand(3)
    out = run("Sum", 13, one)
    assert out is not one and np.array_equal(out, one)
    h = [x.astype(np.float16) for x in xs]
    assert run("Mean", 13, *h).dtype == np.float16
    assert_same(run("Max", 1, *xs, consumed_inputs=[0, 0, 0]), run("Max", 13, *xs))


def test_clip_across_opsets():
    x = np.array([-5.0, -1.0, 0.5, 2.0, 9.0], np.float32)
    lo, hi = np.array(-1.5, np.float32), np.array(1.5, np.float32)
    assert_same(run("Clip", 13, x, lo, hi), np.clip(x, -1.5, 1.5))
    assert_same(run("Clip", 13, x, None, hi), np.minimum(x, 1.5))
    assert_same(run("Clip", 13, x, lo), np.maximum(x, -1.5))
    assert_same(run("Clip", 13, x), x)
    assert_same(run("Clip", 13, x, hi, lo), np.full(5, -1.5, np.float32))   # min > max -> max
    assert_same(run("Clip", 6, x, min=-1.0), np.maximum(x, -1.0))
    assert_same(run("Clip", 1, x), x)
    i8 = np.array([-128, 0, 127], np.int8)
    assert_same(run("Clip", 13, i8, np.array(-5, np.int8), np.array(5, np.int8)),
                np.array([-5, 0, 5], np.int8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(run("Clip", 6, x.astype(np.float16)), x.astype(np.float16))
    with pytest.raises(InvalidArgument, match="scalar"):
        run("Clip", 13, x, np.array([1.0, 2.0], np.float32))
    assert_same(run("Clip", 13, np.array(3.0, np.float32), lo, hi), np.array(1.5, np.float32))


# -------------------------------------------------------------------------------- activations

def _sigmoid64(v):
    return 1.0 / (1.0 + np.exp(-v))


ACTIVATIONS = [
    ("Relu", {}, lambda v: np.maximum(v, 0)),
    ("LeakyRelu", {"alpha": 0.2}, lambda v: np.where(v < 0, 0.2 * v, v)),
    ("Elu", {"alpha": 0.7}, lambda v: np.where(v > 0, v, 0.7 * np.expm1(v))),
    ("Selu", {}, lambda v: 1.0507009873554805 * np.where(v > 0, v,
                                                         1.6732632423543772 * np.expm1(v))),
    ("Celu", {"alpha": 2.0}, lambda v: np.where(v > 0, v, 2.0 * np.expm1(v / 2.0))),
    ("Sigmoid", {}, _sigmoid64),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, lambda v: np.clip(0.3 * v + 0.4, 0, 1)),
    ("HardSwish", {}, lambda v: v * np.clip(v / 6 + 0.5, 0, 1)),
    ("Softplus", {}, lambda v: np.log1p(np.exp(v))),
    ("Mish", {}, lambda v: v * np.tanh(np.log1p(np.exp(v)))),
    ("ThresholdedRelu", {"alpha": 0.5}, lambda v: np.where(v > 0.5, v, 0)),
    ("Shrink", {"lambd": 0.7, "bias": 0.2},
     lambda v: np.where(v < -0.7, v + 0.2, np.where(v > 0.7, v - 0.2, 0))),
    ("Swish", {"alpha": 1.5}, lambda v: v * _sigmoid64(1.5 * v)),
    ("Gelu", {}, lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))),
    ("Gelu", {"approximate": "tanh"},
     lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
]


@pytest.mark.parametrize("op, attrs, fn", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_activations_match_formulas(op, attrs, fn, dtype):
    x = rand(4, 5, dtype=dtype, lo=-6, hi=6)
    got = run(op, 24, x, **attrs)
    tol = 3e-3 if dtype == np.float16 else 2e-6
    assert_same(got, fn(x.astype(np.float64)).astype(dtype), rtol=tol, atol=tol)
    assert run(op, 24, x[:0], **attrs).shape == (0, 5)
    assert run(op, 24, x[0, 0], **attrs).shape == ()


def test_activations_survive_extremes_without_warnings():
    x = np.array([-1e4, -100.0, 0.0, 100.0, 1e4], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = run("Sigmoid", 13, x)
        assert s[0] < 1e-30 and s[-1] == 1 and s[2] == 0.5
        assert_same(run("Softplus", 22, x), np.array([0, 0, math.log(2), 100, 1e4], np.float32))
        assert np.all(np.isfinite(run("Mish", 22, x)))
        assert np.all(np.isfinite(run("Elu", 22, x)))
        assert_same(run("Softmax", 13, x), np.array([0, 0, 0, 0, 1], np.float32))


def test_prelu_broadcasts_slope():
    x = rand(2, 3, 4)
    slope = rand(3, 1, lo=0, hi=1)
    assert_same(run("PRelu", 16, x, slope), np.where(x < 0, x * slope, x))
    per_channel = rand(3, lo=0, hi=1)
    assert_same(run("PRelu", 6, x, per_channel), np.where(x < 0, x * per_channel[:, None], x))
    xi = np.array([-4, 3], np.int32)
    assert_same(run("PRelu", 16, xi, np.array([2], np.int32)), np.array([-8, 3], np.int32))
    with pytest.raises(InvalidArgument, match="PRelu"):
        run("PRelu", 16, x, rand(5))


def test_swiglu():
    a, b = rand(2, 6), rand(2, 6)
    want = a * _sigmoid64(a.astype(np.float64)) * b
    assert_same(run("SwiGLU", 28, a, b), want.astype(np.float32), rtol=1e-5)
    with pytest.raises(InvalidArgument, match="same shape"):
        run("SwiGLU", 28, a, b[:, :1])


def _softmax64(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_softmax_family_old_and_new_semantics(axis):
    x = rand(2, 3, 4).astype(np.float64)
    a = axis % 3
    # opset 13: along the axis alone
    assert_same(run("Softmax", 13, x, axis=axis), _softmax64(x, a))
    assert_same(run("LogSoftmax", 13, x, axis=axis), np.log(_softmax64(x, a)))
    # opsets < 13: over the input flattened to 2-D at the axis
    flat = x.reshape(int(np.prod(x.shape[:a])), -1)
    assert_same(run("Softmax", 11, x, axis=axis), _softmax64(flat, 1).reshape(x.shape))
    assert_same(run("LogSoftmax", 1, x, axis=axis), np.log(_softmax64(flat, 1)).reshape(x.shape))
    hard = np.zeros_like(flat)
    hard[np.arange(flat.shape[0]), flat.argmax(1)] = 1
    assert_same(run("Hardmax", 11, x, axis=axis), hard.reshape(x.shape))


def test_softmax_defaults_and_edges():
    x = rand(2, 3, 4)
    assert_same(run("Softmax", 13, x), _softmax64(x.astype(np.float64), 2).astype(np.float32),
                rtol=1e-5)
    assert_same(run("Softmax", 12, x), _softmax64(x.reshape(2, 12).astype(np.float64), 1)
                .reshape(2, 3, 4).astype(np.float32), rtol=1e-5)
    assert run("Softmax", 13, x.astype(np.float16)).dtype == np.float16
    assert_same(run("Softmax", 13, np.zeros((0, 3), np.float32)), np.zeros((0, 3), np.float32))
    assert_same(run("Hardmax", 13, np.array([[1.0, 3.0, 3.0]], np.float32)),
                np.array([[0.0, 1.0, 0.0]], np.float32))
    with pytest.raises(InvalidArgument, match="axis"):
        run("Softmax", 13, x, axis=3)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_matches_onnxruntime_at_opset_11(op):
    # onnx's reference evaluator applies the opset-13 rule at every opset; onnxruntime
    # flattens to 2-D as opsets < 13 specify.
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference here")
    from onnx import TensorProto, helper
    x = rand(2, 3, 4)
    node = helper.make_node(op, ["x"], ["y"], axis=1)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert_same(run(op, 11, x, axis=1), sess.run(None, {"x": x})[0], rtol=1e-5)


# -------------------------------------------------------------------------------- reductions

REDUCE = [
    ("ReduceSum", lambda v, ax, k: np.sum(v, axis=ax, keepdims=k)),
    ("ReduceMean", lambda v, ax, k: np.mean(v, axis=ax, keepdims=k)),
    ("ReduceMax", lambda v, ax, k: np.max(v, axis=ax, keepdims=k)),
    ("ReduceMin", lambda v, ax, k: np.min(v, axis=ax, keepdims=k)),
    ("ReduceProd", lambda v, ax, k: np.prod(v, axis=ax, keepdims=k)),
    ("ReduceL1", lambda v, ax, k: np.sum(np.abs(v), axis=ax, keepdims=k)),
    ("ReduceL2", lambda v, ax, k: np.sqrt(np.sum(v * v, axis=ax, keepdims=k))),
    ("ReduceSumSquare", lambda v, ax, k: np.sum(v * v, axis=ax, keepdims=k)),
    ("ReduceLogSum", lambda v, ax, k: np.log(np.sum(v, axis=ax, keepdims=k))),
    ("ReduceLogSumExp", lambda v, ax, k: np.log(np.sum(np.exp(v), axis=ax, keepdims=k))),
]


@pytest.mark.parametrize("op, fn", REDUCE)
@pytest.mark.parametrize("axes", [None, [1], [-1, 0], [0, 1, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions_match_numpy_in_both_axes_forms(op, fn, axes, keepdims):
    x = rand(2, 3, 4, lo=0.1, hi=2.0)
    want = fn(x.astype(np.float64), None if axes is None else tuple(axes), bool(keepdims))
    want = np.asarray(want).astype(np.float32)
    axes_in = None if axes is None else np.array(axes, np.int64)
    assert_same(run(op, 18, x, axes_in, keepdims=keepdims), want, rtol=1e-5)
    attrs = {"keepdims": keepdims}
    if axes is not None:
        attrs["axes"] = axes
    assert_same(run(op, 11, x, **attrs), want, rtol=1e-5)


def test_reduce_noop_and_empty_axes():
    x = rand(2, 3)
    empty = np.array([], np.int64)
    assert_same(run("ReduceSum", 13, x, empty, noop_with_empty_axes=1), x)
    assert_same(run("ReduceSum", 13, x, empty), np.sum(x, keepdims=True))
    assert_same(run("ReduceMax", 18, x, None, keepdims=0), np.asarray(np.max(x)))
    assert_same(run("ReduceMean", 13, x, axes=[0, 1], keepdims=0), np.asarray(np.mean(x)),
                rtol=1e-6)


@pytest.mark.parametrize("op, value", [
    ("ReduceSum", 0.0), ("ReduceProd", 1.0), ("ReduceMean", 0.0), ("ReduceMax", -np.inf),
    ("ReduceMin", np.inf),
    ("ReduceL1", 0.0), ("ReduceL2", 0.0), ("ReduceSumSquare", 0.0), ("ReduceLogSum", -np.inf),
    ("ReduceLogSumExp", -np.inf)])
def test_reducing_an_empty_set_gives_the_identity(op, value):
    x = np.zeros((2, 0, 4), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(op, 18, x, np.array([1], np.int64))
    assert_same(got, np.full((2, 1, 4), value, np.float32))


def test_reductions_keep_integer_and_bool_dtypes():
    xi = np.array([[1, -2, 3], [4, 5, -6]], np.int32)
    assert_same(run("ReduceSum", 13, xi, np.array([1])), np.array([[2], [3]], np.int32))
    assert_same(run("ReduceMax", 18, xi.astype(np.int8), np.array([0]), keepdims=0),
                np.array([4, 5, 3], np.int8))
    assert_same(run("ReduceMean", 18, xi, None, keepdims=0), np.array(0, np.int32))
    assert_same(run("ReduceMin", 18, np.zeros((0, 2), np.int64), np.array([0])),
                np.full((1, 2), np.iinfo(np.int64).max))
    b = np.array([[True, False], [False, False]])
    assert_same(run("ReduceMax", 20, b, np.array([1])), np.array([[True], [False]]))
    assert_same(run("ReduceMin", 20, np.zeros((0, 2), bool), np.array([0])),
                np.array([[True, True]]))
    h = rand(3, 50, dtype=np.float16)
    assert run("ReduceSum", 13, h, np.array([1])).dtype == np.float16


def test_reduce_axis_errors():
    x = rand(2, 3)
    with pytest.raises(InvalidArgument, match="ReduceSum.*out of range"):
        run("ReduceSum", 13, x, np.array([2]))
    with pytest.raises(InvalidArgument, match="repeated"):
        run("ReduceMax", 18, x, np.array([1, -1]))
    with pytest.raises(InvalidArgument, match="integers"):
        run("ReduceMax", 18, x, np.array([1.0]))


def test_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-1000.0, -np.inf]], np.float32)
    got = run("ReduceLogSumExp", 18, x, np.array([1]), keepdims=0)
    assert_same(got, np.array([1000 + math.log(2), -1000], np.float32))


def test_argmax_argmin():
    x = np.array([[1, 5, 5, 2], [7, 7, 0, 0]], np.float32)
    assert_same(run("ArgMax", 13, x, axis=1), np.array([[1], [0]], np.int64))
    assert_same(run("ArgMax", 13, x, axis=1, select_last_index=1, keepdims=0), np.array([2, 1]))
    assert_same(run("ArgMin", 13, x, axis=-1, select_last_index=1, keepdims=0), np.array([0, 3]))
    assert_same(run("ArgMin", 1, x), np.array([[0, 0, 1, 1]], np.int64))
    assert_same(run("ArgMax", 13, np.array([True, False, True]), keepdims=0), np.array(0, np.int64))
    with pytest.raises(InvalidArgument, match="size 0"):
        run("ArgMax", 13, np.zeros((2, 0)), axis=1)


@pytest.mark.parametrize("op, fn, ident", [("CumSum", np.cumsum, 0), ("CumProd", np.cumprod, 1)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumulative(op, fn, ident, axis):
    x = rand(3, 4, lo=0.5, hi=1.5).astype(np.float64)
    ax = np.array(axis, np.int32)
    a = axis % 2
    inc = fn(x, axis=a)
    assert_same(run(op, 26, x, ax), inc)
    exc = np.concatenate([np.full_like(np.take(inc, [0], axis=a), ident),
                          np.take(inc, range(x.shape[a] - 1), axis=a)], axis=a)
    assert_same(run(op, 26, x, ax, exclusive=1), exc)
    rev = np.flip(fn(np.flip(x, a), axis=a), a)
    assert_same(run(op, 26, x, np.array([axis], np.int64), reverse=1), rev)
    rev_exc = np.flip(np.concatenate([np.full_like(np.take(inc, [0], axis=a), ident),
                                      np.take(fn(np.flip(x, a), axis=a), range(x.shape[a] - 1),
                                              axis=a)], axis=a), a)
    assert_same(run(op, 26, x, ax, reverse=1, exclusive=1), rev_exc)


def test_cumsum_keeps_int_dtype_and_checks_axis():
    x = np.array([1, 2, 3], np.int32)
    assert_same(run("CumSum", 14, x, np.array(0)), np.array([1, 3, 6], np.int32))
    with pytest.raises(InvalidArgument, match="out of range"):
        run("CumSum", 14, x, np.array(1))
    with pytest.raises(InvalidArgument, match="single integer"):
        run("CumSum", 14, x, np.array([0, 1]))


def test_topk_ordering_and_ties():
    x = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 0, 0]], np.int64)
    v, i = run("TopK", 11, x, np.array([3]))
    assert_same(v, np.array([[3, 3, 2], [0, 0, 0]], np.int64))
    assert_same(i, np.array([[0, 2, 3], [0, 1, 2]], np.int64))
    v, i = run("TopK", 11, x, np.array([2]), largest=0)
    assert_same(v, np.array([[1, 1], [0, 0]], np.int64))
    assert_same(i, np.array([[1, 4], [0, 1]], np.int64))
    u = np.array([2 ** 63, 1, 2 ** 64 - 1], np.uint64)
    v, i = run("TopK", 24, u, np.array([2]), axis=0)
    assert_same(v, np.array([2 ** 64 - 1, 2 ** 63], np.uint64))
    assert_same(i, np.array([2, 0], np.int64))
    f = rand(4, 6)
    v, i = run("TopK", 1, f, axis=0, k=2)
    assert_same(v, -np.sort(-f, axis=0)[:2])
    assert_same(np.take_along_axis(f, i, axis=0), v)
    v, i = run("TopK", 11, f, np.array([0]), axis=-1)
    assert v.shape == (4, 0) and i.dtype == np.int64
    with pytest.raises(InvalidArgument, match="k=7"):
        run("TopK", 11, f, np.array([7]))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
@pytest.mark.parametrize("largest", [0, 1])
def test_topk_long_axis_with_many_ties(dtype, largest):
    # long axes and small k take the partition path; it must give the sort path's answer
    x = RNG.randint(0, 5, size=(3, 200, 2)).astype(dtype)
    for k in (1, 7, 50):
        v, i = run("TopK", 11, x, np.array([k]), axis=1, largest=largest)
        key = -x.astype(np.int64) if largest else x.astype(np.int64)
        want = np.argsort(key, axis=1, kind="stable")[:, :k]   # ties: lower index first
        assert_same(i, want)
        assert_same(v, np.take_along_axis(x, want, axis=1))
    f = x.astype(np.float32)
    f[0, 3, 0] = np.nan
    v, i = run("TopK", 11, f, np.array([5]), axis=1, largest=largest)
    np.testing.assert_array_equal(np.take_along_axis(f, i, axis=1), v)


# ---------------------------------------------------------------------------- linear algebra

@pytest.mark.parametrize("sa, sb", [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 3, 4), (4,)),
                                    ((3,), (3,)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 0), (0, 2)),
                                    ((0, 3), (3, 2)), ((2, 3, 4), (4, 5)), ((0, 3, 4), (4, 5))])
def test_matmul_shapes(sa, sb):
    a, b = rand(*sa), rand(*sb)
    assert_same(run("MatMul", 13, a, b), np.asarray(np.matmul(a, b)), rtol=1e-5)
    if a.ndim == 3:   # a strided (non-contiguous) batch too
        at = np.ascontiguousarray(a.transpose(1, 0, 2)).transpose(1, 0, 2)
        assert_same(run("MatMul", 13, at, b), np.matmul(a, b), rtol=1e-5)


def test_matmul_dtypes_and_errors():
    a, b = rand(3, 4, dtype=np.float16), rand(4, 2, dtype=np.float16)
    got = run("MatMul", 13, a, b)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=2e-3, atol=2e-3)
    ai = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert_same(run("MatMul", 13, ai, ai.T.copy()), ai @ ai.T)
    with pytest.raises(InvalidArgument, match="MatMul"):
        run("MatMul", 13, rand(3, 4), rand(3, 4))


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (), (1,), (5,), (3, 1), (1, 5), (3, 5)])
def test_gemm(ta, tb, c_shape):
    a = rand(4, 3) if ta else rand(3, 4)
    b = rand(5, 4) if tb else rand(4, 5)
    c = None if c_shape is None else rand(*c_shape)
    want = 0.5 * ((a.T if ta else a) @ (b.T if tb else b))
    if c is not None:
        want = want + 2.0 * c
    got = run("Gemm", 13, a, b, c, alpha=0.5, beta=2.0, transA=ta, transB=tb)
    assert_same(got, want.astype(np.float32), rtol=1e-5)
    assert a.shape == ((4, 3) if ta else (3, 4))   # inputs untouched


def test_gemm_errors_and_old_opsets():
    a, b = rand(3, 4), rand(4, 5)
    with pytest.raises(InvalidArgument, match="inner dimensions"):
        run("Gemm", 13, a, a)
    with pytest.raises(InvalidArgument, match="does not broadcast"):
        run("Gemm", 13, a, b, rand(3, 2))
    with pytest.raises(InvalidArgument, match="2-D"):
        run("Gemm", 13, rand(4), b)
    with pytest.raises(InvalidArgument, match="broadcast=1"):
        run("Gemm", 6, a, b, rand(5))
    assert_same(run("Gemm", 6, a, b, rand(5) * 0, broadcast=1), a @ b, rtol=1e-5)
    ai, bi = np.arange(12, dtype=np.int32).reshape(3, 4), np.ones((4, 2), np.int32)
    assert_same(run("Gemm", 13, ai, bi, np.array([1], np.int32)), ai @ bi + 1)
    assert_same(run("Gemm", 13, ai, bi, alpha=0.5), ((ai @ bi) * 0.5).astype(np.int32))
    h = run("Gemm", 13, a.astype(np.float16), b.astype(np.float16), rand(5).astype(np.float16))
    assert h.dtype == np.float16


@pytest.mark.parametrize("eq, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("i,i", [(4,), (4,)]), ("ij", [(2, 3)]),
    ("ba", [(2, 3)]), ("...ii->...i", [(2, 3, 3)]), ("i,j->ij", [(2,), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("->", [()]), ("Ab,bA->", [(2, 3), (3, 2)]),
])
def test_einsum(eq, shapes):
    xs = [rand(*s).astype(np.float64) for s in shapes]
    got = run("Einsum", 12, *xs, equation=eq)
    assert_same(got, np.asarray(np.einsum(eq.replace(" ", ""), *xs)), rtol=1e-12)
    got[...] = 0   # never a view of an input
    assert all(np.any(x != 0) for x in xs if x.size)


def test_einsum_errors_and_dtypes():
    with pytest.raises(InvalidArgument, match="Einsum"):
        run("Einsum", 12, rand(2, 3), equation="ij,jk->ik")
    with pytest.raises(InvalidArgument, match="Einsum"):
        run("Einsum", 12, rand(2, 3), rand(4, 5), equation="ij,jk->ik")
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert_same(run("Einsum", 12, xi, equation="ij->i"), xi.sum(1).astype(np.int32))
    assert run("Einsum", 28, rand(2, 3, dtype=np.float16), equation="ij->j").dtype == np.float16


def test_det():
    x = rand(3, 4, 4).astype(np.float64)
    assert_same(run("Det", 22, x), np.linalg.det(x), rtol=1e-10)
    assert_same(run("Det", 11, x[0].astype(np.float32)),
                np.asarray(np.linalg.det(x[0])).astype(np.float32), rtol=1e-4, atol=1e-5)
    with pytest.raises(InvalidArgument, match="square"):
        run("Det", 22, rand(2, 3))


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -7, -1, 0, 2, 100])
def test_trilu(upper, k):
    x = np.arange(2 * 3 * 5, dtype=np.int64).reshape(2, 3, 5)
    kk = 0 if k is None else k
    want = np.stack([np.triu(m, kk) if upper else np.tril(m, kk) for m in x])
    got = run("Trilu", 14, x, None if k is None else np.array(k, np.int64), upper=upper)
    assert_same(got, want)
    assert run("Trilu", 14, x[:, :0], upper=upper).shape == (2, 0, 5)


def test_matmul_integer_zero_points():
    a = RNG.randint(0, 256, size=(4, 300)).astype(np.uint8)
    b = RNG.randint(0, 256, size=(300, 3)).astype(np.uint8)
    za = np.array([3, 0, 255, 7], np.uint8)
    zb = np.array([128, 1, 0], np.uint8)
    want = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb)
    assert_same(run("MatMulInteger", 10, a, b, za, zb), want.astype(np.int32))
    small_a, small_b = a[:, :5], b[:5]
    want = (small_a.astype(np.int64) - 3) @ small_b.astype(np.int64)
    assert_same(run("MatMulInteger", 10, small_a, small_b, np.array(3, np.uint8)),
                want.astype(np.int32))
    s8 = RNG.randint(-128, 128, size=(2, 2, 6)).astype(np.int8)
    assert_same(run("MatMulInteger", 10, s8, s8.transpose(0, 2, 1).copy()),
                (s8.astype(np.int64) @ s8.transpose(0, 2, 1).astype(np.int64)).astype(np.int32))
    with pytest.raises(InvalidArgument, match="int8 or uint8"):
        run("MatMulInteger", 10, a.astype(np.int32), b)


def test_old_opsets_match_the_reference_evaluator():
    x = rand(2, 3, 4)
    assert_same(run("ReduceSum", 11, x, axes=[0, 2], keepdims=0),
                reference("ReduceSum", 11, [x], {"axes": [0, 2], "keepdims": 0})[0], rtol=1e-5)
    assert_same(run("LogSoftmax", 13, x, axis=1),
                reference("LogSoftmax", 13, [x], {"axis": 1})[0], rtol=1e-5)
    v, i = run("TopK", 10, x, np.array([2], np.int64), axis=1)
    rv, ri = reference("TopK", 10, [x, np.array([2], np.int64)], {"axis": 1}, n_out=2)
    assert_same(v, rv)
    assert_same(i, ri)
    assert_same(run("Clip", 6, x, min=-0.5, max=0.5),
                reference("Clip", 6, [x], {"min": -0.5, "max": 0.5})[0])
