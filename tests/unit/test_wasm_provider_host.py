"""WasmSimdExecutionProvider's whole run path natively: the page's wasm module replaced by the
host build of the same C kernels over a numpy "wasm memory" (wasm_host_kernels.py). Outputs are
checked against onnxruntime (or, where it is not installed, the numpy CPU provider); copies are
counted (one per step input and per value used outside a step, one oxk_program_run call per step
and run); shapes the kernels do not take run on the CPU kernels; `programs=0` keeps the
node-by-node path. The real module runs natively in test_wasm_programs_node.py and in Chromium in
tests/browser/test_wasm_provider.py."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
import onnxedge.oxk_program
from onnxedge.errors import InvalidArgument, OnnxEdgeError
from onnxedge.web.wasm import transport

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import models  # noqa: E402
from wasm_host_kernels import HostKernels  # noqa: E402

pytestmark = pytest.mark.needs_setup   # the host build of the C kernels (edge/kernels/build.py, `make setup`)

RTOL, ATOL = 1e-4, 1e-5
WASM = "WasmSimdExecutionProvider"


@pytest.fixture(scope="module")
def kernels():
    from onnxedge.edge.neon import library
    if not os.path.isfile(library.library_path()):
        pytest.fail("the host kernel library is missing: run `make setup` (edge/kernels/build.py)")
    k = HostKernels()
    transport.install(k)
    yield k
    transport.install(None)


def _reference(model: Any, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    try:
        import onnxruntime
    except ImportError:   # Python 3.8's venv: the numpy CPU provider is the reference (alone:
        so = onnxedge.SessionOptions()   # the installed kernels are the C engine here, as in a page)
        so.add_session_config_entry("session.cpu_engine", "0")
        return onnxedge.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    return onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def _session(model: Any, **opts: Any) -> onnxedge.InferenceSession:
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return onnxedge.InferenceSession(data, providers=[(WASM, opts), "CPUExecutionProvider"])


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> Dict[str, str]:
    return models.build_all(str(tmp_path_factory.mktemp("models")), ["mlp", "resnet18", "bert_encoder"])


@pytest.mark.parametrize("name, wasm_ops, steps, reads", [
    ("mlp", {"FusedGemm", "Gemm", "Softmax"}, 1, 1),
    ("resnet18", {"FusedConv", "Conv", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm"}, 1, 1),
    # Gelu is its FusedMatMul's epilogue; the int64 mask's Cast moved above its Unsqueeze
    # (cast_hoist) and runs in wasm too: one step
    ("bert_encoder", {"Gather", "FusedMatMul", "Add", "Mul", "Sub", "MultiHeadAttention", "LayerNormalization",
                      "Cast", "Unsqueeze"}, 1, 1),
])
def test_models_run_as_one_program_per_step_edge(kernels, model_files, name, wasm_ops, steps, reads):
    feeds = models.make_inputs(name)
    sess = _session(model_files[name])
    report = sess.partition_report()
    on_wasm = {r["op_type"] for r in report if r["provider"] == WASM}
    assert on_wasm == wasm_ops
    kernels.counts.clear()
    sess.run(None, feeds)   # the first run of a signature goes node by node and compiles the program
    # node by node: the kernel ops on their kernels, each program-only op (views aside) as a
    # one-instruction program (the same kernels as the step's program)
    # (views and a Gather of int64 ids take their CPU kernel on a first run: the same values;
    # Cast runs through its emitter as a one-instruction program, as the quantized ops do)
    alone = [r for r in report if r["provider"] == WASM and r["op_type"] in
             set(onnxedge.oxk_program.PROGRAM_ONLY_OPS) - set(onnxedge.oxk_program.VIEWS) - {"Gather"} | {"Cast"}]
    assert kernels.counts.get("program_run", 0) == len(alone)
    assert kernels.counts.get("sgemm_run", 0) + kernels.counts.get("conv_run", 0) >= 1
    kernels.counts.clear()
    got = sess.run(None, feeds)
    for have, want in zip(got, _reference(model_files[name], feeds)):
        np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL)
    # one call into the module per step; one copy in per step input, one out per value read later
    assert kernels.counts["program_run"] == steps
    assert kernels.counts["write"] == {"mlp": 1, "resnet18": 1, "bert_encoder": 2}[name]   # ids, mask
    assert kernels.counts["read"] == reads
    assert set(kernels.counts) == {"program_run", "oxk_program_run", "write", "read"}


@pytest.mark.parametrize("name, wasm_ops, steps", [
    ("mlp", {"FusedGemm", "Gemm"}, 1),
    ("resnet18", {"FusedConv", "Conv", "MaxPool", "GlobalAveragePool", "Gemm"}, 2),
])
def test_models_node_by_node_with_one_copy_per_step_edge(kernels, model_files, name, wasm_ops, steps):
    feeds = models.make_inputs(name)
    sess = _session(model_files[name], programs=0)
    report = sess.partition_report()
    assert {r["op_type"] for r in report if r["provider"] == WASM} == wasm_ops
    assert all("programs=0" in r["fallback_reasons"][WASM] for r in report
               if r["provider"] != WASM and r["op_type"] in ("Softmax", "Flatten"))
    sess.run(None, feeds)   # the first run of a shape writes its plans too
    kernels.counts.clear()
    got = sess.run(None, feeds)
    for have, want in zip(got, _reference(model_files[name], feeds)):
        np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL)
    assert "program_run" not in kernels.counts
    assert kernels.counts["write"] == steps and kernels.counts["read"] == steps


def test_programs_bitwise_equal_on_one_and_two_threads(kernels, model_files):
    outs = []
    for threads in (1, 2):
        k = HostKernels(megabytes=256, threads=threads)
        transport.install(k)
        try:
            for name in ("mlp", "resnet18"):
                feeds = models.make_inputs(name)
                sess = _session(model_files[name])
                sess.run(None, feeds)
                k.counts.clear()
                outs.append(sess.run(None, feeds))
                assert k.counts["program_run"] == 1
        finally:
            transport.install(kernels)
            kernels.lib.set_num_threads(kernels.threads)
    for a, b in zip(outs[:2], outs[2:]):
        for x, y in zip(a, b):
            assert x.tobytes() == y.tobytes()


def test_new_shapes_get_buffers_once_and_cpu_takes_what_kernels_do_not(kernels, model_files):
    sess = _session(model_files["resnet18"])
    live = []
    for batch in (2, 1, 2):
        feeds = models.make_inputs("resnet18", batch=batch)
        (got,) = sess.run(None, feeds)
        np.testing.assert_allclose(got, _reference(model_files["resnet18"], feeds)[0], rtol=RTOL, atol=ATOL)
        live.append(len(kernels.live))
    assert live[0] < live[1] == live[2], "buffers of a seen shape are reused, not reallocated"


def test_input_the_kernels_reject_gets_the_cpu_kernels_error(kernels):
    w = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "c",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    sess = _session(m)
    x = np.ones((1, 3, 5, 5), np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], np.full((1, 2, 3, 3), 27.0, np.float32))
    with pytest.raises(InvalidArgument, match=r"Conv.*channels"):
        sess.run(None, {"x": np.ones((1, 4, 5, 5), np.float32)})   # 4 channels, W takes 3


def _fused_model(act: str, params: List[float], z_shape: List[int]) -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((6 * 5 * 4, 5)).astype(np.float32), "gw")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 0, 1, 0]),
             helper.make_node("Add", ["c", "z"], ["s"]),
             helper.make_node(act, ["s"] + (["lo", "hi"] if act == "Clip" else []), ["a"],
                              **({"alpha": params[0]} if act == "LeakyRelu" else {})),
             helper.make_node("AveragePool", ["a"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              count_include_pad=1, ceil_mode=1, strides=[2, 2]),
             helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "gw"], ["y"]),
             helper.make_node("Gemm", ["f", "gw"], ["y2"], alpha=0.5)]
    if act == "Clip":
        inits += [numpy_helper.from_array(np.array(params[0], np.float32), "lo"),
                  numpy_helper.from_array(np.array(params[1], np.float32), "hi")]
    g = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 15, 16]),
                                           helper.make_tensor_value_info("z", TensorProto.FLOAT, z_shape)],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y2", "m")],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("act, params", [("Relu", []), ("Clip", [-0.5, 1.5]), ("LeakyRelu", [0.3]),
                                         ("Sigmoid", []), ("Tanh", [])])
def test_fused_residual_activations_and_pools(kernels, act, params):
    m = _fused_model(act, params, [1, 6, 8, 7])
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 3, 15, 16)).astype(np.float32),
             "z": rng.standard_normal((1, 6, 8, 7)).astype(np.float32)}
    sess = _session(m, programs=0)
    fused = [r for r in sess.partition_report() if r["op_type"] == "FusedConv"]
    assert fused and fused[0]["provider"] == WASM, sess.partition_report()
    kernels.counts.clear()
    first = sess.run(None, feeds)
    for have, want in zip(first, _reference(m, feeds)):
        np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL)
    assert kernels.counts.get("oxk_conv2d_run_z", 0) >= 1   # the residual went in with the conv
    # and as a program: one CONV2D with Z (oxk_conv2d_run_z), pools and GEMMs in one call, the
    # node-by-node bits
    sess = _session(m)
    want = _reference(m, feeds)
    for _ in range(2):
        kernels.counts.clear()
        outs = sess.run(None, feeds)
        for have, w in zip(outs, want):
            np.testing.assert_allclose(have, w, rtol=RTOL, atol=ATOL)
    assert kernels.counts["program_run"] == 1
    assert [o.tobytes() for o in outs] == [o.tobytes() for o in first]


def test_broadcast_residual_runs_the_step_on_cpu_node_by_node_and_in_the_program(kernels):
    m = _fused_model("Relu", [], [1, 6, 1, 7])   # Z broadcasts: the wasm kernels do not add it
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((1, 3, 15, 16)).astype(np.float32),
             "z": rng.standard_normal((1, 6, 1, 7)).astype(np.float32)}
    sess = _session(m, programs=0)
    kernels.counts.clear()
    for have, want in zip(sess.run(None, feeds), _reference(m, feeds)):
        np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL)
    assert "conv_run" not in kernels.counts
    sess = _session(m)   # the program's binary op broadcasts Z
    sess.run(None, feeds)
    kernels.counts.clear()
    for have, want in zip(sess.run(None, feeds), _reference(m, feeds)):
        np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL)
    assert kernels.counts["program_run"] == 1


def test_signature_the_program_cannot_take_runs_node_by_node_and_says_why(kernels):
    # a broadcast over 4 axes does not fold into oxk_binary's 3: the claim cannot see it (the
    # shapes are symbolic), the program refuses it, the CPU kernels run the step
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                          "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["p", "q", "r", "t"]),
                                helper.make_tensor_value_info("b", TensorProto.FLOAT, ["u", "v", "w", "x"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    sess = _session(m)
    rng = np.random.default_rng(4)
    feeds = {"a": rng.standard_normal((2, 1, 3, 1)).astype(np.float32),
             "b": rng.standard_normal((1, 4, 1, 5)).astype(np.float32)}
    live = []
    for _ in range(3):
        kernels.counts.clear()
        np.testing.assert_allclose(sess.run(None, feeds)[0], np.maximum(feeds["a"] + feeds["b"], 0), rtol=RTOL)
        # node by node: the Add on its CPU kernel, the Relu as a one-instruction program (kept
        # after the first run: the same blocks every run)
        assert kernels.counts["program_run"] == 1
        live.append(sorted(kernels.live))
    assert live[1] == live[2]
    step = [s for s in sess._plan.steps if s.provider == WASM][0]
    assert "more than 3 axes" in list(step.programs.refusals.values())[0]
    feeds["b"] = rng.standard_normal((1, 1, 3, 1)).astype(np.float32)   # a new signature that folds
    for _ in range(2):
        kernels.counts.clear()
        np.testing.assert_allclose(sess.run(None, feeds)[0], np.maximum(feeds["a"] + feeds["b"], 0), rtol=RTOL)
    assert kernels.counts["program_run"] == 1


def test_profile_option_times_copies_and_nodes(kernels, model_files):
    sess = _session(model_files["mlp"], profile=True, programs=0)
    sess.run(None, models.make_inputs("mlp"))
    ep = [p for p in sess._providers if p.name == WASM][0]
    assert {"copy in", "copy out", "FusedGemm", "Gemm"} <= set(ep.profile)
    assert all(v >= 0 for v in ep.profile.values())
    sess = _session(model_files["resnet18"], profile=True)
    for _ in range(2):
        sess.run(None, models.make_inputs("resnet18", batch=1))
    ep = [p for p in sess._providers if p.name == WASM][0]
    assert set(ep.profile) == {"program"} and ep.profile["program"] >= 0


def test_programs_option_is_checked(kernels):
    with pytest.raises(OnnxEdgeError, match=r"programs='x': expected 0 or 1"):
        _session(_fused_model("Relu", [], [1, 6, 8, 7]), programs="x")


def test_node_suite_cases_through_programs(kernels):
    """Each node-suite case of the program-only ops and the kernel ops run twice: the second run is
    the compiled program (the conformance runner runs each case once: the node-by-node path)."""
    try:
        sys.path.insert(0, ROOT)
        from tests.conformance import cases
        from tests.conformance.compare import compare_outputs
        infos = cases.load_manifest(cases.ensure_cache(generate=False, verbose=False))
    except Exception:   # no case cache here: the conformance suite says so itself
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    ops = set(onnxedge.oxk_program.PROGRAM_ONLY_OPS) | {"Conv", "Gemm", "MatMul", "MaxPool", "AveragePool",
                                                         "GlobalAveragePool", "GlobalMaxPool"}
    ran = 0
    for info in infos:
        if info.op_type not in ops or info.domain not in ("", "ai.onnx") or info.name.endswith("_expanded"):
            continue
        case = cases.load_case(info)
        try:
            sess = _session(case.model)
        except Exception:
            continue
        steps = [s for s in sess._plan.steps if s.provider == WASM]
        if not steps:
            continue
        for inputs, want in case.data_sets:
            feeds = dict(zip(case.input_names, inputs))
            sess.run(None, feeds)
            try:
                compare_outputs(list(sess.run(None, feeds)), want, info.rtol, info.atol, case.output_names)
            except Exception as e:
                raise AssertionError("%s: %s" % (info.name, e)) from e
        ran += any(p for s in steps for p in s.programs.programs.values())
    assert ran >= 100, ran   # 109 here


def _program_only_model() -> onnx.ModelProto:
    """Every program-only op kind in one graph: activations (Clip with bounds from inputs),
    binary ops with broadcasts, Softmax / LogSoftmax and a view."""
    rng = np.random.default_rng(11)
    c = numpy_helper.from_array(rng.standard_normal((1, 7)).astype(np.float32), "c")
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
             helper.make_node("Mul", ["s", "c"], ["m"]),
             helper.make_node("Tanh", ["m"], ["t"]),
             helper.make_node("Div", ["x", "t"], ["d"]),
             helper.make_node("Clip", ["d", "lo", "hi"], ["cl"]),
             helper.make_node("LeakyRelu", ["cl"], ["lr"], alpha=0.3),
             helper.make_node("Sub", ["lr", "x"], ["sb"]),
             helper.make_node("Reshape", ["sb", "shape"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y1"], axis=-1),
             helper.make_node("LogSoftmax", ["r"], ["y2"], axis=-1),
             helper.make_node("Relu", ["y2"], ["y3"])]
    g = helper.make_graph(nodes, "program_only",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 7]),
                           helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("hi", TensorProto.FLOAT, [])],
                          [helper.make_tensor_value_info("y1", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("y3", TensorProto.FLOAT, None)],
                          [c, numpy_helper.from_array(np.array([-1, 7], np.int64), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("n", [1, 5])
def test_first_run_gives_the_programs_bits(kernels, n):
    # the first run of a signature goes node by node: program-only ops run as one-instruction
    # programs of the same emitters, so it and the program runs after it agree bit for bit
    m = _program_only_model()
    rng = np.random.default_rng(n)
    feeds = {"x": rng.standard_normal((n, 7)).astype(np.float32) * 3,
             "lo": np.array(-0.5, np.float32), "hi": np.array(2.0, np.float32)}
    sess = _session(m)
    assert {r["provider"] for r in sess.partition_report()} == {WASM}
    kernels.counts.clear()
    first = sess.run(None, feeds)
    assert kernels.counts["program_run"] == 10   # every node but the Reshape (a view)
    kernels.counts.clear()
    later = sess.run(None, feeds)
    assert kernels.counts["program_run"] == 1    # the step's program
    for a, b, want in zip(first, later, _reference(m, feeds)):
        assert a.tobytes() == b.tobytes() and a.shape == b.shape
        np.testing.assert_allclose(a, want, rtol=RTOL, atol=ATOL)


def test_engine_is_the_default_where_the_module_is(kernels, model_files):
    # the installed module plays the page's: a session asking for the CPU provider alone gets the
    # wasm engine in front of it (as natively X64ExecutionProvider / NeonExecutionProvider); session.cpu_engine "0": numpy
    from onnxedge.providers import discovery
    assert discovery.cpu_engine() == WASM
    feeds = models.make_inputs("mlp")
    for providers in (None, ["CPUExecutionProvider"], ["wasm"]):
        sess = onnxedge.InferenceSession(model_files["mlp"], providers=providers)
        assert {r["provider"] for r in sess.partition_report()} == {WASM}
        assert sess.get_providers()[-1] == "CPUExecutionProvider"
        sess.run(None, feeds)
        kernels.counts.clear()
        for have, want in zip(sess.run(None, feeds), _reference(model_files["mlp"], feeds)):
            np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL)
        assert kernels.counts["program_run"] == 1
    so = onnxedge.SessionOptions()
    so.add_session_config_entry("session.cpu_engine", "0")
    sess = onnxedge.InferenceSession(model_files["mlp"], so)
    assert {r["provider"] for r in sess.partition_report()} == {"CPUExecutionProvider"}


def test_without_the_module_the_native_engine_stays(kernels):
    # natively (no page module) the wasm provider is not available, so the native engine (or none)
    # is the default, as before
    from onnxedge.providers import discovery
    transport.install(None)
    try:
        assert discovery.cpu_engine() != WASM
        sess = onnxedge.InferenceSession(_program_only_model().SerializeToString())
        assert WASM not in {r["provider"] for r in sess.partition_report()}
    finally:
        transport.install(kernels)


def test_winograd_convs_in_the_page_path(kernels):
    """A 3x3 stride-1 conv with many channels (and a residual Z) takes Winograd F(2x2, 3x3) in the
    page's ConvOp (its weights packed once for it), node by node and as a program, within
    onnxruntime's tolerance; a strided one keeps the auto path."""
    rng = np.random.default_rng(11)
    w = numpy_helper.from_array((rng.standard_normal((40, 48, 3, 3)) * 0.1).astype(np.float32), "w")
    w2 = numpy_helper.from_array((rng.standard_normal((40, 40, 3, 3)) * 0.1).astype(np.float32), "w2")
    b = numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r"], ["y"]),
             helper.make_node("Conv", ["y", "w2"], ["s"], pads=[1, 1, 1, 1], strides=[2, 2])]
    g = helper.make_graph(nodes, "wino", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 48, 11, 17])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "s")], [w, w2, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    feeds = {"x": rng.standard_normal((1, 48, 11, 17)).astype(np.float32)}
    want = _reference(m, feeds)
    for programs in ("0", "1"):
        kernels.counts.clear()
        sess = _session(m, programs=programs)
        for _ in range(2):
            outs = sess.run(None, feeds)
            for have, ref in zip(outs, want):
                np.testing.assert_allclose(have, ref, rtol=RTOL, atol=ATOL)
        assert kernels.counts.get("oxk_conv_pack_winograd") == 2, kernels.counts   # the two stride-1 convs
