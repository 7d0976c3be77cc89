"""The .onnx writer: IR -> ModelProto -> IR round trips, the checker, onnxruntime, external data."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxedge  # noqa: E402
from onnxedge import dtypes, ir, onnx_loader, onnx_writer  # noqa: E402

ONNX_VERSION = tuple(int(p) for p in onnx.__version__.split(".")[:2])


# ------------------------------------------------------------------------------------ helpers

def assert_ir_equal(a: Any, b: Any, where: str = "model") -> None:
    """Structural equality of IR objects (arrays by dtype, shape and values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, "%s: %s%s != %s%s" % (
            where, a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype.kind == "V":   # ml_dtypes: compare the values
            np.testing.assert_array_equal(a.astype(np.float32), b.astype(np.float32), err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
        return
    assert type(a) is type(b), "%s: %s != %s" % (where, type(a).__name__, type(b).__name__)
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), "%s: %d != %d items" % (where, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            assert_ir_equal(x, y, "%s[%d]" % (where, i))
    elif isinstance(a, dict):
        assert list(a) == list(b), "%s: keys %s != %s" % (where, list(a), list(b))
        for k in a:
            assert_ir_equal(a[k], b[k], "%s[%r]" % (where, k))
    elif isinstance(a, (ir.Model, ir.Graph, ir.Function)):
        for k in vars(a):
            assert_ir_equal(getattr(a, k), getattr(b, k), "%s.%s" % (where, k))
    elif isinstance(a, (ir.Node, ir.ValueInfo, ir.SparseTensor, ir.AttrRef)):
        for k in type(a).__slots__:
            assert_ir_equal(getattr(a, k), getattr(b, k), "%s.%s" % (where, k))
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, "%s: %r != %r" % (where, a, b)


def round_trip(proto: Any) -> Any:
    """proto -> IR -> proto -> IR; checks both IRs are equal and the writer is idempotent."""
    first = onnx_loader.model_from_proto(proto)
    written = onnx_writer.model_to_proto(first)
    second = onnx_loader.model_from_proto(onnx.ModelProto.FromString(written.SerializeToString()))
    assert_ir_equal(first, second)
    again = onnx_writer.model_to_proto(second)
    assert again.SerializeToString() == written.SerializeToString()
    return written


def tinfo(name: str, elem: int = TensorProto.FLOAT, shape: Any = None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(graph: Any, opsets: Any = None, functions: Any = None, ir_version: int = 8) -> Any:
    kw = {} if functions is None else {"functions": functions}
    m = helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", 17)], **kw)
    m.ir_version = ir_version
    return m


def ort_session(data: bytes) -> Any:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def mlp_model() -> Any:
    rng = np.random.RandomState(0)
    w = rng.randn(4, 3).astype(np.float32)
    b = rng.randn(3).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["z"], name="add"),
             helper.make_node("Relu", ["z"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "mlp", [tinfo("x", shape=["batch", 4])], [tinfo("y", shape=["batch", 3])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
                          value_info=[tinfo("h", shape=["batch", 3])])
    return make_model(g)


# ----------------------------------------------------------------------------- the bare core

def test_core_imports_without_onnx():
    code = ("import sys; sys.modules['onnx'] = None\n"
            "import onnxedge, onnxedge.onnx_writer as w\n"
            "from onnxedge import ir\n"
            "try:\n"
            "    w.save_model(ir.Model(ir.Graph()))\n"
            "except onnxedge.NotImplemented as e:\n"
            "    print('needs onnx:', 'onnx' in str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True)
    assert out.returncode == 0, out.stdout
    assert "needs onnx: True" in out.stdout


# ------------------------------------------------------------------------------------ tensors

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint8", "int16",
                                   "uint16", "int32", "int64", "uint32", "uint64", "bool",
                                   "complex64", "complex128", ">f4", ">i8", ">c16"])
def test_numpy_tensors_round_trip(dtype):
    arr = (np.arange(12).reshape(3, 4) % 5 - 1).astype(dtype)
    t = onnx_writer.array_to_tensor(arr, "t")
    assert t.HasField("raw_data") and t.name == "t" and list(t.dims) == [3, 4]
    assert t.data_type == dtypes.from_numpy(np.dtype(dtype).newbyteorder("="))
    back = onnx_loader.tensor_to_array(t)
    np.testing.assert_array_equal(back, arr)
    np.testing.assert_array_equal(numpy_helper.to_array(t), arr)   # onnx reads it the same


def test_scalar_empty_and_strided_tensors():
    for arr in (np.array(2.5, np.float32), np.zeros((0, 3), np.int64),
                np.arange(20, dtype=np.int32).reshape(4, 5)[::2, ::-2]):
        back = onnx_loader.tensor_to_array(onnx_writer.array_to_tensor(arr))
        assert back.shape == arr.shape
        np.testing.assert_array_equal(back, arr)


def test_string_tensors_keep_text_and_bytes():
    arr = np.array([["ab", "c\u00e9"], ["", "x\udcff"]], dtype=object)   # surrogate-escaped byte
    t = onnx_writer.array_to_tensor(arr, "s")
    assert t.data_type == TensorProto.STRING and list(t.string_data)[:2] == [b"ab", "c\u00e9".encode()]
    assert t.string_data[3] == b"x\xff"
    assert onnx_loader.tensor_to_array(t).tolist() == arr.tolist()
    unicode = onnx_writer.array_to_tensor(np.array(["u", "v"]))
    assert onnx_loader.tensor_to_array(unicode).tolist() == ["u", "v"]
    with pytest.raises(onnxedge.InvalidArgument, match="expected str or bytes"):
        onnx_writer.array_to_tensor(np.array([1, "a"], dtype=object), "bad")


def test_bit_pattern_arrays_without_ml_dtypes():
    t = onnx_writer.array_to_tensor(np.array([-1, -7, 7], np.int8), "q", elem_type=22)
    assert t.data_type == 22 and t.raw_data == bytes([0x9F, 0x07])   # low nibble first
    t = onnx_writer.array_to_tensor(np.array([1, 2, 3, 0, 1], np.uint8), "u2", elem_type=25)
    assert t.raw_data == bytes([0b00111001, 0b01])                      # four a byte, low first
    t = onnx_writer.array_to_tensor(np.array([0x3F80, 0xC000], np.uint16), "b", elem_type=16)
    assert t.data_type == 16 and t.raw_data == bytes([0x80, 0x3F, 0x00, 0xC0])
    t = onnx_writer.array_to_tensor(np.array([0x38], np.uint8), "f8", elem_type=17)
    assert t.raw_data == b"\x38"
    t = onnx_writer.array_to_tensor(np.array([1.5, 2.0]), "f", elem_type=TensorProto.FLOAT)
    assert numpy_helper.to_array(t).dtype == np.float32
    with pytest.raises(onnxedge.InvalidArgument, match="bit patterns"):
        onnx_writer.array_to_tensor(np.array([1.0], np.float32), "b", elem_type=16)


ML_TYPES = [(16, [1.0, -2.0, 0.5]), (17, [1.0, -2.0, 448.0]), (18, [1.0, -2.0, 0.5]),
            (19, [1.0, -2.0, 57344.0]), (20, [1.0, -2.0, 0.5]), (24, [1.0, 2.0, 0.25]),
            (21, [0, 7, 15, 3, 1]), (22, [-8, -1, 0, 7, 3]), (23, [-1.5, 6.0, 0.5, 0.0, -6.0]),
            (25, [0, 1, 2, 3, 1]), (26, [-2, -1, 0, 1, 1])]


@pytest.mark.parametrize("code, values", ML_TYPES, ids=[dtypes.lookup(c).name for c, _ in ML_TYPES])
def test_ml_dtypes_tensors_round_trip(code, values):
    pytest.importorskip("ml_dtypes", reason="bfloat16/float8/int4 arrays need ml_dtypes")
    if not dtypes.has_numpy(code):
        pytest.skip("this ml_dtypes has no %s" % dtypes.lookup(code).name)
    arr = np.array(values, dtype=np.float32).astype(dtypes.to_numpy(code))
    t = onnx_writer.array_to_tensor(arr, "t")
    assert t.data_type == code
    back = onnx_loader.tensor_to_array(t)
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back.astype(np.float32), arr.astype(np.float32))
    if code not in (22, 26):   # the loader keeps int4/int2 sign-extended in their bytes
        assert back.tobytes() == arr.tobytes()
    if code in onnx.TensorProto.DataType.values():   # onnx itself reads what we wrote
        try:
            ref = numpy_helper.to_array(t)
        except Exception as e:   # older onnx: no numpy type for this element type
            pytest.skip("onnx %s cannot read %s: %s" % (onnx.__version__, dtypes.lookup(code).name, e))
        np.testing.assert_array_equal(np.asarray(ref).astype(np.float32), arr.astype(np.float32))


def test_sparse_initializer_is_written_sparse_and_loads_dense():
    sp = ir.SparseTensor(np.array([5.0, 6.0], np.float32), np.array([1, 4]), [2, 3])
    model = ir.Model(ir.Graph("g", [ir.Node("Identity", ["s"], ["y"])], [],
                              [ir.ValueInfo("y", ir.TypeInfo.tensor(1, [2, 3]))], {"s": sp}),
                     {"": 17})
    proto = onnx_writer.model_to_proto(model)
    assert len(proto.graph.sparse_initializer) == 1 and proto.graph.sparse_initializer[0].values.name == "s"
    onnx.checker.check_model(proto)
    back = onnx_loader.model_from_proto(proto)
    np.testing.assert_array_equal(back.graph.initializers["s"], sp.to_dense())


# --------------------------------------------------------------------------------- attributes

def _type_proto_seq() -> Any:
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, ["n", None, 3]))


def all_attributes_model() -> Any:
    sub = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "body",
                            [tinfo("a", shape=[2])], [tinfo("b", shape=[2])])
    sub2 = helper.make_graph([helper.make_node("Neg", ["a"], ["c"])], "body2",
                             [tinfo("a")], [tinfo("c")])
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5, 2.5], np.float32), "v"),
                                       numpy_helper.from_array(np.array([0, 3], np.int64), "i"), [4])
    sparse2 = helper.make_sparse_tensor(numpy_helper.from_array(np.array([7], np.int32), "v2"),
                                        numpy_helper.from_array(np.array([[1, 0]], np.int64), "i2"),
                                        [2, 2])
    node = helper.make_node(
        "Custom", ["x"], ["y"], domain="test.domain", name="all", doc_string="every kind",
        f=1.5, i=-3, s="txt\u00e9", t=numpy_helper.from_array(np.arange(6, dtype=np.int16).reshape(2, 3)),
        g=sub, floats=[1.0, -2.5], ints=[1, 2, -9], strings=["a", "b\u00e9"],
        tensors=[numpy_helper.from_array(np.ones(2, np.float32)),
                 helper.make_tensor("st", TensorProto.STRING, [1], [b"z"])],
        graphs=[sub, sub2], sparse_tensor=sparse, sparse_tensors=[sparse, sparse2],
        tp=helper.make_tensor_type_proto(TensorProto.FLOAT, ["N", 3]),
        tps=[_type_proto_seq(), helper.make_optional_type_proto(helper.make_tensor_type_proto(1, None))])
    g = helper.make_graph([node], "g", [tinfo("x")], [tinfo("y")])
    return make_model(g, [helper.make_opsetid("", 17), helper.make_opsetid("test.domain", 1)])


