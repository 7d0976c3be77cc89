"""`onnxedge serve` against hostile clients (issue 14): request dtypes and shapes, memory per
request and requests in flight, listen backlog, one write per answer with TCP_NODELAY, draining on
SIGTERM, read deadlines, HEAD, standard JSON, duplicate Content-Length, /metadata paths.

Real servers on 127.0.0.1 with ephemeral ports; memory is measured on a server subprocess
(RLIMIT_AS set, peak RSS read from /proc) while it serves the hostile requests."""
from __future__ import annotations

import http.client
import io
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxedge import serve

W = np.random.RandomState(0).standard_normal((4, 3)).astype(np.float32)
SERVER_AS_LIMIT = 1536 * 1024 * 1024   # the server subprocess's address-space limit
RSS_GROWTH_MB = 150                    # what a hostile request may add to its peak RSS


def _save(graph, path: str) -> str:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve_hardening")
    mlp = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["z"]),
         helper.make_node("Softmax", ["z"], ["y"], axis=-1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "W")])
    ident = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "ident",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    return {"mlp": _save(mlp, str(d / "mlp.onnx")), "ident": _save(ident, str(d / "ident.onnx"))}


class _Running:
    def __init__(self, server):
        self.server = server
        self.port = server.server_address[1]
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _server(path: str, **kw):
    return _Running(serve.make_server(path, port=0, **kw))


@pytest.fixture(scope="module")
def mlp(models):
    with _server(models["mlp"]) as running:
        yield running


@pytest.fixture(scope="module")
def ident(models):
    with _server(models["ident"]) as running:
        yield running


