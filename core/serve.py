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
- ``GET /metadata``: inputs, outputs, providers, opsets and the model's metadata (the model's file
  name only, never its path). ``HEAD`` is answered like ``GET``, without the body.

JSON is standard (RFC 8259): non-finite floats travel as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"``, in answers and in requests.

Budgets (each a flag): a body over ``--max-body-bytes`` (``.npy``) or ``--max-json-bytes`` (JSON,
whose parsed form is several times its size) is 413 and is not read; at most ``--max-inflight``
run requests hold a body at once, the others wait up to ``--queue-wait`` seconds and then get 503
with ``Retry-After``; a client has ``--header-timeout`` seconds (total, from its first byte) for
the request line and headers, ``--body-timeout`` seconds for the body and ``--idle-timeout``
seconds between keep-alive requests. A dtype is one of the ONNX element types, and must be the
input's declared one: nothing a request names becomes a numpy dtype of its own choosing.

Bad requests get a 4xx JSON answer ``{"error": {"code", "type", "message"}}`` and the server keeps
serving: a missing Content-Length is 411, two different Content-Length headers 400, malformed or
too deeply nested JSON or a wrong input (the session's own checks) 400, an unknown path 404, a
wrong method 405. SIGTERM and SIGINT drain the server: it stops accepting, lets running requests
finish within ``--grace-period`` seconds (a second signal cuts the wait short), then exits 0.
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import os
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
DEFAULT_MAX_JSON = 4 * 1024 * 1024
DEFAULT_MAX_INFLIGHT = 4
DEFAULT_QUEUE_WAIT = 2.0
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 60.0
DEFAULT_IDLE_TIMEOUT = 30.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_GRACE = 5.0
LISTEN_BACKLOG = 128
RUN_PATHS = ("/v1/run", "/run")
GET_PATHS = ("/healthz", "/metadata")
_MAX_DIM = 2 ** 63 - 1


class HttpError(Exception):
    """A request the server refuses: HTTP status, error type, a message and extra headers."""

    def __init__(self, status: int, kind: str, message: str,
                 headers: Optional[Dict[str, str]] = None):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = headers or {}


# ------------------------------------------------------------------------- tensor <-> JSON

_STRING_NAMES = ("string", "str", "object")


def element_type(name: Any, where: str) -> int:
    """The ONNX element-type code a request names: an ONNX name ("float", "tensor(float)") or the
    numpy name of an ONNX type ("float32"). Anything else (subarray, structured or sized string
    dtypes such as "(16000,16000)f8" or "U500000000") is InvalidArgument."""
    if not isinstance(name, str):
        raise InvalidArgument("%s: dtype must be a string such as \"float32\", got %r" % (where, name))
    text = name[len("tensor("):-1] if name.startswith("tensor(") and name.endswith(")") else name
    code = dtypes.from_ort_name(text)
    if code is None and text in _STRING_NAMES:
        code = dtypes.STRING
    if code is None:
        code = next((d.code for d in dtypes.BY_CODE.values() if d.numpy == text), None)
    if code is None:
        raise InvalidArgument("%s: unknown dtype %r (use an ONNX element type such as \"float\" "
                              "or its numpy name such as \"float32\")" % (where, name[:80]))
    return code


def numpy_dtype(code: int, where: str) -> np.dtype:
    """The numpy dtype of an element type, InvalidArgument when this machine cannot make it."""
    try:
        return dtypes.to_numpy(code)
    except OnnxEdgeError as e:
        raise InvalidArgument("%s: %s" % (where, e)) from None


def _declared_code(type_str: str) -> Optional[int]:
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        return dtypes.from_ort_name(type_str[len("tensor("):-1])
    return None


def _check_type(where: str, code: int, declared: Optional[int]) -> None:
    if declared is not None and code != declared:
        raise InvalidArgument("%s: got %s, expected %s" % (where, dtypes.ort_type_string(code),
                                                         dtypes.ort_type_string(declared)))


def check_shape(shape: Any, where: str) -> Tuple[int, ...]:
    """A request's shape as a tuple: a list of non-negative ints (not bools) below 2**63 whose
    product is representable; InvalidArgument otherwise."""
    if not isinstance(shape, (list, tuple)) or len(shape) > 32 or not all(
            type(d) is int and 0 <= d <= _MAX_DIM for d in shape):
        raise InvalidArgument("%s: shape must be a list of at most 32 integers in [0, 2**63), "
                              "got %s" % (where, _short(shape)))
    size = 1
    for d in shape:
        size *= max(d, 1)   # numpy refuses these even when a zero dimension makes the size 0
    if size > _MAX_DIM:
        raise InvalidArgument("%s: shape %s holds more than 2**63 values" % (where, _short(shape)))
    return tuple(shape)


def _reshape(arr: np.ndarray, shape: Tuple[int, ...], where: str) -> np.ndarray:
    try:
        return arr.reshape(shape)
    except ValueError as e:   # e.g. dimensions numpy cannot index even for an empty array
        raise InvalidArgument("%s: %s" % (where, _short(str(e), 200))) from None


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def decode_tensor(name: str, spec: Any, declared: Optional[int]) -> np.ndarray:
    """A numpy array from its JSON form: {"dtype", "shape", "data"} or a nested list. `declared`
    is the input's ONNX element type (None: not a tensor, then the request must name one)."""
    where = "input %r" % name
    shape = None
    code = declared
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"dtype", "shape", "data"})
        if unknown or "data" not in spec:
            raise InvalidArgument("%s: expected {\"dtype\", \"shape\", \"data\"}, got keys %s"
                                  % (where, _short(sorted(spec))))
        if "dtype" in spec:
            code = element_type(spec["dtype"], where)
            _check_type(where, code, declared)
        data = spec["data"]
        if spec.get("shape") is not None:
            shape = check_shape(spec["shape"], where)
    else:
        data = spec
    dtype = numpy_dtype(code, where) if code is not None else None
    if shape is not None and isinstance(data, list) and len(shape) > 0 and not (
            data and isinstance(data[0], list)):
        size = 1
        for d in shape:
            size *= d
        if size != len(data):   # a flat list: count before converting
            raise InvalidArgument("%s: shape %s holds %d values but data has %d"
                                  % (where, list(shape), size, len(data)))
    try:
        arr = np.array(data, dtype=dtype)
    except (TypeError, ValueError, OverflowError, RecursionError) as e:
        raise InvalidArgument("%s: data cannot be read as %s (%s)"
                              % (where, dtype if dtype is not None else "a tensor",
                                 _short(str(e), 200))) from None
    if arr.dtype == object and dtype is None:
        raise InvalidArgument("%s: data is a ragged or mixed list; give a rectangular nested list "
                              "of numbers" % where)
    if shape is not None:
        size = 1
        for d in shape:
            size *= d
        if size != arr.size:
            raise InvalidArgument("%s: shape %s holds %d values but data has %d"
                                  % (where, list(shape), size, arr.size))
        arr = _reshape(arr, shape, where)
    return arr