def test_every_attribute_kind_round_trips():
    proto = all_attributes_model()
    written = round_trip(proto)
    kinds = {a.name: a.type for a in proto.graph.node[0].attribute}
    assert {a.name: a.type for a in written.graph.node[0].attribute} == kinds
    assert len(kinds) == 14 and set(kinds.values()) == set(range(1, 15))
    a = onnx_loader.model_from_proto(written).graph.nodes[0].attributes
    assert a["f"] == 1.5 and a["i"] == -3 and a["s"] == "txt\u00e9" and a["strings"] == ["a", "b\u00e9"]
    assert a["tensors"][1].tolist() == ["z"] and a["t"].dtype == np.int16
    assert a["tp"] == ir.TypeInfo.tensor(1, ["N", 3])
    assert a["tps"][0] == ir.TypeInfo("sequence", elem=ir.TypeInfo.tensor(7, ["n", None, 3]))
    assert a["tps"][1] == ir.TypeInfo("optional", elem=ir.TypeInfo.tensor(1, None))
    np.testing.assert_array_equal(a["sparse_tensors"][1].to_dense(), [[0, 0], [7, 0]])
    assert [s.name for s in a["graphs"]] == ["body", "body2"]


def test_empty_lists_are_written_as_ints():
    node = ir.Node("Custom", ["x"], ["y"], {"empty": [], "mixed": [1, 2.5], "flag": True,
                                           "np": np.float32(0.25), "b": b"raw"}, domain="d")
    proto = onnx_writer.model_to_proto(ir.Model(ir.Graph(nodes=[node])))
    attrs = {a.name: a for a in proto.graph.node[0].attribute}
    assert attrs["empty"].type == onnx.AttributeProto.INTS and not attrs["empty"].ints
    assert attrs["mixed"].type == onnx.AttributeProto.FLOATS and list(attrs["mixed"].floats) == [1.0, 2.5]
    assert attrs["flag"].type == onnx.AttributeProto.INT and attrs["flag"].i == 1
    assert attrs["np"].type == onnx.AttributeProto.FLOAT and attrs["b"].s == b"raw"


