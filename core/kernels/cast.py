"""Cast, CastLike and BitCast between every ONNX element type numpy (with ml_dtypes) can hold.

Numbers follow numpy's conversions (ml_dtypes for bfloat16, float8, float4, int4, int2), except
that floats cast to int4/uint4/int2/uint2 first round half away from zero (as onnxruntime does).
Float8 targets clamp to their largest finite value unless saturate=0; FLOAT8E8M0 targets honour
`round_mode`. Strings are numpy object arrays of str: numbers print as the shortest "%g" text
that reads back to the same value ("NaN", "INF", "-INF" for the specials; bools as "1"/"0"),
and parse like onnxruntime does (integers take the leading digits, floats accept "inf"/"NaN"
in any case and hex floats).
"""
from __future__ import annotations

import re
from typing import Any, List

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument, NotImplemented
from .registry import register

_F8_MAX = {17: 448.0, 18: 240.0, 19: 57344.0, 20: 57344.0}   # largest finite value per type
_E8M0 = 24
_FLOAT_CODES = {1, 10, 11, 16, 17, 18, 19, 20, 23, 24}
_SUBBYTE_INTS = {21, 22, 25, 26}   # UINT4, INT4, UINT2, INT2
_LEADING_INT = re.compile(r"\s*([+-]?\d+)")
_HEX_FLOAT = re.compile(r"\s*[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
                        r"(?:[pP][+-]?\d+)?\s*$")


def _code_of(to: Any) -> int:
    """The element-type code of Cast's `to` (an int, or a type name in Cast-1)."""
    if isinstance(to, str):
        d = dtypes.BY_NAME.get(to.upper())
        if d is None:
            raise InvalidArgument("Cast: 'to' names an unknown type %r" % (to,))
        return d.code
    if to is None:
        raise InvalidArgument("Cast: the attribute 'to' is required")
    return dtypes.lookup(to).code


def _is_float(dt: np.dtype) -> bool:
    if dt.kind == "f":
        return True
    if dt.kind != "V":
        return False
    try:
        return dtypes.from_numpy(dt) in _FLOAT_CODES
    except KeyError:
        return False


# ---------------------------------------------------------------- strings

def _format_floats(x: np.ndarray) -> List[str]:
    """Shortest "%g" text per element that converts back to the same value of x's type."""
    vals = x.astype(np.float64).reshape(-1)
    out: List[Any] = [None] * vals.size
    pending = []
    for i, v in enumerate(vals.tolist()):
        if v != v:
            out[i] = "NaN"
        elif v in (float("inf"), float("-inf")):
            out[i] = "INF" if v > 0 else "-INF"
        else:
            pending.append(i)
    max_digits = 17 if x.dtype.itemsize >= 8 else 9
    positional_below = 16 if x.dtype.itemsize >= 8 else 8    # exponents printed without "e+"
    for digits in range(1, max_digits + 1):
        if not pending:
            break
        texts = ["%.*g" % (digits, vals[i]) for i in pending]
        if digits < max_digits:
            back = np.array([float(t) for t in texts]).astype(x.dtype).astype(np.float64)
            same = back == vals[pending]
        else:
            same = np.ones(len(pending), dtype=bool)
        left = []
        for i, t, ok in zip(pending, texts, same.tolist()):
            if ok:
                exp = int(t.split("e")[1]) if "e+" in t else -1
                out[i] = "%.*g" % (exp + 1, vals[i]) if digits <= exp < positional_below else t
            else:
                left.append(i)
        pending = left
    return out


def _to_string(x: np.ndarray) -> np.ndarray:
    if x.dtype == object or x.dtype.kind in "US":
        texts = [v.decode("utf-8") if isinstance(v, bytes) else str(v)
                 for v in x.reshape(-1).tolist()]
    elif x.dtype == np.bool_:
        texts = ["1" if v else "0" for v in x.reshape(-1).tolist()]
    elif _is_float(x.dtype):
        texts = _format_floats(x)
    elif x.dtype.kind == "c":
        texts = [str(v) for v in x.reshape(-1).tolist()]
    else:
        texts = [str(v) for v in x.astype(np.int64 if x.dtype.kind == "V" else x.dtype)
                 .reshape(-1).tolist()]
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out.reshape(x.shape)


def _parse_float(s: Any) -> float:
    t = s.decode("utf-8") if isinstance(s, bytes) else str(s)
    try:
        return float(t)
    except ValueError:
        pass
    if _HEX_FLOAT.match(t):
        return float.fromhex(t.strip())
    raise InvalidArgument("Cast: cannot parse the string %r as a number" % (t,))


def _parse_int(s: Any) -> int:
    t = s.decode("utf-8") if isinstance(s, bytes) else str(s)
    m = _LEADING_INT.match(t)
    if m is None:
        raise InvalidArgument("Cast: cannot parse the string %r as an integer" % (t,))
    return int(m.group(1))


