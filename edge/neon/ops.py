"""Per-op support checks and compiled callables of the native C engine (NeonExecutionProvider on
aarch64, X64ExecutionProvider on x86-64).

`TABLE` holds one `OpSupport` record per supported (domain, op): `check(node, facts) -> reason
or None` (facts: `onnxedge.providers.support.Facts`, the graph's declared types) and the build
`build(node, lib, consts) -> run(env) -> outputs or None`. `consts` maps the names of
initializers that no feed can override to their arrays, so weights are packed once here.
A run returning None asks the provider to run the node with the CPU kernel instead (an input
that the type information could not rule out at compile time: not float32, another rank).
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import fused_ops, ir, oxk_movement, oxk_program, oxk_rnn
from onnxedge.errors import InvalidArgument
from onnxedge.fused_ops import DOMAIN as FUSED, MS_DOMAIN
from onnxedge.geometry import (auto_pad_mode, conv_geometry, pool_geometry, spatial_attr,
                               transpose_geometry)
from onnxedge.providers.support import Facts, OpSupport, SupportTable

from . import quantized
from .library import (BIAS_COL, BIAS_NONE, BIAS_ROW, KernelLibrary, Plan, data_address,
                      fold_broadcast)

FLOAT, UINT8, INT8 = 1, 2, 3
Run = Callable[[Dict[str, Any]], Optional[List[np.ndarray]]]
# FusedConv/FusedGemm/FusedMatMul activations the C epilogue has (every one a fusion writes).
FUSED_ACTS = fused_ops.C_EPILOGUE
F32 = np.dtype(np.float32)
MAX_PLANS = 32   # compiled plans kept per node (one per input shape seen)
_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _elem(facts: Facts, name: str) -> Tuple[int, Optional[int]]:
    """(element type or 0, rank or None) of a value as far as the graph declares it."""
    if not name:
        return 0, None
    return facts.elem_type(name), facts.rank(name)


def _need_float(node: ir.Node, facts: Facts, names: Sequence[str]) -> Optional[str]:
    for n in names:
        et, _ = _elem(facts, n)
        if et not in (0, FLOAT):
            return "input %r is not float32 (ONNX element type %d); the C engine's kernels are float32" % (n, et)
    return None


def _need_rank(facts: Facts, name: str, ok: Sequence[int], what: str) -> Optional[str]:
    _, rank = _elem(facts, name)
    if rank is not None and rank not in ok:
        return "input %r has rank %d; the C engine runs %s" % (name, rank, what)
    return None


def _act(node: ir.Node) -> Tuple[str, List[float]]:
    return fused_ops.activation_name(node), \
        [float(p) for p in (node.attributes.get("activation_params") or [])]


def _is_f32(*xs: Optional[np.ndarray]) -> bool:
    return all(x is None or (isinstance(x, np.ndarray) and x.dtype == np.float32) for x in xs)


# ------------------------------------------------------------------------------------ Conv

def check_conv(node: ir.Node, facts: Facts) -> Optional[str]:
    """Conv / FusedConv: 2-D, float32; FusedConv's activation must be one the epilogue has."""
    if node.op_type == "FusedConv":
        act, _ = _act(node)
        if act not in FUSED_ACTS:
            return "activation %r has no C engine epilogue (has: %s)" % (act, ", ".join(a for a in FUSED_ACTS if a))
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) not in (1, 2):
        return "kernel_shape %s is not 1-D or 2-D; the C engine runs 1-D and 2-D convolutions" % (list(ks),)
    return _need_float(node, facts, node.inputs[:4]) or \
        _need_rank(facts, node.inputs[0], (3, 4), "NCL / NCHW 1-D and 2-D convolutions") or \
        _need_rank(facts, node.inputs[1], (3, 4), "1-D and 2-D convolutions")


def _as_2d(w: np.ndarray) -> np.ndarray:
    """A 1-D convolution's weight (O, I, k) as the 2-D kernels take it, (O, I, 1, k)."""
    return w.reshape(w.shape[:2] + (1,) + w.shape[2:]) if w.ndim == 3 else w


def _conv_args(node: ir.Node, x_shape: Sequence[int], k_shape: Sequence[int], auto_pad: str
               ) -> Tuple[Tuple[int, int], Tuple[int, int], Tuple[int, int, int, int], Tuple[int, int],
                          Tuple[int, ...]]:
    """(strides, dilations, pads (t, l, b, r), (OH, OW), output spatial shape) of a 1-D or 2-D
    Conv as oxk_conv2d takes it (1-D: H = 1); raises the geometry's errors."""
    a, nd = node.attributes, len(k_shape)
    strides = spatial_attr(node.op_type, "strides", a.get("strides"), nd, 1, 1)
    dil = spatial_attr(node.op_type, "dilations", a.get("dilations"), nd, 1, 1)
    beg, end, out = conv_geometry(node.op_type, x_shape[2:], k_shape, strides, dil, a.get("pads"), auto_pad)
    if nd == 1:
        return (1, strides[0]), (1, dil[0]), (0, beg[0], 0, end[0]), (1, out[0]), tuple(out)
    return (strides[0], strides[1]), (dil[0], dil[1]), (beg[0], beg[1], end[0], end[1]), \
        (out[0], out[1]), tuple(out)


