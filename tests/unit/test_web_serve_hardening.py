"""`onnxedge web serve` against hostile clients (issue 14): a NUL in the URL is a 400 without a
traceback, a client trickling its headers is cut off by a total deadline, SIGTERM lets a running
request finish, and a second SIGTERM ends the wait cleanly. (The listen backlog is tested with
`onnxedge serve`'s in test_serve_hardening.py.)"""
from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from onnxedge.web.static_server import PageServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect(port: int) -> socket.socket:
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.05)
    raise AssertionError("nothing listens on %d" % port)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (HTTP/1.0: one answer per connection)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


@pytest.fixture
def bundle(tmp_path):
    (tmp_path / "index.html").write_bytes(b"<html>hi</html>")
    return tmp_path


@pytest.fixture
def cli_server(bundle):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "onnxedge.cli", "web", "serve", str(bundle),
                             "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert "http://127.0.0.1:%d/" % port in proc.stdout.readline()
    yield proc, port
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _finish(proc) -> str:
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return out + err


@pytest.mark.parametrize("target", [b"/index.html%00", b"/a\x00b", b"/%00/../index.html"])
def test_nul_in_url_is_400_without_traceback(cli_server, target):
    proc, port = cli_server
    s = _connect(port)
    try:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _answer(s)
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.") and answer.split()[1] == b"400", answer[:200]
    s = _connect(port)   # still serving
    try:
        s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        assert _answer(s).endswith(b"<html>hi</html>")
    finally:
        s.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    logs = _finish(proc)
    assert "Traceback" not in logs and "ValueError" not in logs


def test_sigterm_lets_a_running_request_finish(cli_server):
    proc, port = cli_server
    s = _connect(port)
    try:
        s.sendall(b"GET /index.html HTTP/1.1\r\n")   # a request in flight: headers not done
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert proc.poll() is None
        s.sendall(b"Host: x\r\n\r\n")
        answer = _answer(s)
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"<html>hi</html>")
    assert proc.wait(timeout=20) == 0
    logs = _finish(proc)
    assert "stopped (SIGTERM)" in logs and "Traceback" not in logs


def test_second_sigterm_is_clean(cli_server):
    proc, port = cli_server
    s = _connect(port)
    try:
        s.sendall(b"GET /index.html HTTP/1.1\r\n")   # keeps the drain waiting
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)   # two signals at once may arrive as one
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        s.close()
    logs = _finish(proc)
    assert "Traceback" not in logs and "stopped (SIGTERM)" in logs
    assert "dropped 1 connection(s)" in logs   # the second signal ended the grace period


def test_trickled_headers_hit_a_total_deadline(bundle):
    server = PageServer({"/": str(bundle)}, header_timeout=1.0).start()
    port = int(server.origin.rsplit(":", 1)[1])
    try:
        s = _connect(port)
        try:
            s.sendall(b"GET /index.html HTTP/1.1\r\n")
            closed = False
            for _ in range(20):   # one header line every 0.25 s: 5 s in all, deadline 1 s
                if select.select([s], [], [], 0.25)[0]:
                    try:
                        closed = s.recv(65536) == b""
                    except OSError:
                        closed = True
                    if closed:
                        break
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    closed = True
                    break
            assert closed
        finally:
            s.close()
        s = _connect(port)
        try:
            s.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
            assert _answer(s).endswith(b"<html>hi</html>")
        finally:
            s.close()
    finally:
        server.stop()
