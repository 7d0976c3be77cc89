"""A stand-in for the page's wasm kernel module, natively: the host build of the same C kernels
(edge/neon/lib/<arch>/libonnxedge_kernels.so, through ctypes) over a numpy byte array playing
wasm memory (pointers are offsets into it, 0 is NULL).

The plans the provider writes are read back with its own wasm32 struct layouts and turned into
the C library's plain calls, so the provider's whole path (packing, plans, per-shape buffers,
copies in and out, the Z residual, CPU fallbacks) runs and is checked without a browser. Counts
of the copies and calls are kept for the tests.
"""
from __future__ import annotations

import ctypes
from typing import Any, Dict

import numpy as np

from onnxedge.web.wasm import transport


class HostKernels(transport.Kernels):
    """transport.Kernels over the host C library (see the module docstring)."""

    backend = "host (test stand-in)"

    def __init__(self, megabytes: int = 768, threads: int = 1):
        from onnxedge.edge.neon import library
        self.lib = library.load()
        self.memory = np.zeros(megabytes << 20, np.uint8)   # calloc: pages appear when touched
        self.base = self.memory.ctypes.data
        self.top = 64
        self.live: Dict[int, int] = {}
        self.threads = threads
        self.counts: Dict[str, int] = {}

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def alloc(self, nbytes: int) -> int:
        ptr = (self.top + 63) // 64 * 64
        if ptr + nbytes > self.memory.size:
            raise MemoryError("host stand-in memory full")
        self.top = ptr + int(nbytes)
        self.live[ptr] = int(nbytes)
        return ptr

    def free(self, ptr: int) -> None:
        assert self.live.pop(ptr, None) is not None, "free of %d, which is not allocated" % ptr

    def write(self, ptr: int, array: np.ndarray) -> None:
        assert array.flags.c_contiguous
        self._count("write")
        self.memory[ptr:ptr + array.nbytes] = array.reshape(-1).view(np.uint8)

    def read(self, ptr: int, out: np.ndarray) -> None:
        self._count("read")
        out.reshape(-1).view(np.uint8)[:] = self.memory[ptr:ptr + out.nbytes]

    def _addr(self, off: int) -> Any:
        return None if not off else self.base + off

    def call(self, name: str, *args: Any) -> int:
        self._count(name)
        fn = self.lib.function(name)
        conv = [self._addr(a) if t is ctypes.c_void_p else a for a, t in zip(args, fn.argtypes)]
        return int(fn(*conv))

    def _unpack(self, layout: Any, ptr: int) -> tuple:
        return layout.unpack(bytes(self.memory[ptr:ptr + layout.size]))

    def sgemm_run(self, plan: int, m: int, a: int, b: int, c: int) -> int:
        self._count("sgemm_run")
        ta, tb, n, k, alpha, beta, pa, pb, bias, bk, act, p0, p1 = self._unpack(transport.SGEMM_PLAN, plan)
        return self.call("oxk_sgemm", ta, tb, m, n, k, alpha, a, m if ta else k, pa, b, k if tb else n,
                         pb, beta, c, n, bias, bk, act, p0, p1)

    def conv_run(self, plan: int, n: int, x: int, y: int) -> int:
        self._count("conv_run")
        v = self._unpack(transport.CONV_PLAN, plan)
        (C, H, W, co, kh, kw, g, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow, act, path, p0, p1,
         weight, packw, bias) = v
        return self.call("oxk_conv2d", x, n, C, H, W, weight, packw, co, kh, kw, g, sh, sw, dh, dw,
                         pt, pl, pb, pr, bias, act, p0, p1, y, oh, ow, path)

    def pool_run(self, plan: int, nc: int, x: int, y: int) -> int:
        self._count("pool_run")
        H, W, kind, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, cip, oh, ow = self._unpack(transport.POOL_PLAN, plan)
        return self.call("oxk_pool2d", x, nc, H, W, kind, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, cip,
                         y, oh, ow)

    def global_pool(self, x: int, nc: int, hw: int, kind: int, y: int) -> int:
        self._count("global_pool")
        return self.call("oxk_global_pool", x, nc, hw, kind, y)
