"""The DFT that replaces numpy.fft inside Pyodide (where numpy.fft aborts the page): a DFT matrix
for short lengths, radix-2 and Bluestein beyond."""
from __future__ import annotations

import numpy as np
import pytest

from onnxedge.kernels import signal


@pytest.mark.parametrize("n_in,n", [(8, 8), (7, 7), (6, 9), (10, 4), (1, 5), (64, 64), (65, 65),
                                     (128, 128), (97, 97), (300, 257), (1000, 1000), (20, 1024)])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_plain_fft_matches_numpy(n_in, n, axis):
    rng = np.random.RandomState(n_in * 10 + n + axis)
    shape = [3, 4, 2]
    shape[axis] = n_in
    c = rng.randn(*shape) + 1j * rng.randn(*shape)
    np.testing.assert_allclose(signal.plain_fft(c, n, axis), np.fft.fft(c, n=n, axis=axis),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(signal.plain_fft(c, n, axis, inverse=True),
                               np.fft.ifft(c, n=n, axis=axis), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(signal.plain_irfft(c, n, axis), np.fft.irfft(c, n=n, axis=axis),
                               rtol=1e-10, atol=1e-10)


def test_kernels_without_numpy_fft_match_node_suite_cases(monkeypatch):
    """DFT and STFT through the matrix path give the same outputs as through numpy.fft."""
    rng = np.random.RandomState(0)
    x = rng.randn(2, 12, 1).astype(np.float32)
    xc = rng.randn(2, 12, 2).astype(np.float32)
    cases = [lambda: signal.dft("DFT", x, None, 1, 0, 0),
             lambda: signal.dft("DFT", x, 9, 1, 0, 1),
             lambda: signal.dft("DFT", xc, None, 1, 1, 0),
             lambda: signal.dft("DFT", xc[:, :7], 12, 1, 1, 1),
             lambda: signal.stft(x, np.array(3, np.int64), np.hanning(6).astype(np.float32)),
             lambda: signal.stft(xc, np.array(2, np.int64), None, np.array(5, np.int64), 0)]
    expected = [f() for f in cases]
    monkeypatch.setattr(signal, "USE_NUMPY_FFT", False)
    for want, f in zip(expected, cases):
        got = f()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_long_transforms_stay_n_log_n():
    """A 100,003-point (prime) transform: Bluestein through 262,144-point radix-2 transforms, not
    a 100,003^2 matrix (160 GB); equal to numpy.fft."""
    x = np.random.RandomState(1).randn(100003)
    np.testing.assert_allclose(signal.plain_fft(x, 100003, 0), np.fft.fft(x), rtol=1e-7, atol=1e-6)
