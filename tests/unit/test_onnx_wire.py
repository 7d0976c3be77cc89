"""onnx_wire, onnxedge's own reader of the ONNX protobuf wire format, against the `onnx` package.

For every model here (hand-built ones covering each attribute, tensor storage, type and merge
rule, models with external data, and the whole ONNX node suite when its cache exists) the IR made
from onnx_wire's messages must equal, bit for bit, the IR made from the `onnx` package's
ModelProto by the same conversion (`onnx_loader.model_from_proto`), and sessions on both give the
same outputs. Corrupt and hostile bytes (truncations, seeded byte flips, 2**60 length prefixes,
over-long varints, deep nesting) give only InvalidProtobuf / OnnxEdgeError, without allocating.
"""
from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from typing import Any, Callable, List

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import ir, onnx_loader, onnx_wire
from onnxedge.errors import InvalidProtobuf, OnnxEdgeError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))


# ------------------------------------------------------------------------------ IR comparison

def assert_same_ir(a: Any, b: Any, path: str = "model") -> None:
    """AssertionError naming the first place where two IR values differ (arrays bit-exact)."""
    if isinstance(a, ir.Model):
        assert isinstance(b, ir.Model), path
        for k in ("opset_imports", "ir_version", "producer_name", "producer_version", "domain",
                  "model_version", "doc_string", "metadata_props"):
            assert getattr(a, k) == getattr(b, k), (path + "." + k, getattr(a, k), getattr(b, k))
        assert_same_ir(a.graph, b.graph, path + ".graph")
        assert len(a.functions) == len(b.functions), path + ".functions"
        for i, (fa, fb) in enumerate(zip(a.functions, b.functions)):
            where = "%s.functions[%d]" % (path, i)
            for k in ("name", "domain", "overload", "inputs", "outputs", "attributes",
                      "opset_imports"):
                assert getattr(fa, k) == getattr(fb, k), (where + "." + k)
            assert_same_ir(fa.attribute_defaults, fb.attribute_defaults, where + ".defaults")
            assert_same_ir(fa.nodes, fb.nodes, where + ".nodes")
    elif isinstance(a, ir.Graph):
        assert isinstance(b, ir.Graph) and (a.name, a.doc_string) == (b.name, b.doc_string), path
        for k in ("nodes", "inputs", "outputs", "value_info", "initializers"):
            assert_same_ir(getattr(a, k), getattr(b, k), path + "." + k)
    elif isinstance(a, ir.Node):
        assert isinstance(b, ir.Node), path
        for k in ("op_type", "domain", "inputs", "outputs", "name", "doc_string"):
            assert getattr(a, k) == getattr(b, k), (path + "." + k, getattr(a, k), getattr(b, k))
        assert_same_ir(a.attributes, b.attributes, path + ".attributes")
    elif isinstance(a, ir.ValueInfo):
        assert isinstance(b, ir.ValueInfo), path
        assert (a.name, a.type, a.doc_string) == (b.name, b.type, b.doc_string), (path, a, b)
    elif isinstance(a, ir.SparseTensor):
        assert isinstance(b, ir.SparseTensor) and a.dims == b.dims, path
        assert_same_ir(a.values, b.values, path + ".values")
        assert_same_ir(a.indices, b.indices, path + ".indices")
    elif isinstance(a, ir.AttrRef):
        assert isinstance(b, ir.AttrRef) and a.ref_attr_name == b.ref_attr_name, path
    elif isinstance(a, ir.TypeInfo) or a is None:
        assert a == b, (path, a, b)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), (path, type(b))
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (path, a.dtype, b.dtype, a.shape, b.shape)
        if a.dtype == object:
            assert a.tolist() == b.tolist(), path
        else:
            assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), path
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), (path, list(a), list(b))
        for k in a:
            assert_same_ir(a[k], b[k], "%s[%r]" % (path, k))
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_ir(x, y, "%s[%d]" % (path, i))
    elif isinstance(a, float):
        assert type(b) is float and struct.pack("<d", a) == struct.pack("<d", b), (path, a, b)
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def both_ways(data: bytes, base_dir: Any = None) -> Any:
    """(IR via onnx's ModelProto, IR via onnx_wire), or the (type, message) of what each raised."""
    out = []
    for parse in (onnx.ModelProto.FromString, onnx_wire.parse_model):
        try:
            out.append(onnx_loader.model_from_proto(parse(data), base_dir))
        except OnnxEdgeError as e:
            out.append((type(e), str(e)))
    return out


def assert_same_load(data: bytes, base_dir: Any = None) -> ir.Model:
    """Both ways give the same IR (or the same error); the wire way's IR."""
    via_onnx, via_wire = both_ways(data, base_dir)
    if isinstance(via_onnx, tuple):
        assert via_onnx == via_wire
    else:
        assert_same_ir(via_onnx, via_wire)
    return via_wire


