"""`onnxedge web build` and `onnxedge web serve`, registered through the `onnxedge.commands` group."""
from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Add `web` to the CLI (placeholder until the command lands)."""
