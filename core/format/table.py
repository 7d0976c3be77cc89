"""A fast, bounds-checked FlatBuffers table reader for the `.oxe` reader's hot path.

The generated accessors (fb/) go through `flatbuffers.table.Table`, which costs a few microseconds
a field (a vtable walk and number checks on every call): ~25 ms for a 200-node model. This reads a
table's vtable once, with `struct` directly, and checks every string and vector against the end
of the buffer before it reads it (ValueError otherwise; the reader turns it into InvalidGraph).
Fields are addressed by their index in the schema (oxe.fbs), as the generated code does.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_HH = struct.Struct("<HH").unpack_from
BOOL = struct.Struct("<?")
BYTE = struct.Struct("<b")
U16 = struct.Struct("<H")
I32 = struct.Struct("<i")
I64 = struct.Struct("<q")
U64 = struct.Struct("<Q")
F64 = struct.Struct("<d")


def _text(raw: Any) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


class Table:
    """One table of a FlatBuffer at absolute position `pos`."""

    __slots__ = ("buf", "pos", "fields")

    def __init__(self, buf: Any, pos: int) -> None:
        size = len(buf)
        if pos < 0 or pos + 4 > size:
            raise ValueError("table at %d lies outside the %d-byte buffer" % (pos, size))
        vt = pos - _I32(buf, pos)[0]
        if vt < 0 or vt + 4 > size:
            raise ValueError("vtable of the table at %d lies outside the buffer" % pos)
        vlen, _ = _HH(buf, vt)
        if vlen < 4 or vlen % 2 or vt + vlen > size:
            raise ValueError("vtable of the table at %d has a bad size %d" % (pos, vlen))
        self.buf, self.pos = buf, pos
        self.fields = struct.unpack_from("<%dH" % ((vlen - 4) // 2), buf, vt + 4)

    @classmethod
    def root(cls, buf: Any) -> "Table":
        """The root table of a buffer."""
        return cls(buf, _U32(buf, 0)[0])

    def field_offset(self, i: int) -> int:
        """Offset of field `i` inside the table (0: the field is absent)."""
        f = self.fields
        return f[i] if i < len(f) else 0

    def scalar(self, i: int, kind: struct.Struct, default: Any = 0) -> Any:
        """A scalar field (kind: BOOL, BYTE, U16, I32, I64, U64, F64)."""
        o = self.field_offset(i)
        return kind.unpack_from(self.buf, self.pos + o)[0] if o else default

    def _ref(self, i: int) -> int:
        o = self.field_offset(i)
        if not o:
            return 0
        p = self.pos + o
        return p + _U32(self.buf, p)[0]

    def _string_at(self, p: int, meter: Optional[Callable[[int], Any]] = None) -> str:
        buf = self.buf
        n = _U32(buf, p)[0]
        if p + 4 + n > len(buf):
            raise ValueError("a string of %d bytes at %d runs past the end of the buffer" % (n, p))
        if meter is not None:
            meter(n)
        return _text(buf[p + 4:p + 4 + n])

    def string(self, i: int, meter: Optional[Callable[[int], Any]] = None) -> str:
        """A string field ('' when absent); `meter(nbytes)` is called before it is decoded."""
        p = self._ref(i)
        return self._string_at(p, meter) if p else ""

    def table(self, i: int) -> Optional["Table"]:
        """A table field (None when absent)."""
        p = self._ref(i)
        return Table(self.buf, p) if p else None

    def vector(self, i: int, elem_size: int) -> Tuple[int, int]:
        """(start, length) of a vector field, checked to lie inside the buffer; (0, 0) if absent."""
        p = self._ref(i)
        if not p:
            return 0, 0
        n = _U32(self.buf, p)[0]
        if p + 4 + n * elem_size > len(self.buf):
            raise ValueError("a vector of %d elements at %d runs past the end of the buffer"
                             % (n, p))
        return p + 4, n

    def length(self, i: int) -> int:
        """The number of elements of a vector field of tables or strings."""
        return self.vector(i, 4)[1]

    def tables(self, i: int) -> List["Table"]:
        """A vector of tables."""
        start, n = self.vector(i, 4)
        buf = self.buf
        return [Table(buf, q + _U32(buf, q)[0]) for q in range(start, start + 4 * n, 4)]

    def strings(self, i: int, meter: Optional[Callable[[int], Any]] = None) -> List[str]:
        """A vector of strings; `meter(nbytes)` is called before each one is decoded."""
        start, n = self.vector(i, 4)
        buf = self.buf
        return [self._string_at(q + _U32(buf, q)[0], meter)
                for q in range(start, start + 4 * n, 4)]

    def numbers(self, i: int, dtype: Any) -> np.ndarray:
        """A vector of scalars as a numpy view (little-endian `dtype`)."""
        dt = np.dtype(dtype)
        start, n = self.vector(i, dt.itemsize)
        if not n:
            return np.zeros(0, dtype=dt)
        return np.frombuffer(self.buf, dtype=dt, count=n, offset=start)
