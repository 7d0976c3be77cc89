"""Conv (implicit GEMM: groups, depthwise, strides, pads, dilations), FusedConv (com.microsoft
and com.onnxedge: bias + activation in the epilogue) and ConvTranspose, for 1-D and 2-D images."""
from __future__ import annotations

from typing import Any, List, Optional

from onnxedge import fused_ops
from onnxedge.geometry import auto_pad_mode, conv_geometry, spatial_attr, transpose_geometry

from ..runtime import GpuTensor, Recorder, Uniform, grid
from . import tiles
from .matmul import ACTIVATIONS, FUSED_DOMAIN, activation_of, check_activation
from .table import F32, attr, float_inputs, register


def _check(node: Any, facts: Any) -> Optional[str]:
    why = float_inputs(node, facts, [0, 1, 2])
    if why:
        return why
    ks = attr(node, "kernel_shape")
    if ks is not None:
        nd = len(ks)
    else:   # no kernel_shape: the weight's rank (initializer, Constant or declared shape) tells
        rank = facts.rank(node.inputs[1])
        if rank is None:
            return ("no kernel_shape attribute and the rank of weight %r is unknown when the "
                    "graph is partitioned (only 1-D and 2-D convolutions run on WebGPU)"
                    % node.inputs[1])
        nd = rank - 2
    if nd not in (1, 2):
        return "%d-D convolution (only 1-D and 2-D run on WebGPU)" % nd
    if node.op_type == "FusedConv":
        return check_activation(node) or _check_z(node, facts)
    return None


def _check_z(node: Any, facts: Any) -> Optional[str]:
    """FusedConv's Z broadcasts like Add (fused_ops); the kernel adds one of the output's
    shape: refuse a Z whose static shape is another than the output's static shape."""
    if len(node.inputs) < 4 or not node.inputs[3]:
        return None
    z, y = facts.shape(node.inputs[3]), facts.shape(node.outputs[0])
    static = z is not None and y is not None and \
        all(isinstance(d, int) for d in list(z) + list(y))
    if static and list(z) != list(y):
        return "Z %r of shape %s is not the output's shape %s (the WebGPU kernel adds Z " \
               "elementwise; a broadcast Z runs on CPU)" % (node.inputs[3], z, y)
    return None


# B tile of the implicit GEMM: column n = (oh, ow), row k = (ci, kh, kw), gathered from X
_GATHER_B = """for (var e = 0u; e < 4u; e = e + 1u) {
      let idx = tid + e * 256u;
      let k = k0 + idx / 64u;
      let n = col0 + idx % 64u;
      var bv = 0.0;
      if (k < u.K && n < u.N) {
        let ci = k / khw;
        let r = k % khw;
        let ih = i32((n / u.OW) * u.sh + (r / u.KW) * u.dh) - i32(u.ph);
        let iw = i32((n % u.OW) * u.sw + (r % u.KW) * u.dw) - i32(u.pw);
        if (ih >= 0 && ih < i32(u.H) && iw >= 0 && iw < i32(u.W)) {
          bv = f32(B[x_off + (ci * u.H + u32(ih)) * u.W + u32(iw)]);
        }
      }
      Bs[idx / 64u][idx % 64u] = bv;
    }"""


def _as_2d(shape: List[int]) -> List[int]:
    return shape if len(shape) == 4 else shape[:2] + [1] + shape[2:]


