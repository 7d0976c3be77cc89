"""Shared pytest set-up: makes `tests/` importable so test modules can share `modelgen`."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
