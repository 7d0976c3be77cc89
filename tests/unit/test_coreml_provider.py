"""CoreMLExecutionProvider: availability, options, the reasons it gives for what it leaves to the
CPU (op, dtype, shape, deployment target), and the partition report of `onnxedge inspect`."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from onnxedge import dtypes, get_available_providers, ir
from onnxedge.edge.bridge import static_shapes
from onnxedge.edge.coreml.provider import CoreMLExecutionProvider
from onnxedge.errors import InvalidArgument
from onnxedge.providers.base import CompileContext

pytestmark = pytest.mark.needs_setup   # coremltools

HAS_CT = CoreMLExecutionProvider.translator_available()


def _graph(nodes, inputs, initializers=None, outputs=("y",)):
    vis = [ir.ValueInfo(n, ir.TypeInfo.tensor(t, s)) for n, t, s in inputs]
    outs = [ir.ValueInfo(n, None) for n in outputs]
    return ir.Graph("g", nodes, vis, outs, dict(initializers or {}))


def _reason(node, graph, opset=17, **options):
    prov = CoreMLExecutionProvider(dict({"reference": True}, **options))
    ctx = CompileContext({"": opset}, {})
    return prov.node_reason(node, graph, ctx, static_shapes(graph, opsets=ctx.opsets))


def test_not_available_off_macos_but_loadable():
    assert CoreMLExecutionProvider.is_available() == (sys.platform == "darwin" and HAS_CT)
    if sys.platform != "darwin":
        assert "CoreMLExecutionProvider" not in get_available_providers()


def test_options_are_checked():
    with pytest.raises(InvalidArgument, match="minimum_deployment_target='iOS9'"):
        CoreMLExecutionProvider({"minimum_deployment_target": "iOS9"})
    with pytest.raises(InvalidArgument, match="compute_precision"):
        CoreMLExecutionProvider({"compute_precision": "int8"})
    with pytest.raises(InvalidArgument, match="unknown option"):
        CoreMLExecutionProvider({"ml_program": True})


@pytest.mark.skipif(HAS_CT, reason="checks the message given where coremltools is missing")
def test_without_coremltools_nothing_is_claimed():
    g = _graph([ir.Node("Relu", ["x"], ["y"])], [("x", dtypes.FLOAT, [1, 4])])
    assert "coremltools is not installed" in _reason(g.nodes[0], g)


@pytest.mark.skipif(not HAS_CT, reason="coremltools (the MIL builder) needs Python >= 3.10")
class TestReasons:
    def test_claimed(self):
        g = _graph([ir.Node("Relu", ["x"], ["y"])], [("x", dtypes.FLOAT, ["batch", 4])])
        assert _reason(g.nodes[0], g) is None

    def test_unknown_op(self):
        g = _graph([ir.Node("Gather", ["x", "i"], ["y"])], [("x", dtypes.FLOAT, [3, 4])],
                   {"i": np.array([0], np.int64)})
        assert _reason(g.nodes[0], g) == \
            "Gather (domain ai.onnx) is not an op the Core ML bridge translates"

    def test_dtype(self):
        g = _graph([ir.Node("Add", ["x", "x"], ["y"])], [("x", dtypes.INT64, [3])])
        assert _reason(g.nodes[0], g) == \
            "input 'x' is int64; Core ML runs this op on float32/float16"

    def test_dynamic_rank(self):
        g = _graph([ir.Node("Relu", ["x"], ["y"])], [("x", dtypes.FLOAT, None)])
        assert _reason(g.nodes[0], g) == "dynamic shape: the rank of input 'x' is unknown"

    def test_conv_needs_constant_weight_and_2d(self):
        x = ("x", dtypes.FLOAT, [1, 3, 8, 8])
        w = ("w", dtypes.FLOAT, [4, 3, 3, 3])
        g = _graph([ir.Node("Conv", ["x", "w"], ["y"])], [x, w])
        assert _reason(g.nodes[0], g) == \
            "weight/bias 'w' must be a constant (initializer) for Core ML"
        g = _graph([ir.Node("Conv", ["x", "w"], ["y"])], [("x", dtypes.FLOAT, [1, 3, 8])],
                   {"w": np.zeros((4, 3, 3), np.float32)})
        assert "rank 3; the bridge translates 2-D (NCHW) only" in _reason(g.nodes[0], g)

    def test_auto_pad_same_lower(self):
        g = _graph([ir.Node("MaxPool", ["x"], ["y"], {"kernel_shape": [2, 2],
                                                       "auto_pad": "SAME_LOWER"})],
                   [("x", dtypes.FLOAT, [1, 1, 4, 4])])
        assert "auto_pad=SAME_LOWER is not translated" in _reason(g.nodes[0], g)

    def test_ceil_mode_where_core_ml_sizes_differ(self):
        """MIL drops a last window outside the input only when padded; ONNX always does."""
        node = ir.Node("MaxPool", ["x"], ["y"], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                  "ceil_mode": 1})
        g = _graph([node], [("x", dtypes.FLOAT, [1, 1, 4, 4])])
        assert _reason(node, g) is None       # ceil((4 - 3) / 2) + 1 = 2 windows, both inside
        node.attributes["kernel_shape"] = [1, 1]    # 2 wide, stride 2: ceil gives a window at 2
        g = _graph([node], [("x", dtypes.FLOAT, [1, 1, 2, 2])])
        assert "which ONNX drops and Core ML (without padding) keeps" in _reason(node, g)
        node.attributes.update({"strides": [2, 2], "pads": [0, 0, 1, 1]})
        assert "asymmetric pads" in _reason(node, g)

    def test_deployment_target_for_activation_qdq(self):
        q = ir.Node("QuantizeLinear", ["x", "s", "z"], ["q"])
        dq = ir.Node("DequantizeLinear", ["q", "s", "z"], ["y"])
        inits = {"s": np.array(0.1, np.float32), "z": np.array(0, np.int8)}
        g = _graph([q, dq], [("x", dtypes.FLOAT, [1, 4])], inits)
        assert _reason(q, g) == ("activation QuantizeLinear needs MIL quantize (deployment "
                                 "target iOS17 / macOS14 or newer; this one is iOS15)")
        assert _reason(q, g, minimum_deployment_target="iOS17") is None
        assert _reason(dq, g, minimum_deployment_target="macOS14") is None

    def test_float16_needs_ios16(self):
        g = _graph([ir.Node("Relu", ["x"], ["y"])], [("x", dtypes.FLOAT16, [2])])
        assert "float16 tensor 'x'" in _reason(g.nodes[0], g)
        assert _reason(g.nodes[0], g, minimum_deployment_target="iOS16") is None

    def test_softmax_below_opset_13(self):
        g = _graph([ir.Node("Softmax", ["x"], ["y"], {"axis": 1})],
                   [("x", dtypes.FLOAT, [2, 3, 4])])
        assert "flattens to 2-D first" in _reason(g.nodes[0], g, opset=11)
        assert _reason(g.nodes[0], g, opset=13) is None


@pytest.mark.skipif(not HAS_CT, reason="coremltools (the MIL builder) needs Python >= 3.10")
def test_inspect_reports_the_coreml_partition(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper

    from onnxedge import cli
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.ones(16, np.float32))
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Shape", ["r"], ["y"], name="shape")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2])], [w])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert cli.main(["inspect", path, "--optimize", "disable", "--providers",
                     "CoreMLExecutionProvider,CPUExecutionProvider"]) == 0
    out = capsys.readouterr().out
    assert "CoreMLExecutionProvider      2 nodes" in out
    assert "fell back: shape (Shape) -> CPUExecutionProvider: CoreMLExecutionProvider: Shape " \
           "(domain ai.onnx) is not an op the Core ML bridge translates" in out


@pytest.mark.skipif(not HAS_CT, reason="coremltools (the MIL builder) needs Python >= 3.10")
def test_float16_model_runs_from_ios16():
    """A float16 model: left to the CPU at iOS15, an fp16 ML Program at iOS16 equal to the CPU."""
    from onnx import TensorProto, helper

    from onnxedge import InferenceSession
    rng = np.random.RandomState(0)
    w = helper.make_tensor("w", TensorProto.FLOAT16, [4, 3], rng.rand(12).astype(np.float16))
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    x = (rng.rand(2, 4) - 0.5).astype(np.float16)
    want = InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for target, provider in (("iOS15", "CPUExecutionProvider"),
                             ("iOS16", "CoreMLExecutionProvider")):
        sess = InferenceSession(model, providers=[("CoreMLExecutionProvider", {
            "reference": True, "minimum_deployment_target": target})])
        assert {r["provider"] for r in sess.partition_report()} == {provider}
        got = sess.run(None, {"x": x})[0]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3,
                                   atol=1e-3)
