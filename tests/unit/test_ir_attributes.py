"""Attributes are typed once, in the IR (issue #15 point 5): STRING -> str, STRINGS -> list of str,
INT(S) -> int(s), FLOAT(S) -> float(s), whichever loader built the node (.onnx through the wire
reader or from onnx's protobuf objects, .oxe) and whoever built it by hand; kernels then read
string attributes without decoding anything."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import ir, model_io, onnx_loader
from modelgen import tensor_info

# not UTF-8: the IR keeps it as a str through surrogateescape, and the writers give the bytes back
RAW = b"caf\xc3\xa9 \xff"
TEXT = RAW.decode("utf-8", errors="surrogateescape")


def _model_proto():
    custom = helper.make_node("Custom", ["x"], ["c"], domain="test.domain", s="caf\u00e9",
                              raw=RAW, strs=["a", "\u00e9", ""], i=3, f=1.5, ints=[1, 2],
                              fs=[0.5])
    einsum = helper.make_node("Einsum", ["x", "y"], ["e"], equation="ij, jk -> ik")
    shift = helper.make_node("BitShift", ["u", "v"], ["z"], direction="RIGHT")
    graph = helper.make_graph(
        [custom, einsum, shift], "g",
        [tensor_info("x", shape=[2, 3]), tensor_info("y", shape=[3, 2]),
         tensor_info("u", TensorProto.UINT32, [4]), tensor_info("v", TensorProto.UINT32, [4])],
        [tensor_info("c"), tensor_info("e", shape=[2, 2]), tensor_info("z", TensorProto.UINT32, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("test.domain", 1)])


def _check_types(model: ir.Model) -> None:
    a = model.graph.nodes[0].attributes
    assert type(a["s"]) is str and a["s"] == "caf\u00e9"
    assert type(a["raw"]) is str and a["raw"] == TEXT
    assert type(a["strs"]) is list and all(type(v) is str for v in a["strs"])
    assert a["strs"] == ["a", "\u00e9", ""]
    assert type(a["i"]) is int and a["i"] == 3 and type(a["f"]) is float and a["f"] == 1.5
    assert [type(v) for v in a["ints"]] == [int, int] and a["ints"] == [1, 2]
    assert [type(v) for v in a["fs"]] == [float] and a["fs"] == [0.5]
    assert model.graph.nodes[1].attributes["equation"] == "ij, jk -> ik"
    assert model.graph.nodes[2].attributes["direction"] == "RIGHT"


@pytest.fixture
def onnx_bytes():
    return _model_proto().SerializeToString()


def test_onnx_wire_loader_gives_typed_attributes(onnx_bytes):
    _check_types(model_io.load(onnx_bytes))


def test_onnx_protobuf_loader_gives_typed_attributes():
    _check_types(onnx_loader.model_from_proto(_model_proto()))


def test_oxe_loader_gives_typed_attributes(onnx_bytes, tmp_path):
    path = str(tmp_path / "m.oxe")
    model_io.save(model_io.load(onnx_bytes), path)
    _check_types(model_io.load(path))


def test_onnx_writer_gives_the_original_bytes_back(onnx_bytes, tmp_path):
    """A str made by surrogateescape round-trips to the very bytes through the .onnx writer."""
    path = str(tmp_path / "m.onnx")
    model_io.save(model_io.load(onnx_bytes), path)
    import onnx
    attrs = {a.name: a for a in onnx.load(path).graph.node[0].attribute}
    assert attrs["raw"].s == RAW and attrs["s"].s == "caf\u00e9".encode()
    assert list(attrs["strs"].strings) == [b"a", "\u00e9".encode(), b""]


def test_node_built_by_hand_is_normalized():
    """bytes (or numpy scalars, tuples) given to ir.Node come out in the IR's typed form."""
    n = ir.Node("Custom", ["x"], ["y"], {
        "s": b"abc", "raw": RAW, "strs": [b"a", b"b"], "i": np.int64(4), "f": np.float32(0.25),
        "ints": (np.int64(1), 2), "fs": [np.float32(0.5)], "t": np.ones(2, np.float32)})
    a = n.attributes
    assert a["s"] == "abc" and a["raw"] == TEXT and a["strs"] == ["a", "b"]
    assert type(a["i"]) is int and a["i"] == 4 and type(a["f"]) is float and a["f"] == 0.25
    assert a["ints"] == [1, 2] and [type(v) for v in a["ints"]] == [int, int]
    assert a["fs"] == [0.5] and type(a["fs"][0]) is float
    assert isinstance(a["t"], np.ndarray)          # tensors stay numpy arrays


def test_function_attribute_defaults_are_normalized():
    f = ir.Function("F", "d", ["x"], ["y"], ["mode"], {"mode": b"fast", "axes": (1, 2)}, [],
                    {"": 17})
    assert f.attribute_defaults == {"mode": "fast", "axes": [1, 2]}


@pytest.mark.parametrize("suffix", ["onnx", "oxe"])
def test_kernels_read_string_attributes_from_both_formats(onnx_bytes, tmp_path, suffix):
    """Einsum's equation and BitShift's direction, as a loader hands them over, drive the kernels
    (checked against numpy)."""
    model = model_io.load(onnx_bytes)
    model.graph.nodes = model.graph.nodes[1:]
    model.graph.outputs = model.graph.outputs[1:]
    del model.opset_imports["test.domain"]
    path = str(tmp_path / ("m." + suffix))
    model_io.save(model, path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    u = np.array([1, 16, 255, 7], np.uint32)
    v = np.array([0, 2, 4, 1], np.uint32)
    sess = onnxedge.InferenceSession(path, providers=["CPUExecutionProvider"])
    e, z = sess.run(None, {"x": x, "y": y, "u": u, "v": v})
    np.testing.assert_allclose(e, x @ y, rtol=1e-6)
    np.testing.assert_array_equal(z, u >> v)
