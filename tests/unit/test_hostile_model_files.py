"""Hostile model files cost memory and time linear in their size (issue 14, "Memory and time
budgets on model files"): `.oxe` tables sharing one vector or string, `.onnx` initializers sharing
one external data range, and subgraphs reading many undefined outer names.

Every hostile file is built here and loaded in a child process under an address-space limit
(RLIMIT_AS) and a generous timeout, so a regression shows as a MemoryError or a timeout, not as
a machine that swaps; the child prints what happened as JSON.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from typing import Any, Callable, Dict, List

import flatbuffers
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import format as oxe
from onnxedge import ir, onnx_loader
from onnxedge.format import writer as oxe_writer
from onnxedge.format.fb import Attribute as _A
from onnxedge.format.fb import Graph as _G
from onnxedge.format.fb import Model as _M
from onnxedge.format.fb import Node as _N
from onnxedge.format.fb import Tensor as _T
from onnxedge.format.fb import TypeInfo as _TI
from onnxedge.format.fb import ValueInfo as _V
from onnxedge.format.layout import FILE_IDENTIFIER, FORMAT_MAJOR, align

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="RLIMIT_AS limits are Linux-specific")

MEMORY_LIMIT = 1536 << 20   # the child's address space: far below what the attacks used to take
TIMEOUT = 20                # seconds; the child takes a second or two on a fixed build

_CHILD = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (%(limit)d, %(limit)d))
    import numpy as np
    import onnxedge
    from onnxedge import model_io
    out = {}
    try:
        if %(session)r:
            onnxedge.InferenceSession(sys.argv[1])
        model = model_io.load(sys.argv[1])
        inits = model.graph.initializers
        out = {"loaded": True, "initializers": len(inits),
               "sums": sorted({float(np.asarray(v, dtype=np.float64).sum()) for v in inits.values()})}
    except onnxedge.OnnxEdgeError as e:
        out = {"error": type(e).__name__, "message": str(e)}
    # VmHWM is this process's own peak (ru_maxrss keeps the parent's across exec on Linux:
    # under a big pytest process it would report the parent's size)
    try:
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        out["maxrss_kb"] = int(hwm.split()[1])
    except (OSError, IndexError):
        out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(out))
""")


