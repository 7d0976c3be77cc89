"""The NNAPI reference interpreter against hand-computed NNAPI semantics, and the ctypes runtime's
marshalling against a fake libneuralnetworks (which rebuilds the model from the C calls it
receives and runs it in the interpreter)."""
from __future__ import annotations

import ctypes
from fractions import Fraction

import numpy as np
import pytest

from onnxedge.edge.nnapi import codes, interpreter, runtime
from onnxedge.edge.nnapi.model import IO, Model, Operand
from onnxedge.errors import EPFail, InvalidGraph


def _single(code, in_types, out_type, out_dims, extra=(), scale=0.0, zp=0):
    """A model with inputs of (type, dims, scale, zp), constant extras, one operation."""
    m = Model()
    ins = []
    for k, (t, dims, s, z) in enumerate(in_types):
        ins.append(m.add_operand(t, dims, s, z))
        m.inputs.append(IO(ins[-1], "in%d" % k))
    for build in extra:
        ins.append(build(m))
    out = m.add_operand(out_type, out_dims, scale, zp)
    m.add_operation(code, ins, [out])
    m.outputs.append(IO(out, "out"))
    return m


def test_round_half_away_from_zero():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49])
    np.testing.assert_array_equal(interpreter.round_half_away(x), [1, 2, 3, -1, -3, 0])


def test_quantize_ties_away_from_zero_and_saturates():
    m = _single(codes.QUANTIZE, [(codes.TENSOR_FLOAT32, (6,), 0, 0)], codes.TENSOR_QUANT8_ASYMM,
                (6,), scale=0.5, zp=10)
    x = np.array([0.25, 0.75, -0.25, -5.25, 1000, -1000], np.float32)
    # x / 0.5 = 0.5, 1.5, -0.5, -10.5 -> 1, 2, -1, -11 (std::round), + 10, saturated to [0, 255]
    np.testing.assert_array_equal(interpreter.execute(m, [x])[0], [11, 12, 9, 0, 255, 0])


def test_quantized_fully_connected_exact():
    """acc = sum (x - xz)(w - wz) + bias, times xs*ws/ys, rounded half away, + yz, RELU-clamped."""
    rng = np.random.default_rng(5)
    xs, ws, ys, xz, wz, yz = 0.05, 0.02, 0.07, -3, 0, 5
    w = rng.integers(-127, 128, (6, 10)).astype(np.int8)
    bias = rng.integers(-500, 500, 6).astype(np.int32)
    m = _single(codes.FULLY_CONNECTED, [(codes.TENSOR_QUANT8_ASYMM_SIGNED, (4, 10), xs, xz)],
                codes.TENSOR_QUANT8_ASYMM_SIGNED, (4, 6),
                [lambda m: m.add_operand(codes.TENSOR_QUANT8_ASYMM_SIGNED, (6, 10), ws, wz, value=w),
                 lambda m: m.add_operand(codes.TENSOR_INT32, (6,), float(np.float32(xs) * np.float32(ws)), 0, value=bias),
                 lambda m: m.int32(codes.FUSED_RELU)], scale=ys, zp=yz)
    x = rng.integers(-128, 128, (4, 10)).astype(np.int8)
    got = interpreter.execute(m, [x])[0]
    mult = Fraction(float(np.float32(xs))) * Fraction(float(np.float32(ws))) / Fraction(float(np.float32(ys)))
    for i in range(4):
        for j in range(6):
            acc = sum((int(x[i, k]) - xz) * (int(w[j, k]) - wz) for k in range(10)) + int(bias[j])
            real = acc * mult
            q = int(abs(real) + Fraction(1, 2)) * (1 if real >= 0 else -1) + yz
            assert got[i, j] == min(max(q, yz), 127), (i, j)   # RELU: not below zero point


def test_average_pool_excludes_padding_and_fuse():
    ones = lambda m: m.int32(1)
    m = _single(codes.AVERAGE_POOL_2D, [(codes.TENSOR_FLOAT32, (1, 3, 3, 1), 0, 0)],
                codes.TENSOR_FLOAT32, (1, 3, 3, 1),
                [ones, ones, ones, ones, ones, ones, lambda m: m.int32(3), lambda m: m.int32(3),
                 lambda m: m.int32(codes.FUSED_RELU1)])
    x = np.full((1, 3, 3, 1), 2.0, np.float32)
    x[0, 0, 0, 0] = -7.0
    got = interpreter.execute(m, [x])[0][0, :, :, 0]
    # corner window: (-7 + 2 + 2 + 2) / 4 = -0.25 (4 inside elements), clamped to [-1, 1]
    assert got[0, 0] == np.float32(-0.25) and got[2, 2] == 1.0 and got[1, 1] == 1.0


