"""web/pyc.py: a wheel compiled for Python 3.8 (the page's Python in Pyodide 0.17.1) imports
under Python 3.8 from its .pyc alone (sourceless) or from __pycache__ with the sources kept,
with the same results as the source; RECORD lists every file with its sha256; without a
Python of that version the wheel is left as it was and the note says why."""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import zipfile

import pytest

from onnxedge.web import pyc

MODULE = '''"""doc"""
def answer():
    """Forty-two."""
    return sum(range(7)) * 2
'''


def _wheel(path: str) -> str:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkgx/__init__.py", "")
        zf.writestr("pkgx/mod.py", MODULE)
        zf.writestr("pkgx/data.txt", "data")
        zf.writestr("pkgx-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkgx\nVersion: 1.0\n")
        zf.writestr("pkgx-1.0.dist-info/RECORD", "")
    return path


@pytest.fixture(scope="module")
def py38() -> str:
    python = pyc.find_python("3.8")
    if python is None:
        pytest.skip("no Python 3.8 here (make setup makes .venv38)")
    return python


def _import_answer(python: str, folder: str) -> str:
    code = "import sys; sys.path.insert(0, %r); import pkgx.mod as m; print(m.answer(), m.__file__)"
    proc = subprocess.run([python, "-B", "-c", code % folder], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("sourceless", [True, False])
def test_compiled_wheel_imports_under_python38(py38: str, tmp_path, sourceless: bool) -> None:
    wheel = _wheel(str(tmp_path / "pkgx-1.0-py3-none-any.whl"))
    compiled, note = pyc.compile_wheel(wheel, "3.8", sourceless=sourceless)
    assert compiled, note
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "site")
        record = zf.read("pkgx-1.0.dist-info/RECORD").decode().splitlines()
    if sourceless:
        assert "pkgx/mod.pyc" in names and "pkgx/mod.py" not in names
    else:
        assert "pkgx/mod.py" in names and "pkgx/__pycache__/mod.cpython-38.pyc" in names
    assert "pkgx/data.txt" in names
    for line in record:
        name, digest, size = line.rsplit(",", 2)
        if name.endswith("RECORD"):
            continue
        with open(tmp_path / "site" / name, "rb") as f:
            data = f.read()
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == "sha256=" + want and int(size) == len(data), name
    out = _import_answer(py38, str(tmp_path / "site"))
    assert out.startswith("42 ")
    assert out.endswith("mod.pyc" if sourceless else "mod.py")
    if not sourceless:   # the source is there but the .pyc is what runs: break the source
        with open(tmp_path / "site" / "pkgx" / "mod.py", "w") as f:
            f.write("raise SystemExit('the source ran')\n")
        assert _import_answer(py38, str(tmp_path / "site")).startswith("42 ")


def test_without_python_the_wheel_stays(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _wheel(str(tmp_path / "pkgx-1.0-py3-none-any.whl"))
    before = open(wheel, "rb").read()
    monkeypatch.setattr(pyc, "find_python", lambda version: None)
    compiled, note = pyc.compile_wheel(wheel, "3.8")
    assert not compiled and "no Python 3.8" in note and pyc.PYTHON_ENV in note
    assert open(wheel, "rb").read() == before


def test_command_line(py38: str, tmp_path) -> None:
    """python -m onnxedge.web.pyc WHEEL --sourceless compiles it and says so."""
    import sys
    wheel = _wheel(str(tmp_path / "pkgx-1.0-py3-none-any.whl"))
    proc = subprocess.run([sys.executable, "-m", "onnxedge.web.pyc", wheel, "--sourceless"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "compiled 2 modules to .pyc for Python 3.8 (sourceless)" in proc.stdout
    assert "pkgx/mod.pyc" in zipfile.ZipFile(wheel).namelist()
