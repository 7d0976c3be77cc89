# Interface shared with web/webgpu/device_js.py (page backend): keep the two in step.
"""The WebGPU device layer: one small interface, two backends.

The provider never talks to WebGPU directly. It asks a `Device` for buffers (pooled), uploads
(`write`) and compiled pipelines (cached by key), then records one run of a partition as a
pure-data `CommandList` (dispatches with their bindings and uniform bytes, buffer copies, and
read-backs) and hands it to `Device.execute`, which records everything into ONE command encoder,
submits ONCE and returns the read-backs as numpy arrays.

Everything a backend needs besides `execute` is synchronous in WebGPU itself (createBuffer,
writeBuffer, createShaderModule, createComputePipeline); only the read-back (mapAsync) is
asynchronous. So:

- `WgpuDevice` (this module) executes natively through wgpu-py, waiting on the mapped staging
  buffers (wgpu 0.32's `on_submitted_work_done_sync` is broken; mapping waits for the submit).
- the page backend (`device_js.py`, over `navigator.gpu` inside Pyodide) implements the same
  methods; its `execute` may be driven asynchronously (`execute_async`), and the command list it
  receives is plain data it can also hand to a JS executor.

Binding convention for every dispatch: storage buffers at bindings 0..n-1 in the order given
(read-only inputs first, the written output(s) last, as the shader declares them), then the
uniform block, when the dispatch has one, at binding n. Pipelines use the "auto" layout.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

UNIFORM_ALIGN = 256          # minUniformBufferOffsetAlignment in every WebGPU implementation
MAX_WORKGROUPS = 65535       # maxComputeWorkgroupsPerDimension (the WebGPU default limit)


class AdapterInfo:
    """What the adapter is: name, backend, type, whether it is a fallback (CPU), features, limits."""

    def __init__(self, name: str, backend: str = "", adapter_type: str = "",
                 is_fallback: bool = False, features: Sequence[str] = (),
                 limits: Optional[Dict[str, int]] = None, vendor: str = ""):
        self.name = name
        self.backend = backend
        self.adapter_type = adapter_type
        self.is_fallback = is_fallback
        self.features = frozenset(features)
        self.limits = dict(limits or {})
        self.vendor = vendor

    @property
    def has_f16(self) -> bool:
        """True when shaders may use f16 (the adapter offers the `shader-f16` feature)."""
        return "shader-f16" in self.features

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-friendly summary (benchmarks record it)."""
        return {"name": self.name, "vendor": self.vendor, "backend": self.backend,
                "adapter_type": self.adapter_type, "is_fallback": self.is_fallback,
                "shader_f16": self.has_f16}

    def __repr__(self) -> str:
        return "AdapterInfo(%r, backend=%r, type=%r, fallback=%r)" % (
            self.name, self.backend, self.adapter_type, self.is_fallback)


class Buffer:
    """A device buffer: `nbytes` usable bytes (the allocation may be larger); `handle` is the
    backend's object (a wgpu GPUBuffer, a JS GPUBuffer proxy)."""

    __slots__ = ("id", "nbytes", "capacity", "handle", "kind")

    def __init__(self, id: int, nbytes: int, capacity: int, handle: Any, kind: str = "storage"):
        self.id = id
        self.nbytes = nbytes
        self.capacity = capacity
        self.handle = handle
        self.kind = kind

    def __repr__(self) -> str:
        return "Buffer(#%d, %d bytes)" % (self.id, self.nbytes)


class Pipeline:
    """A compiled compute pipeline, cached by `key` (what changes the shader, never sizes)."""

    __slots__ = ("key", "source", "entry_point", "handle")

    def __init__(self, key: str, source: str, entry_point: str, handle: Any):
        self.key = key
        self.source = source
        self.entry_point = entry_point
        self.handle = handle


class Dispatch:
    """One compute dispatch: pipeline, storage bindings, uniform bytes, workgroup counts."""

    __slots__ = ("pipeline", "buffers", "uniform", "workgroups")

    def __init__(self, pipeline: Pipeline, buffers: Sequence[Buffer], uniform: bytes,
                 workgroups: Tuple[int, int, int]):
        self.pipeline = pipeline
        self.buffers = list(buffers)
        self.uniform = uniform
        self.workgroups = workgroups


class Copy:
    """A buffer-to-buffer copy of `nbytes` (offsets and size multiples of 4)."""

    __slots__ = ("src", "src_offset", "dst", "dst_offset", "nbytes")

    def __init__(self, src: Buffer, src_offset: int, dst: Buffer, dst_offset: int, nbytes: int):
        self.src = src
        self.src_offset = src_offset
        self.dst = dst
        self.dst_offset = dst_offset
        self.nbytes = nbytes