def test_unwritable_attribute_names_the_node():
    node = ir.Node("Custom", ["x"], ["y"], {"bad": object()}, name="n1")
    with pytest.raises(onnxedge.InvalidArgument, match="n1.*attribute 'bad'.*object"):
        onnx_writer.model_to_proto(ir.Model(ir.Graph(nodes=[node])))


# ---------------------------------------------------------------------------- types, metadata

def map_type(key: int, value: Any) -> Any:
    """A map TypeProto (onnx 1.14's helper has no make_map_type_proto)."""
    t = onnx.TypeProto()
    t.map_type.key_type = key
    t.map_type.value_type.CopyFrom(value)
    return t


def test_types_value_infos_and_model_fields_round_trip():
    tp = helper.make_tensor_type_proto
    inputs = [tinfo("t", TensorProto.FLOAT, ["batch", None, 3]),
              tinfo("scalar", TensorProto.DOUBLE, []),
              helper.make_value_info("seq", _type_proto_seq(), doc_string="a sequence"),
              helper.make_value_info("opt", helper.make_optional_type_proto(tp(TensorProto.BOOL, [2]))),
              helper.make_value_info("map", map_type(
                  TensorProto.STRING, helper.make_sequence_type_proto(tp(TensorProto.FLOAT, [1])))),
              helper.make_value_info("sp", helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, [3, "k"]))]
    g = helper.make_graph([helper.make_node("Identity", ["t"], ["y"])], "typed", inputs,
                          [tinfo("y", TensorProto.FLOAT, ["batch", None, 3])],
                          value_info=[tinfo("unused", TensorProto.UINT8, [1]),
                                      tinfo("norank", TensorProto.INT64, None)], doc_string="graph doc")
    m = make_model(g, [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)], ir_version=8)
    m.producer_name, m.producer_version, m.domain, m.model_version = "p", "1.2", "org.test", 7
    m.doc_string = "model doc"
    helper.set_model_props(m, {"author": "me", "license": "MIT"})
    written = round_trip(m)
    onnx.checker.check_model(written, full_check=True)
    back = onnx_loader.model_from_proto(written)
    assert back.metadata_props == {"author": "me", "license": "MIT"} and back.model_version == 7
    assert (back.producer_name, back.producer_version, back.domain, back.ir_version) == \
        ("p", "1.2", "org.test", 8)
    assert back.opset_imports == {"": 17, "ai.onnx.ml": 3} and back.doc_string == "model doc"
    t = {v.name: v.type for v in back.graph.inputs}
    assert t["t"] == ir.TypeInfo.tensor(1, ["batch", None, 3])
    assert back.graph.value_info["norank"].type.shape is None
    assert t["scalar"].shape == [] and t["map"].ort_string() == "map(string,seq(tensor(float)))"
    assert t["sp"] == ir.TypeInfo("sparse_tensor", 1, [3, "k"])
    assert back.graph.inputs[2].name == "seq" and back.graph.inputs[2].doc_string == "a sequence"
    assert back.graph.doc_string == "graph doc"
    # the written protos carry the same types as onnx.helper's
    assert [v.SerializeToString() for v in written.graph.input] == [v.SerializeToString() for v in inputs]


