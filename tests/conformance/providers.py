"""The execution providers the node suite runs on, and how one case runs on each.

CPUExecutionProvider runs every case. Every other provider P runs the cases of the ops its
op-support table lists (`onnxedge.providers.support`; `*_expanded` function bodies left out), each in a session with providers
[P, CPU]: a case is *claimed* when P runs at least one of its nodes, and *passes* when that session
gives the suite's expected outputs. A case P does not claim is not run (the CPU run covers it).
The bridges (Core ML, NNAPI) fix weights and shapes at translation: a case they pass over because
an input is fed at run time runs again with every input after the first frozen into an
initializer (data set 0's value), as a deployed model would hold its weights.

Where a provider runs here:

- WebGpuExecutionProvider: wgpu-py natively (lavapipe on machines without a GPU);
- X64ExecutionProvider / NeonExecutionProvider (the C engine of this machine): the host build of the C kernels (`edge/neon/lib/<arch>/`);
- WasmSimdExecutionProvider: the same host build standing in for the page's wasm module
  (`tests/unit/wasm_host_kernels.py`: the provider's whole path, over a numpy "wasm memory");
- CoreMLExecutionProvider, NnapiExecutionProvider: reference mode (the bridge's numpy
  interpreter), so no device is needed.
"""
from __future__ import annotations

import gc
import importlib
import importlib.util
import os
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from . import cases as node_cases

CPU = "CPUExecutionProvider"
WEBGPU = "WebGpuExecutionProvider"
try:
    from onnxedge.edge.neon.provider import engine_name
    NEON = engine_name() or "X64ExecutionProvider"   # the C engine on this machine
except ImportError:   # no ctypes
    NEON = "X64ExecutionProvider"
WASM = "WasmSimdExecutionProvider"
COREML = "CoreMLExecutionProvider"
NNAPI = "NnapiExecutionProvider"
PROVIDERS = (CPU, WEBGPU, NEON, WASM, COREML, NNAPI)
BRIDGES = (COREML, NNAPI)
WHERE = {CPU: "numpy kernels", WEBGPU: "wgpu-py natively (lavapipe without a GPU)",
         NEON: "host build of the C kernels", WASM: "host build standing in for the wasm module",
         COREML: "reference mode (numpy MIL interpreter)",
         NNAPI: "reference mode (numpy NNAPI interpreter)"}
FIXED_WEIGHTS = (WASM, COREML, NNAPI)   # weights / shapes fixed when compiled: get the frozen retry

HERE = os.path.dirname(os.path.abspath(__file__))
WASM_HOST_KERNELS = os.path.join(os.path.dirname(HERE), "unit", "wasm_host_kernels.py")
WASM_HOST_MEGABYTES = 64      # the stand-in "wasm memory" of one case's session

OpKey = Tuple[str, str]      # (domain, op type); "" is ai.onnx


class Unavailable(RuntimeError):
    """The provider cannot run here (the message says why)."""


def lacks_outside_package(e: ImportError) -> bool:
    """True when an import failed for want of a package outside onnxedge (not a broken build)."""
    name = (getattr(e, "name", None) or "").split(".")[0]
    return isinstance(e, ModuleNotFoundError) and name not in ("", "onnxedge")


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def table_ops(provider: str) -> Optional[FrozenSet[OpKey]]:
    """(domain, op) of every record of the provider's op-support table (None for CPU: every op).

    Raises ImportError where the provider's module does not import here.
    """
    if provider == CPU:
        return None
    from onnxedge.providers.support import PROVIDER_TABLES
    where = {one.strip(): loc for _, names, loc in PROVIDER_TABLES for one in names.split("/")}.get(provider)
    if where is None:
        raise ValueError("unknown provider %r (expected one of %s)" % (provider, ", ".join(PROVIDERS)))
    module, attr = where.split(":")
    table = getattr(importlib.import_module(module), attr)()
    return frozenset((_domain(d), op) for d, op in table.keys())


def candidates(provider: str, infos: Sequence[node_cases.CaseInfo]) -> List[node_cases.CaseInfo]:
    """The cases the provider runs: every case on CPU, else the non-expanded cases of its ops."""
    ops = table_ops(provider)
    if ops is None:
        return list(infos)
    return [i for i in infos if (_domain(i.domain), i.op_type) in ops
            and not i.name.endswith("_expanded")]


