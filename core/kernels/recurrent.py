"""Recurrent kernels: RNN, GRU and LSTM (all opsets; `layout` from 14).

One driver serves the three ops: it checks shapes, projects the whole input sequence through W in
one matmul per direction, then steps through time with the op's cell, batched over the batch axis.
`sequence_lens` is honoured the way onnxruntime does: each batch entry runs over its own length
(reversed within that length for the reverse direction), Y is zero past the end, and Y_h / Y_c hold
the state after the entry's last step (zero for an entry of length 0). float16 / bfloat16 are
computed in float32 and cast back.
Activation names are case-insensitive; alpha / beta are consumed in order by the activations that
take them, with onnxruntime's defaults when the lists run out.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InvalidArgument, NotImplemented
from ._util import is_narrow_float
from .registry import register

Act = Callable[[np.ndarray], np.ndarray]

# name -> (takes alpha, takes beta); defaults are onnxruntime's (0 where it has none)
_ACT_ARGS = {
    "relu": (False, False), "tanh": (False, False), "sigmoid": (False, False),
    "affine": (True, True), "leakyrelu": (True, False), "thresholdedrelu": (True, False),
    "scaledtanh": (True, True), "hardsigmoid": (True, True), "elu": (True, False),
    "softsign": (False, False), "softplus": (False, False),
}
_ACT_DEFAULTS = {"leakyrelu": (0.01, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        r = np.exp(-x)
    r += 1
    return np.reciprocal(r, out=r)


def _make_act(name: str, alpha: float, beta: float) -> Act:
    """The activation `name` (already lower-case) with its alpha / beta bound."""
    if name == "sigmoid":
        return _sigmoid
    if name == "tanh":
        return np.tanh
    if name == "relu":
        return lambda x: np.maximum(x, 0)
    if name == "affine":
        return lambda x: x * alpha + beta
    if name == "leakyrelu":
        return lambda x: np.where(x >= 0, x, x * alpha)
    if name == "thresholdedrelu":
        return lambda x: np.where(x > alpha, x, 0).astype(x.dtype)
    if name == "scaledtanh":
        return lambda x: np.tanh(x * beta) * alpha
    if name == "hardsigmoid":
        return lambda x: np.clip(x * alpha + beta, 0, 1)
    if name == "elu":
        def elu(x: np.ndarray) -> np.ndarray:
            with np.errstate(over="ignore"):
                return np.where(x >= 0, x, np.expm1(np.minimum(x, 0)) * alpha)
        return elu
    if name == "softsign":
        return lambda x: x / (np.abs(x) + 1)
    # softplus: log(1 + e^x) without overflow
    return lambda x: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def activation_functions(op: str, names: Optional[Sequence[str]], defaults: Sequence[str],
                         dirs: int, alphas: Optional[Sequence[float]],
                         betas: Optional[Sequence[float]]) -> List[List[Act]]:
    """Per direction, the op's activation functions (names default to `defaults`)."""
    per = len(defaults)
    names = list(defaults) * dirs if not names else [str(n) for n in names]
    if dirs == 2 and len(names) == per:
        names = names * 2
    if len(names) != per * dirs:
        raise InvalidArgument("%s: attribute activations must list %d names (%d per direction), "
                              "got %d: %s" % (op, per * dirs, per, len(names), names))
    alphas, betas = list(alphas or ()), list(betas or ())
    fns = []
    for raw in names:
        name = raw.lower()
        if name not in _ACT_ARGS:
            raise NotImplemented("%s: activation %r is not one of Affine, Relu, LeakyRelu, "
                                 "ThresholdedRelu, Tanh, ScaledTanh, Sigmoid, HardSigmoid, Elu, "
                                 "Softsign, Softplus" % (op, raw))
        takes_a, takes_b = _ACT_ARGS[name]
        da, db = _ACT_DEFAULTS.get(name, (0.0, 0.0))
        a = float(alphas.pop(0)) if takes_a and alphas else da
        b = float(betas.pop(0)) if takes_b and betas else db
        fns.append(_make_act(name, a, b))
    return [fns[d * per:(d + 1) * per] for d in range(dirs)]


