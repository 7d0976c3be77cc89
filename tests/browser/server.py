"""The browser tests' static server: onnxedge.web.serve's PageServer (one server, not two)."""
from __future__ import annotations

from onnxedge.web.serve import MIME_TYPES, PageServer

__all__ = ["PageServer", "MIME_TYPES"]
