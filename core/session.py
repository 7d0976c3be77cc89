"""`InferenceSession` and its options: onnxruntime's Python API over onnxedge's plan."""
from __future__ import annotations

import enum
import importlib
import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import checker, device_values, dtypes, executor, facts, ir, optimizer_stamp, profiling
from .errors import InvalidArgument, InvalidGraph, NoModel, NotImplemented
from .ortvalue import IOBinding, OrtValue
from .budgets import (MAX_TENSOR_BYTES_KEY, RUN_TIMEOUT_MS_KEY, RunLimits, check_run,
                      default_max_tensor_bytes, use_limits)
from .partition import Plan, build_plan
from .providers import discovery
from .providers.base import CompileContext, ExecutionProvider
from .threads import set_blas_threads

log = logging.getLogger("onnxedge")

ModelSource = Union[str, bytes, "os.PathLike[str]", ir.Model]


class GraphOptimizationLevel(enum.IntEnum):
    """Optimization levels, as in onnxruntime."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """Execution modes, as in onnxruntime (onnxedge always runs nodes in order)."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


_SEVERITY = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.CRITICAL}


class SessionOptions:
    """Options of a session, with onnxruntime's names and defaults.

    onnxedge's own config entries (`add_session_config_entry`):
    "session.max_tensor_bytes": the most bytes one tensor that a kernel sizes from input values
    (ConstantOfShape, Expand, Tile, Range, Pad, Resize, OneHot, Loop scan outputs, ...) may take;
    larger requests raise RuntimeException before allocating. Default: half the physical memory.
    "session.run_timeout_ms": a time limit for each `run` (0: none; RunOptions.run_timeout_ms
    overrides it per run); a run past it raises RuntimeException.
    "session.cpu_engine": "1" (the default) puts onnxedge's C engine (the native kernel library)
    in front of the CPU provider wherever it is available, for the nodes it claims (listed by
    `partition_report()`, not by `get_providers()`); "0" keeps the numpy kernels alone.
    """

    def __init__(self) -> None:
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.optimized_model_filepath = ""
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.enable_mem_pattern = True
        self.enable_cpu_mem_arena = True
        self._config: Dict[str, str] = {}
        self._free_dims: Dict[str, int] = {}
        self._initializers: Dict[str, Any] = {}

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix the symbolic dimension `dim_name` of the model's inputs to `dim_value`."""
        if not isinstance(dim_value, (int, np.integer)) or isinstance(dim_value, bool) \
                or int(dim_value) < 0:
            raise InvalidArgument("add_free_dimension_override_by_name(%r, %r): the value must be "
                                  "an integer >= 0" % (dim_name, dim_value))
        self._free_dims[str(dim_name)] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Dimension denotations are not kept by onnxedge's IR: NotImplemented."""
        raise NotImplemented("add_free_dimension_override_by_denotation(%r): onnxedge does not "
                             "keep dimension denotations; use add_free_dimension_override_by_name"
                             % (dim_denotation,))

    def add_initializer(self, name: str, ortvalue: Any) -> None:
        """Replace the model's initializer `name` with this value (an OrtValue or numpy array)
        of the same type and shape, before the session optimizes the graph."""
        value = ortvalue.numpy() if isinstance(ortvalue, OrtValue) else ortvalue
        if not isinstance(value, np.ndarray):
            raise InvalidArgument("add_initializer(%r): expected an OrtValue or numpy array, got "
                                  "a %s" % (name, type(ortvalue).__name__))
        self._initializers[str(name)] = value

    def register_custom_ops_library(self, library_path: str) -> None:
        """onnxedge loads no native op libraries: register Python kernels with
        `onnxedge.custom_op` instead."""
        raise NotImplemented("register_custom_ops_library(%r): onnxedge runs no native custom-op "
                             "libraries; register each op as a Python function with "
                             "@onnxedge.custom_op(op_type, domain) (see the README)" % (library_path,))

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Set a free-form configuration entry (kept for API compatibility)."""
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        """A configuration entry set before; InvalidArgument when absent."""
        try:
            return self._config[key]
        except KeyError:
            raise InvalidArgument("session config entry %r is not set" % key) from None


class RunOptions:
    """Per-run options, as in onnxruntime. Setting `terminate` to True from another thread stops
    a run in progress (between nodes and Loop/Scan iterations) with RuntimeException.
    `run_timeout_ms` (onnxedge's own; 0: the session's "session.run_timeout_ms") limits the run's
    time the same way."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self.run_timeout_ms = 0


