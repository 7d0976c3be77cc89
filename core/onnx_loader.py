"""Load `.onnx` models (ModelProto) into the IR. The only module of the core that imports `onnx`.

Also converts TensorProto / SequenceProto / OptionalProto / MapProto values to numpy and Python
values, and reads external tensor data, which must stay inside the model's folder.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import checker, dtypes, ir
from .errors import InvalidGraph, InvalidProtobuf, NoSuchFile, NotImplemented
from .tensor_data import MAX_SPARSE_DENSE_BYTES, check_sparse, densify, unpack_bits

_PACKED_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}   # uint4, int4, float4e2m1, uint2, int2
_SIGNED_PACKED = {22, 26}
_BITS_IN_INT32_DATA = {10: np.uint16, 16: np.uint16, 17: np.uint8, 18: np.uint8, 19: np.uint8,
                       20: np.uint8, 24: np.uint8}


def onnx_package() -> Any:
    """The `onnx` package; NotImplemented with the install hint when it is missing."""
    try:
        import onnx
    except ImportError:
        raise NotImplemented("loading .onnx files needs the 'onnx' package: pip install onnx "
                             "(or convert the model to .oxe, which needs nothing extra)") from None
    return onnx


# ----------------------------------------------------------------------------------- tensors

READ_FACTOR = 2    # distinct external ranges read from a file: at most this many times its size
COPY_FACTOR = 8    # copies of external data (unpacked 4-/2-bit values): this many times the files


class ExternalData:
    """The external tensor data of one model load, read within budgets.

    Each (file, offset, length) range is read once and shared, read-only, by every tensor that
    names it; a tensor's range must have exactly the bytes its dims need, checked before it is
    read. The distinct ranges read from one file may not add up to more than READ_FACTOR x its
    size (ranges that overlap), and copies made from them (unpacked 4-/2-bit values, byte swaps)
    not to more than COPY_FACTOR x the size of the files read, so a small model whose tensors
    all point at one range costs the range once, not once per tensor. It also keeps what is left
    of MAX_SPARSE_DENSE_BYTES for the load's sparse initializers made dense (`dense_left`).
    """

    def __init__(self, base_dir: Optional[str]) -> None:
        self.base_dir = base_dir
        self.ranges: Dict[Tuple[str, int, int], np.ndarray] = {}
        self.read: Dict[str, int] = {}     # path -> bytes of distinct ranges read from it
        self.copy_left = 1 << 20           # grows by COPY_FACTOR x each file's size
        self.dense_left = MAX_SPARSE_DENSE_BYTES

    def _path(self, t: Any, location: str) -> str:
        if self.base_dir is None:
            raise InvalidGraph("tensor %r stores its data in external file %r, but the model was "
                               "loaded from bytes: load it from its path instead"
                               % (t.name, location))
        if not location or os.path.isabs(location) or location.startswith(("/", "\\")) or \
                ".." in location.replace("\\", "/").split("/"):
            raise InvalidGraph("tensor %r: external data location %r must be a relative path "
                               "inside the model's folder" % (t.name, location))
        root = os.path.realpath(self.base_dir)
        path = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([root, path]) != root:
            raise InvalidGraph("tensor %r: external data %r resolves to %s, outside the model's "
                               "folder %s (links out of the folder are refused)"
                               % (t.name, location, path, root))
        if not os.path.isfile(path):
            raise NoSuchFile("tensor %r: external data file %s does not exist" % (t.name, path))
        return path

    def bytes_of(self, t: Any, need: int, layout: str) -> np.ndarray:
        """The `need` bytes of tensor `t`'s external range as a read-only uint8 array (shared by
        every tensor naming the same range); `layout` (e.g. "shape [2, 3] of float") is for
        the message when the range's length is not `need`."""
        info = {e.key: e.value for e in t.external_data}
        path = self._path(t, info.get("location", ""))
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else -1
        except ValueError:
            raise InvalidGraph("tensor %r: external data offset/length are not integers: %r"
                               % (t.name, info)) from None
        size = os.path.getsize(path)
        if offset < 0 or offset > size or (length >= 0 and offset + length > size):
            raise InvalidGraph("tensor %r: external data range offset=%d length=%d lies outside "
                               "%s (%d bytes)" % (t.name, offset, length, path, size))
        if length < 0:
            length = size - offset
        if length != need:
            raise InvalidGraph("tensor %r: external data of %d bytes (offset %d in %s), %s needs "
                               "%d" % (t.name, length, offset, path, layout, need))
        key = (path, offset, length)
        out = self.ranges.get(key)
        if out is not None:
            return out
        if path not in self.read:
            self.read[path] = 0
            self.copy_left += COPY_FACTOR * size
        if self.read[path] + length > READ_FACTOR * size:
            raise InvalidGraph("tensor %r: its external data range (offset %d, %d bytes) overlaps "
                               "others: the ranges read from %s add up to more than %d times its "
                               "%d bytes" % (t.name, offset, length, path, READ_FACTOR, size))
        self.read[path] += length
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        if len(data) != length:
            raise InvalidGraph("tensor %r: external data file %s ended after %d of %d bytes"
                               % (t.name, path, len(data), length))
        out = np.frombuffer(data, dtype=np.uint8)   # read-only: bytes back it
        self.ranges[key] = out
        return out

    def charge_copy(self, t: Any, nbytes: int) -> None:
        """Count a copy of `nbytes` made from external data against the copy budget."""
        self.copy_left -= nbytes
        if self.copy_left < 0:
            raise InvalidGraph("tensor %r: a %d-byte copy of its external data goes beyond %d "
                               "times the size of the external files (tensors sharing one range?)"
                               % (t.name, nbytes, COPY_FACTOR))


