"""MaxPool, AveragePool (pads, strides, dilations, ceil_mode, count_include_pad), and the
global pools, on 1-D and 2-D images: one window template."""
from __future__ import annotations

from typing import Any, List, Optional

from onnxedge.geometry import auto_pad_mode, pool_geometry, spatial_attr

from ..runtime import Recorder, Uniform, grid
from .table import F32, attr, float_inputs, register

_KINDS = {
    "max": ("-3.4028234e38", "acc = max(acc, v);", ""),
    "avg": ("0.0", "acc = acc + v;", "acc = acc / f32(max(count, 1u));"),
}


def _check(node: Any, facts: Any) -> Optional[str]:
    why = float_inputs(node, facts, [0])
    if why:
        return why
    if len(node.outputs) > 1 and node.outputs[1]:
        return "MaxPool's Indices output is not produced on WebGPU"
    ks = attr(node, "kernel_shape")
    if ks is not None and len(ks) not in (1, 2):
        return "%d-D pooling (only 1-D and 2-D run on WebGPU)" % len(ks)
    return None


def _pool(rt: Recorder, x: Any, kind: str, kernel: List[int], st: List[int], dl: List[int],
          begins: List[int], ends: List[int], out: List[int], include_pad: bool) -> Any:
    if len(x.shape) not in (3, 4):
        raise ValueError("pooling takes 3-D or 4-D input, got %s" % (list(x.shape),))
    nd = len(x.shape) - 2
    shape2 = list(x.shape) if nd == 2 else list(x.shape[:2]) + [1, x.shape[2]]
    if nd == 1:
        kernel, st, dl = [1] + kernel, [1] + st, [1] + dl
        begins, ends, out = [0] + begins, [0] + ends, [1] + out
    y = rt.new(list(x.shape[:2]) + (out if nd == 2 else out[1:]), F32)
    if y.size == 0:
        return y
    init, acc, fin = _KINDS[kind]
    p = rt.kernel("pool", T=rt.wgsl_type(F32), INIT=init, ACCUMULATE=acc, FINISH=fin)
    u = (Uniform().u32(y.size, shape2[2], shape2[3], out[0], out[1], kernel[0], kernel[1],
                       st[0], st[1]).i32(begins[0], begins[1]).u32(dl[0], dl[1], int(include_pad))
         .i32(ends[0], ends[1]))
    rt.dispatch(p, [x, y], u, grid(y.size, 256))
    return y


@register(["MaxPool", "AveragePool"], check=_check)
def run_pool(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """MaxPool / AveragePool."""
    op = node.op_type
    x = ins[0]
    nd = len(x.shape) - 2
    kernel = [int(k) for k in attr(node, "kernel_shape")]
    st = spatial_attr(op, "strides", attr(node, "strides"), nd, 1, 1)
    dl = spatial_attr(op, "dilations", attr(node, "dilations"), nd, 1, 1)
    begins, ends, out = pool_geometry(op, x.shape[2:], kernel, st, dl, attr(node, "pads"),
                                      auto_pad_mode(op, attr(node, "auto_pad", "NOTSET")),
                                      int(attr(node, "ceil_mode", 0)))
    kind = "max" if op == "MaxPool" else "avg"
    return [_pool(rt, x, kind, kernel, st, dl, begins, ends, out,
                  bool(attr(node, "count_include_pad", 0)))]


@register(["GlobalAveragePool", "GlobalMaxPool"], check=_check)
def run_global_pool(rt: Recorder, node: Any, ins: List[Any], opset: int) -> List[Any]:
    """GlobalAveragePool / GlobalMaxPool: one window over the whole image."""
    x = ins[0]
    nd = len(x.shape) - 2
    kind = "max" if node.op_type == "GlobalMaxPool" else "avg"
    y = _pool(rt, x, kind, list(x.shape[2:]), [1] * nd, [1] * nd, [0] * nd, [0] * nd,
              [1] * nd, False)
    return [y]
