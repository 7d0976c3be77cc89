"""The output-fact rules of the ops (see facts.py): element types and shapes per op.

Tables for the families that share a rule (elementwise unary, broadcasting binary, comparisons,
ops whose output has their data input's type), a function for each op with a shape of its own.
Dims are ints, symbolic names or None; a rule that cannot tell a size says None, never guesses.
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from . import dtypes, fused_ops, ir
from .facts import Fact, RuleContext, fact_rule

MS = "com.microsoft"
FUSED = fused_ops.DOMAIN
Ins = List[Optional[Fact]]
Outs = List[Optional[Fact]]

UNARY = ("Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Celu", "Cos", "Cosh",
         "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Hardmax", "Identity",
         "LeakyRelu", "Log", "LogSoftmax", "LpNormalization", "LRN", "MeanVarianceNormalization",
         "Mish", "Neg", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin",
         "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
         "Clip", "CumSum", "Trilu", "ReverseSequence", "BitwiseNot", "InstanceNormalization",
         "Not", "ScatterElements", "ScatterND", "Scatter")
BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "PRelu", "BitShift", "BitwiseAnd",
          "BitwiseOr", "BitwiseXor")
VARIADIC = ("Max", "Min", "Sum", "Mean")
COMPARE = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
# Output 0 has input 0's type and rank; the sizes are not worked out.
SAME_RANK = ("ConvTranspose", "Pad", "Tile", "Resize", "Upsample", "DepthToSpace",
             "SpaceToDepth", "LpPool", "MaxRoiPool", "RoiAlign", "GridSample", "Col2Im")
# Output 0 has input 0's type; the shape is not worked out.
SAME_TYPE = ("GatherND", "Compress", "Einsum", "NonMaxSuppressionX", "CenterCropPad",
             "MaxUnpool", "AffineGrid")


# ----------------------------------------------------------------------------- helpers

def broadcast(a: Optional[List[Any]], b: Optional[List[Any]]) -> Optional[List[Any]]:
    """Numpy broadcast of two shapes; None when a rank is unknown or the sizes clash."""
    if a is None or b is None:
        return None
    out: List[Any] = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            return None
        else:
            out.append(None)
    return out[::-1]


def product(dims: List[Any]) -> Any:
    """The product of known dims; a symbolic dim when it is the only dim other than 1s; None
    when it cannot be told."""
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims, dtype=np.int64))
    rest = [d for d in dims if not (isinstance(d, int) and d == 1)]
    return rest[0] if len(rest) == 1 and isinstance(rest[0], str) else None


def _elem(f: Optional[Fact]) -> int:
    return f.elem_type if f is not None else 0


def _shape(f: Optional[Fact]) -> Optional[List[Any]]:
    return None if f is None or f.shape is None else list(f.shape)


def _first(ins: Ins) -> Optional[Fact]:
    return ins[0] if ins else None


def _axis(node: ir.Node, rank: int, default: int = 0) -> int:
    a = int(node.attributes.get("axis", default))
    return a + rank if a < 0 else a


def _axes(node: ir.Node, ctx: RuleContext, input_since: int = 13) -> Optional[List[int]]:
    """The `axes` attribute, or (from opset `input_since`) the second input's constant value;
    [] when the node gives none, None when the input is not a constant."""
    if "axes" in node.attributes:
        return [int(a) for a in node.attributes["axes"]]
    if ctx.opset >= input_since and len(node.inputs) > 1 and node.inputs[1]:
        return ctx.ints(node.inputs[1])
    return []


def like(f: Optional[Fact], shape: Optional[List[Any]] = None, keep_shape: bool = False
         ) -> Optional[Fact]:
    """A fact with f's element type and `shape` (f's own shape when keep_shape)."""
    if f is None:
        return None
    return Fact(f.elem_type, _shape(f) if keep_shape else shape)


# ----------------------------------------------------------------------------- elementwise

@fact_rule(*UNARY)
@fact_rule("Gelu", "LayerNormalization", domain=FUSED)
@fact_rule("FastGelu", "BiasGelu", "Gelu", "QuickGelu", "BiasAdd", "RotaryEmbedding", domain=MS)
def _unary(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [like(_first(ins), keep_shape=True)]


@fact_rule("IsNaN", "IsInf")
def _is_x(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(dtypes.BOOL, _shape(_first(ins)))]


def _broadcast_all(ins: Ins) -> Optional[List[Any]]:
    shapes = [_shape(f) for f in ins if f is not None]
    if not shapes or len(shapes) != len([f for f in ins if f is not None]) or None in shapes:
        return None
    out: Optional[List[Any]] = shapes[0]
    for s in shapes[1:]:
        out = broadcast(out, s)
    return out


@fact_rule(*(BINARY + VARIADIC))
def _binary(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    elem = _elem(_first(ins))
    if None in ins:
        return [Fact(elem, None)] if elem else []
    return [Fact(elem, _broadcast_all(ins))]


@fact_rule(*COMPARE)
def _compare(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(dtypes.BOOL, None if None in ins else _broadcast_all(ins))]


@fact_rule("Where")
def _where(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    value = ins[1] if len(ins) > 1 else None
    if value is None:
        return []
    return [Fact(value.elem_type, None if None in ins else _broadcast_all(ins))]


@fact_rule("Cast")
def _cast(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(int(node.attributes.get("to", 0)), _shape(_first(ins)))]


@fact_rule("CastLike")
def _cast_like(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(_elem(ins[1] if len(ins) > 1 else None), _shape(_first(ins)))]


@fact_rule("Dropout")
def _dropout(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    return [like(x, keep_shape=True), Fact(dtypes.BOOL, _shape(x))]


# ----------------------------------------------------------------------------- constants

@fact_rule("Constant")
def _constant(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    value = ctx.const(node.outputs[0]) if node.outputs else None
    if value is None:
        return []
    try:
        return [Fact(dtypes.from_numpy(value.dtype), list(value.shape))]
    except KeyError:
        return []


@fact_rule("ConstantOfShape")
def _constant_of_shape(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    value = node.attributes.get("value")
    elem = dtypes.from_numpy(value.dtype) if isinstance(value, np.ndarray) else dtypes.FLOAT
    target = ctx.input_dims(node, 0)
    if target is not None:
        return [Fact(elem, target)]
    length = _shape(_first(ins))
    if length is not None and len(length) == 1 and isinstance(length[0], int):
        return [Fact(elem, [None] * length[0])]
    return [Fact(elem, None)]


@fact_rule("Range")
def _range(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    """[n]: n = ceil((limit - start) / delta) from constants, or `limit` itself (a dim from a
    shape) when start is 0 and delta 1."""
    start, limit, delta = (ctx.input_dims(node, k) for k in range(3))
    n: Any = None
    if start is not None and limit is not None and delta is not None \
            and len(start) == len(limit) == len(delta) == 1:
        a, b, d = start[0], limit[0], delta[0]
        if all(isinstance(v, int) for v in (a, b, d)) and d:
            n = max(-(-(b - a) // d), 0)
        elif a == 0 and d == 1:
            n = b
    return [like(_first(ins), [n])]


@fact_rule("Shape")
def _shape_op(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _shape(_first(ins))
    if x is None:
        return [Fact(dtypes.INT64, [None])]
    rank = len(x)
    start = int(node.attributes.get("start", 0))
    end = int(node.attributes.get("end", rank))
    start, end = [min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end)]
    return [Fact(dtypes.INT64, [max(end - start, 0)])]


@fact_rule("Size")
def _size(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(dtypes.INT64, [])]


@fact_rule("NonZero")
def _nonzero(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _shape(_first(ins))
    return [Fact(dtypes.INT64, [len(x) if x is not None else None, None])]


@fact_rule("EyeLike", "RandomNormalLike", "RandomUniformLike", "Bernoulli")
def _like_dtype(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    elem = int(node.attributes.get("dtype", 0)) or _elem(x)
    return [Fact(elem, _shape(x))]


@fact_rule("RandomNormal", "RandomUniform")
def _random(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    shape = node.attributes.get("shape")
    return [Fact(int(node.attributes.get("dtype", 0)) or dtypes.FLOAT,
                 None if shape is None else [int(d) for d in shape])]


@fact_rule("OneHot")
def _one_hot(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    values = ins[2] if len(ins) > 2 else None
    idx = _shape(_first(ins))
    shape = None
    if idx is not None:
        depth = ctx.input_ints(node, 1)
        axis = int(node.attributes.get("axis", -1))
        axis = axis + len(idx) + 1 if axis < 0 else axis
        shape = idx[:axis] + [int(depth[0]) if depth else None] + idx[axis:]
    return [Fact(_elem(values), shape)]


# ----------------------------------------------------------------------------- reductions

@fact_rule(*REDUCE)
def _reduce(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    if x is None:
        return []
    since = 18 if node.op_type != "ReduceSum" else 13
    axes = _axes(node, ctx, since)
    if x.shape is None or axes is None:
        return [Fact(x.elem_type, None)]
    if not axes and int(node.attributes.get("noop_with_empty_axes", 0)):
        return [like(x, keep_shape=True)]
    rank = len(x.shape)
    chosen = {a + rank if a < 0 else a for a in axes} or set(range(rank))
    keep = int(node.attributes.get("keepdims", 1))
    return [Fact(x.elem_type, [1 if i in chosen else d for i, d in enumerate(x.shape)
                               if keep or i not in chosen])]


@fact_rule("ArgMax", "ArgMin")
def _arg(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _shape(_first(ins))
    if x is None:
        return [Fact(dtypes.INT64, None)]
    axis = _axis(node, len(x))
    keep = int(node.attributes.get("keepdims", 1))
    return [Fact(dtypes.INT64, [1 if i == axis else d for i, d in enumerate(x)
                                if keep or i != axis])]


@fact_rule("TopK")
def _topk(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    if shape is not None:
        k = ctx.input_ints(node, 1) if ctx.opset >= 10 else [node.attributes.get("k")]
        shape[_axis(node, len(shape), -1)] = int(k[0]) if k and k[0] is not None else None
    return [Fact(_elem(x), shape), Fact(dtypes.INT64, shape)]


@fact_rule("Unique")
def _unique(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(_elem(_first(ins)), None)] + [Fact(dtypes.INT64, [None])] * 3


# ----------------------------------------------------------------------------- movement

@fact_rule("Reshape")
def _reshape(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    elem = _elem(x)   # the data's type only: never the shape input's int64
    target = ctx.input_dims(node, 1)
    if target is None:
        length = _shape(ins[1] if len(ins) > 1 else None)
        if length is not None and len(length) == 1 and isinstance(length[0], int):
            return [Fact(elem, [None] * length[0])]   # rank known, sizes not
        return [Fact(elem, None)] if elem else []
    shape = _shape(x)
    out: List[Any] = []
    for i, t in enumerate(target):
        if t == 0 and not int(node.attributes.get("allowzero", 0)):
            out.append(shape[i] if shape is not None and i < len(shape) else None)
        elif isinstance(t, int) and t < -1:
            return [Fact(elem, None)] if elem else []   # malformed: the kernel says why
        else:
            out.append(t)
    if -1 in out:
        known = [d for d in out if d != -1]
        total = product(shape) if shape is not None else None
        rest = product(known)
        fill = total // rest if isinstance(total, int) and isinstance(rest, int) and rest \
            else None
        if fill is None and shape is not None and out.count(-1) == 1:
            fill = _leftover(shape, known)
        out = [fill if d == -1 else d for d in out]
    return [Fact(elem, out)]


def _leftover(shape: List[Any], kept: List[Any]) -> Any:
    """The size of the one -1 of a reshape of `shape` whose other target dims are `kept`, when
    symbolic dims cancel by name and the rest are ints: [b, s, 32] -> [b, s, 4, -1] gives 8;
    None when it cannot be told."""
    rest = list(shape)
    ints: List[int] = []
    for d in kept:
        if isinstance(d, str) and d in rest:
            rest.remove(d)
        elif isinstance(d, int):
            ints.append(d)
        else:
            return None
    if not all(isinstance(d, int) for d in rest):
        return None
    total, part = product(rest), product(ints)
    return total // part if part and total % part == 0 else None


@fact_rule("Transpose")
def _transpose(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    if shape is None:
        return [like(x)]
    perm = node.attributes.get("perm") or list(range(len(shape)))[::-1]
    if len(perm) != len(shape):
        return [like(x)]
    return [like(x, [shape[int(p)] for p in perm])]


@fact_rule("Flatten")
def _flatten(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    if shape is None:
        return [like(x, [None, None])]
    axis = _axis(node, len(shape), 1)
    return [like(x, [product(shape[:axis]), product(shape[axis:])])]


@fact_rule("Unsqueeze")
def _unsqueeze(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    axes = _axes(node, ctx)
    if shape is None or not axes:
        return [like(x)]
    out_rank = len(shape) + len(axes)
    for a in sorted(a + out_rank if a < 0 else a for a in axes):
        shape.insert(a, 1)
    return [like(x, shape)]


@fact_rule("Squeeze")
def _squeeze(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    axes = _axes(node, ctx)
    if shape is None or axes is None:
        return [like(x)]
    if not axes:
        if not all(isinstance(d, int) for d in shape):
            return [like(x)]
        return [like(x, [d for d in shape if d != 1])]
    chosen = {a + len(shape) if a < 0 else a for a in axes}
    return [like(x, [d for i, d in enumerate(shape) if i not in chosen])]


@fact_rule("Concat")
def _concat(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shapes = [_shape(f) for f in ins]
    if x is None or x.shape is None or any(s is None or len(s) != len(x.shape) for s in shapes):
        rank = next((len(s) for s in shapes if s is not None), None)
        return [like(x, None if rank is None else [None] * rank)]
    axis = _axis(node, len(x.shape))
    out = list(x.shape)
    sizes = [s[axis] for s in shapes]   # type: ignore[index]
    out[axis] = sum(sizes) if all(isinstance(s, int) for s in sizes) else None
    for i in range(len(out)):
        if i != axis and not all(s[i] == out[i] for s in shapes):   # type: ignore[index]
            out[i] = next((s[i] for s in shapes if isinstance(s[i], int)), None)  # type: ignore
    return [like(x, out)]


@fact_rule("Split")
def _split(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    n = len(node.outputs)
    shape = _shape(x)
    if x is None:
        return []
    if shape is None:
        return [like(x)] * n
    axis = _axis(node, len(shape))
    sizes = node.attributes.get("split") or (ctx.input_ints(node, 1) if ctx.opset >= 13 else None)
    given = "split" in node.attributes or (ctx.opset >= 13 and len(node.inputs) > 1
                                           and bool(node.inputs[1]))
    dim = shape[axis]
    # equal parts only when no split sizes are given at all (sizes given but not known here,
    # e.g. computed by other nodes, leave the axis unknown)
    if not sizes and not given and isinstance(dim, int) and n and dim % n == 0:
        sizes = [dim // n] * n
    outs = []
    for k in range(n):
        s = list(shape)
        s[axis] = int(sizes[k]) if sizes and k < len(sizes) else None
        outs.append(like(x, s))
    return outs


@fact_rule("Slice")
def _slice(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    if shape is None:
        return [like(x)]
    if ctx.opset >= 10:
        starts, ends = ctx.input_ints(node, 1), ctx.input_ints(node, 2)
        axes = ctx.input_ints(node, 3) if len(node.inputs) > 3 and node.inputs[3] else None
        steps = ctx.input_ints(node, 4) if len(node.inputs) > 4 and node.inputs[4] else None
        axes_given = len(node.inputs) > 3 and bool(node.inputs[3])
        steps_given = len(node.inputs) > 4 and bool(node.inputs[4])
        if starts is None or ends is None or (axes_given and axes is None) or \
                (steps_given and steps is None):
            return [like(x, [None] * len(shape))]
    else:
        a = node.attributes
        starts, ends, axes, steps = a.get("starts"), a.get("ends"), a.get("axes"), None
        if starts is None or ends is None:
            return [like(x, [None] * len(shape))]
    rank = len(shape)
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    out = list(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = axis + rank if axis < 0 else axis
        dim = shape[axis]
        out[axis] = len(range(*slice(int(start), int(end), int(step)).indices(dim))) \
            if isinstance(dim, int) and step else None
    return [like(x, out)]


@fact_rule("Gather")
def _gather(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x, idx = _first(ins), (ins[1] if len(ins) > 1 else None)
    xs, ix = _shape(x), _shape(idx)
    if xs is None or ix is None or not xs:
        return [like(x)]
    axis = _axis(node, len(xs))
    return [like(x, xs[:axis] + ix + xs[axis + 1:])]


@fact_rule("GatherElements")
def _gather_elements(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [like(_first(ins), _shape(ins[1] if len(ins) > 1 else None))]


@fact_rule("Expand")
def _expand(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    target = ctx.input_dims(node, 1)
    if target is None:
        length = _shape(ins[1] if len(ins) > 1 else None)
        if length is None or len(length) != 1 or not isinstance(length[0], int):
            return [like(x)]
        target = [None] * length[0]   # type: ignore[list-item]
    shape = _shape(x)
    if shape is None:
        return [like(x)]
    out = broadcast(shape, target)
    return [like(x, out)]


@fact_rule(*SAME_RANK)
def _same_rank(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    return [like(x, None if shape is None else [None] * len(shape))]


@fact_rule(*SAME_TYPE)
def _same_type(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [like(_first(ins))]


# ----------------------------------------------------------------------------- linear algebra

def _matmul_shape(a: Optional[List[Any]], b: Optional[List[Any]]) -> Optional[List[Any]]:
    if a is None or b is None or not a or not b:
        return None
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return b[:-2] + b[-1:]
    batch = broadcast(a[:-2], b[:-2])
    return None if batch is None else batch + [a[-2], b[-1]]


@fact_rule("MatMul")
@fact_rule("FusedMatMul", domain=(FUSED, MS))
def _matmul(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    a, b = _shape(_first(ins)), _shape(ins[1] if len(ins) > 1 else None)
    if node.op_type == "FusedMatMul" and a is not None and b is not None:
        if int(node.attributes.get("transA", 0)) and len(a) >= 2:
            a = a[:-2] + [a[-1], a[-2]]
        if int(node.attributes.get("transB", 0)) and len(b) >= 2:
            b = b[:-2] + [b[-1], b[-2]]
    return [like(_first(ins), _matmul_shape(a, b))]


@fact_rule("MatMulInteger")
def _matmul_integer(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(dtypes.INT32, _matmul_shape(_shape(_first(ins)),
                                              _shape(ins[1] if len(ins) > 1 else None)))]


@fact_rule("QLinearMatMul")
def _qlinear_matmul(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    zp = ins[7] if len(ins) > 7 else None
    return [Fact(_elem(zp) or _elem(_first(ins)),
                 _matmul_shape(_shape(_first(ins)), _shape(ins[3] if len(ins) > 3 else None)))]


@fact_rule("Gemm")
@fact_rule("FusedGemm", domain=(FUSED, MS))
def _gemm(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    a, b = _shape(x), _shape(ins[1] if len(ins) > 1 else None)
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return [like(x, [None, None])]
    m = a[1] if node.attributes.get("transA", 0) else a[0]
    n = b[0] if node.attributes.get("transB", 0) else b[1]
    return [like(x, [m, n])]


@fact_rule("MatMulNBits", domain=MS)
def _matmul_nbits(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    a = _shape(_first(ins))
    n = node.attributes.get("N")
    return [like(_first(ins), None if a is None else a[:-1] + [int(n) if n is not None else None])]


# ----------------------------------------------------------------------------- windows

def _window(node: ir.Node, x: List[Any], channels: Any, kernel: Optional[List[Any]]
            ) -> Optional[List[Any]]:
    """Conv / pool output shape from the input's and kernel's sizes (None dims where unknown)."""
    spatial = x[2:]
    n = len(spatial)
    if kernel is None or len(kernel) != n:
        return None
    a = node.attributes
    strides = list(a.get("strides") or [1] * n)
    dil = list(a.get("dilations") or [1] * n)
    pads = list(a.get("pads") or [0] * (2 * n))
    auto_pad = str(a.get("auto_pad", "NOTSET"))
    ceil_mode = int(a.get("ceil_mode", 0))
    out: List[Any] = []
    for i, d in enumerate(spatial):
        k = kernel[i]
        if not isinstance(d, int) or not isinstance(k, int):
            out.append(None)
            continue
        span = int(dil[i]) * (k - 1) + 1
        s = int(strides[i])
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-d // s))
        elif auto_pad == "VALID":
            out.append((d - span) // s + 1)
        else:
            total = d + int(pads[i]) + int(pads[i + n]) - span
            out.append((-(-total // s) if ceil_mode else total // s) + 1)
    return [x[0], channels] + out


@fact_rule("Conv")
@fact_rule("FusedConv", domain=(FUSED, MS))
def _conv(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    xs, ws = _shape(x), _shape(ins[1] if len(ins) > 1 else None)
    if xs is None or len(xs) < 3:
        return [like(x)]
    if ws is None or len(ws) != len(xs):
        return [like(x, [None] * len(xs))]
    kernel = node.attributes.get("kernel_shape") or ws[2:]
    return [like(x, _window(node, xs, ws[0], list(kernel)) or [None] * len(xs))]


@fact_rule("ConvInteger")
def _conv_integer(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    out = _conv(node, ins, ctx)[0]
    return [Fact(dtypes.INT32, None if out is None else out.shape)]


@fact_rule("QLinearConv")
def _qlinear_conv(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    xs, ws = _shape(x), _shape(ins[3] if len(ins) > 3 else None)
    zp = ins[7] if len(ins) > 7 else None
    shape = None
    if xs is not None and len(xs) >= 3:
        shape = [None] * len(xs)
        if ws is not None and len(ws) == len(xs):
            kernel = node.attributes.get("kernel_shape") or ws[2:]
            shape = _window(node, xs, ws[0], list(kernel)) or shape
    return [Fact(_elem(zp) or _elem(x), shape)]


@fact_rule("MaxPool", "AveragePool")
def _pool(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    xs = _shape(x)
    if xs is None or len(xs) < 3:
        return [like(x), Fact(dtypes.INT64, None)]
    kernel = node.attributes.get("kernel_shape")
    shape = _window(node, xs, xs[1], None if kernel is None else list(kernel)) or [None] * len(xs)
    return [like(x, shape), Fact(dtypes.INT64, shape)]


@fact_rule("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    xs = _shape(x)
    return [like(x, None if xs is None or len(xs) < 2 else xs[:2] + [1] * (len(xs) - 2))]


# ----------------------------------------------------------------------------- normalization

@fact_rule("BatchNormalization")
def _batch_norm(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    mean = ins[3] if len(ins) > 3 else None
    return [like(x, keep_shape=True), like(mean, keep_shape=True), like(mean, keep_shape=True)]


@fact_rule("LayerNormalization", "SimplifiedLayerNormalization")
def _layer_norm(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    stat = None
    if shape is not None:
        axis = _axis(node, len(shape), -1)
        stat = shape[:axis] + [1] * (len(shape) - axis)
    stash = int(node.attributes.get("stash_type", 1)) or dtypes.FLOAT
    return [like(x, keep_shape=True), Fact(stash, stat), Fact(stash, stat)]


@fact_rule("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", domain=MS)
def _skip_layer_norm(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    shape = _shape(x)
    stat = None if shape is None else shape[:-1] + [1]
    return [like(x, keep_shape=True), Fact(dtypes.FLOAT, stat), Fact(dtypes.FLOAT, stat),
            like(x, keep_shape=True)]


@fact_rule("EmbedLayerNormalization", domain=MS)
def _embed_layer_norm(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    """Output 0 and 2 have the embeddings' type (input 2), never the int32 ids' type."""
    ids, words = _first(ins), (ins[2] if len(ins) > 2 else None)
    ids_shape, w = _shape(ids), _shape(words)
    shape = None
    if ids_shape is not None and len(ids_shape) == 2:
        shape = ids_shape + [w[-1] if w else None]
    out = Fact(_elem(words), shape)
    batch = [ids_shape[0]] if ids_shape else [None]
    return [out, Fact(dtypes.INT32, batch), out]


# ----------------------------------------------------------------------------- attention

@fact_rule("Attention", domain=MS)
def _attention(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    """Output [batch, seq, v_hidden] in the input's type (v_hidden: qkv_hidden_sizes[2], else a
    third of the weights' last dim)."""
    x = _first(ins)
    xs, ws = _shape(x), _shape(ins[1] if len(ins) > 1 else None)
    sizes = node.attributes.get("qkv_hidden_sizes")
    hidden: Any = None
    if sizes:
        hidden = int(sizes[2])
    elif ws is not None and ws and isinstance(ws[-1], int):
        hidden = ws[-1] // 3
    shape = None if xs is None or len(xs) != 3 else [xs[0], xs[1], hidden]
    return [like(x, shape), like(x)]


