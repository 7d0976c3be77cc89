"""The wasm kernel module as the provider sees it: memory, copies, plans and kernel calls.

`Kernels` is the interface the provider codes against; `JsKernels` implements it over the page's
`globalThis.onnxedgeWasm` (web/wasm/oxk.js) through Pyodide's JS bridge: pointers are byte
offsets into the module's own `WebAssembly.Memory`, and a tensor crosses in one bulk copy each
way (a Uint8Array view's `assign` / `assign_to`; views are made per copy, as the memory may have
grown). Plans are oxk.h's structs, written into wasm memory once (wasm32 layout: 4-byte ints,
floats and pointers).
"""
from __future__ import annotations

import struct
from typing import Any, Optional, Sequence

import numpy as np

from onnxedge.errors import Fail, InvalidArgument

# oxk.h structs in wasm32 layout
# sgemm: transA transB N K alpha beta packA packB bias bias_kind act p0 p1
SGEMM_PLAN = struct.Struct("<4i2f3I2i2f")
# conv: C H W Cout kh kw group sh sw dh dw pt pl pb pr OH OW act path p0 p1 weight packW bias
CONV_PLAN = struct.Struct("<19i2f3I")
# pool: H W kind kh kw sh sw dh dw pt pl pb pr count_include_pad OH OW
POOL_PLAN = struct.Struct("<16i")
BIAS_NONE, BIAS_ROW, BIAS_COL = 0, 1, 2
CONV_AUTO = 0
MAX, AVG = 0, 1


class Kernels:
    """What the provider needs of a kernel module (pointers are ints into its memory)."""

    threads = 1
    backend = "wasm32 simd128"

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

    # ---------------------------------------------------------------- helpers on top
    def put(self, array: np.ndarray) -> int:
        """A new block holding a copy of `array` (float32 C order)."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        ptr = self.alloc(max(a.nbytes, 4))
        if a.nbytes:
            self.write(ptr, a)
        return ptr

    def put_struct(self, layout: struct.Struct, values: Sequence[Any]) -> int:
        """A new block holding `values` packed as `layout` (an oxk.h plan)."""
        raw = np.frombuffer(layout.pack(*values), np.uint8)
        ptr = self.alloc(layout.size)
        self.write(ptr, raw)
        return ptr

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


__all__ = ["Kernels", "JsKernels", "current", "install", "SGEMM_PLAN", "CONV_PLAN", "POOL_PLAN",
           "BIAS_NONE", "BIAS_ROW", "BIAS_COL", "CONV_AUTO", "MAX", "AVG"]
