"""Spatial geometry of Conv- and pool-like ops, shared by the CPU kernels and every provider.

The per-spatial-axis attributes (kernel_shape, strides, dilations, pads, auto_pad) checked once,
and the output sizes and padding of a convolution, a transposed convolution and a pooling window
as onnxruntime computes them (SAME_UPPER/SAME_LOWER, VALID, ceil_mode). Providers that plan a
Conv or a pool on the host (WebGPU, the wasm and NEON C kernels) call these instead of keeping
their own copies, so every provider agrees with the CPU kernel on shapes and pads.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from .errors import InvalidArgument


def spatial_attr(op: str, name: str, value: Optional[Sequence[int]], nd: int, default: int,
                 minimum: int) -> List[int]:
    """A per-spatial-axis attribute (strides, dilations, ...) checked for length and minimum."""
    if value is None or len(value) == 0:
        return [default] * nd
    vals = [int(v) for v in value]
    if len(vals) != nd:
        raise InvalidArgument("%s: attribute %s must have %d values (one per spatial axis), got %s"
                              % (op, name, nd, vals))
    if any(v < minimum for v in vals):
        raise InvalidArgument("%s: attribute %s values must be >= %d, got %s"
                              % (op, name, minimum, vals))
    return vals


def pads_attr(op: str, pads: Optional[Sequence[int]], nd: int) -> Tuple[List[int], List[int]]:
    """The `pads` attribute split into (begins, ends); zeros when absent."""
    if pads is None or len(pads) == 0:
        return [0] * nd, [0] * nd
    vals = [int(p) for p in pads]
    if len(vals) != 2 * nd:
        raise InvalidArgument("%s: attribute pads must have %d values (begins then ends), got %s"
                              % (op, 2 * nd, vals))
    if any(p < 0 for p in vals):
        raise InvalidArgument("%s: attribute pads must be non-negative, got %s" % (op, vals))
    return vals[:nd], vals[nd:]


def auto_pad_mode(op: str, auto_pad: object) -> str:
    """The auto_pad attribute as a checked upper-case string."""
    mode = str(auto_pad)
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise InvalidArgument("%s: auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got %r"
                              % (op, mode))
    return mode


def conv_geometry(op: str, in_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int], pads: Optional[Sequence[int]], auto_pad: str
                  ) -> Tuple[List[int], List[int], List[int]]:
    """(pad begins, pad ends, output sizes) of a convolution, as onnxruntime computes them."""
    nd = len(in_shape)
    begins, ends = pads_attr(op, pads, nd)
    out = []
    for i in range(nd):
        ek = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            target = -(-in_shape[i] // strides[i])
            total = max(0, (target - 1) * strides[i] + ek - in_shape[i])
            head = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
            begins[i], ends[i] = head, total - head
        elif auto_pad == "VALID":
            begins[i], ends[i] = 0, 0
        size = (in_shape[i] + begins[i] + ends[i] - ek) // strides[i] + 1
        if size < 1:
            raise InvalidArgument(
                "%s: spatial axis %d of size %d (pads %d+%d) is smaller than the dilated kernel %d"
                % (op, i, in_shape[i], begins[i], ends[i], ek))
        out.append(size)
    return begins, ends, out


def transpose_geometry(op: str, in_shape: Sequence[int], kernel: Sequence[int],
                       strides: Sequence[int], dilations: Sequence[int],
                       pads: Optional[Sequence[int]], auto_pad: str,
                       output_padding: Sequence[int], output_shape: Optional[Sequence[int]]
                       ) -> Tuple[List[int], List[int]]:
    """(pad begins, output sizes) of a transposed convolution, as onnxruntime computes them."""
    nd = len(in_shape)
    begins, ends = pads_attr(op, pads, nd)
    if output_shape is not None and len(output_shape):
        target = [int(v) for v in output_shape]
        if len(target) == nd + 2:
            target = target[2:]
        if len(target) != nd:
            raise InvalidArgument("%s: output_shape must have %d spatial values, got %s"
                                  % (op, nd, list(output_shape)))
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [s * st for s, st in zip(in_shape, strides)]
    else:
        target = None
    out = []
    for i in range(nd):
        full = (strides[i] * (in_shape[i] - 1) + output_padding[i]
                + (kernel[i] - 1) * dilations[i] + 1)
        if target is not None:
            total = full - target[i]
            if auto_pad == "SAME_UPPER":
                begins[i], ends[i] = total // 2, total - total // 2
            else:
                begins[i], ends[i] = total - total // 2, total // 2
        elif auto_pad == "VALID":
            begins[i], ends[i] = 0, 0
        size = full - begins[i] - ends[i]
        if size < 1:
            raise InvalidArgument("%s: output spatial axis %d would have size %d (expected >= 1)"
                                  % (op, i, size))
        out.append(size)
    return begins, out


def pool_geometry(op: str, in_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int], pads: Optional[Sequence[int]], auto_pad: str,
                  ceil_mode: int) -> Tuple[List[int], List[int], List[int]]:
    """(pad begins, pad ends, output sizes) of a pooling window, as onnxruntime computes them."""
    nd = len(in_shape)
    begins, ends = pads_attr(op, pads, nd)
    out = []
    for i in range(nd):
        n, k, s, d = in_shape[i], kernel[i], strides[i], dilations[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # onnxruntime sizes SAME padding from the undilated kernel
            needed = max(0, (-(-n // s) - 1) * s + k - n)
            head = needed // 2 if auto_pad == "SAME_UPPER" else (needed + 1) // 2
            begins[i], ends[i] = head, needed - head
        elif auto_pad == "VALID":
            begins[i], ends[i] = 0, 0
        span = n + begins[i] + ends[i] - d * (k - 1) - 1
        if span < 0:
            raise InvalidArgument("%s: spatial axis %d of size %d (pads %d+%d) is smaller than "
                                  "the dilated kernel %d" % (op, i, n, begins[i], ends[i],
                                                             d * (k - 1) + 1))
        size = span // s + 1
        if ceil_mode and auto_pad == "NOTSET":
            size = -(-span // s) + 1
            if (size - 1) * s >= n + begins[i]:   # the last window must start inside the input
                size -= 1
        out.append(size)
    return begins, ends, out