def assert_same_outputs(a: ir.Model, b: ir.Model, feeds: dict) -> None:
    """Sessions on two IRs give bit-identical outputs."""
    ya = onnxedge.InferenceSession(a).run(None, feeds)
    yb = onnxedge.InferenceSession(b).run(None, feeds)
    assert len(ya) == len(yb)
    assert_same_ir(ya, yb, "outputs")   # bit-exact (NaNs included)


# ------------------------------------------------------------------------------------ models

def _model(nodes: list, inputs: list, outputs: list, inits: list = (), opset: int = 17,
           extra_opsets: list = (), **kw: Any) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits), **kw)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] + list(extra_opsets))
    m.ir_version = 8
    return m


def _vi(name: str, elem: int = TensorProto.FLOAT, shape: Any = None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def mlp() -> Any:
    """MatMul/Add/Relu/Gemm with float initializers, metadata and doc strings."""
    rng = np.random.RandomState(0)
    m = _model([helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm", doc_string="first"),
                helper.make_node("Add", ["h", "b1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
                helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1, alpha=0.5)],
               [_vi("x", shape=["N", 8])], [_vi("y", shape=["N", 3])],
               [numpy_helper.from_array(rng.randn(8, 6).astype(np.float32), "w1"),
                numpy_helper.from_array(rng.randn(6).astype(np.float32), "b1"),
                numpy_helper.from_array(rng.randn(3, 6).astype(np.float32), "w2"),
                numpy_helper.from_array(rng.randn(3).astype(np.float32), "b2")],
               doc_string="an MLP", value_info=[_vi("h", shape=["N", 6])])
    m.producer_name, m.producer_version, m.domain, m.model_version = "test", "1.0", "ex.org", 7
    m.doc_string = "docs \u00e9\u4e2d"
    helper.set_model_props(m, {"author": "me", "note": "\u00fcnicode"})
    return m


def control_flow() -> Any:
    """Loop whose body holds an If (then/else subgraphs, outer-scope reads), and a Scan."""
    then_g = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["out"])], "then", [],
                               [_vi("out", shape=[2])],
                               [numpy_helper.from_array(np.ones(2, np.float32), "one")])
    else_g = helper.make_graph([helper.make_node("Neg", ["acc"], ["out"])], "else", [],
                               [_vi("out", shape=[2])])
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["acc"], ["acc_sum"], keepdims=0),
         helper.make_node("Greater", ["acc_sum", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("acc", shape=[2])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("out", shape=[2])],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s", "e"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["o"])],
        "scan_body", [_vi("s", shape=[2]), _vi("e", shape=[2])],
        [_vi("s_out", shape=[2]), _vi("o", shape=[2])])
    return _model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body),
                   helper.make_node("Scan", ["y", "seq"], ["z", "zs"], body=scan_body,
                                    num_scan_inputs=1)],
                  [_vi("n", TensorProto.INT64, []), _vi("x", shape=[2]), _vi("seq", shape=[3, 2])],
                  [_vi("z", shape=[2]), _vi("zs", shape=[3, 2])], opset=16)


def functions() -> Any:
    """A model-local function with a default attribute and a reference to the caller's."""
    fn = helper.make_function(
        "local.fns", "ScaledAdd", ["a", "b"], ["c"],
        [helper.make_node("Constant", [], ["k"], value_float=0.0),
         helper.make_node("Add", ["a", "b"], ["s"]),
         helper.make_node("Mul", ["s", "alpha_t"], ["c"])],
        [helper.make_opsetid("", 17)], ["alpha"])
    ref = helper.make_attribute("value_float", 0.0)
    ref.ref_attr_name = "alpha"
    del fn.node[0].attribute[:]
    fn.node[0].attribute.extend([ref])
    fn.node[0].output[0] = "alpha_t"
    fn.attribute_proto.extend([helper.make_attribute("beta", 2.5)])
    fn.doc_string = "a function"
    m = _model([helper.make_node("ScaledAdd", ["x", "y"], ["z"], domain="local.fns", alpha=3.0)],
               [_vi("x", shape=[2]), _vi("y", shape=[2])], [_vi("z", shape=[2])],
               extra_opsets=[helper.make_opsetid("local.fns", 1)])
    m.functions.extend([fn])
    return m


