"""Multi-head attention fusion into com.onnxedge MultiHeadAttention."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge

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


# ---------------------------------------------------------------- torch.onnx.export(dynamo=True)

def _dynamo_attention(qk_scale=None, swap_order=(0, 1, 3, 2), guard_fill=0.0, axis=-1,
                      mask_shape=("b", 1, 1, "s"), merge="dims", dims_of="x", declare=True,
                      causal=False, q_reader="Shape"):
    """Attention as torch's dynamo exporter writes scaled_dot_product_attention: Reshape targets
    [b, s, -1, D] read off `dims_of` (allowzero=1), Q and K each multiplied by sqrt(scale), K^T
    through 3-D Reshapes (`swap_order`: the dims the last Reshape restores), a boolean mask made
    additive by Where(m, 0, -inf), Where(IsNaN(p), guard_fill, p) after the Softmax (no guard
    when guard_fill is None), the merge to [b, s, -1] ("dims") or to [-1, H * D] ("flat", GPT-2).
    `declare` writes value infos for the projections, as the exporter does for every value.
    `causal` builds the mask as is_causal=True exports it, from `q_reader`(Q) and Shape(K)."""
    n = helper.make_node
    nodes = [n("Shape", [dims_of], ["sh_b"], start=0, end=1),
             n("Shape", [dims_of], ["sh_s"], start=1, end=2),
             n("Concat", ["sh_b", "sh_s", "minus1", "size"], ["split_t"], axis=0),
             n("Concat", ["sh_b", "sh_s", "minus1"], ["merge_t"], axis=0),
             n("Where", ["m", "zero", "neg_inf"], ["bias"])]
    for name in ("q", "k", "v"):
        nodes += [n("MatMul", ["x", "w" + name], [name]),
                  n("Reshape", [name, "split_t"], [name + "4"], allowzero=1),
                  n("Transpose", [name + "4"], [name + "t"], perm=[0, 2, 1, 3])]
    nodes += [n("Shape", ["kt"], ["ksh"]),
              n("Slice", ["ksh", "minus1", "int_max"], ["ksh_last"]),
              n("Slice", ["ksh", "minus2", "minus1"], ["ksh_2nd"]),
              n("Slice", ["ksh", "int_min", "minus2"], ["ksh_lead"]),
              n("Concat", ["minus1", "ksh_2nd", "ksh_last"], ["k3_t"], axis=0),
              n("Reshape", ["kt", "k3_t"], ["k3"]),
              n("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1])]
    if causal:
        nodes += [n(q_reader, ["qt"], ["qsh"]), n("Slice", ["qsh", "minus2", "minus1"], ["q_len"]),
                  n("Concat", ["q_len", "ksh_2nd"], ["causal_shape"], axis=0),
                  n("Expand", ["one", "causal_shape"], ["ones"]),
                  n("Trilu", ["ones"], ["lower"], upper=0),
                  n("Equal", ["lower", "zero"], ["above"]),
                  n("Where", ["above", "neg_inf", "zero"], ["bias"])]
        nodes.remove(next(x for x in nodes if x.output == ["bias"] and x.input[0] == "m"))
    parts = {0: "ksh_lead", 2: "ksh_2nd", 3: "ksh_last"}   # 0 stands for the leading two dims
    nodes += [n("Concat", [parts[i] for i in swap_order if i != 1], ["k4_t"], axis=0),
              n("Reshape", ["k3t", "k4_t"], ["kT"]),
              n("Mul", ["qt", "qk_scale"], ["qs"]), n("Mul", ["kT", "qk_scale"], ["ks"]),
              n("MatMul", ["qs", "ks"], ["scores"]), n("Add", ["scores", "bias"], ["masked"]),
              n("Softmax", ["masked"], ["p"], axis=axis)]
    probs = "p"
    if guard_fill is not None:
        nodes += [n("IsNaN", ["p"], ["p_nan"]), n("Where", ["p_nan", "fill", "p"], ["p_safe"])]
        probs = "p_safe"
    nodes += [n("MatMul", [probs, "vt"], ["c"]), n("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3])]
    if merge == "flat":
        nodes.append(n("Reshape", ["ct", "flat_t"], ["y"]))
    else:
        nodes.append(n("Reshape", ["ct", "merge_t"], ["y"], allowzero=1))
    scale = math.sqrt(1 / math.sqrt(SIZE)) if qk_scale is None else qk_scale
    inits = {"wq": rand(HIDDEN, HIDDEN, seed=1), "wk": rand(HIDDEN, HIDDEN, seed=2),
             "wv": rand(HIDDEN, HIDDEN, seed=3), "size": np.array([SIZE], np.int64),
             "minus1": np.array([-1], np.int64), "minus2": np.array([-2], np.int64),
             "int_max": np.array([2 ** 63 - 1], np.int64),
             "int_min": np.array([-2 ** 63], np.int64),
             "zero": np.array(0.0, np.float32), "one": np.array(1.0, np.float32),
             "neg_inf": np.array(-np.inf, np.float32),
             "fill": np.array(guard_fill or 0.0, np.float32),
             "qk_scale": np.array(scale, np.float32), "flat_t": np.array([-1, HIDDEN], np.int64)}
    inputs = [vi("x", ["b", "s", HIDDEN]), vi("m", list(mask_shape), TensorProto.BOOL)]
    if dims_of != "x":
        inputs.append(vi(dims_of, ["b", "s"], TensorProto.INT64))
    out_shape = [None, HIDDEN] if merge == "flat" else ["b", "s", HIDDEN]
    data = make_model(nodes, inputs, [vi("y", out_shape)], inits, opset=20)
    if declare:
        import onnx
        proto = onnx.load_from_string(data)
        proto.graph.value_info.extend(vi(name, ["b", "s", HIDDEN]) for name in "qkv")
        data = proto.SerializeToString()
    return data


def _dynamo_feeds(seq=SEQ, dims_of="x"):
    m = np.ones((2, 1, 1, seq), bool)
    m[0, ..., -2:] = False
    m[1] = False   # every key masked: -inf scores, NaN probabilities, zeroed by the guard
    feeds = {"x": rand(2, seq, HIDDEN, seed=7), "m": m}
    if dims_of != "x":
        feeds[dims_of] = np.zeros((2, seq), np.int64)
    return feeds


def _mha(model):
    return [n for n in model.graph.nodes if n.op_type == "MultiHeadAttention"]


@pytest.mark.parametrize("dims_of", ["x", "ids"])
def test_dynamo_attention_becomes_one_node(dims_of):
    data = _dynamo_attention(dims_of=dims_of)
    model = optimized(data)
    mha = _mha(model)
    assert len(mha) == 1 and mha[0].domain == "com.onnxedge"
    assert mha[0].attributes["num_heads"] == HEADS and mha[0].attributes["nan_to_zero"] == 1
    assert abs(mha[0].attributes["scale"] - 1 / math.sqrt(SIZE)) < 1e-6
    assert [n.op_type for n in model.graph.nodes] == \
        ["Where"] + ["MatMul"] * 3 + ["MultiHeadAttention"]
    feeds = _dynamo_feeds(dims_of=dims_of)
    assert_same_outputs(data, model, feeds, rtol=1e-4, atol=1e-5)
    y = onnxedge.InferenceSession(model).run(None, feeds)[0]
    assert not np.isnan(y).any() and not y[1].any()   # the fully masked batch row is zeros


def test_dynamo_attention_without_guard_keeps_nans_like_the_original():
    data = _dynamo_attention(guard_fill=None)
    model = optimized(data)
    assert len(_mha(model)) == 1 and "nan_to_zero" not in _mha(model)[0].attributes
    assert_same_outputs(data, model, _dynamo_feeds(), rtol=1e-4, atol=1e-5)   # NaN == NaN


def test_dynamo_flat_merge_stays_after_the_fused_node():
    data = _dynamo_attention(merge="flat")
    model = optimized(data)
    assert len(_mha(model)) == 1
    assert [n.op_type for n in model.graph.nodes][-2:] == ["MultiHeadAttention", "Reshape"]
    assert_same_outputs(data, model, _dynamo_feeds(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [
    dict(axis=2),                                          # softmax over q_seq, not the keys
    dict(qk_scale=np.full((1, HEADS, 1, 1), 0.7, np.float32)),   # a scale per head
    dict(guard_fill=1.0),                                  # NaN -> 1, not 0
    dict(dims_of="ids", declare=False),                    # equal dim names on two inputs only
])
def test_dynamo_attention_guards_leave_the_graph_alone(case):
    data = _dynamo_attention(**case)
    model = optimized(data)
    assert not _mha(model)
    assert_same_outputs(data, model, _dynamo_feeds(dims_of=case.get("dims_of", "x")),
                        rtol=1e-4, atol=1e-5)


def test_dynamo_key_reshaped_back_without_the_swap_is_not_attention():
    data = _dynamo_attention(swap_order=(0, 1, 2, 3))   # [B*H, D, S] viewed as [B, H, S, D]
    model = optimized(data)
    assert not _mha(model) and "Transpose" in [n.op_type for n in model.graph.nodes]
    assert_same_outputs(data, model, _dynamo_feeds(seq=SIZE), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_shape", [("b", 3, "s", "s"), (1, "b", 1, 1, "s")])
def test_mask_that_cannot_broadcast_to_the_scores_is_left_alone(mask_shape):
    model = optimized(_dynamo_attention(mask_shape=mask_shape))
    assert not _mha(model) and "Softmax" in [n.op_type for n in model.graph.nodes]


def test_kernel_refuses_a_mask_that_grows_the_scores():
    from onnxedge.errors import InvalidArgument
    from onnxedge.kernels.attention import multi_head_attention
    q = rand(1, 1, HIDDEN)
    with pytest.raises(InvalidArgument, match="mask"):
        multi_head_attention(q, q, q, np.zeros((2, 1, 1, 1), np.float32), num_heads=HEADS)


def test_causal_mask_read_off_q_and_k_shapes_is_rebuilt_from_the_projections():
    data = _dynamo_attention(causal=True, guard_fill=None)
    model = optimized(data)
    mha = _mha(model)
    assert len(mha) == 1 and len(mha[0].inputs) == 4
    ops = [n.op_type for n in model.graph.nodes]
    assert "Transpose" not in ops and "Softmax" not in ops
    feeds = dict(_dynamo_feeds(), x=rand(3, SEQ + 2, HIDDEN, seed=8))   # m is unused here
    assert_same_outputs(data, model, feeds, rtol=1e-4, atol=1e-5)


def test_causal_mask_with_q_also_a_graph_output_is_left_alone():
    import onnx
    proto = onnx.load_from_string(_dynamo_attention(causal=True, guard_fill=None))
    proto.graph.output.append(vi("qt", ["b", HEADS, "s", SIZE]))
    data = proto.SerializeToString()
    model = optimized(data)
    assert not _mha(model)
    assert_same_outputs(data, model, _dynamo_feeds(), rtol=1e-4, atol=1e-5)
