"""Shape, indexing and cast kernels (core/kernels/{shape,indexing,cast}.py) on edge shapes:
empty tensors, scalars, negative axes, clamped bounds, every reduction, string and narrow-float
casts. Checked against onnx.reference.ReferenceEvaluator and against numpy written here; runs on
Python 3.8 + onnx 1.14 too (ml_dtypes-only cases skip there)."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import dtypes
from onnxedge.kernels import registry
from onnxedge.kernels.registry import KernelContext

try:
    import ml_dtypes
except ImportError:  # Python 3.8 / numpy 1.17 has no ml_dtypes
    ml_dtypes = None

needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed")
OLD_ONNX = tuple(int(p) for p in onnx.__version__.split(".")[:2]) < (1, 15)


def newer_reference(case: tuple, why: str) -> Any:
    """A reference case that onnx 1.14's evaluator gets wrong (`why`); skipped there."""
    return pytest.param(*case, marks=pytest.mark.skipif(OLD_ONNX, reason="onnx 1.14 " + why))
I64 = np.int64


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def run(op: str, *inputs: Optional[np.ndarray], opset: int = 18, nout: int = 1,
        **attrs: Any) -> Any:
    """Call the kernel registered for `op` at `opset` the way the session does."""
    spec = registry.resolve("", op, opset)
    node = onnxedge.ir.Node(op, ["i%d" % k if x is not None else "" for k, x in enumerate(inputs)],
                            ["o%d" % k for k in range(nout)], attrs)
    args = list(inputs)
    if registry.signature(spec.fn).wants_ctx:
        return spec.fn(KernelContext(node, opset, [True] * nout, None), *args, **attrs)
    return spec.fn(*args, **attrs)


