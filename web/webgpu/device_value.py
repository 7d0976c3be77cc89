"""`WebGpuValue`: a tensor kept in a WebGPU buffer between runs (device type "webgpu").

What `OrtValue.ortvalue_from_numpy(x, "webgpu")` uploads and what a WebGPU partition hands over
for an output bound with `io_binding.bind_output(name, "webgpu")`; bound as a later run's input,
the partition reads it in place (a decoder's KV cache never visits the host). The buffer goes
back to the device's pool when the value is garbage.
"""
from __future__ import annotations

import weakref
from typing import Tuple

import numpy as np

from onnxedge.device_values import DeviceValue

from .device import CommandList, Device
from .runtime import GpuTensor, from_storage, storage_dtype_of, to_storage

DEVICE_TYPE = "webgpu"


class WebGpuValue(DeviceValue):
    """A tensor in a WebGPU buffer this value owns (stored as f16 when `f16`)."""

    device_type = DEVICE_TYPE

    def __init__(self, device: Device, tensor: GpuTensor, f16: bool = False):
        self.device = device
        self.tensor = tensor
        self.f16 = f16
        self._finalizer = weakref.finalize(self, device.release, tensor.buffer)

    @classmethod
    def upload(cls, device: Device, array: np.ndarray) -> "WebGpuValue":
        """A new value holding a copy of a host array."""
        array = np.asarray(array)
        data = to_storage(array, False)
        buf = device.acquire(max(4, data.nbytes))
        if data.nbytes:
            device.write(buf, data)
        return cls(device, GpuTensor(buf, array.shape, array.dtype))

    @property
    def shape(self) -> Tuple[int, ...]:
        """The tensor's dims."""
        return self.tensor.shape

    @property
    def dtype(self) -> np.dtype:
        """The tensor's logical numpy dtype."""
        return self.tensor.dtype

    def usable_by(self, device: Device, f16: bool) -> bool:
        """True when a partition on `device` with this float storage can read it in place."""
        return device is self.device and (f16 == self.f16 or self.dtype != np.float32)

    def _reading(self) -> CommandList:
        cmds = CommandList()
        cmds.read(self.tensor.buffer, self.shape, storage_dtype_of(self.dtype, self.f16))
        return cmds

    def numpy(self) -> np.ndarray:
        """A host copy (a blocking read-back: natively; in a page use `numpy_async`)."""
        return from_storage(self.device.execute(self._reading())[0], self.dtype)

    async def numpy_async(self) -> np.ndarray:
        """A host copy, awaiting the page's asynchronous read-back where there is one."""
        execute_async = getattr(self.device, "execute_async", None)
        if execute_async is None:
            return self.numpy()
        return from_storage((await execute_async(self._reading()))[0], self.dtype)

    def update(self, array: np.ndarray) -> None:
        """Overwrite the buffer with a host array of the same shape and dtype."""
        data = to_storage(np.asarray(array, self.dtype), self.f16)
        if data.nbytes:
            self.device.write(self.tensor.buffer, data)


__all__ = ["WebGpuValue", "DEVICE_TYPE"]
