"""CoreMLExecutionProvider: hands the subgraphs Core ML supports to Apple's Core ML as ML Programs.

Claims (support.py) -> translation to a `.mlpackage` through coremltools' MIL builder
(translate.py, cached by the subgraph's sha256) -> on macOS, Core ML's `predict`; anywhere, with
the option `{"reference": True}`, the numpy interpreter of the saved ML Program (interpreter.py).

Options (besides the bridge's `reference`, `artifact_dir`, `save_dir`, `input_shapes`, `dims`):
`minimum_deployment_target` ("iOS15" default, iOS16-18, macOS12-15: ops needing a newer target
are claimed only when it allows them), `compute_precision` ("float32" default, or "float16"),
`max_flexible_dim` (upper bound of the range given to symbolic or unknown input dims, 4096).
"""
from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np

from onnxedge import dtypes, ir
from onnxedge.errors import EPFail, InvalidArgument
from onnxedge.providers.base import CompileContext

from ..bridge import Artifact, BridgeProvider, Runner, Shapes
from . import support


def _coremltools_importable() -> bool:
    try:
        from .translate import coremltools
        coremltools()
    except Exception:
        return False
    return True


class CoreMLExecutionProvider(BridgeProvider):
    """Core ML (ML Program) bridge: Apple's CPU / GPU / Neural Engine for the claimed subgraphs."""

    name = "CoreMLExecutionProvider"
    target = "coreml"
    TARGET_OPTIONS: Dict[str, Any] = {"minimum_deployment_target": "iOS15",
                                      "compute_precision": "float32", "max_flexible_dim": 4096}
    TRIVIAL_OPS = frozenset({"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
                             "Identity", "Dropout", "Concat"})

    def __init__(self, options: Optional[Dict[str, Any]] = None):
        super().__init__(options)
        opts = self.target_options()
        self.level = support.target_level(opts["minimum_deployment_target"])
        if opts["compute_precision"] not in ("float32", "float16"):
            raise InvalidArgument("CoreMLExecutionProvider option compute_precision=%r: expected "
                                  "'float32' or 'float16'" % (opts["compute_precision"],))
        if not isinstance(opts["max_flexible_dim"], int) or opts["max_flexible_dim"] < 1:
            raise InvalidArgument("CoreMLExecutionProvider option max_flexible_dim=%r: expected "
                                  "an integer >= 1" % (opts["max_flexible_dim"],))

    @classmethod
    def is_available(cls) -> bool:
        """True on macOS with coremltools (Core ML's `predict` runs nowhere else)."""
        return sys.platform == "darwin" and _coremltools_importable()

    @classmethod
    def translator_available(cls) -> bool:
        """True where coremltools (the MIL builder) imports."""
        return _coremltools_importable()

    def node_reason(self, node: ir.Node, graph: ir.Graph, ctx: CompileContext,
                    shapes: Shapes) -> Optional[str]:
        """None when Core ML takes the node: op, dtypes, known ranks, deployment target."""
        if not self.options.get("artifact_dir") and not self.translator_available():
            return "coremltools is not installed (pip install 'onnxedge[coreml]') to translate"
        why = support.node_reason(node, graph, shapes, ctx.opset_of(node), self.level)
        if why is None and self.level < 16:
            for name in list(node.inputs) + list(node.outputs):
                info = shapes.get(name) if name else None
                if info is not None and info.elem_type == dtypes.FLOAT16 and \
                        name not in graph.initializers:
                    return ("float16 tensor %r: ML Program float16 inputs/outputs need "
                            "deployment target iOS16 / macOS13 or newer" % name)
        return why

    def translate(self, graph: ir.Graph, node_indices: List[int], ctx: CompileContext) -> Artifact:
        """The `.mlpackage` of the subgraph (see translate.py)."""
        from . import translate
        if list(node_indices) != list(range(len(graph.nodes))):
            from ..bridge import subgraph
            graph = subgraph(graph, node_indices)
        opts = self.target_options()
        return translate.translate(graph, ctx.opsets, opts["minimum_deployment_target"],
                                   opts["compute_precision"], opts["max_flexible_dim"])

    def load(self, artifact: Artifact) -> Runner:
        """Core ML's runtime (macOS): the .mlpackage compiled and run through `predict`."""
        from .translate import coremltools
        ct = coremltools()
        folder = tempfile.mkdtemp(prefix="onnxedge-coreml-")
        artifact.save(folder)
        try:
            model = ct.models.MLModel(os.path.join(folder, "model.mlpackage"))
        except Exception as e:
            raise EPFail("CoreMLExecutionProvider: Core ML could not load artifact %s: %s"
                         % (artifact.key[:12], e)) from e
        to_mil = artifact.meta.get("mil_inputs") or {}
        from_mil = artifact.meta.get("mil_outputs") or {}

        def run(feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
            out = model.predict({to_mil.get(n, n): np.asarray(v) for n, v in feeds.items()})
            return {n: np.asarray(out[from_mil.get(n, n)]) for n in artifact.outputs}

        return run

    def interpret(self, artifact: Artifact, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Run the artifact's ML Program in the numpy reference interpreter."""
        from .interpreter import interpret
        return interpret(artifact, feeds)


__all__ = ["CoreMLExecutionProvider"]