class NodeArg:
    """Name, shape and type of a model input or output (onnxruntime's NodeArg)."""

    def __init__(self, name: str, type_info: Optional[ir.TypeInfo]):
        self.name = name
        self.type = type_info.ort_string() if type_info is not None else "unknown"
        shape = type_info.shape if type_info is not None and type_info.kind == "tensor" else None
        # as onnxruntime: a dim the file leaves unknown (or writes as -1) is None
        self.shape: List[Any] = [None if d is None or (isinstance(d, int) and d < 0) else d
                                 for d in shape] if shape is not None else []

    def __repr__(self) -> str:
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


class ModelMetadata:
    """Metadata of the model (onnxruntime's ModelMetadata)."""

    def __init__(self, model: ir.Model):
        self.producer_name = model.producer_name
        self.graph_name = model.graph.name
        self.domain = model.domain
        self.description = model.doc_string
        self.graph_description = model.graph.doc_string
        self.version = model.model_version
        self.custom_metadata_map = dict(model.metadata_props)


def load(source: ModelSource) -> ir.Model:
    """Load a model from a path, bytes or an IR Model (`.oxe` or `.onnx`, told apart by content)."""
    if isinstance(source, ir.Model):
        return source
    if source is None:
        raise NoModel("no model given: pass a path, bytes or an onnxedge.ir.Model")
    from . import model_io
    return model_io.load(source)


CPU_ENGINE_KEY = "session.cpu_engine"


def _config_flag(opts: "SessionOptions", key: str, default: bool) -> bool:
    """A "0"/"1" session config entry (InvalidArgument for anything else)."""
    value = opts._config.get(key)
    if value is None:
        return default
    if value not in ("0", "1"):
        raise InvalidArgument("session config entry %r must be '0' or '1', got %r" % (key, value))
    return value == "1"


def _with_cpu_engine(requested: List[Tuple[str, Dict[str, Any]]]
                     ) -> List[Tuple[str, Dict[str, Any]]]:
    """`requested` with the C engine's provider just before the CPU provider, when the machine
    has one and the list does not name it already (the default path of #16)."""
    engine = discovery.cpu_engine()
    names = [name for name, _ in requested]
    if engine is None or engine in names:
        return requested
    at = names.index("CPUExecutionProvider") if "CPUExecutionProvider" in names else len(names)
    return requested[:at] + [(engine, {})] + requested[at:]


def _keeps_qdq(providers: Optional[Sequence[Any]],
               provider_options: Optional[Sequence[Dict[str, Any]]]) -> bool:
    """True when a requested provider takes QDQ groups itself (keeps_qdq_groups: NNAPI, CoreML)."""
    if not providers:
        return False
    classes = discovery.provider_classes()
    return any(getattr(classes.get(name), "keeps_qdq_groups", False)
               for name, _ in _normalize_providers(providers, provider_options))


def _normalize_providers(providers: Optional[Sequence[Any]],
                         provider_options: Optional[Sequence[Dict[str, Any]]]) -> List[Tuple[str, Dict[str, Any]]]:
    if not providers:
        return [("CPUExecutionProvider", {})]
    if isinstance(providers, str):
        providers = [providers]
    if provider_options is not None and len(provider_options) != len(providers):
        raise InvalidArgument("provider_options has %d entries, providers has %d: they must match"
                              % (len(provider_options), len(providers)))
    out = []
    for i, p in enumerate(providers):
        if isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str):
            name, opts = discovery.canonical_name(p[0]), dict(p[1] or {})
        elif isinstance(p, str):
            name, opts = discovery.canonical_name(p), {}
        else:
            raise InvalidArgument("providers[%d] is %r: expected a provider name or a "
                                  "(name, options dict) tuple" % (i, p))
        if provider_options is not None:
            opts.update(provider_options[i] or {})
        out.append((name, opts))
    return out


