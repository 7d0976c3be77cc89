"""The .onnx loader: tensor types, attributes, subgraphs and external data that stays inside."""
from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import dtypes, onnx_loader
from modelgen import tensor_info


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint8", "int16",
                                   "uint16", "int32", "int64", "uint32", "uint64", "bool",
                                   "complex64", "complex128"])
def test_tensor_round_trip_raw_and_typed(dtype):
    arr = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    raw = numpy_helper.from_array(arr, "t")
    np.testing.assert_array_equal(onnx_loader.tensor_to_array(raw), arr)
    assert onnx_loader.tensor_to_array(raw).dtype == np.dtype(dtype)
    typed = helper.make_tensor("t", dtypes.from_numpy(arr.dtype), [3, 4], arr.ravel().tolist())
    np.testing.assert_array_equal(onnx_loader.tensor_to_array(typed), arr)


def test_string_and_scalar_tensors():
    t = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", "c\u00e9".encode()])
    out = onnx_loader.tensor_to_array(t)
    assert out.dtype == object and out.tolist() == ["ab", "c\u00e9"]
    scalar = helper.make_tensor("f", TensorProto.FLOAT, [], [2.5])
    assert onnx_loader.tensor_to_array(scalar).shape == ()


def test_packed_int4_and_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = TensorProto(name="q", data_type=22, dims=[3])
    t.raw_data = bytes([0x9F, 0x07])  # low nibble first: -1 (0xF), -7 (0x9), 7
    out = onnx_loader.tensor_to_array(t)
    assert out.dtype == np.dtype(ml_dtypes.int4)
    assert out.astype(np.int8).tolist() == [-1, -7, 7]
    b = TensorProto(name="b", data_type=16, dims=[2], int32_data=[0x3F80, 0xC000])
    assert onnx_loader.tensor_to_array(b).astype(np.float32).tolist() == [1.0, -2.0]


def test_bad_tensor_sizes_are_invalid_graph():
    t = TensorProto(name="t", data_type=1, dims=[1000, 1000, 1000])
    t.raw_data = b"\0" * 8
    with pytest.raises(onnxedge.InvalidGraph, match="raw data has 8 bytes"):
        onnx_loader.tensor_to_array(t)
    t = TensorProto(name="t", data_type=1, dims=[3], float_data=[1.0])
    with pytest.raises(onnxedge.InvalidGraph, match="holds 1 values"):
        onnx_loader.tensor_to_array(t)
    t = TensorProto(name="t", data_type=99, dims=[1])
    with pytest.raises(onnxedge.InvalidGraph, match="unknown ONNX tensor element type 99"):
        onnx_loader.tensor_to_array(t)


def test_attributes_become_python_values():
    sub = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "body",
                            [tensor_info("a")], [tensor_info("b")])
    node = helper.make_node("Custom", ["x"], ["y"], f=1.5, i=3, s="txt", fs=[1.0, 2.0], ints=[1, 2],
                            strs=["a", "b"], t=numpy_helper.from_array(np.ones(2, np.float32)), g=sub)
    n = onnx_loader._node(node, None)
    a = n.attributes
    assert a["f"] == 1.5 and a["i"] == 3 and a["s"] == "txt" and a["fs"] == [1.0, 2.0]
    assert a["ints"] == [1, 2] and a["strs"] == ["a", "b"]
    np.testing.assert_array_equal(a["t"], [1, 1])
    assert a["g"].nodes[0].op_type == "Identity" and [s for _, s in n.subgraphs()] == [a["g"]]


def _external_model(tmp_path, location: str) -> str:
    weights = np.arange(6, dtype=np.float32)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 16 + weights.tobytes())
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[6])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "16"), ("length", "24")):
        e = t.external_data.add()
        e.key, e.value = k, v
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [], [tensor_info("y")], [t])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_external_data_inside_the_folder_loads(tmp_path):
    path = _external_model(tmp_path, "weights.bin")
    model = onnx_loader.load_model(path)
    np.testing.assert_array_equal(model.graph.initializers["w"], np.arange(6))


@pytest.mark.parametrize("location, pattern", [
    ("../weights.bin", "relative path inside the model's folder"),
    ("/etc/passwd", "relative path inside the model's folder"),
    ("sub/../../weights.bin", "relative path inside the model's folder"),
    ("absent.bin", "does not exist"),
])
def test_external_data_outside_the_folder_is_refused(tmp_path, location, pattern):
    path = _external_model(tmp_path, location)
    with pytest.raises((onnxedge.InvalidGraph, onnxedge.NoSuchFile), match=pattern):
        onnx_loader.load_model(path)


def test_external_data_link_out_of_the_folder_is_refused(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    path = _external_model(tmp_path, "weights.bin")
    os.replace(path, str(inner / "model.onnx"))
    os.symlink(str(tmp_path / "weights.bin"), str(inner / "weights.bin"))
    with pytest.raises(onnxedge.InvalidGraph, match="outside the model's folder"):
        onnx_loader.load_model(str(inner / "model.onnx"))


def test_external_data_from_bytes_is_refused(tmp_path):
    path = _external_model(tmp_path, "weights.bin")
    with open(path, "rb") as f:
        data = f.read()
    with pytest.raises(onnxedge.InvalidGraph, match="loaded from bytes"):
        onnx_loader.load_model(data)


def test_external_data_range_is_checked(tmp_path):
    weights = np.arange(6, dtype=np.float32)
    path = _external_model(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(weights.tobytes()[:8])
    with pytest.raises(onnxedge.InvalidGraph, match="lies outside"):
        onnx_loader.load_model(path)
