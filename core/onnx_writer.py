"""Write the IR back to ONNX: `ir.Model` -> `onnx.ModelProto`, and `save_model` to bytes or a file.

The inverse of `onnx_loader`. Like the loader, it imports `onnx` only inside functions, so the
core still imports without it.

What the IR cannot tell apart is written as follows:

- an empty attribute list is written as INTS (the loader turns FLOATS, INTS, STRINGS, ... into
  Python lists, and an empty one carries no element type);
- an `ir.AttrRef` (a function-body attribute that refers to the caller's attribute) is written with
  `ref_attr_name` and the attribute type taken from the op's schema, or from the type of a default
  value the enclosing/called function declares; UNDEFINED when neither is known;
- an `ir.SparseTensor` initializer is written as a sparse initializer; the loader reads those back
  dense;
- tensors are written in `raw_data` (little-endian), strings in `string_data`; the name of a tensor
  attribute is lost by the loader and written empty.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import dtypes, ir
from .errors import InvalidArgument, NotImplemented
from .onnx_loader import onnx_package

__all__ = ["array_to_tensor", "tensor_raw_bytes", "sparse_to_proto", "type_to_proto",
           "value_info_to_proto", "attribute_to_proto", "graph_to_proto", "function_to_proto",
           "model_to_proto", "save_model"]

_PACKED_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}   # uint4, int4, float4e2m1, uint2, int2
_SIGNED_PACKED = {22, 26}
_BIT_PATTERN = {16: np.uint16, 17: np.uint8, 18: np.uint8, 19: np.uint8, 20: np.uint8, 24: np.uint8}
_EXTERNAL_ALIGN = 64     # offsets of tensors in an external data file are multiples of this

# AttributeProto.AttributeType values
_UNDEFINED, _FLOAT, _INT, _STRING, _TENSOR, _GRAPH = 0, 1, 2, 3, 4, 5
_FLOATS, _INTS, _STRINGS, _TENSORS, _GRAPHS = 6, 7, 8, 9, 10
_SPARSE_TENSOR, _SPARSE_TENSORS, _TYPE_PROTO, _TYPE_PROTOS = 11, 12, 13, 14


# ----------------------------------------------------------------------------------- tensors

def _pack_bits(vals: np.ndarray, bits: int) -> bytes:
    """Inverse of tensor_data.unpack_bits: `8 // bits` values a byte, low bits first."""
    per = 8 // bits
    mask = (1 << bits) - 1
    flat = (vals.reshape(-1).astype(np.int64) & mask).astype(np.uint8)
    pad = (-flat.size) % per
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=np.uint8)])
    groups = flat.reshape(-1, per)
    out = np.zeros(groups.shape[0], dtype=np.uint8)
    for i in range(per):
        out |= (groups[:, i] << (bits * i)).astype(np.uint8)
    return out.tobytes()


def _string_bytes(arr: np.ndarray, name: str) -> List[bytes]:
    out = []
    for v in arr.reshape(-1).tolist():
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, str):
            out.append(v.encode("utf-8", errors="surrogateescape"))
        else:
            raise InvalidArgument("string tensor %r holds a %s (%r); expected str or bytes"
                                  % (name, type(v).__name__, v))
    return out


def _little_endian_bytes(arr: np.ndarray) -> bytes:
    dt = arr.dtype
    if dt.itemsize > 1 and dt.kind in "biufc":
        le = dt.newbyteorder("<")
        if le != dt:
            arr = arr.astype(le)
    return arr.tobytes()


def _native_dtype(dt: np.dtype) -> np.dtype:
    return dt.newbyteorder("=") if dt.kind in "biufc" and not dt.isnative else dt


def _code_of(arr: np.ndarray, name: str) -> int:
    try:
        return dtypes.from_numpy(_native_dtype(arr.dtype))
    except KeyError:
        raise InvalidArgument("tensor %r: numpy dtype %s has no ONNX element type"
                              % (name, arr.dtype)) from None


def _is_native(arr: np.ndarray, code: int) -> bool:
    """True when `arr` already has the dtype the IR uses for element type `code`."""
    try:
        return dtypes.from_numpy(_native_dtype(arr.dtype)) == code
    except KeyError:
        return False


def tensor_raw_bytes(arr: np.ndarray, elem_type: Optional[int] = None, name: str = "") -> bytes:
    """The `raw_data` bytes of an array (not for strings); see `array_to_tensor` for `elem_type`."""
    code = _code_of(arr, name) if elem_type is None else int(elem_type)
    dtypes.lookup(code)
    if code == dtypes.STRING:
        raise InvalidArgument("tensor %r: string tensors have no raw data" % name)
    if not arr.dtype.isnative:
        arr = arr.astype(_native_dtype(arr.dtype))
    native = _is_native(arr, code)
    bits = _PACKED_BITS.get(code)
    if bits is not None:
        if native:
            if code == 23:   # float4e2m1: the bit pattern sits in the low 4 bits of each byte
                vals = arr.view(np.uint8)
            else:
                vals = arr.astype(np.int8 if code in _SIGNED_PACKED else np.uint8)
        elif arr.dtype.kind in "iub":
            vals = arr          # values (int4/uint4/int2/uint2) or bit patterns (float4e2m1)
        else:
            raise InvalidArgument("tensor %r: %s data must be an ml_dtypes array or integers, "
                                  "not %s" % (name, dtypes.lookup(code).name, arr.dtype))
        return _pack_bits(np.asarray(vals), bits)
    pattern = _BIT_PATTERN.get(code)
    if pattern is not None:
        width = np.dtype(pattern).itemsize
        if native:
            bits_arr = arr.view(pattern)
        elif arr.dtype.kind in "iu" and arr.dtype.itemsize == width:
            bits_arr = arr.view(pattern)     # integers holding the bit patterns
        else:
            raise InvalidArgument("tensor %r: %s data must be an ml_dtypes array or %d-byte "
                                  "integers holding bit patterns, not %s"
                                  % (name, dtypes.lookup(code).name, width, arr.dtype))
        return _little_endian_bytes(bits_arr)
    if not native:
        arr = arr.astype(dtypes.to_numpy(code))
    if code == dtypes.BOOL:
        arr = arr.astype(np.uint8)
    return _little_endian_bytes(arr)


def array_to_tensor(arr: Any, name: str = "", elem_type: Optional[int] = None) -> Any:
    """A TensorProto holding `arr` (raw_data little-endian; strings in string_data).

    `elem_type` (an ONNX element-type code) is taken from the array's dtype when not given. When
    given for a type numpy lacks and `arr` is not an `ml_dtypes` array, `arr` holds the bit
    patterns (uint16 for bfloat16, uint8 for float8 types and float4e2m1) or the integer values
    (int4, uint4, int2, uint2). For other types, `arr` is cast to `elem_type`.
    """
    onnx = onnx_package()
    arr = np.asarray(arr)
    code = _code_of(arr, name) if elem_type is None else int(elem_type)
    dtypes.lookup(code)
    t = onnx.TensorProto()
    t.name = name
    t.data_type = code
    t.dims.extend(int(d) for d in arr.shape)
    if code == dtypes.STRING:
        t.string_data.extend(_string_bytes(arr, name))
    else:
        t.raw_data = tensor_raw_bytes(arr, code, name)
    return t


def sparse_to_proto(s: ir.SparseTensor, name: str = "") -> Any:
    """A SparseTensorProto from an IR SparseTensor; `name` names its values tensor."""
    onnx = onnx_package()
    p = onnx.SparseTensorProto()
    p.values.CopyFrom(array_to_tensor(s.values, name))
    p.indices.CopyFrom(array_to_tensor(np.asarray(s.indices, dtype=np.int64), ""))
    p.dims.extend(int(d) for d in s.dims)
    return p


# ------------------------------------------------------------------------------------ types

def _fill_type(tp: Any, t: ir.TypeInfo) -> None:
    kind = t.kind
    if kind in ("tensor", "sparse_tensor"):
        tt = tp.tensor_type if kind == "tensor" else tp.sparse_tensor_type
        tt.SetInParent()
        tt.elem_type = int(t.elem_type)
        if t.shape is not None:
            tt.shape.SetInParent()
            for d in t.shape:
                dim = tt.shape.dim.add()
                if isinstance(d, str):
                    dim.dim_param = d
                elif d is not None:
                    dim.dim_value = int(d)
        return
    if kind == "sequence":
        tp.sequence_type.SetInParent()
        if t.elem is not None:
            _fill_type(tp.sequence_type.elem_type, t.elem)
        return
    if kind == "optional":
        tp.optional_type.SetInParent()
        if t.elem is not None:
            _fill_type(tp.optional_type.elem_type, t.elem)
        return
    if kind == "map":
        tp.map_type.SetInParent()
        tp.map_type.key_type = int(t.elem_type)
        if t.elem is not None:
            _fill_type(tp.map_type.value_type, t.elem)
        return
    raise InvalidArgument("type %r has unknown kind %r (expected tensor, sparse_tensor, "
                          "sequence, optional or map)" % (t, kind))


def type_to_proto(t: Optional[ir.TypeInfo]) -> Any:
    """A TypeProto from an IR TypeInfo (an empty TypeProto for None)."""
    onnx = onnx_package()
    tp = onnx.TypeProto()
    if t is not None:
        _fill_type(tp, t)
    return tp


def value_info_to_proto(vi: ir.ValueInfo) -> Any:
    """A ValueInfoProto from an IR ValueInfo (no type field when its type is None)."""
    onnx = onnx_package()
    p = onnx.ValueInfoProto()
    p.name = vi.name
    if vi.type is not None:
        p.type.CopyFrom(type_to_proto(vi.type))
    if vi.doc_string:
        p.doc_string = vi.doc_string
    return p


# ------------------------------------------------------------------------------- attributes

class _Context:
    """What a node's AttrRef attributes need to find their type: opsets and functions."""

    def __init__(self, opsets: Dict[str, int], functions: Sequence[ir.Function],
                 enclosing: Optional[ir.Function] = None):
        self.opsets = opsets
        self.functions = {(f.domain, f.name): f for f in functions}
        self.enclosing = enclosing


