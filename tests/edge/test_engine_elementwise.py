"""The C engine's elementwise functions (issue #17, edge/kernels/elementwise.c, elementwise_impl.h): accuracy
of the vector exp / log / erf / tanh / sigmoid family against float64 over the whole float range,
the special values, one implementation (a value gets the same bits at any position, as an epilogue
or on its own, whatever its vector neighbours), 1 vs 2 threads bitwise, every x86-64 ISA variant
(SSE2, AVX2+FMA, AVX-512F: OXK_ISA forced in a subprocess), Pow / Max / Min, programs
bitwise-equal to the node-by-node first run, the new epilogues of Conv / Gemm against onnxruntime,
and the ONNX node-suite cases of these ops through the default (engine-backed) session."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from typing import Dict

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import NEON, REPO, cpu_flags as _cpu_flags, ensure_built, node_suite_twice

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon import library  # noqa: E402

special = pytest.importorskip("scipy.special")
EPS = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).tiny)
MAX = float(np.finfo(np.float32).max)
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
NEON_EP = engine_name()   # the C engine's provider on this machine


@pytest.fixture(scope="module", params=["", "generic"])
def lib(request):
    return library.load(request.param)


def _silu(x):
    return x * np.exp(-np.logaddexp(0, -x))


def _gelu_tanh(x):
    return x * np.exp(-np.logaddexp(0, -2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


# name -> (float64 reference, parameters, input range: (lo, hi) or "positive")
FUNCS = {
    "Exp": (np.exp, (), (-110.0, 90.0)),
    "Log": (np.log, (), "positive"),
    "Sqrt": (np.sqrt, (), "positive"),
    "Abs": (np.abs, (), (-3e38, 3e38)),
    "Neg": (np.negative, (), (-3e38, 3e38)),
    "Reciprocal": (np.reciprocal, (), (-1e30, 1e30)),
    "Erf": (special.erf, (), (-8.0, 8.0)),
    "Sigmoid": (lambda x: np.exp(-np.logaddexp(0, -x)), (), (-110.0, 110.0)),
    "Tanh": (np.tanh, (), (-20.0, 20.0)),
    "HardSigmoid": (lambda x: np.clip(0.3 * x + 0.4, 0, 1), (0.3, 0.4), (-10.0, 10.0)),
    "HardSwish": (lambda x: x * np.clip(x / 6 + 0.5, 0, 1), (), (-10.0, 10.0)),
    "Elu": (lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), (0.7,), (-30.0, 10.0)),
    "Softplus": (lambda x: np.logaddexp(0, x), (), (-110.0, 110.0)),
    "Gelu": (lambda x: 0.5 * x * special.erfc(-x / np.sqrt(2)), (), (-14.0, 14.0)),
    "GeluTanh": (_gelu_tanh, (), (-12.0, 12.0)),
    "Silu": (_silu, (), (-110.0, 110.0)),
}


def _inputs(rng_spec, n=60000, seed=0):
    rng = np.random.default_rng(seed)
    if rng_spec == "positive":
        x = np.exp(rng.uniform(np.log(1e-45), np.log(3e38), n))
    else:
        lo, hi = rng_spec
        x = np.concatenate([rng.uniform(lo, hi, n), np.linspace(lo, hi, n),
                            rng.uniform(-1e-3, 1e-3, n // 10), rng.uniform(-1, 1, n // 10)])
        x = x[(x >= lo) & (x <= hi)]
    return x.astype(np.float32)


def _cond(f, x):
    """|x f'(x) / f(x)|: how much the rounding of x (and of intermediates of its size) moves f."""
    h = 1e-7
    with np.errstate(all="ignore"):
        fx = f(x)
        d = (f(x * (1 + h)) - f(x * (1 - h))) / (2 * h)
        c = np.abs(d / fx)
    return np.where(np.isfinite(c), c, 0.0)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_accuracy_against_float64(lib, name):
    check_accuracy(lib, name)


