"""The C engine's results do not depend on its thread count (#16): every kernel splits its work
into tasks fixed by the shapes (blocks of C, panels, rows, planes; the K of a GEMM is never split),
never by the pool's size, so 1 and 2 threads give the same bits. Also: SessionOptions.
intra_op_num_threads reaches the engine's (process-wide) pool, and the one-row SGEMM path (batch
1) gives the bits of the packed path that larger batches take.

The pool is process-wide: every test restores the thread count it found."""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Dict, Iterator

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import REPO, ensure_built

sys.path.insert(0, REPO)

import onnxedge  # noqa: E402
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
from onnxedge.edge.neon import library as L  # noqa: E402

from benchmarks import models  # noqa: E402

try:
    ensure_built()
    L.load()
except Exception as e:  # noqa: BLE001
    pytest.skip("kernel library unavailable: %s" % e, allow_module_level=True)


@contextlib.contextmanager
def pool(lib: L.KernelLibrary, n: int) -> Iterator[None]:
    """`lib`'s pool sized `n` inside the block, restored after."""
    before = lib.num_threads()
    try:
        assert lib.set_num_threads(n) == n
        yield
    finally:
        lib.set_num_threads(before)


def same_bits_1_and_2(lib: L.KernelLibrary, fn) -> np.ndarray:
    """fn() with 1 and with 2 threads: asserts the two results are bitwise equal."""
    with pool(lib, 1):
        one = fn()
    with pool(lib, 2):
        two = fn()
    assert one.dtype == two.dtype and one.shape == two.shape
    np.testing.assert_array_equal(one.view(np.uint32) if one.dtype == np.float32 else one,
                                  two.view(np.uint32) if two.dtype == np.float32 else two)
    return one


@pytest.fixture(params=["", "generic"], ids=["simd", "generic"])
def lib(request) -> L.KernelLibrary:
    return L.load(request.param)


RNG = np.random.default_rng(2026)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- kernels

@pytest.mark.parametrize("M,N,K", [(1, 1000, 700), (1, 37, 1), (1, 300, 257), (3, 530, 513),
                                   (97, 301, 300), (200, 64, 1030), (64, 2, 9)])
def test_sgemm_bits_do_not_depend_on_threads(lib, M, N, K):
    a, b = rand(M, K), rand(K, N)
    bias = rand(N)
    for kw in ({}, dict(bias=bias, bias_kind=L.BIAS_COL, act="Relu"),
               dict(trans_a=True, trans_b=True)):
        x, y = (np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)) if kw.get("trans_a") else (a, b)
        same_bits_1_and_2(lib, lambda: lib.sgemm(x, y, **kw))


def test_one_row_sgemm_gives_the_bits_of_the_packed_path(lib):
    """Batch 1 (M == 1: A read in place, four B panels at a time) and each row of a batch (packed
    A) sum the same products in the same order; also with A transposed, packed, and K > KC."""
    for N, K in [(10, 64), (128, 784), (300, 1030), (33, 1), (1, 5)]:
        a, b, bias = rand(9, K), rand(K, N), rand(N)
        batch = lib.sgemm(a, b, bias=bias, bias_kind=L.BIAS_COL, act="Relu")
        for r in (0, 4, 8):
            row = a[r:r + 1]
            for got in (lib.sgemm(row, b, bias=bias, bias_kind=L.BIAS_COL, act="Relu"),
                        lib.sgemm(np.ascontiguousarray(row.T), b, trans_a=True, bias=bias,
                                  bias_kind=L.BIAS_COL, act="Relu"),
                        lib.sgemm(row, b, packed_a=lib.pack_a(row), bias=bias,
                                  bias_kind=L.BIAS_COL, act="Relu"),
                        lib.sgemm(row, b, packed_b=lib.pack_b(b), bias=bias,
                                  bias_kind=L.BIAS_COL, act="Relu")):
                np.testing.assert_array_equal(got.view(np.uint32), batch[r:r + 1].view(np.uint32))
        want = a.astype(np.float64) @ b + bias
        np.testing.assert_allclose(batch, np.maximum(want, 0), rtol=1e-4,
                                   atol=1e-5 * np.sqrt(K) * float(np.abs(want).max() + 1))


