"""Random generators: RandomNormal(Like), RandomUniform(Like), Bernoulli, Multinomial.

With a `seed` attribute each call starts a fresh numpy RandomState from int(seed), so the same
seed always gives the same output (and the same numbers as onnx's reference evaluator); without
one, every call draws new numbers.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument
from ._util import check_tensor_bytes
from .registry import register

_FLOAT_CODES = (dtypes.FLOAT, dtypes.DOUBLE, dtypes.FLOAT16, dtypes.BFLOAT16)


def _state(seed: Optional[float]) -> np.random.RandomState:
    if seed is None or seed != seed:
        return np.random.RandomState()
    return np.random.RandomState(int(seed) & 0xFFFFFFFF)


def _out_dtype(op: str, dtype: Optional[int], like: Optional[np.ndarray],
               floats_only: bool = True) -> np.dtype:
    if dtype is None or int(dtype) == 0:
        if like is None:
            return np.dtype(np.float32)
        dt = np.asarray(like).dtype
        code = dtypes.from_numpy(dt) if dt != object else dtypes.STRING
    else:
        code = int(dtype)
    if floats_only and code not in _FLOAT_CODES:
        raise InvalidArgument("%s: output type must be a float type, got %s"
                              % (op, dtypes.lookup(code).name))
    return dtypes.to_numpy(code)


def _shape(op: str, shape: Optional[List[int]]) -> tuple:
    if shape is None:
        raise InvalidArgument("%s: the attribute 'shape' is required" % op)
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise InvalidArgument("%s: shape %s has a negative dimension" % (op, list(dims)))
    check_tensor_bytes(op, dims, np.float64)   # sampled in float64, then cast
    return dims


def _normal(shape: tuple, dt: np.dtype, mean: float, scale: float, seed: Optional[float]) -> np.ndarray:
    res = _state(seed).standard_normal(shape).astype(np.float64) * scale + mean
    return np.asarray(res).astype(dt)


def _uniform(shape: tuple, dt: np.dtype, low: float, high: float, seed: Optional[float]) -> np.ndarray:
    res = _state(seed).random_sample(shape) * (high - low) + low
    return np.asarray(res).astype(dt)


@register("RandomNormal", since=1)
def random_normal(dtype: int = 1, mean: float = 0.0, scale: float = 1.0,
                  seed: Optional[float] = None, shape: Optional[List[int]] = None) -> np.ndarray:
    """RandomNormal-1/22: samples of N(mean, scale^2) with the given shape."""
    op = "RandomNormal"
    return _normal(_shape(op, shape), _out_dtype(op, dtype, None), mean, scale, seed)


@register("RandomUniform", since=1)
def random_uniform(dtype: int = 1, high: float = 1.0, low: float = 0.0,
                   seed: Optional[float] = None, shape: Optional[List[int]] = None) -> np.ndarray:
    """RandomUniform-1/22: samples of U[low, high) with the given shape."""
    op = "RandomUniform"
    return _uniform(_shape(op, shape), _out_dtype(op, dtype, None), low, high, seed)


@register("RandomNormalLike", since=1)
def random_normal_like(input: np.ndarray, dtype: Optional[int] = None, mean: float = 0.0,
                       scale: float = 1.0, seed: Optional[float] = None) -> np.ndarray:
    """RandomNormalLike-1/22: N(mean, scale^2) samples shaped like the input."""
    x = np.asarray(input)
    return _normal(x.shape, _out_dtype("RandomNormalLike", dtype, x), mean, scale, seed)


@register("RandomUniformLike", since=1)
def random_uniform_like(input: np.ndarray, dtype: Optional[int] = None, high: float = 1.0,
                        low: float = 0.0, seed: Optional[float] = None) -> np.ndarray:
    """RandomUniformLike-1/22: U[low, high) samples shaped like the input."""
    x = np.asarray(input)
    return _uniform(x.shape, _out_dtype("RandomUniformLike", dtype, x), low, high, seed)


@register("Bernoulli", since=15)
def bernoulli(input: np.ndarray, dtype: Optional[int] = None,
              seed: Optional[float] = None) -> np.ndarray:
    """Bernoulli-15/22: 1 with probability input[i], else 0, in `dtype` (default: input's)."""
    op = "Bernoulli"
    p = np.asarray(input)
    if p.dtype.kind != "f":
        raise InvalidArgument("%s: input must hold float probabilities, got %s" % (op, p.dtype))
    pf = p.astype(np.float64)
    if pf.size and (np.nanmin(pf) < 0 or np.nanmax(pf) > 1):
        raise InvalidArgument("%s: probabilities must lie in [0, 1]" % op)
    out = _state(seed).binomial(1, pf)
    return np.asarray(out).astype(_out_dtype(op, dtype, p, floats_only=False))


@register("Multinomial", since=7)
def multinomial(input: np.ndarray, dtype: int = 6, sample_size: int = 1,
                seed: Optional[float] = None) -> np.ndarray:
    """Multinomial-7/22: `sample_size` class indices per row of unnormalised log-probabilities."""
    op = "Multinomial"
    x = np.asarray(input)
    if x.ndim != 2:
        raise InvalidArgument("%s: input must have shape (batch, classes), got %s" % (op, x.shape))
    if int(dtype) not in (dtypes.INT32, dtypes.INT64):
        raise InvalidArgument("%s: dtype must be int32 or int64, got %s" % (op, dtype))
    check_tensor_bytes(op, [x.shape[0], int(sample_size)], np.float64, "draws")
    logits = x.astype(np.float64)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    draws = _state(seed).random_sample((x.shape[0], int(sample_size)))
    out = np.empty(draws.shape, dtype=np.int64)
    for b in range(x.shape[0]):
        out[b] = np.minimum(np.searchsorted(cdf[b], draws[b], side="right"), x.shape[1] - 1)
    return out.astype(dtypes.to_numpy(int(dtype)))
