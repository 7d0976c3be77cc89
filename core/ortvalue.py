"""onnxruntime's OrtValue and IOBinding, for scripts written against them.

`OrtValue` wraps a run's input or output: a numpy array on the host, or a tensor kept in a
device's memory (`device_values`: WebGPU, device type "webgpu"). `IOBinding`
(`InferenceSession.io_binding()`) binds inputs and outputs by name once and runs with
`InferenceSession.run_with_iobinding`; an output bound to a preallocated OrtValue or buffer is
written into it, as onnxruntime does, and an output bound to a device stays there, ready to be
bound as the next run's input (a decoder's KV cache) without a trip through the host.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import device_values, dtypes
from .errors import InvalidArgument, NotImplemented

HOST_DEVICES = ("cpu",)


def _device_kind(device_type: Any, what: str) -> str:
    """'cpu', or the device type of an available provider that keeps tensors on a device."""
    kind = str(device_type).lower()
    if kind in HOST_DEVICES:
        return device_values.HOST
    if _device_provider(kind) is None:
        raise NotImplemented("%s: device_type %r: no available execution provider keeps tensors "
                             "on that device here; use host ('cpu') memory%s" % (
                                 what, device_type, _other_devices()))
    return kind


def _device_classes() -> Dict[str, Any]:
    from .providers import discovery
    out: Dict[str, Any] = {}
    for cls in discovery.provider_classes().values():
        kind = getattr(cls, "device_type", device_values.HOST)
        if kind != device_values.HOST and kind not in out:
            try:
                ok = cls.is_available()
            except Exception:
                ok = False
            if ok:
                out[kind] = cls
    return out


def _device_provider(kind: str) -> Any:
    return _device_classes().get(kind)


def _other_devices() -> str:
    kinds = sorted(_device_classes())
    return " or one of %s" % kinds if kinds else ""


def _check_device(device_type: str, what: str) -> None:
    """Host memory only (raw pointers, which name host memory here)."""
    if str(device_type).lower() not in HOST_DEVICES:
        raise NotImplemented("%s: device_type %r: a buffer_ptr names host ('cpu') memory here; "
                             "to keep a tensor on a device, use OrtValue.ortvalue_from_numpy(x, "
                             "device_type) and bind_ortvalue_input, or bind_output(name, "
                             "device_type)" % (what, device_type))


def _numpy_type(element_type: Any) -> np.dtype:
    """A numpy dtype from what onnxruntime accepts as element_type: a numpy type or dtype, or an
    element name such as 'float' / 'tensor(float)'."""
    if isinstance(element_type, str):
        name = element_type[len("tensor("):-1] if element_type.startswith("tensor(") else element_type
        code = dtypes.from_ort_name(name)
        if code is None:
            raise InvalidArgument("element_type %r is not an onnxruntime element type name"
                                  % element_type)
        return np.dtype(dtypes.to_numpy(code))
    try:
        return np.dtype(element_type)
    except TypeError:
        raise InvalidArgument("element_type %r is not a numpy type" % (element_type,)) from None


class OrtValue:
    """A tensor (or sequence/map) value of a run: on the host, or kept on a device."""

    def __init__(self, value: Any):
        self._value = value

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, device_type: str = "cpu",
                            device_id: int = 0) -> "OrtValue":
        """An OrtValue holding `numpy_obj`: not copied on the host ('cpu', as onnxruntime),
        uploaded to the device of an available provider for another device type ('webgpu')."""
        kind = _device_kind(device_type, "OrtValue.ortvalue_from_numpy")
        if not isinstance(numpy_obj, np.ndarray):
            raise InvalidArgument("ortvalue_from_numpy: expected a numpy array, got a %s"
                                  % type(numpy_obj).__name__)
        if kind == device_values.HOST:
            return OrtValue(numpy_obj)
        return OrtValue(_device_provider(kind).to_device(numpy_obj))

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any = np.float32,
                                     device_type: str = "cpu", device_id: int = 0) -> "OrtValue":
        """A new zero-filled tensor OrtValue of this shape and element type (on the host, or
        on a device as `ortvalue_from_numpy` puts it)."""
        kind = _device_kind(device_type, "OrtValue.ortvalue_from_shape_and_type")
        dims = [int(d) for d in shape]
        if any(d < 0 for d in dims):
            raise InvalidArgument("ortvalue_from_shape_and_type: shape %s has a negative dim" % dims)
        zeros = np.zeros(dims, _numpy_type(element_type))
        if kind == device_values.HOST:
            return OrtValue(zeros)
        return OrtValue(_device_provider(kind).to_device(zeros))

    @property
    def value(self) -> Any:
        """What a run takes or gave: a numpy array, list, dict, None or a device tensor."""
        return self._value

    def numpy(self) -> Any:
        """The value as a numpy array (sequences: a list); a device tensor is read back (a
        copy: in a browser page, use `await numpy_async()`)."""
        if device_values.is_device_value(self._value):
            return self._value.numpy()
        return self._value

    async def numpy_async(self) -> Any:
        """`numpy()` awaiting a device's read-back (WebGPU in a browser page reads through
        promises, as onnxruntime-web's `await tensor.getData()`)."""
        if device_values.is_device_value(self._value):
            return await self._value.numpy_async()
        return self._value

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Copy `np_arr` into this tensor (same shape and type; on its device if it has one)."""
        if device_values.is_device_value(self._value):
            self._value.update(device_values.check_update(self._value, np_arr))
            return
        if not isinstance(self._value, np.ndarray) or np.shape(np_arr) != self._value.shape:
            raise InvalidArgument("update_inplace: shape %s does not match the OrtValue's %s"
                                  % (np.shape(np_arr), self.shape()))
        np.copyto(self._value, np_arr, casting="same_kind")

    def is_tensor(self) -> bool:
        """True for a tensor."""
        return isinstance(self._value, (np.ndarray, device_values.DeviceValue))

    def is_tensor_sequence(self) -> bool:
        """True for a sequence of tensors."""
        return isinstance(self._value, list)

    def is_sparse_tensor(self) -> bool:
        """Sparse tensors reach users densified: always False."""
        return False

    def has_value(self) -> bool:
        """False for an absent optional value."""
        return self._value is not None

    def shape(self) -> List[int]:
        """The tensor's shape."""
        return list(self._value.shape) if self.is_tensor() else []

    def element_type(self) -> Any:
        """The numpy type of the tensor's elements."""
        return self._value.dtype.type if self.is_tensor() else None

    def data_type(self) -> str:
        """onnxruntime's type string, e.g. 'tensor(float)'."""
        if self.is_tensor():
            return dtypes.ort_type_string(dtypes.from_numpy(self._value.dtype))
        if isinstance(self._value, list):
            inner = OrtValue(self._value[0]).data_type() if self._value else "tensor(float)"
            return "seq(%s)" % inner
        if isinstance(self._value, dict):
            return "map"
        return "optional"

    def device_name(self) -> str:
        """Where the value lives: 'cpu', or its device type ('webgpu')."""
        if device_values.is_device_value(self._value):
            return self._value.device_type
        return "cpu"

    def data_ptr(self) -> int:
        """The address of the tensor's first element (host tensors only)."""
        if device_values.is_device_value(self._value):
            raise InvalidArgument("data_ptr: the tensor lives on %r, not in host memory; read it "
                                  "with numpy()" % self._value.device_type)
        if not isinstance(self._value, np.ndarray):
            raise InvalidArgument("data_ptr: the OrtValue is not a tensor")
        return int(self._value.__array_interface__["data"][0])

    def __repr__(self) -> str:
        return "OrtValue(%s, shape=%s)" % (self.data_type(), self.shape())