def tensors() -> Any:
    """Initializers of many element types, raw and in the typed fields, scalars and empties."""
    rng = np.random.RandomState(1)
    f32 = rng.randn(3, 4).astype(np.float32)
    f16 = rng.randn(5).astype(np.float16)
    inits = [
        numpy_helper.from_array(f32, "f32_raw"),
        helper.make_tensor("f32_typed", TensorProto.FLOAT, [3, 4], f32.ravel().tolist()),
        helper.make_tensor("f64_typed", TensorProto.DOUBLE, [3], [1.5, -2.25, 1e300]),
        numpy_helper.from_array(rng.randn(2, 2), "f64_raw"),
        numpy_helper.from_array(f16, "f16_raw"),
        helper.make_tensor("f16_typed", TensorProto.FLOAT16, [5], f16.view(np.uint16).tolist()),
        helper.make_tensor("i64_typed", TensorProto.INT64, [4], [0, -1, 2 ** 62, -2 ** 63]),
        numpy_helper.from_array(np.arange(-5, 5, dtype=np.int64), "i64_raw"),
        helper.make_tensor("i32_typed", TensorProto.INT32, [3], [-(2 ** 31), 2 ** 31 - 1, 0]),
        helper.make_tensor("i8_typed", TensorProto.INT8, [3], [-128, 127, 0]),
        helper.make_tensor("u8_typed", TensorProto.UINT8, [2], [255, 1]),
        helper.make_tensor("u64_typed", TensorProto.UINT64, [2], [2 ** 64 - 1, 3]),
        helper.make_tensor("u32_typed", TensorProto.UINT32, [2], [2 ** 32 - 1, 3]),
        helper.make_tensor("bool_typed", TensorProto.BOOL, [3], [True, False, True]),
        numpy_helper.from_array(np.array([True, False]), "bool_raw"),
        helper.make_tensor("c64_typed", TensorProto.COMPLEX64, [2], [1 + 2j, -3j]),
        helper.make_tensor("str", TensorProto.STRING, [3], [b"a", "\u00e9\u4e2d".encode(), b""]),
        numpy_helper.from_array(np.array(3.5, np.float32), "scalar"),
        numpy_helper.from_array(np.zeros((0, 3), np.float32), "empty"),
    ]
    big = rng.randint(-2 ** 62, 2 ** 62, size=40).astype(np.int64)   # long packed runs
    inits.append(helper.make_tensor("i64_long", TensorProto.INT64, [40], big.tolist()))
    inits.append(helper.make_tensor("f32_long", TensorProto.FLOAT, [40], rng.randn(40).tolist()))
    return _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", shape=[1])],
                  [_vi("y", shape=[1])], inits, opset=21)


def _raw_tensor(name: str, code: int, dims: List[int], raw: bytes) -> Any:
    t = TensorProto(name=name, data_type=code, raw_data=raw)
    t.dims.extend(dims)
    return t


def tensors_needing_ml_dtypes() -> Any:
    """bfloat16 (raw and int32_data), int4 and float8 initializers: without ml_dtypes (the page)
    both ways refuse them alike."""
    bf16 = np.array([0x3F80, 0xC000, 0x7FC0], np.uint16)
    inits = [_raw_tensor("bf16_raw", 16, [3], bf16.tobytes()),
             helper.make_tensor("bf16_typed", 16, [3], bf16.tolist()),
             _raw_tensor("int4_raw", 22, [3], bytes([0x9F, 0x07])),
             _raw_tensor("f8_raw", 17, [2], bytes([0x38, 0xC0])),
             helper.make_tensor("f8_typed", 17, [2], [0x38, 0xC0])]
    return _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", shape=[1])],
                  [_vi("y", shape=[1])], inits, opset=21)


def attributes() -> Any:
    """One node with an attribute of every type, and a Constant with a sparse value."""
    sub = helper.make_graph([helper.make_node("Identity", ["p"], ["q"])], "sub",
                            [_vi("p", shape=[1])], [_vi("q", shape=[1])])
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "v"),
                                   numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3])
    node = helper.make_node(
        "Custom", ["x"], ["y"], domain="ex.custom", name="all", f=1.25, i=-7,
        s="h\u00e9llo", t=numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3)),
        g=sub, floats=[0.1, -2.5, 3e38], ints=[0, -1, 2 ** 62, -2 ** 63],
        strings=["a", "\u4e2d"], tensors=[numpy_helper.from_array(np.array([1, 2], np.int32))],
        graphs=[sub, sub], sparse=sp, sparses=[sp, sp],
        tp=helper.make_tensor_type_proto(TensorProto.INT64, ["N", 3]),
        tps=[helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT,
                                                                           None)),
             helper.make_tensor_type_proto(TensorProto.BOOL, [])])
    const = helper.make_node("Constant", [], ["c"], sparse_value=sp)
    return _model([node, const], [_vi("x", shape=[1])], [_vi("y", shape=[1]), _vi("c", shape=[2, 3])],
                  extra_opsets=[helper.make_opsetid("ex.custom", 1)])