def encode_text(s: Union[str, bytes]) -> bytes:
    """An IR string as the bytes it came from (UTF-8 with surrogateescape; bytes unchanged)."""
    return s if isinstance(s, bytes) else s.encode("utf-8", errors="surrogateescape")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (float, np.floating))


def _is_float(v: Any) -> bool:
    return isinstance(v, (float, np.floating))


def attribute_kind(value: Any) -> int:
    """The AttributeProto type a plain Python value is written as (0 when none fits)."""
    if isinstance(value, ir.AttrRef):
        return _UNDEFINED
    if isinstance(value, (bool, np.bool_)) or _is_int(value):
        return _INT
    if _is_float(value):
        return _FLOAT
    if isinstance(value, (str, bytes)):
        return _STRING
    if isinstance(value, np.ndarray):
        return _TENSOR
    if isinstance(value, ir.Graph):
        return _GRAPH
    if isinstance(value, ir.SparseTensor):
        return _SPARSE_TENSOR
    if isinstance(value, ir.TypeInfo):
        return _TYPE_PROTO
    if isinstance(value, (list, tuple)):
        if not value:
            return _INTS
        items = list(value)
        if all(isinstance(v, (bool, np.bool_)) or _is_int(v) for v in items):
            return _INTS
        if all(_is_float(v) or _is_int(v) for v in items):
            return _FLOATS
        if all(isinstance(v, (str, bytes)) for v in items):
            return _STRINGS
        if all(isinstance(v, np.ndarray) for v in items):
            return _TENSORS
        if all(isinstance(v, ir.Graph) for v in items):
            return _GRAPHS
        if all(isinstance(v, ir.SparseTensor) for v in items):
            return _SPARSE_TENSORS
        if all(isinstance(v, ir.TypeInfo) for v in items):
            return _TYPE_PROTOS
    return _UNDEFINED


