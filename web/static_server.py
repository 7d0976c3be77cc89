"""A static file server for browser bundles and test pages: URL prefixes mounted on folders.

Localhost by default; the MIME types Pyodide and onnxedge's page need (`.wasm`, `.mjs`, `.data`,
`.whl`, `.oxe`, ...); cross-origin isolation headers (COOP/COEP, so `performance.now()` is
precise and SharedArrayBuffer exists) and CORP on every response; nothing outside the mounted
folders is reachable (`..` is dropped, links out of a folder are refused).

Hardened like `onnxedge serve` (the mixins of `onnxedge.serve`): a listen backlog of 128, a
total deadline for each request's line and headers (a client trickling bytes is cut off), a NUL
in the URL or conflicting Content-Length headers answered 400 without a traceback, and SIGTERM /
SIGINT draining running downloads for a grace period before exiting 0 (a second signal cuts the
wait short).

    server = PageServer({"/": "dist/"}).start()    # tests: a daemon thread
    serve("dist/", port=8000)                       # `onnxedge web serve`: blocks until Ctrl-C
"""
from __future__ import annotations

import http.server
import os
import posixpath
import threading
import urllib.parse
from typing import Dict, Optional

from onnxedge.errors import InvalidArgument
from onnxedge.serve import (DEFAULT_GRACE, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
                            DrainingServerMixin, HardenedHandlerMixin, serve_until_signal)

MIME_TYPES = {
    ".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript",
    ".data": "application/octet-stream", ".whl": "application/zip", ".zip": "application/zip",
    ".oxe": "application/octet-stream", ".onnx": "application/octet-stream",
    ".json": "application/json", ".html": "text/html", ".css": "text/css",
    ".py": "text/x-python", ".npz": "application/octet-stream", ".npy": "application/octet-stream",
    ".txt": "text/plain", ".png": "image/png", ".svg": "image/svg+xml", ".map": "application/json",
    ".tar": "application/x-tar",
}
_MISSING = os.path.join(os.devnull, "missing")


class _PageHTTPServer(DrainingServerMixin, http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer with a real backlog, connection tracking and draining."""


class _Handler(HardenedHandlerMixin, http.server.SimpleHTTPRequestHandler):
    mounts: Dict[str, str] = {}
    quiet = True
    isolated = True
    extensions_map = dict(http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES)

    def translate_path(self, path: str) -> str:
        path = posixpath.normpath(urllib.parse.unquote(urllib.parse.urlsplit(path).path))
        if "\x00" in path:
            return _MISSING   # refused with 400 before this; never reaches the file system
        for prefix, folder in sorted(self.mounts.items(), key=lambda kv: -len(kv[0])):
            if path == prefix.rstrip("/") or path.startswith(prefix):
                rest = path[len(prefix):] if path.startswith(prefix) else ""
                parts = [p for p in rest.split("/") if p not in ("", ".", "..")]
                full = os.path.join(folder, *parts)
                root = os.path.realpath(folder)
                real = os.path.realpath(full)
                if real != root and not real.startswith(root + os.sep):
                    return _MISSING   # a link pointing out of the mounted folder
                return full
        return _MISSING   # 404 outside the mounts

    def end_headers(self) -> None:
        if self.isolated:
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, fmt: str, *args: object) -> None:
        if not self.quiet:
            super().log_message(fmt, *args)


class PageServer:
    """Serves `mounts` ({"/prefix/": folder}) on host:port (port 0: any free one); `isolated=False`
    leaves out COOP/COEP (a page that is not cross-origin isolated: no SharedArrayBuffer);
    `header_timeout`: seconds a client has for a request's line and headers, in total."""

    def __init__(self, mounts: Dict[str, str], port: int = 0, host: str = "127.0.0.1",
                 quiet: bool = True, isolated: bool = True,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT):
        for prefix, folder in mounts.items():
            if not prefix.startswith("/"):
                raise InvalidArgument("mount %r must start with '/'" % prefix)
            if not os.path.isdir(folder):
                raise InvalidArgument("mount %s: %s is not a folder" % (prefix, folder))
        self._mounts = {p: os.path.abspath(f) for p, f in mounts.items()}
        handler = type("MountedHandler", (_Handler,), {"mounts": self._mounts, "quiet": quiet,
                                                       "isolated": isolated})
        self._httpd = _PageHTTPServer((host, port), handler)
        self._httpd.header_timeout = float(header_timeout)
        self._httpd.idle_timeout = float(idle_timeout)
        self._thread: Optional[threading.Thread] = None

    @property
    def origin(self) -> str:
        """`http://HOST:PORT` (the bound address)."""
        host, port = self._httpd.server_address[:2]
        return "http://%s:%d" % (host, port)

    def mount(self, prefix: str, folder: str) -> str:
        """Serve `folder` at `prefix` from now on; returns the prefix's URL."""
        if not (prefix.startswith("/") and prefix.endswith("/")):
            raise InvalidArgument("mount %r must start and end with '/'" % prefix)
        if not os.path.isdir(folder):
            raise InvalidArgument("mount %s: %s is not a folder" % (prefix, folder))
        self._mounts[prefix] = os.path.abspath(folder)
        return self.origin + prefix

    def start(self) -> "PageServer":
        """Start serving in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until `stop()` (e.g. from a signal handler)."""
        self._httpd.serve_forever()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
        self._httpd.server_close()


def serve(folder: str, port: int = 8000, host: str = "127.0.0.1", quiet: bool = False,
          grace: float = DEFAULT_GRACE) -> int:
    """Serve a bundle folder at / until SIGTERM or Ctrl-C, then drain running requests for up to
    `grace` seconds; prints the URL. Returns 0."""
    if not os.path.isfile(os.path.join(folder, "index.html")):
        raise InvalidArgument("%s has no index.html: is it a bundle from `onnxedge web build`?"
                              % folder)
    server = PageServer({"/": folder}, port=port, host=host, quiet=quiet)
    print("serving %s at %s/ (Ctrl-C to stop)" % (os.path.abspath(folder), server.origin), flush=True)
    return serve_until_signal(server._httpd, grace, lambda line: print(line, flush=True))
