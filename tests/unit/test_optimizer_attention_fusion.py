"""Multi-head attention fusion into com.onnxedge MultiHeadAttention."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, optimized, rand, vi

HEADS, SIZE, HIDDEN, SEQ = 2, 4, 8, 5


def _attention(mask=True, scale_op="Div", k_double=False, merge=(0, 0, HIDDEN), heads=HEADS,
               dynamic=False, dims_of="x"):
    """The attention block; `dynamic` computes the Reshape targets from shapes: "own" as
    `q.size()[:-1] + (heads, size)`, "hf" as HuggingFace BERT's torch.onnx export does, from the
    batch and sequence dims of `dims_of` and [-1, size]."""
    n = helper.make_node
    nodes = []
    if dynamic == "hf":
        for i in (0, 1):
            nodes += [n("Shape", [dims_of], ["shape%d" % i]),
                      n("Gather", ["shape%d" % i, "i%d" % i], ["dim%d" % i], axis=0),
                      n("Unsqueeze", ["dim%d" % i, "zero"], ["udim%d" % i])]
        nodes += [n("Concat", ["udim0", "udim1", "minus1", "size"], ["hf_split"], axis=0),
                  n("Concat", ["udim0", "udim1", "minus1"], ["merge_dyn"], axis=0)]
    for name in ("q", "k", "v"):
        nodes.append(n("MatMul", ["x", "w" + name], [name]))
        split = "hf_split" if dynamic == "hf" else "split"
        if dynamic == "own":
            split = name + "_split"
            nodes += [n("Shape", [name], [name + "_shape"]),
                      n("Slice", [name + "_shape", "zero", "minus1"], [name + "_lead"]),
                      n("Concat", [name + "_lead", "hd"], [split], axis=0)]
        nodes.append(n("Reshape", [name, split], [name + "4"]))
    nodes.append(n("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]))
    if k_double:
        nodes += [n("Transpose", ["k4"], ["kh"], perm=[0, 2, 1, 3]), n("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2])]
    else:
        nodes.append(n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]))
    nodes.append(n("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]))
    nodes.append(n("MatMul", ["qt", "kt"], ["scores"]))
    logits = "scores"
    if scale_op:
        nodes.append(n(scale_op, ["scores", "scale"], ["scaled"]))
        logits = "scaled"
    if mask:
        nodes.append(n("Add", ["mask", logits], ["masked"]))
        logits = "masked"
    nodes += [n("Softmax", [logits], ["p"], axis=-1), n("MatMul", ["p", "vt"], ["c"]),
              n("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3])]
    if dynamic == "own":
        nodes += [n("Shape", ["ct"], ["ct_shape"]), n("Slice", ["ct_shape", "zero", "minus2"], ["ct_lead"]),
                  n("Concat", ["ct_lead", "hidden"], ["merge_dyn"], axis=0)]
    nodes.append(n("Reshape", ["ct", "merge_dyn" if dynamic else "merge"], ["y"]))
    inits = {"wq": rand(HIDDEN, HIDDEN, seed=1), "wk": rand(HIDDEN, HIDDEN, seed=2),
             "wv": rand(HIDDEN, HIDDEN, seed=3), "split": np.array([0, 0, heads, HIDDEN // heads], np.int64),
             "merge": np.array(merge, np.int64), "zero": np.array([0], np.int64),
             "minus1": np.array([-1], np.int64), "minus2": np.array([-2], np.int64),
             "hd": np.array([heads, HIDDEN // heads], np.int64), "hidden": np.array([HIDDEN], np.int64),
             "i0": np.array(0, np.int64), "i1": np.array(1, np.int64),
             "size": np.array([HIDDEN // heads], np.int64),
             "scale": np.array(math.sqrt(SIZE) if scale_op == "Div" else 1 / math.sqrt(SIZE), np.float32)}
    inputs = [vi("x", ["b", "s", HIDDEN])] + ([vi("mask", ["b", 1, 1, "s"])] if mask else [])
    if dims_of != "x":
        inputs.append(vi(dims_of, ["b", "s", HIDDEN]))
    used = {i for node in nodes for i in node.input}
    return make_model(nodes, inputs, [vi("y", ["b", "s", HIDDEN])],
                      {k: v for k, v in inits.items() if k in used})


def _feeds(mask=True):
    feeds = {"x": rand(2, SEQ, HIDDEN, seed=7)}
    if mask:
        m = np.zeros((2, 1, 1, SEQ), np.float32)
        m[1, ..., -2:] = -10000.0
        feeds["mask"] = m
    return feeds


@pytest.mark.parametrize("mask,scale_op,k_double", [(True, "Div", False), (False, "Mul", False),
                                                     (True, None, True)])
def test_attention_becomes_one_node(mask, scale_op, k_double):
    data = _attention(mask, scale_op, k_double)
    model = optimized(data)
    mha = [n for n in model.graph.nodes if n.op_type == "MultiHeadAttention"]
    assert len(mha) == 1 and mha[0].domain == "com.onnxedge"
    assert [n.op_type for n in model.graph.nodes].count("MatMul") == 3   # the projections
    assert mha[0].attributes["num_heads"] == HEADS
    expected_scale = 1 / math.sqrt(SIZE) if scale_op else 1.0
    assert abs(mha[0].attributes["scale"] - expected_scale) < 1e-6
    assert len(mha[0].inputs) == (4 if mask else 3)
    assert_same_outputs(data, model, _feeds(mask), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dynamic", ["own", "hf"])
def test_attention_with_shapes_computed_at_run_time(dynamic):
    data = _attention(dynamic=dynamic)
    model = optimized(data)
    assert [n.op_type for n in model.graph.nodes] == ["MatMul"] * 3 + ["MultiHeadAttention"]
    assert model.graph.nodes[-1].attributes["num_heads"] == HEADS
    assert_same_outputs(data, model, _feeds(), rtol=1e-4, atol=1e-5)


def test_dims_of_an_unrelated_value_block_the_fusion():
    data = _attention(dynamic="hf", dims_of="other")
    model = optimized(data)
    assert "MultiHeadAttention" not in [n.op_type for n in model.graph.nodes]
    feeds = dict(_feeds(), other=rand(2, SEQ, HIDDEN, seed=9))
    assert_same_outputs(data, model, feeds, rtol=1e-4, atol=1e-5)


def test_merge_shape_that_does_not_match_the_heads_is_left_alone():
    data = _attention(merge=(0, 0, 2, SIZE * HEADS // 2))
    model = optimized(data)
    assert "MultiHeadAttention" not in [n.op_type for n in model.graph.nodes]
    assert_same_outputs(data, model, _feeds(), rtol=1e-4, atol=1e-5)