def types_and_sparse() -> Any:
    """Graph values of sequence, map, optional and sparse types; a sparse initializer."""
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, ["a", None]))
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, [2]))
    mp = onnx.TypeProto()
    mp.map_type.key_type = TensorProto.STRING
    mp.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    sparse_t = onnx.TypeProto()
    sparse_t.sparse_tensor_type.elem_type = TensorProto.FLOAT
    sparse_t.sparse_tensor_type.shape.dim.add().dim_value = 4
    unknown_rank = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
    vis = [helper.make_value_info(n, t) for n, t in
           (("seq", seq), ("opt", opt), ("map", mp), ("sp", sparse_t), ("any", unknown_rank))]
    vis.append(onnx.ValueInfoProto(name="untyped"))
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([7.0], np.float32), "w"),
                                   numpy_helper.from_array(np.array([[1, 2]], np.int64), "wi"),
                                   [2, 3])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", shape=[2, 3])],
               [_vi("y", shape=[2, 3])], value_info=[_vi("mid", shape=[None, "k", 3])] + vis)
    m.graph.sparse_initializer.extend([sp])
    return m


BUILDERS = [mlp, control_flow, functions, tensors, tensors_needing_ml_dtypes, attributes,
            types_and_sparse]


# --------------------------------------------------------------------- same IR, same outputs

@pytest.mark.parametrize("build", BUILDERS, ids=[b.__name__ for b in BUILDERS])
def test_same_ir_as_the_onnx_package(build: Callable[[], Any]) -> None:
    data = build().SerializeToString()
    model = assert_same_load(data)
    if isinstance(model, tuple):   # refused alike, as they must be without ml_dtypes
        assert build is tensors_needing_ml_dtypes and "ml_dtypes" in model[1], model
        return
    assert_same_ir(onnx_loader.load_model(data), model)   # the loader's own path is the wire one


def test_same_outputs() -> None:
    rng = np.random.RandomState(2)
    cases = [(mlp, {"x": rng.randn(4, 8).astype(np.float32)}),
             (control_flow, {"n": np.array(3, np.int64), "x": np.array([1.0, -2.0], np.float32),
                             "seq": rng.randn(3, 2).astype(np.float32)}),
             (functions, {"x": np.array([1.0, 2.0], np.float32),
                          "y": np.array([0.5, -1.0], np.float32)}),
             (types_and_sparse, {"x": rng.randn(2, 3).astype(np.float32)})]
    for build, feeds in cases:
        data = build().SerializeToString()
        via_onnx, via_wire = both_ways(data)
        assert_same_outputs(via_onnx, via_wire, feeds)


def test_values_read_as_numpy_expects() -> None:
    model = onnx_loader.model_from_proto(onnx_wire.parse_model(tensors().SerializeToString()))
    inits = model.graph.initializers
    assert inits["i64_typed"].tolist() == [0, -1, 2 ** 62, -2 ** 63]
    assert inits["u64_typed"].tolist() == [2 ** 64 - 1, 3]
    assert inits["i32_typed"].tolist() == [-(2 ** 31), 2 ** 31 - 1, 0]
    assert inits["str"].tolist() == ["a", "\u00e9\u4e2d", ""]
    assert inits["f16_raw"].dtype == np.float16 and inits["empty"].shape == (0, 3)
    node = onnx_loader.model_from_proto(onnx_wire.parse_model(attributes().SerializeToString())
                                        ).graph.nodes[0]
    assert node.attributes["ints"] == [0, -1, 2 ** 62, -2 ** 63]
    assert node.attributes["s"] == "h\u00e9llo" and node.attributes["i"] == -7


def test_raw_data_is_a_view_of_the_model_bytes() -> None:
    data = mlp().SerializeToString()
    model = onnx_wire.parse_model(data)
    raw = model.graph.initializer[0].raw_data
    assert isinstance(raw, memoryview) and raw.obj is data and raw.readonly
    arr = np.frombuffer(raw, dtype=np.float32)
    assert np.shares_memory(arr, np.frombuffer(data, dtype=np.uint8))


def test_messages_answer_like_onnx() -> None:
    proto = types_and_sparse()
    wire = onnx_wire.parse_model(proto.SerializeToString())
    assert wire.HasField("graph") and not wire.graph.node[0].HasField("doc_string")
    for vo, vw in zip(proto.graph.value_info, wire.graph.value_info):
        assert vo.HasField("type") == vw.HasField("type")
        if vo.HasField("type"):
            assert vo.type.WhichOneof("value") == vw.type.WhichOneof("value")
    dims = wire.graph.value_info[0].type.tensor_type.shape.dim
    assert [d.WhichOneof("value") for d in dims] == [None, "dim_param", "dim_value"]
    assert type(wire).__name__ == "ModelProto" and len(wire.graph.initializer) == 0


def test_external_data(tmp_path: Any) -> None:
    rng = np.random.RandomState(3)
    m = mlp()
    m.graph.initializer.extend([numpy_helper.from_array(rng.randn(64, 64).astype(np.float32), "big"),
                                numpy_helper.from_array(rng.randn(40).astype(np.float16), "half")])
    path = str(tmp_path / "m.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.data", size_threshold=0)
    with open(path, "rb") as f:
        data = f.read()
    assert b"m.data" in data and len(data) < 4000            # the weights really are outside
    via_onnx = onnx_loader.model_from_proto(onnx.load(path, load_external_data=False), str(tmp_path))
    via_wire = onnx_loader.load_model(path)
    assert_same_ir(via_onnx, via_wire)
    np.testing.assert_array_equal(via_wire.graph.initializers["big"], numpy_helper.to_array(
        onnx.load(path).graph.initializer[-2]))
    x = rng.randn(2, 8).astype(np.float32)
    assert_same_outputs(via_onnx, via_wire, {"x": x})
    with pytest.raises(OnnxEdgeError, match="loaded from bytes"):   # no folder: refused
        onnx_loader.load_model(data)


