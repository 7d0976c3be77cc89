"""Signal processing: DFT, STFT, the Hann / Hamming / Blackman windows and MelWeightMatrix.

Complex tensors travel as real ones with a last dimension of 2 (real, imaginary); a last
dimension of 1 is a real signal.
"""
from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument
from ._util import check_tensor_bytes
from .registry import register


def _scalar_int(op: str, value: Optional[np.ndarray], what: str) -> Optional[int]:
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu":
        raise InvalidArgument("%s: %s must be an integer scalar, got %s of shape %s"
                              % (op, what, arr.dtype, arr.shape))
    return int(arr.reshape(-1)[0])


def _as_complex(op: str, x: np.ndarray) -> np.ndarray:
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise InvalidArgument("%s: input must have rank >= 2 and a last dimension of 1 (real) or 2 "
                              "(complex), got shape %s" % (op, x.shape))
    # float32 signals stay complex64: numpy >= 2 then transforms in single precision, as
    # the reference outputs were made (numpy 1.x widens to double internally).
    cdt = np.complex64 if x.dtype in (np.float32, np.float16) else np.complex128
    out = np.empty(x.shape[:-1], dtype=cdt)
    out.real = x[..., 0]
    out.imag = x[..., 1] if x.shape[-1] == 2 else 0
    return out


