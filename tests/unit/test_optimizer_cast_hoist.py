"""cast_hoist: Cast-to-float32 of an integer view becomes the view of a Cast (an attention mask's
Cast(Unsqueeze(mask))), and stays where the swap would change what the graph computes or shares."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, vi

I64 = TensorProto.INT64


def _mask_model(views, cast_to=TensorProto.FLOAT, extra_reader=False, elem=I64):
    """mask [2, 5] (int64 or bool) -> views -> Cast -> 1 - m -> * -10000 (HuggingFace's additive
    mask); with extra_reader the last view's output is a graph output too."""
    inits = {"one": np.array(1.0, np.float32), "big": np.array(-10000.0, np.float32),
             "ax1": np.array([1], np.int64), "ax2": np.array([2], np.int64),
             "shape": np.array([2, 1, 5], np.int64), "wide": np.array([2, 3, 5], np.int64)}
    nodes, cur = [], "mask"
    for i, op in enumerate(views):
        out = "v%d" % i
        if op == "Unsqueeze":
            nodes.append(helper.make_node("Unsqueeze", [cur, "ax%d" % (1 + i % 2)], [out]))
        elif op == "Reshape":
            nodes.append(helper.make_node("Reshape", [cur, "shape"], [out]))
        elif op == "Expand":
            nodes.append(helper.make_node("Expand", [cur, "wide"], [out]))
        else:
            nodes.append(helper.make_node(op, [cur], [out]))
        cur = out
    nodes += [helper.make_node("Cast", [cur], ["m"], to=cast_to)]
    outputs = [vi("m", None, cast_to)]
    if cast_to == TensorProto.FLOAT:
        nodes += [helper.make_node("Sub", ["one", "m"], ["inv"]), helper.make_node("Mul", ["inv", "big"], ["y"])]
        outputs = [vi("y")]
    if extra_reader:
        outputs.append(vi(cur, None, elem))
    used = {i for n in nodes for i in n.input}
    return make_model(nodes, [vi("mask", [2, 5], elem)], outputs, {k: v for k, v in inits.items() if k in used})


def _feeds(elem=I64):
    m = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int64)
    return {"mask": m.astype(bool) if elem == TensorProto.BOOL else m}


@pytest.mark.parametrize("views", [["Unsqueeze"], ["Unsqueeze", "Unsqueeze"], ["Reshape"],
                                   ["Unsqueeze", "Expand"], ["Flatten"]])
def test_the_cast_moves_above_the_views(views):
    data = _mask_model(views)
    model = optimized(data)
    assert ops(model)[0] == "Cast" and model.graph.nodes[0].inputs == ["mask"]
    moved = ops(model)[1:-2]   # the views (two Unsqueezes become one Reshape) now move float32 values
    assert moved and set(moved) <= {"Reshape", "Flatten", "Unsqueeze", "Identity", "Expand"}, ops(model)
    assert_same_outputs(data, model, _feeds(), rtol=0, atol=0)


def test_bool_masks_move_too():
    data = _mask_model(["Unsqueeze"], elem=TensorProto.BOOL)
    model = optimized(data)
    assert ops(model)[:2] == ["Cast", "Unsqueeze"]
    assert_same_outputs(data, model, _feeds(TensorProto.BOOL), rtol=0, atol=0)


def test_a_view_read_elsewhere_or_a_cast_to_an_integer_stays():
    model = optimized(_mask_model(["Unsqueeze"], extra_reader=True))
    assert ops(model)[:2] == ["Unsqueeze", "Cast"]
    data = _mask_model(["Unsqueeze"], cast_to=TensorProto.INT32)
    model = optimized(data)
    assert ops(model) == ["Unsqueeze", "Cast"]
    assert_same_outputs(data, model, _feeds(), rtol=0, atol=0)


def test_a_cast_of_a_float_view_stays():
    data = make_model([helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
                       helper.make_node("Cast", ["u"], ["y"], to=TensorProto.FLOAT)],
                      [vi("x", [2, 5], TensorProto.DOUBLE)], [vi("y")], {"ax": np.array([1], np.int64)})
    assert ops(optimized(data)) == ["Unsqueeze", "Cast"]