class RecurrentSetup:
    """The checked, layout-normalised operands of one recurrent node."""

    def __init__(self, op: str, gates: int, x: np.ndarray, w: np.ndarray, r: np.ndarray,
                 b: Optional[np.ndarray], seq_lens: Optional[np.ndarray],
                 initial: Sequence[Tuple[str, Optional[np.ndarray]]], direction: str,
                 hidden_size: Optional[int], layout: int):
        self.out_dtype = x.dtype
        work = np.float32 if is_narrow_float(x.dtype) else x.dtype
        if x.ndim != 3 or w.ndim != 3 or r.ndim != 3:
            raise InvalidArgument("%s: X, W and R must be 3-D, got shapes %s, %s, %s"
                                  % (op, x.shape, w.shape, r.shape))
        if layout not in (0, 1):
            raise InvalidArgument("%s: attribute layout must be 0 or 1, got %d" % (op, layout))
        if direction not in ("forward", "reverse", "bidirectional"):
            raise InvalidArgument("%s: attribute direction must be forward, reverse or "
                                  "bidirectional, got %r" % (op, direction))
        self.dirs = 2 if direction == "bidirectional" else 1
        self.reverse = [direction == "reverse", True][:self.dirs]
        if layout:
            x = x.transpose(1, 0, 2)
        seq, batch, inp = x.shape
        hid = r.shape[-1]
        if hidden_size is not None and int(hidden_size) != hid:
            raise InvalidArgument("%s: attribute hidden_size is %d but R has shape %s"
                                  % (op, hidden_size, r.shape))
        if w.shape != (self.dirs, gates * hid, inp) or r.shape != (self.dirs, gates * hid, hid):
            raise InvalidArgument(
                "%s: expected W of shape %s and R of shape %s (direction %s, hidden_size %d, "
                "input_size %d), got %s and %s" % (op, (self.dirs, gates * hid, inp),
                                                   (self.dirs, gates * hid, hid), direction, hid,
                                                   inp, w.shape, r.shape))
        if b is not None and b.shape != (self.dirs, 2 * gates * hid):
            raise InvalidArgument("%s: expected B of shape %s, got %s"
                                  % (op, (self.dirs, 2 * gates * hid), b.shape))
        self.seq, self.batch, self.hid = seq, batch, hid
        self.x = x.astype(work)
        self.w = w.astype(work)
        self.r = r.astype(work)
        self.b = (np.zeros((self.dirs, 2 * gates * hid), work) if b is None else b.astype(work))
        self.lens = None
        if seq_lens is not None:
            lens = np.asarray(seq_lens).reshape(-1).astype(np.int64)
            if lens.shape != (batch,) or np.any(lens < 0) or np.any(lens > seq):
                raise InvalidArgument("%s: sequence_lens must have shape (%d,) with values in "
                                      "0..%d, got %s" % (op, batch, seq, np.asarray(seq_lens)))
            if np.any(lens != seq):
                self.lens = lens
        self.initial = []
        want = (batch, self.dirs, hid) if layout else (self.dirs, batch, hid)
        for name, v in initial:
            if v is None:
                self.initial.append(np.zeros((self.dirs, batch, hid), work))
                continue
            if v.shape != want:
                raise InvalidArgument("%s: expected %s of shape %s, got %s"
                                      % (op, name, want, v.shape))
            v = v.astype(work)
            self.initial.append(v.transpose(1, 0, 2) if layout else v)
        self.layout = layout

    def run(self, d: int, xw: np.ndarray, states: List[np.ndarray],
            cell: Callable[..., List[np.ndarray]]) -> Tuple[np.ndarray, List[np.ndarray]]:
        """Step `cell(xw_t, *states) -> new states` (state 0 is h) through time in direction `d`;
        returns Y of this direction [seq, batch, hidden] and the final states."""
        seq, batch = self.seq, self.batch
        y = np.zeros((seq, batch, self.hid), xw.dtype)
        rev = self.reverse[d]
        if self.lens is None:
            for t in (range(seq - 1, -1, -1) if rev else range(seq)):
                states = cell(xw[t], *states)
                y[t] = states[0]
            return y, states
        cols = np.arange(batch)
        for t in range(seq):
            valid = t < self.lens
            if not valid.any():
                break
            rows = np.where(valid, self.lens - 1 - t, 0) if rev else np.full(batch, t)
            new = cell(xw[rows, cols], *states)
            keep = valid[:, None]
            states = [np.where(keep, n, s) for n, s in zip(new, states)]
            y[rows[valid], cols[valid]] = new[0][valid]
        ran = (self.lens > 0)[:, None]                 # onnxruntime: zero states for length 0
        return y, [np.where(ran, st, st.dtype.type(0)) for st in states]

    def outputs(self, ys: List[np.ndarray], finals: List[List[np.ndarray]]) -> tuple:
        """Y and the final states stacked over directions, in the node's layout and dtype."""
        y = np.stack(ys, axis=1)                                  # [seq, dirs, batch, hid]
        states = [np.stack([f[i] for f in finals]) for i in range(len(finals[0]))]
        if self.layout:
            y = y.transpose(2, 0, 1, 3)
            states = [s.transpose(1, 0, 2) for s in states]
        return tuple(np.ascontiguousarray(v).astype(self.out_dtype, copy=False)
                     for v in [y] + states)