def reference(op: str, inputs: List[Optional[np.ndarray]], opset: int, nout: int = 1,
              **attrs: Any) -> List[np.ndarray]:
    """The same node run by onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator
    names = ["i%d" % k if x is not None else "" for k, x in enumerate(inputs)]
    outs = ["o%d" % k for k in range(nout)]
    node = helper.make_node(op, names, outs, **attrs)
    vin = [helper.make_tensor_value_info(n, TensorProto.STRING if x.dtype == object
                                         else helper.np_dtype_to_tensor_dtype(x.dtype), None)
           for n, x in zip(names, inputs) if n]
    vout = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs]
    model = helper.make_model(helper.make_graph([node], "g", vin, vout),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    feeds = {n: x for n, x in zip(names, inputs) if n}
    return ReferenceEvaluator(model).run(None, feeds)


def same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == object or want.dtype.kind in "biu":
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
E = np.zeros((2, 0, 3), dtype=np.float32)
S = np.array(5.0, dtype=np.float32)
U = np.array([[1, 3, 1], [2, 0, 2], [1, 3, 1]], dtype=np.int64)

# (op, inputs, opset, outputs, attributes): each must agree with onnx's reference evaluator.
REFERENCE_CASES = [
    ("Reshape", [X, i64(0, -1)], 14, 1, {}),
    ("Reshape", [X, i64(-1)], 14, 1, {}),
    ("Reshape", [E, i64(0, 5, -1)], 14, 1, {}),
    ("Reshape", [E, i64(0, 0)], 14, 1, {"allowzero": 1}),
    ("Reshape", [S, i64(1, 1)], 14, 1, {}),
    ("Flatten", [X], 13, 1, {"axis": 0}),
    ("Flatten", [X], 13, 1, {"axis": -1}),
    ("Flatten", [X], 13, 1, {"axis": 3}),
    ("Squeeze", [np.zeros((1, 3, 1), np.float32)], 13, 1, {}),
    ("Squeeze", [np.zeros((1, 3, 1), np.float32), i64(-1)], 13, 1, {}),
    ("Squeeze", [np.zeros((1, 0, 1), np.float32), i64(0, 2)], 13, 1, {}),
    ("Squeeze", [np.zeros((1, 3, 1), np.float32)], 11, 1, {"axes": [0]}),
    ("Unsqueeze", [S, i64(0, -1)], 13, 1, {}),
    ("Unsqueeze", [X, i64(-1, 1)], 13, 1, {}),
    ("Transpose", [X], 13, 1, {}),
    ("Transpose", [E], 13, 1, {"perm": [2, 0, 1]}),
    ("Transpose", [S], 13, 1, {}),
    ("Concat", [X, X[:, :1]], 13, 1, {"axis": -2}),
    ("Concat", [E, np.ones((2, 2, 3), np.float32)], 13, 1, {"axis": 1}),
    ("Concat", [np.array(["a"], dtype=object), np.array(["b", "c"], dtype=object)], 13, 1,
     {"axis": 0}),
    ("Split", [X], 13, 2, {"axis": 0}),
    ("Split", [X, i64(1, 0, 3)], 13, 3, {"axis": -1}),
    ("Split", [np.arange(7, dtype=np.float32)], 18, 3, {"num_outputs": 3}),
    ("Split", [X], 11, 2, {"axis": 2, "split": [3, 1]}),
    ("Slice", [X, i64(-1), i64(-2 ** 63), i64(2), i64(-1)], 13, 1, {}),
    ("Slice", [X, i64(2 ** 62, 1), i64(-(2 ** 62), 3), i64(1, -1), i64(-1, 2)], 13, 1, {}),
    ("Slice", [X, i64(1), i64(2 ** 63 - 1)], 13, 1, {}),
    ("Slice", [X, i64(3), i64(1), i64(-1)], 13, 1, {}),
    ("Slice", [E, i64(-1), i64(-5), i64(1), i64(-1)], 13, 1, {}),
    ("Slice", [X], 9, 1, {"starts": [0, -3], "ends": [1, 100], "axes": [0, 2]}),
    ("Expand", [np.array([[1], [2]], np.float32), i64(2, 1, 3)], 13, 1, {}),
    ("Expand", [X, i64(1, 4)], 13, 1, {}),
    ("Expand", [S, i64(0, 2)], 13, 1, {}),
    ("Tile", [X, i64(2, 1, 3)], 13, 1, {}),
    ("Tile", [E, i64(1, 5, 0)], 13, 1, {}),
    ("Pad", [X, i64(0, 1, 2, 1, 0, 1)], 18, 1, {"mode": "constant"}),
    ("Pad", [X, i64(0, 1, 2, 1, 0, 1), np.array(-2.5, np.float32)], 18, 1, {}),
    ("Pad", [X, i64(1, 3), None, i64(-1)], 18, 1, {"mode": "reflect"}),
    ("Pad", [X, i64(2, 0), None, i64(1)], 18, 1, {"mode": "edge"}),
    ("Pad", [X.astype(np.int32), i64(0, 0, 1, 0, 0, 2), np.array(7, np.int32)], 13, 1, {}),
    ("Pad", [E, i64(1, 0, 0, 1, 0, 0)], 13, 1, {}),
    ("Pad", [X], 2, 1, {"pads": [0, 0, 1, 0, 0, 1], "value": 9.0}),
    ("Shape", [X], 15, 1, {"start": -2}),
    ("Shape", [X], 15, 1, {"start": 1, "end": -1}),
    ("Shape", [S], 13, 1, {}),
    ("Size", [E], 13, 1, {}),
    ("Size", [S], 13, 1, {}),
    ("ConstantOfShape", [i64(2, 0)], 9, 1, {}),
    ("Range", [np.array(1, np.int32), np.array(10, np.int32), np.array(3, np.int32)], 11, 1, {}),
    ("Range", [np.array(10, I64), np.array(3, I64), np.array(-2, I64)], 11, 1, {}),
    ("Range", [np.array(3, I64), np.array(3, I64), np.array(1, I64)], 11, 1, {}),
    ("Range", [np.array(0.5, np.float32), np.array(2.0, np.float32),
               np.array(0.25, np.float32)], 11, 1, {}),
    ("Identity", [E], 13, 1, {}),
    ("DepthToSpace", [np.arange(32, dtype=np.float32).reshape(1, 8, 2, 2)], 13, 1,
     {"blocksize": 2, "mode": "CRD"}),
    ("DepthToSpace", [np.arange(32, dtype=np.float32).reshape(2, 4, 2, 2)], 13, 1,
     {"blocksize": 2}),
    ("SpaceToDepth", [np.arange(32, dtype=np.float32).reshape(2, 1, 4, 4)], 13, 1,
     {"blocksize": 2}),
    ("EyeLike", [np.zeros((3, 5), np.int32)], 9, 1, {"k": -1}),
    ("EyeLike", [np.zeros((4, 2), np.float32)], 9, 1, {"k": 1, "dtype": TensorProto.DOUBLE}),
    ("ReverseSequence", [X, i64(2, 3)], 10, 1, {"batch_axis": 0, "time_axis": 1}),
    newer_reference(("ReverseSequence", [X.transpose(1, 0, 2).copy(), i64(1, 0)], 10, 1, {}),
                    "reference fails on a zero sequence length"),
    ("Compress", [X, np.array([True, False])], 11, 1, {"axis": 1}),
    ("Compress", [X, np.array([False, True, True])], 11, 1, {}),
    ("Compress", [X, np.array([True, False, True])], 11, 1, {"axis": -2}),
    ("Unique", [U], 11, 4, {}),
    ("Unique", [U], 11, 4, {"axis": 0}),
    ("Unique", [np.zeros((0,), np.float32)], 11, 4, {}),
    ("Gather", [X, i64(-1, 0)], 13, 1, {"axis": 1}),
    ("Gather", [X, np.array(-1, I64)], 13, 1, {"axis": -1}),
    newer_reference(("Gather", [X, np.zeros((0, 2), np.int32)], 13, 1, {}),
                    "reference drops the data dims for empty indices"),
    ("Gather", [np.array(["a", "b", "c"], dtype=object), i64(2, 0)], 13, 1, {}),
    ("GatherElements", [X[:1, :1], np.array([[[-1, 0, 3, -4]]], I64)], 13, 1, {"axis": -1}),
    ("GatherElements", [X, np.array([[[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 1]]] * 2, I64)], 13,
     1, {"axis": 0}),
    ("GatherND", [X, np.array([[1, 2], [0, -1]], I64)], 13, 1, {}),
    ("GatherND", [X, np.array([[[1, 2]], [[0, 3]]], I64)], 13, 1, {"batch_dims": 1}),
    ("GatherND", [X, np.array([[1, 2, 3]], I64)], 13, 1, {}),
    ("ScatterElements", [X, np.array([[[1, 0, -1, 0]]], I64), np.full((1, 1, 4), 5, np.float32)],
     16, 1, {"axis": 0, "reduction": "add"}),
    ("ScatterElements", [X, np.array([[[2], [0]]], I64), np.full((1, 2, 1), 5, np.float32)],
     16, 1, {"axis": -1}),
    newer_reference(("ScatterND", [X, np.array([[1, 2], [0, -1]], I64),
                      np.full((2, 4), 3, np.float32)], 16, 1, {"reduction": "mul"}),
                    "reference does not wrap negative indices"),
    ("ScatterND", [X, np.array([[1]], I64), np.ones((1, 3, 4), np.float32)], 13, 1, {}),
    ("Where", [np.array([True, False, True, False]), X, np.array(-1, np.float32)], 16, 1, {}),
    ("Where", [np.array(True), S, S], 16, 1, {}),
    newer_reference(("OneHot", [np.array([1, -3], np.int32), np.array(4, np.float32),
                                np.array([0, 9], np.int32)], 11, 1, {}),
                    "reference does not wrap negative indices"),
    newer_reference(("OneHot", [np.array([[0, -1], [4, 2]], I64), np.array(3, I64),
                                np.array([2.0, 5.0], np.float32)], 11, 1, {"axis": 1}),
                    "reference does not wrap negative indices"),
    ("OneHot", [np.array([[0, 1], [2, 2]], I64), np.array(3, I64),
                np.array([2.0, 5.0], np.float32)], 11, 1, {"axis": -2}),
    ("NonZero", [np.array([[0, 1, 0], [2, 0, 3]], np.float32)], 13, 1, {}),
    ("NonZero", [np.zeros((0, 3), np.int32)], 13, 1, {}),
    ("Cast", [X], 13, 1, {"to": TensorProto.INT32}),
    ("Cast", [np.array([-1.5, 0, 2], np.float32)], 13, 1, {"to": TensorProto.BOOL}),
    ("Cast", [np.array([300, -1], np.int32)], 13, 1, {"to": TensorProto.UINT8}),
    ("Cast", [E], 13, 1, {"to": TensorProto.FLOAT16}),
    ("CastLike", [np.array([1, 2], np.int64), np.zeros((0,), np.float64)], 15, 1, {}),
]


@pytest.mark.parametrize("op, inputs, opset, nout, attrs", REFERENCE_CASES,
                         ids=["%s-%d" % ((c.values if hasattr(c, "values") else c)[0], i)
                              for i, c in enumerate(REFERENCE_CASES)])
def test_matches_onnx_reference(op, inputs, opset, nout, attrs):
    got = run(op, *inputs, opset=opset, nout=nout, **attrs)
    got = list(got) if isinstance(got, tuple) else [got]
    want = reference(op, inputs, opset, nout, **attrs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)


# Cases where onnx's reference evaluator is wrong or lacks the op (checked against onnxruntime).

def test_flatten_and_unsqueeze_of_empty_tensors():
    same(run("Flatten", E, opset=13, axis=2), np.zeros((0, 3), np.float32))
    assert run("Unsqueeze", E, opset=11, axes=[3, 0]).shape == (1, 2, 0, 1, 3)   # order-free


def test_unique_unsorted_keeps_first_occurrence_order():
    y, idx, inv, cnt = run("Unique", U, opset=11, nout=4, sorted=0)
    assert (y.tolist(), idx.tolist(), inv.tolist(), cnt.tolist()) == \
        ([1, 3, 2, 0], [0, 1, 3, 4], [0, 1, 0, 2, 3, 2, 0, 1, 0], [4, 2, 2, 1])
    y, idx, inv, cnt = run("Unique", U, opset=11, nout=4, sorted=0, axis=-1)
    assert (y.tolist(), idx.tolist(), inv.tolist(), cnt.tolist()) == \
        ([[1, 3], [2, 0], [1, 3]], [0, 1], [0, 1, 0], [2, 1])


def test_gather_elements_indices_smaller_than_data():
    idx = np.array([[[1], [0]]], I64)
    same(run("GatherElements", X, idx, opset=13, axis=0), np.array([[[X[1, 0, 0]], [X[0, 1, 0]]]]))


def test_scatter_9_is_scatter_elements_without_reduction():
    idx, upd = np.array([[[1, 0, 1, 0]]], I64), np.full((1, 1, 4), 5, np.float32)
    same(run("Scatter", X, idx, upd, opset=10, axis=0),
         run("ScatterElements", X, idx, upd, opset=13, axis=0))


def test_one_hot_takes_a_one_element_depth_of_any_numeric_type():
    got = run("OneHot", np.array([1, -3], np.int32), np.array([4], np.float32),
              np.array([0, 9], np.int32), opset=11)
    assert got.dtype == np.int32 and got.tolist() == [[0, 9, 0, 0], [0, 9, 0, 0]]


# ---------------------------------------------------------------- shape ops

def test_reshape_rejects_bad_shapes_naming_the_op():
    with pytest.raises(onnxedge.InvalidArgument, match="Reshape"):
        run("Reshape", X, i64(5, -1), opset=14)
    with pytest.raises(onnxedge.InvalidArgument, match="more than one -1"):
        run("Reshape", X, i64(-1, -1), opset=14)
    with pytest.raises(onnxedge.InvalidArgument, match="allowzero"):
        run("Reshape", E, i64(0, -1), opset=14, allowzero=1)
    same(run("Reshape", X, opset=4, shape=[4, -1]), X.reshape(4, 6))


def test_split_uneven_last_chunk_and_errors():
    parts = run("Split", np.arange(5, dtype=np.float32), opset=18, nout=3, num_outputs=3)
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4]]
    with pytest.raises(onnxedge.InvalidArgument, match="Split"):
        run("Split", np.arange(5, dtype=np.float32), opset=13, nout=2)
    with pytest.raises(onnxedge.InvalidArgument, match="Split"):
        run("Split", np.arange(5, dtype=np.float32), i64(2, 2), opset=13, nout=2)
    one = run("Split", np.arange(3, dtype=np.float32), opset=13, nout=1)
    assert isinstance(one, np.ndarray) and one.tolist() == [0, 1, 2]


@pytest.mark.parametrize("start, end, step", [(0, 4, 1), (-1, -100, -1), (100, -100, -2),
                                              (2 ** 63 - 1, -(2 ** 63), -1), (3, 1, 1),
                                              (-2, 2 ** 63 - 1, 1), (1, 1, -1), (0, -1, 3)])
def test_slice_clamps_like_python(start, end, step):
    x = np.arange(4, dtype=np.float32)

    def py(v):  # python's slice bounds for an int64 that may be out of range
        return max(min(v, 10 ** 6), -10 ** 6)
    same(run("Slice", x, i64(start), i64(end), i64(0), i64(step), opset=13),
         x[py(start):py(end):step])


def test_slice_step_zero_and_mismatched_lengths_raise():
    with pytest.raises(onnxedge.InvalidArgument, match="step 0"):
        run("Slice", X, i64(0), i64(1), i64(0), i64(0), opset=13)
    with pytest.raises(onnxedge.InvalidArgument, match="Slice"):
        run("Slice", X, i64(0, 1), i64(1), opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_negative_pads_crop_first(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = run("Pad", x, i64(-1, 2, 0, -1), opset=19, mode=mode)
    want = np.pad(x[1:, :3], [(0, 0), (2, 0)], mode=mode)
    same(got, want)


def test_pad_wrap_and_errors():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    same(run("Pad", x, i64(0, 4, 0, 5), opset=19, mode="wrap"), np.pad(x, [(0, 0), (4, 5)], "wrap"))
    with pytest.raises(onnxedge.InvalidArgument, match="reflect"):
        run("Pad", x, i64(0, 3, 0, 0), opset=19, mode="reflect")
    with pytest.raises(onnxedge.InvalidArgument, match="empty"):
        run("Pad", np.zeros((0, 2), np.float32), i64(1, 0, 0, 0), opset=19, mode="edge")
    with pytest.raises(onnxedge.InvalidArgument, match="mode"):
        run("Pad", x, i64(0, 0, 0, 0), opset=19, mode="mirror")
    with pytest.raises(onnxedge.InvalidArgument, match="2 values per padded axis"):
        run("Pad", x, i64(1, 1), opset=19)
    s = np.array(["a", "b"], dtype=object)
    assert run("Pad", s, i64(1, 0), opset=13).tolist() == ["", "a", "b"]


def test_constant_attribute_kinds():
    assert run("Constant", opset=13, value_float=1.5).dtype == np.float32
    assert run("Constant", opset=13, value_ints=[1, 2]).tolist() == [1, 2]
    assert run("Constant", opset=13, value_int=3).shape == ()
    strs = run("Constant", opset=13, value_strings=["a", "bc"])
    assert strs.dtype == object and strs.tolist() == ["a", "bc"]
    assert run("Constant", opset=13, value_string="x").tolist() == "x"
    sparse = onnxedge.ir.SparseTensor(np.array([5.0], np.float32), i64(3), [2, 2])
    same(run("Constant", opset=13, sparse_value=sparse), np.array([[0, 0], [0, 5]], np.float32))
    with pytest.raises(onnxedge.InvalidGraph, match="exactly one"):
        run("Constant", opset=13, value_int=1, value_float=2.0)


def test_constant_of_shape_value_and_default():
    same(run("ConstantOfShape", i64(2, 3), opset=20, value=np.array([7], np.int8)),
         np.full((2, 3), 7, np.int8))
    same(run("ConstantOfShape", np.zeros((0,), I64), opset=20), np.array(0, np.float32))


def test_range_keeps_the_input_type():
    out = run("Range", np.array(0.1, np.float32), np.array(1.0, np.float32),
              np.array(0.3, np.float32), opset=11)
    assert out.dtype == np.float32 and out.shape == (3,)
    same(run("Range", np.array(5, np.int16), np.array(-4, np.int16), np.array(-3, np.int16),
             opset=11), np.array([5, 2, -1], np.int16))
    with pytest.raises(onnxedge.InvalidArgument, match="delta"):
        run("Range", np.array(0, I64), np.array(5, I64), np.array(0, I64), opset=11)


def test_dropout_inference_training_and_old_masks():
    y, mask = run("Dropout", X, opset=13, nout=2)
    assert y is X and mask.dtype == np.bool_ and mask.all()
    assert run("Dropout", X, np.array(0.3, np.float32), opset=13) is X
    r, t = np.array(0.75, np.float32), np.array(True)
    y, mask = run("Dropout", X, r, t, opset=13, nout=2, seed=0)
    want_mask = np.random.RandomState(0).uniform(0, 1, X.shape) >= 0.75
    assert mask.tolist() == want_mask.tolist()
    same(y, (want_mask * X * np.float32(4)).astype(np.float32))
    y0, m0 = run("Dropout", X, np.array(0.0, np.float32), t, opset=13, nout=2)
    assert y0 is X and m0.all()
    # opsets 7-11: onnxruntime's mask is all zeros, bool from opset 10, data's type before
    assert run("Dropout", X, opset=10, nout=2)[1].dtype == np.bool_
    m7 = run("Dropout", X, opset=7, nout=2)[1]
    assert m7.dtype == np.float32 and not m7.any()


def test_compress_ignores_condition_entries_beyond_the_axis():
    same(run("Compress", X, np.array([False, True, True, True]), opset=11, axis=1), X[:, 1:])
    with pytest.raises(onnxedge.InvalidArgument, match="1-D"):
        run("Compress", X, np.ones((1, 1), bool), opset=11)


def test_unique_outputs_subset_and_unsorted_order():
    x = np.array([2, 1, 1, 3, 4, 3], np.int64)
    y, idx, inv, cnt = run("Unique", x, opset=11, nout=4, sorted=0)
    assert (y.tolist(), idx.tolist(), inv.tolist(), cnt.tolist()) == \
        ([2, 1, 3, 4], [0, 1, 3, 4], [0, 1, 1, 2, 3, 2], [1, 2, 2, 1])
    assert run("Unique", x, opset=11, nout=1).tolist() == [1, 2, 3, 4]


def test_depth_space_round_trip_and_errors():
    x = np.arange(2 * 8 * 3 * 3, dtype=np.float32).reshape(2, 8, 3, 3)
    for mode in ("DCR", "CRD"):
        y = run("DepthToSpace", x, opset=13, blocksize=2, mode=mode)
        same(run("SpaceToDepth", y, opset=28, blocksize=2, mode=mode), x)
    with pytest.raises(onnxedge.InvalidArgument, match="DepthToSpace"):
        run("DepthToSpace", np.zeros((1, 3, 2, 2), np.float32), opset=13, blocksize=2)
    with pytest.raises(onnxedge.InvalidArgument, match="4-D"):
        run("SpaceToDepth", X, opset=13, blocksize=2)


@pytest.mark.parametrize("op, args, attrs, opset", [
    ("Transpose", [X], {"perm": [0, 0, 1]}, 13),
    ("Concat", [X, X[0]], {"axis": 0}, 13),
    ("Concat", [X, X.astype(np.float64)], {"axis": 0}, 13),
    ("Squeeze", [X, i64(1)], {}, 13),
    ("Unsqueeze", [X, i64(0, 0)], {}, 13),
    ("Unsqueeze", [X, i64(4)], {}, 13),
    ("Flatten", [X], {"axis": 4}, 13),
    ("Expand", [X, i64(5, 4)], {}, 13),
    ("Tile", [X, i64(1, 2)], {}, 13),
    ("Tile", [X, i64(1, -1, 1)], {}, 13),
    ("EyeLike", [X], {}, 9),
    ("ReverseSequence", [X, i64(4, 1)], {"batch_axis": 0, "time_axis": 1}, 10),
    ("Gather", [X, i64(3)], {"axis": 1}, 13),
    ("Gather", [X, np.array([0.0], np.float32)], {}, 13),
    ("GatherElements", [X, np.zeros((2, 3), I64)], {}, 13),
    ("GatherND", [X, np.zeros((2, 4), I64)], {}, 13),
    ("GatherND", [X, np.zeros((3, 1), I64)], {"batch_dims": 1}, 13),
    ("ScatterElements", [X, np.zeros((1, 1, 1), I64), np.zeros((1, 1, 2), np.float32)], {}, 16),
    ("ScatterElements", [X, np.zeros((1, 1, 1), I64), np.zeros((1, 1, 1), np.float32)],
     {"reduction": "avg"}, 18),
    ("ScatterND", [X, np.zeros((2, 1), I64), np.zeros((2, 4), np.float32)], {}, 13),
    ("Where", [np.array([True]), X, X.astype(np.float64)], {}, 16),
    ("Where", [np.ones(5, bool), X, X], {}, 16),
    ("OneHot", [i64(0), np.array(0, I64), np.array([0, 1], I64)], {}, 11),
    ("OneHot", [i64(0), np.array(2, I64), np.array([0, 1], I64)], {"axis": 3}, 11),
])
def test_bad_input_raises_invalid_argument_naming_the_op(op, args, attrs, opset):
    with pytest.raises(onnxedge.InvalidArgument, match=op):
        run(op, *args, opset=opset, **attrs)


# ---------------------------------------------------------------- indexing ops

@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_reductions_accumulate_duplicates(reduction):
    data = np.array([1.0, 2.0, 3.0], np.float32)
    idx, upd = i64(0, 0, -1), np.array([4.0, 5.0, 6.0], np.float32)
    want = data.copy()
    for i, u in zip([0, 0, 2], upd):
        want[i] = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply,
                   "max": np.maximum, "min": np.minimum}[reduction](want[i], u)
    same(run("ScatterElements", data, idx, upd, opset=18, reduction=reduction), want)
    assert data.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_reductions_match_numpy_at(reduction):
    data = np.arange(12, dtype=np.int32).reshape(3, 4)
    idx, upd = np.array([[0], [2], [0]], I64), np.full((3, 4), 3, np.int32)
    want = data.copy()
    getattr(np, {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}[reduction]
            ).at(want, ([0, 2, 0],), upd)
    same(run("ScatterND", data, idx, upd, opset=18, reduction=reduction), want)


def test_gather_nd_batch_dims_and_empty_index_depth():
    got = run("GatherND", X, np.array([[[1]], [[2]]], I64), opset=13, batch_dims=1)
    same(got, np.stack([X[0, 1:2], X[1, 2:3]]))
    same(run("GatherND", X, np.zeros((2, 0), I64), opset=13), np.stack([X, X]))


def test_non_zero_of_a_scalar_is_a_one_row_index_like_onnxruntime():
    assert run("NonZero", np.array(3.0, np.float32), opset=13).shape == (1, 1)
    assert run("NonZero", np.array(0, np.int32), opset=13).shape == (1, 0)
    same(run("NonZero", np.array(["", "a"], dtype=object), opset=13), np.array([[1]], I64))


def test_one_hot_out_of_range_indices_give_all_off_rows():
    got = run("OneHot", np.array([5, -4, -1], I64), np.array(3, I64),
              np.array([0, 1], np.int8), opset=11)
    assert got.dtype == np.int8 and got.tolist() == [[0, 0, 0], [0, 0, 0], [0, 0, 1]]


# ---------------------------------------------------------------- Cast / CastLike

def strings(*v: str) -> np.ndarray:
    out = np.empty(len(v), dtype=object)
    out[:] = list(v)
    return out


def test_cast_floats_to_strings_shortest_round_trip_text():
    f = np.array([0.1, 0.7392635941505432, 1e-7, 1e10, 100.0, 3.0, -0.0, 12345678.0, np.nan,
                  np.inf, -np.inf], np.float32)
    assert run("Cast", f, opset=13, to=TensorProto.STRING).tolist() == \
        ["0.1", "0.7392636", "1e-07", "1e+10", "100", "3", "-0", "12345678", "NaN", "INF", "-INF"]
    d = run("Cast", np.array([0.1, 1 / 3.0]), opset=13, to=TensorProto.STRING)
    assert [float(s) for s in d.tolist()] == [0.1, 1 / 3.0]
    assert run("Cast", np.array([True, False]), opset=13, to=TensorProto.STRING).tolist() == \
        ["1", "0"]
    assert run("Cast", np.array([-5, 2 ** 40], I64), opset=13, to=TensorProto.STRING).tolist() \
        == ["-5", "1099511627776"]
    empty = run("Cast", np.zeros((0, 2), np.float32), opset=13, to=TensorProto.STRING)
    assert empty.dtype == object and empty.shape == (0, 2)


def test_cast_strings_to_numbers_like_onnxruntime():
    got = run("Cast", strings("1.5", " 2", "INF", "-inf", "+INF", "NaN", "1e3", "0x10"),
              opset=13, to=TensorProto.FLOAT)
    assert got.dtype == np.float32
    assert got.tolist()[:5] == [1.5, 2.0, np.inf, -np.inf, np.inf]
    assert np.isnan(got[5]) and got.tolist()[6:] == [1000.0, 16.0]
    assert run("Cast", strings("3.9", "-7", "1e3"), opset=13, to=TensorProto.INT64).tolist() == \
        [3, -7, 1]
    assert run("Cast", strings("-7", "300"), opset=13, to=TensorProto.UINT8).tolist() == [249, 44]
    assert run("Cast", strings("0", "2"), opset=13, to=TensorProto.BOOL).tolist() == [False, True]
    for bad, to in (("abc", TensorProto.FLOAT), ("x1", TensorProto.INT32)):
        with pytest.raises(onnxedge.InvalidArgument, match="Cast"):
            run("Cast", strings(bad), opset=13, to=to)


def test_cast_1_takes_a_type_name_and_castlike_takes_the_target_dtype():
    same(run("Cast", np.array([1.7], np.float32), opset=1, to="INT32"), np.array([1], np.int32))
    same(run("CastLike", np.array([1.5, -2.5]), np.array(["x"], dtype=object), opset=15),
         strings("1.5", "-2.5"))
    with pytest.raises(onnxedge.InvalidArgument, match="to"):
        run("Cast", X, opset=1, to="FLOAT99")


@needs_ml_dtypes
def test_cast_float8_saturate_and_not():
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 0.3], np.float32)
    sat = run("Cast", x, opset=19, to=TensorProto.FLOAT8E4M3FN)
    assert sat.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert sat.astype(np.float32).tolist()[:4] == [448.0, -448.0, 448.0, -448.0]
    raw = run("Cast", x, opset=19, to=TensorProto.FLOAT8E5M2, saturate=0).astype(np.float32)
    assert raw.tolist()[:4] == [np.inf, -np.inf, np.inf, -np.inf]
    assert np.isnan(raw[4]) and abs(raw[5] - 0.3) < 0.05
    fnuz = run("Cast", x, opset=19, to=TensorProto.FLOAT8E4M3FNUZ, saturate=0).astype(np.float32)
    assert np.isnan(fnuz[:5]).all()
    same(run("Cast", np.array([1000], np.int32), opset=19, to=TensorProto.FLOAT8E5M2FNUZ)
         .astype(np.float32), np.array([1024.0], np.float32))


@needs_ml_dtypes
@pytest.mark.parametrize("mode, want", [("up", [1.0, 2.0, 4.0, 0.5]),
                                        ("down", [1.0, 1.0, 2.0, 0.5]),
                                        ("nearest", [1.0, 1.0, 4.0, 0.5])])
def test_cast_to_float8e8m0_round_modes(mode, want):
    if not dtypes.has_numpy(TensorProto.FLOAT8E8M0):
        pytest.skip("this ml_dtypes has no float8_e8m0fnu")
    x = np.array([1.0, 1.4, 3.5, 0.5], np.float32)
    got = run("Cast", x, opset=24, to=TensorProto.FLOAT8E8M0, round_mode=mode)
    assert got.astype(np.float32).tolist() == want


@needs_ml_dtypes
def test_cast_to_int4_rounds_then_wraps_and_bfloat16_round_trips():
    x = np.array([-9, -2.5, -0.4, 0.5, 1.5, 7.6, np.nan], np.float32)
    got = run("Cast", x, opset=21, to=TensorProto.INT4)
    assert got.dtype == np.dtype(ml_dtypes.int4)
    assert got.astype(np.int8).tolist() == [7, -3, 0, 1, 2, -8, 0]
    u = run("Cast", got, opset=21, to=TensorProto.UINT4)
    assert u.astype(np.int8).tolist() == [7, 13, 0, 1, 2, 8, 0]
    b = run("Cast", np.array([1.0, 0.1, 3e38], np.float32), opset=13, to=TensorProto.BFLOAT16)
    assert b.dtype == np.dtype(ml_dtypes.bfloat16)
    back = run("Cast", b, opset=13, to=TensorProto.FLOAT)
    np.testing.assert_allclose(back, [1.0, 0.1, 3e38], rtol=1e-2)
    assert run("Cast", b, opset=13, to=TensorProto.STRING).tolist()[0] == "1"
    same(run("CastLike", np.array(["0.5"], dtype=object), b, opset=19).astype(np.float32),
         np.array([0.5], np.float32))


def test_cast_without_ml_dtypes_names_the_missing_package():
    if ml_dtypes is not None:
        pytest.skip("ml_dtypes is installed")
    with pytest.raises(onnxedge.NotImplemented, match="ml_dtypes"):
        run("Cast", X, opset=13, to=TensorProto.BFLOAT16)


def test_bit_cast_keeps_the_bits():
    f = np.array([[1.0, -0.0], [np.inf, 2.5]], np.float32)
    same(run("BitCast", f, opset=26, to=TensorProto.INT32), f.view(np.int32))
    same(run("BitCast", np.array(1.0, np.float32), opset=26, to=TensorProto.UINT32),
         np.array(0x3F800000, np.uint32))
    same(run("BitCast", np.array([True, False]), opset=26, to=TensorProto.UINT8),
         np.array([1, 0], np.uint8))
    same(run("BitCast", f.T, opset=26, to=TensorProto.INT32), f.T.copy().view(np.int32))
    with pytest.raises(onnxedge.InvalidArgument, match="width"):
        run("BitCast", f, opset=26, to=TensorProto.INT64)
    with pytest.raises(onnxedge.InvalidArgument, match="string"):
        run("BitCast", f, opset=26, to=TensorProto.STRING)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_writes_each_batch_at_its_index(mode):
    cache = np.zeros((2, 3, 5, 2), np.float32)
    update = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2) + 1
    starts = i64(1, 3 if mode == "linear" else 4)
    want = cache.copy()
    for b in range(2):
        for s in range(2):
            want[b, :, (starts[b] + s) % 5] = update[b, :, s]
    same(run("TensorScatter", cache, update, starts, opset=24, mode=mode), want)
    assert not cache.any()
    same(run("TensorScatter", cache, update, opset=24)[:, :, :2], update)


def test_tensor_scatter_rejects_overruns_and_the_batch_axis():
    cache, update = np.zeros((1, 4, 2), np.float32), np.ones((1, 2, 2), np.float32)
    with pytest.raises(onnxedge.InvalidArgument, match="overrun"):
        run("TensorScatter", cache, update, i64(3), opset=24, axis=1)
    with pytest.raises(onnxedge.InvalidArgument, match="batch"):
        run("TensorScatter", cache, update, opset=24, axis=0)
