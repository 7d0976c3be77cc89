"""LSTM and GRU as one C-engine op each (edge/kernels/recurrent.c, onnxedge.oxk_rnn): against a
float64 run of the CPU provider's kernels and onnxruntime, in every direction, with initial states,
peepholes, clip and both GRU reset forms; the compiled program's bits equal the node-by-node run's
and do not depend on the thread count; the ONNX node suite's LSTM/GRU cases run through the engine
with their weights as constants; what the engine does not take stays on the CPU with a reason."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelgen import rnn_model
from neon_helpers import ensure_built, node_suite_twice

ensure_built()

import onnxedge  # noqa: E402
from onnxedge.edge.neon import library  # noqa: E402
from onnxedge.kernels import recurrent  # noqa: E402

from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine


_model = rnn_model   # tests/modelgen.py


def _reference(op, feeds, w, direction, lbr, clip, outs):
    """The CPU provider's kernel run in float64 (its own numpy code, not the C engine)."""
    f64 = {k: v.astype(np.float64) for k, v in feeds.items()}
    kw = dict(direction=direction, clip=clip, hidden_size=w["R"].shape[-1])
    args = [f64["X"], w["W"].astype(np.float64), w["R"].astype(np.float64), w["B"].astype(np.float64), None,
            f64.get("h0")]
    if op == "LSTM":
        args += [f64.get("c0"), None if w["P"] is None else w["P"].astype(np.float64)]
        return recurrent.lstm(*args, **kw)[:len(outs)]
    return recurrent.gru(*args, linear_before_reset=lbr, **kw)[:len(outs)]


def _close(got, want, k):
    """Outputs of tanh/sigmoid-bounded recurrences: a float32 tolerance grown with the reduction
    length k (input + hidden) and the number of steps."""
    tol = 2e-6 * (k + 8)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


CASES = [("LSTM", 5, 2, 3, 4, "forward", 0, None, False),
         ("LSTM", 7, 1, 16, 32, "bidirectional", 0, None, False),
         ("LSTM", 4, 3, 5, 6, "reverse", 0, 0.5, True),
         ("LSTM", 1, 1, 1, 1, "forward", 0, None, True),
         ("LSTM", 9, 4, 33, 17, "bidirectional", 0, 2.0, True),
         ("GRU", 5, 2, 3, 4, "forward", 0, None, False),
         ("GRU", 6, 1, 8, 16, "bidirectional", 1, None, False),
         ("GRU", 3, 2, 3, 5, "reverse", 1, 0.7, False),
         ("GRU", 8, 3, 19, 23, "bidirectional", 0, 1.5, False),
         ("GRU", 1, 1, 1, 1, "forward", 1, None, False)]


def _steps(sess):
    return [s for s in sess._plan.steps if s.provider == ENGINE]


def _programs(sess):
    return [p for s in _steps(sess) if s.programs is not None for p in s.programs.programs.values()
            if p is not None]


@pytest.mark.parametrize("op,seq,batch,inp,hid,direction,lbr,clip,peep", CASES)
def test_matches_a_float64_reference_and_the_program_gives_the_first_runs_bits(
        op, seq, batch, inp, hid, direction, lbr, clip, peep):
    model, feeds, w = _model(op, seq, batch, inp, hid, direction, lbr, clip, peep)
    sess = onnxedge.InferenceSession(model)
    assert {r["provider"] for r in sess.partition_report()} == {ENGINE}
    first = sess.run(None, feeds)        # node by node (records shapes)
    second = sess.run(None, feeds)       # the compiled program
    assert _programs(sess), [s.programs.refusals for s in _steps(sess)]
    for a, b in zip(first, second):
        assert np.array_equal(a, b)
    for got, want in zip(first, _reference(op, feeds, w, direction, lbr, clip, first)):
        assert got.shape == want.shape and got.dtype == np.float32
        _close(got, want, inp + hid)


@pytest.mark.parametrize("op,seq,batch,inp,hid,direction,lbr,clip,peep", CASES[1:3] + CASES[6:8])
def test_matches_onnxruntime(op, seq, batch, inp, hid, direction, lbr, clip, peep):
    ort = pytest.importorskip("onnxruntime")
    model, feeds, _ = _model(op, seq, batch, inp, hid, direction, lbr, clip, peep, seed=3)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = onnxedge.InferenceSession(model)
    for _ in range(2):
        for got, ref in zip(sess.run(None, feeds), want):
            _close(got, ref, inp + hid)