def _call(port: int, method: str, path: str, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _post(port: int, doc, headers=None):
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    status, hdrs, data = _call(port, "POST", "/v1/run", body, h)
    return status, hdrs, _strict_json(data)


def _strict_json(data: bytes):
    """RFC 8259 JSON only: NaN / Infinity literals are an error."""
    def refuse(name):
        raise ValueError("non-standard JSON constant %s" % name)
    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def _raw(port: int, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def _read_response(sock: socket.socket, buf: bytes = b"", to_head: bool = False):
    """(status, headers dict, body, rest) of one response read from a raw socket (`to_head`: the
    answer to HEAD, which has no body whatever its Content-Length says)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the headers")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    n = 0 if to_head else int(headers.get("content-length", 0))
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:n], rest[n:]


def _closed_by_peer(sock: socket.socket, wait: float) -> bool:
    """True when the peer closes (EOF or reset) within `wait` seconds."""
    ready, _, _ = select.select([sock], [], [], wait)
    if not ready:
        return False
    try:
        return sock.recv(65536) == b""
    except OSError:
        return True


# ----------------------------------------------------------------------- dtypes and shapes

@pytest.mark.parametrize("shape", [[True, 4], [2 ** 64, 1], [2 ** 62, 4], [2 ** 40, 2 ** 40, 0],
                                   [-1, 4], [1.0, 4], "14"],
                         ids=["bool", "2**64", "overflow", "huge-with-zero", "negative", "float",
                              "string"])
def test_bad_shapes_are_400(mlp, shape):
    data = [] if shape == [2 ** 40, 2 ** 40, 0] else [0.5, 0.5, 0.5, 0.5]
    status, _, doc = _post(mlp.port, {"inputs": {"x": {"dtype": "float32", "shape": shape,
                                                       "data": data}}})
    assert status == 400, doc
    assert doc["error"]["type"] == "InvalidArgument" and "input 'x'" in doc["error"]["message"]


@pytest.mark.parametrize("dtype", ["(4,4)f8", "U8", "S4", "V8", "<f4", "float32, int32", "O",
                                   "datetime64[s]", 7])
def test_dtype_names_only_onnx_element_types(mlp, dtype):
    status, _, doc = _post(mlp.port, {"inputs": {"x": {"dtype": dtype, "data": [[1, 2, 3, 4]]}}})
    assert status == 400, doc
    assert "dtype" in doc["error"]["message"]


def test_dtype_must_be_the_declared_type(mlp):
    for name in ("float32", "float", "tensor(float)"):
        status, _, doc = _post(mlp.port, {"inputs": {"x": {"dtype": name, "data": [[1, 2, 3, 4]]}}})
        assert status == 200, (name, doc)
    status, _, doc = _post(mlp.port, {"inputs": {"x": {"dtype": "int64", "data": [[1, 2, 3, 4]]}}})
    assert status == 400
    assert "input 'x': got tensor(int64), expected tensor(float)" in doc["error"]["message"]


def test_deep_json_is_400(mlp):
    body = b'{"inputs": {"x": ' + b"[" * 100000 + b"]" * 100000 + b"}}"
    status, _, doc = _post(mlp.port, body)
    assert status == 400 and "nested too deeply" in doc["error"]["message"]
    # many small containers (each ~70 bytes once parsed) are refused before parsing
    body = b'{"inputs": {"x": [' + b"[0]," * 300000 + b"[0]]}}"
    status, _, doc = _post(mlp.port, body)
    assert status == 400 and "arrays and objects" in doc["error"]["message"]


def _npy(descr: str, shape, data: bytes = b"") -> bytes:
    header = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def test_npy_header_checked_against_the_body(mlp):
    npy = {"Content-Type": "application/x-npy"}
    for body, message in [
            (_npy("<f4", (2, 4), b"\0" * 12), "but 12 data bytes follow"),
            (_npy("<f4", (2 ** 20, 2 ** 20)), "but 0 data bytes follow"),
            (_npy("<f4", (2 ** 40, 2 ** 40)), "holds more than 2**63 values"),
            (_npy("<U8", (1, 4), b"\0" * 128), "not an ONNX element type"),
            (_npy("<f8", (1, 4), b"\0" * 32), "got tensor(double), expected tensor(float)")]:
        status, _, data = _call(mlp.port, "POST", "/v1/run", body, npy)
        assert status == 400 and message in _strict_json(data)["error"]["message"], data
    x = np.asfortranarray(np.arange(8, dtype=np.float32).reshape(2, 4))
    buf = io.BytesIO()
    np.save(buf, x)
    status, _, data = _call(mlp.port, "POST", "/v1/run", buf.getvalue(),
                            dict(npy, Accept="application/x-npy"))
    assert status == 200
    z = x.astype(np.float64) @ W
    want = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(np.load(io.BytesIO(data)), want / want.sum(-1, keepdims=True),
                               rtol=1e-5)


# ------------------------------------------------------------------ standard JSON, HEAD, ...

def test_non_finite_floats_are_named_strings_both_ways(ident):
    status, _, doc = _post(ident.port, {"inputs": {"x": {"dtype": "float32", "shape": [5],
                                                         "data": [1.5, "NaN", "Infinity",
                                                                  "-Infinity", -2]}}})
    assert status == 200, doc
    assert doc["outputs"]["y"]["data"] == [1.5, "NaN", "Infinity", "-Infinity", -2.0]
    status, _, doc = _post(ident.port, {"inputs": {"x": [0.25, 2.0]}})
    assert status == 200 and doc["outputs"]["y"]["data"] == [0.25, 2.0]


def test_two_different_content_lengths_are_400(mlp):
    body = json.dumps({"inputs": {"x": [[1, 2, 3, 4]]}}).encode()
    for lengths, want in [((len(body), len(body) + 7), 400), ((len(body), len(body)), 200)]:
        s = _raw(mlp.port)
        try:
            s.sendall(("POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % lengths).encode()
                      + body + b"\0" * 7)
            status, _, _, _ = _read_response(s)
        finally:
            s.close()
        assert status == want, lengths


def test_head_is_get_without_the_body(mlp):
    s = _raw(mlp.port)
    try:
        s.sendall(b"HEAD /metadata HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _, rest = _read_response(s, to_head=True)
        assert status == 200 and int(headers["content-length"]) > 0
        # nothing follows the headers: the next bytes on this connection are the next answer
        s.sendall(b"GET /metadata HTTP/1.1\r\nHost: x\r\n\r\n")
        status2, headers2, body, _ = _read_response(s, rest)
        assert rest == b"" or rest.startswith(b"HTTP/1.1 200")
    finally:
        s.close()
    assert status2 == 200 and len(body) == int(headers["content-length"])
    assert headers2["content-length"] == headers["content-length"]
    status, headers, _ = _call(mlp.port, "HEAD", "/v1/run")
    assert status == 405 and headers["allow"] == "POST"


def test_metadata_shows_the_file_name_only(mlp, models):
    status, _, data = _call(mlp.port, "GET", "/metadata")
    meta = _strict_json(data)
    assert status == 200 and meta["model"] == "mlp.onnx"
    assert os.path.dirname(models["mlp"]) not in data.decode()


# ----------------------------------------------------------- sockets: writes, backlog, limits

def test_one_write_per_answer_and_tcp_nodelay(models):
    seen = {"writes": [], "nodelay": []}

    class _Writer:
        def __init__(self, inner):
            self._inner = inner

        def write(self, data):
            seen["writes"].append(len(data))
            return self._inner.write(data)

        def __getattr__(self, name):
            return getattr(self._inner, name)

    class Spy(serve.RequestHandler):
        def setup(self):
            super().setup()
            seen["nodelay"].append(self.connection.getsockopt(socket.IPPROTO_TCP,
                                                              socket.TCP_NODELAY))
            self.wfile = _Writer(self.wfile)

    with _server(models["mlp"]) as running:
        running.server.RequestHandlerClass = Spy
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
        for _ in range(3):
            conn.request("POST", "/v1/run", json.dumps({"inputs": {"x": [[1, 2, 3, 4]]}}),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read()
        conn.close()
    assert len(seen["nodelay"]) == 1 and seen["nodelay"][0] != 0   # one keep-alive connection
    assert len(seen["writes"]) == 3                                # headers and body together


@pytest.mark.parametrize("which", ["serve", "web"])
def test_listen_backlog_holds_many_pending_connections(models, tmp_path, which):
    """Connections queue while the server is not accepting (48 > socketserver's default 5)."""
    if which == "serve":
        server = serve.make_server(models["mlp"], port=0)
        close = server.server_close
        port = server.server_address[1]
    else:
        from onnxedge.web.static_server import PageServer
        server = PageServer({"/": str(tmp_path)})
        close = server.stop
        port = int(server.origin.rsplit(":", 1)[1])
    socks = []
    try:
        for _ in range(48):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=0.5))
    finally:
        for s in socks:
            s.close()
        close()
    assert len(socks) == 48


def test_requests_in_flight_are_bounded_503(models):
    with _server(models["mlp"], max_inflight=1, queue_wait=0.2) as running:
        body = json.dumps({"inputs": {"x": [[1, 2, 3, 4]]}}).encode()
        holder = _raw(running.port)
        try:   # this request holds the only slot while its body trickles in
            holder.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                           b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:5])
            for _ in range(50):
                status, headers, data = _call(running.port, "POST", "/v1/run", body,
                                              {"Content-Type": "application/json"})
                if status == 503:
                    break
                time.sleep(0.02)
            assert status == 503 and headers["retry-after"] == "1", data
            assert "--max-inflight" in _strict_json(data)["error"]["message"]
            assert _call(running.port, "GET", "/healthz")[0] == 200   # not a run: not limited
            holder.sendall(body[5:])
            assert _read_response(holder)[0] == 200
        finally:
            holder.close()
        assert _call(running.port, "POST", "/v1/run", body,
                     {"Content-Type": "application/json"})[0] == 200


