"""`onnxedge serve`: a small HTTP inference server over one InferenceSession (stdlib only).

Endpoints:

- ``POST /v1/run`` (or ``/run``): a JSON body ``{"inputs": {NAME: TENSOR}, "outputs": [NAMES]}``
  where TENSOR is ``{"dtype": "float32", "shape": [...], "data": [...]}`` or a nested list (then
  the model's declared element type is used); or a ``.npy`` body (``Content-Type:
  application/x-npy``) for a single-input model, or naming the input with the ``X-Input-Name``
  header or ``?input=NAME``. The answer is JSON ``{"outputs": {NAME: TENSOR}}``, or ``.npy`` of
  one output when the request says ``Accept: application/x-npy`` (``X-Output-Name`` /
  ``?output=NAME`` picks it when the model has several).
- ``GET /healthz``: ``{"status": "ok"}``.
- ``GET /metadata``: inputs, outputs, providers, opsets and the model's metadata.

Bad requests get a 4xx JSON answer ``{"error": {"code", "type", "message"}}`` and the server keeps
serving: a missing Content-Length is 411, a body over ``--max-body-bytes`` is 413 (the body is not
read), malformed JSON or a wrong input (the session's own checks) is 400, an unknown path 404, a
wrong method 405. SIGTERM and SIGINT stop the server cleanly (exit code 0).
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import parse_qs, urlsplit

import numpy as np

from . import dtypes
from .errors import InvalidArgument, OnnxEdgeError

log = logging.getLogger("onnxedge.serve")

NPY_TYPE = "application/x-npy"
JSON_TYPE = "application/json"
DEFAULT_MAX_BODY = 64 * 1024 * 1024
RUN_PATHS = ("/v1/run", "/run")
GET_PATHS = ("/healthz", "/metadata")


class HttpError(Exception):
    """A request the server refuses: HTTP status, error type and a message for the client."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


# ------------------------------------------------------------------------- tensor <-> JSON

def parse_dtype(name: Any, where: str) -> np.dtype:
    """A numpy dtype from an ONNX element name ("float", "tensor(float)") or a numpy name."""
    if not isinstance(name, str):
        raise InvalidArgument("%s: dtype must be a string such as \"float32\", got %r" % (where, name))
    text = name[len("tensor("):-1] if name.startswith("tensor(") and name.endswith(")") else name
    code = dtypes.from_ort_name(text)
    if code is not None:
        return dtypes.to_numpy(code)
    if text in ("str", "object"):
        return np.dtype(object)
    try:
        return np.dtype(text)
    except TypeError:
        raise InvalidArgument("%s: unknown dtype %r (use a numpy name such as \"float32\" or an "
                              "ONNX element type such as \"float\")" % (where, name)) from None


def _declared_dtype(type_str: str) -> Optional[np.dtype]:
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        try:
            return parse_dtype(type_str, "")
        except OnnxEdgeError:
            return None
    return None