def conv2d(rt: Recorder, node: Any, x: GpuTensor, w: GpuTensor, b: Optional[GpuTensor],
           activation: str = "", act_params: Any = (0.0, 0.0),
           z: Optional[GpuTensor] = None) -> GpuTensor:
    """Record a (fused) convolution, + Z before the activation; 1-D runs as H = 1."""
    op = node.op_type
    if len(x.shape) not in (3, 4) or len(w.shape) != len(x.shape):
        raise ValueError("%s takes 3-D or 4-D X and W of the same rank, got %s and %s"
                         % (op, list(x.shape), list(w.shape)))
    nd = len(x.shape) - 2
    st = spatial_attr(op, "strides", attr(node, "strides"), nd, 1, 1)
    dl = spatial_attr(op, "dilations", attr(node, "dilations"), nd, 1, 1)
    group = int(attr(node, "group", 1))
    begins, _, out = conv_geometry(op, x.shape[2:], w.shape[2:], st, dl, attr(node, "pads"),
                                   auto_pad_mode(op, attr(node, "auto_pad", "NOTSET")))
    if nd == 1:
        st, dl, begins, out = [1] + st, [1] + dl, [0] + begins, [1] + out
    N, C, H, W = _as_2d(list(x.shape))
    OC, cin_g, KH, KW = _as_2d(list(w.shape))
    if C != cin_g * group or OC % group:
        raise ValueError("%s: X has %d channels, W %s with group=%d" % (op, C, list(w.shape), group))
    OH, OW = out
    M, P, K = OC // group, OH * OW, cin_g * KH * KW
    y = rt.new([N, OC] + (out if nd == 2 else out[1:]), F32)
    if y.size == 0:
        return y
    if z is not None and tuple(z.shape) != tuple(y.shape):
        raise ValueError("FusedConv: Z must have the output's shape %s, got %s"
                         % (list(y.shape), list(z.shape)))
    t = rt.wgsl_type(F32)
    has_bias = b is not None
    zb = 3 if has_bias else 2
    out_b = zb + (1 if z is not None else 0)
    vec_a = K % 4 == 0
    pointwise = (KH, KW, st[0], st[1], begins[0], begins[1]) == (1, 1, 1, 1, 0, 0)
    vec_b = pointwise and P % 4 == 0
    load_b = tiles.load_b("x_off + k * u.H * u.W + n", "n") if vec_b else _GATHER_B
    p = rt.kernel("conv", T=t, ACT=ACTIVATIONS[activation][0],
                  TA=tiles.element(t, vec_a), TB=tiles.element(t, vec_b),
                  LOAD_A=tiles.load_a("w_off + m * u.K + k", vec_a), LOAD_B=load_b,
                  OUT_BINDING=out_b, U_BINDING=out_b + 1,
                  BIAS_DECL=("@group(0) @binding(2) var<storage, read> C: array<%s>;" % t)
                  if has_bias else "",
                  BIAS_ADD="v = v + f32(C[g * u.M + m]);" if has_bias else "",
                  Z_DECL=("@group(0) @binding(%d) var<storage, read> Z: array<%s>;" % (zb, t))
                  if z is not None else "",
                  Z_ADD="v = v + f32(Z[y_off + m * u.N + p]);" if z is not None else "")
    u = (Uniform().u32(M, P, K, group, C, H, W, OW, KH, KW, st[0], st[1])
         .i32(begins[0], begins[1]).u32(dl[0], dl[1]).f32(act_params[0], act_params[1])
         .u32(cin_g, 0))
    if N * group > 65535:
        raise ValueError("batch x groups = %d exceeds 65535 workgroups" % (N * group))
    tensors = [x, w] + ([b] if has_bias else []) + ([z] if z is not None else []) + [y]
    rt.dispatch(p, tensors, u, (-(-P // 64), -(-M // 64), N * group))  # type: ignore[arg-type]
    return y


@register(["Conv"], check=_check)
def run_conv(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """Conv."""
    return [conv2d(rt, node, ins[0], ins[1], ins[2] if len(ins) > 2 else None)]


def run_fused_conv(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """FusedConv: activation(Conv(X, W, B) + Z)."""
    name, params = activation_of(node)
    return [conv2d(rt, node, ins[0], ins[1], ins[2] if len(ins) > 2 else None, name, params,
                   ins[3] if len(ins) > 3 else None)]


register(["FusedConv"], check=_check, domain=fused_ops.MS_DOMAIN)(run_fused_conv)
register(["FusedConv"], check=_check, domain=FUSED_DOMAIN)(run_fused_conv)


@register(["ConvTranspose"], check=_check)
def run_conv_transpose(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """ConvTranspose (groups, strides, pads, dilations, output_padding / output_shape)."""
    op = "ConvTranspose"
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    if len(x.shape) not in (3, 4) or len(w.shape) != len(x.shape):
        raise ValueError("ConvTranspose takes 3-D or 4-D X and W, got %s and %s"
                         % (list(x.shape), list(w.shape)))
    nd = len(x.shape) - 2
    st = spatial_attr(op, "strides", attr(node, "strides"), nd, 1, 1)
    dl = spatial_attr(op, "dilations", attr(node, "dilations"), nd, 1, 1)
    opad = spatial_attr(op, "output_padding", attr(node, "output_padding"), nd, 0, 0)
    group = int(attr(node, "group", 1))
    begins, out = transpose_geometry(op, x.shape[2:], w.shape[2:], st, dl, attr(node, "pads"),
                                     auto_pad_mode(op, attr(node, "auto_pad", "NOTSET")), opad,
                                     attr(node, "output_shape"))
    if nd == 1:
        st, dl, begins, out = [1] + st, [1] + dl, [0] + begins, [1] + out
    N, C, H, W = _as_2d(list(x.shape))
    _, cout_g, KH, KW = _as_2d(list(w.shape))
    OC = cout_g * group
    y = rt.new([N, OC] + (out if nd == 2 else out[1:]), F32)
    if y.size == 0:
        return [y]
    t = rt.wgsl_type(F32)
    has_bias = b is not None
    p = rt.kernel("conv_transpose", T=t, OUT_BINDING=3 if has_bias else 2,
                  U_BINDING=4 if has_bias else 3,
                  BIAS_DECL=("@group(0) @binding(2) var<storage, read> C: array<%s>;" % t)
                  if has_bias else "",
                  BIAS_ADD="v = v + f32(C[co]);" if has_bias else "")
    u = (Uniform().u32(y.size, C, H, W, OC, out[0], out[1], group, KH, KW, st[0], st[1])
         .i32(begins[0], begins[1]).u32(dl[0], dl[1]))
    tensors = [x, w] + ([b] if has_bias else []) + [y]
    rt.dispatch(p, tensors, u, grid(y.size, 256))
    return [y]
