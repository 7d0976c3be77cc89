"""A numpy reference interpreter of Core ML ML Programs: runs a saved `.mlpackage` off macOS.

It reads the package's own files (the `model.mlmodel` protobuf and its `weights/weight.bin` blob
file), walks the main function's operations in order, resolves each operation's inputs (bound
names or immediate / blob-file values) and executes it with numpy, following Apple's MIL op
reference (coremltools `mil.ops.defs`: NCHW layouts, pad types valid / same / custom, ceil_mode,
epsilon placement, gelu modes, affine quantization). What it verifies is the translation; Core
ML's own kernels (precision, fp16 accumulation, the Neural Engine) need a Mac or a device.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from onnxedge.errors import Fail, InvalidArgument, NotImplemented, OnnxEdgeError, RuntimeException

from ..bridge import Artifact

_SPEC = "Data/com.apple.CoreML/model.mlmodel"
_DTYPES = {"BOOL": np.bool_, "FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64,
           "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
           "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64}
_CAST = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "int16": np.int16,
         "int8": np.int8, "uint8": np.uint8, "uint16": np.uint16, "bool": np.bool_}


class Program:
    """A parsed ML Program: the main block's operations, its inputs/outputs and its weights."""

    def __init__(self, files: Dict[str, bytes], package: str = "model.mlpackage"):
        from coremltools.proto import MIL_pb2, Model_pb2
        self._mil = MIL_pb2
        spec_path = package + "/" + _SPEC
        if spec_path not in files:
            raise InvalidArgument("Core ML artifact has no %s (files: %s)"
                                  % (spec_path, sorted(files)))
        self.spec = Model_pb2.Model()
        self.spec.ParseFromString(files[spec_path])
        if not self.spec.HasField("mlProgram"):
            raise InvalidArgument("Core ML artifact %s is not an ML Program" % spec_path)
        main = self.spec.mlProgram.functions["main"]
        self.block = main.block_specializations[main.opset]
        self.inputs = [v.name for v in main.inputs]
        self.outputs = list(self.block.outputs)
        self._files = files
        self._weights_root = package + "/Data/com.apple.CoreML/"

    # ------------------------------------------------------------------ values
    def _dtype(self, value_type: Any) -> Any:
        name = self._mil.DataType.Name(value_type.tensorType.dataType)
        if name not in _DTYPES and name != "STRING":
            raise NotImplemented("Core ML interpreter: tensors of type %s" % name)
        return _DTYPES.get(name, object)

    def _shape(self, value_type: Any) -> List[int]:
        return [int(d.constant.size) for d in value_type.tensorType.dimensions]

    def value(self, v: Any) -> Any:
        """A MIL Value (immediate or blob file) as numpy (or str for a string scalar)."""
        dtype, shape = self._dtype(v.type), self._shape(v.type)
        if v.HasField("blobFileValue"):
            return self._blob(v.blobFileValue.fileName, v.blobFileValue.offset, dtype, shape)
        t = v.immediateValue.tensor
        kind = t.WhichOneof("value")
        if kind == "strings":
            vals = list(t.strings.values)
            return vals[0] if not shape else np.array(vals, object).reshape(shape)
        if kind == "bytes":
            arr = np.frombuffer(t.bytes.values, dtype=dtype)
        elif kind is None:
            arr = np.zeros(0, dtype)
        else:
            arr = np.array(list(getattr(t, kind).values)).astype(dtype)
        return arr.reshape(shape)

    def _blob(self, file_name: str, offset: int, dtype: Any, shape: List[int]) -> np.ndarray:
        rel = file_name.replace("@model_path/", "")
        data = self._files.get(self._weights_root + rel)
        if data is None:
            raise InvalidArgument("Core ML artifact: weight file %s is missing" % rel)
        sentinel, _, size, data_offset = struct.unpack_from("<IIQQ", data, offset)
        if sentinel != 0xDEADBEEF or data_offset + size > len(data):
            raise InvalidArgument("Core ML artifact: bad blob metadata at offset %d of %s"
                                  % (offset, rel))
        arr = np.frombuffer(data, dtype=dtype, count=size // np.dtype(dtype).itemsize,
                            offset=data_offset)
        return arr.reshape(shape)

    def _check_shape(self, op_type: str, spec: Any, val: np.ndarray) -> None:
        """The shape coremltools' type inference declared (from Apple's op definitions) must be
        the computed one: an independent check of every op's padding / layout semantics."""
        dims = spec.type.tensorType.dimensions
        if len(dims) != val.ndim or any(
                d.WhichOneof("dimension") == "constant" and int(d.constant.size) != n
                for d, n in zip(dims, val.shape)):
            declared = [int(d.constant.size) if d.WhichOneof("dimension") == "constant" else "?"
                        for d in dims]
            raise Fail("Core ML interpreter: %s output %r has shape %s, but the program "
                       "declares %s" % (op_type, spec.name, list(val.shape), declared))

    # ------------------------------------------------------------------ execution
    def run(self, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Execute the main block; feeds and results are keyed by the program's names."""
        env: Dict[str, Any] = {}
        for name in self.inputs:
            if name not in feeds:
                raise InvalidArgument("Core ML interpreter: missing input %r" % name)
            env[name] = np.asarray(feeds[name])
        for op in self.block.operations:
            args: Dict[str, Any] = {}
            for key, arg in op.inputs.items():
                vals = [env[b.name] if b.WhichOneof("binding") == "name" else self.value(b.value)
                        for b in arg.arguments]
                args[key] = vals if key == "values" or len(vals) != 1 else vals[0]
            for key, attr in op.attributes.items():   # constexpr ops carry their data here
                if key not in ("name", "val") and key not in args:
                    args[key] = self.value(attr)
            if op.type == "const":
                results = [self.value(op.attributes["val"])]
            else:
                fn = OPS.get(op.type)
                if fn is None:
                    raise NotImplemented("Core ML interpreter: MIL op %r (output %s) is not "
                                         "implemented" % (op.type, op.outputs[0].name))
                try:
                    out = fn(**args)
                except OnnxEdgeError:
                    raise
                except Exception as e:
                    raise RuntimeException("Core ML interpreter: MIL op %s (output %s) failed: "
                                           "%s: %s" % (op.type, op.outputs[0].name,
                                                       type(e).__name__, e)) from e
                results = list(out) if isinstance(out, tuple) else [out]
            for spec, val in zip(op.outputs, results):
                if isinstance(val, np.ndarray) and spec.type.HasField("tensorType"):
                    want = self._dtype(spec.type)
                    if want is not object and val.dtype != want:
                        val = val.astype(want)
                    self._check_shape(op.type, spec, val)
                env[spec.name] = val
        return {name: env[name] for name in self.outputs}


def interpret(artifact: Artifact, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Run a CoreML Artifact: feeds and results keyed by its ONNX names (meta's name maps)."""
    prog = _cached_program(artifact)
    to_mil = artifact.meta.get("mil_inputs") or {n: n for n in artifact.inputs}
    from_mil = artifact.meta.get("mil_outputs") or {n: n for n in artifact.outputs}
    out = prog.run({to_mil[n]: np.asarray(feeds[n]) for n in artifact.inputs})
    return {n: out[from_mil[n]] for n in artifact.outputs}


_PROGRAMS: Dict[str, Program] = {}


def _cached_program(artifact: Artifact) -> Program:
    prog = _PROGRAMS.get(artifact.key) if artifact.key else None
    if prog is None:
        prog = Program(artifact.files)
        if artifact.key:
            _PROGRAMS[artifact.key] = prog
    return prog


# ---------------------------------------------------------------------- ops (Apple's MIL reference)

def _f(x: Any) -> Any:
    return x.item() if isinstance(x, np.ndarray) and x.ndim == 0 else x


def _ints(x: Any) -> List[int]:
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _same_pads(size: Sequence[int], k: Sequence[int], s: Sequence[int], d: Sequence[int],
               lower: bool = False) -> List[int]:
    pads = []
    for n, kk, ss, dd in zip(size, k, s, d):
        out = -(-n // ss)
        total = max((out - 1) * ss + (kk - 1) * dd + 1 - n, 0)
        small, big = total // 2, total - total // 2
        pads += [big, small] if lower else [small, big]
    return pads


def _pad_list(pad_type: str, pad: Any, size: Sequence[int], k: Sequence[int], s: Sequence[int],
              d: Sequence[int]) -> List[int]:
    """[begin0, end0, begin1, end1, ...] as MIL's pad_type says."""
    if pad_type == "valid":
        return [0] * (2 * len(size))
    if pad_type in ("same", "same_lower"):
        return _same_pads(size, k, s, d, pad_type == "same_lower")
    if pad_type == "custom":
        return _ints(pad) if pad is not None else [0] * (2 * len(size))
    raise NotImplemented("Core ML interpreter: pad_type %r" % pad_type)


def _windows(x: np.ndarray, k: Sequence[int], s: Sequence[int], d: Sequence[int],
             out: Sequence[int]) -> np.ndarray:
    """View [N, C, out_h, out_w, kh, kw] of windows over a padded NCHW array."""
    n, c = x.shape[:2]
    st = x.strides
    shape = (n, c) + tuple(out) + tuple(k)
    strides = st[:2] + tuple(st[2 + i] * s[i] for i in range(len(k))) + \
        tuple(st[2 + i] * d[i] for i in range(len(k)))
    return np.lib.stride_tricks.as_strided(x, shape=shape, strides=strides, writeable=False)


def conv(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None,
         strides: Any = None, pad_type: str = "valid", pad: Any = None, dilations: Any = None,
         groups: Any = 1, **_: Any) -> np.ndarray:
    """MIL conv (2-D): x [N, C_in, H, W], weight [C_out, C_in / groups, kH, kW]."""
    sp = x.ndim - 2
    if sp != 2:
        raise NotImplemented("Core ML interpreter: conv of rank %d (2-D only)" % x.ndim)
    k = list(weight.shape[2:])
    s = _ints(strides) if strides is not None else [1] * sp
    d = _ints(dilations) if dilations is not None else [1] * sp
    p = _pad_list(str(pad_type), pad, x.shape[2:], k, s, d)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p[2 * i], p[2 * i + 1]) for i in range(sp)])
    out = [(xp.shape[2 + i] - ((k[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(sp)]
    g = int(_f(groups))
    n, c_in = x.shape[:2]
    c_out = weight.shape[0]
    win = _windows(xp, k, s, d, out)               # N, C, oh, ow, kh, kw
    results = []
    for gi in range(g):
        cin_g, cout_g = c_in // g, c_out // g
        wg = weight[gi * cout_g:(gi + 1) * cout_g]          # co, ci, kh, kw
        xg = win[:, gi * cin_g:(gi + 1) * cin_g]            # N, ci, oh, ow, kh, kw
        cols = xg.transpose(0, 2, 3, 1, 4, 5).reshape(n * out[0] * out[1], -1)
        y = cols @ wg.reshape(cout_g, -1).T                 # N*oh*ow, co
        results.append(y.reshape(n, out[0], out[1], cout_g))
    y = np.concatenate(results, axis=3).transpose(0, 3, 1, 2)
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(y.astype(x.dtype))


def conv_transpose(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None,
                   pad: Any = None, output_shape: Any = None, pad_type: str = "valid",
                   strides: Any = None, dilations: Any = None, groups: Any = 1,
                   **_: Any) -> np.ndarray:
    """MIL conv_transpose (2-D): weight [C_in, C_out / groups, kH, kW]; every input pixel adds
    its weighted kernel at stride steps, then `pad` crops the result (custom / valid pads;
    an `output_shape`, which the MIL builder records, must match)."""
    if x.ndim != 4 or str(pad_type) not in ("valid", "custom"):
        raise NotImplemented("Core ML interpreter: conv_transpose of rank %d, pad_type %s, "
                             "output_shape %s" % (x.ndim, pad_type, output_shape))
    k = list(weight.shape[2:])
    s = _ints(strides) if strides is not None else [1, 1]
    d = _ints(dilations) if dilations is not None else [1, 1]
    p = _ints(pad) if pad is not None and str(pad_type) == "custom" else [0, 0, 0, 0]
    n, c_in, h, w = x.shape
    g = int(_f(groups))
    cout_g = weight.shape[1]
    full = [(h - 1) * s[0] + (k[0] - 1) * d[0] + 1, (w - 1) * s[1] + (k[1] - 1) * d[1] + 1]
    y = np.zeros((n, cout_g * g, full[0], full[1]), np.float64)
    cin_g = c_in // g
    for gi in range(g):
        xg = x[:, gi * cin_g:(gi + 1) * cin_g].astype(np.float64)
        wg = weight[gi * cin_g:(gi + 1) * cin_g].astype(np.float64)
        for i in range(k[0]):
            for j in range(k[1]):
                part = np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
                y[:, gi * cout_g:(gi + 1) * cout_g,
                  i * d[0]:i * d[0] + (h - 1) * s[0] + 1:s[0],
                  j * d[1]:j * d[1] + (w - 1) * s[1] + 1:s[1]] += part
    y = y[:, :, p[0]:full[0] - p[1], p[2]:full[1] - p[3]]
    if output_shape is not None and list(y.shape[2:]) != _ints(output_shape)[-2:]:
        raise NotImplemented("Core ML interpreter: conv_transpose output_shape %s differs from "
                             "the padded result %s" % (_ints(output_shape), list(y.shape)))
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1)
    return np.ascontiguousarray(y.astype(x.dtype))


def _pool(x: np.ndarray, kernel_sizes: Any, strides: Any, pad_type: str, pad: Any,
          ceil_mode: Any, kind: str, exclude_padding: bool = True) -> np.ndarray:
    sp = x.ndim - 2
    k = _ints(kernel_sizes)
    s = _ints(strides) if strides is not None else [1] * sp
    p = _pad_list(str(pad_type), pad, x.shape[2:], k, s, [1] * sp)
    ceil = bool(_f(ceil_mode)) if ceil_mode is not None else False
    out, extra = [], []
    for i in range(sp):
        span = x.shape[2 + i] + p[2 * i] + p[2 * i + 1] - k[i]
        o = (-(-span // s[i]) if ceil else span // s[i]) + 1
        if ceil and (o - 1) * s[i] >= x.shape[2 + i] + p[2 * i] and (p[2 * i] or p[2 * i + 1]):
            o -= 1          # MIL's rule: only with padding, a last window in it is dropped
        out.append(o)
        extra.append(max((o - 1) * s[i] + k[i] - (x.shape[2 + i] + p[2 * i] + p[2 * i + 1]), 0))
    widths = [(0, 0), (0, 0)] + [(p[2 * i], p[2 * i + 1] + extra[i]) for i in range(sp)]
    if kind == "max":
        xp = np.pad(x, widths, constant_values=-np.inf)
        return _windows(xp, k, s, [1] * sp, out).max(axis=(-2, -1)).astype(x.dtype)
    xp = np.pad(x, widths)
    total = _windows(xp, k, s, [1] * sp, out).sum(axis=(-2, -1), dtype=np.float64)
    ones = np.zeros((1, 1) + xp.shape[2:])
    inner = tuple(slice(p[2 * i], p[2 * i] + x.shape[2 + i]) if exclude_padding else
                  slice(0, x.shape[2 + i] + p[2 * i] + p[2 * i + 1]) for i in range(sp))
    ones[(slice(None), slice(None)) + inner] = 1
    count = _windows(ones, k, s, [1] * sp, out).sum(axis=(-2, -1))
    return (total / count).astype(x.dtype)


def max_pool(x: np.ndarray, kernel_sizes: Any, strides: Any = None, pad_type: str = "valid",
             pad: Any = None, ceil_mode: Any = False, **_: Any) -> np.ndarray:
    """MIL max_pool (padding never wins the max)."""
    return _pool(x, kernel_sizes, strides, pad_type, pad, ceil_mode, "max")


def avg_pool(x: np.ndarray, kernel_sizes: Any, strides: Any = None, pad_type: str = "valid",
             pad: Any = None, exclude_padding_from_average: Any = False, ceil_mode: Any = False,
             **_: Any) -> np.ndarray:
    """MIL avg_pool: the divisor counts padding unless exclude_padding_from_average."""
    return _pool(x, kernel_sizes, strides, pad_type, pad, ceil_mode, "avg",
                 bool(_f(exclude_padding_from_average)))


def linear(x: np.ndarray, weight: np.ndarray, bias: Optional[np.ndarray] = None,
           **_: Any) -> np.ndarray:
    """MIL linear: x @ weight^T + bias (weight [out, in])."""
    y = np.matmul(x, weight.T)
    return (y + bias if bias is not None else y).astype(x.dtype)


def matmul(x: np.ndarray, y: np.ndarray, transpose_x: Any = False, transpose_y: Any = False,
           **_: Any) -> np.ndarray:
    """MIL matmul: numpy matmul after optional transposes of the last two axes."""
    if _f(transpose_x):
        x = np.swapaxes(x, -1, -2)
    if _f(transpose_y):
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


def _binary(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def op(x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
        r = fn(x, y)
        return r.astype(np.result_type(x, y)) if isinstance(r, np.ndarray) else r
    return op


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def op(x: np.ndarray, **_: Any) -> np.ndarray:
        return fn(x).astype(x.dtype)
    return op


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import erf   # noqa: PLC0415  (optional, faster)
        return erf(x)
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu(x: np.ndarray, mode: str = "EXACT", **_: Any) -> np.ndarray:
    """MIL gelu: EXACT (erf), TANH_APPROXIMATION, SIGMOID_APPROXIMATION (x * sigmoid(1.702 x))."""
    xd = x.astype(np.float64)
    if mode == "EXACT":
        y = 0.5 * xd * (1 + _erf(xd / math.sqrt(2)))
    elif mode == "TANH_APPROXIMATION":
        y = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    elif mode == "SIGMOID_APPROXIMATION":
        y = xd / (1 + np.exp(-1.702 * xd))
    else:
        raise NotImplemented("Core ML interpreter: gelu mode %r" % mode)
    return y.astype(x.dtype)


def softmax(x: np.ndarray, axis: Any = -1, **_: Any) -> np.ndarray:
    """MIL softmax along one axis."""
    a = int(_f(axis))
    e = np.exp(x - x.max(axis=a, keepdims=True))
    return (e / e.sum(axis=a, keepdims=True)).astype(x.dtype)


def batch_norm(x: np.ndarray, mean: np.ndarray, variance: np.ndarray,
               gamma: Optional[np.ndarray] = None, beta: Optional[np.ndarray] = None,
               epsilon: Any = 1e-5, **_: Any) -> np.ndarray:
    """MIL batch_norm over axis 1: (x - mean) / sqrt(variance + epsilon) * gamma + beta."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + float(_f(epsilon)))
    if gamma is not None:
        y = y * gamma.reshape(shape)
    if beta is not None:
        y = y + beta.reshape(shape)
    return y.astype(x.dtype)


def _norm(x: np.ndarray, axes: Sequence[int], epsilon: float) -> np.ndarray:
    ax = tuple(axes)
    xd = x.astype(np.float64)
    mean = xd.mean(axis=ax, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=ax, keepdims=True)
    return (xd - mean) / np.sqrt(var + epsilon)


def layer_norm(x: np.ndarray, axes: Any = None, gamma: Optional[np.ndarray] = None,
               beta: Optional[np.ndarray] = None, epsilon: Any = 1e-5, **_: Any) -> np.ndarray:
    """MIL layer_norm over `axes`; gamma/beta have the normalized axes' shape."""
    ax = [a % x.ndim for a in _ints(axes)] if axes is not None else list(range(x.ndim))
    y = _norm(x, ax, float(_f(epsilon)))
    bshape = [x.shape[i] if i in ax else 1 for i in range(x.ndim)]
    if gamma is not None:
        y = y * gamma.reshape(bshape)
    if beta is not None:
        y = y + beta.reshape(bshape)
    return y.astype(x.dtype)


def instance_norm(x: np.ndarray, gamma: Optional[np.ndarray] = None,
                  beta: Optional[np.ndarray] = None, epsilon: Any = 1e-5, **_: Any) -> np.ndarray:
    """MIL instance_norm: per sample and channel over the spatial axes."""
    y = _norm(x, range(2, x.ndim), float(_f(epsilon)))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if gamma is not None:
        y = y * gamma.reshape(shape)
    if beta is not None:
        y = y + beta.reshape(shape)
    return y.astype(x.dtype)


def _reduce(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def op(x: np.ndarray, axes: Any = None, keep_dims: Any = False, **_: Any) -> np.ndarray:
        ax = tuple(a % x.ndim for a in _ints(axes)) if axes is not None else None
        return fn(x, axis=ax, keepdims=bool(_f(keep_dims))).astype(x.dtype)
    return op


def reshape(x: np.ndarray, shape: Any, **_: Any) -> np.ndarray:
    """MIL reshape (-1 infers one dim; 0 copies the input's dim)."""
    target = _ints(shape)
    target = [x.shape[i] if v == 0 else v for i, v in enumerate(target)]
    return x.reshape(target)


def transpose(x: np.ndarray, perm: Any, **_: Any) -> np.ndarray:
    """MIL transpose."""
    return np.ascontiguousarray(np.transpose(x, _ints(perm)))


def concat(values: List[np.ndarray], axis: Any, interleave: Any = False, **_: Any) -> np.ndarray:
    """MIL concat (interleave=False)."""
    if _f(interleave):
        raise NotImplemented("Core ML interpreter: concat with interleave=True")
    return np.concatenate(values, axis=int(_f(axis)))


def squeeze(x: np.ndarray, axes: Any = None, **_: Any) -> np.ndarray:
    """MIL squeeze: the listed axes, or every size-1 axis."""
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    return np.squeeze(x, axis=tuple(a % x.ndim for a in _ints(axes)))


def expand_dims(x: np.ndarray, axes: Any, **_: Any) -> np.ndarray:
    """MIL expand_dims: axes index the output."""
    ax = _ints(axes)
    rank = x.ndim + len(ax)
    shape = list(x.shape)
    for a in sorted(a % rank for a in ax):
        shape.insert(a, 1)
    return x.reshape(shape)


def clip(x: np.ndarray, alpha: Any, beta: Any, **_: Any) -> np.ndarray:
    """MIL clip: min(max(x, alpha), beta)."""
    return np.minimum(np.maximum(x, _f(alpha)), _f(beta)).astype(x.dtype)


def leaky_relu(x: np.ndarray, alpha: Any = 0.01, **_: Any) -> np.ndarray:
    """MIL leaky_relu: x if x >= 0 else alpha * x."""
    return np.where(x >= 0, x, x * x.dtype.type(_f(alpha))).astype(x.dtype)


def sigmoid_hard(x: np.ndarray, alpha: Any = 0.2, beta: Any = 0.5, **_: Any) -> np.ndarray:
    """MIL sigmoid_hard: min(max(alpha * x + beta, 0), 1)."""
    return np.clip(x * float(_f(alpha)) + float(_f(beta)), 0, 1).astype(x.dtype)


def _axis_shape(q: np.ndarray, param: np.ndarray, axis: Any) -> np.ndarray:
    if param.ndim == 0 or param.size == 1 and axis is None:
        return param.reshape(())
    if param.ndim == q.ndim:
        return param
    a = int(_f(axis)) % q.ndim
    shape = [1] * q.ndim
    shape[a] = -1
    return param.reshape(shape)


def quantize(input: np.ndarray, scale: np.ndarray, output_dtype: str,  # noqa: A002 (MIL's name)
             zero_point: Optional[np.ndarray] = None, axis: Any = None, **_: Any) -> np.ndarray:
    """MIL quantize: clip(round(input / scale) + zero_point) to int8/uint8, ties to even."""
    dtype = _CAST[str(output_dtype)]
    s = _axis_shape(input, np.asarray(scale, np.float32), axis)
    zp = 0 if zero_point is None else _axis_shape(input, zero_point, axis).astype(np.float64)
    info = np.iinfo(dtype)
    q = np.rint(input.astype(np.float32) / s).astype(np.float64) + zp
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(input: np.ndarray, scale: np.ndarray,  # noqa: A002 (MIL's name)
               zero_point: Optional[np.ndarray] = None, axis: Any = None, **_: Any) -> np.ndarray:
    """MIL dequantize: scale * (input - zero_point)."""
    s = _axis_shape(input, np.asarray(scale), axis)
    zp = 0 if zero_point is None else _axis_shape(input, zero_point, axis).astype(np.float32)
    return ((input.astype(np.float32) - zp) * s).astype(np.asarray(scale).dtype)


def constexpr_affine_dequantize(quantized_data: np.ndarray, zero_point: np.ndarray,
                                scale: np.ndarray, axis: Any, **_: Any) -> np.ndarray:
    """MIL constexpr_affine_dequantize (iOS16): scale * (quantized_data - zero_point)."""
    return dequantize(quantized_data, scale, zero_point, axis)


def cast(x: np.ndarray, dtype: str, **_: Any) -> np.ndarray:
    """MIL cast to fp16 / fp32 / int32 / ... (float to int truncates toward zero)."""
    return np.asarray(x).astype(_CAST[str(dtype)])


def identity(x: np.ndarray, **_: Any) -> np.ndarray:
    """MIL identity."""
    return x


OPS: Dict[str, Callable[..., Any]] = {
    "conv": conv, "conv_transpose": conv_transpose, "linear": linear, "matmul": matmul,
    "max_pool": max_pool, "avg_pool": avg_pool,
    "add": _binary(np.add), "sub": _binary(np.subtract), "mul": _binary(np.multiply),
    "real_div": _binary(np.divide), "pow": _binary(np.power),
    "maximum": _binary(np.maximum), "minimum": _binary(np.minimum),
    "relu": _unary(lambda x: np.maximum(x, 0)),
    "sigmoid": _unary(lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    "tanh": _unary(np.tanh), "erf": _unary(_erf), "sqrt": _unary(np.sqrt), "exp": _unary(np.exp),
    "abs": _unary(np.abs), "square": _unary(np.square), "rsqrt": _unary(lambda x: 1 / np.sqrt(x)),
    "identity": identity, "gelu": gelu, "softmax": softmax, "batch_norm": batch_norm,
    "layer_norm": layer_norm, "instance_norm": instance_norm,
    "reduce_mean": _reduce(np.mean), "reduce_sum": _reduce(np.sum), "reduce_max": _reduce(np.max),
    "reshape": reshape, "transpose": transpose, "concat": concat, "squeeze": squeeze,
    "expand_dims": expand_dims, "clip": clip, "leaky_relu": leaky_relu,
    "sigmoid_hard": sigmoid_hard, "quantize": quantize, "dequantize": dequantize,
    "constexpr_affine_dequantize": constexpr_affine_dequantize, "cast": cast,
}

__all__ = ["OPS", "Program", "interpret"]