def check_accuracy(lib, name):
    """Relative error at most 4 ulp times (1 + the function's condition number) wherever the
    result is a normal float; results in the denormal range within (2 + |x|) denormal steps (a
    denormal intermediate such as exp(x) times x, as in SiLU)."""
    f, params, rng_spec = FUNCS[name]
    x = _inputs(rng_spec)
    got = lib.act(x, name, params).astype(np.float64)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        want = f(x64)
    want = np.where(np.abs(want) > MAX, np.sign(want) * np.inf, want)   # overflows in float32
    normal = np.isfinite(want) & (np.abs(want) >= TINY)
    with np.errstate(invalid="ignore"):
        rel = np.abs(got - want)[normal] / np.abs(want[normal])
    tol = 4 * EPS * (1 + _cond(f, x64[normal]))
    bad = rel > tol
    assert not bad.any(), "%s: x=%r got %r want %r (rel %.3g, tol %.3g)" % (
        name, x[normal][bad][0], got[normal][bad][0], want[normal][bad][0], rel[bad][0], tol[bad][0])
    tiny = np.isfinite(want) & ~normal
    tol = (2 + np.abs(x64[tiny])) * 1.4e-45 + 4 * EPS * (1 + _cond(f, x64[tiny])) * np.abs(want[tiny])
    assert np.all(np.abs(got[tiny] - want[tiny]) <= tol)
    inf = ~np.isfinite(want)
    assert np.array_equal(got[inf], want[inf])


SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 3e38, -3e38,
                    88.8, -88.8, 104.0, -104.0], np.float32)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_special_values(lib, name):
    check_special_values(lib, name)


def check_special_values(lib, name):
    """Infinities, NaN, signed zeros, denormals and the largest floats give what float64 math
    gives, rounded to float32 (NaN where it is NaN; -inf * 0 is NaN in Gelu/SiLU, as the
    unfused x * Phi(x) gives)."""
    f, params, _ = FUNCS[name]
    got = lib.act(SPECIAL, name, params)
    with np.errstate(all="ignore"):
        want = f(SPECIAL.astype(np.float64)).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    ok = ~np.isnan(want)
    atol = (2 + np.minimum(np.abs(SPECIAL[ok]), 1e3)) * 1.4e-45
    g, w = got[ok].astype(np.float64), want[ok].astype(np.float64)
    with np.errstate(invalid="ignore"):
        assert np.all((g == w) | (np.abs(g - w) <= 1e-6 * np.abs(w) + atol)), (got, want)
    zero = ok & (want == 0) & (np.abs(SPECIAL) < 1e-30)   # odd functions keep the sign of zero
    if name in ("Abs", "Neg", "Erf", "Tanh", "Sqrt"):
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


ALL_ACTS = sorted(FUNCS) + ["Relu", "Clip", "LeakyRelu"]


def _params(name):
    return FUNCS[name][1] if name in FUNCS else {"Clip": (-0.5, 0.7), "LeakyRelu": (0.1,)}.get(name, ())


@pytest.mark.parametrize("name", ALL_ACTS)
def test_one_implementation_same_bits_everywhere(lib, name):
    check_same_bits(lib, name)


def check_same_bits(lib, name):
    """A value gets the same bits at any offset of a row (vector body or any tail length of a 4,
    8 or 16-lane vector), whatever its vector neighbours are (small values beside ones that need
    erf's tail), as a GEMM epilogue (full register tiles of every core, edge tiles) and as a
    reference-kernel epilogue (oxk_act_scalar)."""
    params = _params(name)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(53) * 4).astype(np.float32)
    if name in ("Log", "Sqrt"):
        x = np.abs(x)
    whole = lib.act(x, name, params)
    for k in range(18):
        assert lib.act(x[k:], name, params).tobytes() == whole[k:].tobytes(), k
        assert lib.act(x[:k + 1], name, params).tobytes() == whole[:k + 1].tobytes(), k
    small = (rng.standard_normal(64) * 0.3).astype(np.float32)   # every lane on erf's small path
    mixed = small.copy()
    mixed[::3] = 5.0                                                   # and with neighbours off it
    keep = np.arange(64) % 3 != 0
    assert lib.act(small, name, params)[keep].tobytes() == lib.act(mixed, name, params)[keep].tobytes()
    for m, n in ((13, 11), (13, 70), (25, 64)):
        a = (rng.standard_normal((m, 9)) * 2).astype(np.float32)
        b = (rng.standard_normal((9, n))).astype(np.float32)
        if name in ("Log", "Sqrt"):
            a, b = np.abs(a), np.abs(b)
        plain = lib.sgemm(a, b)
        fused = lib.sgemm(a, b, act=name, act_params=params)
        assert fused.tobytes() == lib.act(plain, name, params).tobytes(), (m, n)
    ref_plain = lib.sgemm(a, b, reference=True)
    ref_fused = lib.sgemm(a, b, act=name, act_params=params, reference=True)
    assert ref_fused.tobytes() == lib.act(ref_plain, name, params).tobytes()


