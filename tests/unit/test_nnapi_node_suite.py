"""ONNX node-suite cases of every op the NNAPI bridge claims: translate, serialize, read back
(equal), interpret, and compare with the CPU provider (rtol 1e-4, float32).

A case counts when the node under test lands on NnapiExecutionProvider (reference mode, default
feature level 4). NNAPI fixes weights, shapes, axes and quantization parameters at translation,
so when the bridge passes a case over because such an input is fed at run time, the case is run
again with every input after the first frozen into an initializer (its data-set value). Lone
reshapes / transposes / concats are claimed here (TRIVIAL_OPS emptied) to test their translation."""
from __future__ import annotations

import collections
from typing import Dict, List

import numpy as np

from onnxedge import InferenceSession
from onnxedge.edge.nnapi import serialize, support
from onnxedge.edge.nnapi.provider import MODEL_FILE

PROVIDER = "NnapiExecutionProvider"


def _claimed_infos() -> List:
    from conformance import cases as node_cases
    infos = node_cases.load_manifest(node_cases.ensure_cache(verbose=False))
    return [i for i in infos if i.op_type in support.OPS and i.domain in ("", "ai.onnx")
            and "_expanded" not in i.name]


def _frozen(model_bytes: bytes, names: List[str], values: List) -> bytes:
    """The model with inputs 1.. turned into initializers holding `values`."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load_from_string(model_bytes)
    keep = names[:1]
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in zip(names[1:], values[1:])]
    inputs = [vi for vi in model.graph.input if vi.name in keep]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    model.graph.initializer.extend(inits)
    return model.SerializeToString()


def _session(model: bytes):
    return InferenceSession(model, providers=[PROVIDER, "CPUExecutionProvider"],
                            provider_options=[{"reference": True}, {}])


def _placement(sess, op_type: str) -> str:
    report = [r for r in sess.partition_report() if r["op_type"] == op_type]
    if not report or any(r["provider"] != PROVIDER for r in report):
        return "cpu: " + (report[0]["fallback_reasons"].get(PROVIDER, "?") if report else "no node")
    return "claimed"


def _run_case(info) -> str:
    """'claimed', or 'cpu: reason' when the bridge left the op to the CPU."""
    from conformance import cases as node_cases
    try:
        case = node_cases.load_case(info)
    except NotImplementedError as e:   # e.g. float8 data without ml_dtypes (Python 3.8)
        return "unreadable here: %s" % e
    feeds_list, _ = case.data_sets[0]
    model, names = case.model, case.input_names
    sess = _session(model)
    where = _placement(sess, info.op_type)
    if where != "claimed" and "constant" in where and len(names) > 1:
        model, names = _frozen(model, names, feeds_list), names[:1]
        sess = _session(model)
        where = _placement(sess, info.op_type)
    if where != "claimed":
        return where
    case = case._replace(input_names=names, data_sets=case.data_sets[:1])
    cpu = InferenceSession(model, providers=["CPUExecutionProvider"])
    nnapi = [p for p in sess._providers if p.name == PROVIDER][0]
    for feeds_list, _ in case.data_sets:
        feeds = dict(zip(case.input_names, feeds_list))
        got = sess.run(None, feeds)
        want = cpu.run(None, feeds)
        for name, g, w in zip(case.output_names, got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (info.name, name)
            if g.dtype.kind in "iu":   # quantized outputs: NNAPI rounds ties away from zero
                assert np.abs(g.astype(np.int64) - w.astype(np.int64)).max(initial=0) <= 1, info.name
            else:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=info.name)
    assert nnapi.artifacts, info.name
    for art in nnapi.artifacts.values():
        data = art.files[MODEL_FILE]
        model = serialize.loads(data)
        assert serialize.dumps(model) == data
        assert serialize.loads(serialize.dumps(model)) == model
    return "claimed"


def test_node_suite_claimed_ops(monkeypatch):
    """Every claimed case matches the CPU; most cases of each translated op are claimed."""
    from onnxedge.edge.nnapi.provider import NnapiExecutionProvider
    monkeypatch.setattr(NnapiExecutionProvider, "TRIVIAL_OPS", frozenset())
    results: Dict[str, str] = {}
    failures = {}
    for info in _claimed_infos():
        try:
            results[info.name] = _run_case(info)
        except AssertionError as e:
            failures[info.name] = str(e)[:300]
        except Exception as e:   # a crash in translation / interpretation is a failure too
            failures[info.name] = "%s: %s" % (type(e).__name__, str(e)[:300])
    assert not failures, failures
    by_op = collections.defaultdict(lambda: [0, 0])
    infos = {i.name: i for i in _claimed_infos()}
    for name, res in results.items():
        by_op[infos[name].op_type][res == "claimed"] += 1
    claimed = sum(v[1] for v in by_op.values())
    assert claimed >= 110, dict(by_op)   # 116 with onnx 1.23.2
    # ops with node cases that must be claimed at least once
    for op in ("Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh",
               "Softmax", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat",
               "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean",
               "BatchNormalization", "QuantizeLinear", "DequantizeLinear", "Clip"):
        assert by_op[op][1] > 0, (op, {n: r for n, r in results.items()
                                       if infos[n].op_type == op})
