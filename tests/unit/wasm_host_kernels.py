"""A stand-in for the page's wasm kernel module, natively: the host build of the same C kernels
(edge/neon/lib/<arch>/libonnxedge_kernels.so, through ctypes) over a numpy byte array playing
wasm memory. Pointers are the host addresses of bytes in that array (0 is NULL), and the layout
table is the host library's own oxk_layout() (8-byte pointers), so the plans and programs the
provider writes with the binding's packer (onnxedge.oxk_layout) are read by the C library as they
are: the provider's whole path (packing, plans, programs, per-shape buffers, copies in and out,
the Z residual, CPU fallbacks) runs and is checked without a browser. Counts of the copies and
calls are kept for the tests. (tests/unit/wasm_node_kernels.py runs the real oxk.wasm instead.)
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
        self.threads = self.lib.set_num_threads(threads)   # process-wide, as in the page
        self.counts: Dict[str, int] = {}
        rows = []
        for name, (size, fields) in self.lib.layout.items():
            rows.append((name, "", 0, size, "s"))
            rows += [(name, f, off, fs, k) for f, off, fs, k in fields]
        self.set_layout(rows, "host kernel library")

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def alloc(self, nbytes: int) -> int:
        off = (self.top + 63) // 64 * 64
        if off + nbytes > self.memory.size:
            raise MemoryError("host stand-in memory full")
        self.top = off + int(nbytes)
        self.live[self.base + off] = int(nbytes)
        return self.base + off

    def free(self, ptr: int) -> None:
        assert self.live.pop(ptr, None) is not None, "free of %d, which is not allocated" % ptr

    def _at(self, ptr: int, nbytes: int) -> np.ndarray:
        off = ptr - self.base
        assert 0 < off and off + nbytes <= self.memory.size, "pointer %#x outside the memory" % ptr
        return self.memory[off:off + nbytes]

    def write(self, ptr: int, array: np.ndarray) -> None:
        assert array.flags.c_contiguous
        self._count("write")
        self._at(ptr, array.nbytes)[:] = array.reshape(-1).view(np.uint8)

    def read(self, ptr: int, out: np.ndarray) -> None:
        self._count("read")
        out.reshape(-1).view(np.uint8)[:] = self._at(ptr, out.nbytes)

    def call(self, name: str, *args: Any) -> int:
        self._count(name)
        fn = self.lib.function(name)
        conv = [(a or None) if t is ctypes.c_void_p else a for a, t in zip(args, fn.argtypes)]
        return int(fn(*conv))

    def sgemm_run(self, plan: int, m: int, a: int, b: int, c: int) -> int:
        self._count("sgemm_run")
        return self.call("oxk_sgemm_run", plan, m, a, b, c)

    def conv_run(self, plan: int, n: int, x: int, y: int) -> int:
        self._count("conv_run")
        return self.call("oxk_conv2d_run", plan, n, x, y)

    def pool_run(self, plan: int, nc: int, x: int, y: int) -> int:
        self._count("pool_run")
        return self.call("oxk_pool2d_run", plan, nc, x, y)

    def global_pool(self, x: int, nc: int, hw: int, kind: int, y: int) -> int:
        self._count("global_pool")
        return self.call("oxk_global_pool", x, nc, hw, kind, y)

    def program_run(self, program: int, inputs: int, outputs: int, arena: int) -> int:
        self._count("program_run")
        return self.call("oxk_program_run", program, inputs, outputs, arena)
