"""`onnxedge serve`: answers match a direct session run; every bad request gets a clear 4xx and
the server keeps serving; SIGTERM / SIGINT stop a server process with exit code 0."""
from __future__ import annotations

import http.client
import io
import json
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import serve

RNG = np.random.RandomState(0)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def _save(model, path: str) -> str:
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve_models")
    mlp = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["z"]),
         helper.make_node("Softmax", ["z"], ["y"], axis=-1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    two = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Mul", ["a", "b"], ["prod"])],
        "two", [helper.make_tensor_value_info("a", TensorProto.INT64, [2]),
                helper.make_tensor_value_info("b", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("sum", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("prod", TensorProto.INT64, [2])])
    opset = [helper.make_opsetid("", 17)]
    return {"mlp": _save(helper.make_model(mlp, opset_imports=opset), str(d / "mlp.onnx")),
            "two": _save(helper.make_model(two, opset_imports=opset), str(d / "two.onnx"))}


def _start(path: str, **kw):
    server = serve.make_server(path, port=0, **kw)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture(scope="module")
def mlp_server(models):
    server, thread = _start(models["mlp"], max_body_bytes=4096)
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture(scope="module")
def two_server(models):
    server, thread = _start(models["two"])
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def request(server, method: str, path: str, body=None, headers=None, raw_headers=False):
    """(status, headers, body bytes) of one request on a fresh connection."""
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    if raw_headers:   # send exactly these headers (e.g. no Content-Length)
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        if body:
            conn.send(body)
    else:
        conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def post_json(server, doc, path="/v1/run", headers=None):
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    status, hdrs, data = request(server, "POST", path, body, h)
    return status, json.loads(data.decode()) if hdrs.get("Content-Type") == "application/json" else data


def assert_healthy(server):
    status, _, data = request(server, "GET", "/healthz")
    assert status == 200 and json.loads(data.decode()) == {"status": "ok"}




# ------------------------------------------------------------------------------ good requests

def test_json_run_matches_direct_session(mlp_server, models):
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    want = onnxedge.InferenceSession(models["mlp"]).run(None, {"x": x})[0]
    z = x @ W + B
    ref = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(want, ref / ref.sum(-1, keepdims=True), rtol=1e-5)
    for path in ("/v1/run", "/run"):
        status, doc = post_json(mlp_server, {"inputs": {"x": {"dtype": "float32", "shape": [2, 4],
                                                              "data": x.ravel().tolist()}}}, path)
        assert status == 200, doc
        out = doc["outputs"]["y"]
        assert out["dtype"] == "float32" and out["shape"] == [2, 3]
        np.testing.assert_array_equal(np.array(out["data"], np.float32), want)
    # a nested list takes the model's element type
    status, doc = post_json(mlp_server, {"inputs": {"x": x.tolist()}})
    assert status == 200
    np.testing.assert_array_equal(np.array(doc["outputs"]["y"]["data"], np.float32), want)


def test_npy_in_and_out(mlp_server, models):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    want = onnxedge.InferenceSession(models["mlp"]).run(None, {"x": x})[0]
    buf = io.BytesIO()
    np.save(buf, x)
    status, hdrs, data = request(mlp_server, "POST", "/v1/run", buf.getvalue(),
                                 {"Content-Type": "application/x-npy", "Accept": "application/x-npy"})
    assert status == 200 and hdrs["Content-Type"] == "application/x-npy"
    got = np.load(io.BytesIO(data))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_two_inputs_named_npy_and_output_choice(two_server):
    a, b = np.array([3, 4], np.int64), np.array([5, -6], np.int64)
    status, doc = post_json(two_server, {"inputs": {"a": a.tolist(), "b": {"dtype": "int64", "shape": [2],
                                                                          "data": b.tolist()}},
                                         "outputs": ["prod"]})
    assert status == 200 and list(doc["outputs"]) == ["prod"]
    assert doc["outputs"]["prod"] == {"dtype": "int64", "shape": [2], "data": [15, -24]}
    # .npy bodies feed one input: a multi-input model needs the name, and then misses the other
    buf = io.BytesIO()
    np.save(buf, a)
    status, _, data = request(two_server, "POST", "/v1/run", buf.getvalue(),
                              {"Content-Type": "application/x-npy"})
    assert status == 400 and b"name one with ?input=NAME" in data
    status, _, data = request(two_server, "POST", "/v1/run?input=a", buf.getvalue(),
                              {"Content-Type": "application/x-npy"})
    assert status == 400 and b"missing input(s) ['b']" in data
    status, _, data = request(two_server, "POST", "/v1/run", json.dumps({"inputs": {"a": [1, 2], "b": [3, 4]}}).encode(),
                              {"Content-Type": "application/json", "Accept": "application/x-npy",
                               "X-Output-Name": "sum"})
    assert status == 200
    np.testing.assert_array_equal(np.load(io.BytesIO(data)), [4, 6])


def test_healthz_and_metadata(mlp_server):
    assert_healthy(mlp_server)
    status, _, data = request(mlp_server, "GET", "/metadata")
    meta = json.loads(data.decode())
    assert status == 200
    assert meta["inputs"] == [{"name": "x", "type": "tensor(float)", "dtype": "float32",
                               "shape": ["batch", 4]}]
    assert meta["outputs"][0]["name"] == "y" and meta["providers"] == ["CPUExecutionProvider"]
    assert meta["opsets"] == {"ai.onnx": 17} and meta["metadata"]["graph_name"] == "mlp"


def test_parallel_requests(mlp_server, models):
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    want = onnxedge.InferenceSession(models["mlp"]).run(None, {"x": x})[0]
    results = []

    def one():
        results.append(post_json(mlp_server, {"inputs": {"x": x.tolist()}}))
    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 8
    for status, doc in results:
        assert status == 200
        np.testing.assert_array_equal(np.array(doc["outputs"]["y"]["data"], np.float32), want)


# ------------------------------------------------------------------------------- bad requests

BAD_JSON = [
    ({"inputs": {"x": {"dtype": "float32", "shape": [2, 5], "data": [0.0] * 10}}}, 400,
     "input 'x': dimension 1 is 5, the model expects 4"),
    ({"inputs": {"x": {"dtype": "float32", "shape": [4], "data": [0.0] * 4}}}, 400,
     "input 'x': got rank 1"),
    ({"inputs": {"x": {"dtype": "float64", "shape": [1, 4], "data": [0.0] * 4}}}, 400,
     "input 'x': got tensor(double), expected tensor(float)"),
    ({"inputs": {"x": {"dtype": "float32", "shape": [2, 4], "data": [0.0] * 3}}}, 400,
     "shape [2, 4] holds 8 values but data has 3"),
    ({"inputs": {"x": {"dtype": "floaty", "data": [1]}}}, 400, "unknown dtype 'floaty'"),
    ({"inputs": {"x": [[1, 2], [3]]}}, 400, "input 'x': data cannot be read"),
    ({"inputs": {"x": [["a", "b", "c", "d"]]}}, 400, "input 'x': data cannot be read as float32"),
    ({"inputs": {"nope": [[1, 2, 3, 4]]}}, 400, "'nope' is not an input of this model"),
    ({"inputs": {}}, 400, "missing input(s) ['x']"),
    ({"input": {}}, 400, "must be an object {\"inputs\""),
    ([1, 2], 400, "must be an object"),
    ({"inputs": {"x": [[0, 0, 0, 0]]}, "outputs": ["zz"]}, 400, "'zz' is not an output"),
    ({"inputs": {"x": [[0, 0, 0, 0]]}, "outputs": "y"}, 400, "\"outputs\" must be a list"),
    (b"{\"inputs\": {\"x\": [[1, 2", 400, "malformed JSON body"),
    (b"\xff\xfe not utf8", 400, "malformed JSON body"),
]


@pytest.mark.parametrize("doc,status,message", BAD_JSON, ids=[m for _, _, m in BAD_JSON])
def test_bad_json_requests(mlp_server, doc, status, message):
    got, answer = post_json(mlp_server, doc)
    assert got == status, answer
    assert message in answer["error"]["message"], answer
    assert answer["error"]["code"] == status
    assert_healthy(mlp_server)


def test_oversized_body_is_refused_without_reading(mlp_server):
    body = json.dumps({"inputs": {"x": [[0.5] * 4] * 200}}).encode()
    assert len(body) > 4096
    status, hdrs, data = request(mlp_server, "POST", "/v1/run", body, {"Content-Type": "application/json"})
    assert status == 413 and hdrs.get("Connection") == "close"
    assert b"at most 4096 (--max-body-bytes)" in data
    # only the headers are sent: a huge declared length is refused at once, the body never read
    status, _, data = request(mlp_server, "POST", "/v1/run", None,
                              {"Content-Length": str(10 ** 12), "Content-Type": "application/json"},
                              raw_headers=True)
    assert status == 413 and b"1000000000000 bytes" in data
    assert_healthy(mlp_server)


def test_length_required_and_bad_length(mlp_server):
    status, _, data = request(mlp_server, "POST", "/v1/run", None, {"Content-Type": "application/json"},
                              raw_headers=True)
    assert status == 411 and b"Content-Length" in data
    status, _, data = request(mlp_server, "POST", "/v1/run", None, {"Content-Length": "-3"},
                              raw_headers=True)
    assert status == 400 and b"not a non-negative integer" in data
    assert_healthy(mlp_server)


def test_bad_npy_and_media_type(mlp_server):
    status, _, data = request(mlp_server, "POST", "/v1/run", b"\x93NUMPY garbage",
                              {"Content-Type": "application/x-npy"})
    assert status == 400 and b"not a .npy array" in data
    buf = io.BytesIO()
    np.save(buf, np.zeros((1, 4), np.float64))
    status, _, data = request(mlp_server, "POST", "/v1/run", buf.getvalue(),
                              {"Content-Type": "application/x-npy"})
    assert status == 400 and b"got tensor(double), expected tensor(float)" in data
    status, _, data = request(mlp_server, "POST", "/v1/run", b"x=1",
                              {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415 and b"is not accepted" in data
    assert_healthy(mlp_server)


def test_unknown_path_and_wrong_method(mlp_server):
    status, _, data = request(mlp_server, "GET", "/v2/predict")
    assert status == 404 and b"no endpoint /v2/predict" in data
    status, hdrs, data = request(mlp_server, "GET", "/v1/run")
    assert status == 405 and hdrs["Allow"] == "POST" and b"does not accept GET" in data
    status, hdrs, _ = request(mlp_server, "POST", "/healthz", b"{}", {"Content-Type": "application/json"})
    assert status == 405 and hdrs["Allow"] == "GET, HEAD"
    status, _, _ = request(mlp_server, "DELETE", "/metadata")
    assert status == 405
    assert_healthy(mlp_server)


def test_keep_alive_connection_serves_many_requests(mlp_server):
    conn = http.client.HTTPConnection(*mlp_server.server_address[:2], timeout=10)
    for doc in ({"inputs": {"x": [[1, 2, 3, 4]]}}, {"bad": 1}, {"inputs": {"x": [[1, 2, 3, 4]]}}):
        conn.request("POST", "/v1/run", json.dumps(doc).encode(), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == (400 if "bad" in doc else 200)
    # a refused request whose body was never read closes the connection; the next one still works
    conn.request("POST", "/healthz", b'{"x": 1}', {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 405 and resp.getheader("Connection") == "close"
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read().decode()) == {"status": "ok"}
    conn.close()


def test_make_server_errors(models):
    with pytest.raises(onnxedge.InvalidArgument, match="--max-body-bytes must be positive"):
        serve.make_server(models["mlp"], port=0, max_body_bytes=0)
    with pytest.raises(onnxedge.NoSuchFile):
        serve.make_server(models["mlp"] + ".missing", port=0)


# ---------------------------------------------------------------------------- the process

def _spawn(model: str):
    proc = subprocess.Popen([sys.executable, "-m", "onnxedge.cli", "serve", model, "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    lines = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1)), lines
    proc.kill()
    raise AssertionError("server did not start: %s" % "".join(lines))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_process_cleanly(models, sig):
    proc, port, _ = _spawn(models["mlp"])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/run", json.dumps({"inputs": {"x": [[1, 2, 3, 4]]}}).encode(),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and "y" in json.loads(resp.read().decode())["outputs"]
        conn.close()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert '"POST /v1/run" 200' in err                 # one log line per request
    assert "stopped (%s); socket closed" % sig.name in err
    assert "Traceback" not in err