def _load_host_kernels() -> Any:
    spec = importlib.util.spec_from_file_location("wasm_host_kernels", WASM_HOST_KERNELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HostKernels


class Target:
    """One provider set up to run cases here: `options()` gives a session's provider options.

    Set-up (`unavailable()`) may change process state: the wasm stand-in module is installed,
    and the bridges' TRIVIAL_OPS are emptied so that a case's lone Reshape or Concat is claimed
    and its translation tested (a deployment leaves such runs to the CPU as not worth a call).
    The heap is frozen for Core ML (see _freeze_heap). `close()` undoes it all.
    """

    def __init__(self, name: str):
        self.name = name
        self._host_kernels: Any = None
        self._undo: List[Any] = []

    def unavailable(self) -> Optional[str]:
        """Why the provider cannot run here (None: it can). A package this machine lacks
        (coremltools, wgpu) is a reason; any other error (a broken onnxedge import) raises."""
        try:
            return self._check()
        except ImportError as e:
            if not lacks_outside_package(e):
                raise
            return "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0])

    def _check(self) -> Optional[str]:
        if self.name == CPU:
            return None
        if self.name == WEBGPU:
            from onnxedge.web.webgpu.provider import WebGpuExecutionProvider
            return None if WebGpuExecutionProvider.is_available() else (
                "no WebGPU adapter (`make setup` installs wgpu and Mesa's lavapipe)")
        if self.name in (NEON, WASM):
            from onnxedge.edge.neon import library
            if not os.path.isfile(library.library_path()):
                return ("no host build of the C kernels at %s (`make setup` builds it: "
                        "edge/kernels/build.py)" % library.library_path())
            library.load()
            if self.name == WASM:
                self._install_wasm_stand_in()
            return None
        if self.name == COREML:
            from onnxedge.edge.coreml.translate import coremltools
            coremltools()      # the MIL builder: coremltools, Python >= 3.10
            from onnxedge.edge.coreml.provider import CoreMLExecutionProvider
            self._claim_trivial_runs(CoreMLExecutionProvider)
            self._freeze_heap()
            return None
        if self.name == NNAPI:
            from onnxedge.edge.nnapi.provider import NnapiExecutionProvider
            self._claim_trivial_runs(NnapiExecutionProvider)
            return None
        raise ValueError("unknown provider %r" % self.name)

    def _install_wasm_stand_in(self) -> None:
        from onnxedge.web.wasm import transport
        self._host_kernels = _load_host_kernels()
        before = transport.current()
        transport.install(self._host_kernels(megabytes=WASM_HOST_MEGABYTES))
        self._undo.append(lambda: transport.install(before))

    def _claim_trivial_runs(self, cls: Any) -> None:
        before = cls.TRIVIAL_OPS
        cls.TRIVIAL_OPS = frozenset()
        self._undo.append(lambda: setattr(cls, "TRIVIAL_OPS", before))

    def _freeze_heap(self) -> None:
        """coremltools' convert runs gc.collect() on every call: with the heap of a test session
        (coremltools and torch imported) that was half of each translation. Objects alive now
        are left out of collections until close()."""
        gc.freeze()
        self._undo.append(gc.unfreeze)

    def close(self) -> None:
        """Undo the set-up's changes to process state."""
        while self._undo:
            self._undo.pop()()

    def options(self) -> Dict[str, Any]:
        """The provider options of one case's session."""
        if self.name == WASM:
            return {"kernels": self._host_kernels(megabytes=WASM_HOST_MEGABYTES)}
        if self.name == COREML:
            return {"reference": True, "minimum_deployment_target": "iOS18"}
        if self.name == NNAPI:
            return {"reference": True}
        return {}

    def session(self, model: bytes) -> Any:
        """A session on [this provider, CPU] (CPU alone for the CPU provider)."""
        import onnxedge
        if self.name == CPU:
            return onnxedge.InferenceSession(model, providers=[CPU])
        return onnxedge.InferenceSession(model, providers=[(self.name, self.options()), CPU])


class Placement(NamedTuple):
    """Where a case's nodes landed: claimed by the provider or not, and why not."""

    claimed: bool
    reason: str


def placement(sess: Any, provider: str, op_type: str) -> Placement:
    """Whether `provider` runs a node of the session; else the reason it gave for the op's node."""
    report = sess.partition_report()
    if any(r["provider"] == provider for r in report):
        return Placement(True, "")
    reasons = [r["fallback_reasons"].get(provider, "") for r in report if r["op_type"] == op_type]
    reasons = [r for r in reasons if r] or [r["fallback_reasons"].get(provider, "") for r in report]
    return Placement(False, next((r for r in reasons if r), "no node of the case"))


def frozen(case: node_cases.Case) -> Optional[node_cases.Case]:
    """The case with its inputs after the first made initializers (data set 0's values), or None
    when it has one input or a value that is not a tensor."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    if len(case.input_names) < 2 or not case.data_sets:
        return None
    feeds, want = case.data_sets[0]
    if any(not isinstance(v, np.ndarray) or v.dtype == object for v in feeds[1:]):
        return None
    model = onnx.ModelProto()
    model.ParseFromString(case.model)
    keep = case.input_names[:1]
    inputs = [vi for vi in model.graph.input if vi.name in keep
              or vi.name not in case.input_names]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    model.graph.initializer.extend(numpy_helper.from_array(v, n)
                                   for n, v in zip(case.input_names[1:], feeds[1:]))
    return case._replace(model=model.SerializeToString(), input_names=keep,
                         data_sets=[(feeds[:1], want)])
