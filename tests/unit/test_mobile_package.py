"""`onnxedge package mobile`: layout, manifest and sizes for both targets on the MLP and qdq_cnn;
the packaged wheel, unpacked alone, runs the packaged models with the bridge loading the packaged
artifacts (no translator in it) and matches the CPU provider; bad inputs give clear errors.

Off the phone the bridge's numpy reference interpreter stands in for Core ML / NNAPI: the test
puts that one module beside the unpacked wheel (it is not in the wheel: the device runs the real
framework), the way the device's framework sits beside the app.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from benchmarks import models as bm  # noqa: E402

from onnxedge import InferenceSession  # noqa: E402
from onnxedge.cli import main as cli_main  # noqa: E402
from onnxedge.edge.mobile import package as mobile  # noqa: E402
from onnxedge.errors import InvalidArgument, NoSuchFile  # noqa: E402

TARGETS = ["ios", "android"]
INTERPRETERS = {"ios": ["onnxedge/edge/coreml/interpreter.py"],
                "android": ["onnxedge/edge/nnapi/interpreter.py"]}
SIZE_LIMIT = 200_000


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("mobile_models"))
    bm.build_all(d, ["mlp", "qdq_cnn"])
    return d


def need_translator(target: str) -> None:
    """The Core ML translator needs coremltools (Python >= 3.10 only: absent from .venv38)."""
    if target == "ios":
        pytest.importorskip("coremltools", reason="the Core ML translator needs coremltools")


class _Packages(dict):
    """One package per target holding the MLP and qdq_cnn, made on first use."""

    def __init__(self, model_dir: str, factory) -> None:
        super().__init__()
        self.model_dir, self.factory = model_dir, factory

    def __missing__(self, target: str):
        need_translator(target)
        dest = str(self.factory.mktemp("pkg") / target)
        self[target] = mobile.make_package([os.path.join(self.model_dir, "mlp.onnx"),
                                            os.path.join(self.model_dir, "qdq_cnn.onnx")],
                                           dest, target)
        return self[target]


@pytest.fixture(scope="module")
def packages(model_dir, tmp_path_factory):
    return _Packages(model_dir, tmp_path_factory)


@pytest.mark.parametrize("target", TARGETS)
def test_layout_and_manifest(packages, target):
    p = packages[target]
    m = json.load(open(p.manifest_path))
    provider = mobile.TARGETS[target].provider
    assert m["target"] == target and m["provider"] == provider
    assert sorted(os.listdir(p.folder)) == sorted(
        ["README.md", "artifacts", "manifest.json", "models", os.path.basename(p.wheel),
         "required_operators.config", "size_report.json", "size_report.txt"])
    assert sorted(m["models"]) == ["mlp", "qdq_cnn"]
    for name, info in m["models"].items():
        assert os.path.isfile(os.path.join(p.folder, info["file"])) and info["file"].endswith(".oxe")
        assert sum(info["nodes_per_provider"].values()) == info["nodes"] == len(info["assignments"])
        assert info["nodes_per_provider"].get(provider, 0) > 0, (name, info["assignments"])
        grouped = [n for g in info["groups"] for n in g["nodes"]]
        assert sorted(grouped) == sorted(a["node"] for a in info["assignments"]
                                         if a["provider"] == provider)
        for a in info["assignments"]:
            assert (a["fallback_reason"] is None) == (a["provider"] == provider)
        for g in info["groups"]:
            folder = os.path.join(p.folder, "artifacts", g["artifact"])
            head = json.load(open(os.path.join(folder, "artifact.json")))
            assert head["key"] == g["artifact"] and head["inputs"] == g["inputs"]
            assert g["bytes"] == sum(os.path.getsize(os.path.join(folder, *f.split("/")))
                                     for f in head["files"])
    # the wheel: bridge provider without its translator or interpreter
    names = zipfile.ZipFile(p.wheel).namelist()
    pkg = mobile.TARGETS[target].package.replace(".", "/")
    assert pkg + "/provider.py" in names and "onnxedge/edge/bridge.py" in names
    for absent in ("translate.py", "interpreter.py"):
        assert pkg + "/" + absent not in names
    assert not any(n.startswith(("onnxedge/optimizer/passes", "onnxedge/onnx_loader", "onnxedge/cli"))
                   for n in names)
    eps = zipfile.ZipFile(p.wheel).read("onnxedge-%s.dist-info/entry_points.txt"
                                        % m["onnxedge"]).decode()
    assert provider in eps
    # sizes add up to what is on disk
    on_disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p.folder) for f in fs)
    assert m["sizes"]["total"] == on_disk
    assert m["sizes"]["artifacts"] == sum(a["bytes"] for a in m["artifacts"].values()) + sum(
        os.path.getsize(os.path.join(p.folder, "artifacts", k, "artifact.json")) for k in m["artifacts"])


def _site(p, target, tmp_path) -> str:
    """The package's wheel unpacked alone, plus the reference interpreter standing in for the
    device framework."""
    site = str(tmp_path / "site")
    with zipfile.ZipFile(p.wheel) as zf:
        zf.extractall(site)
    for rel in INTERPRETERS[target]:
        src = os.path.join(ROOT, "edge", os.path.relpath(rel, "onnxedge/edge"))
        shutil.copy(src, os.path.join(site, rel))
    return site


DEVICE = r"""
import importlib.util, json, sys
import numpy as np
import onnxedge
from onnxedge.edge import bridge
from onnxedge.edge.mobile import runtime
pkg, target_mod, provider, out = sys.argv[1:5]
result = {"onnxedge": onnxedge.__file__,
          "translator": importlib.util.find_spec(target_mod + ".translate") is not None}