def test_outputs_left_out_and_no_initial_states():
    """Y not asked for (the kernel writes it to scratch), Y_h only, zero initial states."""
    model, feeds, w = _model("LSTM", 6, 2, 4, 5, outputs=["", "Yh"], states=False)
    sess = onnxedge.InferenceSession(model)
    got = [sess.run(None, feeds)[0] for _ in range(2)]
    assert np.array_equal(got[0], got[1]) and _programs(sess)
    want = _reference("LSTM", feeds, w, "forward", 0, None, ["Y", "Yh"])[1]
    _close(got[0], want, 9)


def test_a_new_sequence_length_gets_its_own_program():
    model, feeds, w = _model("GRU", 4, 2, 3, 6)
    sess = onnxedge.InferenceSession(model)
    for seq in (4, 11, 4):
        f = dict(feeds, X=np.random.default_rng(seq).standard_normal((seq, 2, 3)).astype(np.float32))
        for got, want in zip(sess.run(None, f), _reference("GRU", f, w, "forward", 0, None, ["Y", "Yh"])):
            _close(got, want, 9)
    assert len(_programs(sess)) == 2


def test_bits_do_not_depend_on_the_thread_count():
    model, feeds, _ = _model("LSTM", 12, 4, 64, 96, "bidirectional", seed=7)
    lib = library.load()
    before = lib.num_threads()
    try:
        outs = []
        for n in (1, 2):
            so = onnxedge.SessionOptions()
            so.intra_op_num_threads = n
            sess = onnxedge.InferenceSession(model, so)
            outs.append([sess.run(None, feeds), sess.run(None, feeds)])
        for a, b in zip(outs[0][1] + outs[0][0], outs[1][1] + outs[1][0]):
            assert np.array_equal(a, b)
    finally:
        lib.set_num_threads(before)


@pytest.mark.parametrize("extra,inputs,why", [
    (dict(layout=1), None, "layout=1"),
    (dict(activations=["Relu", "Tanh", "Tanh"]), None, "activations"),
    (dict(input_forget=1), None, "input_forget"),
    ({}, "seq_lens", "sequence_lens"),
])
def test_what_the_engine_does_not_take_stays_on_the_cpu_with_a_reason(extra, inputs, why):
    model, feeds, _ = _model("LSTM", 3, 2, 3, 4, extra=extra)
    if inputs:
        import onnx
        m = onnx.load_from_string(model)
        m.graph.node[0].input[4] = "L"
        m.graph.initializer.append(numpy_helper.from_array(np.array([3, 3], np.int32), "L"))
        model = m.SerializeToString()
    sess = onnxedge.InferenceSession(model)
    (row,) = sess.partition_report()
    assert row["provider"] == "CPUExecutionProvider"
    assert why in row["fallback_reasons"][ENGINE]


def test_weights_fed_at_run_time_stay_on_the_cpu():
    model, feeds, w = _model("GRU", 3, 1, 2, 3)
    import onnx
    m = onnx.load_from_string(model)
    r = [i for i in m.graph.initializer if i.name == "R"][0]
    m.graph.initializer.remove(r)
    m.graph.input.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, list(w["R"].shape)))
    sess = onnxedge.InferenceSession(m.SerializeToString())
    (row,) = sess.partition_report()
    assert "not a constant" in row["fallback_reasons"][ENGINE]


def test_the_kernel_refuses_bad_arguments():
    lib = library.load()
    import ctypes
    args = lib.structs["oxk_rnn_args"](0, 2, 0, 1, 1, 1, 0, 0, 0, 0.0, None, None)   # batch 0
    x = np.zeros(4, np.float32)
    assert lib.function("oxk_rnn")(ctypes.addressof(args), x.ctypes.data, None, None, None, None, None,
                                   x.ctypes.data) != 0


def test_node_suite_cases_through_the_engine():
    """The suite feeds W, R, B (and P) as inputs; frozen into initializers the engine packs them.
    Not taken: sequence_lens and layout=1 (the CPU kernels run those cases in tests/conformance)."""
    took, programs = node_suite_twice({"LSTM", "GRU"}, lambda m: onnxedge.InferenceSession(m),
                                      freeze={"W", "R", "B", "P"})
    if took == 0:
        pytest.skip("no node-case cache (python tests/conformance/cases.py builds it)")
    assert took >= 9 and programs == took, (took, programs)