def _schema_attr_type(op_type: str, domain: str, attr: str, opsets: Dict[str, int]) -> int:
    try:
        from onnx import defs
        version = opsets.get(domain) or (opsets.get("ai.onnx") if domain == "" else None)
        if not version:
            return _UNDEFINED
        schema = defs.get_schema(op_type, int(version), domain)
        a = schema.attributes.get(attr)
        if a is None:
            return _UNDEFINED
        return int(getattr(a.type, "value", a.type))
    except Exception:   # no schema for this op / domain: the caller tries other sources
        return _UNDEFINED


def _ref_type(node: ir.Node, attr: str, ref: ir.AttrRef, ctx: Optional[_Context]) -> int:
    """The attribute type of an AttrRef: op schema, called function's or enclosing default."""
    if ctx is None:
        return _UNDEFINED
    called = ctx.functions.get((node.domain, node.op_type))
    if called is not None:
        if attr in called.attribute_defaults:
            kind = attribute_kind(called.attribute_defaults[attr])
            if kind:
                return kind
    else:
        kind = _schema_attr_type(node.op_type, node.domain, attr, ctx.opsets)
        if kind:
            return kind
    enc = ctx.enclosing
    if enc is not None and ref.ref_attr_name in enc.attribute_defaults:
        return attribute_kind(enc.attribute_defaults[ref.ref_attr_name])
    return _UNDEFINED


