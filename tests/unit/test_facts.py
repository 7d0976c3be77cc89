"""The core's type and shape facts (onnxedge.facts): rules per op, the two known bugs of the
copies it replaced, agreement with onnx's (and onnxruntime's symbolic) shape inference on the
benchmark and transformer zoo models, and that it is a runtime service (no optimizer needed)."""
from __future__ import annotations

import glob
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

from onnxedge import dtypes, facts, ir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.expanduser("~/.cache/onnxedge/zoo/transformers_ort")
F32, F16, I64, I32 = dtypes.FLOAT, dtypes.FLOAT16, dtypes.INT64, dtypes.INT32


def _vi(name: str, elem: int, shape: Optional[List[Any]]) -> ir.ValueInfo:
    return ir.ValueInfo(name, ir.TypeInfo.tensor(elem, shape))


def _graph(nodes: List[ir.Node], inputs: List[ir.ValueInfo],
           inits: Optional[Dict[str, np.ndarray]] = None) -> ir.Graph:
    return ir.Graph("g", nodes, inputs, [], inits or {})


def test_split_outputs_keep_the_data_type_and_reshape_never_takes_its_shape_inputs_type():
    # the optimizer's old inference left Split's outputs untyped, so the Reshape after it took
    # int64 from its shape input (GPT-2's attention values were typed int64)
    g = _graph([ir.Node("Split", ["x"], ["a", "b", "c"], {"axis": 2}),
                ir.Node("Reshape", ["a", "shape"], ["r"])],
               [_vi("x", F32, ["batch", "seq", 12]), _vi("shape", I64, [4])])
    got = facts.infer(g, {"": 13})
    assert [got.elem_type(n) for n in "abc"] == [F32, F32, F32]
    assert got.shape("a") == ["batch", "seq", 4]
    assert got.elem_type("r") == F32 and got.rank("r") == 4


def test_reshape_of_an_unknown_value_has_no_type_rather_than_the_shape_inputs():
    g = _graph([ir.Node("MyOp", ["x"], ["y"], domain="my.domain"),
                ir.Node("Reshape", ["y", "shape"], ["r"])],
               [_vi("x", I64, [2, 3])], {"shape": np.array([6], np.int64)})
    got = facts.infer(g, {"": 17, "my.domain": 1})
    assert "y" not in got                   # an op without a rule: unknown, not x's int64
    assert got.elem_type("r") == 0 and got.shape("r") == [6]


def test_optimizer_reads_the_same_facts():
    from onnxedge.optimizer.context import PassContext
    g = _graph([ir.Node("Split", ["x"], ["a", "b"], {"axis": 0}),
                ir.Node("Reshape", ["a", "shape"], ["r"])],
               [_vi("x", F32, [4, 6]), _vi("shape", I64, [1])])
    model = ir.Model(g, {"": 13})
    ctx = PassContext(model, g)
    assert ctx.dtype("r") == np.float32 and ctx.dtype("a") == np.float32
    assert ctx.shape("a") == [2, 6]


def test_embed_layer_normalization_outputs_are_the_embeddings_type_not_the_ids():
    # web/webgpu/types.py once typed them int32 from input_ids
    g = _graph([ir.Node("EmbedLayerNormalization",
                        ["ids", "seg", "word", "pos", "segemb", "gamma", "beta", "mask"],
                        ["out", "mask_index", "sum"], domain="com.microsoft")],
               [_vi("ids", I32, ["b", "s"]), _vi("seg", I32, ["b", "s"]),
                _vi("mask", I32, ["b", "s"])],
               {"word": np.zeros((100, 16), np.float16), "pos": np.zeros((64, 16), np.float16),
                "segemb": np.zeros((2, 16), np.float16), "gamma": np.ones(16, np.float16),
                "beta": np.zeros(16, np.float16)})
    got = facts.infer(g, {"": 17, "com.microsoft": 1})
    assert got.dtype("out") == np.float16 and got.shape("out") == ["b", "s", 16]
    assert got.dtype("sum") == np.float16
    assert got.dtype("mask_index") == np.int32 and got.shape("mask_index") == ["b"]


