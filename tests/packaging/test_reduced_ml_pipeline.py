"""`onnxedge reduce` of a scikit-learn pipeline (ColumnTransformer: imputer, scaler, one-hot
encoder, LogisticRegression, ZipMap) gives a wheel of at most 60 KB that, installed alone (no
site-packages, no checkout), runs the model and matches onnxruntime: the ml kernels survive the
AST stripping of unused code."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")
ort = pytest.importorskip("onnxruntime")

LIMIT = 60_000


def _pipeline(path: str):
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from skl2onnx.sklapi import CastTransformer
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    rng = np.random.RandomState(0)
    num = rng.randn(120, 3).astype(np.float32)
    cat = rng.choice(["a", "b", "c"], size=(120, 1)).astype(object)
    y = ((num[:, 0] + (cat[:, 0] == "a")) > 0.3).astype(np.int64)
    num[rng.rand(120, 3) < 0.1] = np.nan
    numeric = Pipeline([("cast", CastTransformer(dtype=np.float32)),
                        ("impute", SimpleImputer()), ("scale", StandardScaler())])
    pre = ColumnTransformer([("num", numeric, [0, 1, 2]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), [3])])
    model = Pipeline([("pre", pre), ("clf", LogisticRegression())])
    model.fit(np.concatenate([num.astype(object), cat], axis=1), y)
    onx = to_onnx(model, initial_types=[("num", FloatTensorType([None, 3])),
                                        ("cat", StringTensorType([None, 1]))])
    with open(path, "wb") as f:
        f.write(onx.SerializeToString())
    cat[5, 0] = "unseen"
    return {"num": num[:20], "cat": cat[:20]}


def _deps(folder: str) -> str:
    """A folder holding links to numpy and flatbuffers only."""
    import flatbuffers
    os.makedirs(folder, exist_ok=True)
    for mod in (np, flatbuffers):
        src = os.path.dirname(mod.__file__)
        for name in (os.path.basename(src), os.path.basename(src) + ".libs"):
            target = os.path.join(os.path.dirname(src), name)
            if os.path.exists(target) and not os.path.exists(os.path.join(folder, name)):
                os.symlink(target, os.path.join(folder, name))
    return folder


RUN = """
import sys, pickle, numpy as np, onnxedge
site, model, data = sys.argv[1:4]
assert onnxedge.__file__.startswith(site), onnxedge.__file__
feeds, names = pickle.load(open(data, 'rb'))
out = onnxedge.InferenceSession(model).run(names, feeds)
pickle.dump(out, open(data + '.out', 'wb'))
"""


def test_reduced_sklearn_pipeline_wheel_is_small_and_runs_alone(tmp_path):
    from onnxedge.cli import main
    path = str(tmp_path / "pipe.onnx")
    feeds = _pipeline(path)
    assert main(["reduce", path, "-o", str(tmp_path / "red")]) == 0
    whl = glob.glob(str(tmp_path / "red" / "*.whl"))[0]
    assert os.path.getsize(whl) <= LIMIT, "reduced wheel is %d bytes" % os.path.getsize(whl)
    site = str(tmp_path / "site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--no-compile", "--target", site, whl],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    expected = ref.run(names, feeds)
    import pickle
    data = str(tmp_path / "feeds.pkl")
    with open(data, "wb") as f:
        pickle.dump((feeds, names), f)
    model = glob.glob(str(tmp_path / "red" / "models" / "*.oxe"))[0]
    env = {"PATH": os.environ.get("PATH", ""),
           "PYTHONPATH": site + os.pathsep + _deps(str(tmp_path / "deps"))}
    proc = subprocess.run([sys.executable, "-S", "-c", RUN, site, model, data], env=env,
                          cwd=site, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(data + ".out", "rb") as f:
        got = pickle.load(f)
    np.testing.assert_array_equal(got[0], expected[0])
    assert [sorted(d) for d in got[1]] == [sorted(d) for d in expected[1]]
    for dg, de in zip(got[1], expected[1]):
        np.testing.assert_allclose([dg[k] for k in sorted(dg)], [de[k] for k in sorted(de)],
                                   rtol=1e-4, atol=1e-6)
