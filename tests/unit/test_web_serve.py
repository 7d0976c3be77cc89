"""onnxedge.web.static_server: MIME types, isolation headers, 404s, no escape from the served
folder, and `onnxedge web serve` exiting cleanly on SIGTERM."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from onnxedge.errors import InvalidArgument
from onnxedge.web.static_server import PageServer

FILES = {"index.html": b"<html></html>", "pyodide.asm.wasm": b"\0asm", "m.mjs": b"export {}",
         "a.js": b"1", "numpy.data": b"x", "onnxedge-0.1.0-py3-none-any.whl": b"PK",
         "models/m.oxe": b"OXE", "bundle.json": b"{}"}
EXPECTED = {"pyodide.asm.wasm": "application/wasm", "m.mjs": "text/javascript",
            "a.js": "text/javascript", "numpy.data": "application/octet-stream",
            "onnxedge-0.1.0-py3-none-any.whl": "application/zip",
            "models/m.oxe": "application/octet-stream", "bundle.json": "application/json",
            "index.html": "text/html"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    dist = root / "dist"
    for name, data in FILES.items():
        (dist / name).parent.mkdir(parents=True, exist_ok=True)
        (dist / name).write_bytes(data)
    (root / "secret.txt").write_bytes(b"top secret")
    os.symlink(str(root / "secret.txt"), str(dist / "link.txt"))
    server = PageServer({"/": str(dist)}).start()
    yield server
    server.stop()


def _get(server: PageServer, path: str):
    host, port = server.origin.rsplit("/", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path)   # sent as is: no client-side normalisation of ".."
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mime_types_and_isolation_headers(served, name):
    status, headers, body = _get(served, "/" + name)
    assert status == 200 and body == FILES[name]
    assert headers["content-type"].split(";")[0] == EXPECTED[name]
    assert headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["cross-origin-embedder-policy"] == "require-corp"
    assert headers["cross-origin-resource-policy"] == "same-origin"


@pytest.mark.parametrize("path", ["/../secret.txt", "/models/../../secret.txt", "/%2e%2e/secret.txt",
                                  "/link.txt", "/missing.oxe"])
def test_no_escape_and_404(served, path):
    status, _, body = _get(served, path)
    assert status == 404 and b"top secret" not in body


def test_mount_checks_and_late_mounts(tmp_path):
    with pytest.raises(InvalidArgument, match="not a folder"):
        PageServer({"/x/": str(tmp_path / "nope")})
    server = PageServer({}).start()
    try:
        (tmp_path / "a.json").write_text("[1]")
        assert server.mount("/b/", str(tmp_path)).endswith("/b/")
        status, headers, body = _get(server, "/b/a.json")
        assert (status, body) == (200, b"[1]")
        assert _get(server, "/a.json")[0] == 404
    finally:
        server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve_prints_url_and_stops_on_sigterm(tmp_path):
    (tmp_path / "index.html").write_text("<html>hi</html>")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "onnxedge.cli", "web", "serve", str(tmp_path),
                             "--port", str(port), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:%d/" % port in line
        for _ in range(50):
            try:
                status, _, body = _get(_Origin(port), "/")
                break
            except OSError:
                time.sleep(0.1)
        assert (status, body) == (200, b"<html>hi</html>")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_cli_serve_refuses_a_folder_without_index(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "onnxedge.cli", "web", "serve", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "has no index.html" in proc.stderr


class _Origin:
    def __init__(self, port: int):
        self.origin = "http://127.0.0.1:%d" % port


def test_server_without_isolation_leaves_coop_coep_out(tmp_path):
    (tmp_path / "index.html").write_bytes(b"<html></html>")
    server = PageServer({"/": str(tmp_path)}, isolated=False).start()
    try:
        status, headers, _ = _get(server, "/index.html")
    finally:
        server.stop()
    assert status == 200
    assert "cross-origin-opener-policy" not in headers and "cross-origin-embedder-policy" not in headers