def test_concatenated_messages_merge_like_protobuf() -> None:
    # protobuf merges a message that occurs twice: repeated fields append, scalars take the last
    first, second = mlp(), control_flow()
    second.producer_name = "second"
    assert_same_load(first.SerializeToString() + second.SerializeToString())
    t = numpy_helper.from_array(np.arange(3, dtype=np.int64), "t").SerializeToString()
    halves = onnx.TensorProto.FromString(t + t)
    assert list(onnx_wire.parse(t + t, onnx_wire.TensorProto).dims) == list(halves.dims) == [3, 3]


# -------------------------------------------------------- hand-written wire: packing, unknowns

def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _ld(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _model_with_tensor(tensor: bytes, extra_model: bytes = b"", extra_graph: bytes = b"") -> bytes:
    graph = (_ld(1, _ld(1, b"x") + _ld(2, b"y") + _ld(4, b"Identity")) + _ld(2, b"g")
             + _ld(5, tensor) + _ld(11, _ld(1, b"x")) + _ld(12, _ld(1, b"y")) + extra_graph)
    return _key(1, 0) + _varint(8) + _ld(7, graph) + _ld(8, _ld(1, b"") + _key(2, 0) + _varint(17)) \
        + extra_model


def _unknown_fields() -> bytes:
    """One unknown field of every wire type, a group with a nested group among them."""
    return (_key(90, 0) + _varint(2 ** 63) + _key(91, 1) + b"\x01" * 8 + _key(92, 5) + b"\x02" * 4
            + _ld(93, b"anything") + _key(94, 3) + _key(1, 0) + _varint(5) + _key(95, 3)
            + _key(95, 4) + _key(94, 4))


WIRE_VARIANTS = {
    # float_data unpacked (each value its own fixed32 field) then a packed run, merged
    "float_data unpacked+packed": _key(1, 0) + _varint(3) + _key(2, 0) + _varint(1) + _ld(8, b"t")
    + b"".join(_key(4, 5) + struct.pack("<f", v) for v in (1.5, -2.0))
    + _ld(4, struct.pack("<f", 7.25)),
    # int64_data unpacked, dims packed (onnx writes them unpacked), 10-byte negative varints
    "int64 unpacked, dims packed": _ld(1, _varint(2) + _varint(2)) + _key(2, 0) + _varint(7)
    + _ld(8, b"t") + b"".join(_key(7, 0) + _varint(v) for v in (-1, 2 ** 63 - 1, -2 ** 63, 0)),
    # int32_data holding a 64-bit varint: protobuf keeps the low 32 bits
    "int32 truncation": _key(1, 0) + _varint(2) + _key(2, 0) + _varint(6) + _ld(8, b"t")
    + _ld(5, _varint(2 ** 40 + 5) + _varint(-3)),
    # unknown fields everywhere, an out-of-range data_location enum (protobuf: unknown field)
    "unknown fields": _key(1, 0) + _varint(1) + _key(2, 0) + _varint(1) + _ld(8, b"t")
    + _unknown_fields() + _key(14, 0) + _varint(7) + _ld(9, struct.pack("<f", 2.0)),
    # a long packed run of varints (numpy path) with 1..10-byte values
    "long packed int64": _key(1, 0) + _varint(50) + _key(2, 0) + _varint(7) + _ld(8, b"t")
    + _ld(7, b"".join(_varint(v) for v in [(-1) ** i * 7 ** i for i in range(25)] * 2)),
    "long packed uint64": _key(1, 0) + _varint(30) + _key(2, 0) + _varint(13) + _ld(8, b"t")
    + _ld(11, b"".join(_varint(2 ** 64 - 1 - i * 2 ** 57) for i in range(30))),
    "long packed doubles": _key(1, 0) + _varint(12) + _key(2, 0) + _varint(11) + _ld(8, b"t")
    + _ld(10, struct.pack("<12d", *[1e-300 * 10 ** i for i in range(12)])),
}


@pytest.mark.parametrize("name", sorted(WIRE_VARIANTS))
def test_hand_written_wire_variants(name: str) -> None:
    data = _model_with_tensor(WIRE_VARIANTS[name], _unknown_fields(), _unknown_fields())
    onnx.ModelProto.FromString(data)   # valid protobuf
    model = assert_same_load(data)
    assert isinstance(model, ir.Model) and "t" in model.graph.initializers


def test_oneof_keeps_the_last_member_and_unknown_enum_is_ignored() -> None:
    dim = _ld(1, _key(1, 0) + _varint(4) + _ld(2, b"N") + _key(1, 0) + _varint(5))
    tensor_type = _ld(1, _key(1, 0) + _varint(1) + _ld(2, dim))
    seq_type = _ld(4, _ld(1, tensor_type))
    vi = _ld(11, _ld(1, b"z") + _ld(2, tensor_type + seq_type))   # sequence replaces tensor
    attr = _ld(5, _ld(1, b"alpha") + _key(20, 0) + _varint(99) + _key(2, 5) + struct.pack("<f", 1))
    data = _model_with_tensor(_key(2, 0) + _varint(1) + _ld(8, b"t") + _ld(9, b"\0" * 4),
                              extra_graph=vi)
    model = assert_same_load(data)
    assert model.graph.inputs[1].type.kind == "sequence"
    assert model.graph.inputs[1].type.elem.shape == [5]   # dim_value after dim_param wins
    # AttributeProto.type 99 is unknown: both readers leave it unset, so the loader refuses it
    graph = _ld(1, _ld(1, b"x") + _ld(2, b"y") + _ld(4, b"Elu") + attr)
    with_attr = _ld(7, graph) + _ld(8, _key(2, 0) + _varint(17))
    via_onnx, via_wire = both_ways(with_attr)
    assert via_onnx == via_wire and "unknown type 0" in via_onnx[1]


def test_deep_but_allowed_nesting_matches_and_deeper_is_refused() -> None:
    def nested(levels: int) -> bytes:
        t = _ld(1, _key(1, 0) + _varint(1))            # TypeProto{tensor_type{elem_type: 1}}
        for _ in range(levels):
            t = _ld(4, _ld(1, t))                      # TypeProto{sequence_type{elem_type: t}}
        return _model_with_tensor(_key(2, 0) + _varint(1) + _ld(8, b"t") + _ld(9, b"\0" * 4),
                                  extra_graph=_ld(11, _ld(1, b"deep") + _ld(2, t)))
    model = assert_same_load(nested(20))
    assert model.graph.inputs[1].type.elem.elem.kind == "sequence"
    with pytest.raises(InvalidProtobuf, match="nest deeper than %d" % onnx_wire.MAX_DEPTH):
        onnx_wire.parse_model(nested(onnx_wire.MAX_DEPTH))
    with pytest.raises(InvalidProtobuf):
        onnx_wire.parse_model(nested(5000))            # no RecursionError


# ------------------------------------------------------------------------- hostile and corrupt

HOSTILE = {
    "graph length 2**60": _ld(8, b"") + _key(7, 2) + _varint(2 ** 60) + b"\0" * 16,
    "node length 2**60": _key(7, 2) + _varint(20) + _key(1, 2) + _varint(2 ** 60) + b"\0" * 16,
    "raw_data length 2**60": _ld(7, _key(5, 2) + _varint(30) + _key(9, 2) + _varint(2 ** 60)
                                 + b"\0" * 20),
    "packed floats 2**60": _ld(7, _ld(1, _key(5, 2) + _varint(12) + _key(7, 2) + _varint(2 ** 60)
                                      + b"\0" * 6)),
    "string 2**60": _key(2, 2) + _varint(2 ** 60) + b"abc",
    "length 2**64-1": _key(2, 2) + b"\xff" * 9 + b"\x01" + b"abc",
    "varint of 11 bytes": _key(1, 0) + b"\xff" * 10 + b"\x01",
    "cut varint": _key(1, 0) + b"\xff\xff",
    "cut fixed32": _ld(7, _ld(1, _ld(5, _key(2, 5) + b"\0\0"))),
    "wire type 7": _key(1, 7) + b"\0",
    "field number 0": b"\x00\x00",
    "stray end group": _key(3, 4),
    "unclosed group": _key(99, 3) + _key(1, 0) + b"\x01",
    "mismatched group": _key(99, 3) + _key(98, 4),
    "packed floats not a multiple of 4": _ld(7, _ld(5, _ld(4, b"\0" * 70))),
    "packed varint cut": _ld(7, _ld(5, _ld(7, b"\x01" * 80 + b"\x80"))),
    "packed varint of 11 bytes": _ld(7, _ld(5, _ld(7, b"\x01" * 70 + b"\xff" * 10 + b"\x01"))),
    "not UTF-8 name": _ld(7, _ld(2, b"\xff\xfe")),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bytes_are_refused_without_allocating(name: str) -> None:
    data = HOSTILE[name]
    tracemalloc.start()
    try:
        with pytest.raises(InvalidProtobuf, match="not a valid ONNX protobuf") as info:
            onnx_wire.parse_model(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak
    assert "at byte" in str(info.value)
    with pytest.raises(InvalidProtobuf):
        onnx_loader.load_model(data)
    if "2**60" in name:
        assert "length of %d bytes" % 2 ** 60 in str(info.value)


def _fuzz_seed() -> bytes:
    m = attributes()
    m.graph.node.extend(control_flow().graph.node)
    m.graph.initializer.extend(tensors().graph.initializer[:12])
    m.functions.extend(functions().functions)
    return m.SerializeToString()


def _outcome(data: bytes) -> str:
    """'ok' or the OnnxEdgeError's class name; anything else fails the test with the bytes."""
    try:
        onnx_wire.parse_model(data)
    except InvalidProtobuf:
        pass
    except Exception as e:   # noqa: BLE001 (the point is that nothing else escapes)
        raise AssertionError("parse_model raised %r on %r" % (e, data)) from e
    try:
        onnx_loader.load_model(data)
    except OnnxEdgeError as e:
        return type(e).__name__
    except Exception as e:   # noqa: BLE001
        raise AssertionError("load_model raised %r on %r" % (e, data)) from e
    return "ok"


def test_every_truncation_is_a_model_or_an_onnxedge_error() -> None:
    data = _fuzz_seed()
    assert 1000 < len(data) < 6000
    outcomes = {}   # type: dict
    for n in range(len(data)):
        kind = _outcome(data[:n])
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert outcomes.get("InvalidProtobuf", 0) > len(data) // 2, outcomes


def test_seeded_byte_flips_are_models_or_onnxedge_errors() -> None:
    data = _fuzz_seed()
    rng = random.Random(0)
    interesting = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12]
    outcomes = {}   # type: dict
    for _ in range(1500):
        mutant = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(mutant))
            mutant[i] = rng.choice(interesting) if rng.random() < 0.5 else rng.randrange(256)
        kind = _outcome(bytes(mutant))
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert outcomes.get("ok", 0) > 0 and outcomes.get("InvalidProtobuf", 0) > 0, outcomes


# ------------------------------------------------------------------ without the onnx package

def test_onnx_opens_without_onnx_or_protobuf(tmp_path: Any) -> None:
    path = str(tmp_path / "m.onnx")
    with open(path, "wb") as f:
        f.write(control_flow().SerializeToString())
    feeds = {"n": np.array(2, np.int64), "x": np.array([1.0, -2.0], np.float32),
             "seq": np.arange(6, dtype=np.float32).reshape(3, 2)}
    np.savez(str(tmp_path / "feeds.npz"), **feeds)
    code = textwrap.dedent("""
        import sys
        for name in ("onnx", "google", "google.protobuf"):
            sys.modules[name] = None          # import onnx / protobuf now fails
        import numpy as np
        import onnxedge
        from onnxedge import model_io
        path, out = sys.argv[1], sys.argv[2]
        feeds = dict(np.load(sys.argv[3]))
        with open(path, "rb") as f:
            data = f.read()
        model_io.load(data)
        ys = onnxedge.InferenceSession(data).run(None, feeds)
        assert onnxedge.InferenceSession(path).run(None, feeds)[0].tolist() == ys[0].tolist()
        np.savez(out, *ys)
        print("opened without onnx")
    """)
    out = str(tmp_path / "out.npz")
    proc = subprocess.run([sys.executable, "-c", code, path, out, str(tmp_path / "feeds.npz")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "opened without onnx" in proc.stdout
    want = onnxedge.InferenceSession(onnx_loader.model_from_proto(control_flow())).run(None, feeds)
    got = np.load(out)
    for i, w in enumerate(want):
        np.testing.assert_array_equal(got["arr_%d" % i], w)


# -------------------------------------------------------------------------- the node suite

def _node_cases() -> List[Any]:
    import cases
    root = cases.cache_root()
    if not cases.is_complete(root):
        pytest.skip("no ONNX node-case cache (build it with: %s)" % cases.GENERATE_COMMAND)
    return cases.load_manifest(root)


def test_node_suite_models_give_the_same_ir() -> None:
    infos = _node_cases()
    compared = 0
    for info in infos:
        with open(os.path.join(info.path, "model.onnx"), "rb") as f:
            data = f.read()
        via_onnx, via_wire = both_ways(data)
        if isinstance(via_onnx, tuple):
            assert via_onnx == via_wire, info.name
            continue
        try:
            assert_same_ir(via_onnx, via_wire)
        except AssertionError as e:
            raise AssertionError("%s: %s" % (info.name, e)) from None
        compared += 1
    assert compared > 0.95 * len(infos)


def _value_class(type_proto: Any) -> Any:
    return {"sequence_type": (onnx.SequenceProto, onnx_wire.SequenceProto),
            "optional_type": (onnx.OptionalProto, onnx_wire.OptionalProto),
            "map_type": (onnx.MapProto, onnx_wire.MapProto)}.get(
        type_proto.WhichOneof("value"), (onnx.TensorProto, onnx_wire.TensorProto))


def test_node_suite_data_and_outputs() -> None:
    """Test-data values (.pb: tensors, sequences, optionals, maps) read alike; a sample of cases
    run on both IRs gives identical outputs."""
    infos = _node_cases()
    ran = 0
    for k, info in enumerate(infos):
        with open(os.path.join(info.path, "model.onnx"), "rb") as f:
            data = f.read()
        proto = onnx.ModelProto.FromString(data)
        kinds = {v.type.WhichOneof("value") for v in list(proto.graph.input) + list(proto.graph.output)}
        if kinds == {"tensor_type"} and k % 16:
            continue
        ds = os.path.join(info.path, "test_data_set_0")
        inits = {t.name for t in proto.graph.initializer}
        inputs = [v for v in proto.graph.input if v.name not in inits]
        feeds = {}
        for prefix, values in (("input", inputs), ("output", list(proto.graph.output))):
            for i, vi in enumerate(values):
                pb = os.path.join(ds, "%s_%d.pb" % (prefix, i))
                if not os.path.isfile(pb):
                    continue
                with open(pb, "rb") as f:
                    raw = f.read()
                onnx_cls, wire_cls = _value_class(vi.type)
                got = []
                for read in (lambda: onnx_cls.FromString(raw), lambda: onnx_wire.parse(raw, wire_cls, pb)):
                    try:
                        got.append(onnx_loader.value_to_python(read()))
                    except OnnxEdgeError as e:   # float8 without ml_dtypes: refused alike
                        got.append((type(e), str(e)))
                assert_same_ir(got[0], got[1], "%s %s" % (info.name, pb))
                if prefix == "input" and not isinstance(got[1], tuple):
                    feeds[vi.name] = got[1]
        if k % 16 or any(s in info.op_type for s in ("Random", "Bernoulli", "Multinomial")):
            continue
        via_onnx, via_wire = both_ways(data)
        if isinstance(via_onnx, tuple) or len(feeds) != len(inputs):
            continue
        try:
            assert_same_outputs(via_onnx, via_wire, feeds)
        except OnnxEdgeError:
            continue   # an op onnxedge does not run: the same on both IRs
        ran += 1
    assert ran > 60, ran


# ------------------------------------------------------------------ schema against onnx's own

_KIND_TYPES = {"_I64": "TYPE_INT64", "_I32": "TYPE_INT32", "_U64": "TYPE_UINT64",
               "_ENUM": "TYPE_ENUM", "_F32": "TYPE_FLOAT", "_F64": "TYPE_DOUBLE",
               "_STR": "TYPE_STRING", "_BYTES": "TYPE_BYTES", "_VIEW": "TYPE_BYTES",
               "_MSG": "TYPE_MESSAGE"}
SKIPPED = {"ModelProto": {"training_info", "configuration"},
           "GraphProto": {"quantization_annotation", "metadata_props"},
           "NodeProto": {"metadata_props", "device_configurations"},
           "TensorProto": {"segment", "metadata_props"}, "ValueInfoProto": {"metadata_props"},
           "FunctionProto": {"metadata_props"}}


def _wire_classes() -> List[Any]:
    out = []
    for name in onnx_wire.__all__:
        cls = getattr(onnx_wire, name)
        if isinstance(cls, type) and issubclass(cls, onnx_wire.Message) and cls._FIELDS:
            out.append((name, cls))
            out.extend(("%s.%s" % (name, n), c) for n, c in vars(cls).items()
                       if isinstance(c, type) and issubclass(c, onnx_wire.Message))
    return out


@pytest.mark.parametrize("name,cls", _wire_classes(), ids=[n for n, _ in _wire_classes()])
def test_schema_matches_the_onnx_package(name: str, cls: Any) -> None:
    from google.protobuf.descriptor import FieldDescriptor
    onnx_cls = onnx
    for part in name.split("."):
        onnx_cls = getattr(onnx_cls, part)
    kinds = {getattr(onnx_wire, k): getattr(FieldDescriptor, v) for k, v in _KIND_TYPES.items()}
    fields = {f.number: f for f in onnx_cls.DESCRIPTOR.fields}
    for number, spec in cls._FIELDS.items():
        f = fields.get(number)
        if f is None:
            continue   # a field newer than this onnx (e.g. FunctionProto.overload in 1.14)
        repeated = f.is_repeated if hasattr(f, "is_repeated") else \
            f.label == FieldDescriptor.LABEL_REPEATED
        assert (spec.name, spec.repeated, kinds[spec.kind]) == (f.name, repeated, f.type), number
        if spec.kind == onnx_wire._MSG:
            assert spec.sub.__name__ == f.message_type.name, number
        oneof = f.containing_oneof.name if f.containing_oneof else None
        assert oneof == next((g for g, m in cls._ONEOFS.items() if spec.name in m), None)
    unread = {f.name for n, f in fields.items() if n not in cls._FIELDS}
    assert unread <= SKIPPED.get(name, set()), unread
