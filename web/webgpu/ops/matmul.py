"""MatMul, Gemm and the fused FusedGemm / FusedMatMul (com.onnxedge): one tiled GEMM template.

The template reads A, B and the bias C through strides, so transA/transB, broadcast batches
and any bias broadcast are uniforms, not shader variants; the shader key holds the bias flag,
the activation, the element type and the tile loads: vec4 loads of A along K when K is a
multiple of 4 (A not transposed), of B along N (N a multiple of 4) or along K (transB).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from onnxedge import fused_ops

from ..runtime import GpuTensor, Recorder, Uniform, broadcast_strides
from . import tiles
from .elementwise import broadcast_shape, collapse
from .table import F32, attr, float_inputs, register

FUSED_DOMAIN = fused_ops.DOMAIN
FLT_MAX = 3.4028234e38   # a WGSL uniform stands in for Clip's default infinite bounds

# activation -> (WGSL body over v with params u.act_a / u.act_b, default params); the names and
# defaults are fused_ops.Activation's (Clip's infinite defaults as +-FLT_MAX here)
_WGSL = {
    "": "return v;",
    "Relu": "return max(v, 0.0);",
    "Sigmoid": "return 1.0 / (1.0 + exp(-v));",
    "Tanh": "return tanh(clamp(v, -15.0, 15.0));",
    "LeakyRelu": "return select(u.act_a * v, v, v >= 0.0);",
    "Clip": "return clamp(v, u.act_a, u.act_b);",
    "HardSigmoid": "return clamp(u.act_a * v + u.act_b, 0.0, 1.0);",
    "HardSwish": "return v * clamp(v / 6.0 + 0.5, 0.0, 1.0);",
    "Silu": "return v / (1.0 + exp(-v));",
    "Elu": "return select(u.act_a * (exp(v) - 1.0), v, v > 0.0);",
    "Softplus": "return max(v, 0.0) + log(1.0 + exp(-abs(v)));",
    "GeluTanh": "return v / (1.0 + exp(-1.5957691216 * (v + 0.044715 * v * v * v)));",
    # Abramowitz-Stegun 7.1.26 erf (absolute error 1.5e-7)
    "Gelu": "let z = abs(v) * 0.70710678; let t = 1.0 / (1.0 + 0.3275911 * z); "
            "let e = 1.0 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 "
            "+ t * 1.061405429)))) * exp(-z * z); return 0.5 * v * (1.0 + select(-e, e, v >= 0.0));",
}
ACTIVATIONS = {name: (_WGSL[name], tuple(max(-FLT_MAX, min(FLT_MAX, d))
                                          for d in fused_ops.lookup(name).defaults))
               for name in fused_ops.FUSABLE}
TILE = 64


def activation_of(node: Any) -> Tuple[str, List[float]]:
    """The fused activation name and its two parameters (defaults filled)."""
    name = fused_ops.activation_name(node)
    defaults = ACTIVATIONS[name][1]
    given = [float(v) for v in (attr(node, "activation_params", None) or [])]
    params = list(given) + list(defaults[len(given):])
    return name, (params + [0.0, 0.0])[:2]


def check_activation(node: Any) -> Optional[str]:
    """Reason unless the node's fused activation is one the kernels have."""
    name = fused_ops.activation_name(node)
    if name not in ACTIVATIONS:
        return "fused activation %r has no WebGPU kernel" % name
    return None


