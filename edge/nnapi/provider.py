"""NnapiExecutionProvider: hands the subgraphs NNAPI supports to Android's Neural Networks API.

Options (provider_options): `feature_level` (1..8, default 4: the lowest NNAPI feature level
the translation may use; part of the artifact key), `preference` ("fast_single_answer",
"sustained_speed" or "low_power"), plus the bridge options (`reference`, `artifact_dir`,
`save_dir`, `input_shapes`, `dims`; see onnxedge.edge.bridge). Available only on Android where
libneuralnetworks.so loads; elsewhere `{"reference": True}` runs the translated models in the
numpy reference interpreter. The translator (translate.py) is imported only when a subgraph has
no pre-translated artifact, so a device build may leave it out.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, List, Optional

import numpy as np

from onnxedge import ir
from onnxedge.errors import InvalidArgument
from onnxedge.providers.base import CompileContext

from ..bridge import Artifact, BridgeProvider, Runner, Shapes, runs
from . import codes, serialize
from .model import device_inputs, host_outputs

MODEL_FILE = "model.nnapi"
PREFERENCES = {"fast_single_answer": codes.PREFER_FAST_SINGLE_ANSWER,
               "sustained_speed": codes.PREFER_SUSTAINED_SPEED,
               "low_power": codes.PREFER_LOW_POWER}
WEIGHT_INPUTS = {"Conv": (1, 2), "FusedConv": (1, 2), "Gemm": (1, 2), "FusedGemm": (1, 2),
                 "MatMul": (1,), "FusedMatMul": (1, 2)}


class NnapiExecutionProvider(BridgeProvider):
    """NNAPI bridge: claims per feature level, translates to NNAPI models, runs them on Android."""

    name = "NnapiExecutionProvider"
    target = "nnapi"
    OPTIONS = BridgeProvider.OPTIONS + ("preference",)
    TARGET_OPTIONS = {"feature_level": 4}
    TRIVIAL_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat",
                             "QuantizeLinear", "DequantizeLinear"})

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        level = self.options.get("feature_level", 4)
        if not isinstance(level, int) or isinstance(level, bool) \
                or not 1 <= level <= codes.MAX_FEATURE_LEVEL:
            raise InvalidArgument("NnapiExecutionProvider option feature_level=%r: expected an "
                                  "int 1..%d" % (level, codes.MAX_FEATURE_LEVEL))
        self.level = level
        pref = self.options.get("preference", "fast_single_answer")
        if pref not in PREFERENCES:
            raise InvalidArgument("NnapiExecutionProvider option preference=%r: expected one of %s"
                                  % (pref, sorted(PREFERENCES)))
        self.preference = PREFERENCES[pref]
        self._facts: Optional[tuple] = None
        self._models: Dict[str, Any] = {}

    @classmethod
    def is_available(cls) -> bool:
        """True on Android where libneuralnetworks.so loads."""
        from . import runtime
        return runtime.available()

    @classmethod
    def translator_available(cls) -> bool:
        """False in a device build without translate.py."""
        try:
            importlib.import_module("onnxedge.edge.nnapi.translate")
        except ImportError:
            return False
        return True

    # ------------------------------------------------------------------ capability
    def _support(self) -> Any:
        return importlib.import_module("onnxedge.edge.nnapi.support")

    def shapes(self, graph: ir.Graph, ctx: CompileContext) -> Shapes:
        """The bridge's static shapes, extended through Conv, pools and Q/DQ (support.Facts)."""
        facts = self._support().Facts(graph, super().shapes(graph, ctx), ctx.opsets)
        self._facts = (graph, facts.shapes, facts)
        return facts.shapes

    def facts(self, graph: ir.Graph, shapes: Shapes, ctx: CompileContext) -> Any:
        """support.Facts of a graph (cached for the graph and shapes get_capability uses)."""
        if self._facts is not None and self._facts[0] is graph and self._facts[1] is shapes:
            return self._facts[2]
        facts = self._support().Facts(graph, shapes, ctx.opsets)
        self._facts = (graph, shapes, facts)
        return facts

    def node_reason(self, node: ir.Node, graph: ir.Graph, ctx: CompileContext,
                    shapes: Shapes) -> Optional[str]:
        """None when NNAPI at this feature level takes the node (support.node_reason)."""
        return self._support().node_reason(node, self.facts(graph, shapes, ctx), self.level)

    def get_capability(self, graph: ir.Graph, ctx: CompileContext) -> List[List[int]]:
        """The base's runs, less weight readers whose DequantizeLinear fell in another group."""
        groups = super().get_capability(graph, ctx)
        out: List[List[int]] = []
        for group in groups:
            members = {id(graph.nodes[i]) for i in group}
            facts = self._facts[2] if self._facts is not None else None
            keep = []
            for i in group:
                node = graph.nodes[i]
                why = None
                for k in WEIGHT_INPUTS.get(node.op_type, ()):
                    name = node.inputs[k] if len(node.inputs) > k else ""
                    prod = facts.producer.get(name) if (facts and name) else None
                    if prod is not None and id(prod) not in members:
                        why = "its weight %r is dequantized outside its NNAPI group" % name
                if why:
                    self._reasons[id(node)] = why
                else:
                    keep.append(i)
            out.extend(runs(keep))
        return out

    # ------------------------------------------------------------------ translation
    def translate(self, graph: ir.Graph, node_indices: List[int], ctx: CompileContext) -> Artifact:
        """The subgraph as an NNAPI model in one `model.nnapi` file."""
        from onnxedge.facts import Fact as Info
        translate = importlib.import_module("onnxedge.edge.nnapi.translate")
        declared = {}
        for vi in list(graph.inputs) + list(graph.outputs) + list(graph.value_info.values()):
            if vi.type is not None and vi.type.kind == "tensor":
                declared[vi.name] = Info(vi.type.elem_type, vi.type.shape)
        facts = self._support().Facts(graph, declared, ctx.opsets)
        model = translate.translate(graph, facts, self.level)
        data = serialize.dumps(model)
        meta = {"ops": model.ops_used(), "operands": len(model.operands),
                "operations": len(model.operations), "constant_bytes": model.constant_bytes(),
                "feature_level": self.level,
                "required_feature_level": translate.required_level(model),
                "onnx_ops": sorted({n.op_type for n in graph.nodes}),
                "layouts": {io.name: ("NHWC" if io.layout else "ONNX")
                            for io in list(model.inputs) + list(model.outputs)}}
        return Artifact("", self.target, [io.name for io in model.inputs],
                        [io.name for io in model.outputs], {MODEL_FILE: data}, meta)

    def model_of(self, artifact: Artifact) -> Any:
        """The artifact's NNAPI model, parsed once."""
        if artifact.key not in self._models:
            if MODEL_FILE not in artifact.files:
                raise InvalidArgument("NNAPI artifact %s has no %s" % (artifact.key[:12], MODEL_FILE))
            self._models[artifact.key] = serialize.loads(artifact.files[MODEL_FILE],
                                                         "NNAPI artifact %s" % artifact.key[:12])
        return self._models[artifact.key]

    # ------------------------------------------------------------------ execution
    def interpret(self, artifact: Artifact, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Run the artifact in the numpy reference interpreter (interpreter.py)."""
        interpreter = importlib.import_module("onnxedge.edge.nnapi.interpreter")
        model = self.model_of(artifact)
        return host_outputs(model, interpreter.execute(model, device_inputs(model, feeds)))

    def load(self, artifact: Artifact) -> Runner:
        """Build and compile the artifact's model on the device (runtime.py)."""
        from . import runtime
        model = self.model_of(artifact)
        compiled = runtime.NnapiModel(model, preference=self.preference,
                                      feature_level=runtime.device_feature_level())

        def run(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
            return host_outputs(model, compiled(device_inputs(model, feeds)))
        return run


__all__ = ["NnapiExecutionProvider"]