@pytest.mark.parametrize("elem", [F32, F16])
@pytest.mark.parametrize("op,inputs,attrs,want_shape", [
    ("Attention", ["x", "w3", "b3", "mask"], {"num_heads": 2}, ["b", "s", 8]),
    ("MultiHeadAttention", ["x", "k", "v"], {"num_heads": 2}, ["b", "s", 8]),
    ("SkipLayerNormalization", ["x", "x", "g", "g"], {}, ["b", "s", 8]),
    ("FastGelu", ["x", "g"], {}, ["b", "s", 8]),
    ("BiasGelu", ["x", "g"], {}, ["b", "s", 8]),
    ("MatMulNBits", ["x", "q", "scales"], {"K": 8, "N": 5, "bits": 4, "block_size": 16},
     ["b", "s", 5]),
])
def test_contrib_ops_have_their_float_inputs_type(op, inputs, attrs, want_shape, elem):
    dt = dtypes.to_numpy(elem)
    inits = {"w3": np.zeros((8, 24), dt), "b3": np.zeros(24, dt), "g": np.ones(8, dt),
             "q": np.zeros((5, 1, 8), np.uint8), "scales": np.ones(5, dt)}
    g = _graph([ir.Node(op, inputs, ["y"], attrs, domain="com.microsoft")],
               [_vi("x", elem, ["b", "s", 8]), _vi("k", elem, ["b", "t", 8]),
                _vi("v", elem, ["b", "t", 8]), _vi("mask", I32, ["b", "s"])], inits)
    got = facts.infer(g, {"": 17, "com.microsoft": 1})
    assert got.elem_type("y") == elem and got.shape("y") == want_shape


def test_declared_facts_win_and_are_completed_by_inference():
    g = _graph([ir.Node("Relu", ["x"], ["y"]), ir.Node("Relu", ["y"], ["z"])],
               [_vi("x", F32, [2, 3])])
    g.value_info["y"] = ir.ValueInfo("y", ir.TypeInfo.tensor(F32, ["n", 3]))
    g.value_info["z"] = ir.ValueInfo("z", ir.TypeInfo.tensor(0, None))
    got = facts.infer(g, {"": 17})
    assert got.shape("y") == ["n", 3]              # declared
    assert got.elem_type("z") == F32 and got.shape("z") == ["n", 3]   # completed


def test_constant_nodes_feed_shape_rules():
    shape = np.array([3, -1], np.int64)
    g = _graph([ir.Node("Constant", [], ["s"], {"value": shape}),
                ir.Node("Reshape", ["x", "s"], ["y"]),
                ir.Node("Shape", ["y"], ["n"]), ir.Node("Cast", ["n"], ["f"], {"to": F32})],
               [_vi("x", F16, [2, 6])])
    got = facts.infer(g, {"": 17})
    assert got.shape("s") == [2] and got.shape("y") == [3, 4] and got.dtype("y") == np.float16
    assert got.elem_type("n") == I64 and got.shape("n") == [2] and got.elem_type("f") == F32