ExternalSource = Union[None, str, ExternalData]   # the model's folder, or one load's ExternalData


def _external(base_dir: ExternalSource) -> ExternalData:
    """`base_dir` as the ExternalData of one load (a new one for a folder or None)."""
    return base_dir if isinstance(base_dir, ExternalData) else ExternalData(base_dir)


def tensor_to_array(t: Any, base_dir: ExternalSource = None) -> np.ndarray:
    """A numpy array from a TensorProto (raw, typed fields or external data).

    `base_dir` is the model's folder, or the ExternalData of the load this tensor belongs to.
    Arrays of external data are read-only (tensors naming the same range share it).
    """
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise InvalidGraph("tensor %r has a negative dimension %s" % (t.name, dims))
    count = 1
    for d in dims:
        count *= d
    code = int(t.data_type)
    if code == 0:
        raise InvalidGraph("tensor %r has no data type" % t.name)
    if code == dtypes.STRING:
        vals = [s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else s
                for s in t.string_data]
        if len(vals) != count:
            raise InvalidGraph("string tensor %r holds %d values, its shape %s needs %d"
                               % (t.name, len(vals), dims, count))
        arr = np.empty(count, dtype=object)
        arr[:] = vals
        return arr.reshape(dims)
    target = dtypes.to_numpy(code)
    is_external = t.data_location == 1 if hasattr(t, "data_location") else False
    if is_external:
        return _external_array(t, _external(base_dir), code, target, dims, count)
    raw = t.raw_data if t.HasField("raw_data") else None
    bits = _PACKED_BITS.get(code)
    if bits is not None:
        if raw is not None:
            packed = np.frombuffer(raw, dtype=np.uint8)
        else:
            packed = np.asarray(t.int32_data, dtype=np.int64).astype(np.uint8)
        need = (count * bits + 7) // 8
        if packed.size < need:
            raise InvalidGraph("tensor %r: %d bytes of packed %d-bit data, shape %s needs %d"
                               % (t.name, packed.size, bits, dims, need))
        vals = unpack_bits(packed, bits, count, code in _SIGNED_PACKED)
        return vals.view(target).reshape(dims) if vals.dtype.itemsize == target.itemsize \
            else vals.astype(target).reshape(dims)
    if raw is not None:
        need = count * target.itemsize
        if len(raw) != need:
            raise InvalidGraph("tensor %r: raw data has %d bytes, shape %s of %s needs %d"
                               % (t.name, len(raw), dims, dtypes.lookup(code).name, need))
        arr = np.frombuffer(raw, dtype=target.newbyteorder("<") if target.itemsize > 1 else target)
        if sys.byteorder != "little" and target.itemsize > 1:
            arr = arr.astype(target)
        return arr.reshape(dims).copy()
    arr = _typed_field(t, code, target)
    if arr.size != count:
        if arr.size == 0 and count == 0:
            return np.zeros(dims, dtype=target)
        raise InvalidGraph("tensor %r holds %d values, its shape %s needs %d"
                           % (t.name, arr.size, dims, count))
    return arr.reshape(dims)


