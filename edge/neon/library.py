"""ctypes binding of libonnxedge_kernels (edge/kernels/): loading per machine and numpy wrappers.

The library lives in `lib/<arch>/libonnxedge_kernels.so` beside this module (built by
`edge/kernels/build.py`). On aarch64 it is the NEON build; on x86_64 the host build of the same
C kernels (SSE2/AVX2), so the provider and its tests also run natively. Every wrapper takes and
returns C-contiguous numpy arrays and raises onnxedge errors on bad arguments.
"""
from __future__ import annotations

import ctypes
import os
import platform
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import fused_ops, oxk_layout, oxk_rnn
from onnxedge.errors import Fail, InvalidArgument
from onnxedge.oxk_quant import CAST_FROM, QT
from onnxedge.oxk_program import (BINARY_OPS, OP_ACT, OP_BINARY, OP_CONV2D, OP_COPY,  # noqa: F401
                                  OP_GLOBAL_POOL, OP_LOGSOFTMAX, OP_POOL2D, OP_SGEMM, OP_SOFTMAX,
                                  SLOT_ARENA, SLOT_CONST, SLOT_INPUT, SLOT_OUTPUT, fold_broadcast)

LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
LIB_NAME = "libonnxedge_kernels"

# Epilogue activations (oxk.h OXK_ACT_*), bias placement and convolution paths.
ACT = dict(fused_ops.C_CODES)   # name -> OXK_ACT_* code (fused_ops.Activation)
BIAS_NONE, BIAS_ROW, BIAS_COL = 0, 1, 2
CONV_PATHS = {"auto": 0, "im2col": 1, "direct3x3": 2, "depthwise": 3, "lanes": 4, "depthwise_phases": 5,
              "lanes_packed": 6, "winograd": 7}

_c_int, _c_float, _c_size = ctypes.c_int, ctypes.c_float, ctypes.c_size_t
_ptr = ctypes.c_void_p
_SIGS = {
    "oxk_version": (_c_int, []),
    "oxk_backend": (ctypes.c_char_p, []),
    "oxk_set_num_threads": (_c_int, [_c_int]),
    "oxk_get_num_threads": (_c_int, []),
    "oxk_pack_a_size": (_c_size, [_c_int, _c_int]),
    "oxk_pack_b_size": (_c_size, [_c_int, _c_int]),
    "oxk_pack_a": (_c_int, [_c_int, _c_int, _c_int, _ptr, _c_int, _ptr]),
    "oxk_pack_b": (_c_int, [_c_int, _c_int, _c_int, _ptr, _c_int, _ptr]),
    "oxk_sgemm": (_c_int, [_c_int, _c_int, _c_int, _c_int, _c_int, _c_float, _ptr, _c_int, _ptr,
                           _ptr, _c_int, _ptr, _c_float, _ptr, _c_int, _ptr, _c_int, _c_int,
                           _c_float, _c_float]),
    "oxk_conv_pack_size": (_c_size, [_c_int] * 5),
    "oxk_conv_pack": (_c_int, [_ptr] + [_c_int] * 5 + [_ptr]),
    "oxk_conv_lanes_1x1": (_c_size, [_c_int] * 3),
    "oxk_conv_pack_lanes": (_c_int, [_ptr, _c_int, _c_int, _ptr]),
    "oxk_conv_winograd_size": (_c_size, [_c_int] * 11),
    "oxk_conv_winograd_pack_size": (_c_size, [_c_int] * 2),
    "oxk_conv_pack_winograd": (_c_int, [_ptr, _c_int, _c_int, _ptr]),
    "oxk_conv2d": (_c_int, [_ptr] + [_c_int] * 4 + [_ptr, _ptr] + [_c_int] * 12
                   + [_ptr, _c_int, _c_float, _c_float, _ptr, _c_int, _c_int, _c_int]),
    "oxk_pool2d": (_c_int, [_ptr] + [_c_int] * 15 + [_ptr, _c_int, _c_int]),
    "oxk_global_pool": (_c_int, [_ptr, _c_int, _c_int, _c_int, _ptr]),
    "oxk_qpack_b_size": (_c_size, [_c_int, _c_int]),
    "oxk_qpack_b": (_c_int, [_c_int, _c_int, _ptr, _c_int, _ptr]),
    "oxk_qgemm": (_c_int, [_c_int, _c_int, _c_int, _ptr, _c_int, _ptr, _c_int, _ptr, _c_int, _ptr,
                           _ptr, _c_int, _ptr]),
    "oxk_qgemm_has_dotprod": (_c_int, []),
    "oxk_sgemm_run": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr]),
    "oxk_conv2d_run": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_conv2d_run_z": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr]),
    "oxk_convt_pack_size": (_c_size, [_c_int] * 5),
    "oxk_convt_pack": (_c_int, [_ptr] + [_c_int] * 5 + [_ptr]),
    "oxk_conv_transpose2d_run": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_pool2d_run": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_ref_sgemm": (_c_int, [_c_int] * 5 + [_c_float, _ptr, _c_int, _ptr, _c_int, _c_float, _ptr,
                               _c_int, _ptr, _c_int, _c_int, _c_float, _c_float]),
    "oxk_ref_conv2d": (_c_int, [_ptr] + [_c_int] * 4 + [_ptr] + [_c_int] * 12
                       + [_ptr, _c_int, _c_float, _c_float, _ptr, _c_int, _c_int]),
    "oxk_ref_pool2d": (_c_int, [_ptr] + [_c_int] * 15 + [_ptr, _c_int, _c_int]),
    "oxk_ref_qgemm": (_c_int, [_c_int, _c_int, _c_int, _ptr, _c_int, _ptr, _c_int, _ptr, _c_int,
                               _ptr, _c_int, _ptr]),
    "oxk_program_run": (_c_int, [_ptr, _ptr, _ptr, _ptr]),
    "oxk_binary": (_c_int, [_ptr, _ptr, _ptr, _ptr]),
    "oxk_softmax": (_c_int, [_ptr, _c_int, _c_int, _c_int, _ptr]),
    "oxk_act": (_c_int, [_ptr, _c_int, _c_int, _c_float, _c_float, _ptr]),
    "oxk_qpack_rows_size": (_c_size, [_c_int, _c_int]),
    "oxk_qpack_rows": (_c_int, [_ptr, _c_int, _c_int, _c_int, _c_int, _c_int, _ptr, _c_int, _ptr]),
    "oxk_qpack_cols_size": (_c_size, [_c_int, _c_int]),
    "oxk_qpack_cols": (_c_int, [_ptr, _c_int, _c_int, _c_int, _c_int, _c_int, _ptr, _c_int, _ptr]),
    "oxk_qconv_run": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr]),
    "oxk_qgemm_run": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr]),
    "oxk_quantize": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_dequantize": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_qglobal_pool": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_dynamic_quantize": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr]),
    "oxk_strided_copy": (_c_int, [_ptr, _ptr, _ptr]),
    "oxk_gather": (_c_int, [_ptr, _ptr, _ptr, _ptr]),
    "oxk_resample": (_c_int, [_ptr, _ptr, _ptr]),
    "oxk_norm": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr, _ptr]),
    "oxk_batchnorm": (_c_int, [_ptr, _c_int] + [_ptr] * 6),
    "oxk_reduce": (_c_int, [_ptr, _c_int, _ptr, _ptr]),
    "oxk_rnn_scratch_floats": (_c_size, [_ptr]),
    "oxk_rnn": (_c_int, [_ptr] + [_ptr] * 7),
    "oxk_attention": (_c_int, [_ptr] * 7),
    "oxk_attention_scratch_size": (_c_size, [_ptr]),
    "oxk_matmul": (_c_int, [_ptr, _c_int, _ptr, _ptr, _ptr]),
}
# Program opcodes, slot kinds, binary ops and fold_broadcast come from the shared binding
# (onnxedge.oxk_program), imported above.


