"""A bounded reader of the ONNX protobuf wire format that needs neither `onnx` nor `protobuf`.

`parse_model(data)` decodes a serialized ModelProto into plain Python objects whose classes,
attribute names, `HasField` and `WhichOneof` match the `onnx` package's generated messages for
every field the `.onnx` loader reads, so `onnx_loader.model_from_proto` turns either into the
same IR. Only numpy is needed: this is what opens `.onnx` inside the page (Pyodide) and in
reduced builds.

Bounds: every length is checked against the bytes that remain before it is used (a 2**60 length
prefix is refused, nothing is allocated for it); varints are at most 10 bytes; messages nest at
most MAX_DEPTH deep (protobuf's own default); unknown fields (training info, metadata of nodes
and graphs, future fields) are skipped by wire type. A corrupt or hostile file raises
InvalidProtobuf (a kind of InvalidGraph) naming the byte offset and the field path.

`raw_data` is a zero-copy memoryview of the model bytes (the loader views it with
`np.frombuffer`); packed typed fields (`float_data`, `int64_data`, ...) decode with numpy.
"""
from __future__ import annotations

import gc
import struct
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .errors import InvalidProtobuf

__all__ = [
    "MAX_DEPTH", "Message", "parse", "parse_model", "ModelProto", "GraphProto", "NodeProto",
    "AttributeProto", "TensorProto", "SparseTensorProto", "ValueInfoProto", "TypeProto",
    "TensorShapeProto", "OperatorSetIdProto", "StringStringEntryProto", "FunctionProto",
    "SequenceProto", "MapProto", "OptionalProto",
]

MAX_DEPTH = 100          # nested messages (protobuf's default recursion limit)
MAX_VARINT_BYTES = 10
_MASK64 = (1 << 64) - 1
_SMALL_PACKED = 64       # packed fields up to this many bytes decode in Python, longer with numpy
_VARINT_CHUNK = 1 << 16  # bytes of packed varints decoded per numpy pass (bounds temporaries)

# field kinds
_I64, _I32, _U64, _ENUM, _F32, _F64, _STR, _BYTES, _VIEW, _MSG = range(10)
_WIRE_TYPE = {_I64: 0, _I32: 0, _U64: 0, _ENUM: 0, _F32: 5, _F64: 1, _STR: 2, _BYTES: 2,
              _VIEW: 2, _MSG: 2}
_NP_TYPE = {_I64: np.int64, _I32: np.int32, _U64: np.uint64, _F32: np.float32, _F64: np.float64}
_DEFAULT = {_I64: 0, _I32: 0, _U64: 0, _ENUM: 0, _F32: 0.0, _F64: 0.0, _STR: "", _BYTES: b"",
            _VIEW: b""}


