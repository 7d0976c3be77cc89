"""Control flow with subgraphs: If, Loop and Scan. Bodies run through `ctx.run_graph`, which sees
the enclosing scopes' values."""
from __future__ import annotations

from typing import Any, List

import numpy as np

from ..errors import InvalidArgument, InvalidGraph
from ._util import check_run, check_tensor_bytes
from .registry import register


def _as_bool(value: Any, what: str) -> bool:
    arr = np.asarray(value)
    if arr.size != 1:
        raise InvalidArgument("%s must hold exactly one value, got shape %s" % (what, list(arr.shape)))
    return bool(arr.reshape(-1)[0])


@register("If", since=1)
def if_(ctx, cond, then_branch=None, else_branch=None):
    """Run then_branch or else_branch and return its outputs."""
    branch = then_branch if _as_bool(cond, "If condition") else else_branch
    if branch is None:
        raise InvalidGraph("If node lacks its %s attribute" % ("then_branch" if branch is then_branch
                                                                else "else_branch"))
    return tuple(ctx.run_graph(branch, {}))


class _Accumulated:
    """Slices a loop's scan outputs have collected so far, charged against the run's per-tensor
    budget each iteration (the collected slices become one stacked tensor at the end)."""

    def __init__(self, op: str, n: int):
        self.op = op
        self.count = [0] * n

    def add(self, k: int, value: Any) -> None:
        """Charge one more slice of scan output k; RuntimeException past the budget."""
        if isinstance(value, np.ndarray):
            self.count[k] += 1
            check_tensor_bytes(self.op, [self.count[k]] + list(value.shape), value.dtype,
                               "scan output %d" % k)


def _stack(items: List[Any], axis: int = 0, reverse: bool = False) -> np.ndarray:
    if reverse:
        items = items[::-1]
    return np.stack([np.asarray(i) for i in items], axis=axis)


@register("Loop", since=1)
def loop(ctx, max_trip_count=None, cond=None, *initial, body=None):
    """Run body while the trip count and the condition allow; carried values and scan outputs."""
    if body is None:
        raise InvalidGraph("Loop node lacks its body attribute")
    names = [v.name for v in body.inputs]
    if len(names) != 2 + len(initial):
        raise InvalidGraph("Loop body takes %d inputs, expected 2 + %d loop-carried values"
                           % (len(names), len(initial)))
    n_carried = len(initial)
    n_scan = len(body.outputs) - 1 - n_carried
    if n_scan < 0:
        raise InvalidGraph("Loop body returns %d outputs, expected at least 1 + %d"
                           % (len(body.outputs), n_carried))
    trip_limit = None if max_trip_count is None else int(np.asarray(max_trip_count).reshape(-1)[0])
    keep_going = True if cond is None else _as_bool(cond, "Loop condition")
    carried = list(initial)
    scans: List[List[Any]] = [[] for _ in range(n_scan)]
    charged = _Accumulated("Loop", n_scan)
    i = 0
    while keep_going and (trip_limit is None or i < trip_limit):
        check_run()
        feeds = {names[0]: np.array(i, dtype=np.int64), names[1]: np.array(keep_going)}
        feeds.update(zip(names[2:], carried))
        outs = ctx.run_graph(body, feeds)
        keep_going = _as_bool(outs[0], "Loop body condition output")
        carried = list(outs[1:1 + n_carried])
        for k in range(n_scan):
            charged.add(k, outs[1 + n_carried + k])
            scans[k].append(outs[1 + n_carried + k])
        i += 1
    results: List[Any] = list(carried)
    for k in range(n_scan):
        if scans[k]:
            if isinstance(scans[k][0], (list, type(None))):
                results.append(scans[k])
            else:
                results.append(_stack(scans[k]))
        else:
            results.append(_empty_scan_output(body, 1 + n_carried + k))
    return tuple(results)