def test_one_and_two_threads_give_the_same_bits(lib):
    check_threads(lib)


def check_threads(lib):
    """oxk_act over several chunks and a GEMM epilogue over several blocks of C: the same bits on
    one thread and on two."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(40000) * 4).astype(np.float32)
    a = rng.standard_normal((100, 40)).astype(np.float32)
    b = rng.standard_normal((40, 300)).astype(np.float32)
    before = lib.num_threads()
    try:
        outs = []
        for threads in (1, 2):
            lib.set_num_threads(threads)
            outs.append([lib.act(np.abs(x) if name in ("Log", "Sqrt") else x, name, _params(name)).tobytes()
                         for name in ALL_ACTS] +
                        [lib.sgemm(a, b, act=name, act_params=_params(name)).tobytes() for name in ("Gelu", "Silu")])
        assert outs[0] == outs[1]
    finally:
        lib.set_num_threads(before)


def digest(lib):
    """A hash of every function's bits over a fixed input (positive inputs for Log and Sqrt)."""
    x = np.concatenate([_inputs((-20.0, 20.0), n=4000, seed=9), SPECIAL])
    h = hashlib.sha256()
    for name in ALL_ACTS:
        h.update(lib.act(np.abs(x) if name in ("Log", "Sqrt") else x, name, _params(name)).tobytes())
    return h.hexdigest()


def check_all(lib):
    """Every check of this file that takes a library (run per forced ISA by test_every_x86_isa)."""
    for name in sorted(FUNCS):
        check_accuracy(lib, name)
        check_special_values(lib, name)
    for name in ALL_ACTS:
        check_same_bits(lib, name)
    check_threads(lib)


ISAS = {"sse2": ("sse2", {"sse2"}), "avx2": ("avx2+fma", {"avx2", "fma"}),
        "avx512": ("avx512f", {"avx2", "fma", "avx512f"})}   # OXK_ISA: (backend, CPU flags)


_ISA_RUNS: Dict[str, str] = {}


def _isa_digest(isa: str) -> str:
    """check_all on the host library with OXK_ISA=isa in a subprocess; the bits' digest."""
    if isa not in _ISA_RUNS:
        code = ("import sys; sys.path[:0] = [%r, %r]\n"
                "import test_engine_elementwise as t; from onnxedge.edge.neon import library as L\n"
                "lib = L.load(); t.check_all(lib); print(lib.backend, t.digest(lib))"
                % (os.path.dirname(os.path.abspath(__file__)), os.path.join(REPO, "tests")))
        r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, OXK_ISA=isa),
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        backend, dig = r.stdout.split()[-2:]
        assert backend == ISAS[isa][0]
        _ISA_RUNS[isa] = dig
    return _ISA_RUNS[isa]


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="OXK_ISA chooses among the x86-64 host build's row functions")
@pytest.mark.parametrize("isa", list(ISAS))
def test_every_x86_isa(isa):
    """The SSE2, AVX2+FMA and AVX-512F row functions (the SGEMM core's ISA, forced with OXK_ISA):
    accuracy, special values, the same bits at any position and as every epilogue, 1 vs 2 threads.
    With FMA the math is the same at any width: AVX2 and AVX-512 give the same bits."""
    if not ISAS[isa][1] <= _cpu_flags():
        pytest.skip("this CPU lacks %s" % ", ".join(sorted(ISAS[isa][1] - _cpu_flags())))
    dig = _isa_digest(isa)
    if isa == "avx512":
        assert dig == _isa_digest("avx2")


def test_act_refuses_an_unknown_code(lib):
    x = np.ones(4, np.float32)
    fn = lib._lib.oxk_act
    assert fn(x.ctypes.data, 4, 20, 0.0, 0.0, x.ctypes.data) == -1
    assert fn(x.ctypes.data, 4, -1, 0.0, 0.0, x.ctypes.data) == -1


