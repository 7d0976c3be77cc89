"""Compare a runtime's outputs with a case's expected outputs the way onnx's backend runner does.

Floats: |actual - expected| <= atol + rtol * |expected| (np.testing.assert_allclose's rule), NaN
equal to NaN; bfloat16 gets at least two ULPs of rtol. Integers, bools and strings: exact. Shapes
and dtypes must match. Sequences compare element-wise, maps key-wise, an empty optional is None.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

_SUB_BYTE_INTS = ("int4", "uint4", "int2", "uint2")


class Mismatch(AssertionError):
    """An output differs from the expected one; the message is a single line saying how."""


def _label(index: int, name: Optional[str]) -> str:
    return "output %d %r" % (index, name) if name else "output %d" % index


def _text(values: np.ndarray) -> List[str]:
    return [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
            for v in values.ravel().tolist()]


def _numeric(a: np.ndarray, rtol: float) -> Tuple[np.ndarray, float]:
    """Types numpy lacks (ml_dtypes) as plain numpy values, with the rtol onnx uses for them."""
    if a.dtype.kind != "V":
        return a, rtol
    if a.dtype.name in _SUB_BYTE_INTS:
        return a.astype(np.int32), rtol
    if a.dtype.name == "bfloat16":
        rtol = max(rtol, 2.0 ** -6)
    return a.astype(np.float32), rtol


def _first_bad(bad: np.ndarray) -> tuple:
    return tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()


def compare_tensor(actual: Any, expected: np.ndarray, rtol: float, atol: float, where: str) -> None:
    """Raise Mismatch when `actual` is not a numpy array equal to `expected` within tolerance."""
    if not isinstance(actual, np.ndarray):
        raise Mismatch("%s: got %s, expected a numpy.ndarray of %s %s"
                       % (where, type(actual).__name__, expected.dtype, list(expected.shape)))
    if actual.shape != expected.shape:
        raise Mismatch("%s: shape %s, expected %s" % (where, list(actual.shape), list(expected.shape)))
    if expected.dtype == object or expected.dtype.kind in "US":
        if not (actual.dtype == object or actual.dtype.kind in "US"):
            raise Mismatch("%s: dtype %s, expected strings" % (where, actual.dtype))
        got, want = _text(actual), _text(expected)
        if got != want:
            i = next(k for k in range(len(got)) if got[k] != want[k])
            raise Mismatch("%s: %d of %d strings differ (first at flat index %d: got %r, expected %r)"
                           % (where, sum(g != w for g, w in zip(got, want)), len(got), i, got[i],
                              want[i]))
        return
    if actual.dtype != expected.dtype:
        raise Mismatch("%s: dtype %s, expected %s" % (where, actual.dtype, expected.dtype))
    got, _ = _numeric(actual, rtol)
    want, rtol = _numeric(expected, rtol)
    if got.dtype.kind in "fc":
        with np.errstate(all="ignore"):
            close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        bad = ~close
        if bad.any():
            idx = _first_bad(bad)
            with np.errstate(all="ignore"):
                diff = np.abs(got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
                              - want)
            off = diff[bad]
            off = off[~np.isnan(off)]
            worst = float(off.max()) if off.size else float("nan")
            raise Mismatch("%s: %d of %d values differ beyond rtol=%g, atol=%g (max abs diff %.6g; "
                           "first at %s: got %r, expected %r)"
                           % (where, int(bad.sum()), bad.size, rtol, atol, worst, idx,
                              got[idx].item(), want[idx].item()))
        return
    bad = got != want
    if np.any(bad):
        bad = np.asarray(bad)
        idx = _first_bad(bad)
        raise Mismatch("%s: %d of %d values differ (first at %s: got %r, expected %r)"
                       % (where, int(bad.sum()), bad.size, idx, got[idx].item(), want[idx].item()))


def compare_value(actual: Any, expected: Any, rtol: float, atol: float, where: str) -> None:
    """Compare one output value of any kind: tensor, sequence (list), map (dict) or None."""
    if expected is None:
        if actual is not None:
            raise Mismatch("%s: got %s, expected None (an empty optional)" % (where, type(actual).__name__))
        return
    if isinstance(expected, list):
        if not isinstance(actual, (list, tuple)):
            raise Mismatch("%s: got %s, expected a sequence (list) of %d"
                           % (where, type(actual).__name__, len(expected)))
        if len(actual) != len(expected):
            raise Mismatch("%s: sequence of %d, expected %d" % (where, len(actual), len(expected)))
        for j, (a, e) in enumerate(zip(actual, expected)):
            compare_value(a, e, rtol, atol, "%s[%d]" % (where, j))
        return
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise Mismatch("%s: got %s, expected a map (dict)" % (where, type(actual).__name__))
        if sorted(actual, key=repr) != sorted(expected, key=repr):
            raise Mismatch("%s: map keys %s, expected %s" % (where, sorted(actual, key=repr),
                                                           sorted(expected, key=repr)))
        for k in expected:
            compare_value(actual[k], expected[k], rtol, atol, "%s[%r]" % (where, k))
        return
    compare_tensor(actual, np.asarray(expected), rtol, atol, where)


def compare_outputs(actual: Sequence[Any], expected: Sequence[Any], rtol: float, atol: float,
                    names: Optional[Sequence[str]] = None) -> None:
    """Raise Mismatch (one line) at the first output that differs from its expected value."""
    if len(actual) != len(expected):
        raise Mismatch("got %d outputs, expected %d" % (len(actual), len(expected)))
    for i, (a, e) in enumerate(zip(actual, expected)):
        compare_value(a, e, rtol, atol, _label(i, names[i] if names and i < len(names) else None))
