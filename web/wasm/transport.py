"""The wasm kernel module as the provider sees it: memory, copies, plans and kernel calls.

`Kernels` is the interface the provider codes against; `JsKernels` implements it over the page's
`globalThis.onnxedgeWasm` (web/wasm/oxk.js) through Pyodide's JS bridge: pointers are byte
offsets into the module's own `WebAssembly.Memory`, and a tensor crosses in one bulk copy each
way (a Uint8Array view's `assign` / `assign_to`; views are made per copy, as the memory may have
grown). Plans and programs are oxk.h's structs, written into wasm memory once at the offsets the
module's own `oxk_layout()` states (read when the module is wrapped; wasm32: 4-byte pointers) and
checked against the fields the Python binding expects (onnxedge.oxk_layout: a module that
disagrees is refused with a Fail naming the struct and the field).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence

import numpy as np

from onnxedge import oxk_layout
from onnxedge.errors import Fail, InvalidArgument

BIAS_NONE, BIAS_ROW, BIAS_COL = 0, 1, 2
CONV_AUTO = 0
CONV_WINOGRAD = 7   # oxk.h OXK_CONV_WINOGRAD: packW from oxk_conv_pack_winograd
MAX, AVG = 0, 1


class Kernels:
    """What the provider needs of a kernel module (pointers are ints into its memory). A subclass
    calls `set_layout` with the module's oxk_layout() rows before writing any struct."""

    threads = 1
    backend = "wasm32 simd128"
    packer: Optional[oxk_layout.Packer] = None

    def set_layout(self, rows: Sequence[oxk_layout.Row], where: str = "wasm kernel module") -> None:
        """Take the module's layout table (oxk_layout() rows); Fail, naming struct and field, when
        it disagrees with the binding's (onnxedge.oxk_layout.FIELDS)."""
        table = oxk_layout.table_from_rows(tuple(r) for r in rows)
        oxk_layout.check(table, where)
        self.packer = oxk_layout.Packer(table)

    @property
    def layout(self) -> Dict[str, oxk_layout.Layout]:
        """The module's struct layouts (oxk_layout.Layout per struct name)."""
        if self.packer is None:
            raise Fail("the kernel module's layout was not read (Kernels.set_layout)")
        return self.packer.table

    @property
    def pointer_size(self) -> int:
        """Bytes of a pointer in the module (4 on wasm32)."""
        return self.packer.pointer_size if self.packer is not None else 4

    def alloc(self, nbytes: int) -> int:
        """A new block of at least `nbytes` (64-byte aligned); Fail when memory runs out."""
        raise NotImplementedError

    def free(self, ptr: int) -> None:
        """Give a block back."""
        raise NotImplementedError

    def write(self, ptr: int, array: np.ndarray) -> None:
        """Copy a C-contiguous array into memory at ptr (one bulk copy)."""
        raise NotImplementedError

    def read(self, ptr: int, out: np.ndarray) -> None:
        """Fill a C-contiguous array from memory at ptr (one bulk copy)."""
        raise NotImplementedError

    def call(self, name: str, *args: Any) -> int:
        """Call an oxk.h export by name (single-threaded); its int result."""
        raise NotImplementedError

    def sgemm_run(self, plan: int, m: int, a: int, b: int, c: int) -> int:
        """oxk_sgemm_run, rows of M split over the threads."""
        raise NotImplementedError

    def conv_run(self, plan: int, n: int, x: int, y: int) -> int:
        """oxk_conv2d_run, split over the threads."""
        raise NotImplementedError

    def pool_run(self, plan: int, nc: int, x: int, y: int) -> int:
        """oxk_pool2d_run, planes split over the threads."""
        raise NotImplementedError

    def global_pool(self, x: int, nc: int, hw: int, kind: int, y: int) -> int:
        """oxk_global_pool."""
        raise NotImplementedError

    def program_run(self, program: int, inputs: int, outputs: int, arena: int) -> int:
        """oxk_program_run: the whole compiled program in one call (kernels split over the threads)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- helpers on top
    def put(self, array: np.ndarray) -> int:
        """A new block holding a copy of `array` (float32 C order)."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        ptr = self.alloc(max(a.nbytes, 4))
        if a.nbytes:
            self.write(ptr, a)
        return ptr

    def put_bytes(self, raw: bytes) -> int:
        """A new block holding `raw`."""
        ptr = self.alloc(max(len(raw), 4))
        if raw:
            self.write(ptr, np.frombuffer(raw, np.uint8))
        return ptr

    def put_struct(self, name: str, values: Sequence[Any]) -> int:
        """A new block holding oxk.h struct `name` with `values` (oxk_layout.FIELDS order), packed
        with the module's own layout."""
        return self.put_bytes(self._packer().pack(name, values))

    def put_structs(self, name: str, rows: Sequence[Sequence[Any]]) -> int:
        """A new block holding an array of struct `name`, one element per row."""
        return self.put_bytes(self._packer().pack_array(name, rows))

    def _packer(self) -> oxk_layout.Packer:
        if self.packer is None:
            raise Fail("the kernel module's layout was not read (Kernels.set_layout)")
        return self.packer

    def check(self, rc: int, what: str) -> None:
        """Raise the project's error for a kernel's non-zero return code."""
        if rc == -2:
            raise Fail("%s: the wasm kernel module ran out of memory" % what)
        if rc:
            raise InvalidArgument("%s: the wasm kernels rejected the arguments (code %d)" % (what, rc))


