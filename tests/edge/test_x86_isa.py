"""The x86-64 host library's SGEMM cores chosen at load (edge/kernels/gemm_isa.h): each ISA this CPU
has (sse2, avx2+fma, avx512f), forced with OXK_ISA in a subprocess, against float64 numpy on random
and edge shapes (x86_isa_job.py), with conv's im2col path and 1 vs 2 threads bitwise-equal."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Dict

import pytest

from neon_helpers import REPO, cpu_flags as _cpu_flags, ensure_built

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "x86_isa_job.py")
ISAS = {"sse2": ("sse2", {"sse2"}), "avx2": ("avx2+fma", {"avx2", "fma"}),
        "avx512": ("avx512f", {"avx2", "fma", "avx512f"})}   # OXK_ISA: (backend, CPU flags)

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="the x86-64 SGEMM cores exist only in the x86-64 host build")


def _run(env_isa: str, code: str = "") -> subprocess.CompletedProcess:
    env: Dict[str, str] = dict(os.environ, OXK_ISA=env_isa)
    cmd = [sys.executable, "-c", code] if code else [sys.executable, JOB]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    ensure_built("host")


@pytest.mark.parametrize("isa", list(ISAS))
def test_isa_core_against_float64(isa: str) -> None:
    backend, needs = ISAS[isa]
    if not needs <= _cpu_flags():
        pytest.skip("this CPU lacks %s" % ", ".join(sorted(needs - _cpu_flags())))
    r = _run(isa)
    assert r.returncode == 0, "OXK_ISA=%s:\n%s\n%s" % (isa, r.stdout[-3000:], r.stderr[-3000:])
    assert r.stdout.split()[-1] == backend


def test_unknown_isa_name_leaves_the_choice_to_the_cpu() -> None:
    code = "from onnxedge.edge.neon import library as L; print(L.load().backend)"
    auto, bogus = _run("", code), _run("avx9000", code)
    assert auto.returncode == 0 and bogus.returncode == 0, auto.stderr + bogus.stderr
    assert bogus.stdout.strip() == auto.stdout.strip()
    flags = _cpu_flags()
    best = "avx512f" if {"avx2", "fma", "avx512f"} <= flags else "avx2+fma" if {"avx2", "fma"} <= flags else "sse2"
    assert auto.stdout.strip() == best
