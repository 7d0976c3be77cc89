"""Every zoo model (tests/zoo/zoo.py) runs on onnxedge and gives onnxruntime's outputs."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from zoo import zoo

ort = pytest.importorskip("onnxruntime")
CASES = zoo.all_models()


def _run_both(path, feeds):
    import onnxedge
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    expected = ref.run(names, feeds)
    sess = onnxedge.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(names, feeds)
    return names, expected, got


def compare_outputs(model: zoo.ZooModel, names, expected, got) -> None:
    """Assert onnxedge's outputs match onnxruntime's under the record's comparison rule."""
    assert len(got) == len(expected)
    for name, e, g in zip(names, expected, got):
        if isinstance(e, list):          # ZipMap: a sequence of maps
            assert isinstance(g, list) and len(g) == len(e), name
            for de, dg in zip(e, g):
                assert set(de) == set(dg), name
                for k in de:
                    np.testing.assert_allclose(dg[k], de[k], rtol=model.rtol, atol=model.atol,
                                               err_msg="%s[%r]" % (name, k))
            continue
        e = np.asarray(e)
        g = np.asarray(g)
        assert g.shape == e.shape, "%s: shape %s, onnxruntime %s" % (name, g.shape, e.shape)
        if e.dtype.kind in "OUSb" or (model.compare == "labels" and e.dtype.kind in "iu"):
            np.testing.assert_array_equal(g, e, err_msg=name)
        elif model.compare == "quantized" and e.dtype.kind in "iu":
            diff = np.abs(g.astype(np.int64) - e.astype(np.int64))
            assert diff.max(initial=0) <= max(1, int(model.atol)), "%s: off by %d steps" % (name, diff.max())
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64),
                                       rtol=model.rtol, atol=model.atol, err_msg=name)


@pytest.mark.parametrize("family,model", CASES, ids=["%s/%s" % (f, m.name) for f, m in CASES])
def test_zoo_model_matches_onnxruntime(family, model):
    for mod in model.requires:
        pytest.importorskip(mod)
    built = zoo.ensure_built(family, model)
    names, expected, got = _run_both(built["path"], built["feeds"])
    compare_outputs(model, names, expected, got)


def test_zoo_table_in_the_docs_lists_every_model():
    """docs/ZOO.md (tests/zoo/report.py) is regenerated when the zoo changes."""
    import os
    doc = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "docs", "ZOO.md")
    text = open(doc).read() if os.path.exists(doc) else ""
    missing = ["%s/%s" % (f, m.name) for f, m in CASES if "| %s/%s |" % (f, m.name) not in text]
    assert not missing, "docs/ZOO.md lacks %s: run python3 tests/zoo/report.py" % missing