def test_untyped_value_info_stays_untyped():
    graph = ir.Graph("g", [ir.Node("Identity", ["x"], ["y"])], [ir.ValueInfo("x")], [ir.ValueInfo("y")])
    proto = onnx_writer.model_to_proto(ir.Model(graph))
    assert not proto.graph.input[0].HasField("type")
    assert onnx_loader.model_from_proto(proto).graph.inputs[0].type is None


# -------------------------------------------------------------------- subgraphs and functions

def if_model() -> Any:
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then_branch", [],
                               [tinfo("t", shape=[2])])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else_branch", [],
                               [tinfo("e", shape=[2])])
    g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)],
                          "if", [tinfo("cond", TensorProto.BOOL, []), tinfo("x", shape=[2])],
                          [tinfo("y", shape=[2])])
    return make_model(g)


def function_model() -> Any:
    body = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"])]
    fn = helper.make_function("local", "AddRelu", ["a", "b"], ["r"], body,
                              [helper.make_opsetid("", 17)], [])
    g = helper.make_graph([helper.make_node("AddRelu", ["x", "w"], ["y"], domain="local")], "fg",
                          [tinfo("x", shape=[2, 3])], [tinfo("y", shape=[2, 3])],
                          [numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "w")])
    return make_model(g, [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], [fn])


