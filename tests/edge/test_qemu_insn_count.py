"""The instruction counters behind benchmarks/neon.py: the qemu-user TCG plugin
(edge/kernels/tools/qemu_insn_count.c) and the callgrind marker (tools/callgrind_mark.c).
Each builds through edge/kernels/build.py, loads, and counts the work between two markers
deterministically and in proportion to it (a loop run 2x as often costs ~2x the instructions)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from neon_helpers import REPO

sys.path.insert(0, REPO)
from benchmarks import neon  # noqa: E402

ARM = os.environ.get("ARM_DIR", os.path.join(REPO, ".arm"))
QEMU_PY = os.path.join(REPO, "scripts", "qemu-python")
N = 3000
GUEST = """
import os, sys
if sys.argv[1] == "qemu":
    def mark(label):
        try:
            os.lseek(%d, label, 0)
        except OSError:
            pass
else:
    import ctypes
    lib = ctypes.CDLL(sys.argv[2])
    lib.oxk_insn_mark.argtypes = [ctypes.c_long]
    mark = lib.oxk_insn_mark
def work(n):
    s = 0
    for i in range(n):
        s += i * i %% 7
    return s
work(200)   # past the interpreter's specialisation warm-up
for label, n in ((1, 0), (2, %d), (3, %d), (4, %d)):
    work(n)
    mark(label)
""" % (neon.MARK_FD, N, 2 * N, N)


@pytest.fixture(scope="module")
def tools():
    """edge/kernels/build.py as a module, with its `tools` target built."""
    subprocess.run([sys.executable, os.path.join(REPO, "edge", "kernels", "build.py"), "--targets", "tools"],
                   check=True, capture_output=True)
    mod = neon._tools()
    assert os.path.exists(mod.QEMU_PLUGIN), "build.py --targets tools did not write the qemu plugin"
    return mod


def _qemu(tools, tmp_path, tag: str):
    assert os.path.exists(os.path.join(ARM, "sysroot", "usr", "bin", "python3.11")), \
        "no aarch64 sysroot at %s: run make setup-neon" % ARM
    script = tmp_path / "guest.py"
    script.write_text(GUEST)
    out = tmp_path / ("count-%s.txt" % tag)
    env = dict(os.environ, QEMU_PLUGIN="%s,out=%s" % (tools.QEMU_PLUGIN, out), **neon.COUNT_ENV)
    r = subprocess.run([QEMU_PY, "-S", str(script), "qemu"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def _regions(marks):
    return [marks[k + 1] - marks[k] for k in (1, 2, 3)]


def _check_scaling(regions, tol):
    one, two, one_again = regions
    assert one > N * 20, "a %d-iteration Python loop should cost far more than %d instructions" % (N, one)
    assert abs(one_again - one) / one < tol, regions          # deterministic within a process
    assert abs(two / one - 2.0) < 2 * tol + 0.01, regions     # proportional to the work


def test_qemu_plugin_counts_deterministically_and_in_proportion(tools, tmp_path):
    first = _qemu(tools, tmp_path, "a")
    text = first.read_text()
    total = int(text.split()[1])
    marks = neon.read_qemu_counts(str(first))
    assert sorted(marks) == [1, 2, 3, 4] and total > marks[4] > marks[1] > 0
    _check_scaling(_regions(marks), 0.005)
    again = neon.read_qemu_counts(str(_qemu(tools, tmp_path, "b")))   # a second process
    for a, b in zip(_regions(marks), _regions(again)):
        assert abs(a - b) / a < 0.001, (_regions(marks), _regions(again))


def test_qemu_plugin_refuses_unknown_argument(tools, tmp_path):
    env = dict(os.environ, QEMU_PLUGIN="%s,bogus=1" % tools.QEMU_PLUGIN)
    r = subprocess.run([QEMU_PY, "-S", "-c", "pass"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "unknown argument 'bogus=1'" in r.stderr


def test_callgrind_marker_counts_native_instructions(tools, tmp_path):
    assert shutil.which("valgrind"), "valgrind is missing: run make setup-neon"
    assert os.path.exists(tools.CALLGRIND_MARK), "callgrind marker not built (valgrind headers missing?)"
    script = tmp_path / "guest.py"
    script.write_text(GUEST)
    folder = tmp_path / "cg"
    folder.mkdir()
    r = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                        "--callgrind-out-file=%s" % (folder / "cg.out"), sys.executable, "-S", str(script),
                        "callgrind", tools.CALLGRIND_MARK],
                       env=dict(os.environ, **neon.COUNT_ENV), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    marks = neon.read_callgrind_counts(str(folder))
    assert sorted(marks) == [1, 2, 3, 4]
    _check_scaling(_regions(marks), 0.005)


def test_per_run_turns_marks_into_ratios():
    regions = [{"name": "w", "engine": "cpu", "runs": 2, "marks": [1, 2, 3]},
               {"name": "w", "engine": "neon", "runs": 2, "marks": [4, 5, 6]}]
    marks = {1: 100, 2: 700, 3: 1300, 4: 2000, 5: 2200, 6: 2404}
    row = neon.per_run(regions, marks)["w"]
    assert row["cpu"] == 300 and row["neon"] == 101 and row["ratio"] == pytest.approx(300 / 101)
    assert row["spread"] == pytest.approx(2 / 101)
