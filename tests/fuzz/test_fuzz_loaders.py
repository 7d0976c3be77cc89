"""Fuzz both loaders (`.oxe` and `.onnx`) with a bounded, seeded mutation loop.

Valid files of a few small models (one with If/Loop subgraphs, one with initializers of many
dtypes plus a sparse initializer and a local function) are mutated by byte flips, interesting
values, insertions, deletions, truncations and splices, and each mutant is loaded through
`model_io.load`. Every outcome must be a model or an `InvalidGraph` (InvalidProtobuf is one):
never another exception, a hang (SIGALRM after HANG_SECONDS) or an allocation (tracemalloc peak)
beyond ALLOC_FACTOR x the file size + the bytes of the initializers it declares and loads +
1 MiB. Every SESSION_EVERY-th model that loads must also make an InferenceSession or raise an
OnnxEdgeError. Environment: ONNXEDGE_FUZZ_MUTANTS (per seed file, default 1800),
ONNXEDGE_FUZZ_SEED (default 0), ONNXEDGE_FUZZ_ALLOC_FACTOR (default 16).
"""
from __future__ import annotations

import os
import random
import signal
import time
import tracemalloc
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import dtypes, ir, model_io, onnx_writer
from onnxedge import format as oxe
from onnxedge.errors import InvalidGraph, OnnxEdgeError

MUTANTS_PER_FILE = int(os.environ.get("ONNXEDGE_FUZZ_MUTANTS", "1800"))
SEED = int(os.environ.get("ONNXEDGE_FUZZ_SEED", "0"))
ALLOC_FACTOR = float(os.environ.get("ONNXEDGE_FUZZ_ALLOC_FACTOR", "16"))
HANG_SECONDS = 5.0
SESSION_EVERY = 7
INTERESTING = [0, 1, 0x7F, 0x80, 0xFF]
INTERESTING32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x40, 0xFFFF]


# --------------------------------------------------------------------------------- seed models

def _mlp() -> bytes:
    rng = np.random.RandomState(0)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["a"]),
         helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Gemm", ["r", "w2", "b2"], ["y"],
                                                                  transB=1, alpha=0.5)],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(rng.randn(8, 6).astype(np.float32), "w1"),
         numpy_helper.from_array(rng.randn(6).astype(np.float32), "b1"),
         numpy_helper.from_array(rng.randn(3, 6).astype(np.float32), "w2"),
         numpy_helper.from_array(rng.randn(3).astype(np.float32), "b2")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _control_flow() -> bytes:
    then_g = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["out"])], "then", [],
                               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
                               [numpy_helper.from_array(np.ones(2, np.float32), "one")])
    else_g = helper.make_graph([helper.make_node("Neg", ["acc"], ["out"])], "else", [],
                               [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])])
    body = helper.make_graph(
        [helper.make_node("Greater", ["acc_sum", "zero"], ["c"]),
         helper.make_node("ReduceSum", ["acc"], ["acc_sum"], keepdims=0),
         helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    body.node.insert(0, body.node.pop(1))     # ReduceSum before Greater (topological order)
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)], "main",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _many_dtypes() -> bytes:
    """Initializers of many dtypes (each Identity'd to an output), a sparse one, a function."""
    arrays = {"f16": np.arange(6, dtype=np.float16).reshape(2, 3), "i8": np.array([-1, 2], np.int8),
              "i64": np.array([[1 << 40]], np.int64), "b": np.array([True, False]),
              "f64": np.array([0.5], np.float64), "u8": np.arange(5, dtype=np.uint8),
              "s": np.array(["ab", "\u00fc"], dtype=object), "c64": np.array([1 + 2j], np.complex64)}
    if dtypes.has_numpy(22):
        arrays["i4"] = np.array([-3, 7, 1], dtype=dtypes.to_numpy(22))
        arrays["bf16"] = np.array([1.5, -2.0], dtype=dtypes.to_numpy(16))
    nodes = [ir.Node("Identity", [k], ["out_" + k]) for k in arrays]
    nodes.append(ir.Node("Double", ["x"], ["y"], {}, "local"))
    inits: Dict[str, Any] = dict(arrays)
    inits["sp"] = ir.SparseTensor(np.array([3.0, 4.0], np.float32), np.array([0, 5], np.int64), [2, 3])
    nodes.append(ir.Node("Identity", ["sp"], ["out_sp"]))
    fn = ir.Function("Double", "local", ["a"], ["b"], [], {},
                     [ir.Node("Add", ["a", "a"], ["b"])], {"": 17})
    g = ir.Graph("dtypes", nodes, [ir.ValueInfo("x", ir.TypeInfo.tensor(1, [2]))],
                 [ir.ValueInfo(n.outputs[0]) for n in nodes], inits)
    model = ir.Model(g, {"": 17, "local": 1}, ir_version=8, functions=[fn])
    return onnx_writer.save_model(model)


