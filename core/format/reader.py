"""Read `.oxe` files into the IR. Tensors are read-only numpy views into the file (mmap for paths,
the caller's buffer for bytes): nothing is copied except 4-/2-bit types, which are unpacked.

Nothing in the file is trusted. Before use, the reader checks the identifier and the format
version, the data region, every tensor's dtype code, dims (non-negative, at most MAX_RANK, their
product matching the data length), the offset and length of its data, the number of strings,
subgraph and type nesting (MAX_DEPTH), and it caps the number of tables and strings it decodes
by the buffer's size (so shared offsets cannot make it loop or blow up). Tables are read with
`table.Table` (bounds-checked, and much faster than the generated accessors, which the writer
and the tests use); any offset that points outside the buffer fails there, and `load` turns
those failures (struct.error, IndexError, ValueError, ...) into `InvalidGraph` in one place.
"""
from __future__ import annotations

import mmap
import os
import struct
import sys
from typing import Any, Dict, List, Optional, Union

import numpy as np

from .. import checker, dtypes, ir
from ..errors import InvalidGraph, NoSuchFile, OnnxEdgeError
from ..tensor_data import MAX_SPARSE_DENSE_BYTES, check_sparse, densify, unpack_bits
from .layout import (ALIGN, FILE_IDENTIFIER, FORMAT_MAJOR, MAX_DEPTH, MAX_RANK, PACKED_BITS,
                     SIGNED_PACKED, is_oxe)
from .table import BOOL, BYTE, F64, I32, I64, U16, U64, Table

__all__ = ["load"]

_KINDS = {1: "tensor", 2: "sparse_tensor", 3: "sequence", 4: "map", 5: "optional"}
_NUMPY: Dict[int, np.dtype] = {}   # element type code -> numpy dtype, filled as codes are met
COPY_FACTOR = 8   # tensor copies may take this many times the size of the file (+ external data)
_MALFORMED = (ArithmeticError, AttributeError, IndexError, KeyError, LookupError, MemoryError,
              RecursionError, TypeError, ValueError, BufferError, struct.error)


class _Region:
    """A byte range of a buffer where tensor data lives (the data region or the external file)."""

    def __init__(self, buf: Any, start: int, length: int, label: str) -> None:
        self.buf, self.start, self.length, self.label = buf, start, length, label

    def view(self, dtype: np.dtype, count: int, offset: int, nbytes: int, what: str) -> np.ndarray:
        if offset % ALIGN or offset + nbytes > self.length:
            raise InvalidGraph("%s: data at offset %d, %d bytes, lies outside the %s (%d bytes) or "
                               "is not %d-byte aligned" % (what, offset, nbytes, self.label,
                                                           self.length, ALIGN))
        if count == 0:
            arr = np.zeros(0, dtype=dtype)
        else:
            arr = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.start + offset)
        arr.flags.writeable = False
        return arr


# field indices of each table, in the order oxe.fbs declares them
_TI_KIND, _TI_ELEM_TYPE, _TI_HAS_SHAPE, _TI_DIMS, _TI_DIM_PARAMS, _TI_ELEM = range(6)
_T_NAME, _T_DTYPE, _T_DIMS, _T_OFFSET, _T_LENGTH, _T_EXTERNAL, _T_STRINGS = range(7)
_A_NAME, _A_TYPE, _A_REF, _A_DOC, _A_F, _A_I, _A_S, _A_T, _A_G, _A_SPARSE, _A_TP = range(11)
_A_FLOATS, _A_INTS, _A_STRINGS, _A_TENSORS, _A_GRAPHS, _A_SPARSES, _A_TPS = range(11, 18)
_N_OP, _N_DOMAIN, _N_NAME, _N_DOC, _N_INPUTS, _N_OUTPUTS, _N_ATTRS = range(7)
_G_NAME, _G_DOC, _G_NODES, _G_INPUTS, _G_OUTPUTS, _G_VALUE_INFOS, _G_INITS, _G_SPARSE = range(8)
_F_NAME, _F_DOMAIN, _F_OVERLOAD, _F_INPUTS, _F_OUTPUTS, _F_ATTRS, _F_DEFAULTS, _F_NODES, \
    _F_OPSETS = range(9)