def _external_array(t: Any, ext: ExternalData, code: int, target: np.dtype, dims: List[int],
                    count: int) -> np.ndarray:
    """A read-only array of an external tensor (a view of its range unless it must be unpacked)."""
    bits = _PACKED_BITS.get(code)
    need = (count * bits + 7) // 8 if bits else count * target.itemsize
    layout = "shape %s of %s" % (dims, dtypes.lookup(code).name)
    raw = ext.bytes_of(t, need, layout)
    if bits:
        ext.charge_copy(t, count * target.itemsize)
        vals = unpack_bits(raw, bits, count, code in _SIGNED_PACKED)
        arr = vals.view(target) if vals.dtype.itemsize == target.itemsize else vals.astype(target)
    elif sys.byteorder != "little" and target.itemsize > 1:
        ext.charge_copy(t, need)
        arr = raw.view(target.newbyteorder("<")).astype(target)
    else:
        arr = raw.view(target)
    arr = arr.reshape(dims)
    arr.flags.writeable = False
    return arr


def _typed_field(t: Any, code: int, target: np.dtype) -> np.ndarray:
    if code == dtypes.FLOAT:
        return np.asarray(t.float_data, dtype=np.float32)
    if code == dtypes.DOUBLE:
        return np.asarray(t.double_data, dtype=np.float64)
    if code in (dtypes.INT64,):
        return np.asarray(t.int64_data, dtype=np.int64)
    if code in (dtypes.UINT32, dtypes.UINT64):
        return np.asarray(t.uint64_data, dtype=np.uint64).astype(target)
    if code == dtypes.COMPLEX64:
        return np.asarray(t.float_data, dtype=np.float32).view(np.complex64)
    if code == dtypes.COMPLEX128:
        return np.asarray(t.double_data, dtype=np.float64).view(np.complex128)
    if code in _BITS_IN_INT32_DATA:
        bits_type = _BITS_IN_INT32_DATA[code]
        return np.asarray(t.int32_data, dtype=np.int64).astype(bits_type).view(target)
    # int8/16/32, uint8/16, bool live in int32_data
    return np.asarray(t.int32_data, dtype=np.int64).astype(target)


def sparse_to_ir(s: Any, base_dir: ExternalSource = None) -> ir.SparseTensor:
    """An IR SparseTensor from a SparseTensorProto (checked with `check_sparse`)."""
    base_dir = _external(base_dir)
    out = ir.SparseTensor(tensor_to_array(s.values, base_dir), tensor_to_array(s.indices, base_dir),
                          [int(d) for d in s.dims])
    check_sparse(out, "sparse tensor %r" % s.values.name)
    return out