def test_subgraphs_round_trip_and_check():
    written = round_trip(if_model())
    onnx.checker.check_model(written, full_check=True)
    node = onnx_loader.model_from_proto(written).graph.nodes[0]
    assert sorted((k, g.name) for k, g in node.subgraphs()) == [("else_branch", "else_branch"),
                                                                ("then_branch", "then_branch")]


def _ref(name: str, ref: str, attr_type: int) -> Any:
    a = onnx.AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, attr_type
    return a


def test_functions_with_defaults_and_attribute_refs():
    leaky = helper.make_node("LeakyRelu", ["x"], ["y"])
    leaky.attribute.append(_ref("alpha", "slope", onnx.AttributeProto.FLOAT))
    inner = helper.make_function("local", "Leaky", ["x"], ["y"], [leaky], [helper.make_opsetid("", 17)],
                                 ["slope"])
    call = helper.make_node("Leaky", ["x"], ["y"], domain="local")
    call.attribute.append(_ref("slope", "gain", onnx.AttributeProto.FLOAT))   # typed by a default only
    outer = helper.make_function("local", "Outer", ["x"], ["y"], [call],
                                 [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], [])
    outer.attribute.append("unused")
    outer.attribute_proto.extend([helper.make_attribute("gain", 0.3),
                                  helper.make_attribute("axes", [0, 1])])
    g = helper.make_graph([helper.make_node("Outer", ["x"], ["y"], domain="local")], "g",
                          [tinfo("x", shape=[3])], [tinfo("y", shape=[3])])
    m = make_model(g, [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], [inner, outer])
    onnx.checker.check_model(m)
    written = round_trip(m)
    onnx.checker.check_model(written, full_check=True)
    assert written.functions[0].node[0].attribute[0].type == onnx.AttributeProto.FLOAT   # from schema
    assert written.functions[1].node[0].attribute[0].type == onnx.AttributeProto.FLOAT   # from default
    assert list(written.functions[1].attribute) == ["unused"]
    assert [a.name for a in written.functions[1].attribute_proto] == ["gain", "axes"]
    f = onnx_loader.model_from_proto(written).functions[1]
    assert f.attributes == ["unused", "gain", "axes"] and f.attribute_defaults["axes"] == [0, 1]
    assert isinstance(f.nodes[0].attributes["slope"], ir.AttrRef)


def test_function_overload_needs_a_new_onnx():
    f = ir.Function("F", "local", ["x"], ["y"], [], {}, [ir.Node("Relu", ["x"], ["y"])], {"": 17},
                    overload="v2")
    model = ir.Model(ir.Graph(nodes=[ir.Node("F", ["x"], ["y"], domain="local")]),
                     {"": 17, "local": 1}, functions=[f])
    if "overload" in onnx.FunctionProto.DESCRIPTOR.fields_by_name:
        assert onnx_writer.model_to_proto(model).functions[0].overload == "v2"
    else:
        with pytest.raises(onnxedge.NotImplemented, match="overload"):
            onnx_writer.model_to_proto(model)


@pytest.mark.parametrize("build, feeds", [
    (mlp_model, {"x": np.arange(8, dtype=np.float32).reshape(2, 4) - 3}),
    (if_model, {"cond": np.array(True), "x": np.array([-1.0, 2.0], np.float32)}),
    (if_model, {"cond": np.array(False), "x": np.array([-1.0, 2.0], np.float32)}),
    (function_model, {"x": np.array([[1, 2, 3], [-4, 5, -6]], np.float32)}),
], ids=["mlp", "if-then", "if-else", "function"])
def test_onnxruntime_runs_the_written_model(build, feeds):
    pytest.importorskip("onnxruntime")
    proto = build()
    written = onnx_writer.save_model(onnx_loader.model_from_proto(proto))
    onnx.checker.check_model(onnx.ModelProto.FromString(written), full_check=True)
    want = ort_session(proto.SerializeToString()).run(None, feeds)
    got = ort_session(written).run(None, feeds)
    for w, o in zip(want, got):
        np.testing.assert_array_equal(o, w)