def _pow_ref(a, b):
    with np.errstate(all="ignore"):
        return np.power(a.astype(np.float64), b.astype(np.float64))


def test_pow_against_float64(lib):
    rng = np.random.default_rng(2)
    a = np.exp(rng.uniform(-20, 20, 20000)).astype(np.float32) * rng.choice([-1, 1], 20000).astype(np.float32)
    b = np.where(rng.random(20000) < 0.5, rng.integers(-6, 7, 20000),
                 rng.uniform(-4, 4, 20000)).astype(np.float32)
    got = lib.binary("Pow", a, b).astype(np.float64)
    want = _pow_ref(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want) & (np.abs(want) >= TINY) & (np.abs(want) < MAX / 2)   # off the overflow edge
    with np.errstate(all="ignore"):
        cond = np.abs(b.astype(np.float64) * np.log(np.abs(a.astype(np.float64))))
    rel = np.abs(got[ok] - want[ok]) / np.abs(want[ok])
    assert np.all(rel <= 4 * EPS * (2 + cond[ok])), rel.max()


def test_pow_special_values_and_fast_paths(lib):
    """C99 powf's rules: x^0 = 1 and 1^y = 1 even for NaN, a negative base to an odd integer
    keeps its sign, to a non-integer is NaN, zeros and infinities; y = 2 and 0.5 exact."""
    xs = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 3.0, -8.0], np.float32)
    ys = np.array([0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, 1.5, np.inf, -np.inf, np.nan, 1e30], np.float32)
    a, b = np.meshgrid(xs, ys)
    got = lib.binary("Pow", a.ravel(), b.ravel())
    want = _pow_ref(a.ravel(), b.ravel()).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4 * EPS)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    x = (np.random.default_rng(3).standard_normal(1001) * 30).astype(np.float32)
    for e in (2.0, 0.5):   # scalar exponents (the fast paths) and a tensor of them agree
        y = np.abs(x) if e == 0.5 else x
        want = y * y if e == 2.0 else np.sqrt(y)
        assert lib.binary("Pow", y, np.array(e, np.float32)).tobytes() == want.tobytes()
        assert lib.binary("Pow", y, np.full(y.shape, e, np.float32)).tobytes() == want.tobytes()


@pytest.mark.parametrize("op,fn", [("Max", np.maximum), ("Min", np.minimum)])
def test_max_min_broadcast_and_nan(lib, op, fn):
    rng = np.random.default_rng(4)
    for sa, sb in (((3, 4, 5), (5,)), ((3, 1, 5), (1, 4, 1)), ((7,), (7,)), ((2, 3), ())):
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        assert np.array_equal(lib.binary(op, a, b), fn(a, b))
    a = np.array([np.nan, 1.0, np.nan, -np.inf], np.float32)
    b = np.array([1.0, np.nan, np.nan, np.inf], np.float32)
    assert np.array_equal(lib.binary(op, a, b), fn(a, b), equal_nan=True)


# ----------------------------------------------------------------------------- sessions

def _model(nodes, inputs, outputs, inits=(), opset=20):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _neon(model, threads=1):
    return onnxedge.InferenceSession(model, providers=NEON,
                                     provider_options=[dict(intra_op_num_threads=threads), {}])


def _on_engine(sess):
    return {r["op_type"] for r in sess.partition_report() if r["provider"] == NEON_EP}


def _programs(sess):
    return [p for s in sess._plan.steps if s.provider == NEON_EP and s.programs is not None
            for p in s.programs.programs.values() if p is not None]