def gemm(rt: Recorder, a: GpuTensor, b: GpuTensor, M: int, N: int, K: int,
         a_strides: Tuple[int, int], b_strides: Tuple[int, int], batch: Sequence[int],
         a_batch: Sequence[int], b_batch: Sequence[int], out_shape: Sequence[int],
         alpha: float = 1.0, bias: Optional[GpuTensor] = None, beta: float = 0.0,
         c_strides: Tuple[int, int] = (0, 0), activation: str = "",
         act_params: Sequence[float] = (0.0, 0.0)) -> GpuTensor:
    """Record Y[batch] = act(alpha * A @ B + beta * C), A (M,K) and B (K,N) through strides."""
    y = rt.new(out_shape, F32)
    if y.size == 0:
        return y
    nb = int(np.prod(batch, dtype=np.int64)) if len(batch) else 1
    if nb > 65535:
        raise ValueError("%d matmul batches exceed the 65535 workgroups of one dispatch" % nb)
    if len(batch) > 4:
        raise ValueError("more than 4 non-mergeable batch dimensions")
    t = rt.wgsl_type(F32)
    has_bias = bias is not None
    vec_a = a_strides[1] == 1 and tiles.all_multiple_of_4(K, a_strides[0], *a_batch)
    vec_b = ""
    if b_strides[1] == 1 and tiles.all_multiple_of_4(N, b_strides[0], *b_batch):
        vec_b = "n"
    elif b_strides[0] == 1 and tiles.all_multiple_of_4(K, b_strides[1], *b_batch):
        vec_b = "k"
    load_a = tiles.load_a("a_off + m * u.sam + k" if vec_a else "a_off + m * u.sam + k * u.sak",
                          vec_a)
    b_index = {"": "b_off + k * u.sbk + n * u.sbn", "n": "b_off + k * u.sbk + n",
               "k": "b_off + n * u.sbn + k"}[vec_b]
    params = dict(T=t, TA=tiles.element(t, vec_a), TB=tiles.element(t, bool(vec_b)),
                  LOAD_A=load_a, LOAD_B=tiles.load_b(b_index, vec_b),
                  ACT=ACTIVATIONS[activation][0],
                  OUT_BINDING=3 if has_bias else 2, U_BINDING=4 if has_bias else 3,
                  BIAS_DECL=("@group(0) @binding(2) var<storage, read> C: array<%s>;" % t)
                  if has_bias else "",
                  BIAS_ADD="v = v + u.beta * f32(C[m * u.scm + n * u.scn]);" if has_bias else "")
    p = rt.kernel("matmul", **params)
    u = (Uniform().u32(M, N, K, len(batch)).f32(alpha, beta, act_params[0], act_params[1])
         .u32(a_strides[0], a_strides[1], b_strides[0], b_strides[1])
         .u32(c_strides[0], c_strides[1], 0, 0)
         .vec(batch, n=4).vec(a_batch, n=4).vec(b_batch, n=4))
    tensors = [a, b] + ([bias] if has_bias else []) + [y]  # type: ignore[list-item]
    rt.dispatch(p, tensors, u, (-(-N // TILE), -(-M // TILE), nb))
    return y


def matmul(rt: Recorder, a: GpuTensor, b: GpuTensor, bias: Optional[GpuTensor] = None,
           activation: str = "", act_params: Sequence[float] = (0.0, 0.0)) -> GpuTensor:
    """numpy matmul semantics (1-D operands promoted, batches broadcast), plus a row bias."""
    a_shape, b_shape = list(a.shape), list(b.shape)
    if len(a_shape) == 1:
        a_shape = [1] + a_shape
    if len(b_shape) == 1:
        b_shape = b_shape + [1]
    M, K = a_shape[-2], a_shape[-1]
    K2, N = b_shape[-2], b_shape[-1]
    if K != K2:
        raise ValueError("MatMul inner dimensions differ: %s @ %s" % (list(a.shape), list(b.shape)))
    batch = list(broadcast_shape(a_shape[:-2], b_shape[:-2]))
    out_shape = batch + [M, N]
    if len(b_shape) == 2 and len(a_shape) > 2 and batch:
        # fold A's batches into M: one big GEMM against the shared B
        M2 = int(np.prod(batch, dtype=np.int64)) * M
        y = _plain(rt, a, b, M2, N, K, bias, activation, act_params, out_shape)
    else:
        sa = broadcast_strides(a_shape[:-2], batch) if batch else []
        sb = broadcast_strides(b_shape[:-2], batch) if batch else []
        a_mat, b_mat = M * K, K * N
        sa = [s * a_mat for s in sa]
        sb = [s * b_mat for s in sb]
        if batch:
            dims, (sa, sb) = collapse(batch, [sa, sb])
        else:
            dims = []
        bias_args = _bias_args(bias, N)
        y = gemm(rt, a, b, M, N, K, (K, 1), (N, 1), dims, sa, sb, out_shape,
                 bias=bias, beta=1.0, c_strides=bias_args, activation=activation,
                 act_params=act_params)
    final = list(out_shape)
    if len(a.shape) == 1:
        final.pop(-2)
    if len(b.shape) == 1:
        final.pop(-1)
    return y.view(final)


def _bias_args(bias: Optional[GpuTensor], N: int) -> Tuple[int, int]:
    if bias is None:
        return (0, 0)
    if bias.size not in (1, N):
        raise ValueError("bias of shape %s does not match %d output columns"
                         % (list(bias.shape), N))
    return (0, 1 if bias.size == N else 0)


def _plain(rt: Recorder, a: GpuTensor, b: GpuTensor, M: int, N: int, K: int,
           bias: Optional[GpuTensor], activation: str, act_params: Sequence[float],
           out_shape: Sequence[int]) -> GpuTensor:
    return gemm(rt, a, b, M, N, K, (K, 1), (N, 1), [], [], [], out_shape, bias=bias, beta=1.0,
                c_strides=_bias_args(bias, N), activation=activation, act_params=act_params)


def _check_matmul(node: Any, facts: Any) -> Optional[str]:
    return float_inputs(node, facts, [0, 1, 2]) or check_activation(node)


@register(["MatMul"], check=_check_matmul)
def run_matmul(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """MatMul (numpy semantics)."""
    return [matmul(rt, ins[0], ins[1])]


@register(["FusedMatMul"], check=_check_matmul, domain=FUSED_DOMAIN)
def run_fused_matmul(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """FusedMatMul: activation(MatMul(A, B) + bias)."""
    name, params = activation_of(node)
    bias = ins[2] if len(ins) > 2 else None
    return [matmul(rt, ins[0], ins[1], bias, name, params)]


def _check_gemm(node: Any, facts: Any) -> Optional[str]:
    return float_inputs(node, facts, [0, 1, 2]) or check_activation(node)


def _gemm_node(rt: Recorder, node: Any, ins: List[Any], activation: str,
               params: Sequence[float]) -> GpuTensor:
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError("Gemm takes 2-D A and B, got %s and %s" % (list(a.shape), list(b.shape)))
    ta, tb = int(attr(node, "transA", 0)), int(attr(node, "transB", 0))
    M, K = (a.shape[1], a.shape[0]) if ta else a.shape
    K2, N = (b.shape[1], b.shape[0]) if tb else b.shape
    if K != K2:
        raise ValueError("Gemm inner dimensions differ: A %s (transA=%d), B %s (transB=%d)"
                         % (list(a.shape), ta, list(b.shape), tb))
    sa = (1, M) if ta else (K, 1)
    sb = (1, K) if tb else (N, 1)
    cs = (0, 0)
    beta = float(attr(node, "beta", 1.0))
    if c is not None:
        cst = broadcast_strides(c.shape, (M, N))
        cs = (cst[0], cst[1])
    return gemm(rt, a, b, M, N, K, sa, sb, [], [], [], (M, N), float(attr(node, "alpha", 1.0)),
                c, beta, cs, activation, params)


@register(["Gemm"], check=_check_gemm)
def run_gemm(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Gemm: alpha * op(A) @ op(B) + beta * C."""
    return [_gemm_node(rt, node, ins, "", (0.0, 0.0))]


@register(["FusedGemm"], check=_check_gemm, domain=FUSED_DOMAIN)
def run_fused_gemm(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """FusedGemm: activation(Gemm(A, B, C))."""
    name, params = activation_of(node)
    return [_gemm_node(rt, node, ins, name, params)]


__all__ = ["gemm", "matmul", "ACTIVATIONS", "activation_of", "check_activation"]


def _check_matmul_nbits(node: Any, facts: Any) -> Optional[str]:
    return float_inputs(node, facts, [0, 5])


@register(["MatMulNBits"], check=_check_matmul_nbits, host_inputs=(1, 2, 3, 4),
          domain=fused_ops.MS_DOMAIN)
def run_matmul_nbits(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """MatMulNBits (com.microsoft): the 4/8-bit B dequantized on the host (the CPU kernel's
    rule) once per weight array — an initializer is the same array every run, so its float
    copy stays on the device —, then MatMul + bias on the GPU."""
    from onnxedge.kernels.matmul import nbits_weight
    B = ins[1]
    key = "%s|MatMulNBits-dequantized" % node.inputs[1]
    w_gpu = rt.consts.get(key, B, rt.f16) if rt.consts is not None else None
    if w_gpu is None:
        w = nbits_weight("MatMulNBits", B, ins[2], ins[3] if len(ins) > 3 else None,
                         ins[4] if len(ins) > 4 else None, int(attr(node, "K", 0)),
                         int(attr(node, "N", 0)), int(attr(node, "bits", 4)),
                         int(attr(node, "block_size", 0)))
        w = np.ascontiguousarray(w.T, dtype=F32)
        w_gpu = GpuTensor(rt.device.upload(rt.to_storage(w)), w.shape, w.dtype)
        if rt.consts is not None:
            rt.consts.put(key, B, rt.f16, w_gpu)
    bias = ins[5] if len(ins) > 5 and ins[5] is not None else None
    return [matmul(rt, ins[0], w_gpu, bias)]
