"""Tolerances for float32 kernels compared with a float64 reference, scaled to what rounding can
do: a sum of K products in float32 (any order, with or without FMA) is within about
sqrt(K) * eps32 * sum|a_i * b_i| of the exact value. Tests pass that bound (the same computation
on absolute values) so a kernel is held to its own reduction length and magnitude, the same on
every CPU, instead of to a fixed atol tuned on one machine."""
from __future__ import annotations

from typing import Optional

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)


def reduction_tolerance(abs_bound: np.ndarray, k: int, ulps: float = 4.0) -> np.ndarray:
    """Per-element tolerance of a float32 reduction of length `k` whose absolute terms sum to
    `abs_bound` (float64): `ulps * (sqrt(k) + 1) * eps32 * abs_bound`, plus float32's tiny."""
    return ulps * (np.sqrt(max(int(k), 1)) + 1.0) * EPS32 * np.asarray(abs_bound, np.float64) \
        + np.finfo(np.float32).tiny


def assert_close_to_reference(got: np.ndarray, want: np.ndarray, abs_bound: np.ndarray, k: int,
                              err_msg: str = "", ulps: float = 4.0, rel: float = 0.0) -> None:
    """Assert a float32 result is within the reduction tolerance of a float64 reference; `rel`
    adds a relative term for what follows the reduction (an approximated activation)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (err_msg, got.shape, want.shape)
    tol = np.broadcast_to(reduction_tolerance(abs_bound, k, ulps) + rel * np.abs(want), want.shape)
    err = np.abs(got - want)
    bad = ~(err <= tol)
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, err - tol, -np.inf))), want.shape)
        raise AssertionError("%s: %d of %d elements off; worst at %s: got %r, expected %r "
                             "(error %.3g, tolerance %.3g for a reduction of %d terms)"
                             % (err_msg, int(bad.sum()), want.size, i, got[i], want[i], err[i],
                                tol[i], k))


def activation_reference(y: np.ndarray, act: str, p: tuple) -> np.ndarray:
    """The C kernels' epilogue activation `act` (oxk.h names, parameters `p`) in float64."""
    if act == "Relu":
        return np.maximum(y, 0)
    if act == "Clip":
        return np.clip(y, p[0], p[1])
    if act == "Sigmoid":
        return 1 / (1 + np.exp(-y))
    if act == "GeluTanh":
        return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    if act == "LeakyRelu":
        return np.where(y >= 0, y, y * p[0])
    if act == "Tanh":
        return np.tanh(y)
    return y


def activation_bound(pre_bound: np.ndarray, act: Optional[str]) -> np.ndarray:
    """The bound after an activation whose slope is at most 1 (Relu, Clip, Tanh, Sigmoid, ...):
    rounding before it shrinks or stays; GeluTanh's slope reaches ~1.13, allowed for."""
    return np.asarray(pre_bound) * (1.2 if act == "GeluTanh" else 1.0)


def conv_reference(conv, x: np.ndarray, w: np.ndarray, b: Optional[np.ndarray], group: int = 1,
                   **attrs) -> tuple:
    """(float64 result, float64 bound on |terms|, reduction length) of a convolution computed by
    `conv` (the core's numpy Conv kernel) on float64 copies of the inputs."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    b64 = None if b is None else b.astype(np.float64)
    want = conv(x64, w64, b64, group=group, **attrs)
    bound = conv(np.abs(x64), np.abs(w64), None if b is None else np.abs(b64), group=group, **attrs)
    k = int(np.prod(w.shape[1:])) + (b is not None)
    return want, bound, k