def make_clipper(clip: Optional[float]) -> Callable[[np.ndarray], np.ndarray]:
    """The `clip` attribute as a function clamping gate inputs to [-clip, clip] (identity
    when absent)."""
    if clip is None:
        return lambda v: v
    c = float(clip)
    return lambda v: np.clip(v, -c, c)


def _project(s: RecurrentSetup, d: int, gates: int) -> np.ndarray:
    """X @ W[d]^T + Wb[d] for every time step at once: [seq, batch, gates * hidden]."""
    xw = np.matmul(s.x, s.w[d].T)
    xw += s.b[d, :gates * s.hid]
    return xw


@register("RNN", since=1)
def rnn(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Optional[np.ndarray] = None,
        sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None, *,
        activation_alpha: Optional[List[float]] = None,
        activation_beta: Optional[List[float]] = None,
        activations: Optional[List[str]] = None, clip: Optional[float] = None,
        direction: str = "forward", hidden_size: Optional[int] = None, layout: int = 0,
        output_sequence: int = 0) -> tuple:
    """ONNX RNN: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb); returns (Y, Y_h)."""
    s = RecurrentSetup("RNN", 1, x, w, r, b, sequence_lens, [("initial_h", initial_h)], direction,
               hidden_size, layout)
    acts = activation_functions("RNN", activations, ["Tanh"], s.dirs, activation_alpha,
                        activation_beta)
    clipped = make_clipper(clip)
    ys, finals = [], []
    for d in range(s.dirs):
        f = acts[d][0]
        rt, rb = s.r[d].T, s.b[d, s.hid:]

        def cell(xw_t: np.ndarray, h: np.ndarray) -> List[np.ndarray]:
            return [f(clipped(xw_t + np.matmul(h, rt) + rb))]
        y, st = s.run(d, _project(s, d, 1), [s.initial[0][d]], cell)
        ys.append(y)
        finals.append(st)
    return s.outputs(ys, finals)