def test_chain_of_elementwise_ops_is_one_program_bitwise_equal_to_the_first_run():
    n = helper.make_node
    nodes = [n("Abs", ["x"], ["a"]), n("Sqrt", ["a"], ["s"]), n("Log", ["s"], ["l"]), n("Exp", ["l"], ["e"]),
             n("Erf", ["x"], ["r"]), n("Mul", ["e", "r"], ["m"]), n("Neg", ["m"], ["g"]),
             n("Reciprocal", ["g"], ["q"]), n("HardSigmoid", ["q"], ["h"], alpha=0.3, beta=0.4),
             n("HardSwish", ["x"], ["w"]), n("Elu", ["w"], ["u"], alpha=0.5), n("Softplus", ["u"], ["p"]),
             n("Gelu", ["p"], ["v"]), n("Gelu", ["v"], ["t"], approximate="tanh"),
             n("Pow", ["t", "two"], ["t2"]), n("Pow", ["x", "half"], ["t3"]),
             n("Max", ["t2", "h"], ["mx"]), n("Min", ["mx", "t3"], ["y"])]
    inits = [("two", np.array(2.0, np.float32)), ("half", np.array(0.5, np.float32))]
    model = _model(nodes, [_f("x", [3, 37])], [_f("y", [3, 37])], inits)
    sess = _neon(model)
    assert {"Abs", "Sqrt", "Log", "Exp", "Erf", "Neg", "Reciprocal", "HardSigmoid", "HardSwish", "Elu",
            "Softplus", "Gelu", "Pow", "Max", "Min"} <= _on_engine(sess)
    x = (np.random.default_rng(5).standard_normal((3, 37)) * 3).astype(np.float32)
    first = sess.run(None, {"x": x})[0]
    progs = _programs(sess)
    assert len(progs) == 1, [s.programs.refusals for s in sess._plan.steps if s.programs is not None]
    assert sess.run(None, {"x": x})[0].tobytes() == first.tobytes()
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-5, equal_nan=True)


ACTS = [("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 17), ("HardSwish", {}, 17), ("Elu", {"alpha": 0.6}, 17),
        ("Softplus", {}, 17), ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20), ("SiLU", {}, 17)]


@pytest.mark.parametrize("producer", ["Conv", "Gemm", "MatMul"])
@pytest.mark.parametrize("act,attrs,opset", ACTS, ids=[a[0] + ("_tanh" if a[1].get("approximate") else "")
                                                      for a in ACTS])
def test_fused_epilogues_run_in_c_against_onnxruntime(producer, act, attrs, opset):
    """Conv / Gemm / MatMul followed by each new activation: the optimizer fuses it and the
    engine runs the fused node (no 'has no epilogue' refusal), first run and program alike."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(6)
    n = helper.make_node
    if producer == "Conv":
        prod = n("Conv", ["x", "w", "b"], ["p"], pads=[1, 1, 1, 1])
        inits = [("w", rng.standard_normal((6, 3, 3, 3)).astype(np.float32)),
                 ("b", rng.standard_normal(6).astype(np.float32))]
        shape = [2, 3, 9, 7]
    elif producer == "Gemm":
        prod = n("Gemm", ["x", "w", "b"], ["p"], transB=1)
        inits = [("w", rng.standard_normal((10, 12)).astype(np.float32)),
                 ("b", rng.standard_normal(10).astype(np.float32))]
        shape = [5, 12]
    else:
        prod = n("MatMul", ["x", "w"], ["p"])
        inits = [("w", rng.standard_normal((12, 10)).astype(np.float32))]
        shape = [2, 5, 12]
    if act == "SiLU":
        tail = [n("Sigmoid", ["p"], ["s"]), n("Mul", ["p", "s"], ["y"])]
    else:
        tail = [n(act, ["p"], ["y"], **attrs)]
    model = _model([prod] + tail, [_f("x", shape)], [_f("y", None)], inits, opset=opset)
    sess = _neon(model)
    assert _on_engine(sess) == {"Fused" + producer}, sess.partition_report()
    x = rng.standard_normal(shape).astype(np.float32)
    first = sess.run(None, {"x": x})[0]
    assert sess.run(None, {"x": x})[0].tobytes() == first.tobytes()
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # onnxruntime's sigmoid/erf are accurate to ~1e-7 absolute: its SiLU of v to ~1e-7 |v|
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-5)


def test_node_suite_cases_through_the_default_session():
    """The ONNX node-suite cases of these ops in a default session (the engine in front of the
    CPU provider), each run twice: first node by node, then as the compiled program."""
    ops = {"Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Erf", "HardSigmoid", "HardSwish", "Elu",
           "Softplus", "Gelu", "Pow", "Max", "Min"}
    on_engine, _ = node_suite_twice(ops, onnxedge.InferenceSession, NEON_EP)
    if on_engine == 0:
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    assert on_engine >= 40, on_engine
