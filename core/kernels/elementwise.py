"""Elementwise kernels: unary math, binary arithmetic / bitwise / logic / comparison with numpy
broadcasting, the variadic Sum / Mean / Max / Min, Clip and Where.

Most ops are rows of a table (op name -> numpy function, first opset); the type rule is "output
has the input's dtype" unless the row says bool. Opsets before 7 spell broadcasting with the
`broadcast` / `axis` attributes, and opset 1 has the obsolete `consumed_inputs`: those versions
get kernels of their own.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ..errors import InvalidArgument
from ._util import broadcast_shape, erf, norm_axis, widen
from .registry import add, register

_FLT_MAX = 3.4028234663852886e38


def _array(r: Any) -> np.ndarray:
    """numpy returns scalars for 0-d operands; kernels always return arrays."""
    return r if type(r) is np.ndarray else np.asarray(r)


def _as(r: Any, dtype: np.dtype) -> np.ndarray:
    """`r` as an array of exactly `dtype` (no copy when it already is one)."""
    r = _array(r)
    return r if r.dtype == dtype else r.astype(dtype)


# ----------------------------------------------------------------------------------- unary

def _unary(op: str, fn: Callable[[np.ndarray], Any], quiet: bool = False,
           out_bool: bool = False):
    """A kernel applying `fn`; narrow floats computed in float32; result keeps x's dtype.
    `quiet` silences numpy's floating-point warnings (log(0), sqrt(-1), ...)."""
    def kernel(x: np.ndarray) -> np.ndarray:
        try:
            if quiet:
                with np.errstate(all="ignore"):
                    r = fn(widen(x))
            else:
                r = fn(widen(x))
        except TypeError:
            raise InvalidArgument("%s: input dtype %s is not supported" % (op, x.dtype)) from None
        return _array(r) if out_bool else _as(r, x.dtype)
    kernel.__name__ = op
    kernel.__doc__ = "ONNX %s, elementwise." % op
    return kernel


def _legacy_unary(kernel):
    """The opset-1 form of a unary kernel: it also takes the obsolete `consumed_inputs`."""
    def legacy(x: np.ndarray, consumed_inputs: Optional[list] = None) -> np.ndarray:
        return kernel(x)
    legacy.__name__ = kernel.__name__ + "_1"
    legacy.__doc__ = kernel.__doc__
    return legacy


# op, numpy function, first opset, has an opset-1 form with consumed_inputs, warns on some inputs
_UNARY = [
    ("Abs", np.abs, 1, True, False), ("Neg", np.negative, 1, True, False),
    ("Floor", np.floor, 1, True, False), ("Ceil", np.ceil, 1, True, False),
    ("Sqrt", np.sqrt, 1, True, True), ("Reciprocal", np.reciprocal, 1, True, True),
    ("Exp", np.exp, 1, True, True), ("Log", np.log, 1, True, True),
    ("Round", np.rint, 11, False, False), ("Sin", np.sin, 7, False, True),
    ("Cos", np.cos, 7, False, True), ("Tan", np.tan, 7, False, True),
    ("Asin", np.arcsin, 7, False, True), ("Acos", np.arccos, 7, False, True),
    ("Atan", np.arctan, 7, False, False), ("Sinh", np.sinh, 9, False, True),
    ("Cosh", np.cosh, 9, False, True), ("Asinh", np.arcsinh, 9, False, False),
    ("Acosh", np.arccosh, 9, False, True), ("Atanh", np.arctanh, 9, False, True),
    ("Erf", erf, 9, False, False), ("Sign", np.sign, 9, False, False),
    ("BitwiseNot", np.invert, 18, False, False),
]

for _op, _fn, _since, _legacy, _quiet in _UNARY:
    _k = _unary(_op, _fn, _quiet)
    if _legacy:
        add(_op, _legacy_unary(_k), since=1, until=5)
        add(_op, _k, since=6)
    else:
        add(_op, _k, since=_since)
add("IsNaN", _unary("IsNaN", np.isnan, out_bool=True), since=9)
add("Not", _unary("Not", np.logical_not, out_bool=True), since=1)


