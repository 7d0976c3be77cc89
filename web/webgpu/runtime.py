"""One run of a WebGPU partition: tensors on the device and the recorder ops write into.

A `Recorder` turns op calls into a `CommandList` (device.py): it allocates output tensors from
the device's pool, uploads host values at the partition edge (initializers once, cached by the
compiled step), compiles pipelines through the device cache and records dispatches. `finish`
executes the list (one submit) and returns the values that leave the partition.
"""
from __future__ import annotations

import struct
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import template
from .device import MAX_WORKGROUPS, CommandList, Device, Pipeline, round_capacity

MAX_RANK = 8


class GpuTensor:
    """A tensor living in a device buffer: logical numpy dtype and shape (views share buffers)."""

    __slots__ = ("buffer", "shape", "dtype")

    def __init__(self, buffer: Any, shape: Sequence[int], dtype: Any):
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    def view(self, shape: Sequence[int]) -> "GpuTensor":
        """The same buffer under a new shape (Reshape, Flatten, Squeeze, Unsqueeze)."""
        return GpuTensor(self.buffer, shape, self.dtype)

    def __repr__(self) -> str:
        return "GpuTensor(%s, %s)" % (self.shape, self.dtype)


def is_gpu(value: Any) -> bool:
    """True for a GpuTensor."""
    return isinstance(value, GpuTensor)


_STORAGE = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32}


def wgsl_type_of(dtype: Any, f16: bool) -> str:
    """The WGSL element type that stores a logical dtype on the device (floats as f16 when
    `f16`)."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return "f16" if f16 else "f32"
    if dtype in (np.int64, np.int32):
        return "i32"
    if dtype == np.bool_:
        return "u32"
    raise TypeError("the WebGPU provider stores no %s tensors" % dtype)


def storage_dtype_of(dtype: Any, f16: bool) -> np.dtype:
    """The numpy dtype of a logical dtype's device storage."""
    return np.dtype(_STORAGE[wgsl_type_of(dtype, f16)])


def from_storage(raw: np.ndarray, dtype: Any) -> np.ndarray:
    """A read-back array (in its storage type) as the logical dtype."""
    dtype = np.dtype(dtype)
    if raw.dtype == dtype:
        return raw
    if dtype == np.bool_:
        return raw != 0
    return raw.astype(dtype)


_INT_LIMIT = 2 ** 31


def to_storage(array: np.ndarray, f16: bool) -> np.ndarray:
    """A host array converted to its device storage type (int64 range-checked)."""
    target = storage_dtype_of(array.dtype, f16)
    if array.dtype == np.int64 and array.size:
        lo, hi = int(array.min()), int(array.max())
        if lo < -_INT_LIMIT or hi >= _INT_LIMIT:
            raise ValueError("int64 values %d..%d do not fit the device's int32" % (lo, hi))
    return np.ascontiguousarray(array, dtype=target)


class Uniform:
    """Builds a uniform block matching a WGSL struct of 32-bit scalars then vec4 arrays."""

    def __init__(self) -> None:
        self._words: List[bytes] = []

    def u32(self, *values: int) -> "Uniform":
        """Append u32 fields."""
        for v in values:
            self._words.append(struct.pack("<I", int(v) & 0xFFFFFFFF))
        return self

    def i32(self, *values: int) -> "Uniform":
        """Append i32 fields."""
        for v in values:
            self._words.append(struct.pack("<i", int(v)))
        return self

    def f32(self, *values: float) -> "Uniform":
        """Append f32 fields."""
        for v in values:
            self._words.append(struct.pack("<f", float(v)))
        return self

    def vec(self, values: Sequence[int], signed: bool = False, n: int = MAX_RANK) -> "Uniform":
        """Append an `array<vec4<u32|i32>, n/4>` (16-byte aligned, zero padded to n)."""
        while len(self._words) % 4:
            self._words.append(b"\0\0\0\0")
        vals = list(values) + [0] * (n - len(values))
        fmt = "<i" if signed else "<I"
        for v in vals[:n]:
            self._words.append(struct.pack(fmt, int(v) if signed else int(v) & 0xFFFFFFFF))
        return self

    def tobytes(self) -> bytes:
        """The block, padded to a multiple of 16 bytes (WGSL struct size rule)."""
        while len(self._words) % 4 or not self._words:
            self._words.append(b"\0\0\0\0")
        return b"".join(self._words)


