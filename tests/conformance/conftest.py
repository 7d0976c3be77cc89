"""Node-suite items of providers other than CPU (ids `<provider>/<case>`) get the `needs_setup`
marker: WebGPU needs wgpu on lavapipe, NEON and wasm the C kernels, Core ML coremltools. So
`make test-core` (`-m "not needs_setup"`) runs the suite on the CPU provider alone."""
from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CPU = "CPUExecutionProvider"


def _provider_of(item: pytest.Item) -> str:
    """The provider an item's id names (`<provider>/<case>`), or '' when it names none."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ""
    head = callspec.id.split("/", 1)[0]
    return head if head.endswith("ExecutionProvider") else ""


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Mark this folder's non-CPU node-suite items `needs_setup` (the hook sees every item)."""
    for item in items:
        if not str(item.fspath).startswith(HERE + os.sep):
            continue
        provider = _provider_of(item)
        if provider and provider != CPU:
            item.add_marker(pytest.mark.needs_setup)