@register("GRU", since=1)
def gru(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Optional[np.ndarray] = None,
        sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None, *,
        activation_alpha: Optional[List[float]] = None,
        activation_beta: Optional[List[float]] = None,
        activations: Optional[List[str]] = None, clip: Optional[float] = None,
        direction: str = "forward", hidden_size: Optional[int] = None, layout: int = 0,
        linear_before_reset: int = 0, output_sequence: int = 0) -> tuple:
    """ONNX GRU (gates z, r, h), with or without linear_before_reset; returns (Y, Y_h)."""
    s = RecurrentSetup("GRU", 3, x, w, r, b, sequence_lens, [("initial_h", initial_h)], direction,
               hidden_size, layout)
    acts = activation_functions("GRU", activations, ["Sigmoid", "Tanh"], s.dirs, activation_alpha,
                        activation_beta)
    clipped = make_clipper(clip)
    hid = s.hid
    ys, finals = [], []
    for d in range(s.dirs):
        f, g = acts[d]
        rzr_t, rh_t = s.r[d, :2 * hid].T, s.r[d, 2 * hid:].T
        rb = s.b[d, 3 * hid:]
        rbzr, rbh = rb[:2 * hid], rb[2 * hid:]

        def cell(xw_t: np.ndarray, h: np.ndarray) -> List[np.ndarray]:
            zr = f(clipped(xw_t[:, :2 * hid] + np.matmul(h, rzr_t) + rbzr))
            z, rg = zr[:, :hid], zr[:, hid:]
            if linear_before_reset:
                hh = (np.matmul(h, rh_t) + rbh) * rg
            else:
                hh = np.matmul(rg * h, rh_t) + rbh
            hh = g(clipped(hh + xw_t[:, 2 * hid:]))
            return [hh + z * (h - hh)]
        y, st = s.run(d, _project(s, d, 3), [s.initial[0][d]], cell)
        ys.append(y)
        finals.append(st)
    return s.outputs(ys, finals)


@register("LSTM", since=1)
def lstm(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Optional[np.ndarray] = None,
         sequence_lens: Optional[np.ndarray] = None, initial_h: Optional[np.ndarray] = None,
         initial_c: Optional[np.ndarray] = None, p: Optional[np.ndarray] = None, *,
         activation_alpha: Optional[List[float]] = None,
         activation_beta: Optional[List[float]] = None,
         activations: Optional[List[str]] = None, clip: Optional[float] = None,
         direction: str = "forward", hidden_size: Optional[int] = None, input_forget: int = 0,
         layout: int = 0, output_sequence: int = 0) -> tuple:
    """ONNX LSTM (gates i, o, f, c; peepholes P = i, o, f); returns (Y, Y_h, Y_c)."""
    s = RecurrentSetup("LSTM", 4, x, w, r, b, sequence_lens,
               [("initial_h", initial_h), ("initial_c", initial_c)], direction, hidden_size,
               layout)
    hid = s.hid
    if p is None:
        p = np.zeros((s.dirs, 3 * hid), s.x.dtype)
    elif p.shape != (s.dirs, 3 * hid):
        raise InvalidArgument("LSTM: expected P of shape %s, got %s" % ((s.dirs, 3 * hid), p.shape))
    p = p.astype(s.x.dtype)
    acts = activation_functions("LSTM", activations, ["Sigmoid", "Tanh", "Tanh"], s.dirs,
                        activation_alpha, activation_beta)
    clipped = make_clipper(clip)
    ys, finals = [], []
    for d in range(s.dirs):
        f, g, h_act = acts[d]
        rt, rb = s.r[d].T, s.b[d, 4 * hid:]
        pi, po, pf = p[d, :hid], p[d, hid:2 * hid], p[d, 2 * hid:]

        def cell(xw_t: np.ndarray, h: np.ndarray, c: np.ndarray) -> List[np.ndarray]:
            gates = xw_t + np.matmul(h, rt) + rb
            i = f(clipped(gates[:, :hid] + pi * c))       # peephole, then clip (onnxruntime)
            if input_forget:
                fg = 1 - i
            else:
                fg = f(clipped(gates[:, 2 * hid:3 * hid] + pf * c))
            c_new = fg * c + i * g(clipped(gates[:, 3 * hid:]))
            o = f(clipped(gates[:, hid:2 * hid] + po * c_new))
            return [o * h_act(c_new), c_new]
        y, st = s.run(d, _project(s, d, 4), [s.initial[0][d], s.initial[1][d]], cell)
        ys.append(y)
        finals.append(st)
    return s.outputs(ys, finals)