@fact_rule("MultiHeadAttention", "GroupQueryAttention", domain=MS)
@fact_rule("MultiHeadAttention", domain=FUSED)
def _mha(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    """Output [batch, seq, v_hidden] in the query's type (v_hidden from a 3-D value, else the
    query's hidden size when key/value are absent or 3-D like it)."""
    q = _first(ins)
    qs = _shape(q)
    if qs is None or len(qs) != 3:
        return [like(q)]
    vs = _shape(ins[2] if len(ins) > 2 else None)
    if node.op_type == "GroupQueryAttention" or len(node.inputs) < 3 or not node.inputs[2]:
        hidden = qs[2]
    elif vs is not None and len(vs) == 3:
        hidden = vs[2]
    else:
        hidden = None
    return [like(q, [qs[0], qs[1], hidden])]


# ----------------------------------------------------------------------------- quantization

@fact_rule("QuantizeLinear", "DequantizeLinear", domain=("", MS))
def _qdq(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    x = _first(ins)
    scale = ins[1] if len(ins) > 1 else None
    zp = ins[2] if len(ins) > 2 else None
    if node.op_type == "DequantizeLinear":
        elem = _elem(scale) or dtypes.FLOAT
    else:
        elem = int(node.attributes.get("output_dtype", 0)) or _elem(zp) or dtypes.UINT8
    return [Fact(elem, _shape(x))]


@fact_rule("DynamicQuantizeLinear")
def _dynamic_quantize(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    return [Fact(dtypes.UINT8, _shape(_first(ins))), Fact(dtypes.FLOAT, []),
            Fact(dtypes.UINT8, [])]


# ----------------------------------------------------------------------------- recurrent

@fact_rule("LSTM", "GRU", "RNN")
def _recurrent(node: ir.Node, ins: Ins, ctx: RuleContext) -> Outs:
    """Y [seq, dirs, batch, hidden] and the final states [dirs, batch, hidden] (layout 1: batch
    first), hidden from `hidden_size` or R's last dim; unknown sizes stay None."""
    x = _first(ins)
    shape = _shape(x)
    if shape is None or len(shape) != 3:
        return [like(x), like(x), like(x)]
    r = _shape(ins[2]) if len(ins) > 2 else None
    hidden = node.attributes.get("hidden_size")
    if hidden is None and r is not None and len(r) == 3:
        hidden = r[2]
    hidden = int(hidden) if isinstance(hidden, int) else None
    dirs = 2 if str(node.attributes.get("direction", "forward")) == "bidirectional" else 1
    if int(node.attributes.get("layout", 0)):
        batch, seq = shape[0], shape[1]
        return [like(x, [batch, seq, dirs, hidden])] + [like(x, [batch, dirs, hidden])] * 2
    seq, batch = shape[0], shape[1]
    return [like(x, [seq, dirs, batch, hidden])] + [like(x, [dirs, batch, hidden])] * 2