class _WireError(Exception):
    """Internal: a decoding failure; `path` collects the fields it happened in, outermost first."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message, self.offset, self.path = message, offset, []   # type: str, int, List[str]


class _Field:
    """How one field decodes: attribute name, kind, repeated or not, message class, options."""

    __slots__ = ("name", "kind", "repeated", "sub", "enum", "as_array", "oneof")

    def __init__(self, name: str, kind: int, repeated: bool = False, sub: Any = None,
                 enum: Optional[Tuple[int, ...]] = None, as_array: bool = False) -> None:
        self.name, self.kind, self.repeated, self.sub = name, kind, repeated, sub
        self.enum, self.as_array = enum, as_array
        self.oneof = ()   # type: Tuple[str, ...]   # the other members of its oneof


class Message:
    """Base of the decoded messages: fields not on the wire read as their defaults."""

    _FIELDS = {}   # type: Dict[int, _Field]
    _TAGS = {}     # type: Dict[int, tuple]
    _ONEOFS = {}   # type: Dict[str, Tuple[str, ...]]

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        """True when the singular field `name` was on the wire."""
        return name in self.__dict__

    def WhichOneof(self, group: str) -> Optional[str]:  # noqa: N802 (protobuf's name)
        """The member of oneof `group` that was set last, or None."""
        for name in self._ONEOFS.get(group, ()):
            if name in self.__dict__:
                return name
        return None

    def __repr__(self) -> str:
        shown = ", ".join("%s=%s" % (k, _short(v)) for k, v in self.__dict__.items())
        return "%s(%s)" % (type(self).__name__, shown)


def _short(v: Any) -> str:
    if isinstance(v, memoryview):
        return "<%d bytes>" % v.nbytes
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


class ModelProto(Message):
    """onnx.ModelProto: ir_version, opset_import, producer/metadata, graph, functions."""


class OperatorSetIdProto(Message):
    """onnx.OperatorSetIdProto: domain and version."""


class StringStringEntryProto(Message):
    """onnx.StringStringEntryProto: key and value."""


class GraphProto(Message):
    """onnx.GraphProto: nodes, initializers (dense and sparse), inputs, outputs, value infos."""


class NodeProto(Message):
    """onnx.NodeProto: op_type, domain, inputs, outputs, attributes."""


class AttributeProto(Message):
    """onnx.AttributeProto: every attribute type (floats to type protos), ref_attr_name."""


class TensorProto(Message):
    """onnx.TensorProto: dims, data_type, raw_data (a memoryview), typed fields, external data."""


class SparseTensorProto(Message):
    """onnx.SparseTensorProto: values, indices and dense dims."""


class ValueInfoProto(Message):
    """onnx.ValueInfoProto: name, type and doc string."""


class TypeProto(Message):
    """onnx.TypeProto: the oneof `value` of tensor, sequence, map, optional, sparse, opaque."""

    class Tensor(Message):
        """onnx.TypeProto.Tensor: elem_type and shape."""

    class SparseTensor(Message):
        """onnx.TypeProto.SparseTensor: elem_type and shape."""

    class Sequence(Message):
        """onnx.TypeProto.Sequence: elem_type (a TypeProto)."""

    class Map(Message):
        """onnx.TypeProto.Map: key_type and value_type."""

    class Optional(Message):
        """onnx.TypeProto.Optional: elem_type (a TypeProto)."""

    class Opaque(Message):
        """onnx.TypeProto.Opaque: domain and name."""


class TensorShapeProto(Message):
    """onnx.TensorShapeProto: its dims."""

    class Dimension(Message):
        """onnx.TensorShapeProto.Dimension: the oneof `value` of dim_value and dim_param."""


class FunctionProto(Message):
    """onnx.FunctionProto: a model-local function."""


class SequenceProto(Message):
    """onnx.SequenceProto: a sequence value (test data)."""


class MapProto(Message):
    """onnx.MapProto: a map value (test data)."""


class OptionalProto(Message):
    """onnx.OptionalProto: an optional value (test data)."""


_ATTR_TYPES = tuple(range(15))    # AttributeProto.AttributeType: UNDEFINED .. TYPE_PROTOS
_DATA_LOCATIONS = (0, 1)          # TensorProto.DataLocation: DEFAULT, EXTERNAL


def _schema(cls: Any, fields: Dict[int, _Field], oneofs: Optional[Dict[str, Tuple[str, ...]]] = None
            ) -> None:
    """Attach the field table to `cls` and give every field its default as a class attribute."""
    cls._FIELDS = fields
    cls._TAGS = _tag_table(fields)
    cls._ONEOFS = oneofs or {}
    for group, members in cls._ONEOFS.items():
        for f in fields.values():
            if f.name in members:
                f.oneof = tuple(m for m in members if m != f.name)
    for f in fields.values():
        if f.repeated:
            setattr(cls, f.name, ())
        elif f.kind == _MSG:
            setattr(cls, f.name, f.sub.__new__(f.sub))   # an empty message, never written to
        else:
            setattr(cls, f.name, _DEFAULT[f.kind])


def _str(name: str) -> _Field:
    return _Field(name, _STR)


def _strs(name: str) -> _Field:
    return _Field(name, _STR, repeated=True)


def _msg(name: str, sub: Any) -> _Field:
    return _Field(name, _MSG, sub=sub)


def _msgs(name: str, sub: Any) -> _Field:
    return _Field(name, _MSG, repeated=True, sub=sub)


def _build_schema() -> None:
    # Field numbers and types follow onnx.proto (onnx 1.23); tests check them against `onnx`.
    T, V, G = TensorProto, ValueInfoProto, GraphProto
    _schema(ModelProto, {
        1: _Field("ir_version", _I64), 8: _msgs("opset_import", OperatorSetIdProto),
        2: _str("producer_name"), 3: _str("producer_version"), 4: _str("domain"),
        5: _Field("model_version", _I64), 6: _str("doc_string"), 7: _msg("graph", G),
        14: _msgs("metadata_props", StringStringEntryProto), 25: _msgs("functions", FunctionProto),
    })   # 20 training_info, 26 configuration: skipped
    _schema(OperatorSetIdProto, {1: _str("domain"), 2: _Field("version", _I64)})
    _schema(StringStringEntryProto, {1: _str("key"), 2: _str("value")})
    _schema(GraphProto, {
        1: _msgs("node", NodeProto), 2: _str("name"), 5: _msgs("initializer", T),
        15: _msgs("sparse_initializer", SparseTensorProto), 10: _str("doc_string"),
        11: _msgs("input", V), 12: _msgs("output", V), 13: _msgs("value_info", V),
    })   # 14 quantization_annotation, 16 metadata_props: skipped
    _schema(NodeProto, {
        1: _strs("input"), 2: _strs("output"), 3: _str("name"), 4: _str("op_type"),
        7: _str("domain"), 8: _str("overload"), 5: _msgs("attribute", AttributeProto),
        6: _str("doc_string"),
    })   # 9 metadata_props, 10 device_configurations: skipped
    _schema(AttributeProto, {
        1: _str("name"), 21: _str("ref_attr_name"), 13: _str("doc_string"),
        20: _Field("type", _ENUM, enum=_ATTR_TYPES), 2: _Field("f", _F32), 3: _Field("i", _I64),
        4: _Field("s", _BYTES), 5: _msg("t", T), 6: _msg("g", G),
        22: _msg("sparse_tensor", SparseTensorProto), 14: _msg("tp", TypeProto),
        7: _Field("floats", _F32, repeated=True), 8: _Field("ints", _I64, repeated=True),
        9: _Field("strings", _BYTES, repeated=True), 10: _msgs("tensors", T),
        11: _msgs("graphs", G), 23: _msgs("sparse_tensors", SparseTensorProto),
        15: _msgs("type_protos", TypeProto),
    })
    _schema(TensorProto, {
        1: _Field("dims", _I64, repeated=True), 2: _Field("data_type", _I32),
        4: _Field("float_data", _F32, repeated=True, as_array=True),
        5: _Field("int32_data", _I32, repeated=True, as_array=True),
        6: _Field("string_data", _BYTES, repeated=True),
        7: _Field("int64_data", _I64, repeated=True, as_array=True),
        8: _str("name"), 12: _str("doc_string"), 9: _Field("raw_data", _VIEW),
        13: _msgs("external_data", StringStringEntryProto),
        14: _Field("data_location", _ENUM, enum=_DATA_LOCATIONS),
        10: _Field("double_data", _F64, repeated=True, as_array=True),
        11: _Field("uint64_data", _U64, repeated=True, as_array=True),
    })   # 3 segment, 16 metadata_props: skipped
    _schema(SparseTensorProto, {1: _msg("values", T), 2: _msg("indices", T),
                                3: _Field("dims", _I64, repeated=True)})
    _schema(ValueInfoProto, {1: _str("name"), 2: _msg("type", TypeProto), 3: _str("doc_string")})
    _schema(TypeProto, {
        1: _msg("tensor_type", TypeProto.Tensor), 4: _msg("sequence_type", TypeProto.Sequence),
        5: _msg("map_type", TypeProto.Map), 9: _msg("optional_type", TypeProto.Optional),
        8: _msg("sparse_tensor_type", TypeProto.SparseTensor),
        7: _msg("opaque_type", TypeProto.Opaque), 6: _str("denotation"),
    }, {"value": ("tensor_type", "sequence_type", "map_type", "optional_type",
                  "sparse_tensor_type", "opaque_type")})
    for shaped in (TypeProto.Tensor, TypeProto.SparseTensor):
        _schema(shaped, {1: _Field("elem_type", _I32), 2: _msg("shape", TensorShapeProto)})
    _schema(TypeProto.Sequence, {1: _msg("elem_type", TypeProto)})
    _schema(TypeProto.Optional, {1: _msg("elem_type", TypeProto)})
    _schema(TypeProto.Map, {1: _Field("key_type", _I32), 2: _msg("value_type", TypeProto)})
    _schema(TypeProto.Opaque, {1: _str("domain"), 2: _str("name")})
    _schema(TensorShapeProto, {1: _msgs("dim", TensorShapeProto.Dimension)})
    _schema(TensorShapeProto.Dimension, {1: _Field("dim_value", _I64), 2: _str("dim_param"),
                                         3: _str("denotation")},
            {"value": ("dim_value", "dim_param")})
    _schema(FunctionProto, {
        1: _str("name"), 4: _strs("input"), 5: _strs("output"), 6: _strs("attribute"),
        11: _msgs("attribute_proto", AttributeProto), 7: _msgs("node", NodeProto),
        8: _str("doc_string"), 9: _msgs("opset_import", OperatorSetIdProto), 10: _str("domain"),
        13: _str("overload"), 12: _msgs("value_info", V),
    })   # 14 metadata_props: skipped
    _schema(SequenceProto, {
        1: _str("name"), 2: _Field("elem_type", _I32), 3: _msgs("tensor_values", T),
        4: _msgs("sparse_tensor_values", SparseTensorProto),
        5: _msgs("sequence_values", SequenceProto), 6: _msgs("map_values", MapProto),
        7: _msgs("optional_values", OptionalProto),
    })
    _schema(MapProto, {1: _str("name"), 2: _Field("key_type", _I32),
                       3: _Field("keys", _I64, repeated=True),
                       4: _Field("string_keys", _BYTES, repeated=True),
                       5: _msg("values", SequenceProto)})
    _schema(OptionalProto, {
        1: _str("name"), 2: _Field("elem_type", _I32), 3: _msg("tensor_value", T),
        4: _msg("sparse_tensor_value", SparseTensorProto), 5: _msg("sequence_value", SequenceProto),
        6: _msg("map_value", MapProto), 7: _msg("optional_value", OptionalProto),
    })


# ------------------------------------------------------------------------------ wire primitives

def _varint(buf: bytes, pos: int, end: int) -> Tuple[int, int]:
    """(value, next position) of the varint at `pos`; at most 10 bytes, all before `end`."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _WireError("a varint runs past the end of its message", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 7 * MAX_VARINT_BYTES:
            raise _WireError("a varint is longer than %d bytes" % MAX_VARINT_BYTES, start)