def build_conv(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Conv through oxk_conv2d; initializer weights packed now."""
    a = node.attributes
    act, params = _act(node)
    group = int(a.get("group", 1))
    auto_pad = auto_pad_mode(node.op_type, a.get("auto_pad", "NOTSET"))
    xn, wn = node.inputs[0], node.inputs[1]
    bn = node.inputs[2] if len(node.inputs) > 2 else ""
    w0 = consts.get(wn)
    packed = None
    if isinstance(w0, np.ndarray) and w0.dtype == np.float32 and w0.ndim in (3, 4) and group >= 1 \
            and w0.shape[0] % group == 0:
        packed = lib.conv_pack(_as_2d(w0), group)

    def slow(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x, w = env[xn], env[wn]
        b = env[bn] if bn else None
        if not _is_f32(x, w, b) or x.ndim not in (3, 4) or w.ndim != x.ndim:
            return None
        ks = a.get("kernel_shape")
        if ks and [int(k) for k in ks] != list(w.shape[2:]):
            raise InvalidArgument("%s: kernel_shape %s does not match the weight's spatial shape %s"
                                  % (node.op_type, list(ks), list(w.shape[2:])))
        if group < 1 or w.shape[1] * group != x.shape[1] or w.shape[0] % group:
            raise InvalidArgument("%s: input channels (%d) must equal W.shape[1] (%d) * group (%d), "
                                  "and W.shape[0] (%d) be a multiple of group"
                                  % (node.op_type, x.shape[1], w.shape[1], group, w.shape[0]))
        if b is not None and (b.ndim != 1 or b.shape[0] != w.shape[0]):
            raise InvalidArgument("%s: bias B must have shape (%d,), got %s" % (node.op_type, w.shape[0], b.shape))
        strides, dil, pads, hw, out = _conv_args(node, x.shape, w.shape[2:], auto_pad)
        pw = packed if wn in consts else None
        y = lib.conv2d(x.reshape(x.shape[:2] + (1,) + x.shape[2:]) if x.ndim == 3 else x, _as_2d(w), b,
                       group, strides, dil, pads, hw, act, params, packed_w=pw)
        return [y.reshape(y.shape[:2] + out)]

    b0 = consts.get(bn) if bn else None
    zn = node.inputs[3] if len(node.inputs) > 3 else ""

    def z_on_cpu(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        """FusedConv with Z and weights the plan cannot take: the CPU kernel runs it."""
        return None

    if packed is None or (bn and (bn not in consts or not _is_f32(b0) or b0.shape != (w0.shape[0],))):
        return z_on_cpu if zn else slow
    ks = a.get("kernel_shape")
    w2 = _as_2d(w0)
    packings: Dict[str, np.ndarray] = {}   # the pointwise lanes / Winograd packings, made on first need

    def plan_for(shape: Tuple[int, ...], fused: bool = True) -> Optional[Tuple[Any, ...]]:
        """(plan address, C function, output shape, batch count, plan) for inputs of `shape`; None:
        the slow path decides (it raises the errors). fused=False leaves the activation out."""
        if len(shape) != w0.ndim or w0.shape[1] * group != shape[1] or 0 in shape or \
                (ks and [int(k) for k in ks] != list(w0.shape[2:])):
            return None
        strides, dil, pads, hw, out = _conv_args(node, shape, w0.shape[2:], auto_pad)
        shape2 = tuple(shape[:2]) + (1,) + tuple(shape[2:]) if len(shape) == 3 else shape
        pw, path = packed, "auto"
        if group == 1 and w2.shape[2:] == (1, 1) and tuple(strides) == (1, 1) and not any(pads) \
                and lib.conv_lanes_fits(w2, hw[0] * hw[1]):   # few positions: channels along lanes
            if "lanes" not in packings:
                packings["lanes"] = lib.conv_pack_lanes(w2)
            pw, path = packings["lanes"], "lanes_packed"
        elif lib.conv_winograd_fits(w2, group, strides, dil, hw):   # 3x3, many channels: F(2x2, 3x3)
            if "winograd" not in packings:
                packings["winograd"] = lib.conv_pack_winograd(w2)
            pw, path = packings["winograd"], "winograd"
        plan = lib.conv_plan(shape2, w2, b0, group, strides, dil, pads, hw,
                             act if fused else "", params if fused else (), packed_w=pw, path=path)
        return plan.addr, plan.fn, (shape[0], w0.shape[0]) + out, shape[0], plan

    if zn:
        return _conv_with_z(node, lib, plan_for, zn, act, params)
    return _planned(slow, xn, w0.ndim, plan_for, lib, node)


def check_convt(node: ir.Node, facts: Facts) -> Optional[str]:
    """ConvTranspose: 1-D or 2-D, float32, constant weights (packed once) and bias."""
    ks = node.attributes.get("kernel_shape")
    if ks is not None and len(ks) not in (1, 2):
        return "kernel_shape %s is not 1-D or 2-D; the C engine runs 1-D and 2-D transposed convolutions" % (list(ks),)
    why = _need_float(node, facts, node.inputs[:3]) or \
        _need_rank(facts, node.inputs[0], (3, 4), "NCL / NCHW transposed convolutions") or \
        _need_rank(facts, node.inputs[1], (3, 4), "1-D and 2-D transposed convolutions")
    if why:
        return why
    for i, what in ((1, "weight"), (2, "bias")):
        if len(node.inputs) > i and node.inputs[i] and node.inputs[i] not in facts.consts:
            return "the %s %r is not a constant; the C engine packs ConvTranspose weights once" % (what, node.inputs[i])
    return None


def build_convt(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """ConvTranspose through oxk_conv_transpose2d_run (a 1-D one with H = 1), weights packed now;
    anything else (weights not float32 constants, another rank) runs on the CPU kernel."""
    a = node.attributes
    group = int(a.get("group", 1))
    auto_pad = auto_pad_mode(node.op_type, a.get("auto_pad", "NOTSET"))
    xn, wn = node.inputs[0], node.inputs[1]
    bn = node.inputs[2] if len(node.inputs) > 2 else ""
    w0, b0 = consts.get(wn), consts.get(bn) if bn else None
    ks = a.get("kernel_shape")

    def cpu(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        return None

    if not (isinstance(w0, np.ndarray) and w0.dtype == np.float32 and w0.ndim in (3, 4) and group >= 1
            and w0.shape[0] % group == 0 and (not bn or (_is_f32(b0) and b0 is not None
                                                        and b0.shape == (w0.shape[1] * group,)))):
        return cpu
    w2 = _as_2d(w0)
    packed = lib.convt_pack(w2, group)

    def plan_for(shape: Tuple[int, ...]) -> Optional[Tuple[Any, ...]]:
        """(plan address, C function, output shape, batch, plan) for inputs of `shape`, or None."""
        nd = w0.ndim - 2
        if len(shape) != w0.ndim or shape[1] != w0.shape[0] or 0 in shape or \
                (ks and [int(k) for k in ks] != list(w0.shape[2:])):
            return None
        strides = spatial_attr(node.op_type, "strides", a.get("strides"), nd, 1, 1)
        dil = spatial_attr(node.op_type, "dilations", a.get("dilations"), nd, 1, 1)
        opad = spatial_attr(node.op_type, "output_padding", a.get("output_padding"), nd, 0, 0)
        beg, out = transpose_geometry(node.op_type, shape[2:], w0.shape[2:], strides, dil, a.get("pads"),
                                      auto_pad, opad, a.get("output_shape"))
        if min(beg) < 0:
            return None   # negative pads (an output_shape past the full output): the CPU kernel
        if nd == 1:
            strides, dil, beg, hw, shape2 = (1, strides[0]), (1, dil[0]), (0, beg[0]), (1, out[0]), \
                tuple(shape[:2]) + (1,) + tuple(shape[2:])
        else:
            hw, shape2 = out, shape
        plan = lib.convt_plan(shape2, w2, b0, group, strides, dil, beg, hw, packed_w=packed)
        return plan.addr, plan.fn, (shape[0], w0.shape[1] * group) + tuple(out), shape[0], plan

    return _planned(cpu, xn, w0.ndim, plan_for, lib, node)


def _conv_with_z(node: ir.Node, lib: KernelLibrary, plan_for: Callable[..., Optional[Tuple[Any, ...]]],
                 zn: str, act: str, params: Sequence[float]) -> Run:
    """FusedConv with a sum input Z node by node, as the program runs it (oxk_program's
    emit_conv_sum): a Z of the output's shape through oxk_conv2d_run_z (the plan with the
    activation); one that broadcasts: conv + bias without the activation, Z + that, then the
    activation. All on the C kernels, so the first run gives the bits the program gives."""
    xn = node.inputs[0]
    plans: Dict[Tuple[int, ...], Optional[Tuple[Any, ...]]] = {}
    run_z = lib.function("oxk_conv2d_run_z")

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x, z = env[xn], env[zn]
        if type(x) is not np.ndarray or x.dtype is not F32 or x.ndim not in (3, 4) or not _is_f32(z):
            return None
        ent = plans.get(x.shape, False)
        if ent is False:
            if len(plans) >= MAX_PLANS:
                plans.clear()
            ent = plans[x.shape] = plan_for(x.shape, False)
        if ent is None:
            return None
        addr, fn, oshape, count, _ = ent
        if np.broadcast(z, np.empty(oshape, np.uint8)).shape != tuple(oshape) or \
                fold_broadcast(z.shape, oshape, oshape) is None:
            return None
        x, xa = data_address(x)
        if z.shape == tuple(oshape):
            key = ("z",) + tuple(x.shape)
            fused = plans.get(key, False)
            if fused is False:
                fused = plans[key] = plan_for(x.shape)
            if fused is not None:
                z, za = data_address(z)
                y = np.empty(oshape, F32)
                rc = run_z(fused[0], count, xa, za, _addressof(_char_from_buffer(y)))
                if rc:
                    lib.check(rc, node.describe())
                return [y]
        t = np.empty(oshape, F32)
        rc = fn(addr, count, xa, _addressof(_char_from_buffer(t)))
        if rc:
            lib.check(rc, node.describe())
        y = lib.binary("Add", z, t)
        return [lib.act(y, act, params) if act else y]

    run.plan_for = plan_for  # type: ignore[attr-defined]
    run.sum_input = (zn, act, params)  # type: ignore[attr-defined]
    return run


def _planned(slow: Run, xn: str, rank: int, plan_for: Callable[[Tuple[int, ...]], Optional[Tuple[Any, ...]]],
             lib: KernelLibrary, node: ir.Node) -> Run:
    """A run that calls a compiled plan (one per input shape, made on first sight; see plan_for in
    build_conv) with the input and a new output; anything unusual (dtype, rank, a shape the plan
    cannot take) goes to `slow`. The plans are read-only, so concurrent runs share them."""
    plans: Dict[Tuple[int, ...], Optional[Tuple[Any, ...]]] = {}
    what = node.describe()

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if type(x) is not np.ndarray or x.dtype is not F32 or x.ndim != rank:
            return slow(env)
        shape = x.shape
        ent = plans.get(shape, False)
        if ent is False:
            ent = plan_for(shape)
            if len(plans) >= MAX_PLANS:
                plans.clear()
            plans[shape] = ent
        if ent is None:
            return slow(env)
        addr, fn, oshape, count, _ = ent
        x, xa = data_address(x)
        y = np.empty(oshape, F32)
        rc = fn(addr, count, xa, _addressof(_char_from_buffer(y)))
        if rc:
            lib.check(rc, what)
        return [y]

    run.plan_for = plan_for  # type: ignore[attr-defined]  # programs reuse the plans (packed weights)
    return run


# ------------------------------------------------------------------------------ Gemm/MatMul

def check_gemm(node: ir.Node, facts: Facts) -> Optional[str]:
    """Gemm / FusedGemm: float32 2-D operands."""
    if node.op_type == "FusedGemm":
        act, _ = _act(node)
        if act not in FUSED_ACTS:
            return "activation %r has no C engine epilogue" % act
    return _need_float(node, facts, node.inputs[:3]) or \
        _need_rank(facts, node.inputs[0], (2,), "2-D Gemm") or \
        _need_rank(facts, node.inputs[1], (2,), "2-D Gemm")


def _bias_for(c: Optional[np.ndarray], beta: float, M: int, N: int
              ) -> Tuple[Optional[np.ndarray], int, Optional[np.ndarray], float]:
    """(bias, bias kind, C to pre-load, beta for the kernel) for Gemm's C operand."""
    if c is None or beta == 0.0:
        return None, BIAS_NONE, None, 0.0
    if c.ndim <= 2 and c.size == N and (c.ndim < 2 or c.shape[0] == 1) and (N > 1 or c.ndim <= 1):
        return (np.float32(beta) * c.reshape(N)).astype(np.float32), BIAS_COL, None, 0.0
    if c.ndim == 2 and c.shape == (M, 1):
        return (np.float32(beta) * c.reshape(M)).astype(np.float32), BIAS_ROW, None, 0.0
    try:
        np.broadcast_to(c, (M, N))
    except ValueError:
        raise InvalidArgument("Gemm: C of shape %s does not broadcast to (%d, %d)" % (c.shape, M, N))
    return None, BIAS_NONE, c, beta