class JsKernels(Kernels):
    """`globalThis.onnxedgeWasm` (web/wasm/oxk.js, initialized) from Python inside Pyodide."""

    def __init__(self, module: Any):
        import js
        self.module = module
        self.threads = int(module.threads or 1)
        self._u8 = js.Uint8Array
        # the exports object is never proxied into Python: Pyodide 0.17 fails on objects without
        # a prototype (it reads their constructor's name), so exports are called from JS
        self._call = js.Function.new("rt", "name", "...args", "return rt.exports[name](...args);")
        self.set_layout(json.loads(str(module.layoutJSON())))

    def alloc(self, nbytes: int) -> int:
        ptr = int(self.module.alloc(int(nbytes))) & 0xFFFFFFFF
        if not ptr:
            raise Fail("the wasm kernel module cannot allocate %d bytes (its memory is full)" % nbytes)
        return ptr

    def free(self, ptr: int) -> None:
        self.module.free(int(ptr))

    def _view(self, ptr: int, nbytes: int) -> Any:
        return self._u8.new(self.module.memory.buffer, int(ptr), int(nbytes))

    def write(self, ptr: int, array: np.ndarray) -> None:
        self._view(ptr, array.nbytes).assign(array.reshape(-1).view(np.uint8))

    def read(self, ptr: int, out: np.ndarray) -> None:
        self._view(ptr, out.nbytes).assign_to(out.reshape(-1).view(np.uint8))

    def call(self, name: str, *args: Any) -> int:
        return int(self._call(self.module, name, *args))

    def sgemm_run(self, plan: int, m: int, a: int, b: int, c: int) -> int:
        return int(self.module.sgemmRun(plan, m, a, b, c))

    def conv_run(self, plan: int, n: int, x: int, y: int) -> int:
        return int(self.module.conv2dRun(plan, n, x, y))

    def pool_run(self, plan: int, nc: int, x: int, y: int) -> int:
        return int(self.module.pool2dRun(plan, nc, x, y))

    def global_pool(self, x: int, nc: int, hw: int, kind: int, y: int) -> int:
        return int(self.module.globalPool(x, nc, hw, kind, y))

    def program_run(self, program: int, inputs: int, outputs: int, arena: int) -> int:
        return int(self.module.programRun(program, inputs, outputs, arena))


_CURRENT: list = []


def current() -> Optional[Kernels]:
    """The page's initialized kernel module (None natively, or before onnxedgeWasm.init)."""
    if _CURRENT:
        return _CURRENT[0]
    try:
        import js
    except ImportError:
        return None
    module = getattr(js, "onnxedgeWasm", None)
    # `threads` is 0 until init() is done
    if module is None or not int(module.threads or 0):
        return None
    _CURRENT.append(JsKernels(module))
    return _CURRENT[0]


def install(kernels: Optional[Kernels]) -> None:
    """Make `kernels` the module `current()` returns (None: look the page's up again)."""
    _CURRENT[:] = [kernels] if kernels is not None else []


__all__ = ["Kernels", "JsKernels", "current", "install",
           "BIAS_NONE", "BIAS_ROW", "BIAS_COL", "CONV_AUTO", "CONV_WINOGRAD", "MAX", "AVG"]