class _Field(ctypes.Structure):
    """oxk_field, the one layout this binding states itself: it reads every other one from
    oxk_layout() (and checks this one against the table's own row)."""
    _fields_ = [("type", ctypes.c_char_p), ("field", ctypes.c_char_p), ("offset", _c_int),
                ("size", _c_int), ("kind", _c_int)]


Layout = oxk_layout.Layout   # (size, [(field, offset, size, kind letter), ...])
_SIZED = {"i": {4: ctypes.c_int32}, "f": {4: ctypes.c_float}, "p": {ctypes.sizeof(_ptr): _ptr},
          "z": {4: ctypes.c_uint32, 8: ctypes.c_uint64}}


def read_layout(clib: Any) -> Dict[str, Layout]:
    """{struct name: layout} from a loaded library's oxk_layout()."""
    fn = clib.oxk_layout
    fn.restype, fn.argtypes = ctypes.POINTER(_Field), [ctypes.POINTER(_c_int)]
    count = _c_int(0)
    rows = fn(ctypes.byref(count))
    return oxk_layout.table_from_rows(
        (r.type.decode(), r.field.decode(), int(r.offset), int(r.size), chr(r.kind))
        for r in (rows[i] for i in range(count.value)))


def _ctype(struct: str, field: str, size: int, kind: str) -> Any:
    """The ctypes type of one field: its kind's element, an array when the size holds several."""
    for elem_size, elem in _SIZED.get(kind, {}).items():
        if size == elem_size:
            return elem
        if size % elem_size == 0 and kind in "if":
            return elem * (size // elem_size)
    raise Fail("kernel library layout: %s.%s has kind %r and %d bytes, which this binding has no "
               "ctypes type for" % (struct, field, kind, size))


def check_structure(cls: Any, name: str, table: Dict[str, Layout]) -> None:
    """Fail (naming the struct and the field) unless ctypes Structure `cls` has exactly the
    layout the library states for `name`: the same fields, in order, at the same offsets and sizes,
    and the same total size."""
    if name not in table:
        raise Fail("kernel library layout: the library states no struct %s (it has %s)"
                   % (name, ", ".join(sorted(table))))
    size, fields = table[name]
    mine = [(f[0], getattr(cls, f[0]).offset, getattr(cls, f[0]).size) for f in cls._fields_]
    for i, (field, off, fsize, _) in enumerate(fields):
        if i >= len(mine) or mine[i][0] != field:
            raise Fail("kernel library layout: %s field %d is %r in the library but %r in the binding"
                       % (name, i, field, mine[i][0] if i < len(mine) else None))
        if (mine[i][1], mine[i][2]) != (off, fsize):
            raise Fail("kernel library layout: %s.%s is at offset %d (%d bytes) in the library but at "
                       "%d (%d bytes) in the binding" % (name, field, off, fsize, mine[i][1], mine[i][2]))
    if len(mine) != len(fields):
        raise Fail("kernel library layout: %s has %d fields in the library but %d in the binding "
                   "(extra: %s)" % (name, len(fields), len(mine), [m[0] for m in mine[len(fields):]]))
    if ctypes.sizeof(cls) != size:
        raise Fail("kernel library layout: %s is %d bytes in the library but %d in the binding"
                   % (name, size, ctypes.sizeof(cls)))


def structures(table: Dict[str, Layout]) -> Dict[str, Any]:
    """A ctypes Structure class per struct of the table, built from it (so oxk.h is the only place
    a layout is written) and checked against it (a compiler that pads differently is refused) and
    against the fields the Python code expects (oxk_layout.FIELDS: names and kinds)."""
    check_structure(_Field, "oxk_field", table)
    oxk_layout.check(table)
    out: Dict[str, Any] = {}
    for name, (_, fields) in table.items():
        cls = type(name, (ctypes.Structure,), {"_fields_": [
            (f, _ctype(name, f, size, kind)) for f, _, size, kind in fields]})
        check_structure(cls, name, table)
        out[name] = cls
    return out


_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof
_pointer_at = ctypes.c_void_p.from_address
_ndarray = np.ndarray


def _data_field_offset() -> Optional[int]:
    """Where CPython's numpy keeps an array's data pointer in the array object (`id(a)` is the
    object's address there): found and checked once on arrays of several kinds, so `data_address`
    reads the pointer in one step; None (the `__array_interface__` path) where that does not hold
    (another Python, a debug build)."""
    base = np.arange(24, dtype=np.float32)
    samples = [base, base[5:], base.reshape(4, 6)[1:], np.zeros(0, np.float64), np.int64(7) + base]
    for off in (2 * ctypes.sizeof(ctypes.c_void_p),):
        try:
            if all(_pointer_at(id(s) + off).value == s.__array_interface__["data"][0]
                   for s in samples):
                return off
        except (ValueError, OverflowError):
            pass
    return None


_DATA_OFFSET = _data_field_offset()


def data_address(a: np.ndarray) -> Tuple[np.ndarray, int]:
    """(a, address of its first element) for a C-contiguous numpy array (read-only too), cheaply
    (no `.ctypes` or `__array_interface__` object); any other array is first made C-contiguous (a
    copy when it is not)."""
    if type(a) is not _ndarray or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if _DATA_OFFSET is not None:
        return a, _pointer_at(id(a) + _DATA_OFFSET).value or 0
    return a, a.__array_interface__["data"][0]


class Plan:
    """A kernel call with every constant argument bound once in a C struct (read-only, so one plan
    serves many threads): `fn(addr, n, *pointers)` converts only the per-call arguments. `keep`
    holds the arrays the struct points into."""

    def __init__(self, lib: "KernelLibrary", fn_name: str, struct: ctypes.Structure, keep: Sequence[Any]):
        self.lib = lib
        self.fn = getattr(lib._lib, fn_name)
        self.struct = struct
        self.addr = ctypes.addressof(struct)
        self.keep = tuple(keep)


def machine_arch() -> str:
    """This machine's library folder: 'aarch64' or 'x86_64' (others as platform names them)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def library_path(variant: str = "", arch: Optional[str] = None) -> str:
    """Path of the library for `arch` (default: this machine); variant '' or 'generic'."""
    name = LIB_NAME + ("_" + variant if variant else "") + ".so"
    return os.path.join(LIB_DIR, arch or machine_arch(), name)


def _p(a: Optional[np.ndarray]) -> Optional[int]:
    return None if a is None else a.ctypes.data


def _f32(name: str, a: np.ndarray) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype != np.float32:
        raise InvalidArgument("%s must be a float32 numpy array, got %s"
                              % (name, getattr(a, "dtype", type(a).__name__)))
    return np.ascontiguousarray(a)


class KernelLibrary:
    """One loaded libonnxedge_kernels with typed numpy-level calls."""

    def __init__(self, path: str):
        if not os.path.exists(path):
            raise Fail("kernel library %s does not exist: build it with "
                       "`python edge/kernels/build.py` (make setup does)" % path)
        try:
            self._lib = ctypes.CDLL(path)
        except OSError as e:
            raise Fail("kernel library %s does not load on this machine: %s" % (path, e)) from e
        for name, (res, args) in _SIGS.items():
            fn = getattr(self._lib, name)
            fn.restype, fn.argtypes = res, args
        self.path = path
        self.layout = read_layout(self._lib)
        self.structs = structures(self.layout)
        self.backend = self._lib.oxk_backend().decode()
        self.version = self._lib.oxk_version()

    def _check(self, rc: int, what: str) -> None:
        if rc == -2:
            raise Fail("%s: the kernel library (%s) ran out of memory" % (what, self.backend))
        if rc != 0:
            raise InvalidArgument("%s: the kernel library (%s) rejected the arguments (code %d)"
                                  % (what, self.backend, rc))

    # ---------------------------------------------------------------- threads
    def set_num_threads(self, n: int) -> int:
        """Size the library's thread pool (0: one per CPU); returns the size in effect."""
        return int(self._lib.oxk_set_num_threads(int(n)))

    def num_threads(self) -> int:
        """The thread pool's size."""
        return int(self._lib.oxk_get_num_threads())

    def has_dotprod(self) -> bool:
        """True when the int8 GEMM uses the CPU's dot-product instructions (vdotq_s32)."""
        return bool(self._lib.oxk_qgemm_has_dotprod())

    # ---------------------------------------------------------------- sgemm
    def pack_a(self, a: np.ndarray, trans_a: bool = False) -> np.ndarray:
        """Pack op(A) (M x K) into the micro-kernel's row panels (weights: once, at compile)."""
        a = _f32("A", a)
        M, K = (a.shape[1], a.shape[0]) if trans_a else a.shape
        out = np.empty(self._lib.oxk_pack_a_size(M, K), np.float32)
        self._check(self._lib.oxk_pack_a(int(trans_a), M, K, _p(a), a.shape[1], _p(out)), "pack_a")
        return out

    def pack_b(self, b: np.ndarray, trans_b: bool = False) -> np.ndarray:
        """Pack op(B) (K x N) into the micro-kernel's column panels."""
        b = _f32("B", b)
        K, N = (b.shape[1], b.shape[0]) if trans_b else b.shape
        out = np.empty(self._lib.oxk_pack_b_size(N, K), np.float32)
        self._check(self._lib.oxk_pack_b(int(trans_b), N, K, _p(b), b.shape[1], _p(out)), "pack_b")
        return out

    def sgemm(self, a: np.ndarray, b: np.ndarray, trans_a: bool = False, trans_b: bool = False,
              alpha: float = 1.0, beta: float = 0.0, c: Optional[np.ndarray] = None,
              bias: Optional[np.ndarray] = None, bias_kind: int = BIAS_NONE, act: str = "",
              act_params: Sequence[float] = (), packed_a: Optional[np.ndarray] = None,
              packed_b: Optional[np.ndarray] = None, out: Optional[np.ndarray] = None,
              reference: bool = False) -> np.ndarray:
        """act(alpha * op(A) @ op(B) + beta * C + bias) as a new (M, N) array.

        `c` (M, N) is read when beta != 0; `bias` is (M,) for BIAS_ROW or (N,) for BIAS_COL;
        `reference=True` runs the scalar reference kernel instead."""
        a, b = _f32("A", a), _f32("B", b)
        if a.ndim != 2 or b.ndim != 2:
            raise InvalidArgument("sgemm: A and B must be 2-D, got shapes %s and %s" % (a.shape, b.shape))
        M, K = (a.shape[1], a.shape[0]) if trans_a else a.shape
        K2, N = (b.shape[1], b.shape[0]) if trans_b else b.shape
        if K != K2:
            raise InvalidArgument("sgemm: op(A) is %dx%d but op(B) is %dx%d" % (M, K, K2, N))
        if out is None:
            out = np.empty((M, N), np.float32)
        if beta != 0.0:
            if c is None:
                raise InvalidArgument("sgemm: beta=%g needs C" % beta)
            np.copyto(out, np.broadcast_to(c, (M, N)))
        if bias is not None:
            bias = _f32("bias", bias)
            want = M if bias_kind == BIAS_ROW else N
            if bias.size != want:
                raise InvalidArgument("sgemm: bias has %d values, expected %d" % (bias.size, want))
        p0, p1 = _act_params(act, act_params)
        if reference:
            rc = self._lib.oxk_ref_sgemm(int(trans_a), int(trans_b), M, N, K, alpha, _p(a), a.shape[1],
                                         _p(b), b.shape[1], beta, _p(out), N, _p(bias), bias_kind,
                                         ACT[act], p0, p1)
        else:
            rc = self._lib.oxk_sgemm(int(trans_a), int(trans_b), M, N, K, alpha, _p(a), a.shape[1],
                                     _p(packed_a), _p(b), b.shape[1], _p(packed_b), beta, _p(out), N,
                                     _p(bias), bias_kind, ACT[act], p0, p1)
        self._check(rc, "sgemm %dx%dx%d" % (M, N, K))
        return out

    # ---------------------------------------------------------------- conv
    def conv_pack(self, w: np.ndarray, group: int) -> np.ndarray:
        """Pack conv weights (Cout, Cin/group, kh, kw) once for oxk_conv2d's im2col path."""
        w = _f32("W", w)
        co, ci, kh, kw = w.shape
        out = np.empty(self._lib.oxk_conv_pack_size(co, ci, kh, kw, group), np.float32)
        self._check(self._lib.oxk_conv_pack(_p(w), co, ci, kh, kw, group, _p(out)), "conv_pack")
        return out

    def conv_lanes_fits(self, w: np.ndarray, positions: int) -> bool:
        """Whether a pointwise conv with weights w (Cout, Cin, 1, 1) over `positions` output
        positions runs faster on path 'lanes_packed' (oxk_conv_lanes_1x1) with this library here."""
        return bool(self._lib.oxk_conv_lanes_1x1(int(w.shape[0]), int(np.prod(w.shape[1:])), int(positions)))

    def conv_pack_lanes(self, w: np.ndarray) -> np.ndarray:
        """A pointwise conv's weights (Cout, Cin, 1, 1) packed for path 'lanes_packed'."""
        w = _f32("W", w)
        co, ci = w.shape[0], int(np.prod(w.shape[1:]))
        out = np.empty(self._lib.oxk_pack_b_size(co, ci), np.float32)
        self._check(self._lib.oxk_conv_pack_lanes(_p(w), co, ci, _p(out)), "conv_pack_lanes")
        return out

    def conv_winograd_fits(self, w: np.ndarray, group: int, strides: Sequence[int], dilations: Sequence[int],
                           out_hw: Sequence[int]) -> bool:
        """Whether a conv with weights w (Cout, Cin/group, kh, kw), this geometry and outputs out_hw
        runs on path 'winograd' with this library (oxk_conv_winograd_size: 3x3 stride 1, group 1,
        enough channels and outputs)."""
        co, ci, kh, kw = (int(d) for d in w.shape)
        return bool(self._lib.oxk_conv_winograd_size(co, ci, kh, kw, int(group), int(strides[0]), int(strides[1]),
                                                     int(dilations[0]), int(dilations[1]),
                                                     int(out_hw[0]), int(out_hw[1])))

    def conv_pack_winograd(self, w: np.ndarray) -> np.ndarray:
        """3x3 weights (Cout, Cin, 3, 3) transformed and packed for path 'winograd'."""
        w = _f32("W", w)
        if w.ndim != 4 or w.shape[2:] != (3, 3):
            raise InvalidArgument("conv_pack_winograd: weights must be (Cout, Cin, 3, 3), got %s" % (w.shape,))
        co, ci = w.shape[:2]
        out = np.empty(self._lib.oxk_conv_winograd_pack_size(co, ci), np.float32)
        self._check(self._lib.oxk_conv_pack_winograd(_p(w), co, ci, _p(out)), "conv_pack_winograd")
        return out

    def conv2d(self, x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], group: int,
               strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
               out_hw: Sequence[int], act: str = "", act_params: Sequence[float] = (),
               packed_w: Optional[np.ndarray] = None, path: str = "auto",
               reference: bool = False) -> np.ndarray:
        """2-D convolution NCHW; pads = (top, left, bottom, right); returns (N, Cout, OH, OW)."""
        x, w = _f32("X", x), _f32("W", w)
        if bias is not None:
            bias = _f32("B", bias)
        N, C, H, W = x.shape
        co, ci, kh, kw = w.shape
        if ci * group != C:
            raise InvalidArgument("conv2d: X has %d channels, W expects %d x group %d" % (C, ci, group))
        OH, OW = int(out_hw[0]), int(out_hw[1])
        y = np.empty((N, co, OH, OW), np.float32)
        p0, p1 = _act_params(act, act_params)
        args = [int(strides[0]), int(strides[1]), int(dilations[0]), int(dilations[1])] + \
            [int(p) for p in pads]
        if reference:
            rc = self._lib.oxk_ref_conv2d(_p(x), N, C, H, W, _p(w), co, kh, kw, group, *args,
                                          _p(bias), ACT[act], p0, p1, _p(y), OH, OW)
        else:
            rc = self._lib.oxk_conv2d(_p(x), N, C, H, W, _p(w), _p(packed_w), co, kh, kw, group, *args,
                                      _p(bias), ACT[act], p0, p1, _p(y), OH, OW, CONV_PATHS[path])
        self._check(rc, "conv2d %s * %s (group %d, path %s)" % (x.shape, w.shape, group, path))
        return y

    # ---------------------------------------------------------------- compiled calls
    def function(self, name: str) -> Any:
        """The typed ctypes function `name` of the C API (oxk.h), for callers that bind once."""
        if name not in _SIGS:
            raise InvalidArgument("%s is not a function of the kernel library's C API" % name)
        return getattr(self._lib, name)

    def check(self, rc: int, what: str) -> None:
        """Raise the project's error for a non-zero kernel return code."""
        self._check(rc, what)

    def sgemm_plan(self, n: int, k: int, trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0,
                   packed_b: Optional[np.ndarray] = None, bias: Optional[np.ndarray] = None,
                   act: str = "", act_params: Sequence[float] = ()) -> Plan:
        """oxk_sgemm_run's plan: C (M x n) = act(alpha * op(A) @ op(B) + bias) for any M, with bias
        (n,) added to every row; B is `packed_b` (pack_b's output) or passed per call."""
        p0, p1 = _act_params(act, act_params)
        if bias is not None:
            bias = np.ascontiguousarray(bias, np.float32)
            if bias.size != n:
                raise InvalidArgument("sgemm plan: bias has %d values, expected %d" % (bias.size, n))
        st = self.structs["oxk_sgemm_plan"](
            int(trans_a), int(trans_b), int(n), int(k), float(alpha), 0.0, None,
            _p(packed_b), _p(bias), BIAS_NONE if bias is None else BIAS_COL, ACT[act], p0, p1)
        return Plan(self, "oxk_sgemm_run", st, [packed_b, bias])

    def conv_plan(self, x_shape: Sequence[int], w: np.ndarray, bias: Optional[np.ndarray], group: int,
                  strides: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
                  out_hw: Sequence[int], act: str = "", act_params: Sequence[float] = (),
                  packed_w: Optional[np.ndarray] = None, path: str = "auto") -> Plan:
        """oxk_conv2d_run's plan for inputs (any N, C, H, W) = x_shape; pads = (t, l, b, r)."""
        w = _f32("W", w)
        bias = None if bias is None else _f32("B", bias)
        _, C, H, W = (int(d) for d in x_shape)
        co, ci, kh, kw = w.shape
        if ci * group != C:
            raise InvalidArgument("conv2d: X has %d channels, W expects %d x group %d" % (C, ci, group))
        p0, p1 = _act_params(act, act_params)
        st = self.structs["oxk_conv_plan"](
            C, H, W, co, kh, kw, group, int(strides[0]), int(strides[1]), int(dilations[0]),
            int(dilations[1]), *[int(p) for p in pads], int(out_hw[0]), int(out_hw[1]), ACT[act],
            CONV_PATHS[path], p0, p1, _p(w), _p(packed_w), _p(bias))
        return Plan(self, "oxk_conv2d_run", st, [w, packed_w, bias])

    def convt_pack(self, w: np.ndarray, group: int) -> np.ndarray:
        """Pack ConvTranspose weights (C, Cout/group, kh, kw) once: W_g^T, the GEMM's A."""
        w = _f32("W", w)
        c, cog, kh, kw = w.shape
        out = np.empty(self._lib.oxk_convt_pack_size(c, cog, kh, kw, group), np.float32)
        self._check(self._lib.oxk_convt_pack(_p(w), c, cog, kh, kw, group, _p(out)), "convt_pack")
        return out

    def convt_plan(self, x_shape: Sequence[int], w: np.ndarray, bias: Optional[np.ndarray], group: int,
                   strides: Sequence[int], dilations: Sequence[int], pad_begins: Sequence[int],
                   out_hw: Sequence[int], act: str = "", act_params: Sequence[float] = (),
                   packed_w: Optional[np.ndarray] = None) -> Plan:
        """oxk_conv_transpose2d_run's plan for inputs (any N, C, H, W) = x_shape; W is (C,
        Cout/group, kh, kw); pad_begins = (top, left); out_hw the output's (OH, OW)."""
        w = _f32("W", w)
        bias = None if bias is None else _f32("B", bias)
        _, C, H, W = (int(d) for d in x_shape)
        c, cog, kh, kw = w.shape
        if c != C or group < 1 or C % group:
            raise InvalidArgument("conv_transpose: X has %d channels, W has %d (group %d)" % (C, c, group))
        p0, p1 = _act_params(act, act_params)
        st = self.structs["oxk_convt_plan"](
            C, H, W, cog * group, kh, kw, group, int(strides[0]), int(strides[1]), int(dilations[0]),
            int(dilations[1]), int(pad_begins[0]), int(pad_begins[1]), int(out_hw[0]), int(out_hw[1]),
            ACT[act], p0, p1, _p(w), _p(packed_w), _p(bias))
        return Plan(self, "oxk_conv_transpose2d_run", st, [w, packed_w, bias])

    def conv_transpose2d(self, x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], group: int,
                         strides: Sequence[int], dilations: Sequence[int], pad_begins: Sequence[int],
                         out_hw: Sequence[int], act: str = "", act_params: Sequence[float] = (),
                         packed_w: Optional[np.ndarray] = None) -> np.ndarray:
        """2-D transposed convolution NCHW through a one-off plan; returns (N, Cout, OH, OW)."""
        x = _f32("X", x)
        plan = self.convt_plan(x.shape, w, bias, group, strides, dilations, pad_begins, out_hw, act,
                               act_params, packed_w)
        y = np.empty((x.shape[0], plan.struct.Cout, int(out_hw[0]), int(out_hw[1])), np.float32)
        self._check(plan.fn(plan.addr, x.shape[0], _p(x), _p(y)),
                    "conv_transpose2d %s * %s (group %d)" % (x.shape, w.shape, group))
        return y

    def pool_plan(self, x_shape: Sequence[int], kind: str, kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int], pads: Sequence[int], out_hw: Sequence[int],
                  count_include_pad: bool = False) -> Plan:
        """oxk_pool2d_run's plan for (N, C, H, W) = x_shape inputs; pads = (t, l, b, r)."""
        st = self.structs["oxk_pool_plan"](
            int(x_shape[2]), int(x_shape[3]), {"max": 0, "avg": 1}[kind], int(kernel[0]),
            int(kernel[1]), int(strides[0]), int(strides[1]), int(dilations[0]), int(dilations[1]),
            *[int(p) for p in pads], int(count_include_pad), int(out_hw[0]), int(out_hw[1]))
        return Plan(self, "oxk_pool2d_run", st, [])

    # ---------------------------------------------------------------- pools
    def pool2d(self, x: np.ndarray, kind: str, kernel: Sequence[int], strides: Sequence[int],
               dilations: Sequence[int], pads: Sequence[int], out_hw: Sequence[int],
               count_include_pad: bool = False, reference: bool = False) -> np.ndarray:
        """Max ('max') or average ('avg') pooling of (N, C, H, W); pads = (t, l, b, r)."""
        x = _f32("X", x)
        N, C, H, W = x.shape
        OH, OW = int(out_hw[0]), int(out_hw[1])
        y = np.empty((N, C, OH, OW), np.float32)
        args = [N * C, H, W, {"max": 0, "avg": 1}[kind], int(kernel[0]), int(kernel[1]),
                int(strides[0]), int(strides[1]), int(dilations[0]), int(dilations[1])] + \
            [int(p) for p in pads] + [int(count_include_pad)]
        fn = self._lib.oxk_ref_pool2d if reference else self._lib.oxk_pool2d
        self._check(fn(_p(x), *args, _p(y), OH, OW), "pool2d %s %s" % (kind, x.shape))
        return y

    def global_pool(self, x: np.ndarray, kind: str) -> np.ndarray:
        """Global max/average over every axis after the first two: (N, C, ...) -> (N, C, 1, ...)."""
        x = _f32("X", x)
        hw = int(np.prod(x.shape[2:])) if x.ndim > 2 else 1
        y = np.empty(x.shape[:2] + (1,) * (x.ndim - 2), np.float32)
        self._check(self._lib.oxk_global_pool(_p(x), x.shape[0] * x.shape[1], hw,
                                              {"max": 0, "avg": 1}[kind], _p(y)),
                    "global pool %s %s" % (kind, x.shape))
        return y

    # ---------------------------------------------------------------- program ops
    def act(self, x: np.ndarray, act: str, act_params: Sequence[float] = ()) -> np.ndarray:
        """act(x) elementwise (an OXK_ACT_* activation) as a new array of x's shape."""
        x = _f32("X", x)
        p0, p1 = _act_params(act, act_params)
        y = np.empty_like(x)
        self._check(self._lib.oxk_act(_p(x), x.size, ACT[act], p0, p1, _p(y)), "act %s" % act)
        return y

    def binary(self, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a op b (Add/Sub/Mul/Div/Pow/Max/Min) with numpy broadcasting, when the broadcast folds into
        oxk_binary's three axes (InvalidArgument otherwise)."""
        a, b = _f32("A", a), _f32("B", b)
        shape = np.broadcast(a, b).shape
        folded = fold_broadcast(a.shape, b.shape, shape)
        if folded is None:
            raise InvalidArgument("binary %s: shapes %s and %s broadcast over more than 3 axes"
                                  % (op, a.shape, b.shape))
        st = self.structs["oxk_binary_args"](BINARY_OPS[op], *folded)
        y = np.empty(shape, np.float32)
        self._check(self._lib.oxk_binary(ctypes.addressof(st), _p(a), _p(b), _p(y)), "binary %s" % op)
        return y

    def softmax(self, x: np.ndarray, log: bool = False) -> np.ndarray:
        """Softmax (LogSoftmax when `log`) over the last axis."""
        x = _f32("X", x)
        cols = x.shape[-1] if x.ndim else 1
        y = np.empty_like(x)
        rows = x.size // cols if cols else 0
        self._check(self._lib.oxk_softmax(_p(x), rows, cols, int(log), _p(y)), "softmax")
        return y

    # ---------------------------------------------------------------- data movement
    def movement(self, plan: Any, xs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """The outputs of an onnxedge.oxk_movement plan run step by step on the C kernels
        (oxk_strided_copy, oxk_gather, oxk_resample) over float32 inputs `xs` (its data inputs)."""
        xs = [np.ascontiguousarray(x) if i and x.dtype.kind in "iu" else _f32("X", x) for i, x in enumerate(xs)]
        outs = [np.empty(s, np.float32) for s in plan.out_shapes]
        S, keep = self.structs, []
        for st in plan.steps:
            y = outs[st.dst]
            if st.kind == "fill":
                a = np.array([st.value], np.float32)
            else:
                a = outs[-1 - st.src] if st.src < 0 else xs[st.src]
            b = None
            if st.kind in ("copy", "fill"):
                args, fn = S["oxk_copy_args"](*st.args), self._lib.oxk_strided_copy
            elif st.kind == "gather":
                if st.tables:
                    keep = [np.ascontiguousarray(st.tables[0], np.int32)]
                    args = S["oxk_gather_args"](*st.args, 0, keep[0].ctypes.data)
                else:   # the indices are data input 1, read by the kernel
                    if xs[1].dtype not in (np.int32, np.int64):
                        raise InvalidArgument("gather: indices must be int32 or int64, got %s" % xs[1].dtype)
                    b = _p(xs[1])
                    args = S["oxk_gather_args"](*st.args, int(xs[1].dtype == np.int64), None)
                fn = self._lib.oxk_gather
            else:
                keep = [np.ascontiguousarray(t, np.int32 if i % 2 == 0 else np.float32)
                        for i, t in enumerate(st.tables)]
                args = S["oxk_resample_args"](*st.args, *[t.ctypes.data for t in keep])
                fn = self._lib.oxk_resample
            call = (ctypes.addressof(args), _p(a)) + ((b,) if st.kind == "gather" else ()) + (_p(y),)
            self._check(fn(*call), "%s step" % st.kind)
        del keep
        return outs

    # ---------------------------------------------------------------- attention, computed MatMul
    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: Optional[np.ndarray],
                  args: Sequence[Any], scratch: int) -> np.ndarray:
        """oxk_attention with `args` (oxk_attention_args' values, onnxedge.oxk_program.attention_args)
        and a scratch of `scratch` floats: [batch, q_seq, heads * v_head_size]."""
        q, k, v = _f32("Q", q), _f32("K", k), _f32("V", v)
        mask = None if mask is None else _f32("mask", mask)
        st = self.structs["oxk_attention_args"](*args)
        y = np.empty((st.batch, st.q_seq, st.heads * st.v_head_size), np.float32)
        work = np.empty(max(1, scratch), np.float32)
        self._check(self._lib.oxk_attention(ctypes.addressof(st), _p(q), _p(k), _p(v), _p(mask),
                                            _p(work), _p(y)), "attention")
        return y

    def matmul(self, a: np.ndarray, b: np.ndarray, M: int, N: int, K: int, folded: Sequence[int],
               out_shape: Sequence[int], trans_b: bool = False, bias: Optional[np.ndarray] = None,
               act: str = "", act_params: Sequence[float] = ()) -> np.ndarray:
        """oxk_matmul: A @ op(B) over broadcast batches as onnxedge.oxk_program.matmul_geometry
        lays them out (M, K, N, `folded` strides), into a new array of `out_shape`."""
        a, b = _f32("A", a), _f32("B", b)
        plan = self.sgemm_plan(N, K, False, trans_b, bias=bias, act=act, act_params=act_params)
        st = self.structs["oxk_matmul_args"](plan.addr, *folded)
        y = np.empty(tuple(out_shape), np.float32)
        self._check(self._lib.oxk_matmul(ctypes.addressof(st), M, _p(a), _p(b), _p(y)),
                    "matmul %dx%dx%d" % (M, N, K))
        return y

    # ---------------------------------------------------------------- normalizations, reductions
    def norm(self, x: np.ndarray, rows: int, args: Sequence[Any], scale: Optional[np.ndarray],
             bias: Optional[np.ndarray]) -> np.ndarray:
        """oxk_norm over `rows` rows of x with `args` (oxk_norm_args' values,
        onnxedge.oxk_program.norm_args); scale and bias as the args say (None: absent)."""
        x = _f32("X", x)
        scale = None if scale is None else _f32("scale", scale)
        bias = None if bias is None else _f32("bias", bias)
        st = self.structs["oxk_norm_args"](*args)
        y = np.empty_like(x)
        self._check(self._lib.oxk_norm(ctypes.addressof(st), int(rows), _p(x), _p(scale), _p(bias), _p(y)),
                    "norm %s" % (x.shape,))
        return y

    def batchnorm(self, x: np.ndarray, outer: int, args: Sequence[Any], scale: np.ndarray,
                  bias: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        """oxk_batchnorm (inference BatchNormalization) with `args` (oxk_batchnorm_args' values,
        onnxedge.oxk_program.batchnorm_args)."""
        x = _f32("X", x)
        p = [_f32(n, v) for n, v in (("scale", scale), ("B", bias), ("mean", mean), ("var", var))]
        st = self.structs["oxk_batchnorm_args"](*args)
        y = np.empty_like(x)
        self._check(self._lib.oxk_batchnorm(ctypes.addressof(st), int(outer), _p(x), *[_p(v) for v in p],
                                            _p(y)), "batchnorm %s" % (x.shape,))
        return y

    def reduce(self, x: np.ndarray, outer: int, args: Sequence[int], out_shape: Sequence[int]) -> np.ndarray:
        """oxk_reduce with `args` (oxk_reduce_args' values, onnxedge.oxk_program.reduce_args):
        a new array of `out_shape`."""
        x = _f32("X", x)
        st = self.structs["oxk_reduce_args"](*args)
        y = np.empty(tuple(out_shape), np.float32)
        self._check(self._lib.oxk_reduce(ctypes.addressof(st), int(outer), _p(x), _p(y)),
                    "reduce %s" % (x.shape,))
        return y

    # ---------------------------------------------------------------- int8
    def rnn_plans(self, node: Any, w: np.ndarray, r: np.ndarray, b: Optional[np.ndarray],
                  p: Optional[np.ndarray]) -> "oxk_rnn.RnnPlans":
        """LSTM / GRU `node`'s constant weights packed once (oxk_rnn_args.plans, 3 per direction)."""
        op = node.op_type
        dirs, gh, inp = w.shape
        hid = r.shape[-1]
        lbr = bool(node.attributes.get("linear_before_reset", 0)) if op == "GRU" else False
        S = self.structs["oxk_sgemm_plan"]
        rows, keep = [], []
        for per_dir in oxk_rnn.weights(op, w, r, b, lbr):
            for operand in per_dir:
                if operand is None:   # LSTM's unread third plan
                    rows.append(rows[-1])
                    continue
                mat, bias = operand
                plan = self.sgemm_plan(mat.shape[0], mat.shape[1], trans_b=True,
                                       packed_b=self.pack_b(mat, True), bias=bias)
                keep.append(plan)
                rows.append(plan.struct)
        arr = (S * len(rows))(*rows)
        peep = None if p is None else np.ascontiguousarray(p, np.float32).reshape(dirs, 3 * hid)
        return oxk_rnn.RnnPlans(node, ctypes.addressof(arr), _p(peep) or 0, inp, hid, dirs,
                                keep + [arr, peep])

    def rnn(self, plans: "oxk_rnn.RnnPlans", x: np.ndarray, h0: Optional[np.ndarray] = None,
            c0: Optional[np.ndarray] = None) -> List[np.ndarray]:
        """Y, Y_h (and LSTM's Y_c) of oxk_rnn over X [seq, batch, input] with the packed plans."""
        x = _f32("X", x)
        bad = plans.check_input(x.shape)
        if bad:
            raise InvalidArgument("%s: %s" % (plans.op, bad))
        seq, batch = int(x.shape[0]), int(x.shape[1])
        st = (plans.dirs, batch, plans.hidden)
        states = []
        for name, v in (("initial_h", h0), ("initial_c", c0)):
            if v is not None and tuple(v.shape) != st:
                raise InvalidArgument("%s: %s of shape %s, expected %s" % (plans.op, name, v.shape, st))
            states.append(None if v is None else _f32(name, v))
        outs = [np.empty(s, np.float32) for s in plans.out_shapes(seq, batch)]
        args = self.structs["oxk_rnn_args"](*plans.args_values(seq, batch))
        scratch = np.empty(max(1, plans.scratch_floats(seq, batch)), np.float32)
        yc = outs[2] if len(outs) > 2 else None
        self._check(self._lib.oxk_rnn(ctypes.addressof(args), _p(x), _p(states[0]), _p(states[1]),
                                      _p(outs[0]), _p(outs[1]), _p(yc), _p(scratch)), plans.op)
        return outs

    def qpack_b(self, b: np.ndarray) -> np.ndarray:
        """Pack an int8/uint8 B (K x N) once: column sums + K-contiguous columns."""
        b = _i8("B", b)
        K, N = b.shape
        out = np.empty(self._lib.oxk_qpack_b_size(N, K), np.int8)
        self._check(self._lib.oxk_qpack_b(N, K, _p(b), int(b.dtype == np.int8), _p(out)), "qpack_b")
        return out

    def qgemm(self, a: np.ndarray, b: np.ndarray, a_zero: np.ndarray, b_zero: np.ndarray,
              packed_b: Optional[np.ndarray] = None, reference: bool = False) -> np.ndarray:
        """int32 (A - a_zero) @ (B - b_zero) for int8/uint8 A (M x K), B (K x N); zero points
        are scalars, or (M,) for A / (N,) for B."""
        a, b = _i8("A", a), _i8("B", b)
        M, K = a.shape
        K2, N = b.shape
        if K != K2:
            raise InvalidArgument("qgemm: A is %dx%d but B is %dx%d" % (M, K, K2, N))
        za = np.ascontiguousarray(np.asarray(a_zero).astype(np.int32).reshape(-1))
        zb = np.ascontiguousarray(np.asarray(b_zero).astype(np.int32).reshape(-1))
        if za.size not in (1, M) or zb.size not in (1, N):
            raise InvalidArgument("qgemm: zero points must be scalars or (M,)/(N,), got %s and %s"
                                  % (za.shape, zb.shape))
        y = np.empty((M, N), np.int32)
        sa, sb = int(a.dtype == np.int8), int(b.dtype == np.int8)
        if reference:
            rc = self._lib.oxk_ref_qgemm(M, N, K, _p(a), sa, _p(za), int(za.size > 1),
                                         _p(b), sb, _p(zb), int(zb.size > 1), _p(y))
        else:
            rc = self._lib.oxk_qgemm(M, N, K, _p(a), sa, _p(za), int(za.size > 1), _p(b), sb,
                                     _p(packed_b), _p(zb), int(zb.size > 1), _p(y))
        self._check(rc, "qgemm %dx%dx%d" % (M, N, K))
        return y


    # ---------------------------------------------------------------- quantized ops (issue #17)
    def qpack_rows(self, w: np.ndarray, zero: np.ndarray) -> np.ndarray:
        """Pack int8/uint8 W (rows x K) minus its zero points (scalar or one per row) as the
        quantized kernels' int16 row operand (oxk_qpack_rows)."""
        w = _i8("W", w)
        rows, K = w.shape
        z = np.ascontiguousarray(np.asarray(zero).astype(np.int32).reshape(-1))
        out = np.empty(self._lib.oxk_qpack_rows_size(rows, K), np.int8)
        self._check(self._lib.oxk_qpack_rows(_p(w), QT[w.dtype], rows, K, K, 1, _p(z), int(z.size > 1),
                                             _p(out)), "qpack_rows")
        return out

    def qpack_cols(self, b: np.ndarray, zero: np.ndarray, trans_b: bool = False) -> np.ndarray:
        """Pack int8/uint8 B (K x N; N x K when trans_b) minus its zero points (scalar or one per
        column of op(B)) as the quantized GEMM's constant operand (oxk_qpack_cols)."""
        b = _i8("B", b)
        K, N = (b.shape[1], b.shape[0]) if trans_b else b.shape
        sk, sn = (1, K) if trans_b else (N, 1)
        z = np.ascontiguousarray(np.asarray(zero).astype(np.int32).reshape(-1))
        out = np.empty(self._lib.oxk_qpack_cols_size(N, K), np.int8)
        self._check(self._lib.oxk_qpack_cols(_p(b), QT[b.dtype], N, K, sk, sn, _p(z), int(z.size > 1),
                                             _p(out)), "qpack_cols")
        return out

    def qconv_plan(self, x_shape: Sequence[int], x_type: np.dtype, x_zero: int, packed_w: np.ndarray,
                   cout: int, kernel: Sequence[int], group: int, strides: Sequence[int],
                   dilations: Sequence[int], pads: Sequence[int], out_hw: Sequence[int],
                   y_type: np.dtype, y_zero: int = 0, bias: Optional[np.ndarray] = None,
                   scale: Optional[np.ndarray] = None, qmin: int = -(1 << 30), qmax: int = 1 << 30) -> Plan:
        """oxk_qconv_run's plan for (N, C, H, W) = x_shape inputs of x_type; y_type int32 gives the
        raw sums (ConvInteger), int8/uint8 requantizes with `scale` (one or one per channel)."""
        b = None if bias is None else np.ascontiguousarray(bias, np.int32)
        sc = None if scale is None else np.ascontiguousarray(scale, np.float32).reshape(-1)
        st = self.structs["oxk_qconv_plan"](
            int(x_shape[1]), int(x_shape[2]), int(x_shape[3]), int(cout), int(kernel[0]), int(kernel[1]),
            int(group), int(strides[0]), int(strides[1]), int(dilations[0]), int(dilations[1]),
            *[int(p) for p in pads], int(out_hw[0]), int(out_hw[1]), QT[np.dtype(x_type)], int(x_zero),
            QT[np.dtype(y_type)], int(y_zero), int(qmin), int(qmax), int(sc is not None and sc.size > 1),
            _p(packed_w), _p(b), _p(sc))
        return Plan(self, "oxk_qconv_run", st, [packed_w, b, sc])

    def qgemm_plan(self, n: int, k: int, packed_b: np.ndarray, a_type: np.dtype, a_zero: int,
                   y_type: np.dtype, y_zero: int = 0, bias: Optional[np.ndarray] = None,
                   scale: Optional[np.ndarray] = None, qmin: int = -(1 << 30), qmax: int = 1 << 30) -> Plan:
        """oxk_qgemm_run's plan: Y (M x n) = A (M x k, a_type) @ the packed B (qpack_cols), int32
        (MatMulInteger) or requantized to y_type with `scale` (one or one per column)."""
        b = None if bias is None else np.ascontiguousarray(bias, np.int32)
        sc = None if scale is None else np.ascontiguousarray(scale, np.float32).reshape(-1)
        st = self.structs["oxk_qgemm_plan"](
            int(n), int(k), QT[np.dtype(a_type)], int(a_zero), QT[np.dtype(y_type)], int(y_zero),
            int(qmin), int(qmax), int(sc is not None and sc.size > 1), _p(packed_b), _p(b), _p(sc))
        return Plan(self, "oxk_qgemm_run", st, [packed_b, b, sc])

    def quant_args(self, dtype: np.dtype, scale: float, zero: int) -> Any:
        """oxk_quant_args for QuantizeLinear / DequantizeLinear (scale 1, zero 0: Cast, which also
        reads int64 and bool)."""
        return self.structs["oxk_quant_args"](CAST_FROM[np.dtype(dtype)], int(zero), float(scale))

    def quantize(self, x: np.ndarray, scale: float, zero: int, dtype: np.dtype) -> np.ndarray:
        """saturate(round_half_even(x / scale) + zero) as int8/uint8 (oxk_quantize)."""
        x = _f32("X", x)
        y = np.empty(x.shape, dtype)
        args = self.quant_args(dtype, scale, zero)
        self._check(self._lib.oxk_quantize(ctypes.addressof(args), x.size, _p(x), _p(y)), "quantize")
        return y

    def dequantize(self, x: np.ndarray, scale: float = 1.0, zero: int = 0) -> np.ndarray:
        """(x - zero) * scale in float32 for int8/uint8/int32 x, and for int64/bool x as Cast
        (oxk_dequantize)."""
        if not isinstance(x, np.ndarray) or x.dtype not in CAST_FROM:
            raise InvalidArgument("dequantize: X must be int8, uint8, int32, int64 or bool, got %s"
                                  % getattr(x, "dtype", x))
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape, np.float32)
        args = self.quant_args(x.dtype, scale, zero)
        self._check(self._lib.oxk_dequantize(ctypes.addressof(args), x.size, _p(x), _p(y)), "dequantize")
        return y

    def qpool_args(self, hw: int, x_type: np.dtype, x_zero: int, y_zero: int, scale: float) -> Any:
        """oxk_qpool_args of the quantized global average pool over planes of hw values."""
        return self.structs["oxk_qpool_args"](int(hw), QT[np.dtype(x_type)], int(x_zero), int(y_zero),
                                              -(1 << 30), 1 << 30, float(scale))

    def qglobal_pool(self, x: np.ndarray, x_zero: int, y_zero: int, scale: float) -> np.ndarray:
        """QLinearGlobalAveragePool (NCHW...) of int8/uint8 x: requantized sums of x - x_zero."""
        x = _i8n("X", x)
        hw = int(np.prod(x.shape[2:]))
        y = np.empty(x.shape[:2] + (1,) * (x.ndim - 2), x.dtype)
        args = self.qpool_args(hw, x.dtype, x_zero, y_zero, scale)
        self._check(self._lib.oxk_qglobal_pool(ctypes.addressof(args), x.shape[0] * x.shape[1], _p(x), _p(y)),
                    "qglobal_pool")
        return y

    def dynamic_quantize(self, x: np.ndarray) -> List[np.ndarray]:
        """DynamicQuantizeLinear as onnxruntime computes it: [y (uint8), scale, zero point]."""
        x = _f32("X", x)
        y = np.empty(x.shape, np.uint8)
        s = np.empty((), np.float32)
        z = np.empty((), np.uint8)
        self._check(self._lib.oxk_dynamic_quantize(_p(x), x.size, _p(y), s.ctypes.data, z.ctypes.data),
                    "dynamic_quantize")
        return [y, s, z]


def _i8n(name: str, a: np.ndarray) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype not in (np.int8, np.uint8):
        raise InvalidArgument("%s must be an int8 or uint8 array, got %s" % (name, getattr(a, "dtype", a)))
    return np.ascontiguousarray(a)


def _i8(name: str, a: np.ndarray) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype not in (np.int8, np.uint8) or a.ndim != 2:
        raise InvalidArgument("%s must be a 2-D int8 or uint8 array, got %s %s"
                              % (name, getattr(a, "dtype", type(a).__name__), getattr(a, "shape", "")))
    return np.ascontiguousarray(a)


def _act_params(act: str, params: Sequence[float]) -> Tuple[float, float]:
    if act not in ACT:
        raise InvalidArgument("activation %r is not one of %s" % (act, sorted(a for a in ACT if a)))
    return fused_ops.epilogue_params(act, params)


_LOADED: Dict[str, KernelLibrary] = {}
_LOCK = threading.Lock()


def load(variant: str = "", path: Optional[str] = None) -> KernelLibrary:
    """The library for this machine (cached per path); Fail when it is missing or does not load."""
    path = path or library_path(variant)
    with _LOCK:
        lib = _LOADED.get(path)
        if lib is None:
            lib = _LOADED[path] = KernelLibrary(path)
        return lib


__all__ = ["KernelLibrary", "Plan", "check_structure", "data_address", "load", "read_layout", "structures",
           "library_path", "machine_arch", "ACT",
           "BIAS_NONE", "BIAS_ROW", "BINARY_OPS", "fold_broadcast",
           "BIAS_COL", "CONV_PATHS"]
