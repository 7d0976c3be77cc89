"""Reduced builds: required-operator scan (subgraphs, functions), onnxruntime's config format,
and a slim wheel that installs, runs the MLP alone and refuses a dropped op clearly."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import model_io
from onnxedge.reduced_build import report, scan, wheel

RNG = np.random.RandomState(1)
W1 = RNG.standard_normal((6, 8)).astype(np.float32)
B1 = RNG.standard_normal(8).astype(np.float32)
W2 = RNG.standard_normal((3, 8)).astype(np.float32)


def _write(model, path):
    model.ir_version = 8
    with open(str(path), "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def mlp_model():
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W1", "B1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "W2"], ["z"], transB=1),
         helper.make_node("Softmax", ["z"], ["y"], axis=-1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(B1, "B1"),
         numpy_helper.from_array(W2, "W2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def mlp_reference(x):
    z = np.maximum(x @ W1 + B1, 0) @ W2.T
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def cos_model():
    g = helper.make_graph(
        [helper.make_node("Cos", ["x"], ["y"])], "cos",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def control_flow_model():
    """If whose branches hold a Loop; a model-local function (custom domain) using Sigmoid."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Neg", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    then_g = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["t"], body=body)], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    fn = helper.make_function("custom.fn", "Swish", ["a"], ["b"],
                              [helper.make_node("Sigmoid", ["a"], ["s"]),
                               helper.make_node("Mul", ["a", "s"], ["b"])],
                              [helper.make_opsetid("", 17)])
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
         helper.make_node("Greater", ["sum", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Swish", ["r"], ["y"], domain="custom.fn")], "cf", [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(0, np.float32), "zero"),
         numpy_helper.from_array(np.array(2, np.int64), "n")])
    return helper.make_model(g, functions=[fn], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("custom.fn", 1)])


# ---------------------------------------------------------------------------------- scan

def test_scan_includes_subgraphs_and_function_bodies(tmp_path):
    path = _write(control_flow_model(), tmp_path / "cf.onnx")
    req = scan.required_operators(path)
    assert req == {("ai.onnx", 17): {"ReduceSum", "Greater", "If", "Loop", "Identity", "Neg", "Abs",
                                     "Sigmoid", "Mul"}}
    # the model really runs with those ops: x sums > 0 -> Loop negates twice -> swish(x)
    x = np.array([1.0, 2.0], np.float32)
    (y,) = onnxedge.InferenceSession(path).run(None, {"x": x})
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-6)


def test_scan_merges_models_and_folders(tmp_path):
    _write(mlp_model(), tmp_path / "a.onnx")
    _write(cos_model(), tmp_path / "b.onnx")
    raw = scan.scan_models([str(tmp_path)], level=None)
    assert raw == {("ai.onnx", 17): {"Gemm", "Relu", "Softmax", "Cos"}}
    assert scan.op_pairs(raw) == {("", "Gemm"), ("", "Relu"), ("", "Softmax"), ("", "Cos")}
    # by default the ops the session's optimizer brings in at load time are added
    req = scan.scan_models([str(tmp_path)])
    assert req == scan.merge(raw, {("com.onnxedge", 1): {"FusedGemm"}})
    with pytest.raises(onnxedge.NoSuchFile, match="nothing.onnx"):
        scan.required_operators(str(tmp_path / "nothing.onnx"))