def seed_files() -> List[Tuple[str, bytes]]:
    """(label, bytes) of every valid file the fuzzer starts from: each model as .onnx and .oxe."""
    out = []
    for name, make in (("mlp", _mlp), ("control_flow", _control_flow), ("dtypes", _many_dtypes)):
        data = make()
        out.append((name + ".onnx", data))
        out.append((name + ".oxe", oxe.to_bytes(model_io.load(data))))
    return out


# ------------------------------------------------------------------------------------ mutation

def mutate(data: bytes, rng: random.Random, others: List[bytes]) -> Tuple[bytes, str]:
    """One seeded random mutation of `data` and a short description of it."""
    buf = bytearray(data)
    n = len(buf)
    pos = rng.randrange(n)
    kind = rng.randrange(8)
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            p = rng.randrange(n)
            buf[p] ^= 1 << rng.randrange(8)
        return bytes(buf), "bit flips"
    if kind == 1:
        buf[pos] = rng.choice(INTERESTING)
        return bytes(buf), "byte %d = interesting" % pos
    if kind == 2:
        p = pos - pos % 4
        if p + 4 <= n:
            buf[p:p + 4] = rng.choice(INTERESTING32).to_bytes(4, "little")
        return bytes(buf), "word at %d = interesting" % p
    if kind == 3:
        ins = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        return bytes(buf[:pos] + ins + buf[pos:]), "insert %d bytes at %d" % (len(ins), pos)
    if kind == 4:
        k = rng.randint(1, 32)
        return bytes(buf[:pos] + buf[pos + k:]), "delete %d bytes at %d" % (k, pos)
    if kind == 5:
        return bytes(buf[:pos]), "truncate to %d" % pos
    if kind == 6:
        other = rng.choice(others)
        a = rng.randrange(len(other))
        chunk = other[a:a + rng.randint(1, 64)]
        buf[pos:pos + len(chunk)] = chunk
        return bytes(buf), "splice %d bytes at %d" % (len(chunk), pos)
    for _ in range(rng.randint(2, 20)):
        buf[rng.randrange(n)] = rng.randrange(256)
    return bytes(buf), "random bytes"


def _declared_bytes(model: ir.Model) -> int:
    total = 0

    def walk(g: ir.Graph) -> None:
        nonlocal total
        for v in g.initializers.values():
            if isinstance(v, np.ndarray):
                total += v.nbytes + (64 * v.size if v.dtype == object else 0)
        for n in g.nodes:
            for val in n.attributes.values():
                for x in (val if isinstance(val, list) else [val]):
                    if isinstance(x, np.ndarray):
                        total += x.nbytes
                    elif isinstance(x, ir.Graph):
                        walk(x)
    walk(model.graph)
    return total


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def _guarded(fn: Callable[[], Any]) -> Any:
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# ----------------------------------------------------------------------------------- the test

def test_seed_files_load_and_run():
    """The seeds themselves are valid: every one loads and makes a session."""
    for label, data in seed_files():
        model = model_io.load(data)
        assert model.graph.nodes, label
        onnxedge.InferenceSession(data)