def _fast_checks(types: Dict[str, Optional[ir.TypeInfo]]) -> Dict[str, Tuple[Any, int, tuple]]:
    """For each plain tensor input with a numpy dtype and a known rank: (dtype, rank, the fixed
    (axis, dim) pairs): what a feed must match to skip `_check_value`'s general path."""
    out: Dict[str, Tuple[Any, int, tuple]] = {}
    for name, t in types.items():
        if t is None or t.kind != "tensor" or not t.elem_type or t.shape is None:
            continue
        try:
            dtype = dtypes.to_numpy(t.elem_type)
        except Exception:
            continue
        if dtype.kind in "OUS":
            continue
        fixed = tuple((a, d) for a, d in enumerate(t.shape) if isinstance(d, int) and d > 0)
        out[name] = (dtype, len(t.shape), fixed)
    return out


def _type_matches(value: Any, t: Optional[ir.TypeInfo]) -> Optional[str]:
    """None when value fits type t, else a description of what was given."""
    if t is None:
        return None
    if t.kind == "optional":
        return None if value is None else _type_matches(value, t.elem)
    if t.kind == "sequence":
        if not isinstance(value, list):
            return "a %s" % type(value).__name__
        for v in value:
            bad = _type_matches(v, t.elem)
            if bad:
                return "a sequence holding %s" % bad
        return None
    if t.kind == "map":
        return None if isinstance(value, dict) else "a %s" % type(value).__name__
    if not isinstance(value, (np.ndarray, device_values.DeviceValue)):
        return "a %s" % type(value).__name__
    if t.elem_type:
        try:
            got = dtypes.from_numpy(value.dtype)
        except KeyError:
            return "tensor of numpy dtype %s" % value.dtype
        if got != t.elem_type:
            return dtypes.ort_type_string(got)
    return None


