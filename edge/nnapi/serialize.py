"""The `.nnapi` file: a compact little-endian serialization of an NNAPI model
(docs/providers/NNAPI.md).

    header      magic b"ONNA", u16 version (1), u16 flags (0), u32 total file length
    operands    u32 count; per operand: i32 type, u32 rank, rank x u32 dims, f32 scale,
                i32 zeroPoint, u32 flags (bit 0: constant), u32 value offset, u32 value length
                (offset/length into the constant blob; both 0 when not constant)
    blob        u32 length, then the constant values, each starting at a multiple of 8
    operations  u32 count; per operation: i32 code, u32 n_in, n_in x u32, u32 n_out, n_out x u32
    inputs      u32 count; per entry: u32 operand, u32 layout (0 ONNX, 1 NHWC), u32 name length,
                UTF-8 name
    outputs     the same as inputs

The reader checks every count, offset and size against the bytes that remain before it allocates
or slices, so damaged bytes raise InvalidGraph (never another error, a hang or a huge allocation).
"""
from __future__ import annotations

import struct
from typing import List

import numpy as np

from onnxedge.errors import InvalidGraph

from . import codes
from .model import IO, Model, Operation, Operand

MAGIC = b"ONNA"
VERSION = 1
MAX_RANK = 8
_ALIGN = 8


def _pad(n: int) -> int:
    return (-n) % _ALIGN


def dumps(model: Model) -> bytes:
    """The model's bytes in the `.nnapi` format."""
    blob = bytearray()
    table = bytearray(struct.pack("<I", len(model.operands)))
    for op in model.operands:
        table += struct.pack("<iI", op.type, len(op.dims))
        table += struct.pack("<%dI" % len(op.dims), *op.dims)
        if op.value is None:
            table += struct.pack("<fiIII", op.scale, op.zero_point, 0, 0, 0)
        else:
            data = op.value.astype(codes.NUMPY_DTYPE[op.type], copy=False).tobytes()
            offset = len(blob)
            blob += data + b"\0" * _pad(len(data))
            table += struct.pack("<fiIII", op.scale, op.zero_point, 1, offset, len(data))
    body = bytearray(table)
    body += struct.pack("<I", len(blob)) + blob
    body += struct.pack("<I", len(model.operations))
    for o in model.operations:
        body += struct.pack("<iI", o.code, len(o.inputs)) + struct.pack("<%dI" % len(o.inputs), *o.inputs)
        body += struct.pack("<I", len(o.outputs)) + struct.pack("<%dI" % len(o.outputs), *o.outputs)
    for ios in (model.inputs, model.outputs):
        body += struct.pack("<I", len(ios))
        for io in ios:
            name = io.name.encode("utf-8")
            body += struct.pack("<III", io.operand, io.layout, len(name)) + name
    header = MAGIC + struct.pack("<HHI", VERSION, 0, 12 + len(body))
    return bytes(header) + bytes(body)


class _Reader:
    """A cursor over the bytes that refuses to read past their end."""

    def __init__(self, data: bytes, what: str):
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, field: str) -> memoryview:
        if n < 0 or n > self.remaining():
            raise InvalidGraph("%s: %s needs %d bytes at offset %d but only %d remain"
                               % (self.what, field, n, self.pos, self.remaining()))
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, field: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), field))

    def u32(self, field: str) -> int:
        return self.unpack("<I", field)[0]

    def count(self, field: str, min_entry: int) -> int:
        """A count whose entries (at least `min_entry` bytes each) fit in what remains."""
        n = self.u32(field)
        if n * min_entry > self.remaining():
            raise InvalidGraph("%s: %s count %d cannot fit in the %d bytes that remain"
                               % (self.what, field, n, self.remaining()))
        return n