def test_slow_headers_and_slow_body_hit_a_total_deadline(models):
    with _server(models["mlp"], header_timeout=1.0, body_timeout=1.0) as running:
        for head, trickle in [(b"POST /v1/run HTTP/1.1\r\n", b"X-Slow: 1\r\n"),
                              (b"POST /v1/run HTTP/1.1\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 100000\r\n\r\n", b"[")]:
            s = _raw(running.port)
            try:
                s.sendall(head)
                closed = False
                for _ in range(20):   # a few bytes every 0.25 s: each recv is quick, the total not
                    if _closed_by_peer(s, 0.25):
                        closed = True
                        break
                    try:
                        s.sendall(trickle)
                    except OSError:
                        closed = True
                        break
                assert closed, head
            finally:
                s.close()
        assert _call(running.port, "GET", "/healthz")[0] == 200


# --------------------------------------------------------------------- server subprocesses

_SERVER = ("import resource, sys\n"
           "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))\n"
           "from onnxedge.cli import main\n"
           "sys.exit(main(sys.argv[2:]))\n")


def _spawn(model: str, *extra: str):
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(SERVER_AS_LIMIT), "serve", model,
                             "--port", "0"] + list(extra),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines = []
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise AssertionError("server did not start: %s" % "".join(lines))