def decode_npy(name: str, body: bytes, declared: Optional[int]) -> np.ndarray:
    """An array from a .npy body, checked before anything is allocated: a plain ONNX element type
    (the input's declared one), and exactly as many data bytes as the header's shape needs. The
    result is a read-only view of the body (no copy) unless the file is in Fortran order."""
    where = "input %r" % name
    fp = io.BytesIO(body)
    fmt = np.lib.format
    try:
        major, _minor = fmt.read_magic(fp)
        if major == 1:
            shape, fortran, dtype = fmt.read_array_header_1_0(fp)
        elif major == 2:
            shape, fortran, dtype = fmt.read_array_header_2_0(fp)
        else:
            raise ValueError("version %d.x (send version 1.0 or 2.0)" % major)
    except Exception as e:   # numpy raises ValueError, SyntaxError, TypeError... on bad headers
        raise HttpError(400, "InvalidArgument", "the body is not a .npy array (%s: %s)"
                        % (type(e).__name__, _short(str(e), 200))) from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None \
            or dtype.kind in "SUV":
        raise InvalidArgument("%s: .npy dtype %s is not an ONNX element type" % (where, dtype))
    try:
        code = dtypes.from_numpy(dtype)
    except KeyError:
        raise InvalidArgument("%s: .npy dtype %s is not an ONNX element type" % (where, dtype)) from None
    _check_type(where, code, declared)
    shape = check_shape(list(shape), where)
    count = 1
    for d in shape:
        count *= d
    offset = fp.tell()
    if count * dtype.itemsize != len(body) - offset:
        raise InvalidArgument("%s: the .npy header says shape %s of %s (%d bytes) but %d data "
                              "bytes follow" % (where, list(shape), dtype, count * dtype.itemsize,
                                                len(body) - offset))
    arr = np.frombuffer(body, dtype=dtype, count=count, offset=offset)
    if fortran:
        return np.ascontiguousarray(_reshape(arr, shape[::-1], where).transpose())
    return _reshape(arr, shape, where)