def _array_at(ptr: int, shape: Sequence[int], element_type: Any) -> np.ndarray:
    """A numpy view of host memory at `ptr` (onnxruntime's buffer_ptr bindings)."""
    try:
        import ctypes
    except ImportError:
        raise NotImplemented("binding a raw buffer_ptr needs ctypes, which this Python lacks; "
                             "bind a numpy array (bind_cpu_input) or an OrtValue instead") from None
    dt = _numpy_type(element_type)
    dims = [int(d) for d in shape]
    if not ptr:
        raise InvalidArgument("buffer_ptr is null")
    count = int(np.prod(dims)) if dims else 1
    raw = (ctypes.c_char * (count * dt.itemsize)).from_address(int(ptr))
    return np.frombuffer(raw, dtype=dt, count=count).reshape(dims)


class IOBinding:
    """Inputs and outputs bound by name for `InferenceSession.run_with_iobinding`."""

    def __init__(self, session: Any):
        self._session = session
        self._inputs: Dict[str, Any] = {}
        self._outputs: List[str] = []
        self._targets: Dict[str, Any] = {}
        self._devices: Dict[str, str] = {}
        self._results: List[OrtValue] = []

    # -- inputs
    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        """Bind a host numpy array as input `name`."""
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any,
                   shape: Sequence[int], buffer_ptr: int) -> None:
        """Bind input `name` to memory at `buffer_ptr` holding `shape` elements of `element_type`."""
        _check_device(device_type, "bind_input(%r)" % name)
        self._inputs[name] = _array_at(buffer_ptr, shape, element_type)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        """Bind an OrtValue as input `name` (a device tensor stays on its device)."""
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument("bind_ortvalue_input(%r): expected an OrtValue, got a %s"
                                  % (name, type(ortvalue).__name__))
        self._inputs[name] = ortvalue.value

    def clear_binding_inputs(self) -> None:
        """Forget the bound inputs."""
        self._inputs = {}

    # -- outputs
    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0,
                    element_type: Any = None, shape: Optional[Sequence[int]] = None,
                    buffer_ptr: Optional[int] = None) -> None:
        """Bind output `name`: to new host memory, (with buffer_ptr) into the caller's, or to a
        device ('webgpu'): the output then stays there when its provider runs on that device."""
        kind = _device_kind(device_type, "bind_output(%r)" % name)
        if kind != device_values.HOST:
            if buffer_ptr is not None:
                _check_device(device_type, "bind_output(%r)" % name)
            self._bind_out(name, None)
            self._devices[name] = kind
            return
        target = None
        if buffer_ptr is not None:
            if element_type is None or shape is None:
                raise InvalidArgument("bind_output(%r): a buffer_ptr needs element_type and shape"
                                      % name)
            target = _array_at(buffer_ptr, shape, element_type)
        self._bind_out(name, target)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Bind output `name` into a preallocated OrtValue (written in place; a device
        OrtValue receives the device result)."""
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument("bind_ortvalue_output(%r): expected an OrtValue, got a %s"
                                  % (name, type(ortvalue).__name__))
        self._bind_out(name, ortvalue)
        if device_values.is_device_value(ortvalue.value):
            self._devices[name] = ortvalue.value.device_type

    def _bind_out(self, name: str, target: Any) -> None:
        if name not in self._outputs:
            self._outputs.append(name)
        self._targets[name] = target
        self._devices.pop(name, None)

    def output_devices(self) -> Dict[str, str]:
        """The bound outputs to keep on a device, with its device type."""
        return dict(self._devices)

    def clear_binding_outputs(self) -> None:
        """Forget the bound outputs (and the last results)."""
        self._outputs, self._targets, self._results, self._devices = [], {}, [], {}

    def synchronize_inputs(self) -> None:
        """Host memory needs no synchronization."""

    def synchronize_outputs(self) -> None:
        """Host memory needs no synchronization."""

    # -- results
    def store_outputs(self, names: Sequence[str], values: Sequence[Any]) -> None:
        """Keep a run's outputs, writing those bound to caller memory in place."""
        results = []
        for name, value in zip(names, values):
            target = self._targets.get(name)
            if isinstance(target, OrtValue) and device_values.is_device_value(target.value):
                results.append(_into_device_value(name, target, value))
                continue
            if isinstance(target, OrtValue):
                target = target.value
            if target is not None:
                if not isinstance(value, np.ndarray) or value.shape != target.shape:
                    raise InvalidArgument("output %r has shape %s; the bound buffer holds %s"
                                          % (name, getattr(value, "shape", None), target.shape))
                if value.dtype != target.dtype:
                    raise InvalidArgument("output %r is %s; the bound buffer is %s"
                                          % (name, value.dtype, target.dtype))
                np.copyto(target, value)
                value = target
            results.append(OrtValue(value))
        self._results = results

    def get_outputs(self) -> List[OrtValue]:
        """The last run's outputs, as OrtValues."""
        return list(self._results)

    get_outputs_as_ortvaluevector = get_outputs

    def copy_outputs_to_cpu(self) -> List[Any]:
        """The last run's outputs as numpy arrays."""
        return [v.numpy() for v in self._results]


def _into_device_value(name: str, target: OrtValue, value: Any) -> OrtValue:
    """`target` (a device OrtValue bound as output `name`) holding the run's `value`."""
    held = target.value
    if tuple(getattr(value, "shape", ())) != tuple(held.shape) \
            or getattr(value, "dtype", None) != held.dtype:
        raise InvalidArgument("output %r is %s %s; the bound OrtValue holds %s %s" % (
            name, getattr(value, "dtype", type(value).__name__), list(getattr(value, "shape", [])),
            held.dtype, list(held.shape)))
    if device_values.is_device_value(value) and value.device_type == held.device_type:
        target._value = value     # the result's device memory becomes the bound value's
    else:
        held.update(np.ascontiguousarray(device_values.host_copy(value)))
    return target


__all__ = ["OrtValue", "IOBinding"]
