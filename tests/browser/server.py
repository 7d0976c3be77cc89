"""A static file server on localhost for the browser tests: URL prefixes mounted on folders."""
from __future__ import annotations

import http.server
import os
import posixpath
import threading
import urllib.parse
from typing import Dict, Optional


class _Handler(http.server.SimpleHTTPRequestHandler):
    mounts: Dict[str, str] = {}

    def translate_path(self, path: str) -> str:
        path = posixpath.normpath(urllib.parse.unquote(urllib.parse.urlsplit(path).path))
        for prefix, folder in sorted(self.mounts.items(), key=lambda kv: -len(kv[0])):
            if path == prefix.rstrip("/") or path.startswith(prefix):
                rest = path[len(prefix):].lstrip("/")
                parts = [p for p in rest.split("/") if p not in ("", ".", "..")]
                return os.path.join(folder, *parts)
        return os.path.join(os.devnull, "missing")   # 404 outside the mounts

    def end_headers(self) -> None:
        # cross-origin isolation: precise performance.now() and SharedArrayBuffer in the page
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, fmt: str, *args: object) -> None:
        pass


class PageServer:
    """Serves `mounts` ({"/prefix/": folder}) on 127.0.0.1 from a daemon thread."""

    def __init__(self, mounts: Dict[str, str], port: int = 0):
        handler = type("MountedHandler", (_Handler,), {"mounts": dict(mounts)})
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._thread: Optional[threading.Thread] = None

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return "http://127.0.0.1:%d" % self._httpd.server_address[1]

    def start(self) -> "PageServer":
        """Start serving in the background; returns self."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