def _operand(r: _Reader, k: int, blob_at: int, blob_len: int, data: bytes) -> Operand:
    type_, rank = r.unpack("<iI", "operand %d header" % k)
    if type_ not in codes.NUMPY_DTYPE:
        raise InvalidGraph("%s: operand %d has unknown type %d" % (r.what, k, type_))
    if rank > MAX_RANK:
        raise InvalidGraph("%s: operand %d has rank %d (at most %d)" % (r.what, k, rank, MAX_RANK))
    dims = r.unpack("<%dI" % rank, "operand %d dims" % k)
    scale, zero_point, flags, offset, length = r.unpack("<fiIII", "operand %d tail" % k)
    if flags not in (0, 1):
        raise InvalidGraph("%s: operand %d has flags %d (0 or 1)" % (r.what, k, flags))
    value = None
    if flags == 1:
        itemsize = np.dtype(codes.NUMPY_DTYPE[type_]).itemsize
        size = 1
        for d in dims:
            size *= d
        if size * itemsize != length or offset > blob_len or length > blob_len - offset:
            raise InvalidGraph("%s: constant operand %d (dims %s) has %d bytes at blob offset %d; "
                               "expected %d bytes inside the %d-byte blob"
                               % (r.what, k, list(dims), length, offset, size * itemsize, blob_len))
        start = blob_at + offset
        value = np.frombuffer(data, dtype=codes.NUMPY_DTYPE[type_], count=size,
                              offset=start).reshape(dims).copy()
    elif offset or length:
        raise InvalidGraph("%s: operand %d is not constant but has a value range" % (r.what, k))
    return Operand(type_, tuple(dims), scale, zero_point, value)


def _ios(r: _Reader, kind: str) -> List[IO]:
    out = []
    for k in range(r.count("%s list" % kind, 12)):
        operand, layout, n = r.unpack("<III", "%s %d" % (kind, k))
        if layout not in (0, 1):
            raise InvalidGraph("%s: %s %d has layout %d (0 or 1)" % (r.what, kind, k, layout))
        try:
            name = bytes(r.take(n, "%s %d name" % (kind, k))).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidGraph("%s: %s %d name is not UTF-8" % (r.what, kind, k)) from None
        out.append(IO(operand, name, layout))
    return out


def loads(data: bytes, what: str = "NNAPI model") -> Model:
    """The model in `.nnapi` bytes; InvalidGraph when they are damaged or not this format."""
    data = bytes(data)
    r = _Reader(data, what)
    magic = bytes(r.take(4, "magic"))
    if magic != MAGIC:
        raise InvalidGraph("%s: starts with %r, expected the .nnapi magic %r" % (what, magic, MAGIC))
    version, flags, total = r.unpack("<HHI", "header")
    if version != VERSION:
        raise InvalidGraph("%s: format version %d; this reader knows version %d"
                           % (what, version, VERSION))
    if flags != 0 or total != len(data):
        raise InvalidGraph("%s: header says %d bytes (flags %d), the file has %d"
                           % (what, total, flags, len(data)))
    n_operands = r.count("operand table", 24)
    # Operand entries point into the blob that follows the table: read the table first.
    table_at = r.pos
    for k in range(n_operands):
        _, rank = r.unpack("<iI", "operand %d header" % k)
        if rank > MAX_RANK:
            raise InvalidGraph("%s: operand %d has rank %d (at most %d)" % (what, k, rank, MAX_RANK))
        r.take(4 * rank + 20, "operand %d" % k)
    blob_len = r.u32("constant blob length")
    blob_at = r.pos
    r.take(blob_len, "constant blob")
    after_blob = r.pos
    r.pos = table_at
    model = Model()
    for k in range(n_operands):
        model.operands.append(_operand(r, k, blob_at, blob_len, data))
    r.pos = after_blob
    for k in range(r.count("operation table", 12)):
        code, n_in = r.unpack("<iI", "operation %d" % k)
        if n_in * 4 > r.remaining():
            raise InvalidGraph("%s: operation %d lists %d inputs past the end" % (what, k, n_in))
        ins = r.unpack("<%dI" % n_in, "operation %d inputs" % k)
        n_out = r.u32("operation %d output count" % k)
        if n_out * 4 > r.remaining():
            raise InvalidGraph("%s: operation %d lists %d outputs past the end" % (what, k, n_out))
        outs = r.unpack("<%dI" % n_out, "operation %d outputs" % k)
        model.operations.append(Operation(code, tuple(ins), tuple(outs)))
    model.inputs = _ios(r, "input")
    model.outputs = _ios(r, "output")
    if r.remaining():
        raise InvalidGraph("%s: %d bytes left after the output list" % (what, r.remaining()))
    model.validate()
    return model
