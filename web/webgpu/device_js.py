# Interface shared with web/webgpu/device.py (native backend): keep the two in step.
"""The page backend of the WebGPU device layer: the browser's `navigator.gpu` from Pyodide.

Implements `device.Device` over Pyodide 0.17.1's JS FFI (`from js import ...`). Everything but
the read-back is synchronous in WebGPU, so buffers, uploads and pipelines work as natively; the
read-back (`mapAsync`) is a promise, which Python inside the page can only await: `execute_async`
runs a `CommandList` (uploads, one encoder, one submit) and awaits the mapped read-backs, and
`InferenceSession.run_async` drives it. The blocking `execute` cannot exist in a page and says so.

Descriptors are built as plain JS objects by hand (a Python dict would arrive as a proxy and
`to_js(dict)` as a JS Map, which WebGPU rejects). Bulk data crosses with typed arrays'
`assign` / `assign_to` (a memcpy between numpy and JS memory).

Usage inside the page (top-level await in `runPythonAsync`)::

    from onnxedge.web.webgpu import device_js
    dev = await device_js.install()          # the default device of the WebGPU provider
    outs = await sess.run_async(None, feeds)
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from ...errors import EPFail
from .device import (AdapterInfo, Buffer, CommandList, Copy, Device, pack_uniforms, padded_size,
                     set_default_device)

# WebGPU limits requested up to what the adapter offers (JS name -> the native backend's name)
_LIMITS = {"maxStorageBufferBindingSize": "max-storage-buffer-binding-size",
           "maxBufferSize": "max-buffer-size",
           "maxComputeWorkgroupStorageSize": "max-compute-workgroup-storage-size",
           "maxStorageBuffersPerShaderStage": "max-storage-buffers-per-shader-stage",
           "maxComputeInvocationsPerWorkgroup": "max-compute-invocations-per-workgroup",
           "maxComputeWorkgroupsPerDimension": "max-compute-workgroups-per-dimension"}


def _js() -> Any:
    try:
        import js
    except ImportError:
        raise EPFail("the page WebGPU backend runs only inside Pyodide (no 'js' module here); "
                     "natively use onnxedge.web.webgpu.device.WgpuDevice") from None
    return js


def js_object(**fields: Any) -> Any:
    """A plain JS object with these fields (what WebGPU descriptors must be)."""
    o = _js().Object.new()
    for key, value in fields.items():
        setattr(o, key, value)
    return o


def js_array(items: Any) -> Any:
    """A JS Array of these items."""
    a = _js().Array.new()
    for item in items:
        a.push(item)
    return a


def to_js_bytes(array: np.ndarray) -> Any:
    """A JS Uint8Array holding `array`'s bytes (one bulk copy)."""
    data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
    u8 = _js().Uint8Array.new(int(data.size))
    if data.size:
        u8.assign(data)
    return u8


def from_js_bytes(array_buffer: Any, nbytes: int) -> np.ndarray:
    """The first `nbytes` of a JS ArrayBuffer as a new numpy uint8 array (one bulk copy)."""
    out = np.empty(nbytes, np.uint8)
    if nbytes:
        _js().Uint8Array.new(array_buffer, 0, nbytes).assign_to(out)
    return out


async def request_device(power_preference: str = "high-performance",
                         want_f16: bool = False) -> "JsDevice":
    """Open a WebGPU device from `navigator.gpu`; EPFail when the page has no WebGPU adapter."""
    js = _js()
    gpu = getattr(js.navigator, "gpu", None)
    if gpu is None:
        raise EPFail("navigator.gpu is missing: this browser has no WebGPU (Chromium needs "
                     "--enable-unsafe-webgpu on Linux, and a secure context: https or localhost)")
    adapter = await gpu.requestAdapter(js_object(powerPreference=power_preference))
    if adapter is None:
        raise EPFail("navigator.gpu.requestAdapter() found no adapter (power preference %r)"
                     % power_preference)
    f16 = bool(want_f16 and adapter.features.has("shader-f16"))
    limits: Dict[str, int] = {}
    required = js_object()
    for js_name, name in _LIMITS.items():
        value = getattr(adapter.limits, js_name, None)
        if value is not None:
            limits[name] = int(value)
            setattr(required, js_name, value)
    features = js_array(["shader-f16"] if f16 else [])
    device = await adapter.requestDevice(js_object(requiredFeatures=features,
                                                   requiredLimits=required))
    return JsDevice(adapter, device, _adapter_info(adapter, f16, limits))


