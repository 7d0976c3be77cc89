"""The .nnapi format: exact round trips of translated models, the documented header layout,
and damaged bytes (flips, truncations, lies in counts and offsets) that must raise InvalidGraph
or load a valid model: never another exception, a hang or a huge allocation."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxedge import InferenceSession
from onnxedge.edge.nnapi import codes, serialize
from onnxedge.edge.nnapi.model import LAYOUT_NHWC, IO, Model
from onnxedge.errors import InvalidGraph


def _small_model() -> Model:
    m = Model()
    x = m.add_operand(codes.TENSOR_FLOAT32, (1, 4, 4, 2))
    w = m.add_operand(codes.TENSOR_FLOAT32, (3, 1, 1, 2), value=np.arange(6, dtype=np.float32).reshape(3, 1, 1, 2))
    b = m.add_operand(codes.TENSOR_FLOAT32, (3,), value=np.zeros(3, np.float32))
    y = m.add_operand(codes.TENSOR_QUANT8_ASYMM_SIGNED, (1, 4, 4, 3), scale=0.1, zero_point=-3)
    conv = m.add_operand(codes.TENSOR_FLOAT32, (1, 4, 4, 3))
    ins = [x, w, b] + [m.int32(v) for v in (0, 0, 0, 0, 1, 1, codes.FUSED_RELU)]
    m.add_operation(codes.CONV_2D, ins, [conv])
    m.add_operation(codes.QUANTIZE, [conv], [y])
    m.inputs = [IO(x, "x", LAYOUT_NHWC)]
    m.outputs = [IO(y, "ÿ-out", LAYOUT_NHWC)]
    m.validate()
    return m


def _translated() -> bytes:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]),
         helper.make_node("Flatten", ["p"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = InferenceSession(model.SerializeToString(),
                            providers=["NnapiExecutionProvider", "CPUExecutionProvider"],
                            provider_options=[{"reference": True}, {}])
    prov = [p for p in sess._providers if p.name == "NnapiExecutionProvider"][0]
    return list(prov.artifacts.values())[0].files["model.nnapi"]


def test_round_trip_exact():
    m = _small_model()
    data = serialize.dumps(m)
    back = serialize.loads(data)
    assert back == m and serialize.dumps(back) == data
    assert back.outputs[0].name == "ÿ-out" and back.operands[3].zero_point == -3
    assert back.operands[3].scale == np.float32(0.1)


def test_header_layout():
    """magic, u16 version, u16 flags, u32 total length, then u32 operand count
    (docs/providers/NNAPI.md)."""
    data = serialize.dumps(_small_model())
    assert data[:4] == b"ONNA"
    version, flags, total, n_operands = struct.unpack_from("<HHII", data, 4)
    assert (version, flags, total, n_operands) == (1, 0, len(data), len(_small_model().operands))
    # the first operand: TENSOR_FLOAT32 rank 4 dims 1,4,4,2, not constant
    assert struct.unpack_from("<iI4I", data, 16) == (codes.TENSOR_FLOAT32, 4, 1, 4, 4, 2)


def test_translated_round_trip():
    data = _translated()
    assert serialize.dumps(serialize.loads(data)) == data


@pytest.mark.parametrize("mutate,message", [
    (lambda d: b"ONNB" + d[4:], "magic"),
    (lambda d: d[:4] + struct.pack("<H", 9) + d[6:], "version 9"),
    (lambda d: d[:-1], "header says"),
    (lambda d: d[:12] + struct.pack("<I", 0x7FFFFFFF) + d[16:], "cannot fit"),
    (lambda d: d + b"\0", "header says"),
])
def test_bad_bytes_named(mutate, message):
    with pytest.raises(InvalidGraph, match=message):
        serialize.loads(mutate(serialize.dumps(_small_model())))


def test_fuzz_mutants_raise_invalid_graph_or_load():
    """400 mutants: random byte flips, 32-bit overwrites with extreme values, truncations."""
    rng = np.random.default_rng(1234)
    seeds = [serialize.dumps(_small_model()), _translated()]
    loaded = refused = 0
    for k in range(400):
        data = bytearray(seeds[k % 2])
        kind = k % 4
        if kind == 0:
            for _ in range(rng.integers(1, 4)):
                data[rng.integers(len(data))] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            at = int(rng.integers(0, len(data) - 4))
            data[at:at + 4] = struct.pack("<I", int(rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 255])))
        elif kind == 2:
            del data[int(rng.integers(0, len(data))):]
        else:
            at = int(rng.integers(16, len(data)))
            data[at:at] = bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
        # the header's length field would refuse most edits: keep it consistent half the time
        if k % 8 < 4 and len(data) >= 12:
            data[8:12] = struct.pack("<I", len(data))
        try:
            model = serialize.loads(bytes(data))
        except InvalidGraph:
            refused += 1
        else:
            model.validate()
            loaded += 1
    assert refused > 100 and loaded + refused == 400