def value_to_python(proto: Any, base_dir: ExternalSource = None) -> Any:
    """A numpy array, list (sequence), dict (map) or None (empty optional) from a value proto."""
    base_dir = _external(base_dir)
    kind = type(proto).__name__
    if kind == "TensorProto":
        return tensor_to_array(proto, base_dir)
    if kind == "SequenceProto":
        et = proto.elem_type
        if et == 1:
            return [tensor_to_array(x, base_dir) for x in proto.tensor_values]
        if et == 2:
            return [sparse_to_ir(x, base_dir) for x in proto.sparse_tensor_values]
        if et == 3:
            return [value_to_python(x, base_dir) for x in proto.sequence_values]
        if et == 4:
            return [value_to_python(x, base_dir) for x in proto.map_values]
        if et == 5:
            return [value_to_python(x, base_dir) for x in proto.optional_values]
        return []
    if kind == "OptionalProto":
        et = proto.elem_type
        if et == 1 and proto.HasField("tensor_value"):
            return tensor_to_array(proto.tensor_value, base_dir)
        if et == 2 and proto.HasField("sparse_tensor_value"):
            return sparse_to_ir(proto.sparse_tensor_value, base_dir)
        if et == 3 and proto.HasField("sequence_value"):
            return value_to_python(proto.sequence_value, base_dir)
        if et == 4 and proto.HasField("map_value"):
            return value_to_python(proto.map_value, base_dir)
        if et == 5 and proto.HasField("optional_value"):
            return value_to_python(proto.optional_value, base_dir)
        return None
    if kind == "MapProto":
        keys = list(proto.keys) if proto.key_type != dtypes.STRING else \
            [k.decode("utf-8") for k in proto.string_keys]
        vals = value_to_python(proto.values, base_dir)
        return dict(zip(keys, vals))
    raise InvalidGraph("cannot convert a %s to a value" % kind)


# ------------------------------------------------------------------------------------ types

def type_to_ir(tp: Any) -> Optional[ir.TypeInfo]:
    """An IR TypeInfo from a TypeProto (None when the type is not set)."""
    which = tp.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, which)
        shape = None
        if tt.HasField("shape"):
            shape = []
            for d in tt.shape.dim:
                w = d.WhichOneof("value")
                shape.append(int(d.dim_value) if w == "dim_value"
                             else (d.dim_param if w == "dim_param" else None))
        kind = "tensor" if which == "tensor_type" else "sparse_tensor"
        return ir.TypeInfo(kind, int(tt.elem_type), shape)
    if which == "sequence_type":
        return ir.TypeInfo("sequence", elem=type_to_ir(tp.sequence_type.elem_type))
    if which == "optional_type":
        return ir.TypeInfo("optional", elem=type_to_ir(tp.optional_type.elem_type))
    if which == "map_type":
        return ir.TypeInfo("map", int(tp.map_type.key_type), elem=type_to_ir(tp.map_type.value_type))
    return None


def _value_info(vi: Any) -> ir.ValueInfo:
    return ir.ValueInfo(vi.name, type_to_ir(vi.type) if vi.HasField("type") else None, vi.doc_string)


# ------------------------------------------------------------------------------- attributes

def attribute_value(a: Any, base_dir: ExternalSource) -> Any:
    """A plain Python value from an AttributeProto."""
    base_dir = _external(base_dir)
    if a.ref_attr_name:
        return ir.AttrRef(a.ref_attr_name)
    t = a.type
    if t == 1:
        return float(a.f)
    if t == 2:
        return int(a.i)
    if t == 3:
        return a.s.decode("utf-8", errors="surrogateescape")
    if t == 4:
        return tensor_to_array(a.t, base_dir)
    if t == 5:
        return graph_to_ir(a.g, base_dir)
    if t == 6:
        return [float(x) for x in a.floats]
    if t == 7:
        return [int(x) for x in a.ints]
    if t == 8:
        return [s.decode("utf-8", errors="surrogateescape") for s in a.strings]
    if t == 9:
        return [tensor_to_array(x, base_dir) for x in a.tensors]
    if t == 10:
        return [graph_to_ir(g, base_dir) for g in a.graphs]
    if t == 11:
        return sparse_to_ir(a.sparse_tensor, base_dir)
    if t == 12:
        return [sparse_to_ir(x, base_dir) for x in a.sparse_tensors]
    if t == 13:
        return type_to_ir(a.tp)
    if t == 14:
        return [type_to_ir(x) for x in a.type_protos]
    raise InvalidGraph("attribute %r has unknown type %d" % (a.name, t))