def attribute_to_proto(name: str, value: Any, ref_type: int = 0,
                       _ctx: Optional[_Context] = None) -> Any:
    """An AttributeProto from a plain Python attribute value (see the module doc for lists).

    `ref_type` is the attribute type written for an `ir.AttrRef` value.
    """
    onnx = onnx_package()
    a = onnx.AttributeProto()
    a.name = name
    if isinstance(value, ir.AttrRef):
        a.ref_attr_name = value.ref_attr_name
        a.type = int(ref_type)
        return a
    kind = attribute_kind(value)
    if kind == _UNDEFINED:
        raise InvalidArgument("attribute %r: cannot write a %s value (%r) as an ONNX attribute"
                              % (name, type(value).__name__, value))
    a.type = kind
    if kind == _FLOAT:
        a.f = float(value)
    elif kind == _INT:
        a.i = int(value)
    elif kind == _STRING:
        a.s = encode_text(value)
    elif kind == _TENSOR:
        a.t.CopyFrom(array_to_tensor(value))
    elif kind == _GRAPH:
        a.g.CopyFrom(_graph_to_proto(value, _ctx))
    elif kind == _SPARSE_TENSOR:
        a.sparse_tensor.CopyFrom(sparse_to_proto(value))
    elif kind == _TYPE_PROTO:
        a.tp.CopyFrom(type_to_proto(value))
    elif kind == _FLOATS:
        a.floats.extend(float(v) for v in value)
    elif kind == _INTS:
        a.ints.extend(int(v) for v in value)
    elif kind == _STRINGS:
        a.strings.extend(encode_text(v) for v in value)
    elif kind == _TENSORS:
        a.tensors.extend(array_to_tensor(v) for v in value)
    elif kind == _GRAPHS:
        a.graphs.extend(_graph_to_proto(g, _ctx) for g in value)
    elif kind == _SPARSE_TENSORS:
        a.sparse_tensors.extend(sparse_to_proto(v) for v in value)
    elif kind == _TYPE_PROTOS:
        a.type_protos.extend(type_to_proto(v) for v in value)
    return a


# ----------------------------------------------------------------------------- graph, model