class InferenceSession:
    """Runs an ONNX (or .oxe) model; the same API as `onnxruntime.InferenceSession`."""

    def __init__(self, path_or_bytes: ModelSource, sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None,
                 provider_options: Optional[Sequence[Dict[str, Any]]] = None, **kwargs: Any):
        self._sess_options = sess_options or SessionOptions()
        opts = self._sess_options
        self._max_tensor_bytes = _config_number(opts, MAX_TENSOR_BYTES_KEY,
                                                default_max_tensor_bytes(), 1)
        self._run_timeout_ms = _config_number(opts, RUN_TIMEOUT_MS_KEY, 0, 0)
        log.setLevel(_SEVERITY.get(int(opts.log_severity_level), logging.WARNING))
        if opts.intra_op_num_threads and opts.intra_op_num_threads > 0:
            set_blas_threads(int(opts.intra_op_num_threads))
        self._profiler = profiling.Profiler(opts.profile_file_prefix) \
            if opts.enable_profiling else None
        started = profiling.now_us()
        self._model = load(path_or_bytes)
        self._model_path = path_or_bytes if isinstance(path_or_bytes, (str, os.PathLike)) else None
        checker.check_graph(self._model.graph)
        self._metadata = ModelMetadata(self._model)   # the file's, not the optimizer's stamp
        self._loaded_node_count = len(self._model.graph.nodes)
        _override_free_dims(self._model.graph, opts._free_dims)
        _replace_initializers(self._model.graph, opts._initializers)
        self._optimize(opts, _keeps_qdq(providers, provider_options))
        graph = self._model.graph
        self._functions = {(f.domain, f.name): f for f in self._model.functions}
        opsets = dict(self._model.opset_imports)
        executor.check_supported(graph.nodes, opsets, self._functions)
        self._runner_for_subgraphs = executor.GraphRunner(ir.Graph(), opsets, self._functions)
        outputs = [o.name for o in graph.outputs]
        free = executor.last_uses(graph.nodes, outputs)
        # facts (types and shapes) are worked out when a provider other than the CPU's is asked
        # to claim nodes (set_providers): the numpy kernels need none
        self._ctx = CompileContext(opsets, {i: f for i, f in enumerate(free)}, self._functions,
                                   self._runner_for_subgraphs.run_child)
        self._facts_known = False
        self._fallback = True
        self.set_providers(providers, provider_options)
        self._inputs = [NodeArg(v.name, v.type) for v in graph.inputs if v.name not in graph.initializers]
        self._overridable = [NodeArg(v.name, v.type) for v in graph.inputs if v.name in graph.initializers]
        self._outputs = [NodeArg(v.name, v.type) for v in graph.outputs]
        self._input_types = {v.name: v.type for v in graph.inputs}
        self._fast_checks = _fast_checks(self._input_types)
        self._required = set(self._required_inputs(graph))
        self._initializers = {}
        for name, value in graph.initializers.items():
            if isinstance(value, np.ndarray):
                value = value.view()
                value.flags.writeable = False   # kernels must never write into their inputs
            self._initializers[name] = value
        self._output_names = outputs
        self._plain_limits = RunLimits(self._max_tensor_bytes, 0, None)
        if self._profiler is not None:
            self._profiler.add("Session", "session_initialization", started, profiling.now_us())

    # ------------------------------------------------------------------ construction helpers

    def _optimize(self, opts: SessionOptions, keep_qdq: bool = False) -> None:
        """Rewrite the model at `graph_optimization_level` (ORT_DISABLE_ALL keeps it as loaded;
        `keep_qdq`: leave QDQ groups unfused, for providers that take them) and write the result
        when optimized_model_filepath is set (`.oxe` or `.onnx`)."""
        level = int(opts.graph_optimization_level)
        if level not in {int(x) for x in GraphOptimizationLevel}:
            raise InvalidArgument("graph_optimization_level %r is not one of %s"
                                  % (level, [x.name for x in GraphOptimizationLevel]))
        if level != int(GraphOptimizationLevel.ORT_DISABLE_ALL) \
                and not optimizer_stamp.already_optimized(self._model, level):
            try:
                optimizer = importlib.import_module(__package__ + ".optimizer")
            except ModuleNotFoundError as e:
                if e.name != __package__ + ".optimizer":
                    raise
                log.warning("model %r is not optimized at level %s and this reduced onnxedge build "
                            "has no optimizer: it runs as loaded (save it optimized with `onnxedge "
                            "convert --optimize` or `onnxedge reduce`)", self._model.graph.name,
                            optimizer_stamp.level_name(level))
            else:
                self._model = optimizer.optimize(self._model, level, keep_qdq=keep_qdq)
        if opts.optimized_model_filepath:
            from . import model_io
            model_io.save(self._model, opts.optimized_model_filepath)

    @staticmethod
    def _create_providers(requested: List[Tuple[str, Dict[str, Any]]],
                          intra_op_num_threads: int = 0) -> List[ExecutionProvider]:
        """Providers in priority order, CPU last; a provider that declares the option
        `intra_op_num_threads` gets the session's value unless its own options set it.
        A provider not available here is skipped, except when its options say
        `{"reference": True}`: a bridge provider (CoreML, NNAPI) then runs its subgraphs through
        its numpy reference interpreter, so it works off-device (tests, partition reports)."""
        classes = discovery.provider_classes()
        out: List[ExecutionProvider] = []
        for name, opts in requested:
            if name not in classes:
                log.warning("execution provider %r is not in this build (it knows %s): skipped, "
                            "as onnxruntime skips providers it does not have", name, sorted(classes))
                continue
            if any(p.name == name for p in out):
                continue
            if not classes[name].is_available() and not opts.get("reference"):
                log.warning("%s is not available on this machine; falling back to the others", name)
                continue
            if intra_op_num_threads > 0 and "intra_op_num_threads" in getattr(
                    classes[name], "OPTIONS", ()):
                opts = dict(opts)
                opts.setdefault("intra_op_num_threads", intra_op_num_threads)
            out.append(discovery.create(name, opts))
        if not any(p.name == "CPUExecutionProvider" for p in out):
            out.append(discovery.create("CPUExecutionProvider", {}))
        return out

    @staticmethod
    def _required_inputs(graph: ir.Graph) -> List[str]:
        return [v.name for v in graph.inputs
                if v.name not in graph.initializers
                and not (v.type is not None and v.type.kind == "optional")]

    # ---------------------------------------------------------------------------- the API

    def get_inputs(self) -> List[NodeArg]:
        """The inputs a caller feeds (initializers excluded)."""
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs."""
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """Initializers that are also graph inputs, which a feed may replace."""
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata, as in the file it was loaded from."""
        return self._metadata

    def set_providers(self, providers: Optional[Sequence[Any]] = None,
                      provider_options: Optional[Sequence[Dict[str, Any]]] = None) -> None:
        """Choose the providers again (as in the constructor) and re-partition the model."""
        requested = _normalize_providers(providers, provider_options)
        named = [name for name, _ in requested]
        if _config_flag(self._sess_options, CPU_ENGINE_KEY, True):
            requested = _with_cpu_engine(requested)
        # the engine the session added itself runs nodes but is not one the caller registered
        self._implicit = {name for name, _ in requested} - set(named) - {"CPUExecutionProvider"}
        self._providers = self._create_providers(requested,
                                                 int(self._sess_options.intra_op_num_threads or 0))
        if not self._facts_known and any(p.name != "CPUExecutionProvider" for p in self._providers):
            self._ctx.facts = facts.infer(self._model.graph, self._ctx.opsets)
            self._facts_known = True
        self._use_providers_in_subgraphs()
        self._plan = build_plan(self._model.graph, self._providers, self._ctx)

    def _use_providers_in_subgraphs(self) -> None:
        """If/Loop/Scan bodies run partitioned over the session's host providers (the C engine
        and the CPU: subgraph_plans), with the main graph's constant initializers as theirs."""
        hosts = [p for p in self._providers
                 if p.name == "CPUExecutionProvider" or getattr(p, "cpu_engine", False)]
        if len(hosts) < 2:
            return
        from . import subgraph_plans   # not in CPU-only reduced builds (RUNTIME_CPU_ONLY_DROPS)
        graph = self._model.graph
        overridable = {v.name for v in graph.inputs}
        inits = graph.initializers

        def constants(name: str) -> Any:
            return None if name in overridable else inits.get(name)
        self._runner_for_subgraphs = subgraph_plans.PlannedRunner(
            ir.Graph(), self._ctx.opsets, self._functions, hosts, constants)
        self._ctx.run_subgraph = self._runner_for_subgraphs.run_child

    def disable_fallback(self) -> None:
        """onnxruntime's switch for retrying a failed run on the CPU; onnxedge partitions ahead
        of time (what a provider cannot run is already on the CPU), so the flag is only kept."""
        self._fallback = False

    def enable_fallback(self) -> None:
        """See `disable_fallback`."""
        self._fallback = True

    def end_profiling(self) -> str:
        """Write the profile of the runs so far (onnxruntime's Chrome-trace JSON) and stop
        profiling; returns the file's path ('' when profiling is off)."""
        if self._profiler is None:
            return ""
        path = self._profiler.write(".")
        self._profiler = None
        return path

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds of the profiler's clock (0 when off)."""
        return int(self._profiler.origin * 1000) if self._profiler is not None else 0

    def io_binding(self) -> IOBinding:
        """An IOBinding for `run_with_iobinding`."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: Optional[RunOptions] = None) -> None:
        """Run with the inputs and outputs bound in `iobinding` (outputs: all when none bound);
        results are read with `iobinding.get_outputs()` / `copy_outputs_to_cpu()`."""
        names = list(iobinding._outputs) or list(self._output_names)
        with device_values.keep_on_device(iobinding.output_devices()):
            outs = self.run(names, dict(iobinding._inputs), run_options)
        iobinding.store_outputs(names, outs)

    def run_with_ort_values(self, output_names: Optional[Sequence[str]],
                            input_dict_ort_values: Dict[str, Any],
                            run_options: Optional[RunOptions] = None) -> List[OrtValue]:
        """`run` taking and giving OrtValues."""
        feeds = {name: v.value if isinstance(v, OrtValue) else v
                 for name, v in input_dict_ort_values.items()}
        return [OrtValue(v) for v in self.run(output_names, feeds, run_options)]

    def get_providers(self) -> List[str]:
        """Names of the providers registered for this session, in priority order (as
        onnxruntime: the ones asked for that exist here, and CPU; the C engine a session adds
        in front of the CPU provider is in `providers` and `partition_report()`)."""
        return [p.name for p in self._providers if p.name not in self._implicit]

    def get_provider_options(self) -> Dict[str, Dict[str, Any]]:
        """Each registered provider's options."""
        return {p.name: dict(p.options) for p in self._providers if p.name not in self._implicit}

    def get_session_options(self) -> SessionOptions:
        """The SessionOptions this session was created with."""
        return self._sess_options

    def partition_report(self) -> List[Dict[str, Any]]:
        """Which provider runs each node, and why earlier providers passed it over."""
        nodes = self._model.graph.nodes
        return [{"node": nodes[a.node_index].name or nodes[a.node_index].outputs[0],
                 "op_type": nodes[a.node_index].op_type,
                 "domain": nodes[a.node_index].domain or "ai.onnx",
                 "provider": a.provider, "fallback_reasons": dict(a.fallback_reasons)}
                for a in self._plan.assignments]

    @property
    def model(self) -> ir.Model:
        """The IR of the loaded model."""
        return self._model

    @property
    def loaded_node_count(self) -> int:
        """How many nodes the model's main graph had as loaded, before optimization."""
        return self._loaded_node_count

    @property
    def providers(self) -> Tuple[ExecutionProvider, ...]:
        """The provider instances of this session, in priority order (read-only: a tuple)."""
        return tuple(self._providers)

    @property
    def plan(self) -> Plan:
        """The partition plan: the ordered steps and which provider runs each node."""
        return self._plan

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Optional[RunOptions] = None) -> List[Any]:
        """Run the model; returns the requested outputs (all when output_names is None/empty)."""
        if self._profiler is not None:
            return self._run_profiled(output_names, input_feed, run_options)
        names, env, moves = self._start_run(output_names, input_feed, run_options)
        limits = self._run_limits(run_options)
        watch = limits.deadline is not None or limits.run_options is not None
        with use_limits(limits):
            for step in self._plan.steps:
                if watch:
                    limits.check()
                if moves:
                    device_values.to_host_for(step.device_type, env, step.inputs)
                step.run(env)
        return self._collect(env, names)

    def _run_profiled(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
                      run_options: Optional[RunOptions]) -> List[Any]:
        """`run` recording a Session event for the run and Node events for its nodes (a step of
        a provider other than the CPU's: one event for its nodes)."""
        prof = self._profiler
        start = profiling.now_us()
        names, env, moves = self._start_run(output_names, input_feed, run_options)
        nodes = self._model.graph.nodes
        with use_limits(self._run_limits(run_options)), profiling.active(prof):
            for step in self._plan.steps:
                check_run()
                if moves:
                    device_values.to_host_for(step.device_type, env, step.inputs)
                t0 = profiling.now_us()
                step.run(env)
                if step.provider != "CPUExecutionProvider" and not step.profiles_nodes:
                    prof.step([nodes[i] for i in step.node_indices], step.provider, t0,
                              profiling.now_us())
        out = self._collect(env, names)
        prof.add("Session", "model_run", start, profiling.now_us())
        return out

    @property
    def needs_run_async(self) -> bool:
        """True when a step reads back asynchronously (WebGPU in a browser page): `run` cannot
        finish such a run there, `run_async` can. False: `run` works and is the cheaper call."""
        return any(step.run_async is not None for step in self._plan.steps)

    async def run_async(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
                        run_options: Optional[RunOptions] = None) -> List[Any]:
        """`run` as a coroutine: awaits the steps whose device reads back asynchronously (WebGPU
        in a browser page, where blocking on the GPU is impossible); the same results as `run`."""
        names, env, moves = self._start_run(output_names, input_feed, run_options)
        with use_limits(self._run_limits(run_options)):
            for step in self._plan.steps:
                check_run()
                if moves:
                    await device_values.to_host_for_async(step.device_type, env, step.inputs)
                if step.run_async is not None:
                    await step.run_async(env)
                else:
                    step.run(env)
        if moves:
            await device_values.to_host_for_async(device_values.HOST, env, [
                n for n in names if not self._kept_on_device(n, env.get(n))])
        return self._collect(env, names)

    @staticmethod
    def _kept_on_device(name: str, value: Any) -> bool:
        return (device_values.is_device_value(value)
                and device_values.wanted_device(name) == value.device_type)

    def _run_limits(self, run_options: Optional[RunOptions]) -> RunLimits:
        """The budgets of one run: the session's tensor budget, the run's (or else the
        session's) time limit and the RunOptions whose `terminate` flag stops it (without
        RunOptions and time limit: the session's one RunLimits, which checks nothing)."""
        timeout = self._run_timeout_ms
        if run_options is None and not timeout:
            return self._plain_limits
        if run_options is not None:
            own = getattr(run_options, "run_timeout_ms", 0) or 0
            if not isinstance(own, (int, float)) or isinstance(own, bool) or own < 0 \
                    or own != own:
                raise InvalidArgument("run_options.run_timeout_ms must be a number >= 0 "
                                      "(0: no limit of its own), got %r" % (own,))
            if own > 0:
                timeout = own
        return RunLimits(self._max_tensor_bytes, timeout, run_options)

    def _start_run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
                   run_options: Optional[RunOptions]) -> Tuple[List[str], Dict[str, Any], bool]:
        """The output names, the run's env (initializers and checked feeds) and whether the run
        sees device values (fed, or outputs kept on a device): steps then get the ones their
        provider cannot take read back at their edge."""
        names = self._output_names if not output_names else self._check_output_names(output_names)
        if run_options is not None and run_options.terminate:
            raise InvalidArgument("run_options.terminate is set: the run was cancelled")
        env = dict(self._initializers)
        fed_device = self._check_feeds(input_feed, env)
        return names, env, fed_device or device_values.any_wanted()

    def _collect(self, env: Dict[str, Any], names: List[str]) -> List[Any]:
        out = []
        for name in names:
            try:
                o = env[name]
            except KeyError as e:
                raise InvalidGraph("output %s was not produced by the model" % e) from None
            if type(o) is np.ndarray:   # the common case, as _own does it
                out.append(o if o.flags.writeable else o.copy())
            elif not device_values.is_device_value(o) or self._kept_on_device(name, o):
                out.append(self._own(o))
            else:
                out.append(o.numpy())
        return out

    def _check_output_names(self, output_names: Sequence[str]) -> List[str]:
        if isinstance(output_names, str):
            raise InvalidArgument("output_names must be a list of names, not the string %r"
                                  % output_names)
        for name in output_names:
            if name not in self._output_names:
                raise InvalidArgument("%r is not an output of this model; its outputs are %s"
                                      % (name, self._output_names))
        return list(output_names)

    def _check_feeds(self, input_feed: Dict[str, Any], env: Dict[str, Any]) -> bool:
        """Check each feed against its declared input and put it in `env` (as a read-only view);
        True when a feed is a device value."""
        if not isinstance(input_feed, dict):
            raise InvalidArgument("input_feed must be a dict of input name -> numpy array, not %s"
                                  % type(input_feed).__name__)
        fast = self._fast_checks
        slow = False
        for name, value in input_feed.items():
            want = fast.get(name)
            # the common case, checked as _check_value would: a plain array of the input's
            # dtype, rank and fixed dims
            if want is not None and type(value) is np.ndarray and value.dtype == want[0]:
                shape = value.shape
                if len(shape) == want[1]:
                    for axis, dim in want[2]:
                        if shape[axis] != dim:
                            break
                    else:
                        value = value.view()
                        value.flags.writeable = False
                        env[name] = value
                        continue
            if name not in self._input_types:
                raise InvalidArgument("%r is not an input of this model; its inputs are %s"
                                      % (name, [a.name for a in self._inputs]))
            env[name] = self._check_value(name, value, self._input_types[name])
            slow = True
        if not self._required <= env.keys():
            missing = [n for n in self._required if n not in env]
            raise InvalidArgument("missing input(s) %s; the model needs %s"
                                  % (sorted(missing), [a.name for a in self._inputs]))
        return slow and any(device_values.is_device_value(v) for v in input_feed.values())

    @staticmethod
    def _check_value(name: str, value: Any, t: Optional[ir.TypeInfo]) -> Any:
        is_tensor = t is None or t.kind == "tensor"
        if is_tensor and device_values.is_device_value(value):
            pass    # a tensor kept on a device (IOBinding): checked like an array, not copied
        elif is_tensor and not isinstance(value, np.ndarray):
            if isinstance(value, (list, tuple, int, float, bool, np.generic)):
                value = np.asarray(value)
            else:
                raise InvalidArgument("input %r: got a %s, expected a numpy array"
                                      % (name, type(value).__name__))
        if isinstance(value, np.ndarray) and value.dtype.kind in "US":
            value = value.astype(object)
        bad = _type_matches(value, t)
        if bad:
            raise InvalidArgument("input %r: got %s, expected %s" % (name, bad, t.ort_string()))
        if is_tensor and t is not None and t.shape is not None:
            if len(value.shape) != len(t.shape):
                raise InvalidArgument("input %r: got rank %d (shape %s), expected rank %d (shape %s)"
                                      % (name, len(value.shape), list(value.shape), len(t.shape),
                                         t.shape))
            for axis, (got, want) in enumerate(zip(value.shape, t.shape)):
                if isinstance(want, int) and want > 0 and got != want:
                    raise InvalidArgument("input %r: dimension %d is %d, the model expects %d "
                                          "(shape %s, got %s)" % (name, axis, got, want, t.shape,
                                                                  list(value.shape)))
        if isinstance(value, np.ndarray):
            value = value.view()
            value.flags.writeable = False
        return value

    @staticmethod
    def _own(value: Any) -> Any:
        """Outputs never alias initializers or the caller's inputs: both enter the run as
        read-only views, and so does anything a kernel returns that still points into them."""
        if isinstance(value, np.ndarray):
            return value.copy() if not value.flags.writeable else value
        if isinstance(value, list):
            return [InferenceSession._own(v) for v in value]
        return value