def load_in_child(path: str, session: bool = False, limit: int = MEMORY_LIMIT) -> Dict[str, Any]:
    """Load `path` (or make an InferenceSession of it) in a child process limited to `limit`
    bytes of address space."""
    code = _CHILD % {"limit": limit, "session": session}
    proc = subprocess.run([sys.executable, "-c", code, path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def assert_refused(result: Dict[str, Any], pattern: str) -> None:
    """The child raised InvalidGraph whose message matches `pattern` (not a MemoryError)."""
    assert result.get("error") == "InvalidGraph", result
    assert "MemoryError" not in result["message"], result["message"][:500]
    assert re.search(pattern, result["message"]), result["message"][:500]
    assert result["maxrss_kb"] < 512 * 1024, result


# ------------------------------------------------------------------------- raw .oxe building

def oxe_file(path: str, build_graph: Callable[[flatbuffers.Builder], int], data: bytes = b"") -> str:
    """Write an `.oxe` file whose graph table `build_graph(builder)` makes, with `data` as the
    data region; the path."""
    b = flatbuffers.Builder(1 << 20)
    graph = build_graph(b)
    _M.Start(b)
    _M.AddFormatMajor(b, FORMAT_MAJOR)
    _M.AddGraph(b, graph)
    _M.AddDataLength(b, len(data))
    b.Finish(_M.End(b), file_identifier=FILE_IDENTIFIER)
    head = bytes(b.Output())
    with open(path, "wb") as f:
        f.write(head + b"\0" * (align(len(head)) - len(head)) + data)
    return path


def offsets(b: flatbuffers.Builder, start: Callable[[Any, int], Any], items: List[int]) -> int:
    """A vector of table offsets (the same offset may repeat: that is the attack)."""
    start(b, len(items))
    for off in reversed(items):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def shared_attribute_graph(kind: int, count: int, refs: int) -> Callable[[Any], int]:
    """A graph of `refs` references to one node whose one attribute holds `count` INTS (kind 7)
    or FLOATS (kind 6): every reference decodes the same vector again."""
    def build(b: flatbuffers.Builder) -> int:
        dtype = np.int64 if kind == 7 else np.float64
        vec = b.CreateNumpyVector(np.arange(count, dtype=dtype))
        name = b.CreateString("axes")
        _A.Start(b)
        _A.AddName(b, name)
        _A.AddType(b, kind)
        (_A.AddInts if kind == 7 else _A.AddFloats)(b, vec)
        attr = _A.End(b)
        attrs = offsets(b, _N.StartAttributesVector, [attr])
        op = b.CreateString("Identity")
        _N.Start(b)
        _N.AddOpType(b, op)
        _N.AddAttributes(b, attrs)
        node = _N.End(b)
        nodes = offsets(b, _G.StartNodesVector, [node] * refs)
        _G.Start(b)
        _G.AddNodes(b, nodes)
        return _G.End(b)
    return build


def shared_dims_graph(count: int, refs: int) -> Callable[[Any], int]:
    """A graph of `refs` inputs, all one value info whose type has `count` dims."""
    def build(b: flatbuffers.Builder) -> int:
        dims = b.CreateNumpyVector(np.ones(count, dtype=np.int64))
        _TI.Start(b)
        _TI.AddKind(b, 1)
        _TI.AddElemType(b, 1)
        _TI.AddHasShape(b, True)
        _TI.AddDims(b, dims)
        tp = _TI.End(b)
        name = b.CreateString("x")
        _V.Start(b)
        _V.AddName(b, name)
        _V.AddType(b, tp)
        vi = _V.End(b)
        inputs = offsets(b, _G.StartInputsVector, [vi] * refs)
        _G.Start(b)
        _G.AddInputs(b, inputs)
        return _G.End(b)
    return build


def shared_string_graph(nbytes: int, refs: int) -> Callable[[Any], int]:
    """A graph of `refs` references to one node whose doc string has `nbytes` bytes."""
    def build(b: flatbuffers.Builder) -> int:
        doc = b.CreateString("d" * nbytes)
        op = b.CreateString("Identity")
        _N.Start(b)
        _N.AddOpType(b, op)
        _N.AddDocString(b, doc)
        node = _N.End(b)
        nodes = offsets(b, _G.StartNodesVector, [node] * refs)
        _G.Start(b)
        _G.AddNodes(b, nodes)
        return _G.End(b)
    return build


def shared_int4_graph(nbytes: int, refs: int) -> Callable[[Any], int]:
    """A graph of `refs` int4 initializers (distinct names) that all unpack one `nbytes` range."""
    def build(b: flatbuffers.Builder) -> int:
        dims = b.CreateNumpyVector(np.array([2 * nbytes], dtype=np.int64))
        tensors = []
        for i in range(refs):
            name = b.CreateString("w%d" % i)
            _T.Start(b)
            _T.AddName(b, name)
            _T.AddDtype(b, 22)   # int4
            _T.AddDims(b, dims)
            _T.AddLength(b, nbytes)
            tensors.append(_T.End(b))
        inits = offsets(b, _G.StartInitializersVector, tensors)
        _G.Start(b)
        _G.AddInitializers(b, inits)
        return _G.End(b)
    return build


# ---------------------------------------------------------------------------------- .oxe tests

@pytest.mark.parametrize("kind, label", [(7, "ints"), (6, "floats")])
def test_oxe_attribute_vector_shared_by_many_nodes_is_refused(tmp_path, kind, label):
    # 64 Ki numbers (512 KB) read through 30,000 node references: 2e9 numbers decoded before
    path = oxe_file(str(tmp_path / "m.oxe"), shared_attribute_graph(kind, 1 << 16, 30000))
    assert os.path.getsize(path) < 700_000
    assert_refused(load_in_child(path), r"%s of attribute 'axes' \(65536 elements\) takes more "
                                        r"than the file's size" % label)


def test_oxe_type_dims_shared_by_many_inputs_is_refused(tmp_path):
    path = oxe_file(str(tmp_path / "m.oxe"), shared_dims_graph(1 << 16, 30000))
    assert_refused(load_in_child(path), r"dims of a type info \(65536 elements\) takes more than")


def test_oxe_string_shared_by_many_nodes_is_refused(tmp_path):
    path = oxe_file(str(tmp_path / "m.oxe"), shared_string_graph(512 << 10, 30000))
    assert_refused(load_in_child(path), r"a string of 524288 bytes takes more than the file's size")


def test_oxe_packed_data_shared_by_many_initializers_is_refused(tmp_path):
    # one 1 MiB int4 range unpacked by 4,000 initializers: 8 GB of copies before
    if not hasattr(pytest.importorskip("ml_dtypes"), "int4"):
        pytest.skip("this ml_dtypes has no int4")
    nbytes = 1 << 20
    path = oxe_file(str(tmp_path / "m.oxe"), shared_int4_graph(nbytes, 4000),
                    data=bytes(range(256)) * (nbytes // 256))
    assert_refused(load_in_child(path), r"initializer 'w\d+'.* needs a 2097152-byte copy, beyond "
                                        r"8 times the size of the file")


def test_oxe_large_honest_vectors_still_load(tmp_path):
    """Budgets count what a well-formed file stores once: big attributes, shapes and strings of a
    writer-made file load."""
    ints = list(range(200_000))
    floats = [0.5] * 100_000
    shape = [1] * 20 + ["batch"] * 5
    node = ir.Node("Identity", ["x"], ["y"], {"ints": ints, "floats": floats, "s": "t" * 300_000},
                   doc_string="d" * 100_000)
    graph = ir.Graph("g", [node], [ir.ValueInfo("x", ir.TypeInfo.tensor(1, shape))],
                     [ir.ValueInfo("y", ir.TypeInfo.tensor(1, shape))])
    path = str(tmp_path / "m.oxe")
    oxe_writer.save(ir.Model(graph, {"": 17}), path)
    back = oxe.load(path)
    attrs = back.graph.nodes[0].attributes
    assert attrs["ints"] == ints and attrs["floats"] == floats and attrs["s"] == "t" * 300_000
    assert back.graph.inputs[0].type.shape == shape


# --------------------------------------------------------------------------------- .onnx tests

def _external_model(tmp_path, entries: List[Dict[str, Any]], data: bytes) -> str:
    """A model whose initializers are float32 tensors in external file w.bin, one per entry
    (name, dims, offset, length)."""
    (tmp_path / "w.bin").write_bytes(data)
    inits = []
    for e in entries:
        t = TensorProto(name=e["name"], data_type=TensorProto.FLOAT, dims=e["dims"])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("offset", e["offset"]), ("length", e["length"])):
            if value is not None:
                item = t.external_data.add()
                item.key, item.value = key, str(value)
        inits.append(t)
    graph = helper.make_graph([], "g", [], [], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


MIB = 1 << 20
_FLOATS = np.arange(MIB // 4, dtype=np.float32)


def test_onnx_initializers_sharing_one_external_range_read_it_once(tmp_path):
    # 1,500 initializers naming one 1 MiB range: 1.5 GB of reads and copies before
    entries = [{"name": "w%d" % i, "dims": [MIB // 4], "offset": 0, "length": MIB}
               for i in range(1500)]
    path = _external_model(tmp_path, entries, _FLOATS.tobytes())
    assert os.path.getsize(path) < 150_000
    result = load_in_child(path)
    assert result.get("loaded"), result
    assert result["initializers"] == 1500
    assert result["sums"] == [float(_FLOATS.astype(np.float64).sum())]
    assert result["maxrss_kb"] < 512 * 1024, result


def test_onnx_overlapping_external_ranges_are_refused(tmp_path):
    # 1,500 distinct ranges, each 1 MiB, shifted by 64 bytes inside a 1.1 MiB file
    entries = [{"name": "w%d" % i, "dims": [MIB // 4], "offset": 64 * i, "length": MIB}
               for i in range(1500)]
    path = _external_model(tmp_path, entries, np.zeros(MIB // 4 + 1600 * 16, np.float32).tobytes())
    assert_refused(load_in_child(path), r"tensor 'w\d+': its external data range .* overlaps "
                                        r"others")


@pytest.mark.parametrize("length, pattern", [
    (MIB, r"tensor 'w': external data of 1048576 bytes \(offset 0 in .*w.bin\), shape \[4\] of "
          r"FLOAT needs 16"),
    (None, r"tensor 'w': external data of 1048576 bytes .* needs 16"),
    (8, r"tensor 'w': external data of 8 bytes .* needs 16"),
])
def test_onnx_external_length_must_match_the_dims(tmp_path, length, pattern):
    path = _external_model(tmp_path, [{"name": "w", "dims": [4], "offset": 0, "length": length}],
                           _FLOATS.tobytes())
    with pytest.raises(onnxedge.InvalidGraph, match=pattern):
        onnx_loader.load_model(path)


def test_onnx_external_data_is_shared_read_only(tmp_path):
    entries = [{"name": "a", "dims": [2, 2], "offset": 0, "length": 16},
               {"name": "b", "dims": [4], "offset": 0, "length": 16},
               {"name": "c", "dims": [4], "offset": 16, "length": None}]
    path = _external_model(tmp_path, entries, np.arange(8, dtype=np.float32).tobytes())
    inits = onnx_loader.load_model(path).graph.initializers
    np.testing.assert_array_equal(inits["a"], np.arange(4, dtype=np.float32).reshape(2, 2))
    np.testing.assert_array_equal(inits["b"], np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(inits["c"], np.arange(4, 8, dtype=np.float32))
    assert not inits["a"].flags.writeable and np.shares_memory(inits["a"], inits["b"])


# ------------------------------------------------------------------ sparse initializers made dense

@pytest.mark.parametrize("fmt", ["onnx", "oxe"])
def test_sparse_initializers_made_dense_share_one_budget(tmp_path, fmt):
    # 20 empty sparse initializers of 1 GiB dense each: 20 GiB of zeros from a tiny file before
    dims = [1 << 28]
    if fmt == "onnx":
        inits = [helper.make_sparse_tensor(
            helper.make_tensor("s%d" % i, TensorProto.FLOAT, [0], []),
            helper.make_tensor("", TensorProto.INT64, [0], []), dims) for i in range(20)]
        graph = helper.make_graph([], "g", [], [], sparse_initializer=inits)
        path = tmp_path / "m.onnx"
        path.write_bytes(helper.make_model(graph).SerializeToString())
    else:
        sparse = {"s%d" % i: ir.SparseTensor(np.zeros(0, np.float32), np.zeros(0, np.int64), dims)
                  for i in range(20)}
        path = tmp_path / "m.oxe"
        oxe_writer.save(ir.Model(ir.Graph("g", initializers=sparse), {"": 17}), str(path))
    assert os.path.getsize(str(path)) < 4096
    assert_refused(load_in_child(str(path), limit=3 << 30),
                   r"sparse initializer 's1' of graph 'g': its dense form \[268435456\] takes "
                   r"1073741824 bytes, beyond what is left \(0\)")


# ------------------------------------------------------------------------- outer references

def test_many_undefined_outer_names_are_refused_quickly(tmp_path):
    # an If whose branches read 60,000 names nothing defines: 45 s of list scans before
    names = ["v%d" % i for i in range(60000)]

    def branch(tag: str):
        return helper.make_graph([helper.make_node("Sum", names, ["o_" + tag])], tag, [],
                                 [helper.make_tensor_value_info("o_" + tag, TensorProto.FLOAT, [1])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then"), else_branch=branch("else"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "m.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    result = load_in_child(path, session=True)
    assert result.get("error") == "InvalidGraph", result
    assert "reads 'v0', which no graph input" in result["message"], result["message"][:500]


def test_outer_references_keep_first_read_order():
    inner = ir.Graph("body", [ir.Node("Add", ["b", "a"], ["t"]), ir.Node("Mul", ["t", "c", "a"], ["u"])],
                     [], [ir.ValueInfo("u")])
    outer = ir.Graph("g", [ir.Node("Identity", ["z"], ["a"]),
                           ir.Node("If", ["d"], ["y"], {"then_branch": inner, "else_branch": inner})],
                     [ir.ValueInfo("d")], [ir.ValueInfo("y")])
    assert inner.outer_references() == ["b", "a", "c"]
    assert outer.outer_references() == ["z", "b", "c"]
