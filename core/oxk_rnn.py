"""LSTM and GRU as one C-engine op each (oxk.h `oxk_rnn`, opcode OXK_OP_RNN; issue #17).

The transport-independent half, for every engine provider: which recurrent nodes the engine takes
(`reason`), the GEMM operands it packs once from the node's constant W, R, B (`weights`: per
direction the projection W with both biases folded where they add straight in, R (LSTM's four
gates, GRU's z and r) and GRU's Rh with its bias), the argument values (`args_values`), and the
program emitter (`emit`). The provider packs the operands with its own library into a run whose
`rnn` attribute is an `RnnPlans`, and its node-by-node path calls the same kernel, so a first run
and a program run give the same bits.
Pure Python: the page runs it.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import ir

OP_RNN = 60                       # oxk.h OXK_OP_RNN
KIND = {"LSTM": 0, "GRU": 1}      # oxk.h OXK_RNN_LSTM, OXK_RNN_GRU
GATES = {"LSTM": 4, "GRU": 3}
DEFAULT_ACTS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}
PLANS_PER_DIRECTION = 3

# One GEMM operand the provider packs: B given as (N, K) (ONNX's W / R rows: transB), its bias.
Operand = Optional[Tuple[np.ndarray, Optional[np.ndarray]]]


def _const(facts: Any, name: str) -> Optional[np.ndarray]:
    return facts.const(name) if name and hasattr(facts, "const") else None


def reason(node: ir.Node, facts: Any, engine: str) -> Optional[str]:
    """Why the engine cannot take LSTM / GRU `node` as the graph declares it (None: it can)."""
    op, a = node.op_type, node.attributes
    ins = list(node.inputs) + [""] * 8
    if int(a.get("layout", 0)) != 0:
        return "layout=1 (batch first); %s runs %s with layout 0" % (engine, op)
    if op == "LSTM" and int(a.get("input_forget", 0)):
        return "input_forget=1; %s runs LSTM without coupled input and forget gates" % engine
    acts = a.get("activations")
    if acts:
        names = [str(x).lower() for x in acts]
        default = DEFAULT_ACTS[op]
        if names not in (default, default * 2):
            return "activations %s; %s runs the default %s" % (list(acts), engine, default)
    if ins[4]:
        return "input sequence_lens is given; %s runs every batch entry over the whole sequence" % engine
    for i in (0, 5, 6):
        et = facts.elem_type(ins[i]) if ins[i] else 0
        if et not in (0, 1):
            return "input %r is not float32 (ONNX element type %d)" % (ins[i], et)
    rank = facts.rank(ins[0]) if hasattr(facts, "rank") else None
    if rank is not None and rank != 3:
        return "X is %d-D; %s expects [seq, batch, input]" % (rank, op)
    for i, what in ((1, "W"), (2, "R"), (3, "B"), (7, "P")):
        if not ins[i]:
            continue
        c = _const(facts, ins[i])
        if c is None:
            return "%s (%r) is not a constant; %s packs the weights once" % (what, ins[i], engine)
        if c.dtype != np.float32:
            return "%s (%r) is %s, not float32" % (what, ins[i], c.dtype)
    return None


def weights(op: str, w: np.ndarray, r: np.ndarray, b: Optional[np.ndarray],
            linear_before_reset: bool) -> List[List[Operand]]:
    """Per direction the three GEMM operands (N x K rows, bias) of oxk_rnn_args.plans: the
    projection, h @ R^T (LSTM: all four gates; GRU: z and r) and GRU's Rh (None for LSTM: the
    kernel never reads its third plan)."""
    dirs, gh, _ = w.shape
    G = GATES[op]
    H = gh // G
    out: List[List[Operand]] = []
    for d in range(dirs):
        wb = np.zeros(G * H, np.float32) if b is None else b[d, :G * H].astype(np.float32)
        rb = np.zeros(G * H, np.float32) if b is None else b[d, G * H:].astype(np.float32)
        wd, rd = np.ascontiguousarray(w[d], np.float32), np.ascontiguousarray(r[d], np.float32)
        if op == "LSTM":
            out.append([(wd, wb + rb), (rd, None), None])
            continue
        proj = wb.copy()
        proj[:2 * H] += rb[:2 * H]
        if not linear_before_reset:
            proj[2 * H:] += rb[2 * H:]
        rh_bias = rb[2 * H:].copy() if linear_before_reset else None
        out.append([(wd, proj), (np.ascontiguousarray(rd[:2 * H]), None),
                    (np.ascontiguousarray(rd[2 * H:]), rh_bias)])
    return out


class RnnPlans:
    """What a provider bound for one recurrent node: the address of its 3 * dirs contiguous
    oxk_sgemm_plan structs and of P (0: none), the sizes, and `keep` (what they point into)."""

    def __init__(self, node: ir.Node, plans_addr: int, peep_addr: int, input_size: int, hidden: int,
                 dirs: int, keep: Sequence[Any]):
        a = node.attributes
        self.op = node.op_type
        self.plans_addr, self.peep_addr = plans_addr, peep_addr
        self.input, self.hidden, self.dirs = input_size, hidden, dirs
        self.reverse = int(str(a.get("direction", "forward")) == "reverse")
        self.lbr = int(a.get("linear_before_reset", 0)) if self.op == "GRU" else 0
        clip = a.get("clip")
        self.has_clip, self.clip = int(clip is not None), float(clip) if clip is not None else 0.0
        self.keep = list(keep)

    def args_values(self, seq: int, batch: int) -> Tuple[Any, ...]:
        """oxk_rnn_args' values (oxk_layout.FIELDS order) for a sequence of `seq` x `batch`."""
        return (KIND[self.op], seq, batch, self.input, self.hidden, self.dirs, self.reverse, self.lbr,
                self.has_clip, self.clip, self.plans_addr, self.peep_addr)

    def scratch_floats(self, seq: int, batch: int) -> int:
        """oxk_rnn_scratch_floats for these sizes."""
        gh = GATES[self.op] * self.hidden
        return seq * batch * gh + batch * gh + 4 * batch * self.hidden

    def out_shapes(self, seq: int, batch: int) -> List[Tuple[int, ...]]:
        """Shapes of Y, Y_h (and LSTM's Y_c)."""
        st = (self.dirs, batch, self.hidden)
        return [(seq, self.dirs, batch, self.hidden), st] + ([st] if self.op == "LSTM" else [])

    def check_input(self, x_shape: Sequence[int]) -> Optional[str]:
        """Why X of this shape does not fit the plans (None: it does)."""
        if len(x_shape) != 3 or int(x_shape[2]) != self.input or int(x_shape[1]) < 1:
            return "X of shape %s does not fit [seq, batch>=1, %d]" % (tuple(x_shape), self.input)
        return None


