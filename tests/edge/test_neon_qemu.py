"""The aarch64 NEON build under qemu-aarch64 -cpu cortex-a72 (a Raspberry Pi 4's core), running
onnxedge itself in the ARM CPython sysroot (make setup: scripts/arm_sysroot.sh): kernel checks on
edge shapes against numpy, and the MLP, a small CNN and a graph of the normalizations and
reductions end to end against onnxruntime run natively on the host. A second run with `-cpu max` covers the dot-product int8 loop."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from onnxedge import model_io

from neon_helpers import REPO, ensure_built, mlp, ort_run, small_cnn, small_cnn_inputs

ARM = os.environ.get("ARM_DIR", os.path.join(REPO, ".arm"))
QEMU_PY = os.path.join(REPO, "scripts", "qemu-python")
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "neon_qemu_job.py")
CONVS = {  # name: (x shape, w shape, group, strides, dilations, pads, path)
    "conv_direct": ((1, 3, 7, 9), (5, 3, 3, 3), 1, [1, 1], [1, 1], [1, 1, 1, 1], "direct3x3"),
    "conv_dw": ((1, 6, 9, 7), (6, 1, 3, 3), 6, [2, 1], [1, 1], [1, 1, 0, 1], "depthwise"),
    "conv_im2col": ((2, 4, 6, 5), (6, 2, 3, 2), 2, [1, 2], [2, 1], [2, 0, 1, 1], "im2col"),
}
SGEMM = [(1, 1, 1), (7, 13, 5), (9, 17, 260), (1, 128, 64)]
# NEON register-tile paths: row-major A strips of 1/2/4/8 rows and packed A (M >= 8, N > 16), K
# tails (K % 4), N tails (N % 8), K past one 256 block, transposes, alpha/beta, bias + activation.
GEMM_EXT = [  # M, N, K, transA, transB, alpha, beta, bias kind (0 none, 1 row, 2 col), act, params
    (2, 9, 7, 0, 0, 1.0, 0.0, 2, "Relu", ()),
    (3, 16, 4, 0, 1, 1.0, 0.0, 1, "Clip", (-0.3, 0.4)),
    (5, 8, 13, 0, 0, 1.0, 0.0, 0, "", ()),
    (13, 40, 9, 0, 0, 1.0, 0.0, 2, "Relu", ()),
    (17, 33, 300, 0, 1, 1.0, 0.0, 1, "LeakyRelu", (0.2,)),
    (9, 24, 6, 1, 0, 0.5, -2.0, 2, "Sigmoid", ()),
    (16, 64, 64, 0, 0, 1.0, 1.0, 0, "Tanh", ()),
]
# oxk_conv2d_run plans (auto path): im2col panels that cross output rows, stride 2, pointwise,
# depthwise stride 1 (16-wide register chunks and tails) and stride 2.
CONV_PLANS = {  # name: (x shape, w shape, group, strides, dilations, pads)
    "plan_im2col_rows": ((2, 3, 9, 13), (10, 3, 3, 3), 1, [1, 1], [1, 1], [1, 1, 1, 1]),
    "plan_im2col_s2": ((1, 4, 11, 10), (8, 4, 3, 3), 1, [2, 2], [1, 1], [1, 1, 0, 1]),
    "plan_pointwise": ((1, 12, 5, 7), (16, 12, 1, 1), 1, [1, 1], [1, 1], [0, 0, 0, 0]),
    "plan_dw_s1": ((1, 5, 6, 37), (5, 1, 3, 3), 5, [1, 1], [1, 1], [1, 1, 1, 1]),
    "plan_dw_s2": ((1, 4, 9, 9), (4, 1, 3, 3), 4, [2, 2], [1, 1], [1, 1, 1, 1]),
}
POOL_EXT = {  # name: (x shape, kind, kernel, strides, pads): vector paths and their tails
    "pool2x2s2_max": ((1, 3, 8, 21), "max", [2, 2], [2, 2], [0, 0, 0, 0]),
    "pool2x2s2_avg": ((1, 2, 9, 18), "avg", [2, 2], [2, 2], [0, 0, 1, 0]),
    "pool3x3s2_max": ((1, 2, 13, 23), "max", [3, 3], [2, 2], [1, 1, 1, 1]),
    "pool3x3s1_avg": ((1, 2, 7, 14), "avg", [3, 3], [1, 1], [0, 0, 0, 0]),
}


def _act(y, act, p):
    if act == "Relu":
        return np.maximum(y, 0)
    if act == "Clip":
        return np.clip(y, p[0], p[1])
    if act == "LeakyRelu":
        return np.where(y >= 0, y, y * p[0])
    if act == "Sigmoid":
        return 1 / (1 + np.exp(-y))
    if act == "Tanh":
        return np.tanh(y)
    return y


def _conv_ref(x, w, group, strides, dil, pads):
    from onnxedge.kernels.conv import conv
    return conv(x, w, None, group=group, strides=strides, dilations=dil, pads=pads)


def _prepare(d):
    rng = np.random.default_rng(0)
    cases = {"sgemm": [], "conv": [], "pool": [], "qgemm": [], "models": []}
    want = {}
    for M, N, K in SGEMM:
        c = "sgemm_%d_%d_%d" % (M, N, K)
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        bias = rng.standard_normal(N).astype(np.float32)
        for k, v in (("a", a), ("b", b), ("bias", bias)):
            np.save(os.path.join(d, "%s_%s.npy" % (c, k)), v)
        y = a.astype(np.float64) @ b + bias
        want[c] = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
        cases["sgemm"].append(c)
    for c, (xs, ws, group, s, dil, pads, path) in CONVS.items():
        x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
        ref = np.maximum(_conv_ref(x, w, group, s, dil, pads), 0)
        np.save(os.path.join(d, c + "_x.npy"), x)
        np.save(os.path.join(d, c + "_w.npy"), w)
        json.dump({"group": group, "strides": s, "dilations": dil, "pads": pads, "path": path,
                   "out": list(ref.shape[2:])}, open(os.path.join(d, c + ".json"), "w"))
        want[c] = ref
        cases["conv"].append(c)
    from onnxedge.kernels.pool import average_pool, max_pool
    cases["gemm_ext"] = []
    for i, (M, N, K, ta, tb, alpha, beta, kind, act, params) in enumerate(GEMM_EXT):
        c = "gemm_ext_%d" % i
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        cm = rng.standard_normal((M, N)).astype(np.float32)
        bias = rng.standard_normal(M if kind == 1 else N).astype(np.float32)
        np.savez(os.path.join(d, c + ".npz"), a=np.ascontiguousarray(a.T) if ta else a,
                 b=np.ascontiguousarray(b.T) if tb else b, c=cm, bias=bias)
        json.dump({"ta": ta, "tb": tb, "alpha": alpha, "beta": beta, "kind": kind, "act": act,
                   "params": list(params)}, open(os.path.join(d, c + ".json"), "w"))
        y = alpha * (a.astype(np.float64) @ b) + beta * cm
        y = y + (bias[:, None] if kind == 1 else bias[None, :]) if kind else y
        want[c] = _act(y, act, params)
        cases["gemm_ext"].append(c)
    cases["conv_plans"] = []
    for c, (xs, ws, group, s, dil, pads) in CONV_PLANS.items():
        x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
        bias = rng.standard_normal(ws[0]).astype(np.float32)
        from onnxedge.kernels.conv import conv
        ref = conv(x, w, bias, group=group, strides=s, dilations=dil, pads=pads)
        np.savez(os.path.join(d, c + ".npz"), x=x, w=w, bias=bias)
        json.dump({"group": group, "strides": s, "dilations": dil, "pads": pads, "out": list(ref.shape[2:])},
                  open(os.path.join(d, c + ".json"), "w"))
        want[c] = np.clip(ref, -0.5, 1.0)
        cases["conv_plans"].append(c)
    cases["pool_ext"] = []
    for c, (xs, kind, k, s, pads) in POOL_EXT.items():
        x = rng.standard_normal(xs).astype(np.float32)
        attrs = dict(kernel_shape=k, strides=s, pads=pads)
        ref = max_pool(None, x, **attrs) if kind == "max" else average_pool(x, **attrs)
        np.save(os.path.join(d, c + "_x.npy"), x)
        json.dump({"kind": kind, "kernel": k, "strides": s, "pads": pads, "out": list(ref.shape[2:]),
                   "include_pad": False}, open(os.path.join(d, c + ".json"), "w"))
        want[c] = ref
        cases["pool"].append(c)
    x = rng.standard_normal((1, 3, 7, 8)).astype(np.float32)
    for c, kind in (("pool_max", "max"), ("pool_avg", "avg")):
        attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
        ref = max_pool(None, x, **attrs) if kind == "max" else average_pool(x, count_include_pad=1, **attrs)
        np.save(os.path.join(d, c + "_x.npy"), x)
        json.dump({"kind": kind, "kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                   "out": list(ref.shape[2:]), "include_pad": kind == "avg"}, open(os.path.join(d, c + ".json"), "w"))
        want[c] = ref
        cases["pool"].append(c)
    for c, ta, tb in (("q_u8s8", np.uint8, np.int8), ("q_s8s8", np.int8, np.int8)):
        a = rng.integers(np.iinfo(ta).min, np.iinfo(ta).max + 1, (5, 37)).astype(ta)
        b = rng.integers(-128, 128, (37, 7)).astype(tb)
        za, zb = np.array(17, ta), rng.integers(-5, 5, 7).astype(tb)
        for k, v in (("a", a), ("b", b), ("za", za), ("zb", zb)):
            np.save(os.path.join(d, "%s_%s.npy" % (c, k)), v)
        want[c] = (a.astype(np.int64) - 17) @ (b.astype(np.int64) - zb.astype(np.int64))
        cases["qgemm"].append(c)
    (m1, f1), m2, f2 = mlp(), small_cnn(), small_cnn_inputs(batch=1)
    m3, f3 = _norm_model()
    m4, f4 = _movement_model()
    for c, model, feeds in (("mlp", m1, f1), ("cnn", m2, f2), ("norm", m3, f3), ("move", m4, f4)):
        # the sysroot has no `onnx` package: the model goes as .oxe (numpy + flatbuffers only)
        model_io.save(model_io.load(model), os.path.join(d, c + ".oxe"))
        np.savez(os.path.join(d, c + "_in.npz"), **feeds)
        want[c] = ort_run(model, feeds)[0]   # onnxruntime, natively on the host
        cases["models"].append(c)
    json.dump(cases, open(os.path.join(d, "cases.json"), "w"))
    return want


def _movement_model():
    """The engine's data movement (issue #17, movement.c) chained in one graph: Transpose, Resize
    (linear, then nearest by sizes), Slice with a negative step, reflect Pad, DepthToSpace (CRD),
    Split, Gather of run-time int64 indices, Concat, Expand and Tile."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(12)
    n = helper.make_node
    i64 = lambda *v: np.array(v, np.int64)   # noqa: E731
    inits = {"sc": np.array([1, 1, 2, 1.5], np.float32), "st": i64(-1), "en": i64(-100), "ax": i64(3),
             "sp": i64(-2), "pads": i64(0, 0, 1, 2, 0, 0, 2, 1), "split": i64(10, 16), "shape": i64(2, 1, 1, 1),
             "sizes": i64(2, 4, 15, 23), "reps": i64(1, 1, 1, 2)}
    nodes = [n("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]),
             n("Resize", ["t", "", "sc"], ["r"], mode="linear"),
             n("Slice", ["r", "st", "en", "ax", "sp"], ["s"]),
             n("Pad", ["s", "pads"], ["p"], mode="reflect"),
             n("DepthToSpace", ["p"], ["d"], blocksize=2, mode="CRD"),
             n("Split", ["d", "split"], ["a", "b"], axis=2),
             n("Gather", ["b", "ids"], ["g"], axis=2),
             n("Concat", ["a", "g"], ["c"], axis=1),
             n("Expand", ["c", "shape"], ["e"]),
             n("Resize", ["e", "", "", "sizes"], ["z"], mode="nearest", nearest_mode="floor",
               coordinate_transformation_mode="asymmetric"),
             n("Tile", ["z", "reps"], ["y"])]
    g = helper.make_graph(nodes, "move", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 5]),
                                          helper.make_tensor_value_info("ids", TensorProto.INT64, [10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m.SerializeToString(), {"x": rng.standard_normal((1, 8, 6, 5)).astype(np.float32),
                                   "ids": rng.integers(-16, 16, 10).astype(np.int64)}


def _norm_model():
    """The engine's normalizations and reductions (issue #17) in one graph, odd sizes and an offset
    far larger than the spread: LayerNormalization, InstanceNormalization, BatchNormalization,
    ReduceMean (axes input), ReduceMax, ReduceL2."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(4)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
             n("InstanceNormalization", ["ln", "c1", "c2"], ["inn"], epsilon=1e-4),
             n("BatchNormalization", ["inn", "c1", "c2", "c3", "v"], ["bn"]),
             n("ReduceMax", ["bn", "ax1"], ["mx"], keepdims=1),
             n("Add", ["bn", "mx"], ["s"]),
             n("ReduceMean", ["s", "axes"], ["m"], keepdims=1),
             n("ReduceL2", ["m", "ax1"], ["y"], keepdims=0)]
    inits = {"g": f(77), "b": f(77), "c1": f(6), "c2": f(6), "c3": f(6),
             "v": np.abs(f(6)) + np.float32(0.5), "axes": np.array([2], np.int64),
             "ax1": np.array([1], np.int64)}
    g = helper.make_graph(nodes, "norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 77])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m.SerializeToString(), {"x": (f(2, 6, 77) * 0.5 + np.float32(300.0)).astype(np.float32)}


def _qemu(d, stage, cpu="cortex-a72", timeout=600):
    env = dict(os.environ, PYTHONPATH=stage, QEMU_CPU=cpu, ARM_DIR=ARM)
    r = subprocess.run([QEMU_PY, JOB, d], env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, "qemu job failed:\n%s\n%s" % (r.stdout[-3000:], r.stderr[-3000:])
    return json.load(open(os.path.join(d, "report.json")))


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    if not os.path.exists(os.path.join(ARM, "sysroot", "usr", "bin", "python3.11")):
        pytest.fail("no aarch64 sysroot at %s: run `make setup` (scripts/arm_sysroot.sh)" % ARM)
    ensure_built("aarch64")
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import arm_stage
    stage = arm_stage.stage(str(tmp_path_factory.mktemp("stage") / "site"))
    d = str(tmp_path_factory.mktemp("neon_qemu"))
    want = _prepare(d)
    return d, stage, want


@pytest.fixture(scope="module")
def a72(arm):
    d, stage, want = arm
    return _qemu(d, stage), d, want


def test_runs_as_aarch64_neon(a72):
    report = a72[0]
    assert report["machine"] == "aarch64"
    assert report["backend"] == "neon"
    assert report["dotprod"] is False            # Cortex-A72 has no dot-product extension
    assert "NeonExecutionProvider" in report["available"]
    assert report["library"].endswith("aarch64/libonnxedge_kernels.so")


@pytest.mark.parametrize("case", ["sgemm_%d_%d_%d" % s for s in SGEMM] + list(CONVS) +
                         ["pool_max", "pool_avg"])
def test_float_kernels_under_qemu(a72, case):
    _, d, want = a72
    np.testing.assert_allclose(np.load(os.path.join(d, "out_" + case + ".npy")), want[case],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["gemm_ext_%d" % i for i in range(len(GEMM_EXT))] + list(CONV_PLANS) +
                         list(POOL_EXT))
def test_register_tile_paths_under_qemu(a72, case):
    _, d, want = a72
    got = np.load(os.path.join(d, "out_" + case + ".npy"))
    np.testing.assert_allclose(got, want[case], rtol=1e-4, atol=1e-4)
    plan = os.path.join(d, "out_" + case + "_plan.npy")
    if case.startswith("gemm_ext") and os.path.exists(plan):   # the compiled-plan entry: same bits
        np.testing.assert_array_equal(np.load(plan), got)


def test_concurrent_sessions_under_qemu(a72):
    report = a72[0]
    assert report["threads"]["runs"] >= 8
    assert report["threads"]["max_abs_diff"] == 0.0


@pytest.mark.parametrize("case", ["q_u8s8", "q_s8s8"])
def test_int8_gemm_exact_under_qemu(a72, case):
    _, d, want = a72
    np.testing.assert_array_equal(np.load(os.path.join(d, "out_" + case + ".npy")), want[case])


def test_normalizations_and_reductions_match_onnxruntime_under_qemu(a72):
    report, d, want = a72
    np.testing.assert_allclose(np.load(os.path.join(d, "out_norm.npy")), want["norm"], rtol=1e-4, atol=1e-4)
    on_neon = {op for op, p in report["partition"]["norm"] if p == "NeonExecutionProvider"}
    assert on_neon >= {"LayerNormalization", "InstanceNormalization", "BatchNormalization", "ReduceMean",
                       "ReduceMax", "ReduceL2"}


def test_data_movement_matches_onnxruntime_under_qemu(a72):
    report, d, want = a72
    np.testing.assert_allclose(np.load(os.path.join(d, "out_move.npy")), want["move"], rtol=1e-5, atol=1e-5)
    assert {p for _, p in report["partition"]["move"]} == {"NeonExecutionProvider"}


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_models_match_onnxruntime_under_qemu(a72, model):
    report, d, want = a72
    np.testing.assert_allclose(np.load(os.path.join(d, "out_" + model + ".npy")), want[model],
                               rtol=1e-4, atol=1e-5)
    on_neon = {op for op, p in report["partition"][model] if p == "NeonExecutionProvider"}
    assert on_neon & ({"Conv", "FusedConv"} if model == "cnn" else {"Gemm", "FusedGemm"})


def test_dotprod_int8_loop_under_qemu_cpu_max(arm, tmp_path):
    d, stage, want = arm
    cases = json.load(open(os.path.join(d, "cases.json")))
    sub = str(tmp_path)
    for name in os.listdir(d):   # only the int8 cases: -cpu max runs the same job, smaller
        if name.startswith("q_"):
            os.symlink(os.path.join(d, name), os.path.join(sub, name))
    json.dump({"qgemm": cases["qgemm"]}, open(os.path.join(sub, "cases.json"), "w"))
    report = _qemu(sub, stage, cpu="max")
    assert report["dotprod"] is True
    for c in cases["qgemm"]:
        np.testing.assert_array_equal(np.load(os.path.join(sub, "out_" + c + ".npy")), want[c])
