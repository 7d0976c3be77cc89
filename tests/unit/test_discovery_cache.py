"""Entry points are read once per state of sys.path (a scan reads every installed package's
metadata: ~35 ms in Pyodide, asked several times per session), and read again when a folder on
sys.path gains a package or sys.path changes, or after clear_cache()."""
from __future__ import annotations

import os
import sys
import time

import pytest

from onnxedge.providers import discovery


def _plugin(folder: str, dist: str, name: str) -> None:
    info = os.path.join(folder, "%s-1.0.dist-info" % dist)
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % dist)
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[onnxedge.providers]\n%s = %s_mod:Provider\n" % (name, dist))


def _names() -> list:
    return sorted(ep.name for ep in discovery.entry_points(discovery.GROUP))


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    discovery.clear_cache()
    yield str(tmp_path)
    discovery.clear_cache()


def test_scan_is_cached(site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second lookup does not read the metadata again."""
    from importlib import metadata
    _names()
    calls = []
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda *a, **k: calls.append(1) or real(*a, **k))
    _names()
    discovery.entry_points("onnxedge.commands")
    assert calls == []
    discovery.clear_cache()
    _names()
    assert calls == [1]


def test_new_path_entry_and_new_install_are_seen(site: str) -> None:
    """A folder added to sys.path, then a package added into it, show up without clear_cache."""
    before = _names()
    _plugin(site, "fake_ep_one", "FakeOneExecutionProvider")
    sys.path.append(site)
    assert _names() == sorted(before + ["FakeOneExecutionProvider"])
    time.sleep(0.01)   # a distinct folder mtime
    _plugin(site, "fake_ep_two", "FakeTwoExecutionProvider")
    os.utime(site, None)
    assert "FakeTwoExecutionProvider" in _names()


def test_own_reader_matches_importlib_metadata() -> None:
    """read_entry_points (the page's reader) finds the installed onnxedge's entry points as
    importlib.metadata does, and its load() gives the same objects."""
    from importlib import metadata
    groups = (discovery.GROUP, "onnxedge.commands")
    eps = metadata.entry_points()
    want = {(g, ep.name, ep.value) for g in groups for ep in
            (eps.select(group=g) if hasattr(eps, "select") else eps.get(g, ()))}
    got = {(ep.group, ep.name, ep.value) for ep in discovery.read_entry_points()
           if ep.group in groups}
    assert got == want and want
    by_name = {ep.name: ep for ep in discovery.read_entry_points() if ep.group == discovery.GROUP}
    assert by_name["WasmSimdExecutionProvider"].load().name == "WasmSimdExecutionProvider"


def test_entry_points_text_parsing() -> None:
    """Sections, comments, blank lines and extras as setuptools writes them."""
    text = "# c\n[onnxedge.providers]\nA = m.n:Cls\n\n; x\n[console_scripts]\nb = m:main [extra]\n"
    got = [(e.group, e.name, e.value) for e in discovery._parse_entry_points(text)]
    assert got == [("onnxedge.providers", "A", "m.n:Cls"), ("console_scripts", "b", "m:main [extra]")]