class Readback:
    """Bring `buffer`'s first bytes back as a numpy array of `shape` and `dtype`."""

    __slots__ = ("buffer", "shape", "dtype")

    def __init__(self, buffer: Buffer, shape: Tuple[int, ...], dtype: np.dtype):
        self.buffer = buffer
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def nbytes(self) -> int:
        """Bytes to read: shape times itemsize."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


Command = Union[Dispatch, Copy]


class CommandList:
    """One run of a partition as plain data: uploads, commands in order, read-backs.

    Uploads happen before the commands (queue.writeBuffer precedes the submit); read-backs after
    them. `execute` returns the read-backs in the order `read` was called.
    """

    def __init__(self) -> None:
        self.uploads: List[Tuple[Buffer, np.ndarray]] = []
        self.commands: List[Command] = []
        self.readbacks: List[Readback] = []

    def upload(self, buffer: Buffer, array: np.ndarray) -> None:
        """Write `array`'s bytes to the start of `buffer` before the commands run."""
        self.uploads.append((buffer, np.ascontiguousarray(array)))

    def dispatch(self, pipeline: Pipeline, buffers: Sequence[Buffer], uniform: bytes,
                 workgroups: Tuple[int, int, int]) -> None:
        """Record a compute dispatch (see the module docstring for the binding order)."""
        if min(workgroups) <= 0:
            return
        if max(workgroups) > MAX_WORKGROUPS:
            raise ValueError("dispatch of %r workgroups exceeds %d per dimension (pipeline %s)"
                             % (workgroups, MAX_WORKGROUPS, pipeline.key))
        self.commands.append(Dispatch(pipeline, buffers, uniform, workgroups))

    def copy(self, src: Buffer, src_offset: int, dst: Buffer, dst_offset: int, nbytes: int) -> None:
        """Record a buffer-to-buffer copy."""
        if nbytes > 0:
            self.commands.append(Copy(src, src_offset, dst, dst_offset, nbytes))

    def read(self, buffer: Buffer, shape: Sequence[int], dtype: Any) -> int:
        """Ask for `buffer` back as an array after the commands; returns its result index."""
        self.readbacks.append(Readback(buffer, tuple(int(d) for d in shape), np.dtype(dtype)))
        return len(self.readbacks) - 1