def _as_pairs(c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([c.real, c.imag], axis=-1).astype(dtype)


# numpy.fft aborts Pyodide 0.17.1's interpreter in Chromium (a wasm i64 call it cannot bridge):
# in a page the transforms are done here in numpy (radix-2, Bluestein for other lengths).
USE_NUMPY_FFT = sys.platform != "emscripten"
_MATRIX_MAX = 64   # lengths up to this are one product with the DFT matrix


def _fit(c: np.ndarray, n: int, axis: int) -> np.ndarray:
    """c cut or zero-padded to n points along axis (numpy.fft's `n`)."""
    if c.shape[axis] >= n:
        return np.take(c, np.arange(n), axis=axis)
    pad = [(0, 0)] * c.ndim
    pad[axis] = (0, n - c.shape[axis])
    return np.pad(c, pad, mode="constant")


def _column(v: np.ndarray, ndim: int) -> np.ndarray:
    """A 1-D vector shaped to broadcast along the first axis of an ndim array."""
    return v.reshape((-1,) + (1,) * (ndim - 1))


def _fft_pow2(c: np.ndarray, sign: int) -> np.ndarray:
    """Unnormalized DFT (exponent sign `sign`) along the first axis, a power-of-two length:
    small DFTs of the strided subsequences, then radix-2 butterflies, all vectorized."""
    n, rest = c.shape[0], c.shape[1:]
    m = min(n, 32)
    k = np.arange(m)
    x = np.tensordot(np.exp(sign * 2j * np.pi * np.outer(k, k) / m),
                     c.reshape((m, n // m) + rest), axes=([1], [0]))
    while x.shape[0] < n:
        half = x.shape[1] // 2
        even, odd = x[:, :half], x[:, half:]
        twiddle = _column(np.exp(sign * 1j * np.pi * np.arange(x.shape[0]) / x.shape[0]), x.ndim)
        x = np.concatenate([even + twiddle * odd, even - twiddle * odd], axis=0)
    return x.reshape((n,) + rest)


def _dft(c: np.ndarray, sign: int) -> np.ndarray:
    """Unnormalized DFT along the first axis, any length, O(n log n) memory and time beyond
    _MATRIX_MAX points (Bluestein's chirp-z through power-of-two transforms)."""
    n = c.shape[0]
    k = np.arange(n)
    if n <= _MATRIX_MAX:
        w = np.exp(sign * 2j * np.pi * (np.outer(k, k) % n) / n)
        return np.tensordot(w, c, axes=([1], [0]))
    if n & (n - 1) == 0:
        return _fft_pow2(c, sign)
    chirp = np.exp(sign * 1j * np.pi * ((k * k) % (2 * n)) / n)
    m = 1 << (2 * n - 2).bit_length()
    a = np.zeros((m,) + c.shape[1:], dtype=np.complex128)
    a[:n] = c * _column(chirp, c.ndim)
    b = np.zeros(m, dtype=np.complex128)
    b[:n] = np.conj(chirp)
    b[m - n + 1:] = np.conj(chirp[1:][::-1])
    conv = _fft_pow2(_fft_pow2(a, -1) * _column(_fft_pow2(b, -1), c.ndim), 1) / m
    return conv[:n] * _column(chirp, c.ndim)


def plain_fft(c: np.ndarray, n: int, axis: int, inverse: bool = False) -> np.ndarray:
    """numpy.fft.fft (or ifft) of c along axis with n points, without numpy.fft."""
    c = np.moveaxis(_fit(np.asarray(c, dtype=np.complex128), n, axis), axis, 0)
    y = np.moveaxis(_dft(c, 1 if inverse else -1), 0, axis)
    return y / n if inverse else y


def plain_irfft(c: np.ndarray, n: int, axis: int) -> np.ndarray:
    """numpy.fft.irfft of a one-sided spectrum c along axis (n real points)."""
    half = _fit(np.asarray(c, dtype=np.complex128), n // 2 + 1, axis)
    mirror = np.conj(np.take(half, np.arange((n + 1) // 2 - 1, 0, -1), axis=axis))
    return plain_fft(np.concatenate([half, mirror], axis=axis), n, axis, inverse=True).real


def _fft(c: np.ndarray, n: int, axis: int) -> np.ndarray:
    return np.fft.fft(c, n=n, axis=axis) if USE_NUMPY_FFT else plain_fft(c, n, axis)


def dft(op: str, x: np.ndarray, length: Optional[int], axis: int, inverse: int,
        onesided: int) -> np.ndarray:
    """The DFT of x (..., [real|real,imag]) along `axis` (counted on x, excluding the last dim)."""
    x = np.asarray(x)
    rank = x.ndim
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise InvalidArgument("%s: axis %d is out of range for an input of rank %d "
                              "(expected [%d, -2] or [0, %d])" % (op, axis, rank, -rank, rank - 2))
    ax = axis % rank
    sig = _as_complex(op, x)
    if length is None:
        length = 2 * (sig.shape[ax] - 1) if inverse and onesided else sig.shape[ax]
    if length < 1:
        raise InvalidArgument("%s: dft_length must be positive, got %d" % (op, length))
    shape = list(sig.shape)
    shape[ax] = max(shape[ax], length)
    check_tensor_bytes(op, shape, np.complex128, "transform")
    if inverse:
        if onesided:
            y = np.fft.irfft(sig, n=length, axis=ax) if USE_NUMPY_FFT \
                else plain_irfft(sig, length, ax)
            return y[..., None].astype(x.dtype)
        y = np.fft.ifft(sig, n=length, axis=ax) if USE_NUMPY_FFT \
            else plain_fft(sig, length, ax, inverse=True)
        return _as_pairs(y, x.dtype)
    y = _fft(sig, length, ax)
    if onesided:
        y = np.take(y, np.arange(length // 2 + 1), axis=ax)
    return _as_pairs(y, x.dtype)


@register("DFT", since=17, until=19)
def dft_17(input: np.ndarray, dft_length: Optional[np.ndarray] = None, axis: int = 1,
           inverse: int = 0, onesided: int = 0) -> np.ndarray:
    """DFT-17: axis as an attribute (default 1)."""
    return dft("DFT", input, _scalar_int("DFT", dft_length, "dft_length"), int(axis),
               int(inverse), int(onesided))


@register("DFT", since=20)
def dft_20(input: np.ndarray, dft_length: Optional[np.ndarray] = None,
           axis: Optional[np.ndarray] = None, inverse: int = 0, onesided: int = 0) -> np.ndarray:
    """DFT-20: axis as an optional scalar input (default -2)."""
    ax = _scalar_int("DFT", axis, "axis")
    return dft("DFT", input, _scalar_int("DFT", dft_length, "dft_length"),
               -2 if ax is None else ax, int(inverse), int(onesided))


@register("STFT", since=17)
def stft(signal: np.ndarray, frame_step: np.ndarray, window: Optional[np.ndarray] = None,
         frame_length: Optional[np.ndarray] = None, onesided: int = 1) -> np.ndarray:
    """STFT-17: (batch, frames, bins, 2) short-time Fourier transform of (batch, length, 1|2)."""
    op = "STFT"
    x = np.asarray(signal)
    if x.ndim != 3 or x.shape[-1] not in (1, 2):
        raise InvalidArgument("%s: signal must have shape (batch, length, 1 or 2), got %s"
                              % (op, x.shape))
    step = _scalar_int(op, frame_step, "frame_step")
    flen = _scalar_int(op, frame_length, "frame_length")
    if window is not None:
        win = np.asarray(window)
        if win.ndim != 1:
            raise InvalidArgument("%s: window must be 1-D, got shape %s" % (op, win.shape))
        if flen is not None and flen != win.shape[0]:
            raise InvalidArgument("%s: frame_length %d does not match the window length %d"
                                  % (op, flen, win.shape[0]))
        flen = win.shape[0]
    elif flen is None:
        raise InvalidArgument("%s: needs a window or a frame_length" % op)
    else:
        win = np.ones((flen,), dtype=x.dtype)
    if step is None or step < 1 or flen < 1 or flen > x.shape[1]:
        raise InvalidArgument("%s: frame_step (%s) must be >= 1 and frame_length (%d) within the "
                              "signal length %d" % (op, step, flen, x.shape[1]))
    if onesided and x.shape[-1] == 2:
        raise InvalidArgument("%s: onesided output needs a real signal (last dimension 1)" % op)
    frames = 1 + (x.shape[1] - flen) // step
    sig = _as_complex(op, x)
    idx = np.arange(frames)[:, None] * step + np.arange(flen)[None, :]
    framed = sig[:, idx] * win.astype(np.float64)
    y = _fft(framed, flen, framed.ndim - 1)
    if onesided:
        y = y[..., :flen // 2 + 1]
    return _as_pairs(y, x.dtype)


def _window(op: str, size: np.ndarray, output_datatype: int, periodic: int, coeffs) -> np.ndarray:
    n = _scalar_int(op, size, "size")
    if n is None or n < 0:
        raise InvalidArgument("%s: size must be a non-negative integer" % op)
    check_tensor_bytes(op, [n], np.float64)
    denom = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    y = np.zeros(n, dtype=np.float64)
    if denom <= 0:
        y += 1.0   # a one-point symmetric window
    else:
        for i, c in enumerate(coeffs):
            y += c * np.cos(2.0 * np.pi * i * k / denom)
    return y.astype(dtypes.to_numpy(int(output_datatype)))


@register("HannWindow", since=17)
def hann_window(size: np.ndarray, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    """HannWindow-17: 0.5 - 0.5 cos(2 pi n / N)."""
    return _window("HannWindow", size, output_datatype, periodic, (0.5, -0.5))


@register("HammingWindow", since=17)
def hamming_window(size: np.ndarray, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    """HammingWindow-17: 25/46 - 21/46 cos(2 pi n / N)."""
    return _window("HammingWindow", size, output_datatype, periodic, (25.0 / 46, -21.0 / 46))


@register("BlackmanWindow", since=17)
def blackman_window(size: np.ndarray, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    """BlackmanWindow-17: 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window("BlackmanWindow", size, output_datatype, periodic, (0.42, -0.5, 0.08))


@register("MelWeightMatrix", since=17)
def mel_weight_matrix(num_mel_bins: np.ndarray, dft_length: np.ndarray, sample_rate: np.ndarray,
                      lower_edge_hertz: np.ndarray, upper_edge_hertz: np.ndarray,
                      output_datatype: int = 1) -> np.ndarray:
    """MelWeightMatrix-17: (dft_length // 2 + 1, num_mel_bins) triangular mel filter bank."""
    op = "MelWeightMatrix"
    mels = _scalar_int(op, num_mel_bins, "num_mel_bins")
    length = _scalar_int(op, dft_length, "dft_length")
    rate = _scalar_int(op, sample_rate, "sample_rate")
    if mels is None or length is None or rate is None or mels < 1 or length < 1 or rate < 1:
        raise InvalidArgument("%s: num_mel_bins, dft_length and sample_rate must be positive" % op)
    low = float(np.asarray(lower_edge_hertz).reshape(-1)[0])
    high = float(np.asarray(upper_edge_hertz).reshape(-1)[0])
    bins = length // 2 + 1
    check_tensor_bytes(op, [bins, mels], np.float64)
    low_mel = 2595.0 * np.log10(1.0 + low / 700.0)
    high_mel = 2595.0 * np.log10(1.0 + high / 700.0)
    step = (high_mel - low_mel) / (mels + 2)
    hz = 700.0 * (10.0 ** ((np.arange(mels + 2) * step + low_mel) / 2595.0) - 1.0)
    points = np.floor((length + 1) * hz / rate).astype(np.int64)
    out = np.zeros((bins, mels), dtype=np.float64)
    for i in range(mels):
        lo, mid, hi = int(points[i]), int(points[i + 1]), int(points[i + 2])
        if mid == lo:
            if 0 <= mid < bins:
                out[mid, i] = 1.0
        else:
            for j in range(max(lo, 0), min(mid + 1, bins)):
                out[j, i] = (j - lo) / float(mid - lo)
        if hi > mid:
            for j in range(max(mid, 0), min(hi, bins)):
                out[j, i] = (hi - j) / float(hi - mid)
    return out.astype(dtypes.to_numpy(int(output_datatype)))
