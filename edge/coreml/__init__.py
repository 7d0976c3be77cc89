"""The CoreML bridge: CoreMLExecutionProvider, its claims, MIL translator, numpy interpreter."""
from __future__ import annotations