def decode_tensor(name: str, spec: Any, declared: Optional[np.dtype]) -> np.ndarray:
    """A numpy array from its JSON form: {"dtype", "shape", "data"} or a nested list."""
    where = "input %r" % name
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"dtype", "shape", "data"})
        if unknown or "data" not in spec:
            raise InvalidArgument("%s: expected {\"dtype\", \"shape\", \"data\"}, got keys %s"
                                  % (where, sorted(spec)))
        dtype = parse_dtype(spec["dtype"], where) if "dtype" in spec else declared
        data = spec["data"]
        shape = spec.get("shape")
    else:
        dtype, data, shape = declared, spec, None
    try:
        arr = np.array(data, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgument("%s: data cannot be read as %s (%s)"
                              % (where, dtype if dtype is not None else "a tensor", e)) from None
    if arr.dtype == object and dtype is None:
        raise InvalidArgument("%s: data is a ragged or mixed list; give a rectangular nested list "
                              "of numbers" % where)
    if shape is not None:
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise InvalidArgument("%s: shape must be a list of non-negative integers, got %r"
                                  % (where, shape))
        if int(np.prod(shape, dtype=np.int64)) != arr.size:
            raise InvalidArgument("%s: shape %s holds %d values but data has %d"
                                  % (where, shape, int(np.prod(shape, dtype=np.int64)), arr.size))
        arr = arr.reshape(shape)
    return arr


def encode_value(value: Any) -> Any:
    """JSON form of an output: a tensor as {"dtype", "shape", "data"}, a sequence as a list."""
    if isinstance(value, np.ndarray):
        dtype = "string" if value.dtype == object else str(value.dtype)
        data = value
        if value.dtype.kind == "c":          # complex: [real, imag] pairs
            data = np.stack([value.real, value.imag], axis=-1)
        elif value.dtype.isbuiltin != 1:     # ml_dtypes (bfloat16, float8, ...): as float32
            data = value.astype(np.float32)
        return {"dtype": dtype, "shape": list(value.shape), "data": data.tolist()}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    return value


def npy_bytes(arr: np.ndarray) -> bytes:
    """The .npy file of an array, in memory."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


# ---------------------------------------------------------------------------------- server

class InferenceServer(ThreadingHTTPServer):
    """A threading HTTP server holding the session and the request limits."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: Tuple[str, int], session: Any, model_path: str,
                 max_body_bytes: int = DEFAULT_MAX_BODY):
        self.session = session
        self.model_path = model_path
        self.max_body_bytes = int(max_body_bytes)
        self.input_names = [a.name for a in session.get_inputs()]
        self.output_names = [a.name for a in session.get_outputs()]
        self.declared = {a.name: _declared_dtype(a.type) for a in session.get_inputs()}
        super().__init__(address, RequestHandler)

    @property
    def url(self) -> str:
        """The base URL the server listens on."""
        host, port = self.server_address[:2]
        return "http://%s:%d" % (host, port)

    def metadata(self) -> Dict[str, Any]:
        """What GET /metadata answers."""
        sess = self.session
        meta = sess.get_modelmeta()
        model = sess.model
        return {
            "model": self.model_path,
            "inputs": [_arg_json(a) for a in sess.get_inputs()],
            "outputs": [_arg_json(a) for a in sess.get_outputs()],
            "providers": sess.get_providers(),
            "opsets": {(d or "ai.onnx"): v for d, v in sorted(model.opset_imports.items())},
            "metadata": {"producer_name": meta.producer_name, "graph_name": meta.graph_name,
                         "domain": meta.domain, "description": meta.description,
                         "version": meta.version,
                         "custom_metadata_map": meta.custom_metadata_map},
        }


def _arg_json(arg: Any) -> Dict[str, Any]:
    dt = _declared_dtype(arg.type)
    return {"name": arg.name, "type": arg.type,
            "dtype": ("string" if dt == object else str(dt)) if dt is not None else None,
            "shape": list(arg.shape)}