def _node_to_proto(n: ir.Node, ctx: Optional[_Context]) -> Any:
    onnx = onnx_package()
    p = onnx.NodeProto()
    p.op_type = n.op_type
    p.input.extend(n.inputs)
    p.output.extend(n.outputs)
    if n.name:
        p.name = n.name
    if n.domain:
        p.domain = n.domain
    if n.doc_string:
        p.doc_string = n.doc_string
    for key, val in n.attributes.items():
        ref_type = _ref_type(n, key, val, ctx) if isinstance(val, ir.AttrRef) else 0
        try:
            p.attribute.append(attribute_to_proto(key, val, ref_type, ctx))
        except InvalidArgument as e:
            raise InvalidArgument("%s: %s" % (n.describe(), e)) from None
    return p


def _graph_to_proto(g: ir.Graph, ctx: Optional[_Context]) -> Any:
    onnx = onnx_package()
    p = onnx.GraphProto()
    p.name = g.name
    p.node.extend(_node_to_proto(n, ctx) for n in g.nodes)
    p.input.extend(value_info_to_proto(v) for v in g.inputs)
    p.output.extend(value_info_to_proto(v) for v in g.outputs)
    for name, val in g.initializers.items():
        if isinstance(val, ir.SparseTensor):
            p.sparse_initializer.append(sparse_to_proto(val, name))
        else:
            p.initializer.append(array_to_tensor(val, name))
    p.value_info.extend(value_info_to_proto(v) for v in g.value_info.values())
    if g.doc_string:
        p.doc_string = g.doc_string
    return p


def graph_to_proto(g: ir.Graph, opset_imports: Optional[Dict[str, int]] = None,
                   functions: Optional[Sequence[ir.Function]] = None) -> Any:
    """A GraphProto from an IR Graph (subgraphs included); opsets/functions type AttrRefs."""
    return _graph_to_proto(g, _Context(dict(opset_imports or {}), list(functions or [])))


def _opsets(proto_list: Any, opsets: Dict[str, int]) -> None:
    for domain, version in opsets.items():
        o = proto_list.add()
        o.domain = "" if domain == "ai.onnx" else domain
        o.version = int(version)


def function_to_proto(f: ir.Function, functions: Optional[Sequence[ir.Function]] = None,
                      model_opsets: Optional[Dict[str, int]] = None) -> Any:
    """A FunctionProto from an IR Function; attributes with defaults go to attribute_proto."""
    onnx = onnx_package()
    p = onnx.FunctionProto()
    p.name = f.name
    p.domain = f.domain
    if f.overload:
        if "overload" not in p.DESCRIPTOR.fields_by_name:
            raise NotImplemented("function %s.%s has overload %r, which this onnx %s cannot "
                                 "write (needs onnx >= 1.16)"
                                 % (f.domain, f.name, f.overload, onnx.__version__))
        p.overload = f.overload
    p.input.extend(f.inputs)
    p.output.extend(f.outputs)
    opsets = dict(model_opsets or {})
    opsets.update(f.opset_imports)
    ctx = _Context(opsets, list(functions or []), f)
    for name in f.attributes:
        if name in f.attribute_defaults:
            try:
                p.attribute_proto.append(attribute_to_proto(name, f.attribute_defaults[name],
                                                            0, ctx))
            except InvalidArgument as e:
                raise InvalidArgument("function %s.%s, default of %s"
                                      % (f.domain, f.name, e)) from None
        else:
            p.attribute.append(name)
    for name in f.attribute_defaults:   # defaults of names the attribute list leaves out
        if name not in f.attributes:
            p.attribute_proto.append(attribute_to_proto(name, f.attribute_defaults[name], 0, ctx))
    p.node.extend(_node_to_proto(n, ctx) for n in f.nodes)
    _opsets(p.opset_import, f.opset_imports)
    return p