def test_conv_nhwc_explicit_padding_against_loops():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 5, 4, 2)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)      # [out, fh, fw, in]
    b = rng.standard_normal(3).astype(np.float32)
    pads = (1, 0, 2, 1)                                            # left, right, top, bottom
    extra = [lambda m: m.add_operand(codes.TENSOR_FLOAT32, w.shape, value=w),
             lambda m: m.add_operand(codes.TENSOR_FLOAT32, b.shape, value=b)]
    extra += [(lambda v: lambda m: m.int32(v))(v) for v in pads + (2, 1, codes.FUSED_NONE)]
    # out H = (5 + 2 + 1 - 2) // 1 + 1 = 7; out W = (4 + 1 + 0 - 3) // 2 + 1 = 2
    m = _single(codes.CONV_2D, [(codes.TENSOR_FLOAT32, x.shape, 0, 0)], codes.TENSOR_FLOAT32,
                (1, 7, 2, 3), extra)
    got = interpreter.execute(m, [x])[0]
    xp = np.pad(x, ((0, 0), (2, 1), (1, 0), (0, 0)))
    for i in range(7):
        for j in range(2):
            for o in range(3):
                want = (xp[0, i:i + 2, 2 * j:2 * j + 3, :] * w[o]).sum() + b[o]
                assert abs(got[0, i, j, o] - want) < 1e-4


def test_shape_mismatch_is_invalid_graph():
    m = _single(codes.RELU, [(codes.TENSOR_FLOAT32, (2, 3), 0, 0)], codes.TENSOR_FLOAT32, (3, 2))
    with pytest.raises(InvalidGraph, match="declares"):
        interpreter.execute(m, [np.ones((2, 3), np.float32)])


# ------------------------------------------------------------------------------ runtime


