"""`onnxedge reduce MODEL... -o OUT/`, registered through the `onnxedge.commands` group."""
from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Add `reduce` to the CLI (placeholder until the command lands)."""