def round_capacity(nbytes: int) -> int:
    """Pool size classes: powers of two up to 1 MiB, then multiples of 1 MiB (bounded waste)."""
    nbytes = max(16, (nbytes + 15) // 16 * 16)
    if nbytes <= 1 << 20:
        return 1 << (nbytes - 1).bit_length()
    return (nbytes + (1 << 20) - 1) >> 20 << 20


class Device:
    """Abstract device: buffers (pooled), uploads, cached pipelines, and `execute`.

    Backends implement `_alloc`, `_free`, `write`, `_compile` and `execute`; the pool and the
    pipeline cache live here so both backends share them.
    """

    info: AdapterInfo

    def __init__(self) -> None:
        self._pool: Dict[Tuple[str, int], List[Buffer]] = {}
        self._pipelines: Dict[str, Pipeline] = {}
        self._next_id = 0
        self._lock = threading.RLock()
        self.stats = {"buffers_created": 0, "buffers_reused": 0, "pipelines_compiled": 0,
                      "submits": 0}

    # -- buffers
    def acquire(self, nbytes: int, kind: str = "storage") -> Buffer:
        """A buffer of at least `nbytes` from the pool (or a new one); give it back with release."""
        cap = round_capacity(nbytes)
        with self._lock:
            free = self._pool.get((kind, cap))
            if free:
                buf = free.pop()
                buf.nbytes = nbytes
                self.stats["buffers_reused"] += 1
                return buf
            self._next_id += 1
            bid = self._next_id
        handle = self._alloc(cap, kind)
        self.stats["buffers_created"] += 1
        return Buffer(bid, nbytes, cap, handle, kind)

    def release(self, buffer: Buffer) -> None:
        """Return a buffer to the pool for later runs."""
        with self._lock:
            self._pool.setdefault((buffer.kind, buffer.capacity), []).append(buffer)

    def create_buffer(self, nbytes: int, kind: str = "storage") -> Buffer:
        """A buffer not drawn from the pool (persistent data such as weights)."""
        cap = round_capacity(nbytes)
        with self._lock:
            self._next_id += 1
            bid = self._next_id
        self.stats["buffers_created"] += 1
        return Buffer(bid, nbytes, cap, self._alloc(cap, kind), kind)

    def upload(self, array: np.ndarray) -> Buffer:
        """A new persistent buffer holding `array` (written now)."""
        array = np.ascontiguousarray(array)
        buf = self.create_buffer(max(4, array.nbytes))
        if array.nbytes:
            self.write(buf, array)
        return buf

    # -- pipelines
    def pipeline(self, key: str, source: str, entry_point: str = "main") -> Pipeline:
        """The compiled pipeline for `key`, compiling `source` the first time the key is seen."""
        p = self._pipelines.get(key)
        if p is None:
            with self._lock:
                p = self._pipelines.get(key)
                if p is None:
                    p = Pipeline(key, source, entry_point, self._compile(key, source, entry_point))
                    self._pipelines[key] = p
                    self.stats["pipelines_compiled"] += 1
        return p

    # -- backend hooks
    def _alloc(self, capacity: int, kind: str) -> Any:
        raise NotImplementedError

    def write(self, buffer: Buffer, array: np.ndarray, offset: int = 0) -> None:
        """Write `array`'s bytes into `buffer` at `offset` (queue.writeBuffer)."""
        raise NotImplementedError

    def _compile(self, key: str, source: str, entry_point: str) -> Any:
        raise NotImplementedError

    def execute(self, cmds: CommandList) -> List[np.ndarray]:
        """Run a command list: uploads, one encoder, one submit; return the read-backs."""
        raise NotImplementedError


def pack_uniforms(cmds: CommandList) -> Tuple[bytes, List[int]]:
    """All dispatches' uniform bytes in one block, each at a 256-byte aligned offset."""
    chunks: List[bytes] = []
    offsets: List[int] = []
    pos = 0
    for c in cmds.commands:
        if isinstance(c, Dispatch) and c.uniform:
            offsets.append(pos)
            chunks.append(c.uniform)
            pad = -len(c.uniform) % UNIFORM_ALIGN
            chunks.append(b"\0" * pad)
            pos += len(c.uniform) + pad
        else:
            offsets.append(-1)
    return b"".join(chunks), offsets


class WgpuDevice(Device):
    """The native backend over wgpu-py (Vulkan / Metal / D3D12; lavapipe on CPU-only machines)."""

    def __init__(self, adapter: Any, device: Any, info: AdapterInfo):
        super().__init__()
        import wgpu
        self._wgpu = wgpu
        self.adapter = adapter
        self.device = device
        self.info = info
        self._exec_lock = threading.Lock()
        u = wgpu.BufferUsage
        self._usage = {"storage": u.STORAGE | u.COPY_SRC | u.COPY_DST,
                       "uniform": u.UNIFORM | u.COPY_DST,
                       "staging": u.MAP_READ | u.COPY_DST}

    @classmethod
    def create(cls, power_preference: str = "high-performance",
               want_f16: bool = False) -> "WgpuDevice":
        """Find an adapter and open a device on it; raises RuntimeError when there is none."""
        _quiet_runtime_dir()
        import wgpu
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        if adapter is None:
            raise RuntimeError("wgpu found no adapter")
        features = sorted(str(f) for f in adapter.features)
        required = ["shader-f16"] if (want_f16 and "shader-f16" in features) else []
        lim = adapter.limits
        wanted = {}
        for k in ("max-storage-buffer-binding-size", "max-buffer-size",
                  "max-compute-workgroup-storage-size", "max-storage-buffers-per-shader-stage"):
            if k in lim:
                wanted[k] = lim[k]
        device = adapter.request_device_sync(required_features=required, required_limits=wanted)
        ai = adapter.info
        info = AdapterInfo(
            name=str(ai.get("device", "") or ai.get("description", "") or "unknown adapter"),
            backend=str(ai.get("backend_type", "")), adapter_type=str(ai.get("adapter_type", "")),
            is_fallback=str(ai.get("adapter_type", "")).lower() == "cpu"
            or bool(getattr(adapter, "is_fallback_adapter", False)),
            features=features, limits={k: int(v) for k, v in dict(lim).items()
                                       if isinstance(v, int)},
            vendor=str(ai.get("vendor", "")))
        return cls(adapter, device, info)

    def _alloc(self, capacity: int, kind: str) -> Any:
        return self.device.create_buffer(size=capacity, usage=self._usage[kind])

    def write(self, buffer: Buffer, array: np.ndarray, offset: int = 0) -> None:
        """Write array bytes via queue.write_buffer (size padded to 4 bytes)."""
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        if data.size % 4:
            data = np.concatenate([data, np.zeros(4 - data.size % 4, np.uint8)])
        if data.size:
            self.device.queue.write_buffer(buffer.handle, offset, data)

    def _compile(self, key: str, source: str, entry_point: str) -> Any:
        module = self.device.create_shader_module(label=key, code=source)
        return self.device.create_compute_pipeline(
            label=key, layout="auto", compute={"module": module, "entry_point": entry_point})

    def execute(self, cmds: CommandList) -> List[np.ndarray]:
        """Uploads, one encoder with every dispatch and copy, one submit, mapped read-backs."""
        with self._exec_lock:
            return self._execute(cmds)

    def _execute(self, cmds: CommandList) -> List[np.ndarray]:
        dev = self.device
        for buf, arr in cmds.uploads:
            self.write(buf, arr)
        block, offsets = pack_uniforms(cmds)
        ubuf = self.acquire(len(block), "uniform") if block else None
        if ubuf is not None:
            self.write(ubuf, np.frombuffer(block, np.uint8))
        encoder = dev.create_command_encoder()
        pending: Optional[Any] = None
        for c, uoff in zip(cmds.commands, offsets):
            if isinstance(c, Copy):
                if pending is not None:
                    pending.end()
                    pending = None
                encoder.copy_buffer_to_buffer(c.src.handle, c.src_offset, c.dst.handle,
                                              c.dst_offset, c.nbytes)
                continue
            entries = [{"binding": i, "resource": {"buffer": b.handle, "offset": 0,
                                                   "size": padded_size(b.nbytes)}}
                       for i, b in enumerate(c.buffers)]
            if c.uniform:
                entries.append({"binding": len(c.buffers), "resource": {
                    "buffer": ubuf.handle, "offset": uoff, "size": len(c.uniform)}})
            group = dev.create_bind_group(layout=c.pipeline.handle.get_bind_group_layout(0),
                                          entries=entries)
            if pending is None:
                pending = encoder.begin_compute_pass()
            pending.set_pipeline(c.pipeline.handle)
            pending.set_bind_group(0, group)
            pending.dispatch_workgroups(*c.workgroups)
        if pending is not None:
            pending.end()
        staging = []
        for r in cmds.readbacks:
            n = padded_size(r.nbytes)
            s = self.acquire(n, "staging")
            encoder.copy_buffer_to_buffer(r.buffer.handle, 0, s.handle, 0, n)
            staging.append(s)
        dev.queue.submit([encoder.finish()])
        self.stats["submits"] += 1
        out = []
        try:
            for r, s in zip(cmds.readbacks, staging):
                n = padded_size(r.nbytes)
                s.handle.map_sync(self._wgpu.MapMode.READ, 0, n)
                try:
                    raw = s.handle.read_mapped(0, n, copy=True)
                finally:
                    s.handle.unmap()
                arr = np.frombuffer(bytes(raw), np.uint8)[:r.nbytes].view(r.dtype).reshape(r.shape)
                out.append(arr.copy())
        finally:
            for s in staging:
                self.release(s)
            if ubuf is not None:
                self.release(ubuf)
        return out


def padded_size(nbytes: int) -> int:
    """`nbytes` rounded up to a multiple of 4, at least 4: the size WebGPU binds, copies and maps."""
    return max(4, (nbytes + 3) // 4 * 4)


_DEFAULT: Dict[Tuple[str, bool], Any] = {}
_DEFAULT_LOCK = threading.Lock()


def _quiet_runtime_dir() -> None:
    """Give the native WebGPU stack a private XDG_RUNTIME_DIR when the environment has none:
    without one its Vulkan loader prints "XDG_RUNTIME_DIR is invalid" to stderr on every probe."""
    import os
    import tempfile
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current):
        return
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="onnxedge-xdg-")   # mode 0700


def default_device(power_preference: str = "high-performance", want_f16: bool = False) -> Device:
    """The process-wide native device for these options (created once; RuntimeError if none)."""
    key = (power_preference, want_f16)
    with _DEFAULT_LOCK:
        dev = _DEFAULT.get(key)
        if dev is None:
            dev = WgpuDevice.create(power_preference, want_f16)
            _DEFAULT[key] = dev
        if isinstance(dev, Exception):
            raise RuntimeError(str(dev))
        return dev


def has_default_device() -> bool:
    """True once a default device was created, installed or found missing (a cached failure)."""
    with _DEFAULT_LOCK:
        return bool(_DEFAULT)


def set_default_device(device: Device, power_preference: str = "high-performance",
                       want_f16: bool = False) -> None:
    """Install a device (e.g. the page backend inside Pyodide) as the default for these options."""
    with _DEFAULT_LOCK:
        _DEFAULT[(power_preference, want_f16)] = device


__all__ = ["AdapterInfo", "Buffer", "Pipeline", "Dispatch", "Copy", "Readback", "CommandList",
           "Device", "WgpuDevice", "default_device", "has_default_device", "set_default_device",
           "pack_uniforms", "round_capacity", "UNIFORM_ALIGN", "MAX_WORKGROUPS"]
