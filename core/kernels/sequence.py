"""Sequence and optional values: a sequence is a Python list of arrays, an empty optional is None."""
from __future__ import annotations

from typing import Any, List

import numpy as np

from .. import dtypes
from ..errors import InvalidArgument
from .registry import register


def _position(seq: List[Any], position: Any, op: str, insert: bool = False) -> int:
    n = len(seq)
    pos = int(np.asarray(position).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= pos <= hi:
        raise InvalidArgument("%s: position %d is out of range for a sequence of length %d"
                              % (op, pos, n))
    return pos + n if pos < 0 else pos


@register("SequenceConstruct", since=11)
def sequence_construct(*xs):
    """A sequence of the inputs."""
    return list(xs)


@register("SequenceEmpty", since=11)
def sequence_empty(dtype=dtypes.FLOAT):
    """An empty sequence (its element type lives in the graph's type information)."""
    return []


@register("SequenceAt", since=11)
def sequence_at(seq, position):
    """The element at position (negative counts from the end)."""
    return seq[_position(seq, position, "SequenceAt")]


@register("SequenceInsert", since=11)
def sequence_insert(seq, tensor, position=None):
    """A new sequence with tensor inserted at position (default: at the end)."""
    out = list(seq)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(seq, position, "SequenceInsert", insert=True), tensor)
    return out


@register("SequenceErase", since=11)
def sequence_erase(seq, position=None):
    """A new sequence without the element at position (default: the last)."""
    out = list(seq)
    if not out:
        raise InvalidArgument("SequenceErase: the sequence is empty")
    del out[-1 if position is None else _position(seq, position, "SequenceErase")]
    return out


@register("SequenceLength", since=11)
def sequence_length(seq):
    """The number of elements, as an int64 scalar."""
    return np.array(len(seq), dtype=np.int64)


@register("SplitToSequence", since=11)
def split_to_sequence(x, split=None, axis=0, keepdims=1):
    """Split x along axis into a sequence, by sizes (split input) or into single slices."""
    x = np.asarray(x)
    axis = axis + x.ndim if axis < 0 else axis
    if split is None:
        parts = [np.take(x, [i], axis=axis) for i in range(x.shape[axis])]
        return [np.squeeze(p, axis=axis) if not keepdims else p for p in parts]
    split = np.asarray(split)
    if split.ndim == 0:
        size = int(split)
        if size <= 0:
            raise InvalidArgument("SplitToSequence: split must be positive, got %d" % size)
        bounds = list(range(size, x.shape[axis], size))
    else:
        if int(split.sum()) != x.shape[axis]:
            raise InvalidArgument("SplitToSequence: split sizes %s do not add up to dimension %d (%d)"
                                  % (split.tolist(), axis, x.shape[axis]))
        bounds = np.cumsum(split)[:-1].tolist()
    return list(np.split(x, bounds, axis=axis))


@register("ConcatFromSequence", since=11)
def concat_from_sequence(seq, axis=0, new_axis=0):
    """Concatenate (or stack, with new_axis=1) the sequence's tensors along axis."""
    if not seq:
        raise InvalidArgument("ConcatFromSequence: the sequence is empty")
    if new_axis:
        rank = np.asarray(seq[0]).ndim + 1
        return np.stack(seq, axis=axis + rank if axis < 0 else axis)
    return np.concatenate(seq, axis=axis)


@register("SequenceMap", since=17)
def sequence_map(ctx, seq, *others, body=None):
    """Run body on each element (and the matching elements of other sequences / tensors)."""
    names = [v.name for v in body.inputs]
    outs: List[List[Any]] = [[] for _ in body.outputs]
    for i in range(len(seq)):
        feeds = {names[0]: seq[i]}
        for name, other in zip(names[1:], others):
            feeds[name] = other[i] if isinstance(other, list) else other
        for k, value in enumerate(ctx.run_graph(body, feeds)):
            outs[k].append(value)
    return tuple(outs)


@register("Optional", since=15)
def optional(x=None, type=None):
    """An optional holding x, or an empty optional."""
    return x


@register("OptionalHasElement", since=15)
def optional_has_element(x=None):
    """True when the optional (or a plain tensor/sequence, from opset 18) holds a value."""
    return np.array(x is not None)


@register("OptionalGetElement", since=15)
def optional_get_element(x):
    """The value an optional holds; InvalidArgument when it is empty."""
    if x is None:
        raise InvalidArgument("OptionalGetElement: the optional is empty")
    return x
