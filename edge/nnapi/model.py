"""The NNAPI model the bridge builds: what `ANeuralNetworksModel_*` calls would build on a device.

Operands (type, dims, scale, zeroPoint, and a value when constant), operations (code, input and
output operand indices in NNAPI's order) and the model's inputs and outputs. Each model input or
output also carries the ONNX value name it stands for and its layout: `LAYOUT_ONNX` (same as in
the ONNX graph) or `LAYOUT_NHWC` (a 4-D NCHW ONNX tensor that NNAPI holds channels-last: the
host transposes it at the subgraph edge).
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

import numpy as np

from onnxedge.errors import InvalidGraph

from . import codes

LAYOUT_ONNX = 0
LAYOUT_NHWC = 1


class Operand(NamedTuple):
    """One operand: its NNAPI type, dims, quantization and (for constants) its value."""

    type: int
    dims: tuple
    scale: float = 0.0
    zero_point: int = 0
    value: Optional[np.ndarray] = None   # a constant (setOperandValue), else None


class Operation(NamedTuple):
    """One operation: ANEURALNETWORKS_* code, input and output operand indices."""

    code: int
    inputs: tuple
    outputs: tuple


class IO(NamedTuple):
    """A model input or output: operand index, ONNX value name, layout at the edge."""

    operand: int
    name: str
    layout: int = LAYOUT_ONNX


class Model:
    """An NNAPI model under construction (or read back from its serialized form)."""

    def __init__(self) -> None:
        self.operands: List[Operand] = []
        self.operations: List[Operation] = []
        self.inputs: List[IO] = []
        self.outputs: List[IO] = []

    # ------------------------------------------------------------------ building
    def add_operand(self, type: int, dims: Sequence[int] = (), scale: float = 0.0,
                    zero_point: int = 0, value: Optional[np.ndarray] = None) -> int:
        """Add an operand and return its index; `value` makes it a constant."""
        if value is not None:
            value = np.ascontiguousarray(np.asarray(value, dtype=codes.NUMPY_DTYPE[type]))
            value = value.reshape(tuple(int(d) for d in dims))
        scale = float(np.float32(scale))   # NNAPI keeps scales as C floats
        self.operands.append(Operand(int(type), tuple(int(d) for d in dims), scale,
                                     int(zero_point), value))
        return len(self.operands) - 1

    def scalar(self, type: int, value: float) -> int:
        """A constant scalar operand (INT32, FLOAT32 or BOOL)."""
        return self.add_operand(type, (), value=np.asarray(value))

    def int32(self, value: int) -> int:
        """A constant INT32 scalar."""
        return self.scalar(codes.INT32, int(value))

    def int_vector(self, values: Sequence[int]) -> int:
        """A constant TENSOR_INT32 vector (shapes, axes, permutations)."""
        return self.add_operand(codes.TENSOR_INT32, (len(values),),
                                value=np.asarray(list(values), dtype=np.int32))

    def add_operation(self, code: int, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Append an operation (inputs and outputs in NNAPI's documented order)."""
        self.operations.append(Operation(int(code), tuple(inputs), tuple(outputs)))

    # ------------------------------------------------------------------ queries
    def ops_used(self) -> List[str]:
        """Names of the operations in the model, sorted, without repeats."""
        return sorted({codes.OPERATION_NAMES.get(o.code, str(o.code)) for o in self.operations})

    def constant_bytes(self) -> int:
        """Total size of the constant operand values."""
        return sum(o.value.nbytes for o in self.operands if o.value is not None)

    def validate(self) -> None:
        """InvalidGraph unless every reference is in range and every operand is defined once."""
        n = len(self.operands)
        defined = set(i for i, o in enumerate(self.operands) if o.value is not None)
        for io in self.inputs:
            if not 0 <= io.operand < n:
                raise InvalidGraph("NNAPI model input %r refers to operand %d of %d"
                                   % (io.name, io.operand, n))
            defined.add(io.operand)
        for k, op in enumerate(self.operations):
            if op.code not in codes.OPERATION_NAMES:
                raise InvalidGraph("NNAPI operation %d has unknown code %d" % (k, op.code))
            for i in op.inputs:
                if not 0 <= i < n or i not in defined:
                    raise InvalidGraph("NNAPI operation %d (%s) reads operand %d, which is not "
                                       "defined before it" % (k, codes.OPERATION_NAMES[op.code], i))
            for i in op.outputs:
                if not 0 <= i < n or i in defined:
                    raise InvalidGraph("NNAPI operation %d (%s) writes operand %d, which is out "
                                       "of range or already defined"
                                       % (k, codes.OPERATION_NAMES[op.code], i))
                defined.add(i)
        for io in self.outputs:
            if not 0 <= io.operand < n or io.operand not in defined:
                raise InvalidGraph("NNAPI model output %r refers to operand %d, which no "
                                   "operation writes" % (io.name, io.operand))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Model):
            return False
        if (self.operations != other.operations or self.inputs != other.inputs
                or self.outputs != other.outputs or len(self.operands) != len(other.operands)):
            return False
        for a, b in zip(self.operands, other.operands):
            if a[:4] != b[:4] or (a.value is None) != (b.value is None):
                return False
            if a.value is not None and (a.value.dtype != b.value.dtype
                                        or a.value.tobytes() != b.value.tobytes()):
                return False
        return True

    def __repr__(self) -> str:
        return "nnapi.Model(%d operands, %d operations: %s)" % (
            len(self.operands), len(self.operations), ", ".join(self.ops_used()))


# ---------------------------------------------------------------------- subgraph edges
NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def device_inputs(model: Model, feeds: dict) -> List[np.ndarray]:
    """The model's input buffers in NNAPI's order and layout, from ONNX-named host feeds."""
    out = []
    for io in model.inputs:
        if io.name not in feeds:
            raise InvalidGraph("NNAPI model input %r was not fed (feeds: %s)"
                               % (io.name, sorted(feeds)))
        op = model.operands[io.operand]
        x = np.asarray(feeds[io.name])
        if io.layout == LAYOUT_NHWC:
            x = x.transpose(NCHW_TO_NHWC)
        out.append(np.ascontiguousarray(x, dtype=codes.NUMPY_DTYPE[op.type]))
    return out


def host_outputs(model: Model, buffers: Sequence[np.ndarray]) -> dict:
    """ONNX-named host results from the model's output buffers (NHWC ones transposed back)."""
    out = {}
    for io, x in zip(model.outputs, buffers):
        out[io.name] = np.ascontiguousarray(x.transpose(NHWC_TO_NCHW)) \
            if io.layout == LAYOUT_NHWC else x
    return out
