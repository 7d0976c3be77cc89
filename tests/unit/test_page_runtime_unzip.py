"""web/assets/runtime.py's own zip reader (the page installs wheels without importing `zipfile`,
whose stdlib sources Pyodide 0.17 would compile at every page load): the same members and bytes
as `zipfile` on stored and deflated archives, wheels installed file for file, unsafe paths and
non-zip bytes refused."""
from __future__ import annotations

import io
import os
import sys
import types
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _U8:
    """A stand-in for a JS Uint8Array (length, assign_to)."""

    def __init__(self, data: bytes):
        self.data, self.length = data, len(data)

    def assign_to(self, out: bytearray) -> None:
        out[:] = self.data


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """runtime.py's namespace, run with a fake `js` module (removed afterwards: code that asks
    `import js` to tell whether it runs in Pyodide must not see it in later tests)."""
    added = "js" not in sys.modules
    if added:
        sys.modules["js"] = types.ModuleType("js")
    ns: dict = {"__name__": "oxe_runtime"}
    with open(os.path.join(ROOT, "web", "assets", "runtime.py")) as f:
        exec(compile(f.read(), "runtime.py", "exec"), ns)
    yield ns
    if added:
        sys.modules.pop("js", None)


def _archive(members: dict, method: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        zf.writestr("pkg/", b"")
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


MEMBERS = {"pkg/__init__.py": b"x = 1\n", "pkg/data/blob.bin": bytes(range(256)) * 50,
           "pkg/empty.txt": b"", "pkg-1.0.dist-info/RECORD": "é,,\n".encode()}


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_members_equal_zipfile(runtime, method: int) -> None:
    data = _archive(MEMBERS, method)
    got = dict(runtime["_zip_members"](data, "t.whl"))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        want = {n: zf.read(n) for n in zf.namelist()}
    assert got == want


def test_install_writes_every_file(runtime, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(runtime, "_site_packages", lambda: str(tmp_path))
    count = runtime["install_wheel"](_U8(_archive(MEMBERS, zipfile.ZIP_DEFLATED)), "t.whl")
    assert count == len(MEMBERS) + 1
    for name, data in MEMBERS.items():
        with open(tmp_path / name, "rb") as f:
            assert f.read() == data


def test_unsafe_and_broken_archives_are_refused(runtime, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(runtime, "_site_packages", lambda: str(tmp_path))
    with pytest.raises(ValueError, match="unsafe paths"):
        runtime["install_wheel"](_U8(_archive({"../evil.py": b"x"}, zipfile.ZIP_STORED)), "e.whl")
    with pytest.raises(ValueError, match="not a zip archive"):
        runtime["_zip_members"](b"not a zip at all", "n.whl")
    assert not os.path.exists(tmp_path.parent / "evil.py")


VALUES = [None, True, False, 0, -7, 2 ** 40, 1.5, -0.25, 1e-300, "", "plain", 'q"uo\\te',
          "ctl\x00\x01\n\t\x1f", "naïve ✓ 漢字", [], {}, [1, [2, [3, None]]],
          {"a": {"b": ["c", 1.0, None]}, "é": True}, ("tu", "ple")]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_dumps_is_json(runtime, value) -> None:
    """The page's small JSON encoder: json.loads reads back the value (tuples as lists)."""
    import json
    want = json.loads(json.dumps(value))
    assert json.loads(runtime["_dumps"](value)) == want


def test_dumps_non_finite_and_objects(runtime) -> None:
    import json
    text = runtime["_dumps"]({"nan": float("nan"), "inf": float("-inf"), "obj": object})
    got = json.loads(text)
    assert got["nan"] is None and got["inf"] is None and got["obj"] == str(object)