def _finite_or_name(x: float) -> Any:
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _float_list(data: np.ndarray) -> Any:
    """tolist() of a float array, non-finite values as "NaN" / "Infinity" / "-Infinity"."""
    if bool(np.isfinite(data).all()):
        return data.tolist()
    obj = data.astype(object)
    flat = obj.reshape(-1)
    for i in np.flatnonzero(~np.isfinite(data.reshape(-1))):
        flat[i] = _finite_or_name(float(flat[i]))
    return obj.tolist()


def encode_value(value: Any) -> Any:
    """JSON form of an output: a tensor as {"dtype", "shape", "data"}, a sequence as a list.
    Standard JSON only: non-finite floats become "NaN", "Infinity" or "-Infinity"."""
    if isinstance(value, np.ndarray):
        dtype = "string" if value.dtype == object else str(value.dtype)
        data = value
        if value.dtype.kind == "c":          # complex: [real, imag] pairs
            data = np.stack([value.real, value.imag], axis=-1)
        elif value.dtype.isbuiltin != 1:     # ml_dtypes (bfloat16, float8, ...): as float32
            data = value.astype(np.float32)
        if data.dtype.kind == "f":
            return {"dtype": dtype, "shape": list(value.shape), "data": _float_list(data)}
        return {"dtype": dtype, "shape": list(value.shape), "data": data.tolist()}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, float):
        return _finite_or_name(value)
    return value


def npy_bytes(arr: np.ndarray) -> bytes:
    """The .npy file of an array, in memory."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def json_bytes(doc: Any) -> bytes:
    """Standard JSON (allow_nan=False: encode_value has named every non-finite float)."""
    return json.dumps(doc, allow_nan=False).encode("utf-8")


# ----------------------------------------------------- connection deadlines and draining

class _DeadlineReader(io.RawIOBase):
    """A socket's read side where every read shares one deadline: a total time for the request
    (idle wait, then headers from the first byte; or the body), not a timeout per recv."""

    def __init__(self, sock: socket.socket):
        super().__init__()
        self._sock = sock
        self._deadline = time.monotonic() + 60.0
        self._after_first: Optional[float] = None

    def expect(self, seconds: float, after_first_byte: Optional[float] = None) -> None:
        """Reads must finish within `seconds` from now; once a byte arrives, the deadline becomes
        `after_first_byte` seconds from then (when given)."""
        self._deadline = time.monotonic() + seconds
        self._after_first = after_first_byte

    def readable(self) -> bool:
        """Always True."""
        return True

    def readinto(self, b: Any) -> int:
        """One recv into `b`, within what is left of the deadline (socket.timeout past it)."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("read deadline passed")
        self._sock.settimeout(left)
        n = self._sock.recv_into(b)
        if n and self._after_first is not None:
            self._deadline = time.monotonic() + self._after_first
            self._after_first = None
        return n


