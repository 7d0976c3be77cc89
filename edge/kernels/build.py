"""Builds onnxedge's C kernel library for every target and prints each compiler command.

Targets (default: all whose compiler is installed; `--targets` picks some):
  host      this machine's build (x86_64: baseline SSE2, plus AVX2+FMA and AVX-512F SGEMM cores,
            depthwise loops and elementwise functions chosen at load, OXK_ISA=sse2|avx2|avx512
            caps the choice; aarch64: NEON)
            -> edge/neon/lib/<arch>/libonnxedge_kernels.so
  generic   plain C vector backend (OXK_FORCE_GENERIC) -> .../libonnxedge_kernels_generic.so
  aarch64   cross build, aarch64-linux-gnu-gcc -march=armv8-a -mtune=cortex-a72, with an
            armv8.2-a+dotprod int8 loop chosen at run time -> edge/neon/lib/aarch64/
  wasm      the wasm32 simd128 modules for the page, no libc (wasm_rt.c is the shim), clang-14 +
            wasm-ld-14 -> web/wasm/lib/oxk.wasm (one thread) and oxk-mt.wasm (shared memory,
            Web Worker threads); see docs/providers/WASM.md
  tools     instruction-counting helpers for benchmarks/neon.py, host .so files in
            edge/kernels/build/tools/: the qemu-user plugin (tools/qemu_insn_count.c) and the
            callgrind marker (tools/callgrind_mark.c, skipped when valgrind's headers are absent)
Objects go to edge/kernels/build/<target>/. A library newer than every source is kept unless
--force. Usage: python edge/kernels/build.py [--targets host,aarch64] [--force]
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
LIBDIR = os.path.join(os.path.dirname(HERE), "neon", "lib")
BUILD = os.path.join(HERE, "build")
SOURCES = ["common.c", "threadpool.c", "matmul.c", "conv.c", "conv_winograd.c", "pool.c", "matmul_int8.c", "ref.c", "layout.c",
           "elementwise.c", "normalization.c", "movement.c", "program.c", "quantization.c", "attention.c",
           "recurrent.c"]
HEADERS = ["oxk.h", "oxk_libc.h", "vec.h", "matmul_int8_impl.h", "gemm_isa.h", "matmul_x86_impl.h",
           "conv_dw.h", "conv_dw_impl.h", "elementwise_impl.h", "conv_lanes_avx512.h"]
# x86-64 SGEMM cores (and conv's depthwise loops, the elementwise functions), each compiled with
# its own ISA flags and chosen at load (gemm_isa.h, conv_dw.h, elementwise_impl.h)
X86_CORES = [["matmul_avx2.c", "-mavx2", "-mfma"], ["matmul_avx512.c", "-mavx512f", "-mavx2", "-mfma"],
             ["conv_dw_avx2.c", "-mavx2", "-mfma"], ["conv_dw_avx512.c", "-mavx512f", "-mavx2", "-mfma"],
             ["quantization_avx2.c", "-mavx2"], ["elementwise_avx2.c", "-mavx2", "-mfma"],
             ["elementwise_avx512.c", "-mavx512f", "-mavx2", "-mfma"]]
COMMON = ["-O3", "-std=c99", "-D_GNU_SOURCE", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra",
          "-Wno-unused-parameter", "-Werror"]
LIBNAME = "libonnxedge_kernels"
TOOLS_SRC = os.path.join(HERE, "tools")
TOOLS_OUT = os.path.join(BUILD, "tools")
QEMU_PLUGIN = os.path.join(TOOLS_OUT, "libqemu_insn_count.so")
CALLGRIND_MARK = os.path.join(TOOLS_OUT, "libcallgrind_mark.so")


def host_arch() -> str:
    """The library folder name of this machine: x86_64 or aarch64 (others as platform reports)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _run(cmd: List[str]) -> None:
    print("  " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _stale(out: str, extra: List[str]) -> bool:
    if not os.path.exists(out):
        return True
    t = os.path.getmtime(out)
    deps = [os.path.join(HERE, s) for s in SOURCES + HEADERS + ["matmul_int8_dotprod.c"]
            + [c[0] for c in X86_CORES]]
    deps += [__file__] + extra
    return any(os.path.getmtime(d) > t for d in deps if os.path.exists(d))


def _link(cc: str, flags: List[str], out: str, objdir: str, force: bool,
          extra_objs: Optional[List[List[str]]] = None) -> str:
    """Compile SOURCES with `flags` (+ extra (source, flags...) pairs) and link a shared library."""
    if not force and not _stale(out, []):
        print("[build] up to date: %s" % os.path.relpath(out))
        return out
    os.makedirs(objdir, exist_ok=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    objs = []
    for src in SOURCES:
        obj = os.path.join(objdir, src[:-2] + ".o")
        _run([cc] + COMMON + flags + ["-c", os.path.join(HERE, src), "-o", obj])
        objs.append(obj)
    for item in extra_objs or []:
        src, more = item[0], item[1:]
        obj = os.path.join(objdir, src[:-2] + ".o")
        _run([cc] + COMMON + more + ["-c", os.path.join(HERE, src), "-o", obj])
        objs.append(obj)
    _run([cc, "-shared", "-o", out] + objs + ["-lm", "-lpthread"])
    print("[build] wrote %s (%d bytes)" % (os.path.relpath(out), os.path.getsize(out)))
    return out


def build_host(force: bool) -> str:
    """This machine's library. x86_64: baseline ISA (SSE2, runs on any x86-64 CPU) plus the AVX2+FMA
    and AVX-512F SGEMM cores in their own objects, one chosen at load; aarch64: NEON."""
    arch = host_arch()
    flags: List[str] = []
    extra: List[List[str]] = []
    if arch == "x86_64":
        extra = X86_CORES
    elif arch == "aarch64":
        flags = ["-march=armv8-a", "-mtune=cortex-a72"]
    print("[build] host %s library (%s%s)" % (arch, " ".join(flags) or "baseline ISA",
                                              ", AVX2/AVX-512 SGEMM chosen at load" if extra else ""))
    return _link("gcc", flags, os.path.join(LIBDIR, arch, LIBNAME + ".so"),
                 os.path.join(BUILD, "host"), force, extra)


def build_generic(force: bool) -> str:
    """The plain-C vector backend for this machine (the portable fallback, and a test oracle)."""
    print("[build] host generic library (plain C vectors)")
    return _link("gcc", ["-DOXK_FORCE_GENERIC"],
                 os.path.join(LIBDIR, host_arch(), LIBNAME + "_generic.so"),
                 os.path.join(BUILD, "generic"), force)


def build_aarch64(force: bool) -> str:
    """The NEON library for aarch64 Linux (Raspberry Pi 4/5), cross-compiled."""
    cc = "aarch64-linux-gnu-gcc"
    print("[build] aarch64 NEON library (%s, Cortex-A72 tuning, dotprod int8 loop)" % cc)
    base = ["-march=armv8-a", "-mtune=cortex-a72", "-DOXK_HAVE_DOTPROD_TU"]
    return _link(cc, base, os.path.join(LIBDIR, "aarch64", LIBNAME + ".so"),
                 os.path.join(BUILD, "aarch64"), force,
                 [["matmul_int8_dotprod.c", "-march=armv8.2-a+dotprod", "-mtune=cortex-a76"]])


WASM_LIB = os.path.join(os.path.dirname(os.path.dirname(HERE)), "web", "wasm", "lib")
WASM_CFLAGS = ["--target=wasm32", "-msimd128", "-mbulk-memory", "-nostdlib", "-O3", "-std=c99",
               "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]
WASM_STACK = 1 << 20
WASM_MT_INITIAL = 256 * 65536          # oxk.js creates the shared memory with these limits
WASM_MAXIMUM = 32768 * 65536           # 2 GiB: the kernels' int offsets stay in range


def _link_wasm(out: str, objdir: str, cflags: List[str], ldflags: List[str], force: bool) -> str:
    """Compile SOURCES + wasm_rt.c with `cflags` and link one standalone module (no libc, no
    entry point, exporting the OXK_API functions)."""
    if not force and not _stale(out, [os.path.join(HERE, "wasm_rt.c")]):
        print("[build] up to date: %s" % os.path.relpath(out))
        return out
    os.makedirs(objdir, exist_ok=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    objs = []
    for src in SOURCES + ["wasm_rt.c"]:
        obj = os.path.join(objdir, src[:-2] + ".o")
        _run(["clang-14"] + WASM_CFLAGS + cflags + ["-c", os.path.join(HERE, src), "-o", obj])
        objs.append(obj)
    _run(["wasm-ld-14", "--no-entry", "--export-dynamic", "--stack-first",
          "-z", "stack-size=%d" % WASM_STACK] + ldflags + objs + ["-o", out])
    print("[build] wrote %s (%d bytes)" % (os.path.relpath(out), os.path.getsize(out)))
    return out


def build_wasm(force: bool) -> str:
    """The wasm32 simd128 modules for the page (web/wasm/lib/): oxk.wasm (one thread, its own
    growable memory) and oxk-mt.wasm (atomics; imports a shared memory; one instance per Web Worker,
    each on its own stack through the exported __stack_pointer)."""
    print("[build] wasm32 simd128 modules (clang-14, wasm-ld-14)")
    _link_wasm(os.path.join(WASM_LIB, "oxk.wasm"), os.path.join(BUILD, "wasm32"), [],
               ["--max-memory=%d" % WASM_MAXIMUM], force)
    return _link_wasm(os.path.join(WASM_LIB, "oxk-mt.wasm"), os.path.join(BUILD, "wasm32-mt"),
                      ["-matomics", "-mmutable-globals"],
                      ["--import-memory", "--shared-memory", "--initial-memory=%d" % WASM_MT_INITIAL,
                       "--max-memory=%d" % WASM_MAXIMUM, "--export=__stack_pointer"], force)


def _tool(src: str, out: str, force: bool) -> str:
    """Compile one single-file host helper from tools/ into a shared library."""
    path = os.path.join(TOOLS_SRC, src)
    if not force and os.path.exists(out) and os.path.getmtime(out) >= max(
            os.path.getmtime(path), os.path.getmtime(__file__)):
        print("[build] up to date: %s" % os.path.relpath(out))
        return out
    os.makedirs(TOOLS_OUT, exist_ok=True)
    _run(["gcc", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra",
          "-Wno-unused-parameter", "-Werror", "-o", out, path])
    return out


def build_tools(force: bool) -> str:
    """The instruction counters' helpers: qemu-user plugin (API 1) and callgrind marker."""
    print("[build] instruction-counting tools (qemu plugin, callgrind marker)")
    _tool("qemu_insn_count.c", QEMU_PLUGIN, force)
    if os.path.exists("/usr/include/valgrind/callgrind.h"):
        _tool("callgrind_mark.c", CALLGRIND_MARK, force)
    else:
        print("[build] skipped %s: valgrind's callgrind.h is not installed (make setup-neon installs "
              "valgrind)" % os.path.relpath(CALLGRIND_MARK))
    return TOOLS_OUT


TARGETS = {"host": (build_host, "gcc"), "generic": (build_generic, "gcc"),
           "aarch64": (build_aarch64, "aarch64-linux-gnu-gcc"), "wasm": (build_wasm, "wasm-ld-14"),
           "tools": (build_tools, "gcc")}


def main(argv: Optional[List[str]] = None) -> int:
    """Build the targets asked for; a missing cross compiler is an error only when named."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="", help="comma-separated: host,generic,aarch64,wasm,tools (default all)")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = ap.parse_args(argv)
    names = [t for t in args.targets.split(",") if t] or list(TARGETS)
    for name in names:
        if name not in TARGETS:
            print("build.py: unknown target %r (known: %s)" % (name, ", ".join(TARGETS)), file=sys.stderr)
            return 2
        fn, cc = TARGETS[name]
        if shutil.which(cc) is None:
            print("build.py: target %s needs %s, which is not installed (make setup installs it)"
                  % (name, cc), file=sys.stderr)
            return 1
        if name == "aarch64" and host_arch() == "aarch64":
            continue   # the host build is the aarch64 build
        fn(args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