def _hwm_mb(pid: int) -> float:
    with open("/proc/%d/status" % pid) as f:
        return next(int(ln.split()[1]) / 1024.0 for ln in f if ln.startswith("VmHWM:"))


def _stop(proc) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def _big_post(port: int, body: bytes):
    """Status of a POST whose body the server may refuse unread (then it is never sent)."""
    s = _raw(port, timeout=30)
    try:
        s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        if not select.select([s], [], [], 1.0)[0]:
            s.sendall(body)
        return _read_response(s)[0]
    except OSError:
        return None
    finally:
        s.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM from /proc")
def test_hostile_requests_keep_memory_bounded(models):
    proc, port = _spawn(models["mlp"])
    try:
        base = _hwm_mb(proc.pid)
        hostile = [{"inputs": {"x": {"dtype": "U2000000000", "data": [1]}}},
                   {"inputs": {"x": {"dtype": "(30000,30000)f8", "data": [1]}}},
                   {"inputs": {"x": {"dtype": "float32", "shape": [30000, 30000], "data": [1]}}}]
        for doc in hostile:
            status, _, answer = _post(port, doc)
            assert status == 400, answer
        for body in (_npy("<f8", (100000, 100000)), _npy("<U2000000000", (1,))):
            status, _, data = _call(port, "POST", "/v1/run", body,
                                    {"Content-Type": "application/x-npy"})
            assert status == 400, data
        # four concurrent 40 MB JSON bodies (default --max-json-bytes is 4 MiB): refused unread
        big = b'{"inputs": {"x": [[' + b"0.5," * (10 * 1024 * 1024) + b'0.5]]}}'
        statuses = []
        threads = [threading.Thread(target=lambda: statuses.append(_big_post(port, big)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert statuses == [413] * 4
        grown = _hwm_mb(proc.pid) - base
        # four concurrent bodies just under the limit are parsed: ~12x each, bounded in all
        n = (4 * 1024 * 1024 - 100) // 4
        at_limit = b'{"inputs": {"x": [[' + b"0.5," * (n - 1) + b'0.5]]}}'
        statuses = []
        threads = [threading.Thread(target=lambda: statuses.append(_big_post(port, at_limit)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert statuses == [400] * 4   # [1, 1M] is not [batch, 4]
        grown_at_limit = _hwm_mb(proc.pid) - base
        assert _call(port, "GET", "/healthz")[0] == 200
    finally:
        err = _stop(proc)
    assert grown < RSS_GROWTH_MB, "peak RSS grew by %.0f MB" % grown
    assert grown_at_limit < 4 * 16 * 4, "peak RSS grew by %.0f MB" % grown_at_limit
    assert "Traceback" not in err


def test_sigterm_drains_in_flight_requests(models):
    proc, port = _spawn(models["mlp"])   # default grace period: 5 s
    body = json.dumps({"inputs": {"x": [[1, 2, 3, 4]]}}).encode()
    busy, idle = _raw(port, timeout=10), _raw(port, timeout=10)
    try:
        idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")   # keep-alive, then idle
        assert _read_response(idle)[0] == 200
        busy.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert _closed_by_peer(idle, 3)    # an idle keep-alive connection is closed at once
        refused = False
        for _ in range(50):                # and no new connection is accepted
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                refused = True
                break
            time.sleep(0.05)
        assert refused
        assert proc.poll() is None         # still finishing the running request
        busy.sendall(body[10:])
        status, headers, answer, _ = _read_response(busy)
        assert status == 200 and "y" in _strict_json(answer)["outputs"]
        assert headers.get("connection") == "close"
        assert proc.wait(timeout=10) == 0
    finally:
        busy.close()
        idle.close()
        err = _stop(proc)
    assert "stopped (SIGTERM); socket closed" in err and "Traceback" not in err


def test_second_sigterm_ends_the_grace_period(models):
    proc, port = _spawn(models["mlp"], "--grace-period", "60")
    busy = _raw(port, timeout=10)
    try:
        busy.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{")
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        busy.close()
        err = _stop(proc)
    assert "dropped 1 connection(s)" in err and "Traceback" not in err