class HardenedHandlerMixin:
    """For BaseHTTPRequestHandler subclasses (mixed in first): TCP_NODELAY; deadlines per request
    (idle, headers, body, writes) instead of a timeout per recv; a request line over 64 KiB is
    414, a NUL in the URL or two different Content-Length headers 400; an unexpected error is one
    log line and a 500, never a traceback that kills the connection silently. The server
    (DrainingServerMixin) tracks connections so that it can drain them."""

    idle_timeout = DEFAULT_IDLE_TIMEOUT
    header_timeout = DEFAULT_HEADER_TIMEOUT
    body_timeout = DEFAULT_BODY_TIMEOUT
    write_timeout = DEFAULT_WRITE_TIMEOUT
    timeout = DEFAULT_WRITE_TIMEOUT   # socketserver's per-socket timeout, used by writes
    _answered = 0

    def setup(self) -> None:
        """Wrap the socket: deadline reader, TCP_NODELAY, tracked by the server."""
        for name in ("idle_timeout", "header_timeout", "body_timeout", "write_timeout"):
            setattr(self, name, getattr(self.server, name, getattr(self, name)))
        self.timeout = self.write_timeout
        super().setup()  # type: ignore[misc]
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass   # not TCP (a unix socket)
        self.rfile.close()   # the plain reader holds a reference on the socket: drop it
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader, 64 * 1024)
        self.server.track(self, True)

    def finish(self) -> None:
        """Flush and close; no longer tracked."""
        try:
            super().finish()  # type: ignore[misc]
        finally:
            self.server.track(self, False)

    def expect_body(self) -> None:
        """Start the body's deadline (call before reading a request body)."""
        self._reader.expect(self.body_timeout)

    def handle_one_request(self) -> None:
        """Read one request within the deadlines and dispatch it (http.server's loop body)."""
        self.close_connection = True
        self._reader.expect(self.idle_timeout, self.header_timeout)
        keep_alive = self._answered > 0   # a fresh connection's first request is in flight
        self._answered += 1
        if keep_alive:
            self.server.set_idle(self, True)
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except (socket.timeout, OSError, ValueError):
            return   # idle keep-alive connection timed out, reset, or drained
        finally:
            if keep_alive:
                self.server.set_idle(self, False)
        if not self.raw_requestline:
            return
        try:
            self._parse_and_dispatch()
        except (socket.timeout, ConnectionError, BrokenPipeError) as e:
            self.close_connection = True
            self.log_message("connection dropped: %s", e)
        if self.server.draining:
            self.close_connection = True

    def _parse_and_dispatch(self) -> None:
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # type: ignore[attr-defined]
            return
        self.close_connection = self.close_connection or self.server.draining
        refusal = self.refuse_request()
        if refusal is not None:
            self.close_connection = True
            self.send_error(400, refusal)
            return
        self.connection.settimeout(self.write_timeout)
        method = getattr(self, "do_" + self.command, None)
        if method is None:
            self.send_error(501, "Unsupported method (%r)" % self.command)
            return
        try:
            method()
        except (socket.timeout, ConnectionError, BrokenPipeError):
            raise
        except Exception as e:   # the server must survive anything a request triggers
            self.close_connection = True
            self.log_error("internal error on %s: %s: %s", self.command, type(e).__name__, e)
            try:
                self.send_error(500, "internal error")
            except Exception:
                pass
        self.wfile.flush()

    def refuse_request(self) -> Optional[str]:
        """Why the parsed request is refused before dispatch (400), or None."""
        if "\x00" in self.path or "%00" in self.path:
            return "NUL in the URL"
        lengths = {v.strip() for v in self.headers.get_all("Content-Length") or ()}
        if len(lengths) > 1:
            return "conflicting Content-Length headers"
        return None

    def abort_idle(self) -> None:
        """End an idle keep-alive wait now (the server is draining)."""
        try:
            self.connection.shutdown(socket.SHUT_RD)
        except OSError:
            pass