@pytest.mark.parametrize("x_shape,w_shape,group,strides,pads", [
    ((1, 3, 40, 36), (16, 3, 3, 3), 1, (1, 1), (1, 1, 1, 1)),       # direct 3x3 or im2col
    ((2, 16, 30, 30), (32, 16, 3, 3), 1, (2, 2), (1, 1, 1, 1)),     # strided im2col
    ((1, 64, 56, 56), (64, 64, 3, 3), 1, (1, 1), (1, 1, 1, 1)),     # chunked im2col panels
    ((1, 24, 20, 20), (24, 1, 3, 3), 24, (1, 1), (1, 1, 1, 1)),     # depthwise
    ((1, 32, 14, 14), (48, 32, 1, 1), 1, (1, 1), (0, 0, 0, 0)),     # pointwise
    ((1, 12, 17, 13), (12, 3, 3, 3), 4, (1, 2), (1, 0, 1, 2)),      # grouped, odd sizes
])
def test_conv_bits_do_not_depend_on_threads(lib, x_shape, w_shape, group, strides, pads):
    x, w, bias = rand(*x_shape), rand(*w_shape), rand(w_shape[0])
    kh, kw = w_shape[2:]
    oh = (x_shape[2] + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (x_shape[3] + pads[1] + pads[3] - kw) // strides[1] + 1
    same_bits_1_and_2(lib, lambda: lib.conv2d(x, w, bias, group, strides, (1, 1), pads, (oh, ow),
                                              act="Relu"))


def test_softmax_binary_pools_act_bits_do_not_depend_on_threads(lib):
    for shape in [(1, 100000), (513, 1001), (7, 1), (3, 4, 2048)]:
        x = rand(*shape) * 4
        same_bits_1_and_2(lib, lambda: lib.softmax(x))
        same_bits_1_and_2(lib, lambda: lib.softmax(x, log=True))
    for op in ("Add", "Sub", "Mul", "Div"):
        for sa, sb in [((1, 300001), (1, 300001)), ((64, 513), (513,)), ((8, 1, 5000), (8, 7, 1)),
                       ((1,), (1000, 77))]:
            a, b = rand(*sa), rand(*sb) + 3
            same_bits_1_and_2(lib, lambda: lib.binary(op, a, b))
    x = rand(2, 40, 33, 31)
    same_bits_1_and_2(lib, lambda: lib.pool2d(x, "max", (3, 3), (2, 2), (1, 1), (1, 1, 1, 1),
                                              (17, 16)))
    same_bits_1_and_2(lib, lambda: lib.pool2d(x, "avg", (2, 3), (1, 2), (1, 1), (0, 1, 1, 0),
                                              (33, 16)))
    same_bits_1_and_2(lib, lambda: lib.global_pool(x, "avg"))
    v = rand(300001)
    same_bits_1_and_2(lib, lambda: lib.act(v, "Sigmoid"))


# ----------------------------------------------------------------------------- models

def _resnet_like() -> bytes:
    """A small residual CNN: stem conv (stride 2) + Relu, MaxPool, a basic block with a residual
    Add (the engine's FusedConv with Z), a strided block with a 1x1 projection, depthwise conv,
    GlobalAveragePool, Flatten, Gemm, Softmax. Input 'x' [batch, 3, 48, 40]."""
    rng = np.random.default_rng(5)
    inits = []

    def w(name, shape):
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * np.sqrt(2.0 / fan)).astype(np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", w("w0", (16, 3, 3, 3)), w("b0", (16,))], ["c0"], pads=[1, 1, 1, 1],
          strides=[2, 2]),
        n("Relu", ["c0"], ["r0"]),
        n("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Conv", ["p0", w("w1", (16, 16, 3, 3)), w("b1", (16,))], ["c1"], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"]),
        n("Conv", ["r1", w("w2", (16, 16, 3, 3)), w("b2", (16,))], ["c2"], pads=[1, 1, 1, 1]),
        n("Add", ["c2", "p0"], ["s2"]),
        n("Relu", ["s2"], ["r2"]),
        n("Conv", ["r2", w("w3", (32, 16, 3, 3)), w("b3", (32,))], ["c3"], pads=[1, 1, 1, 1],
          strides=[2, 2]),
        n("Relu", ["c3"], ["r3"]),
        n("Conv", ["r2", w("w4", (32, 16, 1, 1)), w("b4", (32,))], ["c4"], strides=[2, 2]),
        n("Add", ["r3", "c4"], ["s4"]),
        n("Relu", ["s4"], ["r4"]),
        n("Conv", ["r4", w("w5", (32, 1, 3, 3)), w("b5", (32,))], ["c5"], group=32,
          pads=[1, 1, 1, 1]),
        n("Relu", ["c5"], ["r5"]),
        n("GlobalAveragePool", ["r5"], ["g"]),
        n("Flatten", ["g"], ["f"]),
        n("Gemm", ["f", w("wf", (10, 32)), w("bf", (10,))], ["l"], transB=1),
        n("Softmax", ["l"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "resnet_like",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 48, 40])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _small_bert(monkeypatch) -> bytes:
    for key, value in dict(BERT_VOCAB=500, BERT_HIDDEN=64, BERT_LAYERS=2, BERT_HEADS=2,
                           BERT_FFN=128, BERT_SEQ=32).items():
        monkeypatch.setattr(models, key, value)
    return models.build("bert_encoder").SerializeToString()


def _runs(model: bytes, feeds: Dict[str, np.ndarray], threads: int):
    """The first run (node by node) and a program run of a session with `threads` intra-op
    threads (the engine in front of the CPU provider, as every session has it); checks the
    engine's pool took the count."""
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = onnxedge.InferenceSession(model, opts)
    assert L.load().num_threads() == threads   # SessionOptions reached the C pool
    engine = [s for s in sess.plan.steps if s.provider == ENGINE]
    assert engine, "the C engine runs none of the model"
    first = sess.run(None, feeds)
    later = sess.run(None, feeds)
    assert any(p is not None for s in engine if s.programs is not None
               for p in s.programs.programs.values()), "no program was built"
    return first + later


@pytest.mark.parametrize("name", ["mlp", "mlp_batch", "resnet_like", "bert_small"])
def test_models_bits_do_not_depend_on_threads(name, monkeypatch):
    if name.startswith("mlp"):
        model = models.build("mlp").SerializeToString()
        feeds = models.make_inputs("mlp", batch=1 if name == "mlp" else 67)
    elif name == "resnet_like":
        model = _resnet_like()
        feeds = {"x": rand(2, 3, 48, 40)}
    else:
        model = _small_bert(monkeypatch)
        feeds = models.make_inputs("bert_encoder", batch=2)
    lib = L.load()
    before = lib.num_threads()
    try:
        one = _runs(model, feeds, 1)
        two = _runs(model, feeds, 2)
    finally:
        lib.set_num_threads(before)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    k = len(one) // 2
    for i in range(k):   # the program's bits are the first (node-by-node) run's
        np.testing.assert_array_equal(one[k + i], one[i])
        assert np.isfinite(one[i]).all()
