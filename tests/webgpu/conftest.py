"""WebGPU tests: a writable XDG_RUNTIME_DIR (silences wgpu/Mesa warnings) and the provider."""
from __future__ import annotations

import os
import tempfile

import pytest

if not os.environ.get("XDG_RUNTIME_DIR") or not os.access(os.environ["XDG_RUNTIME_DIR"], os.W_OK):
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="xdg-webgpu-")

PROVIDERS = ["WebGpuExecutionProvider", "CPUExecutionProvider"]


def _available() -> bool:
    try:
        from onnxedge.web.webgpu.provider import WebGpuExecutionProvider
    except ImportError:
        return False
    return WebGpuExecutionProvider.is_available()


@pytest.fixture(scope="session")
def webgpu():
    """Fails (not skips) when no adapter is found: `make setup` installs wgpu and lavapipe."""
    if not _available():
        pytest.fail("no WebGPU adapter: run `make setup` (installs wgpu and mesa-vulkan-drivers)")
    return PROVIDERS


@pytest.fixture
def executes(webgpu, monkeypatch):
    """(uploads, read-backs) of every submit the default device executes during the test."""
    from onnxedge.web.webgpu import device as webgpu_device
    dev = webgpu_device.default_device()
    calls = []
    real = dev.execute

    def execute(cmds):
        calls.append((len(cmds.uploads), len(cmds.readbacks)))
        return real(cmds)
    monkeypatch.setattr(dev, "execute", execute)
    return calls