class DrainingServerMixin:
    """For ThreadingHTTPServer subclasses (mixed in first): a listen backlog of 128, daemon
    handler threads, and `drain(grace)`: after serve_forever stops, close the idle keep-alive
    connections, let running requests finish within `grace` seconds, then drop the rest."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    allow_reuse_address = True
    draining = False

    def _tracking(self) -> Tuple[threading.Condition, Dict[Any, bool]]:
        if not hasattr(self, "_conns"):
            self._conns_cond = threading.Condition()
            self._conns: Dict[Any, bool] = {}
        return self._conns_cond, self._conns

    def track(self, handler: Any, open_: bool) -> None:
        """A connection opened (open_=True) or closed."""
        cond, conns = self._tracking()
        with cond:
            if open_:
                conns[handler] = False
            else:
                conns.pop(handler, None)
                cond.notify_all()

    def set_idle(self, handler: Any, idle: bool) -> None:
        """Whether a keep-alive connection waits for its next request (one that has answered a
        request already); a drain closes those at once."""
        cond, conns = self._tracking()
        with cond:
            if handler in conns:
                conns[handler] = idle
            drop = idle and self.draining
        if drop:
            handler.abort_idle()

    def active_connections(self) -> int:
        """Connections open now."""
        cond, conns = self._tracking()
        with cond:
            return len(conns)

    def drain(self, grace: float, stop: Optional[threading.Event] = None) -> int:
        """Stop keep-alive, close idle connections, wait up to `grace` seconds (or until `stop`
        is set) for running requests; returns how many connections were still busy (dropped)."""
        self.draining = True
        cond, conns = self._tracking()
        with cond:
            idle = [h for h, is_idle in conns.items() if is_idle]
        for h in idle:
            h.abort_idle()
        deadline = time.monotonic() + grace
        with cond:
            while conns and time.monotonic() < deadline and not (stop and stop.is_set()):
                cond.wait(min(0.05, max(deadline - time.monotonic(), 0.001)))
            left = list(conns)
        for h in left:
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(left)


# ---------------------------------------------------------------------------------- server

class InferenceServer(DrainingServerMixin, ThreadingHTTPServer):
    """A threading HTTP server holding the session and the request limits."""

    def __init__(self, address: Tuple[str, int], session: Any, model_path: str,
                 max_body_bytes: int = DEFAULT_MAX_BODY, max_json_bytes: int = DEFAULT_MAX_JSON,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT, queue_wait: float = DEFAULT_QUEUE_WAIT,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                 body_timeout: float = DEFAULT_BODY_TIMEOUT,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
                 write_timeout: float = DEFAULT_WRITE_TIMEOUT):
        self.session = session
        self.model_path = model_path
        self.max_body_bytes = int(max_body_bytes)
        self.max_json_bytes = int(max_json_bytes)
        self.max_inflight = int(max_inflight)
        self.queue_wait = float(queue_wait)
        self.header_timeout = float(header_timeout)
        self.body_timeout = float(body_timeout)
        self.idle_timeout = float(idle_timeout)
        self.write_timeout = float(write_timeout)
        self.slots = threading.BoundedSemaphore(self.max_inflight)
        self.input_names = [a.name for a in session.get_inputs()]
        self.output_names = [a.name for a in session.get_outputs()]
        self.declared = {a.name: _declared_code(a.type) for a in session.get_inputs()}
        super().__init__(address, RequestHandler)

    @property
    def url(self) -> str:
        """The base URL the server listens on."""
        host, port = self.server_address[:2]
        return "http://%s:%d" % (host, port)

    def metadata(self) -> Dict[str, Any]:
        """What GET /metadata answers (the model's file name, not its path)."""
        sess = self.session
        meta = sess.get_modelmeta()
        model = sess.model
        return {
            "model": os.path.basename(self.model_path),
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
    code = _declared_code(arg.type)
    name = None
    if code is not None:
        d = dtypes.lookup(code)
        name = "string" if code == dtypes.STRING else (d.numpy or d.ort_name)
    return {"name": arg.name, "type": arg.type, "dtype": name, "shape": list(arg.shape)}


class RequestHandler(HardenedHandlerMixin, BaseHTTPRequestHandler):
    """Routes one request; every refusal is a JSON error and the server goes on serving."""

    server: InferenceServer
    protocol_version = "HTTP/1.1"
    server_version = "onnxedge-serve"
    _body_read = False
    _headers: Dict[str, str] = {}

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

    def _header(self, name: str, default: Any = None) -> Any:
        """A request header (case-insensitive; email.message's get() rescans every header)."""
        return self._headers.get(name.lower(), default)

    def _handle(self, method: str) -> None:
        t0 = time.perf_counter()
        self._body_read = False
        self._headers = {k.lower(): v for k, v in self.headers.items()}
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        status, size = 500, 0
        try:
            if path in RUN_PATHS:
                self._require(method, "POST")
                status, size = self._run_in_slot(parse_qs(url.query))
            elif path in GET_PATHS:
                self._require(method, "GET")
                body = {"status": "ok"} if path == "/healthz" else self.server.metadata()
                status, size = self._send_json(200, body)
            else:
                raise HttpError(404, "NotFound", "no endpoint %s; the server answers POST %s, "
                                "GET %s" % (_clip(path), " or ".join(RUN_PATHS),
                                            ", GET ".join(GET_PATHS)))
        except HttpError as e:
            status, size = self._send_error(e)
        except InvalidArgument as e:
            status, size = self._send_error(HttpError(400, type(e).__name__, str(e)))
        except OnnxEdgeError as e:
            status, size = self._send_error(HttpError(500, type(e).__name__, str(e)))
        except (socket.timeout, ConnectionError) as e:
            self.close_connection = True
            status = 408
            log.warning("%s: connection failed while reading the request: %s", _clip(self.path), e)
            if isinstance(e, socket.timeout):
                try:   # best effort: the client may be gone
                    self._send_error(HttpError(408, "RequestTimeout", "the body did not arrive "
                                               "within %g s (--body-timeout)" % self.body_timeout))
                except OSError:
                    pass
        except Exception as e:  # the server must survive anything a request triggers
            log.exception("internal error on %s %s", method, _clip(self.path))
            status, size = self._send_error(HttpError(500, "Fail", "internal error: %s: %s"
                                                      % (type(e).__name__, e)))
        log.info('%s "%s %s" %d %d %.1fms', self.client_address[0], method, _clip(self.path),
                 status, size, 1000 * (time.perf_counter() - t0))

    def _require(self, method: str, allowed: str) -> None:
        if method != allowed and not (method == "HEAD" and allowed == "GET"):
            raise HttpError(405, "MethodNotAllowed", "%s does not accept %s; use %s"
                            % (_clip(urlsplit(self.path).path), method, allowed))

    # --------------------------------------------------------------------------- run

    def _body_length(self, limit: int, flag: str) -> int:
        length = self._header("Content-Length")
        if self._header("Transfer-Encoding") is not None or length is None:
            self.close_connection = True
            raise HttpError(411, "LengthRequired", "the request needs a Content-Length header "
                            "(chunked bodies are not accepted)")
        length = length.strip()
        if not (length.isascii() and length.isdigit()):
            self.close_connection = True
            raise HttpError(400, "InvalidArgument", "Content-Length %s is not a non-negative "
                            "integer" % _short(length)) from None
        n = int(length) if len(length) < 19 else 10 ** 18
        if n > limit:
            self.close_connection = True   # the body is left unread: this connection is done
            raise HttpError(413, "PayloadTooLarge", "the body is %d bytes; this server accepts at "
                            "most %d (%s)" % (n, limit, flag))
        return n

    def _read_body(self, n: int) -> bytes:
        self.expect_body()
        body = self.rfile.read(n)
        self._body_read = True
        if len(body) != n:
            self.close_connection = True
            raise HttpError(400, "InvalidArgument", "the body ended after %d of %d bytes"
                            % (len(body), n))
        return body

    def _content_type(self) -> str:
        ctype = self._header("Content-Type", JSON_TYPE).split(";")[0].strip().lower()
        if ctype in (NPY_TYPE, "application/octet-stream"):
            return NPY_TYPE
        if ctype in (JSON_TYPE, "text/json", ""):
            return JSON_TYPE
        raise HttpError(415, "UnsupportedMediaType", "Content-Type %s is not accepted; send "
                        "%s or %s" % (_short(ctype), JSON_TYPE, NPY_TYPE))

    def _run_in_slot(self, query: Dict[str, List[str]]) -> Tuple[int, int]:
        ctype = self._content_type()
        srv = self.server
        if ctype == NPY_TYPE:
            n = self._body_length(srv.max_body_bytes, "--max-body-bytes")
        else:
            n = self._body_length(min(srv.max_json_bytes, srv.max_body_bytes),
                                  "--max-json-bytes" if srv.max_json_bytes < srv.max_body_bytes
                                  else "--max-body-bytes")
        if not srv.slots.acquire(timeout=srv.queue_wait):
            raise HttpError(503, "Unavailable", "the server is running %d requests, its limit "
                            "(--max-inflight); try again shortly" % srv.max_inflight,
                            {"Retry-After": "1"})
        try:
            return self._run(query, ctype, self._read_body(n))
        finally:
            srv.slots.release()

    def _run(self, query: Dict[str, List[str]], ctype: str, body: bytes) -> Tuple[int, int]:
        if ctype == NPY_TYPE:
            name = self._pick(query, "input", "X-Input-Name", self.server.input_names)
            feeds, wanted = {name: decode_npy(name, body, self.server.declared.get(name))}, None
        else:
            feeds, wanted = self._json_feeds(body)
        del body
        accept = self._header("Accept", "")
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
        name = (query.get(key) or [None])[0] or self._header(header)
        if name is None:
            if len(names) != 1:
                raise HttpError(400, "InvalidArgument", "the model has %ss %s: name one with "
                                "?%s=NAME or the %s header" % (key, list(names), key, header))
            return names[0]
        if name not in names:
            raise HttpError(400, "InvalidArgument", "%s is not an %s of this model; its %ss are %s"
                            % (_short(name), key, key, list(names)))
        return name

    def _json_feeds(self, body: bytes) -> Tuple[Dict[str, Any], Optional[List[str]]]:
        limit = max(1024, self.server.max_json_bytes // 32)
        if body.count(b"[") + body.count(b"{") > limit:   # each container costs ~70 bytes parsed
            raise HttpError(400, "InvalidArgument", "the JSON body has more than %d arrays and "
                            "objects; send a flat \"data\" list with a \"shape\", or .npy" % limit)
        try:
            doc = json.loads(body.decode("utf-8"))
        except RecursionError:
            raise HttpError(400, "InvalidArgument", "malformed JSON body: nested too deeply") from None
        except (UnicodeDecodeError, ValueError) as e:
            raise HttpError(400, "InvalidArgument", "malformed JSON body: %s"
                            % _short(str(e), 200)) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), dict):
            raise HttpError(400, "InvalidArgument", "the JSON body must be an object "
                            "{\"inputs\": {NAME: {\"dtype\", \"shape\", \"data\"} or nested list}}")
        wanted = doc.get("outputs")
        if wanted is not None and not (isinstance(wanted, list)
                                       and all(isinstance(n, str) for n in wanted)):
            raise HttpError(400, "InvalidArgument", "\"outputs\" must be a list of output names")
        feeds = {}
        for name, spec in doc["inputs"].items():
            if name not in self.server.declared:
                raise HttpError(400, "InvalidArgument", "%s is not an input of this model; its "
                                "inputs are %s" % (_short(name), self.server.input_names))
            feeds[name] = decode_tensor(name, spec, self.server.declared[name])
        return feeds, wanted or None

    # ------------------------------------------------------------------------ answers

    def _send(self, status: int, ctype: str, payload: bytes,
              extra: Optional[Dict[str, str]] = None) -> Tuple[int, int]:
        """Status line, headers and body in one write (no Nagle stall between them)."""
        has_body = self._header("Content-Length", "0").strip() not in ("", "0") \
            or self._header("Transfer-Encoding") is not None
        if (has_body and not self._body_read) or self.server.draining:
            self.close_connection = True   # unread body bytes would be taken for the next request
        head = ["%s %d %s" % (self.protocol_version, status, self.responses.get(status, ("",))[0]),
                "Server: %s" % self.version_string(), "Date: %s" % self.date_time_string(),
                "Content-Type: %s" % ctype, "Content-Length: %d" % len(payload)]
        if status == 405:
            allowed = "POST" if urlsplit(self.path).path.rstrip("/") in RUN_PATHS else "GET, HEAD"
            head.append("Allow: %s" % allowed)
        head.extend("%s: %s" % kv for kv in (extra or {}).items())
        if self.close_connection:
            head.append("Connection: close")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        self.connection.settimeout(self.write_timeout)
        self.wfile.write(data if self.command == "HEAD" else data + payload)
        return status, len(payload)

    def _send_json(self, status: int, doc: Any) -> Tuple[int, int]:
        return self._send(status, JSON_TYPE, json_bytes(doc))

    def _send_error(self, e: HttpError) -> Tuple[int, int]:
        return self._send(e.status, JSON_TYPE, json_bytes(
            {"error": {"code": e.status, "type": e.kind, "message": e.message}}), e.headers)


# ------------------------------------------------------------------------------- running

def make_server(model: str, host: str = "127.0.0.1", port: int = 8080,
                providers: Optional[Sequence[str]] = None,
                max_body_bytes: int = DEFAULT_MAX_BODY, **limits: Any) -> InferenceServer:
    """Load `model` into a session and bind a server to host:port (port 0 picks a free one).
    `limits`: max_json_bytes, max_inflight, queue_wait, header_timeout, body_timeout,
    idle_timeout, write_timeout (see InferenceServer)."""
    from .session import InferenceSession
    if max_body_bytes <= 0:
        raise InvalidArgument("--max-body-bytes must be positive, got %d" % max_body_bytes)
    for key, value in limits.items():
        if value is None or value < 0 or (value == 0 and key != "queue_wait"):
            raise InvalidArgument("--%s must be positive, got %r" % (key.replace("_", "-"), value))
    session = InferenceSession(model, providers=list(providers) if providers else None)
    try:
        return InferenceServer((host, port), session, str(model), max_body_bytes, **limits)
    except OSError as e:
        raise InvalidArgument("cannot listen on %s:%d: %s" % (host, port, e)) from None


def serve_until_signal(server: Any, grace: float = DEFAULT_GRACE,
                       say: Any = None) -> int:
    """Serve until SIGTERM or SIGINT, then drain: stop accepting (close the listening socket),
    close idle keep-alive connections, let running requests finish within `grace` seconds (a
    second signal ends the wait), and return 0. Works for any DrainingServerMixin server."""
    say = say or log.info
    got: List[str] = []
    force = threading.Event()

    def stop(signum: int, _frame: Any) -> None:
        got.append(signal.Signals(signum).name)
        if len(got) == 1:
            # shutdown() waits for serve_forever to return, so it cannot run on this (its) thread
            threading.Thread(target=server.shutdown, daemon=True).start()
        else:
            force.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_forever(poll_interval=0.2)
        server.server_close()   # stop accepting: new connections are refused from here on
        busy = server.active_connections()
        if busy:
            say("draining %d connection(s) (grace %.1f s)" % (busy, grace))
        dropped = server.drain(grace, force)
        if dropped:
            say("dropped %d connection(s) still busy after the grace period%s"
                % (dropped, " (second %s)" % got[-1] if force.is_set() else ""))
    finally:
        server.server_close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    say("stopped (%s); socket closed" % (got[0] if got else "shutdown"))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """The `onnxedge serve` subcommand."""
    if not logging.getLogger().handlers and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s onnxedge serve: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.WARNING if args.quiet else logging.INFO)
    from .cli import parse_providers
    server = make_server(args.model, args.host, args.port, parse_providers(args.providers),
                         args.max_body_bytes, max_json_bytes=args.max_json_bytes,
                         max_inflight=args.max_inflight, queue_wait=args.queue_wait,
                         header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                         idle_timeout=args.idle_timeout)
    log.warning("serving %s on %s (providers: %s; POST /v1/run, GET /healthz, GET /metadata)",
                args.model, server.url, ", ".join(server.session.get_providers()))
    return serve_until_signal(server, args.grace_period, log.warning)