def test_config_round_trip_and_onnxruntime_style(tmp_path):
    req = {("ai.onnx", 17): {"Gemm", "Relu"}, ("ai.onnx", 13): {"Add"},
           ("ai.onnx.ml", 3): {"TreeEnsembleClassifier"}}
    path = str(tmp_path / "required_operators.config")
    scan.write_config(req, path, header="made by a test")
    text = open(path).read()
    assert text.splitlines() == ["# made by a test", "ai.onnx;13;Add", "ai.onnx;17;Gemm,Relu",
                                 "ai.onnx.ml;3;TreeEnsembleClassifier"]
    assert scan.read_config(path) == req
    # what onnxruntime's create_reduced_build_config.py writes, with type reduction
    ort_text = (
        "# Generated from model/s:\n"
        "# - /models/resnet.onnx\n"
        "ai.onnx;12;Add{\"inputs\": {\"0\": [\"float\", \"int32_t\"]}},Conv,"
        "Cast{\"inputs\": {\"0\": [\"float\"]}, \"outputs\": {\"0\": [\"int64_t\"]}},MaxPool\n"
        "\n"
        "com.microsoft;1;FusedConv\n"
        "ai.onnx;12;Relu\n")
    assert scan.parse_config(ort_text) == {("ai.onnx", 12): {"Add", "Conv", "Cast", "MaxPool", "Relu"},
                                           ("com.microsoft", 1): {"FusedConv"}}
    for bad, message in [("ai.onnx;12", "expected 'domain;opset;Op1,Op2"),
                         ("ai.onnx;x;Add", "opset 'x' is not an integer"),
                         ("ai.onnx;12;Add{\"inputs\": 1", "unbalanced '{'"),
                         ("ai.onnx;12;Add Sub", "'Add Sub' is not an operator name")]:
        with pytest.raises(onnxedge.InvalidArgument, match=r"<config> line 1: " + message.replace("(", r"\(")
                           .replace("{", r"\{")):
            scan.parse_config(bad)


# ---------------------------------------------------------------------------- the wheel

@pytest.fixture(scope="module")
def slim(tmp_path_factory):
    d = tmp_path_factory.mktemp("slim")
    path = _write(mlp_model(), d / "mlp.onnx")
    req = scan.required_operators(path)
    result = wheel.build_wheel(req, str(d / "dist"))
    full = wheel.build_wheel(req, str(d / "full"), all_ops=True)
    return result, full, d


def _run_isolated(site: str, code: str, *args: str) -> subprocess.CompletedProcess:
    """Run code with only `site` (the installed slim wheel) and numpy/flatbuffers importable:
    no site-packages, so the checkout's own onnxedge and its entry points are out of sight."""
    deps = os.path.join(site, "..", "deps")
    os.makedirs(deps, exist_ok=True)
    import flatbuffers
    for mod in (np, flatbuffers):
        src = os.path.dirname(mod.__file__)
        for name in (os.path.basename(src), os.path.basename(src) + ".libs"):
            target = os.path.join(os.path.dirname(src), name)
            link = os.path.join(deps, name)
            if os.path.exists(target) and not os.path.exists(link):
                os.symlink(target, link)
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": site + os.pathsep + deps}
    return subprocess.run([sys.executable, "-S", "-c", code] + list(args), env=env, cwd=site,
                          capture_output=True, text=True, timeout=120)


def _model_for_slim(model, tmp) -> str:
    """The model as .oxe: the slim wheel reads it without the onnx package."""
    path = str(tmp / (model.graph.name + ".oxe"))
    model_io.save(model_io.load(model.SerializeToString()), path)
    return path


LOAD = "import sys, numpy as np, onnxedge\nsrc = sys.argv[1]\n"