for model in ("mlp", "qdq_cnn"):
    sess = runtime.session(pkg, model, reference=True)
    feeds = dict(np.load(sys.argv[5 + ("mlp", "qdq_cnn").index(model)]))
    np.save(out + "/" + model + ".npy", sess.run(None, feeds)[0])
    prov = bridge.provider_of(sess, provider)
    result[model] = {"translated": prov.translated, "loaded": sorted(prov.artifacts),
                     "providers": [s.provider for s in sess._plan.steps]}
print(json.dumps(result))
"""


@pytest.mark.parametrize("target", TARGETS)
def test_packaged_wheel_runs_packaged_artifacts(packages, model_dir, target, tmp_path):
    p = packages[target]
    site = _site(p, target, tmp_path)
    feeds = {"mlp": bm.make_inputs("mlp", batch=1, seed=5), "qdq_cnn": bm.make_inputs("qdq_cnn", 1, 5)}
    paths = []
    for name, f in feeds.items():
        paths.append(str(tmp_path / (name + ".npz")))
        np.savez(paths[-1], **f)
    # only the unpacked wheel and the site-packages' third-party modules (numpy; coremltools'
    # protobuf classes for the Core ML interpreter); -S keeps the editable onnxedge out of sight
    import numpy
    env = {"PATH": os.environ.get("PATH", ""),
           "PYTHONPATH": site + os.pathsep + os.path.dirname(os.path.dirname(numpy.__file__))}
    target_spec = mobile.TARGETS[target]
    proc = subprocess.run([sys.executable, "-S", "-c", DEVICE, p.folder, target_spec.package,
                           target_spec.provider, str(tmp_path)] + paths,
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["onnxedge"].startswith(site), got["onnxedge"]
    assert got["translator"] is False
    m = p.manifest
    for name in ("mlp", "qdq_cnn"):
        assert got[name]["translated"] == []
        assert got[name]["loaded"] == sorted({g["artifact"] for g in m["models"][name]["groups"]})
        assert target_spec.provider in got[name]["providers"]
        want = InferenceSession(os.path.join(model_dir, name + ".onnx"),
                                providers=["CPUExecutionProvider"]).run(None, feeds[name])[0]
        out = np.load(str(tmp_path / (name + ".npy")))
        assert out.dtype == want.dtype and out.shape == want.shape
        if name == "mlp":
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6)
        else:   # int8: the interpreters requantize like the CPU's float emulation (1 LSB slack)
            assert np.abs(out.astype(np.int32) - want.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("target", TARGETS)
def test_mlp_without_artifacts_sizes(model_dir, target, tmp_path, capsys):
    need_translator(target)
    out = str(tmp_path / "pkg")
    assert cli_main(["package", "mobile", "--target", target, os.path.join(model_dir, "mlp.onnx"),
                     "-o", out, "--no-artifacts"]) == 0
    printed = capsys.readouterr().out
    assert "without the bridge artifacts" in printed
    m = json.load(open(os.path.join(out, "manifest.json")))
    assert not os.path.exists(os.path.join(out, "artifacts"))
    assert all(not a["included"] for a in m["artifacts"].values()) and m["artifacts"]
    s = m["sizes"]
    on_disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    assert s["artifacts"] == 0 and s["total"] == s["without_artifacts"] == on_disk
    # the runtime (wheel + manifest, report, README, config) fits in 200 KB; the MLP's weights
    # (784x128 + 128x64 + 64x10 float32, ~440 KB in the .oxe) come on top
    assert s["without_artifacts_and_models"] <= SIZE_LIMIT, s
    assert s["without_artifacts"] == s["without_artifacts_and_models"] + s["models"]
    assert 400_000 < s["models"] < 460_000


def test_errors(model_dir, tmp_path):
    mlp = os.path.join(model_dir, "mlp.onnx")
    with pytest.raises(InvalidArgument, match="unknown mobile target 'windows'.*android"):
        mobile.make_package([mlp], str(tmp_path / "a"), "windows")
    with pytest.raises(NoSuchFile, match="nope.onnx does not exist"):
        mobile.make_package([str(tmp_path / "nope.onnx")], str(tmp_path / "b"), "ios")
    with pytest.raises(InvalidArgument, match="--feature-level is an NNAPI"):
        mobile.make_package([mlp], str(tmp_path / "c"), "ios", feature_level=3)
    with pytest.raises(InvalidArgument, match="--deployment-target is a Core ML"):
        mobile.make_package([mlp], str(tmp_path / "c"), "android", deployment_target="iOS16")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(InvalidArgument, match="not a mobile package"):
        mobile.make_package([mlp], str(busy), "ios")
    assert (busy / "notes.txt").exists()
    with pytest.raises(SystemExit):
        cli_main(["package", "mobile", "--target", "windows", mlp, "-o", str(tmp_path / "d")])


@pytest.mark.parametrize("target", TARGETS)
def test_model_with_no_claimable_node(target, tmp_path):
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "nz",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [1, None])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "nz.onnx")
    open(path, "wb").write(model.SerializeToString())
    with pytest.raises(InvalidArgument, match="model nz: %s claims none of its 1 nodes"
                       % mobile.TARGETS[target].provider):
        mobile.make_package([path], str(tmp_path / "out"), target)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", TARGETS)
def test_partition_report_markdown(target, tmp_path):
    """The docs' report: target, model, groups, outputs equal to the CPU's."""
    need_translator(target)
    from onnxedge.edge.mobile import report
    text = report.render(["mlp"], [target])
    assert text.startswith("### %s (`%s`" % (target, mobile.TARGETS[target].provider))
    assert "**mlp** (4 nodes after optimization)" in text
    assert "outputs vs CPU: 0\n" in text and "- group 1" in text
    doc = tmp_path / "doc.md"
    doc.write_text("before\n%s\nold\n%s\nafter\n" % (report.BEGIN, report.END))
    report.update(str(doc), text)
    body = doc.read_text()
    assert "old" not in body and body.startswith("before") and body.endswith("after\n") and text in body
