"""The fused-op contract (onnxedge.fused_ops): one domain, one activation list with the C
epilogue codes and defaults, one FusedConv kernel, and every provider reading them."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from onnxedge import fused_ops
from onnxedge.errors import InvalidArgument
from onnxedge.fused_ops import Activation
from onnxedge.kernels import registry
from onnxedge.numeric import erf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _header_codes() -> dict:
    with open(os.path.join(ROOT, "edge", "kernels", "oxk.h")) as f:
        text = f.read()
    body = re.search(r"enum\s*\{([^}]*OXK_ACT_[^}]*)\}", text).group(1)
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"OXK_ACT_(\w+)\s*=\s*(\d+)", body)}


def test_c_header_codes_match_the_enum():
    codes = _header_codes()
    assert codes, "no OXK_ACT_* enum in oxk.h"
    ours = {a.name: a.code for a in Activation if a.code is not None}
    assert codes == ours


def _ref(name: str, v: np.ndarray, p: list) -> np.ndarray:
    v = v.astype(np.float64)
    return {"": lambda: v, "Relu": lambda: np.maximum(v, 0), "Tanh": lambda: np.tanh(v),
            "Sigmoid": lambda: 1 / (1 + np.exp(-v)),
            "LeakyRelu": lambda: np.where(v < 0, p[0] * v, v),
            "Clip": lambda: np.minimum(np.maximum(v, p[0]), p[1]),
            "HardSigmoid": lambda: np.clip(p[0] * v + p[1], 0, 1),
            "HardSwish": lambda: v * np.clip(v / 6 + 0.5, 0, 1),
            "Elu": lambda: np.where(v > 0, v, p[0] * np.expm1(v)),
            "Softplus": lambda: np.logaddexp(0, v),
            "Silu": lambda: v / (1 + np.exp(-v)),
            "Gelu": lambda: 0.5 * v * (1 + erf(v / np.sqrt(2))),
            "GeluTanh": lambda: v / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))}[name]()


@pytest.mark.parametrize("name,given,used", [
    ("", None, []), ("Relu", None, []), ("Tanh", None, []), ("Sigmoid", None, []),
    ("LeakyRelu", None, [0.01]), ("LeakyRelu", [0.3], [0.3]),
    ("Clip", None, [-np.inf, np.inf]), ("Clip", [-1.0], [-1.0, np.inf]),
    ("Clip", [0.0, 6.0], [0.0, 6.0]), ("HardSigmoid", None, [0.2, 0.5]),
    ("HardSigmoid", [0.3, 0.1], [0.3, 0.1]), ("HardSwish", None, []), ("Elu", None, [1.0]),
    ("Elu", [0.5], [0.5]), ("Softplus", None, []), ("Silu", None, []), ("Gelu", None, []),
    ("GeluTanh", None, [])])
def test_apply_activation_against_reference(name, given, used):
    x = np.array([-np.inf, -30.0, -2.5, -0.1, 0.0, 0.4, 3.0, 8.0, np.inf], np.float32)
    with np.errstate(all="ignore"):
        want = _ref(name, x, used)
    got = fused_ops.apply_activation(name, x.copy(), given)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=1e-7)


def test_clip_defaults_are_unbounded_and_errors_name_the_op():
    y = fused_ops.apply_activation("Clip", np.array([np.inf, -np.inf, 3e38], np.float32))
    assert y[0] == np.inf and y[1] == -np.inf
    assert fused_ops.params("Clip") == [-np.inf, np.inf]
    assert fused_ops.epilogue_params("LeakyRelu", [0.2, 9.0]) == (0.2, 0.0)
    assert fused_ops.epilogue_params("Relu", [5.0]) == (0.0, 0.0)
    with pytest.raises(InvalidArgument, match="FusedGemm.*Selu"):
        fused_ops.apply_activation("Selu", np.ones(2, np.float32), op="FusedGemm")
    with pytest.raises(InvalidArgument, match="Exp"):   # a math op, not an activation
        fused_ops.apply_activation("Exp", np.ones(2, np.float32))
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    assert fused_ops.apply_activation("Relu", ro) is not ro


def test_one_fused_conv_kernel_for_both_domains():
    ms = registry.resolve("com.microsoft", "FusedConv", 1).fn
    ours = registry.resolve(fused_ops.DOMAIN, fused_ops.FUSED_CONV, 1).fn
    assert ms is ours


@pytest.mark.parametrize("domain", [fused_ops.DOMAIN, fused_ops.MS_DOMAIN])
def test_fused_conv_z_rule(domain):
    """Z is added as ai.onnx Add adds (the optimizer's residual fusion relies on it)."""
    fn = registry.resolve(domain, "FusedConv", 1).fn
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 2, 4, 4)).astype(np.float32), \
        rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    conv = registry.resolve("", "Conv", 17).fn(x, w)
    for z in (rng.standard_normal((1, 3, 4, 4)), rng.standard_normal((1, 3, 1, 1)),
              rng.standard_normal((2, 3, 1, 1))):
        z = z.astype(np.float32)
        got = fn(x, w, None, z, activation="Relu")
        want = np.maximum(conv + z, 0)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_providers_read_the_contract():
    from onnxedge.edge.coreml import support as coreml
    from onnxedge.edge.nnapi import support as nnapi
    from onnxedge.web.wasm import claims
    assert claims.ACT == {n: fused_ops.C_CODES[n] for n in fused_ops.C_EPILOGUE}
    assert set(coreml.ACTIVATIONS) <= set(fused_ops.FUSABLE)
    assert coreml.FUSED == nnapi.FUSED_DOMAIN == fused_ops.DOMAIN
    # every activation a fusion writes has a C epilogue; the unary math ops are not activations
    assert fused_ops.C_EPILOGUE == fused_ops.FUSABLE
    assert not set(fused_ops.MATH) & set(fused_ops.FUSABLE)
    try:
        from onnxedge.edge.neon import library, ops as neon_ops
    except Exception:   # the C library is not built on this machine
        return
    assert neon_ops.FUSED_ACTS == fused_ops.C_EPILOGUE and library.ACT == fused_ops.C_CODES


def test_webgpu_activations_follow_the_contract():
    matmul = pytest.importorskip("onnxedge.web.webgpu.ops.matmul")
    assert set(matmul.ACTIVATIONS) == set(fused_ops.FUSABLE)
    assert matmul.FUSED_DOMAIN == fused_ops.DOMAIN
    assert matmul.ACTIVATIONS["LeakyRelu"][1] == (0.01,)
    assert matmul.ACTIVATIONS["Clip"][1] == (-matmul.FLT_MAX, matmul.FLT_MAX)


def test_domain_string_is_written_once():
    """Runtime code names the fused domain through fused_ops.DOMAIN (the generated kernel index
    and docstrings aside)."""
    offenders = []
    for top in ("core", "web", "edge", "reduced_build"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(".py") or name == "op_modules.py":
                    continue
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    for i, line in enumerate(f, 1):
                        if re.search(r"""["']com\.onnxedge["']""", line):
                            offenders.append("%s:%d" % (os.path.relpath(path, ROOT), i))
    allowed = {"core/fused_ops.py"}
    assert [o for o in offenders if o.split(":")[0] not in allowed] == []