def test_wheel_layout_record_and_entry_points(slim):
    result, _, _ = slim
    assert result.tag == "py3-none-any" and result.path.endswith("onnxedge-%s-py3-none-any.whl"
                                                                 % onnxedge.__version__)
    zf = zipfile.ZipFile(result.path)
    names = zf.namelist()
    assert "onnxedge/kernels/matmul.py" in names and "onnxedge/kernels/activation.py" in names
    for dropped in ("elementwise", "recurrent", "attention", "pool"):
        assert "onnxedge/kernels/%s.py" % dropped not in names
        assert dropped in result.dropped_modules
    assert not [n for n in names if n.startswith(("onnxedge/web/", "onnxedge/edge/",
                                                  "onnxedge/reduced_build/")) or n.endswith(".pyc")]
    index_src = zf.read("onnxedge/kernels/op_modules.py").decode()
    table = {}
    exec(compile(index_src, "op_modules.py", "exec"), table)
    assert {("", "Gemm"), ("", "Relu"), ("", "Softmax")} <= set(table["OP_MODULES"])
    assert ("com.onnxedge", "FusedGemm") in table["OP_MODULES"]
    assert "rebuild it with this op added" in table["REDUCED_BUILD_HINT"]
    assert ("", "Cos") not in table["OP_MODULES"] and ("", "LSTM") not in table["OP_MODULES"]
    for mods in table["OP_MODULES"].values():
        for m in mods:
            assert "onnxedge/kernels/%s.py" % m in names
    [record] = [n for n in names if n.endswith(".dist-info/RECORD")]
    rows = [l.split(",") for l in zf.read(record).decode().splitlines()]
    assert sorted(r[0] for r in rows) == sorted(names)
    for name, digest, size in rows:
        if name == record:
            assert digest == size == ""
            continue
        data = zf.read(name)
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == "sha256=" + want and int(size) == len(data), name
    meta = zf.read("onnxedge-%s.dist-info/METADATA" % onnxedge.__version__).decode()
    assert "Name: onnxedge" in meta and "Requires-Dist: numpy>=1.17" in meta
    assert "Requires-Dist: flatbuffers>=2.0" in meta and "extra ==" not in meta
    whl = zf.read("onnxedge-%s.dist-info/WHEEL" % onnxedge.__version__).decode()
    assert "Root-Is-Purelib: true" in whl and "Tag: py3-none-any" in whl
    eps = zf.read("onnxedge-%s.dist-info/entry_points.txt" % onnxedge.__version__).decode()
    assert "onnxedge = onnxedge.cli:main" in eps
    assert "CPUExecutionProvider = onnxedge.providers.cpu:CPUExecutionProvider" in eps
    # an entry point whose module the wheel lacks is left out
    only_cpu = wheel.entry_points_for({"onnxedge/providers/cpu.py"})
    assert only_cpu == {"onnxedge.providers": {
        "CPUExecutionProvider": "onnxedge.providers.cpu:CPUExecutionProvider"}}
    # the same inputs give the same bytes
    again = wheel.build_wheel(scan.parse_config(zf.read("onnxedge/kernels/required_operators.config")
                                                .decode()), os.path.dirname(result.path) + "2")
    assert open(again.path, "rb").read() == open(result.path, "rb").read()


@pytest.fixture(scope="module")
def installed(slim):
    result, _, d = slim
    target = str(d / "site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--no-compile", "--target", target, result.path],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return target