class RequestHandler(BaseHTTPRequestHandler):
    """Routes one request; every refusal is a JSON error and the server goes on serving."""

    server: InferenceServer
    protocol_version = "HTTP/1.1"
    server_version = "onnxedge-serve"
    timeout = 60   # seconds a client may take to send its request
    _body_read = False

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        """Silenced: `_handle` logs one line per request itself, with its latency."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.info("%s %s", self.address_string(), format % args)

    # ------------------------------------------------------------------------- routing

    def _handle(self, method: str) -> None:
        t0 = time.perf_counter()
        self._body_read = False
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = parse_qs(url.query)
        status, size = 500, 0
        try:
            if path in RUN_PATHS:
                self._require(method, "POST")
                status, size = self._run(query)
            elif path in GET_PATHS:
                self._require(method, "GET")
                body = {"status": "ok"} if path == "/healthz" else self.server.metadata()
                status, size = self._send_json(200, body)
            else:
                raise HttpError(404, "NotFound", "no endpoint %s; the server answers POST %s, "
                                "GET %s" % (path, " or ".join(RUN_PATHS), ", GET ".join(GET_PATHS)))
        except HttpError as e:
            status, size = self._send_error(e)
        except InvalidArgument as e:
            status, size = self._send_error(HttpError(400, type(e).__name__, str(e)))
        except OnnxEdgeError as e:
            status, size = self._send_error(HttpError(500, type(e).__name__, str(e)))
        except (socket.timeout, ConnectionError) as e:
            self.close_connection = True
            status = 408
            log.warning("%s: connection failed while reading the request: %s", self.path, e)
        except Exception as e:  # the server must survive anything a request triggers
            log.exception("internal error on %s %s", method, self.path)
            status, size = self._send_error(HttpError(500, "Fail", "internal error: %s: %s"
                                                      % (type(e).__name__, e)))
        log.info('%s "%s %s" %d %d %.1fms', self.client_address[0], method, self.path, status,
                 size, 1000 * (time.perf_counter() - t0))

    def _require(self, method: str, allowed: str) -> None:
        if method != allowed:
            raise HttpError(405, "MethodNotAllowed", "%s does not accept %s; use %s"
                            % (urlsplit(self.path).path, method, allowed))

    # --------------------------------------------------------------------------- run

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked" or length is None:
            self.close_connection = True
            raise HttpError(411, "LengthRequired", "the request needs a Content-Length header "
                            "(chunked bodies are not accepted)")
        try:
            n = int(length)
            if n < 0:
                raise ValueError(length)
        except ValueError:
            self.close_connection = True
            raise HttpError(400, "InvalidArgument", "Content-Length %r is not a non-negative "
                            "integer" % length) from None
        if n > self.server.max_body_bytes:
            self.close_connection = True   # the body is left unread: this connection is done
            raise HttpError(413, "PayloadTooLarge", "the body is %d bytes; this server accepts at "
                            "most %d (--max-body-bytes)" % (n, self.server.max_body_bytes))
        body = self.rfile.read(n)
        self._body_read = True
        if len(body) != n:
            self.close_connection = True
            raise HttpError(400, "InvalidArgument", "the body ended after %d of %d bytes"
                            % (len(body), n))
        return body

    def _run(self, query: Dict[str, List[str]]) -> Tuple[int, int]:
        body = self._read_body()
        ctype = self.headers.get("Content-Type", JSON_TYPE).split(";")[0].strip().lower()
        if ctype in (NPY_TYPE, "application/octet-stream"):
            feeds, wanted = self._npy_feeds(body, query), None
        elif ctype in (JSON_TYPE, "text/json", ""):
            feeds, wanted = self._json_feeds(body)
        else:
            raise HttpError(415, "UnsupportedMediaType", "Content-Type %s is not accepted; send "
                            "%s or %s" % (ctype, JSON_TYPE, NPY_TYPE))
        accept = self.headers.get("Accept", "")
        if NPY_TYPE in accept:
            name = self._pick(query, "output", "X-Output-Name", self.server.output_names)
            [value] = self.server.session.run([name], feeds)
            if not isinstance(value, np.ndarray) or value.dtype == object:
                raise HttpError(406, "NotAcceptable", "output %r is not a numeric tensor; ask for "
                                "JSON instead" % name)
            return self._send(200, NPY_TYPE, npy_bytes(value))
        outputs = self.server.session.run(wanted, feeds)
        names = wanted or self.server.output_names
        return self._send_json(200, {"outputs": {n: encode_value(v) for n, v in zip(names, outputs)}})

    def _pick(self, query: Dict[str, List[str]], key: str, header: str,
              names: Sequence[str]) -> str:
        name = (query.get(key) or [None])[0] or self.headers.get(header)
        if name is None:
            if len(names) != 1:
                raise HttpError(400, "InvalidArgument", "the model has %ss %s: name one with "
                                "?%s=NAME or the %s header" % (key, list(names), key, header))
            return names[0]
        if name not in names:
            raise HttpError(400, "InvalidArgument", "%r is not an %s of this model; its %ss are %s"
                            % (name, key, key, list(names)))
        return name

    def _npy_feeds(self, body: bytes, query: Dict[str, List[str]]) -> Dict[str, np.ndarray]:
        name = self._pick(query, "input", "X-Input-Name", self.server.input_names)
        try:
            arr = np.load(io.BytesIO(body), allow_pickle=False)
        except Exception as e:
            raise HttpError(400, "InvalidArgument", "the body is not a .npy array (%s: %s)"
                            % (type(e).__name__, e)) from None
        if not isinstance(arr, np.ndarray):
            raise HttpError(400, "InvalidArgument", "the body is an .npz archive; send one .npy "
                            "array")
        return {name: arr}

    def _json_feeds(self, body: bytes) -> Tuple[Dict[str, Any], Optional[List[str]]]:
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise HttpError(400, "InvalidArgument", "malformed JSON body: %s" % e) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), dict):
            raise HttpError(400, "InvalidArgument", "the JSON body must be an object "
                            "{\"inputs\": {NAME: {\"dtype\", \"shape\", \"data\"} or nested list}}")
        wanted = doc.get("outputs")
        if wanted is not None and not (isinstance(wanted, list)
                                       and all(isinstance(n, str) for n in wanted)):
            raise HttpError(400, "InvalidArgument", "\"outputs\" must be a list of output names")
        feeds = {}
        for name, spec in doc["inputs"].items():
            feeds[name] = decode_tensor(name, spec, self.server.declared.get(name))
        return feeds, wanted or None

    # ------------------------------------------------------------------------ answers

    def _send(self, status: int, ctype: str, payload: bytes) -> Tuple[int, int]:
        has_body = self.headers.get("Content-Length", "0").strip() not in ("", "0") \
            or "Transfer-Encoding" in self.headers
        if has_body and not self._body_read:
            self.close_connection = True   # unread body bytes would be taken for the next request
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        if status == 405:
            allowed = "POST" if urlsplit(self.path).path.rstrip("/") in RUN_PATHS else "GET"
            self.send_header("Allow", allowed)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        return status, len(payload)

    def _send_json(self, status: int, doc: Any) -> Tuple[int, int]:
        return self._send(status, JSON_TYPE, json.dumps(doc).encode("utf-8"))

    def _send_error(self, e: HttpError) -> Tuple[int, int]:
        return self._send_json(e.status, {"error": {"code": e.status, "type": e.kind,
                                                    "message": e.message}})


# ------------------------------------------------------------------------------- running

def make_server(model: str, host: str = "127.0.0.1", port: int = 8080,
                providers: Optional[Sequence[str]] = None,
                max_body_bytes: int = DEFAULT_MAX_BODY) -> InferenceServer:
    """Load `model` into a session and bind a server to host:port (port 0 picks a free one)."""
    from .session import InferenceSession
    if max_body_bytes <= 0:
        raise InvalidArgument("--max-body-bytes must be positive, got %d" % max_body_bytes)
    session = InferenceSession(model, providers=list(providers) if providers else None)
    try:
        return InferenceServer((host, port), session, str(model), max_body_bytes)
    except OSError as e:
        raise InvalidArgument("cannot listen on %s:%d: %s" % (host, port, e)) from None


def serve_until_signal(server: InferenceServer) -> int:
    """Serve until SIGTERM or SIGINT, then close the socket; returns the exit code (0)."""
    got: List[str] = []

    def stop(signum: int, _frame: Any) -> None:
        got.append(signal.Signals(signum).name)
        # shutdown() waits for serve_forever to return, so it cannot run on this (its) thread
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    log.info("stopped (%s); socket closed", got[0] if got else "shutdown")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """The `onnxedge serve` subcommand."""
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s onnxedge serve: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.INFO)
    from .cli import _parse_providers
    server = make_server(args.model, args.host, args.port, _parse_providers(args.providers),
                         args.max_body_bytes)
    log.info("serving %s on %s (providers: %s; POST /v1/run, GET /healthz, GET /metadata)",
             args.model, server.url, ", ".join(server.session.get_providers()))
    return serve_until_signal(server)


def add_parser(sub: Any) -> None:
    """Add the `serve` subcommand to the CLI's subparsers."""
    p = sub.add_parser("serve", help="serve a model over HTTP (POST /v1/run, GET /healthz, /metadata)")
    p.add_argument("model", help="path to a .onnx or .oxe model")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--providers", help="comma-separated execution providers, in priority order")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY,
                   help="largest request body accepted (default %d); larger ones get 413"
                   % DEFAULT_MAX_BODY)
    p.set_defaults(func=cmd_serve)