class FakeNnapi:
    """Records the C calls; `compute` rebuilds the model from them and runs the interpreter."""

    def __init__(self, fail_on: str = ""):
        self.calls = []
        self.fail_on = fail_on
        self.operands = []
        self.values = {}
        self.operations = []
        self.io = None
        self.bound = {"in": {}, "out": {}}

    def _rec(self, name):
        self.calls.append(name)
        return 4 if name == self.fail_on else 0

    def ANeuralNetworksModel_create(self, ref): return self._rec("Model_create")
    def ANeuralNetworksModel_free(self, h): self.calls.append("Model_free")
    def ANeuralNetworksModel_finish(self, h): return self._rec("Model_finish")

    def ANeuralNetworksModel_addOperand(self, h, ref):
        t = ref._obj
        dims = tuple(t.dimensions[i] for i in range(t.dimensionCount))
        self.operands.append((t.type, dims, t.scale, t.zeroPoint))
        return self._rec("Model_addOperand")

    def ANeuralNetworksModel_setOperandValue(self, h, index, ptr, size):
        self.values[index.value] = ctypes.string_at(ptr.value, size.value)
        return self._rec("Model_setOperandValue")

    def ANeuralNetworksModel_addOperation(self, h, code, n_in, ins, n_out, outs):
        self.operations.append((code.value, list(ins)[:n_in.value], list(outs)[:n_out.value]))
        return self._rec("Model_addOperation")

    def ANeuralNetworksModel_identifyInputsAndOutputs(self, h, n_in, ins, n_out, outs):
        self.io = (list(ins)[:n_in.value], list(outs)[:n_out.value])
        return self._rec("Model_identifyInputsAndOutputs")

    def ANeuralNetworksCompilation_create(self, h, ref): return self._rec("Compilation_create")
    def ANeuralNetworksCompilation_setPreference(self, c, p): return self._rec("Compilation_setPreference")
    def ANeuralNetworksCompilation_finish(self, c): return self._rec("Compilation_finish")
    def ANeuralNetworksCompilation_free(self, c): self.calls.append("Compilation_free")
    def ANeuralNetworksExecution_create(self, c, ref): return self._rec("Execution_create")
    def ANeuralNetworksExecution_free(self, e): self.calls.append("Execution_free")

    def ANeuralNetworksExecution_setInput(self, e, i, t, ptr, size):
        self.bound["in"][i.value] = (ptr.value, size.value)
        return self._rec("Execution_setInput")

    def ANeuralNetworksExecution_setOutput(self, e, i, t, ptr, size):
        self.bound["out"][i.value] = (ptr.value, size.value)
        return self._rec("Execution_setOutput")

    def _run(self):
        m = Model()
        for k, (t, dims, s, z) in enumerate(self.operands):
            value = None
            if k in self.values:
                value = np.frombuffer(self.values[k], codes.NUMPY_DTYPE[t]).reshape(dims)
            m.operands.append(Operand(t, dims, float(s), int(z), value))
        from onnxedge.edge.nnapi.model import Operation
        m.operations = [Operation(c, tuple(i), tuple(o)) for c, i, o in self.operations]
        m.inputs = [IO(i, "in%d" % k) for k, i in enumerate(self.io[0])]
        m.outputs = [IO(i, "out%d" % k) for k, i in enumerate(self.io[1])]
        feeds = []
        for k, io in enumerate(m.inputs):
            op = m.operands[io.operand]
            ptr, size = self.bound["in"][k]
            feeds.append(np.frombuffer(ctypes.string_at(ptr, size), codes.NUMPY_DTYPE[op.type]).reshape(op.dims))
        for k, y in enumerate(interpreter.execute(m, feeds)):
            ptr, size = self.bound["out"][k]
            assert size == y.nbytes
            ctypes.memmove(ptr, np.ascontiguousarray(y).ctypes.data, size)

    def ANeuralNetworksExecution_compute(self, e):
        self._run()
        return self._rec("Execution_compute")

    def ANeuralNetworksExecution_startCompute(self, e, ref):
        self._run()
        return self._rec("Execution_startCompute")

    def ANeuralNetworksEvent_wait(self, ev): return self._rec("Event_wait")
    def ANeuralNetworksEvent_free(self, ev): self.calls.append("Event_free")


def _conv_model() -> tuple:
    rng = np.random.default_rng(9)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    m = _single(codes.CONV_2D, [(codes.TENSOR_FLOAT32, (1, 6, 6, 2), 0, 0)], codes.TENSOR_FLOAT32,
                (1, 6, 6, 4),
                [lambda m: m.add_operand(codes.TENSOR_FLOAT32, w.shape, value=w),
                 lambda m: m.add_operand(codes.TENSOR_FLOAT32, (4,), value=np.ones(4, np.float32))]
                + [(lambda v: lambda m: m.int32(v))(v) for v in (1, 1, 1, 1, 1, 1, codes.FUSED_RELU6)])
    return m, rng.standard_normal((1, 6, 6, 2)).astype(np.float32)


@pytest.mark.parametrize("level,compute", [(4, "Execution_compute"), (2, "Execution_startCompute")])
def test_runtime_marshalling(level, compute):
    m, x = _conv_model()
    lib = FakeNnapi()
    compiled = runtime.NnapiModel(m, library=lib, feature_level=level)
    assert lib.calls.count("Model_addOperand") == len(m.operands)
    assert lib.calls.count("Model_setOperandValue") == sum(o.value is not None for o in m.operands)
    assert lib.operations == [(codes.CONV_2D, list(m.operations[0].inputs), list(m.operations[0].outputs))]
    assert lib.operands[2][:2] == (codes.TENSOR_FLOAT32, (4,))
    got = compiled([x])[0]
    np.testing.assert_array_equal(got, interpreter.execute(m, [x])[0])
    assert compute in lib.calls and lib.calls[-1] == "Execution_free"


def test_runtime_errors_name_the_call():
    m, _ = _conv_model()
    with pytest.raises(EPFail, match=r"addOperation\(0, CONV_2D\) returned BAD_DATA"):
        runtime.NnapiModel(m, library=FakeNnapi(fail_on="Model_addOperation"))


def test_runtime_library_absent_here():
    assert not runtime.available()
    with pytest.raises(EPFail, match="only on Android"):
        runtime.load_library()