def _node(n: Any, base_dir: ExternalSource) -> ir.Node:
    attrs = {}
    for a in n.attribute:
        try:
            attrs[a.name] = attribute_value(a, base_dir)
        except (InvalidGraph, NotImplemented) as e:
            raise type(e)("%s node %r, attribute %r: %s" % (n.op_type, n.name, a.name, e)) from None
    return ir.Node(n.op_type, list(n.input), list(n.output), attrs, n.domain, n.name, n.doc_string)


def graph_to_ir(g: Any, base_dir: ExternalSource = None) -> ir.Graph:
    """An IR Graph from a GraphProto (subgraphs included)."""
    base_dir = _external(base_dir)
    inits: Dict[str, Any] = {}
    for t in g.initializer:
        inits[t.name] = tensor_to_array(t, base_dir)
    for s in g.sparse_initializer:
        inits[s.values.name], base_dir.dense_left = densify(
            sparse_to_ir(s, base_dir), base_dir.dense_left,
            "sparse initializer %r of graph %r" % (s.values.name, g.name))
    return ir.Graph(
        name=g.name,
        nodes=[_node(n, base_dir) for n in g.node],
        inputs=[_value_info(v) for v in g.input],
        outputs=[_value_info(v) for v in g.output],
        initializers=inits,
        value_info={v.name: _value_info(v) for v in g.value_info},
        doc_string=g.doc_string,
    )


def _function(f: Any, base_dir: ExternalSource) -> ir.Function:
    defaults = {a.name: attribute_value(a, base_dir) for a in f.attribute_proto}
    names = list(f.attribute) + [a.name for a in f.attribute_proto]
    return ir.Function(f.name, f.domain, list(f.input), list(f.output), names, defaults,
                       [_node(n, base_dir) for n in f.node],
                       {o.domain: int(o.version) for o in f.opset_import},
                       getattr(f, "overload", ""))


def model_from_proto(m: Any, base_dir: ExternalSource = None) -> ir.Model:
    """An IR Model from a ModelProto; `base_dir` is where external data lives."""
    if not m.HasField("graph"):
        raise InvalidGraph("the model has no graph (empty or not an ONNX model)")
    base_dir = _external(base_dir)
    return checker.check_model_identifiers(ir.Model(   # op types/domains: plain identifiers
        graph=graph_to_ir(m.graph, base_dir),
        opset_imports={o.domain: int(o.version) for o in m.opset_import} or {"": 1},
        ir_version=int(m.ir_version),
        producer_name=m.producer_name,
        producer_version=m.producer_version,
        domain=m.domain,
        model_version=int(m.model_version),
        doc_string=m.doc_string,
        metadata_props={p.key: p.value for p in m.metadata_props},
        functions=[_function(f, base_dir) for f in m.functions],
    ))


def parse_model_bytes(data: bytes) -> Any:
    """A ModelProto from bytes; InvalidProtobuf when they are not one.

    Decoded by onnxedge's own bounded wire reader (`onnx_wire`), which needs neither `onnx` nor
    `protobuf` (so `.onnx` opens in the page) and gives the IR the `onnx` package's
    ModelProto gives, faster on large models (raw tensor data is not copied while parsing).
    """
    from . import onnx_wire
    return onnx_wire.parse_model(data)


def load_model(source: Union[str, bytes, "os.PathLike[str]"]) -> ir.Model:
    """Load an `.onnx` model from a path or bytes into the IR."""
    base_dir = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise NoSuchFile("model file %s does not exist" % path)
        base_dir = os.path.dirname(os.path.abspath(path))
        with open(path, "rb") as f:
            data = f.read()
    proto = parse_model_bytes(data)
    try:
        return model_from_proto(proto, base_dir)
    except (InvalidGraph, NotImplemented, NoSuchFile):
        raise
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError, MemoryError) as e:
        raise InvalidGraph("malformed model: %s: %s" % (type(e).__name__, e)) from None


def is_onnx_available() -> bool:
    """True when the `onnx` package can be imported."""
    try:
        onnx_package()
    except NotImplemented:
        return False
    return True
