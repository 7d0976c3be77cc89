"""`onnxedge.web.init` and provider refresh, natively (no Pyodide): init has nothing to start and
says so; WebGpuExecutionProvider forgets a cached "unavailable" on `refresh()` and sees a device
installed after an earlier "no" (what device_js.install does in the page)."""
from __future__ import annotations

import asyncio

import pytest

import onnxedge
import onnxedge.web
from onnxedge.web.webgpu import device as gpu_device
from onnxedge.web.webgpu.provider import WebGpuExecutionProvider


class _FakeInfo:
    name = "fake adapter"
    has_f16 = False


class _FakeDevice:
    info = _FakeInfo()


@pytest.fixture
def no_default_device(monkeypatch: pytest.MonkeyPatch):
    """No WebGPU device anywhere (as in a page before device_js.install)."""
    monkeypatch.setattr(gpu_device, "_DEFAULT", {})

    def none(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no adapter")

    monkeypatch.setattr(gpu_device, "default_device", none)
    WebGpuExecutionProvider.refresh()
    yield
    WebGpuExecutionProvider.refresh()


def test_install_after_unavailable_is_seen(no_default_device: None) -> None:
    """A device set after a cached "no" makes the provider available again."""
    assert WebGpuExecutionProvider.is_available() is False
    assert "WebGpuExecutionProvider" not in onnxedge.get_available_providers()
    gpu_device._DEFAULT[("high-performance", False)] = _FakeDevice()
    assert WebGpuExecutionProvider.is_available() is True
    assert "WebGpuExecutionProvider" in onnxedge.get_available_providers()


def test_refresh_probes_again(no_default_device: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """refresh() forgets the cached answer; refresh_providers() calls it and lists providers."""
    assert WebGpuExecutionProvider.is_available() is False
    monkeypatch.setattr(gpu_device, "default_device", lambda *a, **k: _FakeDevice())
    assert WebGpuExecutionProvider.is_available() is False   # cached
    names = onnxedge.web.refresh_providers()
    assert "WebGpuExecutionProvider" in names
    assert names[-1] == "CPUExecutionProvider"


def test_init_natively_starts_nothing() -> None:
    """Outside Pyodide init says there is nothing to start and lists the providers."""
    status = asyncio.run(onnxedge.web.init())
    assert "not inside Pyodide" in status["wasm"]["error"]
    assert status["webgpu"] is None and status["isolated"] is False
    assert status["providers"] == onnxedge.get_available_providers()


@pytest.mark.parametrize("kwargs", [{"threads": -1}, {"timeout_s": 0}])
def test_init_rejects_bad_arguments(kwargs: dict) -> None:
    """Negative threads or a non-positive time limit raise InvalidArgument naming them."""
    with pytest.raises(onnxedge.InvalidArgument, match=list(kwargs)[0]):
        asyncio.run(onnxedge.web.init(**kwargs))