def emit(bd: Any, node: ir.Node, run: Any) -> None:
    """The program instruction of a recurrent node whose provider run bound `run.rnn` (RnnPlans)."""
    from onnxedge.oxk_program import Unsupported
    plans = getattr(run, "rnn", None)
    if plans is None:
        raise Unsupported("%s has no packed weights (they are not constants)" % node.op_type)
    shape = bd.shape(node.inputs[0])
    bad = plans.check_input(shape)
    if bad:
        raise Unsupported(bad)
    seq, batch = shape[0], shape[1]
    ins = list(node.inputs) + [""] * 8
    outs = list(node.outputs) + [""] * 3
    x = bd.read(ins[0])
    h0 = bd.read(ins[5]) if ins[5] else None
    c0 = bd.read(ins[6]) if ins[6] and node.op_type == "LSTM" else None
    shapes = plans.out_shapes(seq, batch)
    ybufs = []
    for i, shp in enumerate(shapes):
        if outs[i]:
            if bd.shape(outs[i]) != tuple(shp):
                raise Unsupported("output %r of shape %s, the kernel writes %s"
                                  % (outs[i], bd.shape(outs[i]), shp))
            ybufs.append(bd.write(outs[i]))
        else:
            ybufs.append(bd.temp(4 * int(np.prod(shp))) if i == 0 else None)
    scratch = bd.temp(4 * plans.scratch_floats(seq, batch))
    args = bd.struct("oxk_rnn_args", *plans.args_values(seq, batch))
    yc = ybufs[2] if len(ybufs) > 2 else None
    bd.emit(OP_RNN, 0, args, x, h0, ybufs[0], (c0, ybufs[1], yc, scratch))


__all__ = ["DEFAULT_ACTS", "GATES", "KIND", "OP_RNN", "PLANS_PER_DIRECTION", "RnnPlans", "emit",
           "reason", "weights"]
