"""`WebGpuExecutionProvider`: runs the nodes it has WGSL kernels for on a WebGPU device.

Each compiled partition keeps its tensors on the device: inputs are uploaded at the partition
edge (initializers and Constant values once, then cached), every node records its dispatches
into one command list, and one submit at the end reads back only the values used outside the
partition (graph outputs, or inputs of later steps). Shapes are known when the step runs and
travel to the shaders as uniforms, so one pipeline serves every shape.

Options (provider_options): `power_preference` ("high-performance" | "low-power") and
`preferred_dtype` ("float32" | "float16": float tensors stored as f16 on the device, only when
the adapter offers `shader-f16`; arithmetic runs in f32 inside the shaders).
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

import numpy as np

from onnxedge import device_values, executor, ir
from onnxedge.facts import Facts
from onnxedge.kernels import registry
from onnxedge.errors import EPFail, InvalidArgument, OnnxEdgeError, RuntimeException
from onnxedge.providers.base import CompileContext, ExecutionProvider, Group, Step

from . import device as _device
from . import host_values
from .device_value import DEVICE_TYPE, WebGpuValue
from .ops import OPS, TABLE
from .runtime import ConstCache, GpuTensor, Recorder, dead_after, is_gpu

_POWER = ("high-performance", "low-power")
_DTYPES = ("float32", "float16")


def _missing(node: ir.Node) -> str:
    return "no WebGPU kernel for %s (domain %s)" % (node.op_type, node.domain or "ai.onnx")


class WebGpuExecutionProvider(ExecutionProvider):
    """WGSL compute kernels over WebGPU (wgpu-py natively, navigator.gpu in the page)."""

    name = "WebGpuExecutionProvider"
    device_type = DEVICE_TYPE
    _available: Optional[bool] = None
    _lock = threading.Lock()

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        power = str(self.options.get("power_preference", "high-performance"))
        if power not in _POWER:
            raise InvalidArgument("WebGpuExecutionProvider option power_preference=%r: expected "
                                  "one of %s" % (power, list(_POWER)))
        dtype = str(self.options.get("preferred_dtype", "float32"))
        if dtype not in _DTYPES:
            raise InvalidArgument("WebGpuExecutionProvider option preferred_dtype=%r: expected "
                                  "one of %s" % (dtype, list(_DTYPES)))
        unknown = set(self.options) - {"power_preference", "preferred_dtype", "device"}
        if unknown:
            raise InvalidArgument("WebGpuExecutionProvider has no option(s) %s; it takes "
                                  "power_preference, preferred_dtype" % sorted(unknown))
        self.power_preference = power
        self._device = self.options.get("device")
        want_f16 = dtype == "float16"
        if self._device is None:
            try:
                self._device = _device.default_device(power, want_f16)
            except Exception as e:
                raise EPFail("WebGpuExecutionProvider: no WebGPU adapter (%s)" % e) from e
        self.f16 = want_f16 and self._device.info.has_f16
        self._facts = Facts()   # the last graph's (ctx.facts): what the claim checks read
        self._blocked: Dict[int, str] = {}   # id(node) -> why its host input keeps it off

    @property
    def device(self) -> _device.Device:
        """The device this provider runs on."""
        return self._device

    @classmethod
    def is_available(cls) -> bool:
        """True when a WebGPU adapter is found (wgpu importable natively, or a page device set).
        A "no" is cached until `refresh()`; a device installed since (device_js.install) is
        always seen."""
        with cls._lock:
            if _device.has_default_device():
                cls._available = True
            elif cls._available is None:
                try:
                    _device.default_device()
                    cls._available = True
                except Exception:
                    cls._available = False
            return cls._available

    @classmethod
    def to_device(cls, array: np.ndarray) -> WebGpuValue:
        """A host array uploaded to the default WebGPU device (OrtValue.ortvalue_from_numpy
        with device_type 'webgpu')."""
        try:
            device = _device.default_device()
        except Exception as e:
            raise EPFail("WebGpuExecutionProvider: no WebGPU adapter (%s)" % e) from e
        try:
            return WebGpuValue.upload(device, array)
        except (TypeError, ValueError) as e:
            raise InvalidArgument("a %s tensor cannot be kept on WebGPU: %s" % (
                np.asarray(array).dtype, e)) from None

    @classmethod
    def refresh(cls) -> None:
        """Forget the cached availability: the next `is_available()` probes again (what
        `onnxedge.web.init()` calls once it has started the page's WebGPU device)."""
        with cls._lock:
            cls._available = None

    # -- capability
    def _reason(self, node: ir.Node, opset: int) -> Optional[str]:
        rec = TABLE.lookup(node, opset or None)
        if rec is None:
            return TABLE.reason(node, opset or None, self._facts, _missing)
        if node.subgraphs():
            return "%s has subgraphs" % node.op_type
        why = rec.check(node, self._facts) if rec.check is not None else None
        return "%s: %s" % (node.op_type, why) if why else None

    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """Runs of consecutive nodes that have kernels for their op, dtypes and attributes,
        less those whose host inputs (shapes, indices) would need a read-back mid-step."""
        self._facts = ctx.facts
        able = [i for i, node in enumerate(graph.nodes)
                if self._reason(node, ctx.opset_of(node)) is None]
        runs = host_values.claimable(graph.nodes, able, _host_inputs, _cpu_kernel_in(ctx),
                                     ctx.facts)
        kept = {i for run in runs for i in run}
        self._blocked = {id(graph.nodes[i]): "%s: an input it needs on the host is computed "
                         "on the GPU in the same step" % graph.nodes[i].op_type
                         for i in able if i not in kept}
        return runs

    def unsupported_reason(self, node: ir.Node, ctx: CompileContext) -> Optional[str]:
        """Why a node stays off the GPU: no kernel for the op, its dtype, or an attribute, or
        a host input (shape, indices) that only a mid-step read-back could give."""
        return self._reason(node, ctx.opset_of(node)) or self._blocked.get(id(node))

    # -- compile
    def compile(self, graph: ir.Graph, group: Group, ctx: CompileContext) -> Step:
        """A Step running the group's nodes with one submit per run."""
        part = _Partition(self, group, ctx)
        return Step(self.name, group.node_indices, part.run, part.run_async)


def _host_inputs(node: ir.Node) -> frozenset:
    return OPS[(node.domain, node.op_type)].host_inputs


def _cpu_kernel_in(ctx: CompileContext) -> Any:
    def has(node: ir.Node) -> bool:
        return registry.find(node.domain, node.op_type, ctx.opset_of(node)) is not None
    return has


class _Partition:
    """One compiled group of nodes; `run(env)` is the Step's body."""

    def __init__(self, provider: WebGpuExecutionProvider, group: Group, ctx: CompileContext):
        self.device = provider.device
        self.f16 = provider.f16
        self.nodes = group.nodes
        self.opsets = [ctx.opset_of(n) for n in self.nodes]
        self.specs = [OPS[(n.domain, n.op_type)] for n in self.nodes]
        self.exported = group.exported
        # uploaded once and cached: inputs no feed overrides, and Constant values made here
        self.constants = set(group.constants)
        self.constants.update(o for n in self.nodes if n.op_type == "Constant" for o in n.outputs)
        self.free = group.freed
        self.consts = ConstCache()
        self.dead_after = dead_after(self.nodes, self.exported)
        self.last_stats: Dict[str, int] = {}
        hosted = host_values.plan(self.nodes, _host_inputs, _cpu_kernel_in(ctx), ctx.facts).hosted
        # shape chains run on the host with CPU kernels (host_values): no read-back mid-step
        self.on_host = {k: executor.compile_node(self.nodes[k], ctx.opsets, [], ctx.functions)
                        for k in sorted(hosted)}
        self.run_subgraph = ctx.run_subgraph

    def run(self, env: Dict[str, Any]) -> None:
        rt = Recorder(self.device, self.f16, self.consts)
        local: Dict[str, Any] = {}
        try:
            gpu_names = self._record(rt, env, local)
            kept = self._keep_on_device(rt, local, gpu_names)
            values = rt.read([local[n] for n in gpu_names]) if gpu_names else []
        except OnnxEdgeError:
            raise
        except Exception as e:
            raise self._failure(e) from e
        finally:
            rt.release()
        self._export(env, local, gpu_names, values, kept)

    async def run_async(self, env: Dict[str, Any]) -> None:
        """`run` awaiting the read-back (InferenceSession.run_async; the page's navigator.gpu)."""
        rt = Recorder(self.device, self.f16, self.consts)
        local: Dict[str, Any] = {}
        try:
            gpu_names = self._record(rt, env, local)
            kept = self._keep_on_device(rt, local, gpu_names)
            values = (await rt.read_async([local[n] for n in gpu_names])) if gpu_names else []
        except OnnxEdgeError:
            raise
        except Exception as e:
            raise self._failure(e) from e
        finally:
            rt.release()
        self._export(env, local, gpu_names, values, kept)

    def _record(self, rt: Recorder, env: Dict[str, Any], local: Dict[str, Any]) -> List[str]:
        """Record every node into rt; the exported values that live on the device."""
        for k, (node, spec, opset, dead) in enumerate(zip(self.nodes, self.specs, self.opsets,
                                                          self.dead_after)):
            if k in self.on_host:
                self._run_on_host(rt, self.on_host[k], env, local)
            else:
                self._run_node(rt, node, spec, opset, env, local)
            rt.drop(local, dead)
        self.last_stats = rt.stats
        return [n for n in self.exported if is_gpu(local.get(n))]

    def _failure(self, e: Exception) -> EPFail:
        return EPFail("WebGpuExecutionProvider: running nodes %s failed: %s: %s" % (
            [n.name or n.op_type for n in self.nodes][:5], type(e).__name__, e))

    def _keep_on_device(self, rt: Recorder, local: Dict[str, Any],
                        gpu_names: List[str]) -> Dict[str, WebGpuValue]:
        """The outputs this run keeps on the device (IOBinding bound them to 'webgpu'), taken
        out of `gpu_names` (they are not read back); their buffers outlive the run."""
        if not device_values.any_wanted():
            return {}
        kept = {name: WebGpuValue(self.device, rt.keep(local[name]), self.f16)
                for name in gpu_names if device_values.wanted_device(name) == DEVICE_TYPE}
        gpu_names[:] = [n for n in gpu_names if n not in kept]
        return kept

    def _export(self, env: Dict[str, Any], local: Dict[str, Any], gpu_names: List[str],
                values: List[np.ndarray], kept: Dict[str, WebGpuValue]) -> None:
        for name in self.exported:
            if not is_gpu(local[name]):
                env[name] = local[name]
        for name, value in zip(gpu_names, values):
            env[name] = value
        env.update(kept)
        for name in self.free:
            env.pop(name, None)

    def _run_on_host(self, rt: Recorder, compiled: Any, env: Dict[str, Any],
                     local: Dict[str, Any]) -> None:
        """A hosted node (host_values): its CPU kernel on host values."""
        node = compiled.node
        scratch = {name: rt.host(device_values.host_copy(
            local[name] if name in local else env[name])) for name in node.inputs if name}
        executor.run_compiled([compiled], scratch, self.run_subgraph)
        for name in node.outputs:
            if name:
                local[name] = scratch[name]

    def _run_node(self, rt: Recorder, node: ir.Node, spec: Any, opset: int,
                  env: Dict[str, Any], local: Dict[str, Any]) -> None:
        ins: List[Any] = []
        for j, name in enumerate(node.inputs):
            if not name:
                ins.append(None)
                continue
            value = local[name] if name in local else env[name]
            if isinstance(value, WebGpuValue):
                # kept on the device by an earlier run: read in place when it is ours
                value = value.tensor if value.usable_by(self.device, self.f16) else value.numpy()
            if j in spec.host_inputs:
                value = rt.host(value)
            elif not spec.raw and not is_gpu(value):
                value = rt.gpu(value, name if name in self.constants else None)
            ins.append(value)
        try:
            outs = spec.fn(rt, node, ins, opset)
        except OnnxEdgeError:
            raise
        except Exception as e:
            raise RuntimeException("%s at opset %d failed on WebGPU: %s: %s" % (
                node.describe(), opset, type(e).__name__, e)) from e
        for name, value in zip(node.outputs, outs):
            if name:
                local[name] = value


__all__ = ["WebGpuExecutionProvider", "GpuTensor"]