def grid(n: int, workgroup: int) -> Tuple[int, int, int]:
    """Workgroup counts covering n invocations in 1-D, folded into y past 65535 groups.

    Shaders index with `gid.x + gid.y * nwg.x * WG`."""
    groups = max(1, -(-n // workgroup))
    if groups <= MAX_WORKGROUPS:
        return (groups, 1, 1)
    y = -(-groups // MAX_WORKGROUPS)
    return (-(-groups // y), y, 1)


def strides_of(shape: Sequence[int]) -> List[int]:
    """Row-major element strides."""
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * int(shape[k + 1])
    return out


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> List[int]:
    """Strides of `shape` read as `out_shape` (numpy broadcasting: 0 on broadcast dims)."""
    pad = len(out_shape) - len(shape)
    st = strides_of(shape)
    return [0 if k < pad or shape[k - pad] == 1 else st[k - pad] for k in range(len(out_shape))]


class ConstCache:
    """Device copies of host constants (initializers, Constant nodes), by value name.

    An entry holds the host array it was made from and is used only for that very object, so
    an overridden initializer is uploaded again (and replaces the entry)."""

    def __init__(self) -> None:
        self._items: Dict[Tuple[str, bool], Tuple[np.ndarray, GpuTensor]] = {}
        self._lock = threading.Lock()

    def get(self, name: str, array: np.ndarray, f16: bool) -> Optional[GpuTensor]:
        """The cached device tensor of `name` if it was made from this exact array object."""
        hit = self._items.get((name, f16))
        if hit is not None and hit[0] is array:
            return hit[1]
        return None

    def put(self, name: str, array: np.ndarray, f16: bool, tensor: GpuTensor) -> None:
        """Remember the device copy of `name` (the array is kept alive with it)."""
        with self._lock:
            self._items[(name, f16)] = (array, tensor)




def dead_after(nodes: Sequence[Any], keep: Sequence[str]) -> List[List[str]]:
    """For each node of a partition (in order), the values produced inside it whose last use
    inside it is that node (read, or produced and never read); `keep` (exported) never die."""
    last: Dict[str, int] = {}
    for k, node in enumerate(nodes):
        for name in node.outputs:
            if name:
                last[name] = k
    produced = set(last)
    for k, node in enumerate(nodes):
        for name in node.inputs:
            if name in produced:
                last[name] = max(last[name], k)
    out: List[List[str]] = [[] for _ in nodes]
    kept = set(keep)
    for name in sorted(last):
        if name not in kept:
            out[last[name]].append(name)
    return out


class Recorder:
    """Records one run of a partition; ops call `new`, `gpu`, `host`, `kernel`, `dispatch`.

    Buffers of values that died during the run (`drop`) are reused by later `new` outputs of
    the same run: a later dispatch writes them after the earlier ones read them (WebGPU orders
    dispatches). Uploads never take such a buffer, since uploads happen before every command.
    `stats`: bytes drawn from the device pool by this run and buffers reused within it.
    `reuse_in_run = False` turns the reuse off (to measure what it saves)."""

    reuse_in_run = True

    def __init__(self, device: Device, f16: bool = False, consts: Optional[ConstCache] = None):
        self.device = device
        self.f16 = f16
        self.consts = consts
        self.cmds = CommandList()
        self._temps: List[Any] = []
        self._temp_ids: set = set()
        self._free: Dict[int, List[Any]] = {}
        self.stats = {"temp_bytes": 0, "temp_buffers": 0, "reused_in_run": 0}

    # -- types
    def wgsl_type(self, dtype: Any) -> str:
        """The WGSL element type that stores a logical dtype on the device."""
        return wgsl_type_of(dtype, self.f16)

    def storage_dtype(self, dtype: Any) -> np.dtype:
        """The numpy dtype of a logical dtype's device storage."""
        return storage_dtype_of(dtype, self.f16)

    def enable(self) -> str:
        """The `enable f16;` directive when tensors are stored as f16, else empty."""
        return "enable f16;" if self.f16 else ""

    # -- tensors
    def new(self, shape: Sequence[int], dtype: Any = np.float32, upload: bool = False
            ) -> GpuTensor:
        """A device tensor for an op's output (a buffer freed earlier in this run, or one from
        the pool; released after the run). `upload`: to be written by an upload, so never a
        buffer freed in this run."""
        n = max(4, int(np.prod(shape, dtype=np.int64)) * self.storage_dtype(dtype).itemsize)
        cap = round_capacity(n)
        fits = [] if upload else [c for c in self._free if c >= cap]
        if fits:   # best fit: the smallest free buffer that holds it
            best = min(fits)
            buf = self._free[best].pop()
            if not self._free[best]:
                del self._free[best]
            # earlier dispatches of this run bind it too, with its size read at execute time
            buf.nbytes = max(buf.nbytes, n)
            self.stats["reused_in_run"] += 1
        else:
            buf = self.device.acquire(n)
            self._temps.append(buf)
            self._temp_ids.add(buf.id)
            self.stats["temp_bytes"] += buf.capacity
            self.stats["temp_buffers"] += 1
        return GpuTensor(buf, shape, dtype)

    def drop(self, local: Dict[str, Any], names: Sequence[str]) -> None:
        """Forget dead values; a temporary buffer no live value (views included) still uses
        becomes free for later outputs of this run."""
        dropped = [local.pop(name) for name in names if name in local]
        if not self.reuse_in_run:
            return
        bufs = {v.buffer.id: v.buffer for v in dropped
                if isinstance(v, GpuTensor) and v.buffer.id in self._temp_ids}
        if not bufs:
            return
        for v in local.values():
            if isinstance(v, GpuTensor):
                bufs.pop(v.buffer.id, None)
        for buf in bufs.values():
            self._free.setdefault(buf.capacity, []).append(buf)

    def to_storage(self, array: np.ndarray) -> np.ndarray:
        """A host array converted to its device storage type (int64 range-checked)."""
        return to_storage(array, self.f16)

    def gpu(self, value: Any, const_name: Optional[str] = None) -> GpuTensor:
        """`value` on the device: GpuTensors as they are, host arrays uploaded; a constant
        (`const_name` given: an initializer or Constant output) is uploaded once and cached."""
        if isinstance(value, GpuTensor):
            return value
        array = np.asarray(value)
        if array.dtype == np.float64 or array.dtype == np.float16:
            raise TypeError("the WebGPU provider takes float32 tensors, not %s" % array.dtype)
        cacheable = self.consts is not None and const_name is not None
        if cacheable:
            hit = self.consts.get(const_name, value, self.f16)  # type: ignore
            if hit is not None:
                return hit
        data = self.to_storage(array)
        if cacheable:
            t = GpuTensor(self.device.upload(data), array.shape, array.dtype)
            self.consts.put(const_name, value, self.f16, t)  # type: ignore
            return t
        t = self.new(array.shape, array.dtype, upload=True)
        if data.nbytes:
            self.cmds.upload(t.buffer, data)
        return t

    def host(self, value: Any) -> np.ndarray:
        """`value` on the host; a device tensor is read back (an extra submit: avoid)."""
        if isinstance(value, GpuTensor):
            return self.read([value])[0]
        return np.asarray(value)

    # -- kernels
    def kernel(self, name: str, entry_point: str = "main", **params: object) -> Pipeline:
        """The pipeline of shaders/<name>.wgsl specialized by params (cached by the device)."""
        params.setdefault("ENABLE", self.enable())
        key = template.cache_key(name, **params)
        return self.device.pipeline(key, template.render(name, **params), entry_point)

    def dispatch(self, pipeline: Pipeline, tensors: Sequence[GpuTensor], uniform: Uniform,
                 workgroups: Tuple[int, int, int]) -> None:
        """Record a dispatch binding tensors' buffers in order, then the uniform block."""
        self.cmds.dispatch(pipeline, [t.buffer for t in tensors], uniform.tobytes(), workgroups)

    # -- ending
    def read(self, tensors: Sequence[GpuTensor]) -> List[np.ndarray]:
        """Execute what is recorded (one submit), returning these tensors as host arrays."""
        raw = self.device.execute(self._take(tensors))
        return [from_storage(r, t.dtype) for r, t in zip(raw, tensors)]

    async def read_async(self, tensors: Sequence[GpuTensor]) -> List[np.ndarray]:
        """`read` for `InferenceSession.run_async`: awaits the device's `execute_async` (the
        page's navigator.gpu reads back through promises); devices without one run `execute`."""
        execute_async = getattr(self.device, "execute_async", None)
        if execute_async is None:
            return self.read(tensors)
        raw = await execute_async(self._take(tensors))
        return [from_storage(r, t.dtype) for r, t in zip(raw, tensors)]

    def _take(self, tensors: Sequence[GpuTensor]) -> CommandList:
        """The recorded commands plus read-backs of `tensors`; recording starts afresh."""
        cmds = self.cmds
        self.cmds = CommandList()
        for t in tensors:
            cmds.read(t.buffer, t.shape, self.storage_dtype(t.dtype))
        return cmds

    def keep(self, tensor: GpuTensor) -> GpuTensor:
        """`tensor` in a buffer that outlives the run (for a value kept on the device after
        it: the caller owns the buffer and gives it back to the device's pool). A temporary
        of this run is handed over as it is; anything else (a cached constant, a buffer kept
        from an earlier run, one already handed over) is first copied into a new one."""
        buf = tensor.buffer
        if buf.id not in self._temp_ids:
            copy = self.new(tensor.shape, tensor.dtype)
            nbytes = -(-tensor.size * self.storage_dtype(tensor.dtype).itemsize // 4) * 4
            if nbytes:
                self.cmds.copy(buf, 0, copy.buffer, 0, nbytes)
            tensor, buf = copy, copy.buffer
        self._temp_ids.discard(buf.id)
        self._temps = [b for b in self._temps if b.id != buf.id]
        return tensor

    def release(self) -> None:
        """Give every temporary buffer of this run back to the pool."""
        for b in self._temps:
            self.device.release(b)
        self._temps = []
        self._temp_ids = set()
        self._free = {}


__all__ = ["GpuTensor", "Uniform", "Recorder", "ConstCache", "dead_after", "grid", "strides_of",
           "broadcast_strides", "is_gpu", "MAX_RANK", "wgsl_type_of", "storage_dtype_of",
           "to_storage", "from_storage"]
