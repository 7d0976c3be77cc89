"""The C engine's struct layouts (edge/kernels/oxk.h) as its bindings see them (issue #16).

The compiled library states every public struct's size and each field's offset, size and kind
through `oxk_layout()` (layout.c). This module says, once for every binding (ctypes natively,
Pyodide's JS bridge in the page), which fields the Python code expects of each struct, in order,
with their kinds ('i' int32, 'f' float32, 'p' pointer, 'z' size_t); `check` refuses a library
whose table disagrees (Fail naming struct and field) and `pack` writes a struct's bytes from the
table's offsets and sizes, so no binding restates a layout (wasm32 has 4-byte pointers, the hosts 8).
Pure Python: the page runs it.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from onnxedge.errors import Fail

# struct name -> ((field, kind), ...) in declaration order (oxk.h).
FIELDS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "oxk_field": (("type", "p"), ("field", "p"), ("offset", "i"), ("size", "i"), ("kind", "i")),
    "oxk_epilogue": (("act", "i"), ("p0", "f"), ("p1", "f")),
    "oxk_sgemm_plan": (("transA", "i"), ("transB", "i"), ("N", "i"), ("K", "i"), ("alpha", "f"),
                       ("beta", "f"), ("packA", "p"), ("packB", "p"), ("bias", "p"),
                       ("bias_kind", "i"), ("act", "i"), ("p0", "f"), ("p1", "f")),
    "oxk_conv_plan": tuple((f, "i") for f in ("C", "H", "W", "Cout", "kh", "kw", "group", "sh", "sw",
                                               "dh", "dw", "pt", "pl", "pb", "pr", "OH", "OW", "act",
                                               "path"))
    + (("p0", "f"), ("p1", "f"), ("weight", "p"), ("packW", "p"), ("bias", "p")),
    "oxk_convt_plan": tuple((f, "i") for f in ("C", "H", "W", "Cout", "kh", "kw", "group", "sh", "sw",
                                                "dh", "dw", "pt", "pl", "OH", "OW", "act"))
    + (("p0", "f"), ("p1", "f"), ("weight", "p"), ("packW", "p"), ("bias", "p")),
    "oxk_pool_plan": tuple((f, "i") for f in ("H", "W", "kind", "kh", "kw", "sh", "sw", "dh", "dw",
                                               "pt", "pl", "pb", "pr", "count_include_pad", "OH", "OW")),
    "oxk_slot": (("kind", "i"), ("index", "i"), ("offset", "z"), ("data", "p")),
    "oxk_instr": (("op", "i"), ("n", "i"), ("args", "p"), ("slot", "i")),
    "oxk_gemm_args": (("plan", "p"), ("batch", "i"), ("stride_a", "i"), ("stride_b", "i"),
                      ("stride_c", "i")),
    "oxk_global_pool_args": (("kind", "i"), ("hw", "i")),
    "oxk_binary_args": tuple((f, "i") for f in ("op", "d0", "d1", "d2", "sa0", "sa1", "sa2", "sb0",
                                                 "sb1", "sb2")),
    "oxk_softmax_args": (("cols", "i"),),
    "oxk_attention_args": tuple((f, "i") for f in ("batch", "heads", "q_seq", "kv_seq", "head_size",
                                                    "v_head_size"))
    + (("scale", "f"), ("nan_to_zero", "i"), ("mask_stride", "i")),
    "oxk_matmul_args": (("plan", "p"),) + tuple((f, "i") for f in ("d0", "d1", "d2", "sa0", "sa1", "sa2",
                                                                    "sb0", "sb1", "sb2")),
    "oxk_rnn_args": tuple((f, "i") for f in ("kind", "seq", "batch", "input", "hidden", "dirs", "reverse",
                                              "linear_before_reset", "has_clip"))
    + (("clip", "f"), ("plans", "p"), ("peep", "p")),
    "oxk_copy_args": tuple((f, "i") for f in ("rank", "dims", "sa", "sy", "a_off", "y_off", "a_len",
                                               "y_len")),
    "oxk_gather_args": (("outer", "i"), ("axis", "i"), ("inner", "i"), ("count", "i"), ("wide", "i"),
                        ("index", "p")),
    "oxk_resample_args": tuple((f, "i") for f in ("planes", "ih", "iw", "oh", "ow", "ty", "tx"))
    + (("iy", "p"), ("wy", "p"), ("ix", "p"), ("wx", "p")),
    "oxk_norm_args": (("groups", "i"), ("cpg", "i"), ("inner", "i"), ("rms", "i"), ("per_group", "i"),
                      ("epsilon", "f")),
    "oxk_batchnorm_args": (("channels", "i"), ("inner", "i"), ("epsilon", "f")),
    "oxk_reduce_args": (("kind", "i"), ("r", "i"), ("inner", "i")),
    "oxk_qconv_plan": tuple((f, "i") for f in ("C", "H", "W", "Cout", "kh", "kw", "group", "sh", "sw",
                                               "dh", "dw", "pt", "pl", "pb", "pr", "OH", "OW", "x_type",
                                               "x_zero", "y_type", "y_zero", "qmin", "qmax", "per_channel"))
    + (("packW", "p"), ("bias", "p"), ("scale", "p")),
    "oxk_qgemm_plan": tuple((f, "i") for f in ("N", "K", "a_type", "a_zero", "y_type", "y_zero", "qmin",
                                               "qmax", "per_channel")) + (("packB", "p"), ("bias", "p"), ("scale", "p")),
    "oxk_quant_args": (("type", "i"), ("zero", "i"), ("scale", "f")),
    "oxk_qpool_args": tuple((f, "i") for f in ("hw", "x_type", "x_zero", "y_zero", "qmin", "qmax"))
    + (("scale", "f"),),
    "oxk_dql_args": (("part", "i"),),
    "oxk_program": (("n_instr", "i"), ("n_slots", "i"), ("instr", "p"), ("slots", "p")),
}

# A struct's layout as oxk_layout() states it: (size, [(field, offset, size, kind letter), ...]).
Layout = Tuple[int, List[Tuple[str, int, int, str]]]
Row = Tuple[str, str, int, int, str]   # (struct, field or "" for the struct's own row, offset, size, kind)
_ELEM = {"i": "i", "f": "f"}
_UNSIGNED = {4: "I", 8: "Q"}


def table_from_rows(rows: Iterable[Row]) -> Dict[str, Layout]:
    """{struct name: layout} from oxk_layout()'s rows, in order (a struct's own row first)."""
    table: Dict[str, Layout] = {}
    for name, field, offset, size, kind in rows:
        if not field:
            table[name] = (int(size), [])
        elif name not in table:
            raise Fail("kernel library layout: field %s.%s comes before struct %s's own row"
                       % (name, field, name))
        else:
            table[name][1].append((field, int(offset), int(size), kind))
    return table


def check(table: Dict[str, Layout], where: str = "kernel library") -> None:
    """Fail, naming the struct and the field, unless every struct of FIELDS is in `table` with
    exactly the expected fields, in order and of the expected kinds, each within the struct."""
    for name, want in FIELDS.items():
        if name not in table:
            raise Fail("%s layout: the module states no struct %s (it has %s)"
                       % (where, name, ", ".join(sorted(table)) or "none"))
        size, fields = table[name]
        for i, (field, kind) in enumerate(want):
            if i >= len(fields):
                raise Fail("%s layout: %s has no field %r (field %d); the binding expects %s"
                           % (where, name, field, i, [f for f, _ in want]))
            have, off, fsize, hkind = fields[i]
            if have != field or hkind != kind:
                raise Fail("%s layout: %s field %d is %r of kind %r in the module but %r of kind %r "
                           "in the binding" % (where, name, i, have, hkind, field, kind))
            if off < 0 or fsize <= 0 or off + fsize > size:
                raise Fail("%s layout: %s.%s at offset %d (%d bytes) lies outside the struct's %d "
                           "bytes" % (where, name, field, off, fsize, size))
        if len(fields) != len(want):
            raise Fail("%s layout: %s has %d fields in the module but %d in the binding (extra: %s)"
                       % (where, name, len(fields), len(want), [f[0] for f in fields[len(want):]]))


def pointer_size(table: Dict[str, Layout]) -> int:
    """Bytes of a pointer in the module the table describes (4 on wasm32, 8 on 64-bit hosts)."""
    return table["oxk_field"][1][0][2]


def _format(name: str, field: str, size: int, kind: str) -> str:
    if kind in ("p", "z"):
        if size not in _UNSIGNED:
            raise Fail("kernel library layout: %s.%s is a %d-byte %s; bindings take 4 or 8 bytes"
                       % (name, field, size, "pointer" if kind == "p" else "size_t"))
        return "<" + _UNSIGNED[size]
    if kind not in _ELEM or size % 4:
        raise Fail("kernel library layout: %s.%s has kind %r and %d bytes, which no binding packs"
                   % (name, field, kind, size))
    return "<%d%s" % (size // 4, _ELEM[kind])


class Packer:
    """Writes structs' bytes from a checked layout table (values in FIELDS order; an array field
    takes a sequence; pointers and sizes are ints, 0 or None for NULL)."""

    def __init__(self, table: Dict[str, Layout]):
        check(table)
        self.table = table
        self.pointer_size = pointer_size(table)
        self._fmt: Dict[str, Tuple[int, List[Tuple[struct.Struct, int, bool]]]] = {}
        for name in FIELDS:
            size, fields = table[name]
            self._fmt[name] = (size, [(struct.Struct(_format(name, f, fs, k)), off, fs // 4 > 1 and k in "if")
                                      for f, off, fs, k in fields])

    def size(self, name: str) -> int:
        """The struct's size in bytes."""
        return self._fmt[name][0]

    def pack_into(self, buf: bytearray, at: int, name: str, values: Sequence[Any]) -> None:
        """Write struct `name` with `values` into `buf` at byte `at`."""
        _, fmts = self._fmt[name]
        if len(values) != len(fmts):
            raise Fail("%s takes %d values (%s), got %d" % (name, len(fmts),
                                                           [f for f, _ in FIELDS[name]], len(values)))
        for (st, off, many), v in zip(fmts, values):
            if many:
                st.pack_into(buf, at + off, *v)
            else:
                st.pack_into(buf, at + off, 0 if v is None else v)

    def pack(self, name: str, values: Sequence[Any]) -> bytes:
        """Struct `name`'s bytes for `values`."""
        buf = bytearray(self.size(name))
        self.pack_into(buf, 0, name, values)
        return bytes(buf)

    def pack_array(self, name: str, rows: Sequence[Sequence[Any]]) -> bytes:
        """An array of struct `name`, one element per row of values."""
        size = self.size(name)
        buf = bytearray(size * max(1, len(rows)))
        for i, row in enumerate(rows):
            self.pack_into(buf, i * size, name, row)
        return bytes(buf)


__all__ = ["FIELDS", "Layout", "Packer", "Row", "check", "pointer_size", "table_from_rows"]