(_M_MAJOR, _M_MINOR, _M_IR, _M_PRODUCER, _M_PRODUCER_VERSION, _M_DOMAIN, _M_MODEL_VERSION,
 _M_DOC, _M_OPSETS, _M_PROPS, _M_GRAPH, _M_FUNCTIONS, _M_DATA_LENGTH, _M_EXTERNAL) = range(14)


class _Reader:
    """Decodes one model within budgets proportional to the buffer's size.

    `budget` counts decode work in units of about 4 bytes of file: one per table, per table or
    string reference in a vector, per element of a number vector (8 bytes in the file) and per 8
    bytes of string text. A well-formed file stores each of these once, so it never uses more
    than its size allows; a file whose tables share one vector or string (FlatBuffers offsets
    may point anywhere) runs out and is refused, so decoding stays linear in the file's size.
    `copy_budget` caps the bytes of tensor copies (unpacked 4-/2-bit data, byte swaps) by the
    size of the file and its external data file, as tensors may share one data range.
    """

    def __init__(self, buf: Any, data: _Region, base_dir: Optional[str], keep_sparse: bool,
                 source: str) -> None:
        self.buf, self.data, self.base_dir = buf, data, base_dir
        self.keep_sparse, self.source = keep_sparse, source
        self.budget = len(buf) // 4 + 64
        self.copy_budget = COPY_FACTOR * len(buf) + (1 << 20)
        self.dense_left = MAX_SPARSE_DENSE_BYTES   # bytes left for sparse initializers made dense
        self.depth = 0
        self.ext: Optional[_Region] = None
        self.ext_name = ""

    def charge(self, n: int = 1, what: str = "tables and strings") -> None:
        """Count `n` units of decode work; InvalidGraph naming `what` once the budget is spent."""
        self.budget -= n
        if self.budget < 0:
            raise InvalidGraph("%s: decoding %s takes more than the file's size (%d bytes) allows "
                               "(shared or cyclic offsets; corrupt or hostile file)"
                               % (self.source, what, len(self.buf)))

    def charge_copy(self, nbytes: int, what: str) -> None:
        """Count `nbytes` of tensor copies against `copy_budget`."""
        self.copy_budget -= nbytes
        if self.copy_budget < 0:
            raise InvalidGraph("%s: %s needs a %d-byte copy, beyond %d times the size of the file "
                               "and its external data (tensors sharing their data range?)"
                               % (self.source, what, nbytes, COPY_FACTOR))

    def _meter(self, nbytes: int) -> None:
        """Charge a string of `nbytes` before it is decoded (one unit per 8 bytes)."""
        if nbytes >= 8:
            self.charge(nbytes // 8, "a string of %d bytes" % nbytes)

    def text(self, t: Table, i: int) -> str:
        """A string field, its text charged to the budget."""
        return t.string(i, self._meter)

    def strings(self, t: Table, i: int) -> List[str]:
        """A vector of strings, each reference and each text charged to the budget."""
        self.charge(t.length(i))
        return t.strings(i, self._meter)

    def numbers(self, t: Table, i: int, dtype: str, what: str,
                limit: Optional[int] = None) -> List[Any]:
        """A vector of 8-byte numbers as a list, each element charged before it is decoded;
        InvalidGraph when it holds more than `limit` elements."""
        n = t.vector(i, 8)[1]
        if limit is not None and n > limit:
            raise InvalidGraph("%s has %d elements, expected at most %d" % (what, n, limit))
        self.charge(n, "%s (%d elements)" % (what, n))
        return t.numbers(i, dtype).tolist()

    def tables(self, t: Table, i: int) -> List[Table]:
        self.charge(t.length(i))
        return t.tables(i)

    def enter(self, what: str) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise InvalidGraph("%s: %s nested more than %d levels deep"
                               % (self.source, what, MAX_DEPTH))

    # -- tensors and types
    def external(self, what: str) -> _Region:
        if self.ext is not None:
            return self.ext
        location = self.ext_name
        if self.base_dir is None:
            raise InvalidGraph("%s stores its data in external file %r, but the model was loaded "
                               "from bytes: load it from its path instead" % (what, location))
        norm = location.replace("\\", "/")
        if not location or os.path.isabs(location) or norm.startswith("/") or \
                ".." in norm.split("/"):
            raise InvalidGraph("%s: external data location %r must be a relative path inside the "
                               "model's folder" % (what, location))
        root = os.path.realpath(self.base_dir)
        path = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([root, path]) != root:
            raise InvalidGraph("%s: external data %r resolves to %s, outside the model's folder %s "
                               "(links out of the folder are refused)" % (what, location, path, root))
        if not os.path.isfile(path):
            raise NoSuchFile("%s: external data file %s does not exist" % (what, path))
        buf = _map(path)
        self.copy_budget += COPY_FACTOR * len(buf)
        self.ext = _Region(buf, 0, len(buf), "external data file %s" % path)
        return self.ext

    def tensor(self, t: Table, what: str) -> np.ndarray:
        self.charge()
        name = self.text(t, _T_NAME)
        what = "%s %r" % (what, name) if name else what
        code = t.scalar(_T_DTYPE, I32)
        if code not in dtypes.BY_CODE:
            raise InvalidGraph("%s has unknown element type code %d" % (what, code))
        dims = self.numbers(t, _T_DIMS, "<i8", "dims of " + what, MAX_RANK)
        if any(d < 0 for d in dims):
            raise InvalidGraph("%s has dims %s: expected at most %d non-negative sizes"
                               % (what, dims[:MAX_RANK + 1], MAX_RANK))
        count = 1
        for d in dims:
            count *= d
        if code == dtypes.STRING:
            n = t.length(_T_STRINGS)
            if n != count:
                raise InvalidGraph("string %s holds %d strings, its dims %s need %d"
                                   % (what, n, dims, count))
            arr = np.empty(n, dtype=object)
            arr[:] = self.strings(t, _T_STRINGS)
            return arr.reshape(dims)
        target = _NUMPY.get(code)
        if target is None:
            target = _NUMPY[code] = dtypes.to_numpy(code)
        bits = PACKED_BITS.get(code)
        need = (count * bits + 7) // 8 if bits else count * target.itemsize
        length = t.scalar(_T_LENGTH, U64)
        if length != need:
            raise InvalidGraph("%s: %d bytes of data, dims %s of %s need %d"
                               % (what, length, dims, dtypes.lookup(code).name, need))
        if t.scalar(_T_EXTERNAL, BOOL, False):
            if not self.ext_name:
                raise InvalidGraph("%s is marked external but the model names no external "
                                   "data file" % what)
            region = self.external(what)
        else:
            region = self.data
        offset = t.scalar(_T_OFFSET, U64)
        if bits:
            packed = region.view(np.dtype(np.uint8), length, offset, length, what)
            self.charge_copy(count * target.itemsize, what)
            vals = unpack_bits(packed, bits, count, code in SIGNED_PACKED)
            arr = vals.view(target) if vals.dtype.itemsize == target.itemsize \
                else vals.astype(target)
            return arr.reshape(dims)
        if sys.byteorder != "little" and target.itemsize > 1:
            self.charge_copy(length, what)
            raw = region.view(target.newbyteorder("<"), count, offset, length, what)
            return raw.astype(target).reshape(dims)
        return region.view(target, count, offset, length, what).reshape(dims)

    def sparse(self, s: Table, what: str) -> ir.SparseTensor:
        self.charge()
        values, indices = s.table(0), s.table(1)
        if values is None or indices is None:
            raise InvalidGraph("sparse %s lacks its values or indices tensor" % what)
        vals = self.tensor(values, "values of sparse " + what)
        idx = self.tensor(indices, "indices of sparse " + what)
        out = ir.SparseTensor(vals, idx, self.numbers(s, 2, "<i8", "dims of sparse " + what,
                                                      MAX_RANK))
        check_sparse(out, "sparse " + what)
        return out

    def type_info(self, t: Table) -> ir.TypeInfo:
        self.charge()
        code = t.scalar(_TI_KIND, BYTE)
        kind = _KINDS.get(code)
        if kind is None:
            raise InvalidGraph("type info has unknown kind code %d" % code)
        shape: Optional[List[Any]] = None
        if t.scalar(_TI_HAS_SHAPE, BOOL, False):
            dims = self.numbers(t, _TI_DIMS, "<i8", "dims of a type info")
            params = self.strings(t, _TI_DIM_PARAMS)
            if params and len(params) != len(dims):
                raise InvalidGraph("type info has %d dims but %d dim params"
                                   % (len(dims), len(params)))
            shape = [d if d >= 0 else (params[i] or None if params else None)
                     for i, d in enumerate(dims)]
        elem = None
        sub = t.table(_TI_ELEM)
        if sub is not None:
            self.enter("type info")
            elem = self.type_info(sub)
            self.depth -= 1
        return ir.TypeInfo(kind, t.scalar(_TI_ELEM_TYPE, I32), shape, elem)

    def value_info(self, v: Table) -> ir.ValueInfo:
        self.charge()
        tp = v.table(1)
        return ir.ValueInfo(self.text(v, 0), self.type_info(tp) if tp is not None else None,
                            self.text(v, 2))

    # -- attributes, nodes, graphs
    def attribute(self, a: Table) -> Any:
        self.charge()
        ref = self.text(a, _A_REF)
        if ref:
            return ir.AttrRef(ref)
        kind = a.scalar(_A_TYPE, BYTE)
        what = "attribute %r" % self.text(a, _A_NAME)
        if kind == 1:
            return float(a.scalar(_A_F, F64, 0.0))
        if kind == 2:
            return int(a.scalar(_A_I, I64))
        if kind == 3:
            return self.text(a, _A_S)
        if kind in (4, 5, 11, 13):
            sub = a.table({4: _A_T, 5: _A_G, 11: _A_SPARSE, 13: _A_TP}[kind])
            if sub is None:
                raise InvalidGraph("%s of type %d has no value" % (what, kind))
            if kind == 4:
                return self.tensor(sub, "tensor of " + what)
            if kind == 5:
                return self.graph(sub)
            if kind == 11:
                return self.sparse(sub, "tensor of " + what)
            return self.type_info(sub)
        if kind == 6:
            return self.numbers(a, _A_FLOATS, "<f8", "floats of " + what)
        if kind == 7:
            return self.numbers(a, _A_INTS, "<i8", "ints of " + what)
        if kind == 8:
            return self.strings(a, _A_STRINGS)
        if kind == 9:
            return [self.tensor(x, "tensor %d of %s" % (i, what))
                    for i, x in enumerate(self.tables(a, _A_TENSORS))]
        if kind == 10:
            return [self.graph(x) for x in self.tables(a, _A_GRAPHS)]
        if kind == 12:
            return [self.sparse(x, "tensor %d of %s" % (i, what))
                    for i, x in enumerate(self.tables(a, _A_SPARSES))]
        if kind == 14:
            return [self.type_info(x) for x in self.tables(a, _A_TPS)]
        raise InvalidGraph("%s has unknown attribute type %d" % (what, kind))

    def attributes(self, t: Table, i: int, where: str) -> Dict[str, Any]:
        out = {}
        for a in self.tables(t, i):
            try:
                out[self.text(a, _A_NAME)] = self.attribute(a)
            except OnnxEdgeError as e:
                raise type(e)("%s: %s" % (where, e)) from None
        return out

    def node(self, n: Table) -> ir.Node:
        self.charge()
        op, name = self.text(n, _N_OP), self.text(n, _N_NAME)
        attrs = self.attributes(n, _N_ATTRS, "%s node %r" % (op, name)) \
            if n.field_offset(_N_ATTRS) else {}
        return ir.Node(op, self.strings(n, _N_INPUTS), self.strings(n, _N_OUTPUTS), attrs,
                       self.text(n, _N_DOMAIN), name, self.text(n, _N_DOC))

    def graph(self, g: Table) -> ir.Graph:
        self.charge()
        self.enter("subgraph")
        name = self.text(g, _G_NAME)
        inits: Dict[str, Any] = {}
        for t in self.tables(g, _G_INITS):
            inits[self.text(t, _T_NAME)] = self.tensor(t, "initializer")
        for sp in self.tables(g, _G_SPARSE):
            values = sp.table(0)
            key = self.text(values, _T_NAME) if values is not None else ""
            what = "sparse initializer %r of graph %r" % (key, name)
            s = self.sparse(sp, what)
            if self.keep_sparse:
                inits[key] = s
            else:
                inits[key], self.dense_left = densify(s, self.dense_left, what)
        out = ir.Graph(
            name=name,
            nodes=[self.node(n) for n in self.tables(g, _G_NODES)],
            inputs=[self.value_info(v) for v in self.tables(g, _G_INPUTS)],
            outputs=[self.value_info(v) for v in self.tables(g, _G_OUTPUTS)],
            initializers=inits,
            value_info={v.name: v for v in (self.value_info(x)
                                            for x in self.tables(g, _G_VALUE_INFOS))},
            doc_string=self.text(g, _G_DOC))
        self.depth -= 1
        return out

    def opsets(self, t: Table, i: int) -> Dict[str, int]:
        return {self.text(o, 0): int(o.scalar(1, I64)) for o in self.tables(t, i)}

    def function(self, f: Table) -> ir.Function:
        self.charge()
        name, domain = self.text(f, _F_NAME), self.text(f, _F_DOMAIN)
        plain = self.strings(f, _F_ATTRS)
        defaults = self.attributes(f, _F_DEFAULTS, "function %s.%s" % (domain, name))
        return ir.Function(name, domain, self.strings(f, _F_INPUTS), self.strings(f, _F_OUTPUTS),
                           plain + list(defaults), defaults,
                           [self.node(n) for n in self.tables(f, _F_NODES)],
                           self.opsets(f, _F_OPSETS), self.text(f, _F_OVERLOAD))

    def model(self, m: Table) -> ir.Model:
        self.ext_name = self.text(m, _M_EXTERNAL)
        graph = m.table(_M_GRAPH)
        if graph is None:
            raise InvalidGraph("%s has no graph" % self.source)
        props = {self.text(p, 0): self.text(p, 1) for p in self.tables(m, _M_PROPS)}
        return checker.check_model_identifiers(ir.Model(   # op types/domains: plain identifiers
            graph=self.graph(graph),
            opset_imports=self.opsets(m, _M_OPSETS) or {"": 1},
            ir_version=int(m.scalar(_M_IR, I64)),
            producer_name=self.text(m, _M_PRODUCER),
            producer_version=self.text(m, _M_PRODUCER_VERSION),
            domain=self.text(m, _M_DOMAIN),
            model_version=int(m.scalar(_M_MODEL_VERSION, I64)),
            doc_string=self.text(m, _M_DOC),
            metadata_props=props,
            functions=[self.function(f) for f in self.tables(m, _M_FUNCTIONS)]))


def _map(path: str) -> Any:
    """The file's bytes, memory-mapped read-only (empty bytes for an empty file)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _header(buf: Any, source: str) -> _Region:
    """Checks identifier, version and data region; the data region."""
    size = len(buf)
    if size < 16:
        raise InvalidGraph("%s is truncated: %d bytes, an .oxe file has at least 16" % (source, size))
    if not is_oxe(buf[:8]):
        raise InvalidGraph("%s is not an .oxe file: file identifier %r, expected %r"
                           % (source, bytes(buf[4:8]), FILE_IDENTIFIER))
    m = Table.root(buf)
    major = m.scalar(_M_MAJOR, U16)
    if major > FORMAT_MAJOR:
        raise InvalidGraph("%s was written by a newer onnxedge format version %d; this build reads "
                           "up to %d; upgrade onnxedge" % (source, major, FORMAT_MAJOR))
    if major < 1:
        raise InvalidGraph("%s has format version %d; expected 1..%d" % (source, major, FORMAT_MAJOR))
    length = m.scalar(_M_DATA_LENGTH, U64)
    start = size - length
    if length > size or start % ALIGN or start < 16:
        raise InvalidGraph("%s: data region of %d bytes does not fit a %d-byte file at an "
                           "offset that is a multiple of %d (truncated or corrupt file)"
                           % (source, length, size, ALIGN))
    return _Region(buf, start, length, "data region of %s" % source)


def load(source: Union[str, bytes, bytearray, memoryview, "os.PathLike[str]"],
         keep_sparse: bool = False) -> ir.Model:
    """The IR of an `.oxe` model given as a path (memory-mapped) or as bytes.

    Sparse initializers are made dense, as the `.onnx` loader does, unless `keep_sparse`.
    Malformed input raises InvalidGraph naming what is wrong.
    """
    base_dir = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf: Any = source if not isinstance(source, memoryview) else source.tobytes()
        label = "the .oxe bytes"
    else:
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise NoSuchFile("model file %s does not exist" % path)
        base_dir = os.path.dirname(os.path.abspath(path))
        buf = _map(path)
        label = "file %s" % path
    try:
        data = _header(buf, label)
        reader = _Reader(buf, data, base_dir, keep_sparse, label)
        return reader.model(Table.root(buf))
    except OnnxEdgeError:
        raise
    except _MALFORMED as e:
        raise InvalidGraph("%s is malformed (%s: %s); expected a valid .oxe model"
                           % (label, type(e).__name__, e)) from None
