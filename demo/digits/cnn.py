"""A small CNN for 8x8 digits in pure numpy: forward, backward (im2col) and Adam.

Architecture (what `export.py` writes as ONNX):
conv3x3 8ch pad 1 + ReLU → conv3x3 16ch stride 2 pad 1 + ReLU → flatten (256) → Gemm 10 → softmax.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

Params = Dict[str, np.ndarray]
# (weight name, bias name, stride) of the two conv layers; both are 3x3 with padding 1
CONVS = (("w1", "b1", 1), ("w2", "b2", 2))
KERNEL = 3
PAD = 1


def init_params(rng: np.random.Generator) -> Params:
    """He-initialised weights (float64 while training)."""
    def he(shape: Tuple[int, ...], fan_in: int) -> np.ndarray:
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    return {"w1": he((8, 1, 3, 3), 9), "b1": np.zeros(8),
            "w2": he((16, 8, 3, 3), 72), "b2": np.zeros(16),
            "w3": he((10, 256), 256), "b3": np.zeros(10)}


def _out_size(n: int, stride: int) -> int:
    return (n + 2 * PAD - KERNEL) // stride + 1


def im2col(x: np.ndarray, stride: int) -> np.ndarray:
    """[N, C, H, W] → [N, C*3*3, Ho*Wo] patches (padding 1), in the weight's (C, kh, kw) order."""
    n, c, h, w = x.shape
    ho, wo = _out_size(h, stride), _out_size(w, stride)
    xp = np.pad(x, ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))
    cols = np.empty((n, c, KERNEL, KERNEL, ho, wo), x.dtype)
    for i in range(KERNEL):
        for j in range(KERNEL):
            cols[:, :, i, j] = xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride]
    return cols.reshape(n, c * KERNEL * KERNEL, ho * wo)


def col2im(cols: np.ndarray, shape: Tuple[int, ...], stride: int) -> np.ndarray:
    """The adjoint of `im2col`: patch gradients summed back into an [N, C, H, W] gradient."""
    n, c, h, w = shape
    ho, wo = _out_size(h, stride), _out_size(w, stride)
    cols = cols.reshape(n, c, KERNEL, KERNEL, ho, wo)
    xp = np.zeros((n, c, h + 2 * PAD, w + 2 * PAD), cols.dtype)
    for i in range(KERNEL):
        for j in range(KERNEL):
            xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride] += cols[:, :, i, j]
    return xp[:, :, PAD:PAD + h, PAD:PAD + w]


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def forward(p: Params, x: np.ndarray) -> Tuple[np.ndarray, List[tuple]]:
    """Probabilities [N, 10] for images [N, 1, 8, 8], and what `backward` needs."""
    cache = []
    h = x
    for wname, bname, stride in CONVS:
        cols = im2col(h, stride)
        w = p[wname]
        side = _out_size(h.shape[2], stride)
        z = np.matmul(w.reshape(w.shape[0], -1), cols) + p[bname][:, None]
        a = np.maximum(z, 0.0)
        cache.append((h.shape, cols, z))
        h = a.reshape(x.shape[0], w.shape[0], side, side)
    flat = h.reshape(x.shape[0], -1)
    cache.append((flat,))
    return softmax(flat @ p["w3"].T + p["b3"]), cache


def backward(p: Params, probs: np.ndarray, labels: np.ndarray, cache: List[tuple]) -> Params:
    """Gradients of the mean cross-entropy loss with respect to every parameter."""
    n = labels.shape[0]
    dz = probs.copy()
    dz[np.arange(n), labels] -= 1.0
    dz /= n
    (flat,) = cache[-1]
    grads = {"w3": dz.T @ flat, "b3": dz.sum(axis=0)}
    dh = (dz @ p["w3"]).reshape(n, 16, -1)
    for (wname, bname, stride), (in_shape, cols, z) in zip(CONVS[::-1], cache[-2::-1]):
        w = p[wname]
        dz_conv = dh * (z > 0)
        grads[wname] = np.einsum("nfk,nck->fc", dz_conv, cols).reshape(w.shape)
        grads[bname] = dz_conv.sum(axis=(0, 2))
        dcols = np.matmul(w.reshape(w.shape[0], -1).T, dz_conv)
        dh = col2im(dcols, in_shape, stride).reshape(n, in_shape[1], -1)
    return grads


class Adam:
    """Adam with the usual defaults (β1 0.9, β2 0.999, ε 1e-8)."""

    def __init__(self, params: Params, lr: float) -> None:
        self.lr = lr
        self.t = 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params: Params, grads: Params) -> None:
        """Update `params` in place."""
        self.t += 1
        for k, g in grads.items():
            self.m[k] = 0.9 * self.m[k] + 0.1 * g
            self.v[k] = 0.999 * self.v[k] + 0.001 * g * g
            m_hat = self.m[k] / (1 - 0.9 ** self.t)
            v_hat = self.v[k] / (1 - 0.999 ** self.t)
            params[k] -= self.lr * m_hat / (np.sqrt(v_hat) + 1e-8)


def train(images: np.ndarray, labels: np.ndarray, epochs: int = 12, batch: int = 32,
          lr: float = 3e-3, seed: int = 0) -> Params:
    """Train on images [N, 1, 8, 8] in [0, 1] and integer labels; float32 parameters."""
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    opt = Adam(params, lr)
    x = images.astype(np.float64)
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch):
            idx = order[start:start + batch]
            probs, cache = forward(params, x[idx])
            opt.step(params, backward(params, probs, labels[idx], cache))
    return {k: v.astype(np.float32) for k, v in params.items()}


def predict(params: Params, images: np.ndarray) -> np.ndarray:
    """Probabilities [N, 10] (float64 maths on the given parameters)."""
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    return forward(p64, images.astype(np.float64))[0]