def test_fact_rule_registry_covers_the_ops_the_old_copies_knew():
    old = ("Relu LeakyRelu Sigmoid Tanh Erf Sqrt Exp Log Neg Abs Identity Dropout Softmax "
           "LogSoftmax Gelu Clip HardSigmoid Elu Selu Reciprocal Floor Ceil Round Sin Cos "
           "BatchNormalization LayerNormalization Softplus HardSwish Mish Not Sign Add Sub Mul "
           "Div Pow Max Min Mod PRelu Conv ConvTranspose MaxPool AveragePool GlobalAveragePool "
           "GlobalMaxPool LpPool ReduceMean ReduceSum ReduceMax ReduceMin Concat Slice Gather "
           "Expand Tile Pad Resize InstanceNormalization DepthToSpace SpaceToDepth Equal Less "
           "Greater LessOrEqual GreaterOrEqual And Or Xor Reshape Transpose Flatten Squeeze "
           "Unsqueeze MatMul Gemm Cast CastLike Shape Size Constant ConstantOfShape Range Where "
           "GatherElements QuantizeLinear DequantizeLinear NonZero ArgMax ArgMin IsNaN IsInf "
           "TopK Unique Split").split()
    missing = [op for op in old if facts.rule_for("", op) is None]
    assert missing == []
    for op in ("FusedMatMul", "FusedGemm", "FusedConv", "Gelu", "LayerNormalization",
               "MultiHeadAttention"):
        assert facts.rule_for("com.onnxedge", op) is not None, op
    for op in ("Attention", "MultiHeadAttention", "SkipLayerNormalization",
               "EmbedLayerNormalization", "FastGelu", "BiasGelu", "MatMulNBits"):
        assert facts.rule_for("com.microsoft", op) is not None, op


def test_a_rule_registered_elsewhere_is_used():
    @facts.fact_rule("Twice", domain="test.facts")
    def _twice(node: ir.Node, ins: Any, ctx: facts.RuleContext) -> Any:
        x = ins[0]
        return [facts.Fact(x.elem_type, [2 * x.shape[0]])]
    g = _graph([ir.Node("Twice", ["x"], ["y"], domain="test.facts")], [_vi("x", I32, [3])])
    assert facts.infer(g, {"test.facts": 1})["y"] == facts.Fact(I32, [6])


