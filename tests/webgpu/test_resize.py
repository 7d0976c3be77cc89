"""Resize / Upsample on WebGPU against the CPU provider: every mode and coordinate transform,
scales and sizes, axes, aspect-ratio policies, crops, non-float nearest, and odd shapes."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .helpers import compare, model

mk = helper.make_node
rng = np.random.default_rng(7)
EMPTY = np.zeros(0, np.float32)


def _x(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("ct", ["half_pixel", "pytorch_half_pixel", "align_corners",
                                "asymmetric", "half_pixel_symmetric", "tf_half_pixel_for_nn"])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"])
def test_nearest_modes_with_scales(webgpu, ct, nearest_mode):
    x = _x(2, 3, 5, 7)
    node = mk("Resize", ["x", "", "s"], ["y"], mode="nearest", nearest_mode=nearest_mode,
              coordinate_transformation_mode=ct)
    compare(model([node], {"x": x}, {"s": np.array([1, 1, 2.5, 0.6], np.float32)}, opset=19),
            {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("ct", ["half_pixel", "pytorch_half_pixel", "align_corners",
                                "asymmetric", "half_pixel_symmetric"])
@pytest.mark.parametrize("sizes", [(9, 13), (3, 4), (1, 1), (5, 7)])
def test_linear_sizes(webgpu, ct, sizes):
    x = _x(1, 2, 5, 7)
    node = mk("Resize", ["x", "", "", "z"], ["y"], mode="linear",
              coordinate_transformation_mode=ct)
    compare(model([node], {"x": x}, {"z": np.array((1, 2) + sizes, np.int64)}, opset=19),
            {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [dict(mode="cubic"), dict(mode="cubic", exclude_outside=1,
                                                            cubic_coeff_a=-0.5),
                                   dict(mode="linear", antialias=1),
                                   dict(mode="cubic", antialias=1)])
@pytest.mark.parametrize("scales", [(1, 1, 0.45, 0.7), (1, 1, 1.8, 3.0)])
def test_cubic_and_antialias(webgpu, attrs, scales):
    x = _x(1, 3, 11, 9)
    node = mk("Resize", ["x", "", "s"], ["y"], **attrs)
    compare(model([node], {"x": x}, {"s": np.array(scales, np.float32)}, opset=19), {"x": x},
            rtol=1e-5, atol=1e-5)


def test_axes_policies_crop_and_ints(webgpu):
    x = _x(2, 3, 6, 8)
    for policy in ("not_larger", "not_smaller"):
        node = mk("Resize", ["x", "", "", "z"], ["y"], mode="linear", axes=[3, 2],
                  keep_aspect_ratio_policy=policy)
        compare(model([node], {"x": x}, {"z": np.array([5, 9], np.int64)}, opset=19), {"x": x},
                rtol=1e-5, atol=1e-6)
    node = mk("Resize", ["x", "roi", "", "z"], ["y"], mode="linear", extrapolation_value=7.5,
              coordinate_transformation_mode="tf_crop_and_resize")
    roi = np.array([0, 0, -0.2, 0.4, 1, 1, 0.9, 1.3], np.float32)
    compare(model([node], {"x": x}, {"roi": roi, "z": np.array([2, 3, 5, 6], np.int64)},
                  opset=19), {"x": x}, rtol=1e-5, atol=1e-6)
    ids = rng.integers(-1000, 1000, (1, 2, 3, 5)).astype(np.int64)
    node = mk("Resize", ["x", "", "s"], ["y"], mode="nearest")
    compare(model([node], {"x": ids}, {"s": np.array([1, 1, 2, 1.5], np.float32)}, opset=19),
            {"x": ids}, rtol=0, atol=0)


def test_rank_3_5_and_all_axes(webgpu):
    x = _x(4, 6, 10)
    node = mk("Resize", ["x", "", "s"], ["y"], mode="linear")
    compare(model([node], {"x": x}, {"s": np.array([0.5, 1.5, 0.75], np.float32)}, opset=13),
            {"x": x}, rtol=1e-5, atol=1e-6)
    x = _x(1, 2, 3, 4, 5)
    compare(model([node], {"x": x}, {"s": np.array([1, 1, 2, 0.5, 1.4], np.float32)},
                  opset=13), {"x": x}, rtol=1e-5, atol=1e-6)


def test_legacy_resize10_and_upsample(webgpu):
    x = _x(1, 2, 3, 4)
    s = {"s": np.array([1, 1, 2, 3], np.float32)}
    for mode in ("nearest", "linear"):
        compare(model([mk("Resize", ["x", "s"], ["y"], mode=mode)], {"x": x}, s, opset=10),
                {"x": x}, rtol=1e-5, atol=1e-6)
        compare(model([mk("Upsample", ["x", "s"], ["y"], mode=mode)], {"x": x}, s, opset=9),
                {"x": x}, rtol=1e-5, atol=1e-6)


def test_same_size_and_empty(webgpu):
    x = _x(1, 2, 3, 4)
    node = mk("Resize", ["x", "", "s"], ["y"], mode="linear")
    compare(model([node, mk("Neg", ["y"], ["z"])], {"x": x},
                  {"s": np.array([1, 1, 1, 1], np.float32)}, opset=19), {"x": x})
    compare(model([node], {"x": x}, {"s": np.array([1, 1, 0.2, 1], np.float32)}, opset=19),
            {"x": x})


def test_unknown_dtype_stays_on_cpu(webgpu):
    import onnxedge
    x = np.zeros((1, 1, 2, 2), np.float64)
    m = model([mk("Resize", ["x", "", "s"], ["y"], mode="linear")], {"x": x},
              {"s": np.array([1, 1, 2, 2], np.float32)}, opset=19)
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    (row,) = sess.partition_report()
    assert row["provider"] == "CPUExecutionProvider"
    assert "float64" in row["fallback_reasons"]["WebGpuExecutionProvider"]
