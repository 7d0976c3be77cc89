"""The program ops of the C kernel library (elementwise.c, normalization.c) and the program runtime
(program.c) against numpy in float64, on random and edge shapes, for the host and generic builds."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from neon_helpers import ensure_built

ensure_built()

from onnxedge.edge.neon import library as L  # noqa: E402
from onnxedge.errors import InvalidArgument  # noqa: E402

EPS = np.finfo(np.float32).eps


@pytest.fixture(scope="module", params=["", "generic"])
def lib(request):
    return L.load(request.param)


def _close(got, want, terms=1):
    """float32 result vs a float64 reference: error scaled to the magnitude and the number of
    terms a value sums."""
    want = np.asarray(want, np.float64)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=8 * EPS * terms, atol=8 * EPS * terms * scale)


ACTS = [("Relu", (), lambda x: np.maximum(x, 0)),
        ("LeakyRelu", (0.1,), lambda x: np.where(x >= 0, x, 0.1 * x)),
        ("Sigmoid", (), lambda x: 1 / (1 + np.exp(-x))),
        ("Tanh", (), np.tanh),
        ("Clip", (-0.5, 0.75), lambda x: np.clip(x, -0.5, 0.75))]


@pytest.mark.parametrize("shape", [(0,), (1,), (3,), (17,), (4, 33), (2, 3, 5, 7)])
@pytest.mark.parametrize("name,params,ref", ACTS)
def test_act(lib, shape, name, params, ref):
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 3).astype(np.float32)
    _close(lib.act(x, name, params), ref(x.astype(np.float64)))


SHAPES = [((5,), (5,)), ((), (7,)), ((4, 6), ()), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)),
          ((1, 8, 5, 5), (1, 8, 1, 1)), ((3, 8, 5, 5), (8, 1, 1)), ((2, 4, 16, 16), (2, 1, 1, 16)),
          ((1, 1, 1, 9), (2, 3, 4, 9)), ((4, 1), (1, 5)), ((2, 0, 3), (3,)), ((40000,), (40000,)),
          ((3, 20000), (20000,)), ((6,), (1,))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_broadcasts(lib, op, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a = np.asarray(rng.standard_normal(sa), np.float32)
    b = np.asarray(rng.standard_normal(sb) + 3, np.float32)
    f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
    _close(lib.binary(op, a, b), f(a.astype(np.float64), b.astype(np.float64)))
    _close(lib.binary(op, b, a),
           f(b.astype(np.float64), a.astype(np.float64)))


def test_binary_refuses_four_runs(lib):
    a = np.ones((2, 1, 3, 1), np.float32)
    b = np.ones((1, 4, 1, 5), np.float32)
    with pytest.raises(InvalidArgument, match="3 axes"):
        lib.binary("Add", a, b)


def test_fold_broadcast_collapses_runs():
    assert L.fold_broadcast((2, 3, 4), (2, 3, 4), (2, 3, 4)) == (1, 1, 24, 0, 0, 1, 0, 0, 1)
    assert L.fold_broadcast((1, 8, 5, 5), (8, 1, 1), (1, 8, 5, 5)) == (1, 8, 25, 0, 25, 1, 0, 1, 0)
    assert L.fold_broadcast((2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5)) is None


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (2, 10), (4, 3, 128), (5, 1000), (0, 4), (300, 17)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(lib, shape, log):
    x = (np.random.default_rng(shape[-1]).standard_normal(shape) * 4).astype(np.float32)
    x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True) if x.size else 0
    lse = np.log(np.exp(x64 - m).sum(-1, keepdims=True)) + m if x.size else 0
    want = x64 - lse if log else np.exp(x64 - lse)
    _close(lib.softmax(x, log), want, terms=4)


def test_softmax_extremes(lib):
    x = np.array([[1e4, -1e4, 0.0], [-np.inf, 0.0, 1.0], [88.0, 88.0, 88.0]], np.float32)
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1, keepdims=True)) + x64.max(-1, keepdims=True)
    _close(lib.softmax(x), np.exp(x64 - lse))
    _close(lib.softmax(x, True)[:, 1:], (x64 - lse)[:, 1:])
    assert lib.softmax(x, True)[1, 0] == -np.inf


def _program(lib, instrs, slots):
    """A C program from (op, n, args struct or None, (a, b, y)) and (kind, index, offset, data)."""
    S = lib.structs
    slot_arr = (S["oxk_slot"] * len(slots))(*[S["oxk_slot"](*s) for s in slots])
    ins = (S["oxk_instr"] * len(instrs))(*[
        S["oxk_instr"](op, n, None if args is None else ctypes.addressof(args), tuple(sl) + (-1,) * (8 - len(sl)))
        for op, n, args, sl in instrs])
    prog = S["oxk_program"](len(instrs), len(slots), ctypes.addressof(ins), ctypes.addressof(slot_arr))
    return prog, (ins, slot_arr, instrs)


def _run(lib, prog, inputs, outputs, arena):
    vp = ctypes.c_void_p
    ins = (vp * max(1, len(inputs)))(*[a.ctypes.data for a in inputs])
    outs = (vp * max(1, len(outputs)))(*[a.ctypes.data for a in outputs])
    return lib.function("oxk_program_run")(ctypes.addressof(prog), ins, outs, arena.ctypes.data)


def test_program_runs_a_small_network(lib):
    """x (1,3,8,8) -> conv 3x3 (+bias) -> add per-channel c -> relu -> maxpool 2x2 -> global avg ->
    gemm (4 -> 5, bias) -> softmax; intermediates in the arena, one reused slot."""
    S, rng = lib.structs, np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bw = rng.standard_normal(4).astype(np.float32)
    c = rng.standard_normal((4, 1, 1)).astype(np.float32)
    wg = rng.standard_normal((4, 5)).astype(np.float32)
    bg = rng.standard_normal(5).astype(np.float32)
    conv = lib.conv_plan(x.shape, w, bw, 1, (1, 1), (1, 1), (1, 1, 1, 1), (8, 8), packed_w=lib.conv_pack(w, 1))
    pool = lib.pool_plan((1, 4, 8, 8), "max", (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), (4, 4))
    gemm = lib.sgemm_plan(5, 4, packed_b=lib.pack_b(wg), bias=bg)
    add = S["oxk_binary_args"](L.BINARY_OPS["Add"], *L.fold_broadcast((1, 4, 8, 8), (4, 1, 1), (1, 4, 8, 8)))
    relu = S["oxk_epilogue"](L.ACT["Relu"], 0.0, 0.0)
    gp = S["oxk_global_pool_args"](1, 16)
    ga = S["oxk_gemm_args"](gemm.addr, 1, 0, 0, 0)
    sm = S["oxk_softmax_args"](5)
    slots = [(L.SLOT_INPUT, 0, 0, None), (L.SLOT_CONST, 0, 0, c.ctypes.data),
             (L.SLOT_ARENA, 0, 0, None), (L.SLOT_ARENA, 0, 1024, None),
             (L.SLOT_OUTPUT, 0, 0, None), (L.SLOT_OUTPUT, 1, 0, None)]
    instrs = [(L.OP_CONV2D, 1, conv.struct, (0, -1, 2)),
              (L.OP_BINARY, 0, add, (2, 1, 3)),
              (L.OP_ACT, 256, relu, (3, -1, 3)),
              (L.OP_POOL2D, 4, pool.struct, (3, -1, 2)),
              (L.OP_GLOBAL_POOL, 4, gp, (2, -1, 3)),
              (L.OP_SGEMM, 1, ga, (3, -1, 5)),
              (L.OP_SOFTMAX, 1, sm, (5, -1, 4))]
    prog, keep = _program(lib, instrs, slots)
    y, logits = np.empty((1, 5), np.float32), np.empty((1, 5), np.float32)
    arena = np.empty(2048 // 4, np.float32)
    assert _run(lib, prog, [x], [y, logits], arena) == 0
    # float64 reference
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([x64[0, :, i:i + 8, j:j + 8] for i in range(3) for j in range(3)], 1)  # (3, 9, 8, 8)
    conv64 = np.einsum("oc k,ckhw->ohw".replace(" ", ""), w.reshape(4, 3, 9).astype(np.float64), cols) \
        + bw[:, None, None]
    r = np.maximum(conv64 + c, 0)
    p = r.reshape(4, 4, 2, 4, 2).max(axis=(2, 4))
    g = p.mean(axis=(1, 2))
    lg = g @ wg.astype(np.float64) + bg
    _close(logits, lg[None], terms=27)
    e = np.exp(lg - lg.max())
    _close(y, (e / e.sum())[None], terms=27)


def test_program_batched_gemm_with_b_per_call_and_copy(lib):
    S, rng = lib.structs, np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 6)).astype(np.float32)
    b = rng.standard_normal((3, 6, 5)).astype(np.float32)
    plan = lib.sgemm_plan(5, 6)
    ga = S["oxk_gemm_args"](plan.addr, 3, 24, 30, 20)
    slots = [(L.SLOT_INPUT, 0, 0, None), (L.SLOT_INPUT, 1, 0, None), (L.SLOT_ARENA, 0, 64, None),
             (L.SLOT_OUTPUT, 0, 0, None)]
    prog, keep = _program(lib, [(L.OP_SGEMM, 4, ga, (0, 1, 2)), (L.OP_COPY, 60, None, (2, -1, 3))], slots)
    y = np.empty((3, 4, 5), np.float32)
    assert _run(lib, prog, [a, b], [y], np.empty(1024, np.float32)) == 0
    _close(y, a.astype(np.float64) @ b, terms=6)


def test_program_reports_the_kernel_code(lib):
    S = lib.structs
    bad = S["oxk_binary_args"](9, 1, 1, 1, 0, 0, 0, 0, 0, 0)   # no such binary op
    slots = [(L.SLOT_INPUT, 0, 0, None), (L.SLOT_OUTPUT, 0, 0, None)]
    x = np.ones(1, np.float32)
    prog, keep = _program(lib, [(L.OP_BINARY, 1, bad, (0, 0, 1))], slots)
    assert _run(lib, prog, [x], [np.empty(1, np.float32)], x) == -1
    prog, keep = _program(lib, [(L.OP_COPY, 1, None, (0, -1, 7))], slots)   # slot out of range
    assert _run(lib, prog, [x], [np.empty(1, np.float32)], x) == -1
    prog, keep = _program(lib, [(42, 1, None, (0, -1, 1))], slots)   # no such opcode
    assert _run(lib, prog, [x], [np.empty(1, np.float32)], x) == -1
