"""CoreML bridge on the ONNX node suite: every case of a claimed op whose graph the bridge claims
is translated to an ML Program (.mlpackage), executed by the numpy MIL interpreter and compared
with the CPU provider (rtol 1e-4) and with the suite's expected outputs."""
from __future__ import annotations

import collections

import numpy as np
import pytest

pytestmark = pytest.mark.needs_setup   # coremltools

pytest.importorskip("coremltools", reason="coremltools (the MIL builder) needs Python >= 3.10")

import coreml_cases as cc  # noqa: E402

from onnxedge.edge.coreml import support  # noqa: E402

OPS = sorted({op for dom, op in support.CHECKS if dom == ""})
# Ops whose suite cases the bridge cannot claim (they are covered by the QDQ CNN model test):
# Quantize/DequantizeLinear's cases have int8 graph inputs/outputs, which ML Programs do not take.
NOT_IN_SUITE = {"QuantizeLinear", "DequantizeLinear"}


@pytest.fixture(scope="module")
def prov():
    return cc.provider(minimum_deployment_target="iOS18")


@pytest.fixture(scope="module")
def by_op():
    grouped = collections.defaultdict(list)
    for info in cc.case_infos(set(OPS)):
        grouped[info.op_type].append(info)
    return grouped


@pytest.mark.parametrize("op", [o for o in OPS if o not in NOT_IN_SUITE])
def test_node_suite_op(op, prov, by_op):
    import coremltools as ct
    translated, passed_over, last = [], [], None
    for info in by_op[op]:
        case = cc.cases.load_case(info)
        why, art, feeds = cc.translate_case(case, prov)
        if why:
            passed_over.append((info.name, why))
            continue
        out = prov.interpret(art, feeds)
        all_feeds = dict(zip(case.input_names, case.data_sets[0][0]))
        ref = cc.cpu_outputs(case.model, all_feeds)
        for name, r, expected in zip(art.outputs, ref, case.data_sets[0][1]):
            got = out[name]
            assert got.shape == r.shape and got.dtype == r.dtype, (info.name, name)
            np.testing.assert_allclose(got, r, rtol=1e-4, atol=1e-5, err_msg=info.name)
            np.testing.assert_allclose(got, expected, rtol=max(info.rtol, 1e-4),
                                       atol=max(info.atol, 1e-5), err_msg=info.name)
        translated.append(info.name)
        last = art
    if last is not None:   # the package of the last translated case loads back in coremltools
        art = last
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            art.save(tmp)
            model = ct.models.MLModel(tmp + "/model.mlpackage", skip_model_load=True)
            spec = model.get_spec()
            assert [i.name for i in spec.description.input] == \
                [art.meta["mil_inputs"][n] for n in art.inputs]
            assert [o.name for o in spec.description.output] == \
                [art.meta["mil_outputs"][n] for n in art.outputs]
    assert translated, "no %s case was translated; passed over: %s" % (op, passed_over)
    for name, why in passed_over:     # every refusal says why in words, never a crash
        assert why and "could not check" not in why, (name, why)