def register(sub: Any) -> None:
    """Add the `serve` subcommand to the CLI's subparsers (the `onnxedge.commands` entry point)."""
    p = sub.add_parser("serve", help="serve a model over HTTP (POST /v1/run, GET /healthz, /metadata)")
    p.add_argument("model", help="path to a .onnx or .oxe model")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--providers", help="comma-separated execution providers, in priority order")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY,
                   help="largest request body accepted (default %d); larger ones get 413"
                   % DEFAULT_MAX_BODY)
    p.add_argument("--max-json-bytes", type=int, default=DEFAULT_MAX_JSON,
                   help="largest JSON body (default %d: parsed JSON takes up to ~15x its size; "
                   "send big tensors as .npy); larger ones get 413" % DEFAULT_MAX_JSON)
    p.add_argument("--max-inflight", type=int, default=DEFAULT_MAX_INFLIGHT,
                   help="run requests holding a body at once (default %d); others wait "
                   "--queue-wait seconds, then get 503 with Retry-After" % DEFAULT_MAX_INFLIGHT)
    p.add_argument("--queue-wait", type=float, default=DEFAULT_QUEUE_WAIT,
                   help="seconds a run request waits for a slot (default %g)" % DEFAULT_QUEUE_WAIT)
    p.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT,
                   help="seconds a client has for a request line and headers, in total from "
                   "its first byte (default %g)" % DEFAULT_HEADER_TIMEOUT)
    p.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT,
                   help="seconds a client has to send a body, in total (default %g)"
                   % DEFAULT_BODY_TIMEOUT)
    p.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT,
                   help="seconds a keep-alive connection may wait for its next request "
                   "(default %g)" % DEFAULT_IDLE_TIMEOUT)
    p.add_argument("--grace-period", type=float, default=DEFAULT_GRACE,
                   help="on SIGTERM/SIGINT, seconds running requests get to finish (default %g)"
                   % DEFAULT_GRACE)
    p.add_argument("--quiet", action="store_true", help="no log line per request")
    p.set_defaults(func=cmd_serve)