def _parse_strings(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Strings parsed for a cast to `dt`: int64 (wrapped modulo 2**64) for integer and bool
    targets, float64 for the others; the numeric cast then finishes the job."""
    items = x.reshape(-1).tolist()
    if dt.kind in "iub" or (dt.kind == "V" and not _is_float(dt)):
        mask = (1 << 64) - 1
        u64 = np.array([_parse_int(s) & mask for s in items], dtype=np.uint64)
        return u64.view(np.int64).reshape(x.shape)
    return np.array([_parse_float(s) for s in items], dtype=np.float64).reshape(x.shape)


# ---------------------------------------------------------------- float8 / e8m0

def _to_e8m0(x: np.ndarray, dt: np.dtype, saturate: int, round_mode: str) -> np.ndarray:
    """Float -> FLOAT8E8M0 (the float32 exponent), rounding the mantissa per `round_mode`."""
    bits = np.array(x, dtype=np.float32, order="C").view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "up":
        bump = ((bits & 0x7FFFFF) > 0) & ~special
    elif round_mode == "nearest":
        guard = (bits & 0x400000) > 0
        rest = (bits & 0x3FFFFF) > 0
        bump = guard & (rest | (exponent > 0)) & ~special
    elif round_mode == "down":
        bump = np.zeros(bits.shape, dtype=bool)
    else:
        raise InvalidArgument("Cast: round_mode %r is not one of up, down, nearest" % (round_mode,))
    if saturate:
        bump &= exponent != 0xFE
    exponent = exponent + bump.astype(np.uint16)
    out = np.where(special, 0xFF, np.minimum(exponent, 0xFF)).astype(np.uint8)
    return out.view(dt)


def _to_subbyte_int(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """To int4/uint4/int2/uint2 as onnxruntime does: floats round half away from zero (NaN
    gives 0), then every value wraps modulo 2**bits."""
    if _is_float(x.dtype):
        v = x.astype(np.float64)
        v = np.where(np.isnan(v), 0.0, np.sign(v) * np.floor(np.abs(v) + 0.5))
        x = v.astype(np.int64)
    elif x.dtype.kind == "V":
        x = x.astype(np.int8)
    return x.astype(dt)


def cast_array(x: np.ndarray, to: int, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """`x` converted to the ONNX element type `to` (see the module docstring for the rules)."""
    x = np.asarray(x)
    if to == dtypes.STRING:
        return x if x.dtype == object else _to_string(x)
    dt = dtypes.to_numpy(to)
    if x.dtype == object or x.dtype.kind in "US":
        x = _parse_strings(x, dt)
    if x.dtype == dt:
        return x
    with np.errstate(all="ignore"):
        if to == _E8M0:
            return _to_e8m0(x, dt, saturate, round_mode)
        if to in _F8_MAX and saturate:
            limit = _F8_MAX[to]
            wide = x.astype(np.float64 if x.dtype.itemsize >= 8 or not _is_float(x.dtype)
                            else np.float32)
            return np.clip(wide, -limit, limit).astype(dt)
        if to in _SUBBYTE_INTS:
            return _to_subbyte_int(x, dt)
        if x.dtype.kind == "c" and dt.kind != "c":
            x = x.real
        return x.astype(dt)


@register("Cast")
def cast(x: np.ndarray, *, to: Any = None, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """Convert to the type `to` (a type name in Cast-1, a type code from Cast-6 on)."""
    return cast_array(x, _code_of(to), saturate, round_mode)


@register("CastLike", since=15)
def cast_like(x: np.ndarray, target_type: np.ndarray, *, saturate: int = 1,
              round_mode: str = "up") -> np.ndarray:
    """Cast `x` to the element type of `target_type` (its values are ignored)."""
    try:
        code = dtypes.from_numpy(np.asarray(target_type).dtype)
    except KeyError:
        raise InvalidArgument("CastLike: target_type has dtype %s, which is no ONNX type"
                              % (np.asarray(target_type).dtype,)) from None
    return cast_array(x, code, saturate, round_mode)


_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}   # sub-byte types, stored one per byte by ml_dtypes


def _bits(code: int, dt: np.dtype) -> int:
    return _BITS.get(code, dt.itemsize * 8)


@register("BitCast", since=26)
def bit_cast(x: np.ndarray, *, to: Any = None) -> np.ndarray:
    """Reinterpret the bits of `x` as the same-width type `to` (little-endian bytes)."""
    code = _code_of(to)
    if code == dtypes.STRING or x.dtype == object:
        raise InvalidArgument("BitCast: strings cannot be bit-cast")
    src = dtypes.from_numpy(x.dtype)
    dt = dtypes.to_numpy(code)
    if _bits(src, x.dtype) != _bits(code, dt):
        raise InvalidArgument("BitCast: %s (%d bits) and %s (%d bits) differ in width"
                              % (dtypes.lookup(src).name, _bits(src, x.dtype),
                                 dtypes.lookup(code).name, _bits(code, dt)))
    if code in _BITS:
        if src in _SUBBYTE_INTS and code in _SUBBYTE_INTS:
            return x.astype(np.int8).astype(dt)          # two's complement wrap = same bits
        raise NotImplemented("BitCast: %s -> %s is not supported"
                             % (dtypes.lookup(src).name, dtypes.lookup(code).name))
    return (x if x.flags.c_contiguous else x.copy()).view(dt)
