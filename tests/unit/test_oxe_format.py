"""The .oxe format: lossless IR round trips, zero-copy loading, external data, and the checks that
refuse malformed, truncated or too-new files."""
from __future__ import annotations

import mmap
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import dtypes, ir, model_io, onnx_loader, onnx_writer
from onnxedge import format as oxe
from onnxedge.errors import InvalidGraph, NoSuchFile
from onnxedge.format import writer as oxe_writer
from onnxedge.format.fb.Model import Model as FbModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------------------------ helpers

def assert_same(a, b, where="value"):
    """Deep equality of IR values: arrays bitwise with dtype and shape, graphs, types, refs."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, "%s: %s%s vs %s%s" % (
            where, a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype == object or a.dtype.name in ("int4", "uint4", "int2", "uint2"):
            # ml_dtypes' 4-/2-bit types may keep different high bits for the same value
            assert a.tolist() == b.tolist(), where
        else:
            assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, ir.Graph):
        assert isinstance(b, ir.Graph), where
        assert (a.name, a.doc_string) == (b.name, b.doc_string), where
        assert len(a.nodes) == len(b.nodes), where
        for x, y in zip(a.nodes, b.nodes):
            assert (x.op_type, x.domain, x.name, x.inputs, x.outputs, x.doc_string) == \
                (y.op_type, y.domain, y.name, y.inputs, y.outputs, y.doc_string), where
            assert list(x.attributes) == list(y.attributes), where
            for k in x.attributes:
                assert_same(x.attributes[k], y.attributes[k], "%s/%s.%s" % (where, x.name, k))
        for xs, ys in ((a.inputs, b.inputs), (a.outputs, b.outputs),
                       (list(a.value_info.values()), list(b.value_info.values()))):
            assert [(v.name, v.type, v.doc_string) for v in xs] == \
                [(v.name, v.type, v.doc_string) for v in ys], where
        assert list(a.initializers) == list(b.initializers), where
        for k in a.initializers:
            assert_same(a.initializers[k], b.initializers[k], "%s/init %s" % (where, k))
    elif isinstance(a, ir.SparseTensor):
        assert isinstance(b, ir.SparseTensor) and a.dims == b.dims, where
        assert_same(a.values, b.values, where)
        assert_same(np.asarray(a.indices), np.asarray(b.indices), where)
    elif isinstance(a, ir.AttrRef):
        assert isinstance(b, ir.AttrRef) and a.ref_attr_name == b.ref_attr_name, where
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, "%s[%d]" % (where, i))
    else:
        assert type(a) == type(b) and a == b, "%s: %r vs %r" % (where, a, b)


def assert_models_same(a, b):
    assert_same(a.graph, b.graph, "graph")
    for key in ("opset_imports", "ir_version", "producer_name", "producer_version", "domain",
                "model_version", "doc_string", "metadata_props"):
        assert getattr(a, key) == getattr(b, key), key
    assert len(a.functions) == len(b.functions)
    for f, g in zip(a.functions, b.functions):
        assert (f.name, f.domain, f.overload, f.inputs, f.outputs, f.opset_imports) == \
            (g.name, g.domain, g.overload, g.inputs, g.outputs, g.opset_imports)
        assert sorted(f.attributes) == sorted(g.attributes)
        assert list(f.attribute_defaults) == list(g.attribute_defaults)
        for k in f.attribute_defaults:
            assert_same(f.attribute_defaults[k], g.attribute_defaults[k], k)
        assert_same(ir.Graph(nodes=f.nodes), ir.Graph(nodes=g.nodes), "function body")


def small_graph(name="body", scale=2.0):
    return ir.Graph(name, [ir.Node("Mul", ["x", "k"], ["y"], name="mul")],
                    [ir.ValueInfo("x", ir.TypeInfo.tensor(1, ["N"]))],
                    [ir.ValueInfo("y", ir.TypeInfo.tensor(1, ["N"]), "the output")],
                    {"k": np.array([scale], dtype=np.float32)})


def every_attribute_kind():
    sparse = ir.SparseTensor(np.array([1.5, -2.0], dtype=np.float32),
                             np.array([[0, 1], [2, 0]], dtype=np.int64), [3, 2])
    return {
        "f": 0.375, "i": -(1 << 40), "s": "h\u00e9llo \udcff", "t": np.arange(6.0).reshape(2, 3),
        "g": small_graph(), "floats": [1.5, -2.25, 0.125], "ints": [1, -2, 1 << 50],
        "strings": ["a", "", "\u00fc"], "tensors": [np.array(3, dtype=np.int64),
                                                   np.array(["x", "yz"], dtype=object)],
        "graphs": [small_graph("a"), small_graph("b", 3.0)], "sparse_tensor": sparse,
        "sparse_tensors": [sparse, ir.SparseTensor(np.array([7], dtype=np.int32),
                                                   np.array([4], dtype=np.int64), [5])],
        "tp": ir.TypeInfo.tensor(1, [2, "N", None]),
        "tps": [ir.TypeInfo("sequence", elem=ir.TypeInfo.tensor(7, [3])),
                ir.TypeInfo("map", 8, elem=ir.TypeInfo.tensor(1)),
                ir.TypeInfo("optional", elem=ir.TypeInfo("sequence", elem=ir.TypeInfo.tensor(9))),
                ir.TypeInfo("sparse_tensor", 1, [4, 4]), ir.TypeInfo.tensor(1, [])],
        "empty": [], "ref": ir.AttrRef("alpha"),
    }


def model_with(graph, **kw):
    kw.setdefault("opset_imports", {"": 17, "com.x": 1})
    return ir.Model(graph, ir_version=9, producer_name="tests", producer_version="1.2",
                    domain="org.test", model_version=7, doc_string="a model",
                    metadata_props={"author": "me", "k": "v"}, **kw)


def one_init_model(arr, name="w"):
    g = ir.Graph("g", [ir.Node("Identity", [name], ["y"])], [], [ir.ValueInfo("y")], {name: arr})
    return model_with(g)


def all_dtype_arrays():
    """{code: array} for every element type this interpreter can make arrays of."""
    rng = np.random.RandomState(0)
    out = {}
    for code, d in sorted(dtypes.BY_CODE.items()):
        if code == dtypes.STRING:
            out[code] = np.array([["a", "\u00fc\u00df"], ["", "long " * 10]], dtype=object)
            continue
        if not dtypes.has_numpy(code):
            continue
        target = dtypes.to_numpy(code)
        if d.name in ("INT4", "INT2"):
            lo = -8 if d.name == "INT4" else -2
            vals = rng.randint(lo, -lo, size=(3, 5)).astype(target)
        elif d.name in ("UINT4", "UINT2"):
            vals = rng.randint(0, 16 if d.name == "UINT4" else 4, size=(3, 5)).astype(target)
        elif target.kind == "b":
            vals = rng.rand(3, 5) > 0.5
        elif target.kind in "iu":
            info = np.iinfo(target)
            vals = rng.randint(max(info.min, -1000), min(info.max, 1000), size=(3, 5)).astype(target)
        elif target.kind == "c":
            vals = (rng.randn(3, 5) + 1j * rng.randn(3, 5)).astype(target)
        else:
            vals = (rng.randn(3, 5) * 2).astype(np.float32).astype(target)
        out[code] = vals
    return out


# ------------------------------------------------------------------------------ round trips

def test_every_attribute_kind_round_trips():
    attrs = every_attribute_kind()
    g = ir.Graph("main", [ir.Node("Custom", ["x", ""], ["y"], attrs, "com.x", "n0", "doc")],
                 [ir.ValueInfo("x", ir.TypeInfo.tensor(1, ["N", 3]))],
                 [ir.ValueInfo("y", ir.TypeInfo("sequence", elem=ir.TypeInfo.tensor(1, None)))],
                 {}, {"z": ir.ValueInfo("z", ir.TypeInfo.tensor(10, [1]))}, "graph doc")
    model = model_with(g)
    back = oxe.load(oxe.to_bytes(model))
    assert_models_same(model, back)
    # the same model through .onnx (onnx_writer + onnx_loader) reads back the same, so
    # .oxe -> .onnx keeps every kind (the tensor attribute's name aside, which the IR drops)
    via_onnx = onnx_loader.model_from_proto(onnx_writer.model_to_proto(back))
    back_attrs = via_onnx.graph.nodes[0].attributes
    for key in attrs:
        assert_same(attrs[key], back_attrs[key], key)


def test_every_dtype_round_trips_bitwise():
    arrays = all_dtype_arrays()
    assert len(arrays) >= 15
    if dtypes.has_numpy(16):
        assert len(arrays) == 26, sorted(set(dtypes.BY_CODE) - set(arrays))
    g = ir.Graph("g", [], [], [ir.ValueInfo("t%d" % c) for c in arrays],
                 {"t%d" % c: a for c, a in arrays.items()})
    model = model_with(g)
    data = oxe.to_bytes(model)
    back = oxe.load(data)
    assert_models_same(model, back)
    for code, arr in arrays.items():
        assert dtypes.from_numpy(back.graph.initializers["t%d" % code].dtype) == code
    # independent reference: onnx's numpy_helper reads the .onnx written from the .oxe's IR
    proto = onnx_writer.model_to_proto(back)
    for t in proto.graph.initializer:
        code = t.data_type
        if dtypes.BY_CODE[code].numpy is not None:
            want = arrays[code]
            got = numpy_helper.to_array(t)
            if code == dtypes.STRING:
                assert [s.decode() if isinstance(s, bytes) else s for s in got.reshape(-1)] == \
                    want.reshape(-1).tolist()
            else:
                np.testing.assert_array_equal(got, want)


def test_packed_4_and_2_bit_types_are_stored_packed():
    if not dtypes.has_numpy(22):
        pytest.skip("int4/int2 arrays need ml_dtypes (not installed in this interpreter)")
    import ml_dtypes
    for code, dt, vals, nbytes in ((22, ml_dtypes.int4, [-8, 7, 0, -1, 3], 3),
                                   (21, ml_dtypes.uint4, [15, 0, 9], 2),
                                   (26, ml_dtypes.int2, [-2, 1, 0, -1, 1], 2),
                                   (25, ml_dtypes.uint2, [3, 2, 1, 0, 3, 3, 3, 3, 1], 3)):
        arr = np.array(vals, dtype=dt)
        data = oxe.to_bytes(one_init_model(arr))
        t = FbModel.GetRootAs(data, 0).Graph().Initializers(0)
        assert t.Dtype() == code and t.Length() == nbytes
        start = len(data) - FbModel.GetRootAs(data, 0).DataLength() + t.Offset()
        # the packing is ONNX's: onnx.numpy_helper packs the same values to the same bytes
        assert data[start:start + nbytes] == numpy_helper.from_array(arr).raw_data
        back = oxe.load(data).graph.initializers["w"]
        assert back.dtype == arr.dtype and back.tolist() == arr.tolist()


def test_function_with_attribute_refs_round_trips_and_runs():
    fn = helper.make_function(
        "custom", "Scale", ["x"], ["y"],
        [helper.make_node("Constant", [], ["k"], value_float=0.0),
         helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.0)],
        [helper.make_opsetid("", 17)], ["alpha"])
    fn.node[1].attribute[0].ref_attr_name = "alpha"
    graph = helper.make_graph(
        [helper.make_node("Scale", ["x"], ["y"], domain="custom", alpha=0.5)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("custom", 1)],
                          functions=[fn])
    m.ir_version = 8
    data = m.SerializeToString()
    model = model_io.load(data)
    blob = oxe.to_bytes(model)
    back = oxe.load(blob)
    assert_models_same(model, back)
    assert isinstance(back.functions[0].nodes[1].attributes["alpha"], ir.AttrRef)
    x = np.array([-2.0, -1.0, 0.0, 3.0], dtype=np.float32)
    got = onnxedge.InferenceSession(blob).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, np.where(x > 0, x, 0.5 * x))
    again = onnx_writer.model_to_proto(back)
    onnx.checker.check_model(again)


def _control_flow_model():
    """If (two branches with initializers) inside a Loop body, plus a Scan: a nested subgraph."""
    then_g = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["out"])], "then", [],
                               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
                               [numpy_helper.from_array(np.ones(2, np.float32), "one")])
    else_g = helper.make_graph([helper.make_node("Mul", ["acc", "two"], ["out"])], "else", [],
                               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
                               [numpy_helper.from_array(np.full(2, 2, np.float32), "two")])
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Less", ["i_f", "half"], ["c"]),
         helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Identity", ["out"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "half")])
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s", "e"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
        "scan_body",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s2", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("o", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body),
         helper.make_node("Scan", ["y", "seq"], ["z", "zs"], body=scan_body, num_scan_inputs=1)],
        "main",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("seq", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("zs", TensorProto.FLOAT, [3, 2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m.SerializeToString()


def test_subgraphs_if_loop_scan_round_trip_and_match_reference():
    data = _control_flow_model()
    model = model_io.load(data)
    blob = oxe.to_bytes(model)
    assert_models_same(model, oxe.load(blob))
    feeds = {"n": np.array(4, np.int64), "x": np.array([1.0, -1.0], np.float32),
             "seq": np.arange(6, dtype=np.float32).reshape(3, 2)}
    got = onnxedge.InferenceSession(blob).run(None, feeds)
    # reference: numpy, by hand (i=0,1 add one; i=2,3 double), then a running sum
    y = feeds["x"].copy()
    for i in range(4):
        y = y + 1 if i < 2 else y * 2
    zs = np.cumsum(feeds["seq"], axis=0) + y
    np.testing.assert_allclose(got[0], zs[-1])
    np.testing.assert_allclose(got[1], zs)


def test_sparse_initializers_dense_by_default_or_kept():
    s = ir.SparseTensor(np.array([5, 6], dtype=np.int64), np.array([1, 3], dtype=np.int64), [2, 2])
    g = ir.Graph("g", [ir.Node("Identity", ["sp"], ["y"])], [], [ir.ValueInfo("y")],
                 {"w": np.ones(2, np.float32), "sp": s})
    data = oxe.to_bytes(model_with(g))
    dense = oxe.load(data).graph.initializers["sp"]
    np.testing.assert_array_equal(dense, [[0, 5], [0, 6]])
    kept = oxe.load(data, keep_sparse=True).graph.initializers["sp"]
    assert_same(s, kept)
    out = onnxedge.InferenceSession(data).run(None, {})[0]
    np.testing.assert_array_equal(out, [[0, 5], [0, 6]])


def test_sparse_with_out_of_range_indices_is_refused():
    s = ir.SparseTensor(np.array([5.0], dtype=np.float32), np.array([9], dtype=np.int64), [2, 2])
    data = oxe.to_bytes(one_init_model(s, "sp"))
    with pytest.raises(InvalidGraph, match="indices"):
        oxe.load(data)


# ------------------------------------------------------------------------------- zero copy

def test_bytes_load_gives_read_only_views_into_the_buffer():
    w = np.arange(1000, dtype=np.float32)
    data = oxe.to_bytes(one_init_model(w))
    arr = oxe.load(data).graph.initializers["w"]
    np.testing.assert_array_equal(arr, w)
    assert np.shares_memory(arr, np.frombuffer(data, dtype=np.uint8))
    assert not arr.flags.writeable
    with pytest.raises(ValueError):
        arr[0] = 1


def _base_chain(arr):
    chain, obj = [], arr
    while obj is not None:
        chain.append(obj)
        obj = getattr(obj, "base", None) if not isinstance(obj, memoryview) else obj.obj
    return chain


def test_path_load_memory_maps_and_aligns(tmp_path):
    w = np.random.RandomState(0).randn(64, 33).astype(np.float32)
    b = np.arange(7, dtype=np.int64)
    g = ir.Graph("g", [ir.Node("Identity", ["w"], ["y"])], [], [ir.ValueInfo("y")],
                 {"w": w, "b": b})
    path = str(tmp_path / "m.oxe")
    model_io.save(model_with(g), path)
    inits = model_io.load(path).graph.initializers
    for name, want in (("w", w), ("b", b)):
        arr = inits[name]
        np.testing.assert_array_equal(arr, want)
        assert not arr.flags.writeable
        assert any(isinstance(o, mmap.mmap) for o in _base_chain(arr)), _base_chain(arr)
        assert arr.ctypes.data % 64 == 0
    os.remove(path)   # the views keep the mapping alive
    assert float(inits["w"].sum()) == pytest.approx(float(w.sum()), rel=1e-5)


# ----------------------------------------------------------------------------- external data

def test_external_data_beside_the_model(tmp_path):
    big = np.random.RandomState(1).randn(300, 10).astype(np.float32)
    small = np.ones(3, np.float32)
    g = ir.Graph("g", [ir.Node("Add", ["big", "small"], ["y"])], [], [ir.ValueInfo("y")],
                 {"big": big, "small": small})
    path = str(tmp_path / "m.oxe")
    info = oxe.save(model_with(g), path, external_data_threshold=1024)
    assert os.path.getsize(path + ".data") == big.nbytes == info["external_bytes"]
    assert os.path.getsize(path) < big.nbytes
    inits = model_io.load(path).graph.initializers
    np.testing.assert_array_equal(inits["big"], big)
    np.testing.assert_array_equal(inits["small"], small)
    assert any(isinstance(o, mmap.mmap) for o in _base_chain(inits["big"]))
    with open(path, "rb") as f:
        data = f.read()
    with pytest.raises(InvalidGraph, match="loaded from bytes"):
        oxe.load(data)
    os.remove(path + ".data")
    with pytest.raises(NoSuchFile, match="m.oxe.data"):
        oxe.load(path)


def test_external_data_outside_the_folder_is_refused(tmp_path):
    g = ir.Graph("g", [], [], [], {"big": np.ones(100, np.float32)})
    head, builder = oxe_writer._build(model_with(g), 16, "../evil.data")
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "evil.data").write_bytes(b"\0" * 400)
    path = sub / "m.oxe"
    path.write_bytes(head + b"\0" * (oxe.layout.align(len(head)) - len(head)))
    with pytest.raises(InvalidGraph, match="relative path inside"):
        oxe.load(str(path))


# ---------------------------------------------------------------------------- refusals

def _tensor_field(data, slot):
    """(absolute position of field `slot` of the last initializer, the table) in `data`."""
    graph = FbModel.GetRootAs(data, 0).Graph()
    t = graph.Initializers(graph.InitializersLength() - 1)
    o = t._tab.Offset(slot)
    assert o, "field not present"
    return t._tab.Pos + o, t


def _patched(data, pos, fmt, value):
    buf = bytearray(data)
    struct.pack_into(fmt, buf, pos, value)
    return bytes(buf)


def test_newer_major_version_is_refused(monkeypatch):
    monkeypatch.setattr(oxe_writer, "FORMAT_MAJOR", 7)
    data = oxe.to_bytes(one_init_model(np.ones(2, np.float32)))
    with pytest.raises(InvalidGraph, match="written by a newer onnxedge format version 7; this "
                                           "build reads up to 1; upgrade onnxedge"):
        model_io.load(data)


def test_wrong_identifier_and_onnx_bytes_are_refused():
    data = oxe.to_bytes(one_init_model(np.ones(2, np.float32)))
    with pytest.raises(InvalidGraph, match="file identifier b'OXE9'"):
        oxe.load(data[:4] + b"OXE9" + data[8:])
    onnx_bytes = onnx_writer.save_model(one_init_model(np.ones(2, np.float32)))
    with pytest.raises(InvalidGraph, match="not an .oxe file"):
        oxe.load(onnx_bytes)


def test_every_truncation_is_refused(tmp_path):
    data = oxe.to_bytes(one_init_model(np.arange(40, dtype=np.float32)))
    for n in list(range(0, 64)) + list(range(64, len(data), 7)):
        with pytest.raises(InvalidGraph):
            oxe.load(data[:n])
    path = tmp_path / "t.oxe"
    path.write_bytes(data[:len(data) - 1])
    with pytest.raises(InvalidGraph, match="truncated or corrupt"):
        model_io.load(str(path))
    path.write_bytes(b"")
    with pytest.raises(InvalidGraph):
        oxe.load(str(path))


@pytest.mark.parametrize("slot,fmt,value,message", [
    (6, "<i", 99, "unknown element type code 99"),
    (6, "<i", 7, "bytes of data"),                    # int64 needs 320 bytes, has 160
    (12, "<Q", 164, "bytes of data"),
    (10, "<Q", 1 << 40, "lies outside"),
    (10, "<Q", 8, "aligned"),
])
def test_corrupt_tensor_fields_are_named(slot, fmt, value, message):
    g = ir.Graph("g", [], [], [], {"a": np.ones(3, np.float32),
                                   "w": np.arange(40, dtype=np.float32)})
    data = oxe.to_bytes(model_with(g))
    pos, _ = _tensor_field(data, slot)
    with pytest.raises(InvalidGraph, match=message):
        oxe.load(_patched(data, pos, fmt, value))


def test_negative_or_mismatched_dims_are_refused():
    data = oxe.to_bytes(one_init_model(np.arange(40, dtype=np.float32).reshape(4, 10)))
    pos, t = _tensor_field(data, 8)
    vec = t._tab.Vector(pos - t._tab.Pos)
    with pytest.raises(InvalidGraph, match="non-negative"):
        oxe.load(_patched(data, vec, "<q", -4))
    with pytest.raises(InvalidGraph, match="need 320"):
        oxe.load(_patched(data, vec, "<q", 8))
    with pytest.raises(InvalidGraph, match="more tables|malformed|outside"):
        oxe.load(_patched(data, vec - 4, "<I", 0x7FFFFFFF))   # vector length far past the end


def test_subgraph_offset_pointing_back_at_its_parent_is_refused():
    # FlatBuffers offsets only point forward; one aimed back at the main graph (a cycle) reads
    # as an offset far past the end of the buffer
    g = ir.Graph("main", [ir.Node("If", ["c"], ["y"], {"then_branch": small_graph()})],
                 [ir.ValueInfo("c")], [ir.ValueInfo("y")])
    data = bytearray(oxe.to_bytes(model_with(g)))
    root = FbModel.GetRootAs(bytes(data), 0)
    main_pos = root._tab.Indirect(root._tab.Pos + root._tab.Offset(24))   # Model.graph
    attr = root.Graph().Nodes(0).Attributes(0)
    field = attr._tab.Pos + attr._tab.Offset(20)                          # Attribute.g
    assert main_pos < field
    struct.pack_into("<i", data, field, main_pos - field)
    with pytest.raises(InvalidGraph, match="malformed"):
        oxe.load(bytes(data))


# -------------------------------------------------------------------- loading through the API

def test_model_io_and_session_tell_oxe_from_onnx(tmp_path):
    w = np.random.RandomState(2).randn(4, 3).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx_path = str(tmp_path / "m.onnx")
    onnx.save(m, onnx_path)
    oxe_path = str(tmp_path / "renamed.onnx.bin")      # content decides, not the name
    oxe.save(model_io.load(onnx_path), oxe_path)
    assert model_io.is_oxe(oxe_path) and not model_io.is_oxe(onnx_path)
    x = np.random.RandomState(3).randn(2, 4).astype(np.float32)
    want = x @ w
    with open(oxe_path, "rb") as f:
        oxe_bytes = f.read()
    for source in (oxe_path, oxe_bytes, bytearray(oxe_bytes), onnx_path):
        sess = onnxedge.InferenceSession(source)
        assert [(a.name, a.shape, a.type) for a in sess.get_inputs()] == \
            [("x", ["N", 4], "tensor(float)")]
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5)
    out = str(tmp_path / "saved.oxe")
    model_io.save(model_io.load(onnx_path), out)
    assert model_io.is_oxe(out)
    back = str(tmp_path / "back.onnx")
    model_io.save(model_io.load(out), back)
    onnx.checker.check_model(onnx.load(back))
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(back).graph.initializer[0]), w)


def test_session_writes_optimized_model_as_oxe(tmp_path):
    data = _control_flow_model()
    opts = onnxedge.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "opt.oxe")
    onnxedge.InferenceSession(data, opts)
    assert model_io.is_oxe(opts.optimized_model_filepath)
    assert len(model_io.load(opts.optimized_model_filepath).graph.nodes) >= 1


def test_missing_file_is_no_such_file(tmp_path):
    with pytest.raises(NoSuchFile):
        model_io.load(str(tmp_path / "nope.oxe"))


# ------------------------------------------------------------------------- speed and size

def test_reading_a_200_node_model_takes_a_few_ms():
    nodes, inits = [], {}
    prev = "x"
    for i in range(200):
        inits["b%d" % i] = np.full(16, i, np.float32)
        nodes.append(ir.Node("Add", [prev, "b%d" % i], ["h%d" % i], name="add%d" % i))
        prev = "h%d" % i
    g = ir.Graph("g", nodes, [ir.ValueInfo("x", ir.TypeInfo.tensor(1, [16]))],
                 [ir.ValueInfo(prev, ir.TypeInfo.tensor(1, [16]))], inits)
    data = oxe.to_bytes(model_with(g))
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        oxe.load(data)
        times.append(time.perf_counter() - t0)
    assert float(np.median(times)) < 0.025, times


@pytest.mark.parametrize("name", ["resnet18", "bert_encoder"])
def test_oxe_of_benchmark_models_within_one_percent_of_onnx(name):
    sys.path.insert(0, ROOT)
    try:
        from benchmarks import models
    finally:
        sys.path.remove(ROOT)
    onnx_bytes = models.build(name).SerializeToString()
    oxe_bytes = oxe.to_bytes(model_io.load(onnx_bytes))
    assert abs(len(oxe_bytes) - len(onnx_bytes)) <= 0.01 * len(onnx_bytes), \
        (len(oxe_bytes), len(onnx_bytes))


def test_generated_code_matches_the_schema(tmp_path):
    if shutil.which("flatc") is None:
        pytest.fail("flatc is missing: `make setup` installs it (Debian's flatbuffers-compiler)")
    here = os.path.join(ROOT, "core", "format")
    subprocess.check_call(["sh", os.path.join(here, "gen_schema.sh"), str(tmp_path)])
    fresh = sorted(os.listdir(str(tmp_path)))
    assert fresh == sorted(f for f in os.listdir(os.path.join(here, "fb")) if f.endswith(".py"))
    for name in fresh:
        with open(os.path.join(here, "fb", name)) as a, open(str(tmp_path / name)) as b:
            assert a.read() == b.read(), "core/format/fb/%s is stale: run `make schema`" % name
