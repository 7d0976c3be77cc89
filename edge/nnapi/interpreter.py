"""A numpy reference interpreter of the NNAPI operations the bridge emits.

Written from the NDK's NeuralNetworks.h operation reference, not from ONNX: 4-D tensors are NHWC,
padding is explicit (left, right, top, bottom), strides and filter sizes come width first, the
fuse code clamps the result (RELU [0, inf), RELU1 [-1, 1], RELU6 [0, 6]), AVERAGE_POOL_2D divides
by the number of elements inside the input (padding excluded, as Android's CPU implementation),
FULLY_CONNECTED flattens its input to [batch, input_size].

Quantized operands (TENSOR_QUANT8_ASYMM uint8, TENSOR_QUANT8_ASYMM_SIGNED int8) hold
real = scale * (q - zeroPoint). CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED on them accumulate
(input - inZp) * (filter - filterZp) exactly in int32 with the TENSOR_INT32 bias
(scale = inputScale * filterScale, zeroPoint 0), multiply by the real multiplier
inputScale * filterScale / outputScale, round half away from zero, add the output zeroPoint,
clamp to the fuse code's range and saturate. QUANTIZE computes round(x / scale) + zeroPoint with
round half away from zero (std::round), then saturates; DEQUANTIZE computes (q - zeroPoint) * scale.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence

import numpy as np

from onnxedge.errors import InvalidGraph, RuntimeException

from . import codes
from .model import Model, Operand

F32 = np.float32


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (C's round / std::round)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _qrange(op: Operand) -> tuple:
    return (0, 255) if op.type == codes.TENSOR_QUANT8_ASYMM else (-128, 127)


def _float_clamp(y: np.ndarray, fuse: int) -> np.ndarray:
    if fuse == codes.FUSED_RELU:
        return np.maximum(y, F32(0))
    if fuse == codes.FUSED_RELU1:
        return np.clip(y, F32(-1), F32(1))
    if fuse == codes.FUSED_RELU6:
        return np.clip(y, F32(0), F32(6))
    if fuse != codes.FUSED_NONE:
        raise InvalidGraph("NNAPI fuse code %d is not one of 0..3" % fuse)
    return y


def _quant_clamp(q: np.ndarray, fuse: int, out: Operand) -> np.ndarray:
    """Saturate to the type's range, narrowed by the fuse code's real range."""
    lo, hi = _qrange(out)

    def q_of(v: float) -> int:
        return int(out.zero_point + round_half_away(np.float64(v) / out.scale))
    if fuse == codes.FUSED_RELU:
        lo = max(lo, q_of(0.0))
    elif fuse == codes.FUSED_RELU1:
        lo, hi = max(lo, q_of(-1.0)), min(hi, q_of(1.0))
    elif fuse == codes.FUSED_RELU6:
        lo, hi = max(lo, q_of(0.0)), min(hi, q_of(6.0))
    elif fuse != codes.FUSED_NONE:
        raise InvalidGraph("NNAPI fuse code %d is not one of 0..3" % fuse)
    return np.clip(q, lo, hi)


def _requantize(acc: np.ndarray, in_op: Operand, w_op: Operand, out: Operand,
                fuse: int) -> np.ndarray:
    multiplier = np.float64(in_op.scale) * np.float64(w_op.scale) / np.float64(out.scale)
    q = round_half_away(acc.astype(np.float64) * multiplier) + out.zero_point
    return _quant_clamp(q, fuse, out).astype(codes.NUMPY_DTYPE[out.type])


def _windows(x: np.ndarray, fh: int, fw: int, sh: int, sw: int, dh: int, dw: int,
             pads: Sequence[int], fill: float) -> np.ndarray:
    """[b, oh, ow, fh, fw, c] views of an NHWC input padded (left, right, top, bottom)."""
    left, right, top, bottom = pads
    x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), mode="constant",
               constant_values=fill)
    b, h, w, c = x.shape
    oh = (h - dh * (fh - 1) - 1) // sh + 1
    ow = (w - dw * (fw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise InvalidGraph("NNAPI window %dx%d does not fit the padded input %dx%d" % (fh, fw, h, w))
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (b, oh, ow, fh, fw, c), (s[0], s[1] * sh, s[2] * sw, s[1] * dh, s[2] * dw, s[3]),
        writeable=False)


class _Ctx:
    """Operand values during one execution."""

    def __init__(self, model: Model, values: Dict[int, np.ndarray]):
        self.model = model
        self.values = values

    def op(self, i: int) -> Operand:
        return self.model.operands[i]

    def get(self, i: int) -> np.ndarray:
        return self.values[i]

    def scalar(self, i: int) -> float:
        return self.values[i].item()

    def real(self, i: int) -> np.ndarray:
        """The operand as float32 (dequantized when quantized)."""
        op, v = self.op(i), self.values[i]
        if op.type in codes.QUANT8:
            return ((v.astype(np.int32) - op.zero_point) * F32(op.scale)).astype(F32)
        return v


def _conv(c: _Ctx, ins: Sequence[int], out: int, depthwise: bool) -> np.ndarray:
    x_i, w_i, b_i = ins[0], ins[1], ins[2]
    pads = [int(c.scalar(i)) for i in ins[3:7]]
    sw, sh = int(c.scalar(ins[7])), int(c.scalar(ins[8]))
    rest = list(ins[9:])
    mult = int(c.scalar(rest.pop(0))) if depthwise else 1
    fuse = int(c.scalar(rest.pop(0)))
    if rest and bool(c.scalar(rest.pop(0))):
        raise InvalidGraph("NNAPI conv with layout=NCHW is not emitted by the bridge")
    dw, dh = (int(c.scalar(rest[0])), int(c.scalar(rest[1]))) if len(rest) >= 2 else (1, 1)
    x_op, w_op = c.op(x_i), c.op(w_i)
    quant = x_op.type in codes.QUANT8
    x, w, bias = c.get(x_i), c.get(w_i), c.get(b_i)
    if quant:
        x = x.astype(np.float64) - x_op.zero_point
        w = w.astype(np.float64) - w_op.zero_point
        bias = bias.astype(np.float64)
    _, fh, fw, _ = w.shape
    win = _windows(x, fh, fw, sh, sw, dh, dw, pads, 0.0)
    if depthwise:
        cin = x.shape[3]
        k = w.reshape(fh, fw, cin, mult)
        y = np.einsum("bijhwc,hwcm->bijcm", win, k, optimize=True).reshape(win.shape[:3] + (cin * mult,))
    else:
        y = np.tensordot(win, w, axes=([3, 4, 5], [1, 2, 3]))
    y = y + bias
    if quant:
        return _requantize(y, x_op, w_op, c.op(out), fuse)
    return _float_clamp(y.astype(F32), fuse)


def _pool(c: _Ctx, ins: Sequence[int], kind: str) -> np.ndarray:
    pads = [int(c.scalar(i)) for i in ins[1:5]]
    sw, sh, fw, fh, fuse = [int(c.scalar(i)) for i in ins[5:10]]
    if len(ins) > 10 and bool(c.scalar(ins[10])):
        raise InvalidGraph("NNAPI pool with layout=NCHW is not emitted by the bridge")
    x = c.get(ins[0])
    if kind == "max":
        y = _windows(x, fh, fw, sh, sw, 1, 1, pads, -np.inf).max(axis=(3, 4))
    else:
        total = _windows(x, fh, fw, sh, sw, 1, 1, pads, 0.0).sum(axis=(3, 4), dtype=np.float64)
        ones = np.ones((1,) + x.shape[1:3] + (1,), np.float64)
        count = _windows(ones, fh, fw, sh, sw, 1, 1, pads, 0.0).sum(axis=(3, 4))
        y = total / count
    return _float_clamp(y.astype(F32), fuse)


def _fully_connected(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    x_op, w_op = c.op(ins[0]), c.op(ins[1])
    x, w, bias = c.get(ins[0]), c.get(ins[1]), c.get(ins[2])
    fuse = int(c.scalar(ins[3]))
    units, size = w.shape
    if x.size % size:
        raise InvalidGraph("NNAPI FULLY_CONNECTED input of %d elements is not a multiple of "
                           "input_size %d" % (x.size, size))
    x = x.reshape(-1, size)
    if x_op.type in codes.QUANT8:
        acc = np.dot(x.astype(np.float64) - x_op.zero_point,
                     (w.astype(np.float64) - w_op.zero_point).T) + bias
        return _requantize(acc, x_op, w_op, c.op(out), fuse)
    return _float_clamp((np.dot(x, w.T) + bias).astype(F32), fuse)


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]):
    def run(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = fn(c.get(ins[0]), c.get(ins[1])).astype(F32)
        return _float_clamp(y, int(c.scalar(ins[2])))
    return run


def _softmax(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    x = c.get(ins[0]).astype(F32)
    beta = F32(c.scalar(ins[1]))
    axis = int(c.scalar(ins[2])) if len(ins) > 2 else -1
    z = (x - x.max(axis=axis, keepdims=True)) * beta
    e = np.exp(z)
    return (e / e.sum(axis=axis, keepdims=True)).astype(F32)


def _quantize(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    o = c.op(out)
    x = c.get(ins[0]).astype(F32)
    q = round_half_away((x / F32(o.scale)).astype(np.float64)) + o.zero_point
    lo, hi = _qrange(o)
    return np.clip(q, lo, hi).astype(codes.NUMPY_DTYPE[o.type])


def _reshape(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    return c.get(ins[0]).reshape([int(d) for d in c.get(ins[1])])


def _concat(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    return np.concatenate([c.get(i) for i in ins[:-1]], axis=int(c.scalar(ins[-1])))


def _mean(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    axes = tuple(int(a) for a in c.get(ins[1]))
    keep = bool(c.scalar(ins[2]))
    return c.get(ins[0]).mean(axis=axes, keepdims=keep, dtype=np.float64).astype(F32)


def _transpose(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
    x = c.get(ins[0])
    perm = [int(p) for p in c.get(ins[1])] if len(ins) > 1 else None
    return np.ascontiguousarray(np.transpose(x, perm))


def _unary(fn: Callable[[np.ndarray], np.ndarray]):
    def run(c: _Ctx, ins: Sequence[int], out: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return fn(c.get(ins[0]).astype(F32)).astype(F32)
    return run


OPERATIONS: Dict[int, Callable[[_Ctx, Sequence[int], int], np.ndarray]] = {
    codes.ADD: _binary(np.add),
    codes.SUB: _binary(np.subtract),
    codes.MUL: _binary(np.multiply),
    codes.DIV: _binary(np.divide),
    codes.CONV_2D: lambda c, ins, out: _conv(c, ins, out, False),
    codes.DEPTHWISE_CONV_2D: lambda c, ins, out: _conv(c, ins, out, True),
    codes.AVERAGE_POOL_2D: lambda c, ins, out: _pool(c, ins, "avg"),
    codes.MAX_POOL_2D: lambda c, ins, out: _pool(c, ins, "max"),
    codes.FULLY_CONNECTED: _fully_connected,
    codes.RELU: _unary(lambda x: np.maximum(x, F32(0))),
    codes.RELU1: _unary(lambda x: np.clip(x, F32(-1), F32(1))),
    codes.RELU6: _unary(lambda x: np.clip(x, F32(0), F32(6))),
    codes.LOGISTIC: _unary(lambda x: F32(1) / (F32(1) + np.exp(-x))),
    codes.TANH: _unary(np.tanh),
    codes.SOFTMAX: _softmax,
    codes.RESHAPE: _reshape,
    codes.CONCATENATION: _concat,
    codes.MEAN: _mean,
    codes.TRANSPOSE: _transpose,
    codes.QUANTIZE: _quantize,
    codes.DEQUANTIZE: lambda c, ins, out: c.real(ins[0]),
}


def execute(model: Model, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Run the model on input buffers (NNAPI order and layout); the output buffers in order."""
    if len(inputs) != len(model.inputs):
        raise InvalidGraph("NNAPI model takes %d inputs, got %d" % (len(model.inputs), len(inputs)))
    values: Dict[int, np.ndarray] = {i: o.value for i, o in enumerate(model.operands)
                                     if o.value is not None}
    for io, x in zip(model.inputs, inputs):
        op = model.operands[io.operand]
        x = np.asarray(x, dtype=codes.NUMPY_DTYPE[op.type])
        if tuple(x.shape) != op.dims:
            raise InvalidGraph("NNAPI model input %r has shape %s, the model declares %s"
                               % (io.name, list(x.shape), list(op.dims)))
        values[io.operand] = x
    ctx = _Ctx(model, values)
    for k, operation in enumerate(model.operations):
        name = codes.OPERATION_NAMES.get(operation.code, str(operation.code))
        fn = OPERATIONS.get(operation.code)
        if fn is None or len(operation.outputs) != 1:
            raise InvalidGraph("NNAPI operation %d (%s) is not one the interpreter runs" % (k, name))
        out = operation.outputs[0]
        try:
            y = fn(ctx, operation.inputs, out)
        except (InvalidGraph, KeyError):
            raise
        except Exception as e:
            raise RuntimeException("NNAPI operation %d (%s) failed in the reference interpreter: "
                                   "%s: %s" % (k, name, type(e).__name__, e)) from e
        declared = model.operands[out]
        if tuple(y.shape) != declared.dims:
            raise InvalidGraph("NNAPI operation %d (%s) made shape %s; operand %d declares %s"
                               % (k, name, list(y.shape), out, list(declared.dims)))
        values[out] = np.asarray(y, dtype=codes.NUMPY_DTYPE[declared.type])
    return [values[io.operand] for io in model.outputs]
