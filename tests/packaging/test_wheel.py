"""A built wheel holds the four rooms under `onnxedge/`, its entry points, and imports alone."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 61:
        pytest.skip("building needs setuptools >= 61 (pyproject metadata)")
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(out), ROOT], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [name] = [f for f in os.listdir(str(out)) if f.endswith(".whl")]
    return os.path.join(str(out), name)


def test_wheel_layout_and_entry_points(wheel):
    assert os.path.basename(wheel).startswith("onnxedge-") and wheel.endswith("py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("onnxedge/__init__.py", "onnxedge/session.py", "onnxedge/kernels/op_modules.py",
                     "onnxedge/kernels/registry.py", "onnxedge/providers/cpu.py",
                     "onnxedge/web/__init__.py", "onnxedge/edge/__init__.py",
                     "onnxedge/reduced_build/__init__.py"):
        assert required in names, required
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "demo/"))]
    [eps] = [n for n in names if n.endswith("entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(eps).decode()
    assert "onnxedge = onnxedge.cli:main" in text
    assert "[onnxedge.providers]" in text and "CPUExecutionProvider" in text
    [meta] = [n for n in names if n.endswith("METADATA")]
    requires = [l for l in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if l.startswith("Requires-Dist") and "extra ==" not in l]
    assert sorted(r.split()[1].split(">")[0].split("=")[0] for r in requires) == ["flatbuffers", "numpy"]


def test_wheel_imports_and_runs_from_its_own_files(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(str(tmp_path))
    code = ("import onnxedge, sys; assert onnxedge.__file__.startswith(sys.argv[1]), onnxedge.__file__;"
            "from onnxedge.kernels import registry; assert registry.find('', 'Relu', 17)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=str(tmp_path),
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