def _empty_scan_output(body: Any, index: int) -> np.ndarray:
    from .. import dtypes
    t = body.outputs[index].type
    dtype = dtypes.to_numpy(t.elem_type) if t is not None and t.elem_type else np.float32
    shape = [0]
    if t is not None and t.shape is not None:
        shape += [d if isinstance(d, int) else 0 for d in t.shape]
    return np.zeros(shape, dtype=dtype)


def _scan(ctx, states: List[Any], scan_inputs: List[Any], body: Any, directions_in: List[int],
          directions_out: List[int], axes_in: List[int], axes_out: List[int]) -> tuple:
    names = [v.name for v in body.inputs]
    n_state = len(states)
    inputs = []
    for k, x in enumerate(scan_inputs):
        axis = axes_in[k] if k < len(axes_in) else 0
        x = np.moveaxis(np.asarray(x), axis if axis >= 0 else axis + x.ndim, 0)
        if k < len(directions_in) and directions_in[k] == 1:
            x = x[::-1]
        inputs.append(x)
    lengths = {x.shape[0] for x in inputs}
    if len(lengths) > 1:
        raise InvalidArgument("Scan inputs have different sequence lengths %s" % sorted(lengths))
    steps = lengths.pop() if lengths else 0
    n_out = len(body.outputs) - n_state
    collected: List[List[Any]] = [[] for _ in range(n_out)]
    charged = _Accumulated("Scan", n_out)
    for t in range(steps):
        check_run()
        feeds = dict(zip(names[:n_state], states))
        feeds.update((names[n_state + k], x[t]) for k, x in enumerate(inputs))
        outs = ctx.run_graph(body, feeds)
        states = list(outs[:n_state])
        for k in range(n_out):
            charged.add(k, outs[n_state + k])
            collected[k].append(outs[n_state + k])
    results = list(states)
    for k in range(n_out):
        reverse = k < len(directions_out) and directions_out[k] == 1
        if collected[k]:
            y = _stack(collected[k], 0, reverse)
        else:
            y = _empty_scan_output(body, n_state + k)
        axis = axes_out[k] if k < len(axes_out) else 0
        if axis != 0:
            y = np.moveaxis(y, 0, axis if axis >= 0 else axis + y.ndim)
        results.append(y)
    return tuple(results)


@register("Scan", since=9)
def scan(ctx, *xs, body=None, num_scan_inputs=0, scan_input_directions=None,
         scan_output_directions=None, scan_input_axes=None, scan_output_axes=None):
    """Iterate body over slices of the scan inputs, carrying state; stack the scan outputs."""
    if body is None:
        raise InvalidGraph("Scan node lacks its body attribute")
    n_state = len(xs) - num_scan_inputs
    if n_state < 0:
        raise InvalidGraph("Scan has %d inputs but num_scan_inputs=%d" % (len(xs), num_scan_inputs))
    return _scan(ctx, list(xs[:n_state]), list(xs[n_state:]), body, scan_input_directions or [],
                 scan_output_directions or [], scan_input_axes or [], scan_output_axes or [])


@register("Scan", since=8, until=8)
def scan_8(ctx, sequence_lens=None, *xs, body=None, num_scan_inputs=0, directions=None):
    """Opset-8 Scan: a leading batch axis on every input, optional per-batch sequence lengths."""
    if body is None:
        raise InvalidGraph("Scan node lacks its body attribute")
    n_state = len(xs) - num_scan_inputs
    batch = np.asarray(xs[0]).shape[0] if xs else 0
    per_batch = []
    for b in range(batch):
        states = [np.asarray(x)[b] for x in xs[:n_state]]
        seqs = [np.asarray(x)[b] for x in xs[n_state:]]
        if sequence_lens is not None and np.asarray(sequence_lens).size:
            n = int(np.asarray(sequence_lens).reshape(-1)[b])
            seqs = [s[:n] for s in seqs]
        per_batch.append(_scan(ctx, states, seqs, body, directions or [], [], [], []))
    if not per_batch:
        raise InvalidArgument("Scan (opset 8) got an empty batch")
    return tuple(np.stack([r[k] for r in per_batch]) for k in range(len(per_batch[0])))