@register("IsInf", since=10)
def is_inf(x: np.ndarray, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    """ONNX IsInf: True where x is +inf (detect_positive) or -inf (detect_negative)."""
    x = widen(x)
    if detect_negative and detect_positive:
        return _array(np.isinf(x))
    if detect_positive:
        return _array(x == np.inf)
    if detect_negative:
        return _array(x == -np.inf)
    return np.zeros(x.shape, dtype=bool)


# ---------------------------------------------------------------------------------- binary

def _broadcast_error(op: str, a: np.ndarray, b: np.ndarray) -> InvalidArgument:
    return InvalidArgument("%s: input shapes %s and %s cannot be broadcast together"
                           % (op, tuple(a.shape), tuple(b.shape)))


def _apply2(op: str, fn: Callable[..., Any], a: np.ndarray, b: np.ndarray,
            quiet: bool = False) -> Any:
    """fn(a, b) with numpy's errors turned into InvalidArgument naming `op`; `quiet` silences
    floating-point warnings (x / 0, 0 ** -1, ...)."""
    try:
        if quiet:
            with np.errstate(all="ignore"):
                return fn(a, b)
        return fn(a, b)
    except ValueError:
        raise _broadcast_error(op, a, b) from None
    except TypeError:
        raise InvalidArgument("%s: input dtypes %s and %s are not supported"
                              % (op, a.dtype, b.dtype)) from None


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Division; integers truncate toward zero as in C (numpy's // floors)."""
    if a.dtype.kind == "i":
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + fix.astype(q.dtype) if fix.any() else q
    if a.dtype.kind == "u":
        return np.floor_divide(a, b)
    return np.true_divide(a, b)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "OUS" or b.dtype.kind in "OUS":
        a, b = np.broadcast_arrays(a, b)
        return np.array([x == y for x, y in zip(a.ravel().tolist(), b.ravel().tolist())],
                        dtype=bool).reshape(a.shape)
    return np.equal(a, b)


def _binary(op: str, fn: Callable[..., Any], out_bool: bool = False, quiet: bool = False):
    """A broadcasting binary kernel; the result has A's dtype (or bool)."""
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "V":  # ml_dtypes floats: numpy's ufuncs may not keep them
            r = _apply2(op, fn, widen(a), widen(b), quiet)
        else:
            r = _apply2(op, fn, a, b, quiet)
        return _array(r) if out_bool else _as(r, a.dtype)
    kernel.__name__ = op
    kernel.__doc__ = "ONNX %s with numpy (multidirectional) broadcasting." % op
    return kernel


def _legacy_b(op: str, a: np.ndarray, b: np.ndarray, broadcast: int,
              axis: Optional[int]) -> np.ndarray:
    """B aligned to A as opsets < 7 specify: same shape, or (broadcast=1) B's shape matching A's
    dims starting at `axis` (default: A's trailing dims)."""
    if not broadcast:
        if a.shape != b.shape:
            raise InvalidArgument("%s: without broadcast=1 (opset < 7) inputs must have the same "
                                  "shape, got %s and %s" % (op, tuple(a.shape), tuple(b.shape)))
        return b
    if b.size == 1 and b.ndim <= a.ndim:
        return b.reshape(())
    start = a.ndim - b.ndim if axis is None else norm_axis(axis, max(a.ndim, 1), op)
    if start < 0 or start + b.ndim > a.ndim or any(
            db not in (1, da) for da, db in zip(a.shape[start:start + b.ndim], b.shape)):
        raise InvalidArgument("%s: B of shape %s does not fit A of shape %s at axis %s (opset < 7 "
                              "broadcasting)" % (op, tuple(b.shape), tuple(a.shape), axis))
    return b.reshape((1,) * start + b.shape + (1,) * (a.ndim - start - b.ndim))


def _legacy_binary(op: str, kernel):
    """The opset < 7 form of a binary kernel (`broadcast` / `axis` attributes)."""
    def legacy(a: np.ndarray, b: np.ndarray, broadcast: int = 0, axis: Optional[int] = None,
               consumed_inputs: Optional[list] = None) -> np.ndarray:
        return kernel(a, _legacy_b(op, a, b, broadcast, axis))
    legacy.__name__ = kernel.__name__ + "_legacy"
    legacy.__doc__ = kernel.__doc__ + " (opset < 7 broadcasting)"
    return legacy


# op, numpy function, first opset, first opset with numpy broadcasting (None: always), bool output
_BINARY = [
    ("Add", np.add, 1, 7, False), ("Sub", np.subtract, 1, 7, False),
    ("Mul", np.multiply, 1, 7, False), ("Div", _div, 1, 7, False),
    ("And", np.logical_and, 1, 7, True), ("Or", np.logical_or, 1, 7, True),
    ("Xor", np.logical_xor, 1, 7, True), ("Equal", _equal, 1, 7, True),
    ("Greater", np.greater, 1, 7, True), ("Less", np.less, 1, 7, True),
    ("GreaterOrEqual", np.greater_equal, 12, None, True),
    ("LessOrEqual", np.less_equal, 12, None, True),
    ("BitwiseAnd", np.bitwise_and, 18, None, False), ("BitwiseOr", np.bitwise_or, 18, None, False),
    ("BitwiseXor", np.bitwise_xor, 18, None, False),
]

for _op, _fn, _since, _modern, _bool in _BINARY:
    _k = _binary(_op, _fn, _bool, quiet=_op == "Div")
    if _modern is None:
        add(_op, _k, since=_since)
    else:
        add(_op, _legacy_binary(_op, _k), since=_since, until=_modern - 1)
        add(_op, _k, since=_modern)


def _int_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Integer base: exponents < 0 or fractional go through float64 (and truncate) like C's pow."""
    if y.dtype.kind in "iu" and (y.size == 0 or y.min() >= 0):
        return np.power(x, y.astype(x.dtype, copy=False))
    return np.power(x.astype(np.float64), y.astype(np.float64, copy=False)).astype(x.dtype)


@register("Pow", since=7)
def pow_(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ONNX Pow with broadcasting; the result has the base's dtype."""
    if x.dtype.kind in "iu":
        return _as(_apply2("Pow", _int_pow, x, y, quiet=True), x.dtype)
    xw = widen(x)
    if y.size == 1 and y.ndim <= x.ndim and y.dtype.kind in "fiu" and float(y.ravel()[0]) == 2:
        r = np.square(xw)
    else:
        narrower = y.dtype.kind in "iuV" or y.dtype.itemsize < xw.dtype.itemsize
        yw = y.astype(xw.dtype) if narrower else y
        r = _apply2("Pow", np.power, xw, yw, quiet=True)
    return _as(r, x.dtype)


@register("Pow", since=1, until=6)
def pow_1(x: np.ndarray, y: np.ndarray, broadcast: int = 0,
          axis: Optional[int] = None) -> np.ndarray:
    """ONNX Pow, opsets 1-6 (`broadcast` / `axis` attributes)."""
    return pow_(x, _legacy_b("Pow", x, y, broadcast, axis))


@register("Mod", since=10)
def mod(a: np.ndarray, b: np.ndarray, fmod: int = 0) -> np.ndarray:
    """ONNX Mod: fmod=0 takes the divisor's sign (Python %), fmod=1 the dividend's (C fmod)."""
    if fmod not in (0, 1):
        raise InvalidArgument("Mod: attribute fmod must be 0 or 1, got %r" % (fmod,))
    fn = np.fmod if fmod else np.mod
    if a.dtype.kind == "V":
        return _as(_apply2("Mod", fn, widen(a), widen(b), quiet=True), a.dtype)
    return _as(_apply2("Mod", fn, a, b, quiet=True), a.dtype)


def _shift(x: np.ndarray, y: np.ndarray, left: bool) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    ys = y.astype(x.dtype, copy=False)
    fn = np.left_shift if left else np.right_shift
    if y.size == 0 or (y.min() >= 0 and y.max() < bits):
        return fn(x, ys)
    bad = (y < 0) | (y >= bits)
    r = fn(x, np.where(bad, 0, ys).astype(x.dtype, copy=False))
    fill = np.zeros((), x.dtype) if left or x.dtype.kind == "u" else np.where(x < 0, -1, 0)
    return np.where(bad, fill, r)


@register("BitShift", since=11)
def bit_shift(x: np.ndarray, y: np.ndarray, direction: str = "") -> np.ndarray:
    """ONNX BitShift; a shift >= the bit width (or < 0) gives 0 (-1 for a negative x shifted
    right)."""
    d = str(direction)
    if d not in ("LEFT", "RIGHT"):
        raise InvalidArgument("BitShift: attribute direction must be 'LEFT' or 'RIGHT', got %r"
                              % (direction,))
    if x.dtype.kind not in "iu":
        raise InvalidArgument("BitShift: input X must have an integer dtype, got %s" % x.dtype)
    return _as(_apply2("BitShift", lambda p, q: _shift(p, q, d == "LEFT"), x, y), x.dtype)


# -------------------------------------------------------------------------------- variadic

def _fold(op: str, fn: Callable[..., Any], xs: tuple) -> np.ndarray:
    if not xs:
        raise InvalidArgument("%s: needs at least one input" % op)
    dtype = xs[0].dtype
    if len(xs) == 1:
        return xs[0].copy()
    r = xs[0]
    for x in xs[1:]:
        r = _apply2(op, fn, r, x)
    return _as(r, dtype)


def _variadic(op: str, fn: Callable[..., Any]):
    def kernel(*xs: np.ndarray) -> np.ndarray:
        return _fold(op, fn, xs)
    kernel.__name__ = op
    kernel.__doc__ = "ONNX %s over any number of inputs, with numpy broadcasting." % op
    return kernel


def mean(*xs: np.ndarray) -> np.ndarray:
    """ONNX Mean: the elementwise mean of the inputs, with numpy broadcasting."""
    if not xs:
        raise InvalidArgument("Mean: needs at least one input")
    dtype = xs[0].dtype
    s = _array(_fold("Mean", np.add, tuple(widen(x) for x in xs)))
    if len(xs) > 1:
        s = np.true_divide(s, len(xs), out=s) if s.dtype.kind == "f" else s / len(xs)
    return _as(s, dtype)


def _legacy_variadic(kernel):
    def legacy(*xs: np.ndarray, consumed_inputs: Optional[list] = None) -> np.ndarray:
        return kernel(*xs)
    legacy.__name__ = kernel.__name__ + "_1"
    legacy.__doc__ = kernel.__doc__
    return legacy


for _op, _k in [("Sum", _variadic("Sum", np.add)), ("Mean", mean),
                ("Max", _variadic("Max", np.maximum)), ("Min", _variadic("Min", np.minimum))]:
    add(_op, _legacy_variadic(_k), since=1, until=5)
    add(_op, _k, since=6)


# ------------------------------------------------------------------------------------ Clip

def _clip(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    """min(max(x, lo), hi): when lo > hi every value becomes hi, as ONNX specifies."""
    r = x
    if lo is not None:
        r = _array(np.maximum(x, lo))
    if hi is not None:
        r = np.minimum(r, hi, out=r) if r is not x else np.minimum(x, hi)
    return _as(r, x.dtype) if r is not x else x.copy()


def _bound(value: Any, dtype: np.dtype, what: str) -> Any:
    if value is None:
        return None
    v = np.asarray(value)
    if v.size != 1:
        raise InvalidArgument("Clip: %s must be a scalar, got shape %s" % (what, tuple(v.shape)))
    if v.dtype == dtype:
        return v.reshape(())
    with np.errstate(over="ignore"):   # FLT_MAX defaults become inf in float16
        return v.reshape(()).astype(dtype)


@register("Clip", since=11)
def clip(x: np.ndarray, min_input: Optional[np.ndarray] = None,
         max_input: Optional[np.ndarray] = None) -> np.ndarray:
    """ONNX Clip (opset >= 11): bounds come as optional scalar inputs."""
    return _clip(x, _bound(min_input, x.dtype, "input min"),
                 _bound(max_input, x.dtype, "input max"))


@register("Clip", since=6, until=10)
def clip_6(x: np.ndarray, min: float = -_FLT_MAX,  # noqa: A002
           max: float = _FLT_MAX) -> np.ndarray:  # noqa: A002
    """ONNX Clip, opsets 6-10: bounds are attributes."""
    return _clip(x, _bound(min, x.dtype, "attribute min"), _bound(max, x.dtype, "attribute max"))


@register("Clip", since=1, until=5)
def clip_1(x: np.ndarray, min: Optional[float] = None, max: Optional[float] = None,  # noqa: A002
           consumed_inputs: Optional[list] = None) -> np.ndarray:
    """ONNX Clip, opset 1: absent bounds do not clip."""
    return _clip(x, _bound(min, x.dtype, "attribute min"), _bound(max, x.dtype, "attribute max"))


@register("Where", since=9)
def where(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elements of `x` where `condition` is true, else of `y` (broadcasting all three)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype != y.dtype:
        raise InvalidArgument("Where: X (%s) and Y (%s) must have the same type"
                              % (x.dtype, y.dtype))
    broadcast_shape([np.shape(condition), x.shape, y.shape], "Where")
    return np.where(np.asarray(condition, dtype=bool), x, y).astype(x.dtype, copy=False)
