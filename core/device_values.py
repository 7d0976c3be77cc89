"""Tensors that stay in a provider's device memory between runs (IOBinding on a device).

onnxruntime lets a script keep a run's outputs on the GPU and feed them to the next run
(`io_binding.bind_output(name, "cuda")`, `bind_ortvalue_input`): the way a decoder keeps its
KV cache without a round trip through the host. onnxedge does the same for providers whose
memory is not the host's (WebGPU, device type "webgpu"):

- a provider's device tensor is a `DeviceValue`: shape, numpy dtype, `device_type`, and a
  read-back (`numpy()`, or `await numpy_async()` where the device reads back through promises,
  as in a browser page); its memory goes back to the device's pool when it is garbage;
- a run lists the outputs wanted on a device with `keep_on_device({name: device_type})`; the
  provider that produces such an output hands over a `DeviceValue` instead of reading it back
  (the session brings it to the host for any other provider);
- a step only ever sees the device values its provider takes (`takes(step_device, value)`): the
  session reads the others back at the step's edge.
"""
from __future__ import annotations

import contextvars
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from .errors import InvalidArgument

HOST = "cpu"


class DeviceValue:
    """A tensor in a device's memory; subclasses (one per device kind) do the reading."""

    device_type = "device"

    @property
    def shape(self) -> Tuple[int, ...]:
        """The tensor's dims."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype:
        """The tensor's numpy element type."""
        raise NotImplementedError

    def numpy(self) -> np.ndarray:
        """A host copy (a read-back; blocking)."""
        raise NotImplementedError

    async def numpy_async(self) -> np.ndarray:
        """A host copy, awaiting the device where reads are asynchronous (a browser page)."""
        return self.numpy()

    def update(self, array: np.ndarray) -> None:
        """Overwrite the tensor with a host array of the same shape and dtype."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return "%s(%s, %s, on %s)" % (type(self).__name__, list(self.shape), self.dtype,
                                     self.device_type)


def is_device_value(value: Any) -> bool:
    """True for a tensor held in a device's memory."""
    return isinstance(value, DeviceValue)


def host_copy(value: Any) -> Any:
    """`value` on the host (a device tensor read back; anything else as it is)."""
    return value.numpy() if isinstance(value, DeviceValue) else value


def check_update(value: DeviceValue, array: Any) -> np.ndarray:
    """`array` as the contiguous host array that may overwrite `value` (same shape and dtype)."""
    arr = np.asarray(array)
    if arr.shape != tuple(value.shape):
        raise InvalidArgument("update_inplace: shape %s does not match the device tensor's %s"
                              % (list(arr.shape), list(value.shape)))
    if arr.dtype != value.dtype:
        raise InvalidArgument("update_inplace: element type %s does not match the device "
                              "tensor's %s" % (arr.dtype, value.dtype))
    return np.ascontiguousarray(arr)


_WANTED: Any = contextvars.ContextVar("onnxedge_device_outputs", default=None)


def wanted_device(name: str) -> Optional[str]:
    """The device type the current run wants output `name` kept on, or None (the host)."""
    wanted = _WANTED.get()
    return None if wanted is None else wanted.get(name)


def any_wanted() -> bool:
    """True inside `keep_on_device` with at least one output listed."""
    return bool(_WANTED.get())


class keep_on_device:  # noqa: N801 (a context manager used like a function)
    """`with keep_on_device({"present.0": "webgpu"}):` the run inside keeps these outputs on
    the device that produces them (when its provider has that device type)."""

    def __init__(self, outputs: Dict[str, str]):
        self.outputs = dict(outputs)
        self._token: Any = None

    def __enter__(self) -> Dict[str, str]:
        self._token = _WANTED.set(self.outputs or None)
        return self.outputs

    def __exit__(self, *exc: Any) -> None:
        _WANTED.reset(self._token)


def takes(step_device: str, value: Any) -> bool:
    """True when a step on `step_device` can read `value` as it is (host values always)."""
    return not isinstance(value, DeviceValue) or value.device_type == step_device


def to_host_for(step_device: str, env: Dict[str, Any], names: Sequence[str]) -> None:
    """Read back, in `env`, the device values among `names` a step on `step_device` cannot
    take."""
    for name in names:
        value = env.get(name)
        if not takes(step_device, value):
            env[name] = value.numpy()


async def to_host_for_async(step_device: str, env: Dict[str, Any], names: Sequence[str]) -> None:
    """`to_host_for`, awaiting each read-back (run_async)."""
    for name in names:
        value = env.get(name)
        if not takes(step_device, value):
            env[name] = await value.numpy_async()


__all__ = ["DeviceValue", "HOST", "is_device_value", "host_copy", "check_update", "wanted_device",
           "any_wanted", "keep_on_device", "takes", "to_host_for", "to_host_for_async"]