def build_gemm(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Gemm through oxk_sgemm; an initializer B is packed now, bias + activation fused."""
    a = node.attributes
    act, params = _act(node)
    ta, tb = bool(a.get("transA", 0)), bool(a.get("transB", 0))
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    an, bname = node.inputs[0], node.inputs[1]
    cn = node.inputs[2] if len(node.inputs) > 2 else ""
    b0 = consts.get(bname)
    packed = lib.pack_b(b0, tb) if isinstance(b0, np.ndarray) and b0.dtype == np.float32 \
        and b0.ndim == 2 else None

    def slow(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x, w = env[an], env[bname]
        c = env[cn] if cn else None
        if not _is_f32(x, w, c) or x.ndim != 2 or w.ndim != 2:
            return None
        M = x.shape[1] if ta else x.shape[0]
        K = x.shape[0] if ta else x.shape[1]
        K2, N = (w.shape[1], w.shape[0]) if tb else w.shape
        if K != K2:
            raise InvalidArgument("%s: op(A) is %dx%d but op(B) is %dx%d (transA=%d, transB=%d)"
                                  % (node.op_type, M, K, K2, N, ta, tb))
        bias, kind, cfull, kbeta = _bias_for(c, beta, M, N)
        y = lib.sgemm(x, w, ta, tb, alpha, kbeta, cfull, bias, kind, act, params,
                      packed_b=packed if bname in consts else None)
        return [y]

    if packed is None or bname not in consts:
        return slow
    K, N = (b0.shape[1], b0.shape[0]) if tb else b0.shape
    c0 = consts.get(cn) if cn else None
    if cn and cn not in consts:
        return slow
    bias = _col_bias(c0, beta, N)
    if bias is False:
        return slow
    return _planned_gemm(slow, an, lib.sgemm_plan(N, K, ta, tb, alpha, packed, bias, act, params), ta, K, N,
                         2, lib, node)


def _col_bias(c: Optional[np.ndarray], beta: float, N: int) -> Any:
    """Gemm's constant C as a per-column bias (beta folded in), None for no bias, False when C is
    something else (per row, full matrix, not float32)."""
    if c is None or beta == 0.0:
        return None
    if _is_f32(c) and c.ndim <= 2 and c.size == N and (c.ndim < 2 or c.shape[0] == 1) \
            and (N > 1 or c.ndim <= 1):
        return (np.float32(beta) * c.reshape(N)).astype(np.float32)
    return False


def _planned_gemm(slow: Run, an: str, plan: Plan, ta: bool, K: int, N: int, rank: int,
                  lib: KernelLibrary, node: ir.Node) -> Run:
    """A run through a GEMM plan: A (rank 2, or any rank >= 1 with rank 0 meaning MatMul's
    (..., K) @ (K, N)) times the plan's packed B; anything else goes to `slow`."""
    fn, addr, what = plan.fn, plan.addr, node.describe()

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[an]
        if type(x) is not np.ndarray or x.dtype is not F32:
            return slow(env)
        shape = x.shape
        if rank == 2:
            if len(shape) != 2 or shape[0 if ta else 1] != K:
                return slow(env)
            M = shape[1] if ta else shape[0]
            oshape: Tuple[int, ...] = (M, N)
        else:
            if not shape or shape[-1] != K:
                return slow(env)
            M = x.size // K if K else 0
            oshape = shape[:-1] + (N,)
        if M == 0 or K == 0 or N == 0:
            return slow(env)
        x, xa = data_address(x)
        y = np.empty(oshape, F32)
        rc = fn(addr, M, xa, None, _addressof(_char_from_buffer(y)))
        if rc:
            lib.check(rc, what)
        return [y]

    run.plan = plan  # type: ignore[attr-defined]  # keeps the C struct and packed B alive
    return run


def check_matmul(node: ir.Node, facts: Facts) -> Optional[str]:
    """MatMul / FusedMatMul: float32, B of rank >= 2."""
    if node.op_type == "FusedMatMul":
        act, _ = _act(node)
        if act not in FUSED_ACTS:
            return "activation %r has no C engine epilogue" % act
    return _need_float(node, facts, node.inputs[:3]) or \
        _need_rank(facts, node.inputs[1], range(2, 64), "MatMul with a B of rank >= 2")


def build_matmul(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """MatMul: A (..., M, K) @ B (K, N) as one GEMM; batched B as one GEMM per batch."""
    act, params = _act(node)
    an, bname = node.inputs[0], node.inputs[1]
    biasn = node.inputs[2] if len(node.inputs) > 2 else ""
    b0 = consts.get(bname)
    packed = lib.pack_b(b0) if isinstance(b0, np.ndarray) and b0.dtype == np.float32 \
        and b0.ndim == 2 else None

    def slow(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x, w = env[an], env[bname]
        bias = env[biasn] if biasn else None
        if not _is_f32(x, w, bias) or x.ndim < 1 or w.ndim < 2:
            return None
        if x.shape[-1] != w.shape[-2]:
            raise InvalidArgument("%s: A's last dimension (%d) must equal B's second to last (%d); "
                                  "shapes %s and %s" % (node.op_type, x.shape[-1], w.shape[-2],
                                                        x.shape, w.shape))
        if bias is not None and (bias.ndim != 1 or bias.shape[0] != w.shape[-1]):
            raise InvalidArgument("%s: bias must be 1-D of size %d, got shape %s"
                                  % (node.op_type, w.shape[-1], bias.shape))
        kind = BIAS_COL if bias is not None else BIAS_NONE
        K, N = w.shape[-2], w.shape[-1]
        if bname not in consts:
            return _computed_matmul(x, w, bias, act, params)
        if w.ndim == 2:
            a2 = np.ascontiguousarray(x).reshape(-1, K)
            y = lib.sgemm(a2, w, bias=bias, bias_kind=kind, act=act, act_params=params,
                          packed_b=packed if bname in consts else None)
            return [y.reshape(x.shape[:-1] + (N,))]
        xa = x.reshape((1,) + x.shape) if x.ndim == 1 else x
        batch = np.broadcast_shapes(xa.shape[:-2], w.shape[:-2]) if hasattr(np, "broadcast_shapes") \
            else np.broadcast(np.empty(xa.shape[:-2]), np.empty(w.shape[:-2])).shape
        xb = np.broadcast_to(xa, batch + xa.shape[-2:]).reshape((-1,) + xa.shape[-2:])
        wb = np.broadcast_to(w, batch + w.shape[-2:]).reshape((-1, K, N))
        y = np.empty((xb.shape[0], xa.shape[-2], N), np.float32)
        for i in range(xb.shape[0]):
            lib.sgemm(xb[i], wb[i], bias=bias, bias_kind=kind, act=act, act_params=params, out=y[i])
        y = y.reshape(batch + (xa.shape[-2], N))
        return [y[..., 0, :] if x.ndim == 1 else y]

    def _computed_matmul(x: np.ndarray, w: np.ndarray, bias: Optional[np.ndarray], act: str,
                         params: Sequence[float]) -> Optional[List[np.ndarray]]:
        """B computed at run time: oxk_matmul over the broadcast batches, the C call the program
        makes (oxk_program.emit_matmul), so both give the same bits. A B that is a transposed view
        (a Transpose swapping its last two axes) is read in place with transB."""
        trans = w.ndim >= 2 and not w.flags.c_contiguous and np.swapaxes(w, -1, -2).flags.c_contiguous
        wb = np.swapaxes(w, -1, -2) if trans else w
        geo = oxk_program.matmul_geometry(x.shape, wb.shape, trans)
        if geo is None:
            return None
        M, K, N, folded, out = geo
        return [lib.matmul(x, wb, M, N, K, folded, out, trans, bias, act, params)]

    if packed is None or bname not in consts:
        return slow
    K, N = b0.shape
    bias0 = consts.get(biasn) if biasn else None
    if biasn and (biasn not in consts or not _is_f32(bias0) or bias0.shape != (N,)):
        return slow
    plan = lib.sgemm_plan(N, K, packed_b=packed, bias=bias0, act=act, act_params=params)
    return _planned_gemm(slow, an, plan, False, K, N, 0, lib, node)


# -------------------------------------------------------------------------------- attention

def check_attention(node: ir.Node, facts: Facts) -> Optional[str]:
    """com.onnxedge MultiHeadAttention: the rule every engine provider shares."""
    return oxk_program.attention_reason(node, facts, "the C engine")


def build_attention(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """MultiHeadAttention through oxk_attention, the kernel the program's OXK_OP_ATTENTION calls
    (same arguments: onnxedge.oxk_program.attention_args), so both give the same bits; shapes
    it does not take go to the CPU kernel."""
    ins = list(node.inputs) + [""]
    names = ins[:4]

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        xs = [_f32_in(env, n) if n else None for n in names]
        if any(x is None for x in xs[:3]) or (names[3] and xs[3] is None):
            return None
        q, k, v, m = xs
        found = oxk_program.attention_args(node, q.shape, k.shape, v.shape,
                                           None if m is None else m.shape)
        if found is None:
            return None
        return [lib.attention(q, k, v, m, found[0], found[1])]

    return run


# ------------------------------------------------------------------------------------ pools

def check_pool(node: ir.Node, facts: Facts) -> Optional[str]:
    """MaxPool / AveragePool (2-D, one output) and the global pools, float32."""
    if node.op_type == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
        return "MaxPool's Indices output is not produced by the C engine's kernel"
    if node.op_type in ("MaxPool", "AveragePool"):
        ks = node.attributes.get("kernel_shape") or []
        if len(ks) != 2:
            return "kernel_shape %s is not 2-D; the C engine runs 2-D pooling" % (list(ks),)
        bad = _need_rank(facts, node.inputs[0], (4,), "NCHW 2-D pooling")
    else:
        bad = _need_rank(facts, node.inputs[0], range(3, 64), "inputs of rank >= 3")
    return _need_float(node, facts, node.inputs[:1]) or bad


def build_pool(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """Windowed pools through oxk_pool2d, global ones through oxk_global_pool."""
    a, op, xn = node.attributes, node.op_type, node.inputs[0]
    kind = "max" if "Max" in op else "avg"

    gfn, gkind, what = lib.function("oxk_global_pool"), 0 if kind == "max" else 1, node.describe()

    def run_global(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if not _is_f32(x) or x.ndim < 3 or 0 in x.shape:
            return None
        x, xa = data_address(x)
        shape = x.shape
        y = np.empty(shape[:2] + (1,) * (len(shape) - 2), F32)
        nc = shape[0] * shape[1]
        rc = gfn(xa, nc, x.size // nc, gkind, _addressof(_char_from_buffer(y)))
        if rc:
            lib.check(rc, what)
        return [y]

    def slow(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = env[xn]
        if not _is_f32(x) or x.ndim != 4:
            return None
        kernel = spatial_attr(op, "kernel_shape", a.get("kernel_shape"), 2, 1, 1)
        strides = spatial_attr(op, "strides", a.get("strides"), 2, 1, 1)
        dil = spatial_attr(op, "dilations", a.get("dilations"), 2, 1, 1)
        beg, end, out = pool_geometry(op, x.shape[2:], kernel, strides, dil, a.get("pads"),
                                      auto_pad_mode(op, a.get("auto_pad", "NOTSET")),
                                      int(a.get("ceil_mode", 0)))
        y = lib.pool2d(x, kind, kernel, strides, dil, (beg[0], beg[1], end[0], end[1]), out,
                       bool(a.get("count_include_pad", 0)))
        return [y] + ([None] * (len(node.outputs) - 1))

    if op.startswith("Global"):
        return run_global
    if len(node.outputs) > 1:
        return slow

    def plan_for(shape: Tuple[int, ...]) -> Optional[Tuple[Any, ...]]:
        if 0 in shape:
            return None
        kernel = spatial_attr(op, "kernel_shape", a.get("kernel_shape"), 2, 1, 1)
        strides = spatial_attr(op, "strides", a.get("strides"), 2, 1, 1)
        dil = spatial_attr(op, "dilations", a.get("dilations"), 2, 1, 1)
        beg, end, out = pool_geometry(op, shape[2:], kernel, strides, dil, a.get("pads"),
                                      auto_pad_mode(op, a.get("auto_pad", "NOTSET")),
                                      int(a.get("ceil_mode", 0)))
        if min(out) <= 0:
            return None
        plan = lib.pool_plan(shape, kind, kernel, strides, dil, (beg[0], beg[1], end[0], end[1]), out,
                             bool(a.get("count_include_pad", 0)))
        return plan.addr, plan.fn, (shape[0], shape[1], int(out[0]), int(out[1])), shape[0] * shape[1], plan

    return _planned(slow, xn, 4, plan_for, lib, node)


# ------------------------------------------------------------------------------------- int8
# The quantized ops (QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger, QGemm, Q/DQ,
# DynamicQuantizeLinear, ...) are in quantized.py (issue #17); TABLE takes its RECORDS.


# ------------------------------------------------------------------ program-only ops (issue #16)
# Activations, arithmetic, Softmax and views run inside a group's compiled program (program.py);
# on the node-by-node path (a group's first run with a new input shape, or a signature the program
# cannot take) the same C kernels run them, so the first run gives the bits later program runs
# give; what the C kernels cannot take (a dtype, a broadcast, an axis) goes to the CPU kernel,
# as the program refuses that signature too.

def _f32_in(env: Dict[str, Any], name: str) -> Optional[np.ndarray]:
    x = env[name]
    # (a float32 array read from a protobuf or a buffer may hold an equal dtype of its own)
    return x if type(x) is np.ndarray and (x.dtype is F32 or x.dtype == F32) else None


def _engine_op(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """The node-by-node run of a program-only op on the engine's C kernels (None: the CPU
    kernel runs it)."""
    op = node.op_type
    xn = node.inputs[0] if node.inputs else ""

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        x = _f32_in(env, xn)
        if x is None:
            return None
        # the wrappers hand back at least 1-D arrays: results take the ONNX shape (0-D too)
        if op in oxk_program.ACTS:
            params = oxk_program.act_params(node, lambda name: np.asarray(env[name]))
            return None if params is None else \
                [lib.act(x, oxk_program.act_name(node), list(params)).reshape(x.shape)]
        if op in oxk_program.BINARY_OPS:
            if len(node.inputs) != 2:
                return None
            b = _f32_in(env, node.inputs[1])
            if b is None:
                return None
            shape = np.broadcast(x, b).shape
            if fold_broadcast(x.shape, b.shape, shape) is None:
                return None
            return [lib.binary(op, x, b).reshape(shape)]
        if op in ("Softmax", "LogSoftmax"):
            return _softmax(node, lib, x, op == "LogSoftmax")
        if op in oxk_program.NORM_OPS:
            return _norm(node, lib, env, x)
        if op in oxk_program.REDUCE_KINDS:
            return _reduce(node, lib, env, x)
        if op == "Resize":
            return _resize(node, lib, env, x)
        # views, and the pure copies (Transpose, Slice, Concat, Pad, Gather...): the CPU kernel
        # gives the values the program's copies give, bit for bit
        return None

    return run


def _resize(node: ir.Node, lib: KernelLibrary, env: Dict[str, Any], x: np.ndarray
            ) -> Optional[List[np.ndarray]]:
    """Resize-11+ on oxk_resample with the tables the program bakes in (oxk_movement.plan), so
    the first run gives the program's bits; None (the CPU kernel) for what the engine does not
    take (Resize-10's two inputs among them: the build does not see the opset)."""
    if len(node.inputs) < 3:
        return None
    try:
        plan = oxk_movement.plan(node, [x.shape], lambda i: env.get(node.inputs[i]) if
                                 i < len(node.inputs) and node.inputs[i] else None, 11)
    except oxk_movement.Refused:
        return None
    return lib.movement(plan, [x])


def _norm(node: ir.Node, lib: KernelLibrary, env: Dict[str, Any], x: np.ndarray
          ) -> Optional[List[np.ndarray]]:
    """A normalization (oxk_program.NORM_OPS) on oxk_norm / oxk_batchnorm with the arguments the
    program takes (oxk_program.norm_args / batchnorm_args); None (the CPU kernel) for what the
    engine does not take."""
    op = node.op_type
    if op == "BatchNormalization":
        names = [node.inputs[i] if len(node.inputs) > i else "" for i in range(1, 5)]
    elif op in ("SimplifiedLayerNormalization", "RMSNormalization"):
        names = [node.inputs[1] if len(node.inputs) > 1 else ""]
    else:
        names = [node.inputs[i] if len(node.inputs) > i else "" for i in (1, 2)]
    ps = [env[n] if n else None for n in names]
    if not _is_f32(*ps):   # (initializers' float32 dtype need not be numpy's own instance)
        return None
    shapes = [None if p is None else p.shape for p in ps]
    try:
        if op == "BatchNormalization":
            outer, args = oxk_program.batchnorm_args(node, x.shape, shapes)
            return [lib.batchnorm(x, outer, args, *ps)]
        rows, args = oxk_program.norm_args(node, x.shape, shapes)
    except oxk_program.Unsupported:
        return None
    return [lib.norm(x, rows, args, ps[0], ps[1] if len(ps) > 1 else None)]


def _reduce(node: ir.Node, lib: KernelLibrary, env: Dict[str, Any], x: np.ndarray
            ) -> Optional[List[np.ndarray]]:
    """A Reduce* op on oxk_reduce with the program's arguments (oxk_program.reduce_args); None
    (the CPU kernel) for the identity (noop_with_empty_axes) and what the engine does not take."""
    try:
        found = oxk_program.reduce_args(node, x.shape, oxk_program.reduce_axes(
            node, lambda name: np.asarray(env[name])))
    except oxk_program.Unsupported:
        return None
    if found is None:
        return None
    outer, args, out = found
    return [lib.reduce(x, outer, args, out)]


def _softmax(node: ir.Node, lib: KernelLibrary, x: np.ndarray, log: bool
             ) -> Optional[List[np.ndarray]]:
    """Softmax over the last axis, where every opset means that: an `axis` naming the last axis,
    or no `axis` on a 2-D input (the default is -1 from opset 13 and 1 before; the build does
    not see the opset). Anything else goes to the CPU kernel."""
    rank = x.ndim
    axis = node.attributes.get("axis")
    if rank == 0 or (axis is None and rank != 2):
        return None
    a = rank - 1 if axis is None else int(axis)
    if (a + rank if a < 0 else a) != rank - 1:
        return None
    return [lib.softmax(x, log)]


# ------------------------------------------------------------------ recurrent (issue #17)

def check_rnn(node: ir.Node, facts: Facts) -> Optional[str]:
    """LSTM / GRU with constant float32 weights, layout 0, default activations
    (onnxedge.oxk_rnn.reason, shared with the page)."""
    return oxk_rnn.reason(node, facts, "the C engine")


def build_rnn(node: ir.Node, lib: KernelLibrary, consts: Dict[str, np.ndarray]) -> Run:
    """LSTM / GRU through oxk_rnn with W, R, B (and P) packed now; the program runs the same
    kernel on the same plans (oxk_rnn.emit)."""
    ins = list(node.inputs) + [""] * 8
    w, r = consts.get(ins[1]), consts.get(ins[2])
    b = consts.get(ins[3]) if ins[3] else None
    p = consts.get(ins[7]) if ins[7] and node.op_type == "LSTM" else None
    plans = None
    if isinstance(w, np.ndarray) and isinstance(r, np.ndarray) and (not ins[3] or b is not None) \
            and (not ins[7] or node.op_type != "LSTM" or p is not None):
        plans = lib.rnn_plans(node, w, r, b, p)
    n_out = len(node.outputs)

    def run(env: Dict[str, Any]) -> Optional[List[np.ndarray]]:
        if plans is None or ins[4]:
            return None
        x = _f32_in(env, ins[0])
        if x is None or plans.check_input(x.shape):
            return None
        h0 = _f32_in(env, ins[5]) if ins[5] else None
        c0 = _f32_in(env, ins[6]) if ins[6] and node.op_type == "LSTM" else None
        if (ins[5] and h0 is None) or (ins[6] and node.op_type == "LSTM" and c0 is None):
            return None
        return lib.rnn(plans, x, h0, c0)[:n_out]

    run.rnn = plans  # type: ignore[attr-defined]  # the program emitter reads it
    return run


def check_program_op(node: ir.Node, facts: Facts) -> Optional[str]:
    """Activations and unary math, Add/Sub/Mul/Div/Pow/Max/Min, Softmax/LogSoftmax and views: the
    rule every engine provider shares (onnxedge.oxk_program.program_op_reason)."""
    return oxk_program.program_op_reason(node, facts, "the C engine")


TABLE = SupportTable("NeonExecutionProvider / X64ExecutionProvider", [
    OpSupport("", "Conv", check=check_conv, build=build_conv),
    OpSupport("", "ConvTranspose", check=check_convt, build=build_convt),
    OpSupport(MS_DOMAIN, fused_ops.FUSED_CONV, check=check_conv, build=build_conv),
    OpSupport(FUSED, fused_ops.FUSED_CONV, check=check_conv, build=build_conv),
    OpSupport("", "Gemm", check=check_gemm, build=build_gemm),
    OpSupport(FUSED, fused_ops.FUSED_GEMM, check=check_gemm, build=build_gemm),
    OpSupport("", "MatMul", check=check_matmul, build=build_matmul),
    OpSupport(FUSED, fused_ops.FUSED_MATMUL, check=check_matmul, build=build_matmul),
    OpSupport(FUSED, fused_ops.MULTI_HEAD_ATTENTION, check=check_attention, build=build_attention),
    OpSupport("", "MaxPool", check=check_pool, build=build_pool),
    OpSupport("", "AveragePool", check=check_pool, build=build_pool),
    OpSupport("", "GlobalAveragePool", check=check_pool, build=build_pool),
    OpSupport("", "GlobalMaxPool", check=check_pool, build=build_pool),
    OpSupport("", "LSTM", check=check_rnn, build=build_rnn),
    OpSupport("", "GRU", check=check_rnn, build=build_rnn),
] + [OpSupport(domain, op, check=check, build=build) for domain, op, check, build in quantized.RECORDS
     ] + [OpSupport("", op, check=check_program_op, build=_engine_op)
     for op in oxk_program.PROGRAM_ONLY_OPS]
  + [OpSupport(FUSED, op, check=check_program_op, build=_engine_op)
     for op in oxk_program.FUSED_PROGRAM_OPS])
# (domain, op) -> (check, build): the table's records by key (tests and tools read it).
OPS: Dict[Tuple[str, str], Tuple[Callable[..., Optional[str]], Callable[..., Run]]] = {
    (r.domain, r.op): (r.check, r.build) for r in TABLE.records()}


def support_table() -> SupportTable:
    """The C engine's op-support records (docs/OPERATORS.md reads them)."""
    return TABLE