def model_to_proto(model: ir.Model) -> Any:
    """An onnx.ModelProto from an IR Model (tensors inline; see `save_model` for external data)."""
    onnx = onnx_package()
    m = onnx.ModelProto()
    m.ir_version = int(model.ir_version)
    _opsets(m.opset_import, model.opset_imports)
    if model.producer_name:
        m.producer_name = model.producer_name
    if model.producer_version:
        m.producer_version = model.producer_version
    if model.domain:
        m.domain = model.domain
    if model.model_version:
        m.model_version = int(model.model_version)
    if model.doc_string:
        m.doc_string = model.doc_string
    for key, val in model.metadata_props.items():
        e = m.metadata_props.add()
        e.key, e.value = key, val
    m.graph.CopyFrom(graph_to_proto(model.graph, model.opset_imports, model.functions))
    m.functions.extend(function_to_proto(f, model.functions, model.opset_imports)
                       for f in model.functions)
    return m


# ------------------------------------------------------------------------------ external data

def _all_graphs(g: Any) -> List[Any]:
    out = [g]
    for n in g.node:
        for a in n.attribute:
            if a.HasField("g"):
                out.extend(_all_graphs(a.g))
            for sub in a.graphs:
                out.extend(_all_graphs(sub))
    return out


def _move_to_external(m: Any, model_path: str, location: str, threshold: int) -> None:
    """Move initializer data of at least `threshold` bytes to `location` beside the model."""
    norm = location.replace("\\", "/")
    if not location or os.path.isabs(location) or norm.startswith("/") or ".." in norm.split("/"):
        raise InvalidArgument("external data location %r must be a relative path inside the "
                              "model's folder" % location)
    moving = [t for g in _all_graphs(m.graph) for t in g.initializer
              if t.data_type != dtypes.STRING and t.HasField("raw_data")
              and len(t.raw_data) >= threshold]
    if not moving:
        return
    folder = os.path.dirname(os.path.abspath(model_path))
    data_path = os.path.join(folder, location)
    if os.path.abspath(data_path) == os.path.abspath(model_path):
        raise InvalidArgument("external data location %r is the model file itself" % location)
    parent = os.path.dirname(data_path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    offset = 0
    with open(data_path, "wb") as f:
        for t in moving:
            raw = t.raw_data
            pad = (-offset) % _EXTERNAL_ALIGN
            if pad:
                f.write(b"\0" * pad)
                offset += pad
            f.write(raw)
            t.ClearField("raw_data")
            for key, val in (("location", norm), ("offset", str(offset)),
                             ("length", str(len(raw)))):
                e = t.external_data.add()
                e.key, e.value = key, val
            t.data_location = 1   # TensorProto.EXTERNAL
            offset += len(raw)


def save_model(model: ir.Model, path: Optional[Union[str, "os.PathLike[str]"]] = None,
               external_data_threshold: Optional[int] = None,
               external_data_location: Optional[str] = None) -> bytes:
    """Serialize an IR Model to ONNX bytes, and write them to `path` when one is given.

    With `external_data_threshold` (bytes) and a path, initializers (of the main graph and its
    subgraphs) whose data is at least that large are stored in one file beside the model,
    `external_data_location` (default: the model's file name + ".data"), relative to the
    model's folder (written only when some initializer qualifies); the returned bytes are then the
    model that refers to it. String tensors and tensor attributes always stay inline.
    """
    m = model_to_proto(model)
    if external_data_threshold is not None:
        if path is None:
            raise InvalidArgument("external data needs a path to write the model to "
                                  "(save_model(model, path, external_data_threshold=...))")
        threshold = int(external_data_threshold)
        if threshold < 0:
            raise InvalidArgument("external_data_threshold must be >= 0, got %d" % threshold)
        model_path = os.fspath(path)
        location = external_data_location or (os.path.basename(model_path) + ".data")
        _move_to_external(m, model_path, location, threshold)
    try:
        data = m.SerializeToString()
    except ValueError as e:   # protobuf refuses messages over 2 GiB
        raise InvalidArgument("the model is too large to serialize as one protobuf (%s); save "
                              "it to a path with external_data_threshold=1024 to keep large "
                              "initializers in a separate file" % e) from None
    if path is not None:
        with open(os.fspath(path), "wb") as f:
            f.write(data)
    return data