def _length(buf: bytes, pos: int, end: int) -> Tuple[int, int]:
    """(length, next position) of a length prefix, checked against the bytes left before `end`."""
    b = buf[pos] if pos < end else 0x80
    if b < 0x80:
        n, pos = b, pos + 1
    else:
        n, pos = _varint(buf, pos, end)
    if n > end - pos:
        raise _WireError("a length of %d bytes, but only %d remain" % (n, end - pos), pos)
    return n, pos


def _signed(v: int, kind: int) -> int:
    """A decoded varint as the field's integer type (int64 / int32 two's complement, uint64)."""
    if kind == _U64:
        return v
    if kind == _I64:
        return v - (1 << 64) if v >> 63 else v
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _skip(buf: bytes, pos: int, end: int, wire: int, number: int) -> int:
    """The position after an unknown field's value (groups skipped whole, nesting bounded)."""
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1 or wire == 5:
        size = 8 if wire == 1 else 4
        if size > end - pos:
            raise _WireError("a %d-byte value, but only %d bytes remain" % (size, end - pos), pos)
        return pos + size
    if wire == 2:
        n, pos = _length(buf, pos, end)
        return pos + n
    if wire == 3:
        open_groups = [number]
        while open_groups:
            key, pos = _varint(buf, pos, end)
            w, num = key & 7, key >> 3
            if w == 4:
                if num != open_groups.pop():
                    raise _WireError("an end-group tag for field %d does not close its group"
                                     % num, pos)
            elif w == 3:
                if len(open_groups) >= MAX_DEPTH:
                    raise _WireError("groups nest deeper than %d" % MAX_DEPTH, pos)
                open_groups.append(num)
            else:
                pos = _skip(buf, pos, end, w, num)
        return pos
    raise _WireError("wire type %d (field %d) is not a protobuf wire type" % (wire, number), pos)