def check_mutant(mutant: bytes, where: str, stats: Dict[str, int],
                 load: Callable[[bytes], ir.Model] = model_io.load) -> List[str]:
    """Load one mutant (tracemalloc running); the failures it shows, [] when it behaved."""
    failures = []
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    model = None
    try:
        model = _guarded(lambda: load(mutant))
        stats["loaded"] += 1
    except InvalidGraph:
        stats["invalid"] += 1
    except _Hang:
        failures.append("%s: load ran longer than %gs" % (where, HANG_SECONDS))
    except Exception as e:  # noqa: B902 (any other type is the failure we look for)
        failures.append("%s: %s: %s" % (where, type(e).__name__, str(e)[:200]))
    peak = tracemalloc.get_traced_memory()[1] - base
    limit = ALLOC_FACTOR * len(mutant) + (1 << 20) + (
        _declared_bytes(model) if model is not None else 0)
    if peak > limit:
        failures.append("%s: allocated %d bytes, limit %d" % (where, peak, limit))
    if model is not None and stats["loaded"] % SESSION_EVERY == 0:
        stats["sessions"] += 1
        try:
            _guarded(lambda: onnxedge.InferenceSession(mutant))
        except OnnxEdgeError:
            stats["session_errors"] += 1
        except _Hang:
            failures.append("%s: session ran longer than %gs" % (where, HANG_SECONDS))
        except Exception as e:  # noqa: B902
            failures.append("%s: InferenceSession: %s: %s" % (where, type(e).__name__,
                                                              str(e)[:200]))
    return failures


needs_reset_peak = pytest.mark.skipif(
    not hasattr(tracemalloc, "reset_peak"),
    reason="tracemalloc.reset_peak needs Python >= 3.9 (the allocation check)")


@pytest.fixture
def fuzz_env():
    """SIGALRM and tracemalloc armed for check_mutant; restored afterwards."""
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    tracemalloc.start()
    yield
    tracemalloc.stop()
    signal.signal(signal.SIGALRM, old_handler)


@needs_reset_peak
def test_check_mutant_reports_wrong_errors_hangs_and_big_allocations(fuzz_env):
    """The checks themselves can fail: a stray exception, a hang and a large allocation."""
    stats = {"loaded": 0, "invalid": 0, "sessions": 0, "session_errors": 0}

    def index_error(data: bytes) -> ir.Model:
        raise IndexError("boom")

    def allocates(data: bytes) -> ir.Model:
        np.ones(len(data) * 64, dtype=np.uint8)
        raise InvalidGraph("after a big allocation")

    def hangs(data: bytes) -> ir.Model:
        while True:
            pass
    assert "IndexError: boom" in check_mutant(b"x" * 100, "m", stats, index_error)[0]
    assert "allocated" in check_mutant(b"x" * 100000, "m", stats, allocates)[0]
    global HANG_SECONDS
    saved, HANG_SECONDS = HANG_SECONDS, 0.2
    try:
        assert "longer than" in check_mutant(b"x", "m", stats, hangs)[0]
    finally:
        HANG_SECONDS = saved
    assert check_mutant(seed_files()[1][1], "m", stats) == []


@needs_reset_peak
def test_mutated_files_load_or_raise_invalid_graph(fuzz_env):
    """>= 10,000 mutants: a model or InvalidGraph, no hang, bounded allocation, safe sessions."""
    seeds = seed_files()
    others = [d for _, d in seeds]
    rng = random.Random(SEED)
    failures: List[str] = []
    stats = {"loaded": 0, "invalid": 0, "sessions": 0, "session_errors": 0}
    t0 = time.perf_counter()
    for label, data in seeds:
        for i in range(MUTANTS_PER_FILE):
            mutant, how = mutate(data, rng, others)
            failures.extend(check_mutant(mutant, "%s mutant %d (%s)" % (label, i, how), stats))
    total = len(seeds) * MUTANTS_PER_FILE
    print("\nfuzz: %d mutants in %.1fs: %s" % (total, time.perf_counter() - t0, stats))
    assert not failures, "%d failures, first ones:\n%s" % (len(failures), "\n".join(failures[:15]))
    if MUTANTS_PER_FILE >= 1700:
        assert total >= 10000
    assert stats["loaded"] > 0 and stats["invalid"] > 0


@pytest.mark.parametrize("indices,dims,message", [
    ([9], [2, 2], "do not address"),                 # out of range: to_dense would IndexError
    ([0], [1 << 20, 1 << 20], "dense form"),         # 4 TiB dense: refused before allocating
])
def test_onnx_sparse_initializer_checked_before_densifying(indices, dims, message):
    values = numpy_helper.from_array(np.array([1.0], np.float32), "sp")
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(
        np.array(indices, np.int64), ""), dims)
    graph = helper.make_graph([helper.make_node("Identity", ["sp"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              sparse_initializer=[sparse])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(InvalidGraph, match=message):
        model_io.load(m.SerializeToString())