def _adapter_info(adapter: Any, f16: bool, limits: Dict[str, int]) -> AdapterInfo:
    ai = getattr(adapter, "info", None)

    def field(name: str) -> str:
        value = getattr(ai, name, None) if ai is not None else None
        return str(value) if value else ""

    fallback = getattr(ai, "isFallbackAdapter", None) if ai is not None else None
    if fallback is None:
        fallback = getattr(adapter, "isFallbackAdapter", False)
    name = field("description") or field("device") or field("architecture") or "browser adapter"
    return AdapterInfo(name=name, backend="WebGPU (navigator.gpu)", adapter_type=field("architecture"),
                       is_fallback=bool(fallback), features=["shader-f16"] if f16 else [],
                       limits=limits, vendor=field("vendor"))


class JsDevice(Device):
    """A `Device` over the page's GPUDevice; `execute_async` is its way to run command lists."""

    def __init__(self, adapter: Any, device: Any, info: AdapterInfo):
        super().__init__()
        js = _js()
        self.adapter = adapter
        self.device = device
        self.info = info
        u = js.GPUBufferUsage
        self._usage = {"storage": u.STORAGE | u.COPY_SRC | u.COPY_DST,
                       "uniform": u.UNIFORM | u.COPY_DST,
                       "staging": u.MAP_READ | u.COPY_DST}
        self._map_read = js.GPUMapMode.READ

    @classmethod
    async def create(cls, power_preference: str = "high-performance",
                     want_f16: bool = False) -> "JsDevice":
        """Open the page's WebGPU device (see `request_device`)."""
        return await request_device(power_preference, want_f16)

    def _alloc(self, capacity: int, kind: str) -> Any:
        return self.device.createBuffer(js_object(size=capacity, usage=self._usage[kind]))

    def write(self, buffer: Buffer, array: np.ndarray, offset: int = 0) -> None:
        """Write array bytes via queue.writeBuffer (size padded to 4 bytes)."""
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        if data.size % 4:
            data = np.concatenate([data, np.zeros(4 - data.size % 4, np.uint8)])
        if data.size:
            self.device.queue.writeBuffer(buffer.handle, offset, to_js_bytes(data))

    def _compile(self, key: str, source: str, entry_point: str) -> Any:
        module = self.device.createShaderModule(js_object(label=key, code=source))
        compute = js_object(module=module, entryPoint=entry_point)
        return self.device.createComputePipeline(js_object(label=key, layout="auto",
                                                           compute=compute))

    def execute(self, cmds: CommandList) -> List[np.ndarray]:
        """Not possible in a page: reading a GPU buffer back is a promise, which blocking Python
        cannot wait for. Use `await execute_async(cmds)` (`InferenceSession.run_async`)."""
        raise EPFail("WebGPU in a browser page reads results back asynchronously: call "
                     "`await session.run_async(output_names, feeds)` instead of session.run "
                     "(or JsDevice.execute_async instead of execute)")

    async def execute_async(self, cmds: CommandList) -> List[np.ndarray]:
        """Uploads, one encoder with every dispatch and copy, one submit; awaits the read-backs
        and returns them as numpy arrays. WebGPU validation errors become EPFail."""
        dev = self.device
        dev.pushErrorScope("validation")
        for buf, arr in cmds.uploads:
            self.write(buf, arr)
        block, offsets = pack_uniforms(cmds)
        ubuf = self.acquire(len(block), "uniform") if block else None
        staging: List[Buffer] = []
        scope_open = True
        try:
            if ubuf is not None:
                self.write(ubuf, np.frombuffer(block, np.uint8))
            encoder = dev.createCommandEncoder()
            self._encode(encoder, cmds, offsets, ubuf)
            for r in cmds.readbacks:
                n = padded_size(r.nbytes)
                s = self.acquire(n, "staging")
                staging.append(s)
                encoder.copyBufferToBuffer(r.buffer.handle, 0, s.handle, 0, n)
            dev.queue.submit(js_array([encoder.finish()]))
            self.stats["submits"] += 1
            scope_open = False
            error = await dev.popErrorScope()
            if error is not None:
                raise EPFail("WebGPU rejected the command list (%d commands, pipelines %s): %s"
                             % (len(cmds.commands), _pipeline_keys(cmds), error.message))
            out = []
            for r, s in zip(cmds.readbacks, staging):
                n = padded_size(r.nbytes)
                await s.handle.mapAsync(self._map_read, 0, n)
                try:
                    raw = from_js_bytes(s.handle.getMappedRange(0, n), n)
                finally:
                    s.handle.unmap()
                out.append(raw[:r.nbytes].view(r.dtype).reshape(r.shape))
            return out
        finally:
            if scope_open:
                dev.popErrorScope()   # keep the scopes balanced; its promise is not needed
            for s in staging:
                self.release(s)
            if ubuf is not None:
                self.release(ubuf)

    def _encode(self, encoder: Any, cmds: CommandList, offsets: List[int],
                ubuf: Optional[Buffer]) -> None:
        """Record every dispatch (compute passes) and copy of `cmds` into `encoder`."""
        dev = self.device
        pending: Optional[Any] = None
        for c, uoff in zip(cmds.commands, offsets):
            if isinstance(c, Copy):
                if pending is not None:
                    pending.end()
                    pending = None
                encoder.copyBufferToBuffer(c.src.handle, c.src_offset, c.dst.handle,
                                           c.dst_offset, c.nbytes)
                continue
            entries = [js_object(binding=i, resource=js_object(buffer=b.handle, offset=0,
                                                               size=padded_size(b.nbytes)))
                       for i, b in enumerate(c.buffers)]
            if c.uniform and ubuf is not None:
                entries.append(js_object(binding=len(c.buffers), resource=js_object(
                    buffer=ubuf.handle, offset=uoff, size=len(c.uniform))))
            group = dev.createBindGroup(js_object(layout=c.pipeline.handle.getBindGroupLayout(0),
                                                  entries=js_array(entries)))
            if pending is None:
                pending = encoder.beginComputePass()
            pending.setPipeline(c.pipeline.handle)
            pending.setBindGroup(0, group)
            x, y, z = c.workgroups
            pending.dispatchWorkgroups(x, y, z)
        if pending is not None:
            pending.end()


def _pipeline_keys(cmds: CommandList) -> List[str]:
    keys: List[str] = []
    for c in cmds.commands:
        key = getattr(getattr(c, "pipeline", None), "key", None)
        if key is not None and key not in keys:
            keys.append(key)
    return keys[:5]


async def install(power_preference: str = "high-performance", want_f16: bool = False) -> JsDevice:
    """Open the page's WebGPU device and make it the WebGPU provider's default device for these
    options (what `default_device` returns), so sessions created afterwards run on it."""
    dev = await request_device(power_preference, want_f16)
    set_default_device(dev, power_preference, want_f16)
    from .provider import WebGpuExecutionProvider
    WebGpuExecutionProvider.refresh()   # an earlier "unavailable" is stale now
    return dev


__all__ = ["JsDevice", "request_device", "install", "js_object", "js_array", "to_js_bytes",
           "from_js_bytes"]