def _packed(buf: bytes, pos: int, stop: int, kind: int) -> Union[list, np.ndarray]:
    """The values of a packed repeated scalar field: a list when short, else a numpy array."""
    n = stop - pos
    if kind == _F32 or kind == _F64:
        size = 4 if kind == _F32 else 8
        if n % size:
            raise _WireError("packed %s values take %d bytes, not a multiple of %d"
                             % ("float" if size == 4 else "double", n, size), pos)
        if n <= _SMALL_PACKED:
            return list(struct.unpack_from("<%d%s" % (n // size, "f" if size == 4 else "d"),
                                           buf, pos))
        wire_type = np.dtype("<f4" if size == 4 else "<f8")
        return np.frombuffer(buf, dtype=wire_type, count=n // size, offset=pos).astype(
            _NP_TYPE[kind])   # a copy in native order: the model bytes are not kept alive
    if n <= _SMALL_PACKED:
        out = []
        while pos < stop:
            v, pos = _varint(buf, pos, stop)
            out.append(_signed(v, kind))
        return out
    vals = _varints_array(buf, pos, stop)
    if kind == _U64:
        return vals
    vals = vals.view(np.int64)
    return vals.astype(np.int32) if kind in (_I32, _ENUM) else vals


def _varints_array(buf: bytes, pos: int, stop: int) -> np.ndarray:
    """Packed varints between `pos` and `stop` as uint64, decoded by numpy in bounded chunks."""
    b = np.frombuffer(buf, dtype=np.uint8, count=stop - pos, offset=pos)
    parts = []
    start = 0
    while start < b.size:
        seg = b[start:start + _VARINT_CHUNK]
        ends = np.flatnonzero(seg < 0x80)
        if ends.size == 0:
            raise _WireError("packed varints without an end (longer than %d bytes or cut off)"
                             % MAX_VARINT_BYTES, pos + start)
        used = int(ends[-1]) + 1
        if start + seg.size == b.size and used != seg.size:
            raise _WireError("the last packed varint runs past the end of its field",
                             pos + start + used)
        seg = seg[:used]
        starts = np.empty(ends.size, dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        lengths = ends - starts + 1
        if int(lengths.max()) > MAX_VARINT_BYTES:
            raise _WireError("a packed varint is longer than %d bytes" % MAX_VARINT_BYTES,
                             pos + start + int(starts[int(np.argmax(lengths))]))
        shifts = (np.arange(used, dtype=np.int64) - np.repeat(starts, lengths)) * 7
        payload = (seg & 0x7F).astype(np.uint64) << shifts.astype(np.uint64)
        parts.append(np.bitwise_or.reduceat(payload, starts))
        start += used
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


# ------------------------------------------------------------------------------- messages

# What a tag does (a class's _TAGS maps each (field number << 3 | wire type) it knows to one):
# length-delimited actions first, then varint, fixed32 and fixed64 ones.
(_A_MSG, _A_MSGS, _A_STR, _A_STRS, _A_BYTES, _A_BYTESS, _A_VIEW, _A_PACKED,
 _A_INT, _A_INTS, _A_FIXED, _A_FIXEDS) = range(12)
_LAST_DELIMITED = _A_PACKED


def _tag_table(fields: Dict[int, _Field]) -> Dict[int, tuple]:
    """key -> (field, action) for every tag a message's fields accept (packed or not)."""
    tags = {}   # type: Dict[int, tuple]
    for number, f in fields.items():
        wire = _WIRE_TYPE[f.kind]
        if f.kind == _MSG:
            act = _A_MSGS if f.repeated else _A_MSG
        elif f.kind == _STR:
            act = _A_STRS if f.repeated else _A_STR
        elif f.kind == _BYTES:
            act = _A_BYTESS if f.repeated else _A_BYTES
        elif f.kind == _VIEW:
            act = _A_VIEW
        elif wire == 0:
            act = _A_INTS if f.repeated else _A_INT
        else:
            act = _A_FIXEDS if f.repeated else _A_FIXED
        tags[number << 3 | wire] = (f, act)
        if f.repeated and wire != 2:
            tags[number << 3 | 2] = (f, _A_PACKED)
    return tags


def _parse(cls: Any, buf: bytes, view: memoryview, pos: int, end: int, depth: int,
           obj: Any = None) -> Any:
    """Decode the message `cls` from buf[pos:end] (into `obj` when merging a field that
    occurs twice, as protobuf does)."""
    if depth > MAX_DEPTH:
        raise _WireError("messages nest deeper than %d" % MAX_DEPTH, pos)
    if obj is None:
        obj = cls.__new__(cls)
    d = obj.__dict__
    tags = cls._TAGS
    lists = {}   # type: Dict[str, list]     # repeated messages and strings
    nums = {}    # type: Dict[_Field, list]  # repeated numbers: runs (lists or arrays)
    f = None
    try:
        while pos < end:
            key = buf[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = _varint(buf, pos, end)
            t = tags.get(key)
            if t is None:
                number = key >> 3
                if number == 0 or key > 0xFFFFFFFF:
                    raise _WireError("field number %d is not valid" % number, pos)
                pos = _skip(buf, pos, end, key & 7, number)
                continue
            f, act = t
            if act <= _LAST_DELIMITED:
                n = buf[pos] if pos < end else 0x80
                if n < 0x80:
                    pos += 1
                else:
                    n, pos = _varint(buf, pos, end)
                if n > end - pos:
                    raise _WireError("a length of %d bytes, but only %d remain" % (n, end - pos),
                                     pos)
                stop = pos + n
                if act == _A_MSGS:
                    val = _parse(f.sub, buf, view, pos, stop, depth + 1)
                elif act == _A_STRS or act == _A_STR:
                    try:
                        val = buf[pos:stop].decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise _WireError("a string field is not UTF-8 (%s)" % e.reason,
                                         pos + e.start) from None
                elif act == _A_MSG:
                    val = _parse(f.sub, buf, view, pos, stop, depth + 1, d.get(f.name))
                elif act == _A_BYTESS or act == _A_BYTES:
                    val = buf[pos:stop]
                elif act == _A_VIEW:
                    val = view[pos:stop]
                else:   # _A_PACKED: a packed run of a repeated number
                    nums.setdefault(f, []).append(_packed(buf, pos, stop, f.kind))
                    pos = stop
                    continue
                pos = stop
                if act == _A_MSGS or act == _A_STRS or act == _A_BYTESS:
                    got = lists.get(f.name)
                    if got is None:
                        lists[f.name] = [val]
                    else:
                        got.append(val)
                    continue
            elif act <= _A_INTS:
                v, pos = _varint(buf, pos, end)
                val = _signed(v, f.kind)
                if f.enum is not None and val not in f.enum:
                    continue   # proto2: an enum value it does not know is an unknown field
            else:
                size = 4 if f.kind == _F32 else 8
                if size > end - pos:
                    raise _WireError("a %d-byte value, but only %d bytes remain"
                                     % (size, end - pos), pos)
                val = struct.unpack_from("<f" if size == 4 else "<d", buf, pos)[0]
                pos += size
            if act == _A_INTS or act == _A_FIXEDS:
                runs = nums.setdefault(f, [])
                if runs and type(runs[-1]) is list:
                    runs[-1].append(val)
                else:
                    runs.append([val])
                continue
            d[f.name] = val
            for other in f.oneof:
                d.pop(other, None)
        f = None
        for name, got in lists.items():
            old = d.get(name)
            d[name] = got if old is None else old + got
        for spec, runs in nums.items():
            _finish_numbers(d, spec, runs)
    except _WireError as e:
        e.path.insert(0, cls.__name__ + ("." + f.name if f is not None else ""))
        raise
    return obj


def _finish_numbers(d: Dict[str, Any], spec: _Field, runs: list) -> None:
    """Store a repeated number field: a list (an array for the typed tensor data), appended to
    what an earlier occurrence of the message held."""
    name = spec.name
    old = d.get(name)
    if old is not None:
        runs.insert(0, old)
    if spec.as_array:
        dtype = _NP_TYPE[spec.kind]
        arrays = [np.asarray(r, dtype=dtype) for r in runs]
        d[name] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        return
    if len(runs) == 1 and type(runs[0]) is list:
        d[name] = runs[0]
        return
    out = []   # type: list
    for r in runs:
        out.extend(r.tolist() if isinstance(r, np.ndarray) else r)
    d[name] = out


def parse(data: Union[bytes, bytearray, memoryview], cls: Any = None, what: str = "the model bytes"
          ) -> Any:
    """Decode `data` as the message class `cls` (default ModelProto); InvalidProtobuf when the
    bytes are not one. `what` names the bytes in the message."""
    cls = ModelProto if cls is None else cls
    if not isinstance(data, bytes):
        data = bytes(data)   # bytes cannot change under the views raw_data hands out
    collecting = gc.isenabled()
    if collecting:
        gc.disable()   # the decoded tree has no cycles: collecting while it grows only costs
                       # time (about 2/3 of it on graphs of many small messages)
    try:
        return _parse(cls, data, memoryview(data), 0, len(data), 1)
    except _WireError as e:
        raise InvalidProtobuf("%s are not a valid ONNX protobuf (%s): %s at byte %d of %d, in %s"
                              % (what, cls.__name__, e.message, e.offset, len(data),
                                 " > ".join(e.path))) from None
    finally:
        if collecting:
            gc.enable()


def parse_model(data: Union[bytes, bytearray, memoryview]) -> ModelProto:
    """A ModelProto-like object from serialized model bytes (InvalidProtobuf when they are not
    one); `onnx_loader.model_from_proto` turns it into the IR."""
    return parse(data, ModelProto)


_build_schema()