def _override_free_dims(graph: ir.Graph, dims: Dict[str, int]) -> None:
    """Fix named symbolic dims of the graph's inputs (add_free_dimension_override_by_name)."""
    if not dims:
        return
    seen = set()
    for v in graph.inputs:
        if v.type is None or v.type.kind != "tensor" or v.type.shape is None:
            continue
        for i, d in enumerate(v.type.shape):
            if isinstance(d, str) and d in dims:
                v.type.shape[i] = dims[d]
                seen.add(d)
    unknown = sorted(set(dims) - seen)
    if unknown:
        raise InvalidArgument("add_free_dimension_override_by_name: the model's inputs have no "
                              "symbolic dimension %s" % ", ".join(repr(u) for u in unknown))


def _replace_initializers(graph: ir.Graph, values: Dict[str, Any]) -> None:
    """Put SessionOptions.add_initializer values in place of the graph's initializers."""
    for name, value in values.items():
        old = graph.initializers.get(name)
        if not isinstance(old, np.ndarray):
            raise InvalidArgument("add_initializer(%r): the model has no initializer of that name"
                                  % name)
        if value.dtype != old.dtype or value.shape != old.shape:
            raise InvalidArgument("add_initializer(%r): got %s %s, the model's initializer is "
                                  "%s %s" % (name, value.dtype, list(value.shape), old.dtype,
                                             list(old.shape)))
        graph.initializers[name] = value


def _config_number(opts: SessionOptions, key: str, default: int, minimum: int) -> int:
    """An integer session config entry (`default` when unset); InvalidArgument naming the key
    when it is not an integer >= minimum."""
    text = getattr(opts, "_config", {}).get(key)
    if text is None:
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise InvalidArgument("session config entry %r must be an integer >= %d, got %r"
                              % (key, minimum, text))
    return value


def get_available_providers() -> List[str]:
    """Providers that can run on this machine, in priority order (CPU last)."""
    return discovery.available_providers()


def get_all_providers() -> List[str]:
    """Every provider name this build knows, available here or not."""
    return sorted(discovery.provider_classes())


def get_device() -> str:
    """The default device, as onnxruntime reports it."""
    return "CPU"


__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel",
           "ExecutionMode", "NodeArg", "ModelMetadata", "get_available_providers",
           "get_all_providers", "get_device"]
