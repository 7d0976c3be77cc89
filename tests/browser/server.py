"""The browser tests' static server (onnxedge.web.static_server's PageServer: one server, not
two), and the browser context that lets a page reach nothing but that server."""
from __future__ import annotations

import urllib.parse
from typing import Any, List

from onnxedge.web.static_server import MIME_TYPES, PageServer

__all__ = ["PageServer", "MIME_TYPES", "local_only_context"]


def local_only_context(browser: Any, origin: str, blocked: List[str]) -> Any:
    """A new Playwright browser context whose requests to anything but `origin`'s host:port are
    aborted and their URLs appended to `blocked` (the tests fail when it is not empty)."""
    local = urllib.parse.urlsplit(origin).netloc
    context = browser.new_context()

    def guard(route: Any) -> None:
        if urllib.parse.urlsplit(route.request.url).netloc == local:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    return context