def test_session_hands_the_facts_to_providers_in_the_compile_context(monkeypatch):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    import onnxedge
    from onnxedge.providers.cpu import CPUExecutionProvider
    seen: List[Any] = []
    real = CPUExecutionProvider.get_capability

    def spy(self: Any, graph: ir.Graph, ctx: Any) -> Any:
        seen.append(ctx.facts)
        return real(self, graph, ctx)
    monkeypatch.setattr(CPUExecutionProvider, "get_capability", spy)
    g = helper.make_graph(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=0), helper.make_node("Relu", ["a"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    so = onnxedge.SessionOptions()
    so.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    # facts are worked out once a provider other than the CPU's is in the session (here NNAPI
    # in reference mode); every provider of the session then reads the same ones
    onnxedge.InferenceSession(model.SerializeToString(), so,
                              providers=[("NnapiExecutionProvider", {"reference": True}),
                                         "CPUExecutionProvider"])
    assert seen and seen[0].shape("a") == [2, 2] and seen[0].dtype("b") == np.float32
    seen.clear()
    so.add_session_config_entry("session.cpu_engine", "0")   # numpy alone, no C engine
    sess = onnxedge.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    assert seen and seen[0].shape("a") is None          # numpy alone: no facts worked out
    sess.set_providers([("NnapiExecutionProvider", {"reference": True}), "CPUExecutionProvider"])
    assert seen[-1].shape("a") == [2, 2]


def test_facts_module_lives_outside_what_runtime_wheels_drop():
    from onnxedge.reduced_build import wheel
    for mod in ("onnxedge/facts.py", "onnxedge/fact_rules.py"):
        assert not any(mod.startswith(d) or mod == d for d in wheel.RUNTIME_DROPS), mod
    # a CPU-only runtime wheel leaves the rules out: its sessions never work facts out
    assert "onnxedge/fact_rules.py" in wheel.RUNTIME_CPU_ONLY_DROPS


def test_facts_and_bridges_run_without_the_optimizer():
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'onnxedge.optimizer' or name.startswith('onnxedge.optimizer.'):\n"
        "            raise ImportError('runtime wheel: no ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from onnxedge import facts, ir\n"
        "from onnxedge.edge import bridge\n"
        "from onnxedge.edge.coreml import support\n"
        "from onnxedge.edge.nnapi import support as nsupport\n"
        "g = ir.Graph('g', [ir.Node('Relu', ['x'], ['y'])],\n"
        "             [ir.ValueInfo('x', ir.TypeInfo.tensor(1, ['n', 3]))], [ir.ValueInfo('y')])\n"
        "s = bridge.static_shapes(g, {'x': [2, 3]}, {'': 17})\n"
        "assert s['y'].static() == [2, 3], s\n"
        "assert 'onnxedge.optimizer' not in sys.modules\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# ----------------------------------------------------------------------------- against onnx

def _reference(model: Any, symbolic: bool) -> Dict[str, Tuple[int, Optional[List[Any]]]]:
    from onnx import shape_inference
    ref = None
    if symbolic:
        try:
            import tempfile
            from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
            here = os.getcwd()
            with tempfile.TemporaryDirectory() as scratch:   # it writes temporary files into the cwd
                os.chdir(scratch)
                try:
                    ref = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
                finally:
                    os.chdir(here)
        except Exception:   # it gives up on some graphs; onnx's own inference still answers
            ref = None
    if ref is None:
        ref = shape_inference.infer_shapes(model)
    out = {}
    for vi in list(ref.graph.value_info) + list(ref.graph.output):
        t = vi.type.tensor_type
        shape = None
        if t.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        out[vi.name] = (t.elem_type, shape)
    return out


def _compare(model: Any, symbolic: bool) -> Tuple[List[Any], int]:
    """(disagreements, values of node outputs facts left untyped)."""
    from onnxedge import model_io
    del model.graph.value_info[:]          # facts must infer, not echo the declarations
    want = _reference(model, symbolic)
    m = model_io.load(model.SerializeToString())
    got = facts.infer(m.graph, m.opset_imports)
    bad = []
    for name, (elem, shape) in want.items():
        f = got.get(name)
        if f is None or (elem and f.elem_type != elem):
            bad.append((name, "type", elem, f))
            continue
        if shape is not None and all(isinstance(d, int) for d in shape) and f.static() != shape:
            bad.append((name, "shape", shape, f.shape))
        elif shape is not None and f.shape is not None and (
                len(shape) != len(f.shape) or any(
                    isinstance(a, int) and isinstance(b, int) and a != b
                    for a, b in zip(shape, f.shape))):
            bad.append((name, "dims", shape, f.shape))
    untyped = [o for n in m.graph.nodes for o in n.outputs if o and not got.elem_type(o)]
    return bad, len(untyped)


@pytest.fixture(scope="module")
def benchmark_models(tmp_path_factory) -> Dict[str, str]:
    pytest.importorskip("onnx")
    sys.path.insert(0, ROOT)
    from benchmarks import models
    return models.build_all(str(tmp_path_factory.mktemp("bench")), BENCH)


BENCH = ["mlp", "resnet18", "bert_encoder", "qdq_cnn"]   # onnx.helper-built (the torch exports need torch)


@pytest.mark.parametrize("name", BENCH)
def test_facts_match_onnx_shape_inference_on_the_benchmark_models(benchmark_models, name):
    import onnx
    bad, untyped = _compare(onnx.load(benchmark_models[name]), symbolic=False)
    assert bad == [] and untyped == 0


ZOO_MODELS = sorted(os.path.basename(os.path.dirname(p))
                    for p in glob.glob(os.path.join(ZOO, "*", "model.onnx")))


@pytest.mark.skipif(not ZOO_MODELS, reason="transformer zoo models not built "
                    "(tests/zoo/transformers_ort.py caches them in ~/.cache/onnxedge/zoo/)")
@pytest.mark.parametrize("name", ZOO_MODELS or ["none"])
def test_facts_match_symbolic_shape_inference_on_the_transformer_zoo(name):
    onnx = pytest.importorskip("onnx")
    bad, untyped = _compare(onnx.load(os.path.join(ZOO, name, "model.onnx")), symbolic=True)
    assert bad == [] and untyped == 0


@pytest.mark.skipif(not os.path.isfile(os.path.join(ZOO, "gpt2_optimized", "model.onnx")),
                    reason="GPT-2 zoo model not built")
def test_gpt2_values_after_the_attention_split_are_float():
    from onnxedge import model_io
    m = model_io.load(os.path.join(ZOO, "gpt2_optimized", "model.onnx"))
    m.graph.value_info.clear()
    got = facts.infer(m.graph, m.opset_imports)
    split_outs = {o for n in m.graph.nodes if n.op_type == "Split" for o in n.outputs}
    after = [n.outputs[0] for n in m.graph.nodes
             if n.op_type == "Reshape" and n.inputs[0] in split_outs]
    assert split_outs and after
    assert {got.dtype(o) for o in list(split_outs) + after} == {np.dtype(np.float32)}


def test_dims_made_from_shapes_reach_reshape_and_range():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape (exporters' usual head split) and
    # Range(0, seq, 1): symbolic dims survive instead of becoming unknown
    g = _graph([ir.Node("Shape", ["x"], ["s"]),
                ir.Node("Gather", ["s", "i0"], ["b"], {"axis": 0}),
                ir.Node("Gather", ["s", "i1"], ["t"], {"axis": 0}),
                ir.Node("Unsqueeze", ["b", "ax"], ["b1"]),
                ir.Node("Unsqueeze", ["t", "ax"], ["t1"]),
                ir.Node("Concat", ["b1", "t1", "heads"], ["target"], {"axis": 0}),
                ir.Node("Reshape", ["x", "target"], ["y"]),
                ir.Node("Range", ["zero", "t", "one"], ["pos"]),
                ir.Node("Flatten", ["x"], ["flat"], {"axis": 2})],
               [_vi("x", F32, ["batch", "seq", 32])],
               {"i0": np.array(0, np.int64), "i1": np.array(1, np.int64),
                "ax": np.array([0], np.int64), "heads": np.array([4, -1], np.int64),
                "zero": np.array(0, np.int64), "one": np.array(1, np.int64)})
    got = facts.infer(g, {"": 17})
    assert got.shape("y") == ["batch", "seq", 4, 8]
    assert got.shape("pos") == ["seq"] and got.elem_type("pos") == I64
    assert got.shape("flat") == [None, 32]


def _int_matmul_graph() -> ir.Graph:
    # x is float, but the MatMul reads Cast(x, int32): only inference tells (no value_info)
    return _graph([ir.Node("Cast", ["x"], ["c"], {"to": I32}, name="cast"),
                   ir.Node("MatMul", ["c", "w"], ["y"], name="mm")],
                  [_vi("x", F32, [2, 4])], {"w": np.ones((4, 3), np.float32)})


def test_wasm_claims_read_the_compile_contexts_facts():
    from onnxedge.providers.base import CompileContext
    from onnxedge.web.wasm import transport
    from onnxedge.web.wasm.provider import WasmSimdExecutionProvider
    g = _int_matmul_graph()
    ep = WasmSimdExecutionProvider({"kernels": transport.Kernels()})
    ctx = CompileContext({"": 17}, {}, facts=facts.infer(g, {"": 17}))
    assert ep.get_capability(g, ctx) == []
    assert "'c'" in ep.unsupported_reason(g.nodes[1], ctx)
    blind = CompileContext({"": 17}, {})        # no facts: the declared types only
    assert ep.get_capability(g, blind) == [[1]]


def test_neon_claims_read_the_compile_contexts_facts():
    from onnxedge.edge.neon.provider import ENGINES
    from onnxedge.providers.base import CompileContext
    here = [cls for cls in ENGINES if cls.is_available()]
    if not here:
        pytest.skip("the C kernel library is not built (make setup)")
    g = _int_matmul_graph()
    ep = here[0]()
    ctx = CompileContext({"": 17}, {}, facts=facts.infer(g, {"": 17}))
    assert ep.get_capability(g, ctx) in ([], [[]])
    assert "'c'" in ep.unsupported_reason(g.nodes[1], ctx)


def test_expand_target_from_the_exporters_where_equal_pattern():
    # torch's exporter writes Expand(x, Where(Equal(dims, -1), ones, dims)); the dims survive
    g = _graph([ir.Node("Shape", ["x"], ["s"]),
                ir.Node("Equal", ["s", "minus1"], ["eq"]),
                ir.Node("Where", ["eq", "ones", "s"], ["target"]),
                ir.Node("Expand", ["y", "target"], ["z"])],
               [_vi("x", I64, ["batch", "seq"]), _vi("y", I64, [1, 1])],
               {"minus1": np.array([-1], np.int64), "ones": np.ones(2, np.int64)})
    got = facts.infer(g, {"": 17})
    assert got.shape("z") == ["batch", "seq"]


def test_split_with_computed_sizes_leaves_the_axis_unknown():
    """Split sizes made by other nodes (RotaryEmbedding's expanded function) are not equal parts:
    guessing them folded a wrong Reshape target."""
    t = ir.TypeInfo.tensor(dtypes.from_numpy("float32"), [2, 3, 4, 8])
    i64 = ir.TypeInfo.tensor(dtypes.from_numpy("int64"), [1])
    g = ir.Graph(name="g", nodes=[
        ir.Node("Concat", ["d", "e"], ["sizes"], attributes={"axis": 0}),
        ir.Node("Split", ["x", "sizes"], ["a", "b"], attributes={"axis": -1}),
        ir.Node("Split", ["x"], ["c", "f"], attributes={"axis": -1})],
        inputs=[ir.ValueInfo("x", t), ir.ValueInfo("d", i64), ir.ValueInfo("e", i64)],
        outputs=[ir.ValueInfo(n) for n in "abcf"])
    f = facts.infer(g, {"": 18})
    assert f.shape("a") == [2, 3, 4, None] and f.shape("b") == [2, 3, 4, None]
    assert f.shape("c") == [2, 3, 4, 4]


@pytest.mark.parametrize("op,direction,layout,hidden_attr", [
    ("LSTM", "forward", 0, True), ("LSTM", "bidirectional", 0, True), ("LSTM", "reverse", 1, True),
    ("LSTM", "bidirectional", 1, False), ("GRU", "bidirectional", 0, True), ("GRU", "forward", 1, False),
    ("RNN", "bidirectional", 0, True),
])
def test_recurrent_outputs_have_onnx_shape_inferences_shapes(op, direction, layout, hidden_attr):
    """LSTM/GRU/RNN outputs get their shapes, so a Shape of them folds (the states a second
    bidirectional layer builds from its input's batch size)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    seq, batch, inp, hid = 5, 3, 4, 6
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    inits = [numpy_helper.from_array(np.zeros((dirs, gates * hid, inp), np.float32), "W"),
             numpy_helper.from_array(np.zeros((dirs, gates * hid, hid), np.float32), "R")]
    outs = ["Y", "Yh", "Yc"] if op == "LSTM" else ["Y", "Yh"]
    attrs: Dict[str, Any] = dict(direction=direction, layout=layout)
    if hidden_attr:
        attrs["hidden_size"] = hid
    x_shape = [seq, batch, inp] if layout == 0 else [batch, seq, inp]
    graph = helper.make_graph([helper.make_node(op, ["X", "W", "R"], outs, **attrs)], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    from onnxedge import model_io
    m = model_io.load(model.SerializeToString())
    got = facts.infer(m.graph, m.opset_imports)   # hidden also from R, where onnx leaves it None
    assert got.shape("Y") == ([seq, dirs, batch, hid] if layout == 0 else [batch, seq, dirs, hid])
    assert got.shape("Yh") == ([dirs, batch, hid] if layout == 0 else [batch, dirs, hid])
    bad, untyped = _compare(model, symbolic=False)
    assert bad == [] and untyped == 0
