"""The specialized kernel paths against the CPU provider: vec4 tile loads in MatMul / Gemm /
Conv (inner dimension a multiple of 4, else scalar), and the workgroup-per-row tree reductions
of Softmax, LayerNormalization and Reduce* on edge lengths (1, non-powers of two, 256 +- 1)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnxedge.web.webgpu import device as webgpu_device
from onnxedge.web.webgpu.ops import normalization, reduction

from .helpers import compare, model

mk = helper.make_node
rng = np.random.default_rng(11)


def f(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _keys(prefix):
    return [k for k in webgpu_device.default_device()._pipelines if k.startswith(prefix)]


def _used(prefix, marker):
    return any(marker in k for k in _keys(prefix))


@pytest.mark.parametrize("a,b,marker", [
    ((37, 44), (44, 13), "TA=vec4<f32>,TB=f32"),          # A along K, B scalar (N = 13)
    ((2, 3, 36, 64), (64, 20), "TA=vec4<f32>,TB=vec4<f32>"),  # batches folded into M
    ((3, 5, 8), (3, 8, 12), "TA=vec4<f32>,TB=vec4<f32>"),  # batched, both along the contiguous axis
    ((4, 1, 7, 12), (3, 12, 9), "TA=vec4<f32>,TB=f32"),    # broadcast batches
    ((70, 33), (33, 68), "TA=f32,TB=vec4<f32>"),           # K = 33: A scalar, B along N
    ((1, 4), (4, 4), "TA=vec4<f32>,TB=vec4<f32>"),
])
def test_matmul_vec4(webgpu, a, b, marker):
    x, y = f(*a), f(*b)
    compare(model([mk("MatMul", ["a", "b"], ["y"])], {"a": x, "b": y}), {"a": x, "b": y},
            rtol=1e-4, atol=1e-4)
    assert _used("matmul(", marker), _keys("matmul(")


@pytest.mark.parametrize("ta,tb,marker", [(0, 1, "TA=vec4<f32>,TB=vec4<f32>"),
                                          (1, 1, "TA=f32,TB=vec4<f32>"),
                                          (1, 0, "TA=f32,TB=vec4<f32>")])
def test_gemm_vec4_transposes(webgpu, ta, tb, marker):
    a = f(48, 67) if ta else f(67, 48)
    b = f(36, 48) if tb else f(48, 36)
    feeds = {"a": a, "b": b, "c": f(36)}
    compare(model([mk("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb, alpha=0.7)], feeds),
            feeds, atol=1e-4)
    assert _used("matmul(", marker)


@pytest.mark.parametrize("x,w,attrs,marker", [
    ((2, 4, 9, 11), (6, 4, 3, 3), dict(pads=[1, 1, 1, 1]), "TA=vec4<f32>,TB=f32"),   # K = 36
    ((1, 6, 8, 8), (10, 6, 1, 1), {}, "TA=f32,TB=vec4<f32>"),          # pointwise, P = 64
    ((2, 8, 4, 6), (6, 4, 1, 1), dict(group=2), "TA=vec4<f32>,TB=vec4<f32>"),
    ((1, 8, 7, 7), (5, 8, 1, 1), {}, "TA=vec4<f32>,TB=f32"),           # P = 49: gather
    ((1, 8, 8, 8), (5, 8, 1, 1), dict(strides=[2, 2]), "TA=vec4<f32>,TB=f32"),
])
def test_conv_vec4(webgpu, x, w, attrs, marker):
    feeds = {"x": f(*x), "w": f(*w), "b": f(w[0])}
    compare(model([mk("Conv", ["x", "w", "b"], ["y"], **attrs)], feeds), feeds, atol=1e-4)
    assert _used("conv(", marker)


@pytest.mark.parametrize("D", [1, 3, 127, 255, 256, 257, 1000])
def test_softmax_layernorm_tree(webgpu, monkeypatch, D):
    monkeypatch.setattr(normalization, "WG_MIN_ROW", 1)
    x = f(3, D) * 5
    compare(model([mk("Softmax", ["x"], ["y"], axis=-1)], {"x": x}), {"x": x}, atol=1e-6)
    compare(model([mk("LogSoftmax", ["x"], ["y"], axis=0)], {"x": x}), {"x": x}, atol=1e-5)
    feeds = {"x": x, "s": f(D), "b": f(D)}
    compare(model([mk("LayerNormalization", ["x", "s", "b"], ["y"])], feeds), feeds, atol=1e-4)
    assert _keys("normalization_rows_wg(")


def test_tree_is_the_default_for_long_rows(webgpu, monkeypatch):
    dev = webgpu_device.default_device()
    used = []
    real = dev.execute

    def spy(cmds):
        used.extend(c.pipeline.key.split("(")[0] for c in cmds.commands if hasattr(c, "pipeline"))
        return real(cmds)
    monkeypatch.setattr(dev, "execute", spy)
    x = f(2, 3, normalization.WG_MIN_ROW + 77)
    compare(model([mk("Softmax", ["x"], ["y"], axis=-1)], {"x": x}), {"x": x}, atol=1e-6)
    feeds = {"x": f(2, 3, 3, 300), "s": f(3), "b": f(3)}   # InstanceNorm over 900 elements
    compare(model([mk("InstanceNormalization", ["x", "s", "b"], ["y"])], feeds), feeds,
            atol=1e-4)
    x = f(2, reduction.WG_MIN_COUNT + 5)
    compare(model([mk("ReduceMean", ["x"], ["y"], axes=[1])], {"x": x}), {"x": x}, atol=1e-6)
    x = f(2, normalization.WG_MIN_ROW - 1)
    compare(model([mk("Softmax", ["x"], ["y"], axis=-1)], {"x": x}), {"x": x}, atol=1e-6)
    assert used == ["normalization_rows_wg", "normalization_rows_wg", "reduction_wg",
                    "normalization_rows"], used


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum"])
@pytest.mark.parametrize("shape,axes", [((5, 1), [1]), ((4, 3), [1]), ((3, 300), [1]),
                                        ((2, 257, 3), [1]), ((6, 7, 9), [0, 2])])
def test_reduce_tree(webgpu, monkeypatch, op, shape, axes):
    monkeypatch.setattr(reduction, "WG_MIN_COUNT", 1)
    x = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if op == "ReduceProd":
        x = rng.uniform(0.97, 1.03, shape).astype(np.float32)
    compare(model([mk(op, ["x", "a"], ["y"], keepdims=0)], {"x": x},
                  {"a": np.array(axes, np.int64)}, opset=18), {"x": x}, rtol=1e-4, atol=1e-6)
    assert _keys("reduction_wg(")
