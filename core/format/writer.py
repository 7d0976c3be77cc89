"""Write the IR as `.oxe`: one FlatBuffer (schema oxe.fbs) followed by the 64-byte aligned data region.

Attribute kinds are recorded explicitly, inferred from the Python value exactly as
`onnx_writer` does: an empty list is stored as INTS (the IR keeps no element type for it; it reads
back as `[]`, and `.oxe -> .onnx` then types it from the op schema like any IR), and an `AttrRef`
is stored with `ref_attr_name` and type UNDEFINED (it reads back as the same `AttrRef`). A string
attribute given as bytes reads back as str (decoded as UTF-8 with surrogateescape, as the .onnx
loader does). `ir.SparseTensor` initializers are stored as sparse initializers.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import flatbuffers
import numpy as np

from .. import dtypes, ir
from ..errors import InvalidArgument
from ..onnx_writer import attribute_kind, encode_text, tensor_raw_bytes
from .fb import Attribute as _A
from .fb import Function as _F
from .fb import Graph as _G
from .fb import Model as _M
from .fb import Node as _N
from .fb import OpsetImport as _O
from .fb import SparseTensor as _S
from .fb import StringPair as _P
from .fb import Tensor as _T
from .fb import TypeInfo as _TI
from .fb import ValueInfo as _V
from .layout import FILE_IDENTIFIER, FORMAT_MAJOR, FORMAT_MINOR, PACKED_BITS, align

__all__ = ["to_bytes", "save"]

_KINDS = {"tensor": 1, "sparse_tensor": 2, "sequence": 3, "map": 4, "optional": 5}
_FLOAT, _INT, _STRING, _TENSOR, _GRAPH = 1, 2, 3, 4, 5
_FLOATS, _INTS, _STRINGS, _TENSORS, _GRAPHS = 6, 7, 8, 9, 10
_SPARSE_TENSOR, _SPARSE_TENSORS, _TYPE_PROTO, _TYPE_PROTOS = 11, 12, 13, 14


class _Region:
    """Tensor payloads laid out at ALIGN-byte offsets: the data region or the external file."""

    def __init__(self) -> None:
        self.chunks: List[Tuple[int, Any]] = []
        self.size = 0

    def add(self, payload: Any) -> Tuple[int, int]:
        offset = align(self.size)
        length = memoryview(payload).nbytes
        self.chunks.append((offset, payload))
        self.size = offset + length
        return offset, length

    def write(self, sink: Callable[[Any], Any]) -> int:
        """Write the chunks with zero padding between them; the number of bytes written."""
        pos = 0
        for offset, payload in self.chunks:
            if offset > pos:
                sink(b"\0" * (offset - pos))
            sink(payload)
            pos = offset + memoryview(payload).nbytes
        return pos


def _payload(arr: np.ndarray, code: int, name: str) -> Any:
    """The bytes of a numeric tensor: a view of `arr` when it is already what the file holds."""
    if code in PACKED_BITS or sys.byteorder != "little" or not arr.dtype.isnative:
        return tensor_raw_bytes(arr, code, name)
    try:
        if dtypes.from_numpy(arr.dtype) != code:
            return tensor_raw_bytes(arr, code, name)
    except KeyError:
        return tensor_raw_bytes(arr, code, name)
    flat = np.ascontiguousarray(arr).reshape(-1)
    return flat.view(np.uint8) if flat.size else b""


class _Builder:
    """Builds the FlatBuffer of one model (bottom-up, as FlatBuffers requires)."""

    def __init__(self, external_threshold: Optional[int]) -> None:
        self.b = flatbuffers.Builder(1 << 16)
        self.data = _Region()
        self.ext = _Region()
        self.threshold = external_threshold
        self.ctx: Dict[str, Any] = {}

    # -- vectors and strings
    def s(self, text: Optional[Union[str, bytes]]) -> Optional[int]:
        return self.b.CreateString(encode_text(text)) if text else None

    def offsets(self, start: Callable[[Any, int], Any], items: Sequence[int]) -> int:
        start(self.b, len(items))
        for off in reversed(items):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def strings(self, start: Callable[[Any, int], Any], items: Sequence[Any]) -> int:
        return self.offsets(start, [self.b.CreateString(encode_text(x)) for x in items])

    def longs(self, values: Sequence[int]) -> int:
        return self.b.CreateNumpyVector(np.asarray(list(values), dtype=np.int64).reshape(-1))

    # -- tensors and types
    def tensor(self, arr: Any, name: str = "", may_be_external: bool = False) -> int:
        arr = np.asarray(arr)
        try:
            dt = arr.dtype
            code = dtypes.from_numpy(dt.newbyteorder("=") if dt.kind in "biufc" else dt)
        except KeyError:
            raise InvalidArgument("tensor %r: numpy dtype %s has no ONNX element type"
                                  % (name, arr.dtype)) from None
        b = self.b
        name_off = self.s(name)
        dims_off = self.longs(arr.shape)
        strings_off = offset = length = None
        external = False
        if code == dtypes.STRING:
            items = []
            for v in arr.reshape(-1).tolist():
                if not isinstance(v, (str, bytes)):
                    raise InvalidArgument("string tensor %r holds a %s (%r); expected str or bytes"
                                          % (name, type(v).__name__, v))
                items.append(v)
            strings_off = self.strings(_T.StartStringsVector, items)
        else:
            payload = _payload(arr, code, name)
            nbytes = memoryview(payload).nbytes
            external = (may_be_external and self.threshold is not None
                        and nbytes >= self.threshold and nbytes > 0)
            offset, length = (self.ext if external else self.data).add(payload)
        _T.Start(b)
        if name_off is not None:
            _T.AddName(b, name_off)
        _T.AddDtype(b, code)
        _T.AddDims(b, dims_off)
        if offset:
            _T.AddOffset(b, offset)
        if length:
            _T.AddLength(b, length)
        if external:
            _T.AddExternal(b, True)
        if strings_off is not None:
            _T.AddStrings(b, strings_off)
        return _T.End(b)

    def sparse(self, s: ir.SparseTensor, name: str = "", may_be_external: bool = False) -> int:
        values = self.tensor(s.values, name, may_be_external)
        indices = self.tensor(np.asarray(s.indices, dtype=np.int64), "", may_be_external)
        dims = self.longs(s.dims)
        _S.Start(self.b)
        _S.AddValues(self.b, values)
        _S.AddIndices(self.b, indices)
        _S.AddDims(self.b, dims)
        return _S.End(self.b)

    def type_info(self, t: ir.TypeInfo) -> int:
        if t.kind not in _KINDS:
            raise InvalidArgument("type %r has unknown kind %r (expected tensor, sparse_tensor, "
                                  "sequence, optional or map)" % (t, t.kind))
        b = self.b
        elem = self.type_info(t.elem) if t.elem is not None else None
        dims = params = None
        if t.shape is not None:
            dims = self.longs([d if isinstance(d, int) and d >= 0 else -1 for d in t.shape])
            if any(isinstance(d, str) for d in t.shape):
                params = self.strings(_TI.StartDimParamsVector,
                                      [d if isinstance(d, str) else "" for d in t.shape])
        _TI.Start(b)
        _TI.AddKind(b, _KINDS[t.kind])
        if t.elem_type:
            _TI.AddElemType(b, int(t.elem_type))
        if t.shape is not None:
            _TI.AddHasShape(b, True)
            _TI.AddDims(b, dims)
        if params is not None:
            _TI.AddDimParams(b, params)
        if elem is not None:
            _TI.AddElem(b, elem)
        return _TI.End(b)

    def value_info(self, vi: ir.ValueInfo) -> int:
        name = self.s(vi.name)
        tp = self.type_info(vi.type) if vi.type is not None else None
        doc = self.s(vi.doc_string)
        _V.Start(self.b)
        if name is not None:
            _V.AddName(self.b, name)
        if tp is not None:
            _V.AddType(self.b, tp)
        if doc is not None:
            _V.AddDocString(self.b, doc)
        return _V.End(self.b)

    # -- attributes, nodes, graphs
    def attribute(self, name: str, value: Any) -> int:
        b = self.b
        kind = attribute_kind(value)
        ref = value.ref_attr_name if isinstance(value, ir.AttrRef) else None
        if kind == 0 and ref is None:
            raise InvalidArgument("attribute %r: cannot store a %s value (%r) as an attribute"
                                  % (name, type(value).__name__, value))
        name_off = self.s(name)
        ref_off = self.s(ref)
        field: Optional[Tuple[Callable[[Any, int], Any], int]] = None
        if kind == _STRING:
            field = (_A.AddS, b.CreateString(encode_text(value)))
        elif kind == _TENSOR:
            field = (_A.AddT, self.tensor(value))
        elif kind == _GRAPH:
            field = (_A.AddG, self.graph(value))
        elif kind == _SPARSE_TENSOR:
            field = (_A.AddSparseTensor, self.sparse(value))
        elif kind == _TYPE_PROTO:
            field = (_A.AddTp, self.type_info(value))
        elif kind == _FLOATS:
            field = (_A.AddFloats, b.CreateNumpyVector(np.asarray([float(v) for v in value],
                                                                   dtype=np.float64)))
        elif kind == _INTS:
            field = (_A.AddInts, self.longs([int(v) for v in value]))
        elif kind == _STRINGS:
            field = (_A.AddStrings, self.strings(_A.StartStringsVector, value))
        elif kind == _TENSORS:
            field = (_A.AddTensors, self.offsets(_A.StartTensorsVector,
                                                 [self.tensor(v) for v in value]))
        elif kind == _GRAPHS:
            field = (_A.AddGraphs, self.offsets(_A.StartGraphsVector,
                                                [self.graph(g) for g in value]))
        elif kind == _SPARSE_TENSORS:
            field = (_A.AddSparseTensors, self.offsets(_A.StartSparseTensorsVector,
                                                       [self.sparse(v) for v in value]))
        elif kind == _TYPE_PROTOS:
            field = (_A.AddTypeProtos, self.offsets(_A.StartTypeProtosVector,
                                                    [self.type_info(v) for v in value]))
        _A.Start(b)
        if name_off is not None:
            _A.AddName(b, name_off)
        _A.AddType(b, kind)
        if ref_off is not None:
            _A.AddRefAttrName(b, ref_off)
        if kind == _FLOAT:
            _A.AddF(b, float(value))
        elif kind == _INT:
            _A.AddI(b, int(value))
        elif field is not None:
            field[0](b, field[1])
        return _A.End(b)

    def _attributes(self, start: Callable[[Any, int], Any], items: Dict[str, Any],
                    where: str) -> int:
        offs = []
        for key, val in items.items():
            try:
                offs.append(self.attribute(key, val))
            except InvalidArgument as e:
                raise InvalidArgument("%s: %s" % (where, e)) from None
        return self.offsets(start, offs)

    def node(self, n: ir.Node) -> int:
        b = self.b
        strs = [self.s(x) for x in (n.op_type, n.domain, n.name, n.doc_string)]
        ins = self.strings(_N.StartInputsVector, n.inputs)
        outs = self.strings(_N.StartOutputsVector, n.outputs)
        attrs = self._attributes(_N.StartAttributesVector, n.attributes, n.describe()) \
            if n.attributes else None
        _N.Start(b)
        for add, off in zip((_N.AddOpType, _N.AddDomain, _N.AddName, _N.AddDocString), strs):
            if off is not None:
                add(b, off)
        _N.AddInputs(b, ins)
        _N.AddOutputs(b, outs)
        if attrs is not None:
            _N.AddAttributes(b, attrs)
        return _N.End(b)

    def graph(self, g: ir.Graph) -> int:
        b = self.b
        name, doc = self.s(g.name), self.s(g.doc_string)
        nodes = self.offsets(_G.StartNodesVector, [self.node(n) for n in g.nodes])
        ins = self.offsets(_G.StartInputsVector, [self.value_info(v) for v in g.inputs])
        outs = self.offsets(_G.StartOutputsVector, [self.value_info(v) for v in g.outputs])
        vis = self.offsets(_G.StartValueInfosVector,
                           [self.value_info(v) for v in g.value_info.values()])
        dense, sparse = [], []
        for key, val in g.initializers.items():
            if isinstance(val, ir.SparseTensor):
                sparse.append(self.sparse(val, key, True))
            else:
                dense.append(self.tensor(val, key, True))
        inits = self.offsets(_G.StartInitializersVector, dense)
        sparse_off = self.offsets(_G.StartSparseInitializersVector, sparse) if sparse else None
        _G.Start(b)
        if name is not None:
            _G.AddName(b, name)
        if doc is not None:
            _G.AddDocString(b, doc)
        _G.AddNodes(b, nodes)
        _G.AddInputs(b, ins)
        _G.AddOutputs(b, outs)
        _G.AddValueInfos(b, vis)
        _G.AddInitializers(b, inits)
        if sparse_off is not None:
            _G.AddSparseInitializers(b, sparse_off)
        return _G.End(b)

    def opsets(self, start: Callable[[Any, int], Any], opsets: Dict[str, int]) -> int:
        offs = []
        for domain, version in opsets.items():
            d = self.s("" if domain == "ai.onnx" else domain)
            _O.Start(self.b)
            if d is not None:
                _O.AddDomain(self.b, d)
            _O.AddVersion(self.b, int(version))
            offs.append(_O.End(self.b))
        return self.offsets(start, offs)

    def function(self, f: ir.Function) -> int:
        b = self.b
        strs = [self.s(x) for x in (f.name, f.domain, f.overload)]
        ins = self.strings(_F.StartInputsVector, f.inputs)
        outs = self.strings(_F.StartOutputsVector, f.outputs)
        plain = self.strings(_F.StartAttributesVector,
                             [a for a in f.attributes if a not in f.attribute_defaults])
        where = "function %s.%s, default of" % (f.domain, f.name)
        defaults = self._attributes(_F.StartAttributeDefaultsVector, f.attribute_defaults, where)
        nodes = self.offsets(_F.StartNodesVector, [self.node(n) for n in f.nodes])
        ops = self.opsets(_F.StartOpsetImportsVector, f.opset_imports)
        _F.Start(b)
        for add, off in zip((_F.AddName, _F.AddDomain, _F.AddOverload), strs):
            if off is not None:
                add(b, off)
        _F.AddInputs(b, ins)
        _F.AddOutputs(b, outs)
        _F.AddAttributes(b, plain)
        _F.AddAttributeDefaults(b, defaults)
        _F.AddNodes(b, nodes)
        _F.AddOpsetImports(b, ops)
        return _F.End(b)

    def model(self, m: ir.Model, external_name: Optional[str]) -> bytes:
        b = self.b
        graph = self.graph(m.graph)
        funcs = self.offsets(_M.StartFunctionsVector, [self.function(f) for f in m.functions])
        ops = self.opsets(_M.StartOpsetImportsVector, m.opset_imports)
        props = []
        for key, val in m.metadata_props.items():
            k, v = self.s(key), self.s(val)
            _P.Start(b)
            if k is not None:
                _P.AddKey(b, k)
            if v is not None:
                _P.AddValue(b, v)
            props.append(_P.End(b))
        props_off = self.offsets(_M.StartMetadataPropsVector, props)
        strs = [self.s(x) for x in (m.producer_name, m.producer_version, m.domain, m.doc_string)]
        ext = self.s(external_name) if self.ext.chunks else None
        _M.Start(b)
        _M.AddFormatMajor(b, FORMAT_MAJOR)
        _M.AddFormatMinor(b, FORMAT_MINOR)
        _M.AddIrVersion(b, int(m.ir_version))
        for add, off in zip((_M.AddProducerName, _M.AddProducerVersion, _M.AddDomain,
                             _M.AddDocString), strs):
            if off is not None:
                add(b, off)
        _M.AddModelVersion(b, int(m.model_version))
        _M.AddOpsetImports(b, ops)
        _M.AddMetadataProps(b, props_off)
        _M.AddGraph(b, graph)
        _M.AddFunctions(b, funcs)
        _M.AddDataLength(b, self.data.size)
        if ext is not None:
            _M.AddExternalData(b, ext)
        b.Finish(_M.End(b), file_identifier=FILE_IDENTIFIER)
        return b.Output()


def _build(model: ir.Model, external_threshold: Optional[int],
           external_name: Optional[str]) -> Tuple[bytes, _Builder]:
    if external_threshold is not None and int(external_threshold) < 0:
        raise InvalidArgument("external_data_threshold must be >= 0 bytes, got %r"
                              % (external_threshold,))
    builder = _Builder(None if external_threshold is None else int(external_threshold))
    head = builder.model(model, external_name)
    return head, builder


def to_bytes(model: ir.Model) -> bytes:
    """The `.oxe` bytes of a model (every tensor in the file's own data region)."""
    head, builder = _build(model, None, None)
    parts = [head, b"\0" * (align(len(head)) - len(head))]
    builder.data.write(parts.append)
    return b"".join(parts)


def save(model: ir.Model, path: Union[str, "os.PathLike[str]"],
         external_data_threshold: Optional[int] = None,
         progress: Optional[Callable[[int, int], None]] = None) -> Dict[str, int]:
    """Write a model to `path` as `.oxe`; returns {"model_bytes", "external_bytes"}.

    With `external_data_threshold` (bytes), initializers (of every graph) whose data is at least
    that large go to `<file name>.data` beside the model; tensor attributes stay inline.
    `progress(done_bytes, total_bytes)` is called while tensor data is written.
    """
    path = os.fspath(path)
    ext_name = os.path.basename(path) + ".data"
    head, builder = _build(model, external_data_threshold, ext_name)
    total = builder.data.size + builder.ext.size
    done = [0]
    last = [time.perf_counter()]

    def sink_of(f: Any) -> Callable[[Any], Any]:
        def sink(chunk: Any) -> None:
            f.write(chunk)
            done[0] += memoryview(chunk).nbytes
            if progress is not None and time.perf_counter() - last[0] > 0.5:
                last[0] = time.perf_counter()
                progress(done[0], total)
        return sink

    ext_path = os.path.join(os.path.dirname(os.path.abspath(path)), ext_name)
    ext_bytes = 0
    if builder.ext.chunks:
        with open(ext_path, "wb") as f:
            ext_bytes = builder.ext.write(sink_of(f))
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"\0" * (align(len(head)) - len(head)))
        builder.data.write(sink_of(f))
        size = f.tell()
    if progress is not None:
        progress(total, total)
    return {"model_bytes": size, "external_bytes": ext_bytes}