# ------------------------------------------------------------------------------------- saving

def test_save_model_returns_bytes_and_writes_the_file(tmp_path):
    model = onnx_loader.model_from_proto(mlp_model())
    data = onnx_writer.save_model(model)
    assert isinstance(data, bytes)
    path = tmp_path / "m.onnx"
    assert onnx_writer.save_model(model, path) == data and path.read_bytes() == data
    assert_ir_equal(onnx_loader.load_model(str(path)), model)
    assert_ir_equal(onnx_loader.load_model(data), model)


def test_external_data_beside_the_model(tmp_path):
    big = np.arange(600, dtype=np.float32).reshape(20, 30)
    small = np.arange(3, dtype=np.int64)
    sub = ir.Graph("then", [ir.Node("Identity", ["inner"], ["o"])], [],
                   [ir.ValueInfo("o", ir.TypeInfo.tensor(1, [20, 30]))], {"inner": big + 1})
    other = ir.Graph("else", [ir.Node("Identity", ["w"], ["o2"])], [],
                     [ir.ValueInfo("o2", ir.TypeInfo.tensor(1, [20, 30]))])
    g = ir.Graph("g", [ir.Node("If", ["c"], ["y"], {"then_branch": sub, "else_branch": other})],
                 [ir.ValueInfo("c", ir.TypeInfo.tensor(9, []))],
                 [ir.ValueInfo("y", ir.TypeInfo.tensor(1, [20, 30]))],
                 {"w": big, "s": small, "names": np.array(["a"], dtype=object)})
    model = ir.Model(g, {"": 17})
    path = tmp_path / "model.onnx"
    onnx_writer.save_model(model, str(path), external_data_threshold=1024)
    proto = onnx.load(str(path), load_external_data=False)
    locs = {t.name: {e.key: e.value for e in t.external_data} for t in proto.graph.initializer}
    assert locs["w"]["location"] == "model.onnx.data" and locs["s"] == {} and locs["names"] == {}
    assert proto.graph.node[0].attribute[0].g.initializer[0].data_location == TensorProto.EXTERNAL
    assert (tmp_path / "model.onnx.data").stat().st_size >= 2 * big.nbytes
    assert_ir_equal(onnx_loader.load_model(str(path)), model)
    onnx.checker.check_model(str(path), full_check=True)
    np.testing.assert_array_equal(numpy_helper.to_array(onnx.load(str(path)).graph.initializer[0]), big)
    # a sub-folder location, relative to the model's folder
    sub_path = tmp_path / "m2.onnx"
    onnx_writer.save_model(model, sub_path, external_data_threshold=0,
                           external_data_location="weights/all.bin")
    assert (tmp_path / "weights" / "all.bin").is_file()
    assert_ir_equal(onnx_loader.load_model(str(sub_path)), model)


def test_onnxruntime_reads_external_data(tmp_path):
    pytest.importorskip("onnxruntime")
    proto = mlp_model()
    path = str(tmp_path / "mlp.onnx")
    onnx_writer.save_model(onnx_loader.model_from_proto(proto), path, external_data_threshold=0)
    assert os.path.isfile(path + ".data")
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    want = ort_session(proto.SerializeToString()).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("location", ["../out.bin", "/tmp/abs.bin", "a/../../b.bin"])
def test_external_data_location_must_stay_inside(tmp_path, location):
    model = onnx_loader.model_from_proto(mlp_model())
    with pytest.raises(onnxedge.InvalidArgument, match="relative path inside"):
        onnx_writer.save_model(model, str(tmp_path / "m.onnx"), external_data_threshold=0,
                               external_data_location=location)


def test_external_data_needs_a_path():
    model = onnx_loader.model_from_proto(mlp_model())
    with pytest.raises(onnxedge.InvalidArgument, match="needs a path"):
        onnx_writer.save_model(model, None, external_data_threshold=0)


def test_no_external_file_when_nothing_is_large_enough(tmp_path):
    model = onnx_loader.model_from_proto(mlp_model())
    path = tmp_path / "m.onnx"
    data = onnx_writer.save_model(model, str(path), external_data_threshold=10 ** 6)
    assert sorted(os.listdir(str(tmp_path))) == ["m.onnx"] and data == onnx_writer.save_model(model)