def test_slim_wheel_installs_and_runs_the_mlp_alone(slim, installed, tmp_path):
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    np.save(str(tmp_path / "x.npy"), x)
    code = LOAD + (
        "assert onnxedge.__file__.startswith(sys.argv[3]), onnxedge.__file__\n"
        "s = onnxedge.InferenceSession(src)\n"
        "np.save(sys.argv[2], s.run(None, {'x': np.load(sys.argv[2] + '.npy')})[0])\n"
        "print(onnxedge.get_available_providers())\n"
        "import importlib\n"
        "try:\n"
        "    importlib.import_module('onnxedge.kernels.recurrent')\n"
        "except ImportError:\n"
        "    print('recurrent dropped')\n")
    out = str(tmp_path / "y")
    os.rename(str(tmp_path / "x.npy"), out + ".npy")
    proc = _run_isolated(installed, code, _model_for_slim(mlp_model(), tmp_path), out, installed)
    assert proc.returncode == 0, proc.stderr
    assert "['CPUExecutionProvider']" in proc.stdout and "recurrent dropped" in proc.stdout
    y = np.load(out + ".npy")
    np.testing.assert_allclose(y, mlp_reference(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y, onnxedge.InferenceSession(mlp_model().SerializeToString())
                               .run(None, {"x": x})[0], rtol=1e-6)


def test_dropped_op_fails_at_session_creation(installed, tmp_path):
    code = LOAD + (
        "try:\n"
        "    onnxedge.InferenceSession(src)\n"
        "except onnxedge.NotImplemented as e:\n"
        "    print('NotImplemented:', e)\n")
    proc = _run_isolated(installed, code, _model_for_slim(cos_model(), tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "NotImplemented: no kernel for op Cos (domain ai.onnx, opset 17)" in proc.stdout
    assert "this is a reduced onnxedge build" in proc.stdout   # and how to rebuild it


def _kernel_bytes(path):
    return sum(i.file_size for i in zipfile.ZipFile(path).infolist()
               if i.filename.startswith("onnxedge/kernels/"))


def test_size_report_much_smaller_than_full(slim, tmp_path):
    result, full, _ = slim
    rep = report.size_report(result, full.path)
    assert rep["wheel_bytes"] == os.path.getsize(result.path)
    # the core (session, loaders, optimizer, server) stays; the kernels shrink to a quarter
    assert rep["ratio"] < 0.75, rep["ratio"]
    assert _kernel_bytes(result.path) < 0.35 * _kernel_bytes(full.path)
    assert rep["ops_required"] == ["Gemm", "Relu", "Softmax", "com.onnxedge.FusedGemm"]
    assert rep["ops_missing"] == []
    assert rep["ops_kept"] + rep["ops_dropped"] == len(full.kept_ops) and rep["ops_dropped"] > 150
    assert rep["files"] == len(zipfile.ZipFile(result.path).namelist())
    rep_path, text_path = str(tmp_path / "r.json"), str(tmp_path / "r.txt")
    report.write_report(rep, rep_path, text_path)
    assert json.load(open(rep_path))["wheel_bytes"] == rep["wheel_bytes"]
    text = open(text_path).read()
    assert "ops required: 4 (Gemm, Relu, Softmax, com.onnxedge.FusedGemm)" in text
    assert "%.1f%%" % (100 * rep["ratio"]) in text


def test_missing_ops_are_reported(tmp_path):
    req = {("ai.onnx", 17): {"Relu", "NoSuchOp"}}
    result = wheel.build_wheel(req, str(tmp_path))
    assert result.missing_ops == [("", "NoSuchOp")]
    assert "WARNING: no kernel in onnxedge for: NoSuchOp" in report.format_text(report.size_report(result))


def test_platform_tags(tmp_path):
    lib = tmp_path / "liboxk.so"
    lib.write_bytes(b"\x7fELF....GLIBC_2.17\x00GLIBC_2.34\x00GLIBC_2.2.5\x00")
    files = {"onnxedge/edge/neon/lib/aarch64/liboxk.so": str(lib), "onnxedge/__init__.py": __file__}
    assert wheel.platform_tag(files, "aarch64") == "py3-none-manylinux_2_34_aarch64"
    lib.write_bytes(b"\x7fELF no versions")
    assert wheel.platform_tag(files, "aarch64") == "py3-none-linux_aarch64"
    assert wheel.platform_tag({"onnxedge/x.py": __file__}, None) == "py3-none-any"
    with pytest.raises(onnxedge.InvalidArgument, match="give arch="):
        wheel.platform_tag(files, None)
    with pytest.raises(onnxedge.InvalidArgument, match="not part of onnxedge"):
        wheel.build_wheel({("ai.onnx", 17): {"Relu"}}, str(tmp_path), extra_packages=["numpy"])


def test_much_smaller_than_the_project_wheel(slim, tmp_path):
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 61:
        pytest.skip("building the project wheel needs setuptools >= 61 (pyproject metadata)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path), root], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [full] = [os.path.join(str(tmp_path), f) for f in os.listdir(str(tmp_path)) if f.endswith(".whl")]
    rep = report.size_report(slim[0], full)
    assert rep["ratio"] < 0.5, report.format_text(rep)


def test_helpers_no_kept_file_imports_are_left_out():
    from onnxedge.reduced_build.wheel import drop_unimported_helpers
    helpers = {"onnxedge/fused_ops.py": b"from .numeric import erf\n",
               "onnxedge/numeric.py": b"import numpy\n",
               "onnxedge/geometry.py": b"X = 1\n"}
    contents = dict(helpers, **{"onnxedge/kernels/cast.py": b"import numpy as np\n"})
    assert drop_unimported_helpers(contents) == ["onnxedge/fused_ops.py", "onnxedge/geometry.py",
                                                 "onnxedge/numeric.py"]
    assert set(contents) == {"onnxedge/kernels/cast.py"}
    contents = dict(helpers, **{"onnxedge/kernels/conv.py": b"from .. import fused_ops\n"})
    assert drop_unimported_helpers(contents) == ["onnxedge/geometry.py"]
    assert "onnxedge/numeric.py" in contents and "onnxedge/fused_ops.py" in contents
