"""`onnxedge reduce`: the stripped runtime wheel runs the benchmark models alone (Python 3.8 +
numpy 1.17, what Pyodide 0.17.1 runs, and Python 3.11 + numpy 2), equal to onnxruntime; a dropped
op fails with the command that adds it; sizes against the full project wheel."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import model_io
from onnxedge.cli import main as cli_main
from onnxedge.reduced_build import scan
from onnxedge.reduced_build.build import build_full_wheel, reduce

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from benchmarks import models as bench  # noqa: E402

pytestmark = pytest.mark.needs_setup   # the Python 3.8 venv and the wasm kernels (`make setup`)

INTERPRETERS = {"py38": os.path.join(ROOT, ".venv38", "bin", "python"),
                "py311": os.path.join(ROOT, ".venv", "bin", "python")}
MODELS = ("mlp", "resnet18", "bert_encoder")

# runs inside the isolated interpreter: each model from argv, feeds/outputs as .npz
RUNNER = r"""
import json, sys, numpy as np, onnxedge
from onnxedge.kernels import registry
assert onnxedge.__file__.startswith(sys.argv[1]), onnxedge.__file__
cfg = open(sys.argv[1] + "/onnxedge/kernels/required_operators.config").read()
for line in cfg.splitlines():
    if line and not line.startswith("#"):
        dom, opset, ops = line.split(";")
        for op in ops.split(","):
            registry.resolve(dom, op, int(opset))   # every op the build was made for is there
for model, feeds, out in zip(*[iter(sys.argv[2:])] * 3):
    s = onnxedge.InferenceSession(model)
    f = dict(np.load(feeds))
    np.savez(out, *s.run(None, f))
mods = sorted(m for m in sys.modules if m.startswith(("onnxedge", "flatbuffers", "onnx")))
print(json.dumps(mods))
"""


def _deps_dir(python: str, where: str) -> str:
    """A folder holding only numpy of `python` (links), so nothing else is importable."""
    os.makedirs(where, exist_ok=True)
    src = subprocess.check_output([python, "-c", "import numpy, os; print(os.path.dirname("
                                   "numpy.__file__))"], text=True).strip()
    for name in (os.path.basename(src), os.path.basename(src) + ".libs"):
        target = os.path.join(os.path.dirname(src), name)
        if os.path.exists(target) and not os.path.exists(os.path.join(where, name)):
            os.symlink(target, os.path.join(where, name))
    return where


def run_isolated(python: str, site: str, deps: str, code: str, *args: str) -> subprocess.CompletedProcess:
    """Run code under `python -S` with only the unpacked wheel and numpy importable."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": site + os.pathsep + deps}
    return subprocess.run([python, "-S", "-c", code] + list(args), env=env, cwd=site,
                          capture_output=True, text=True, timeout=300)


def unpack(wheel_path: str, site: str) -> str:
    """The wheel unzipped into `site` (what micropip does in the page)."""
    with zipfile.ZipFile(wheel_path) as zf:
        zf.extractall(site)
    return site


@pytest.fixture(scope="module")
def pythons(tmp_path_factory):
    for name, python in INTERPRETERS.items():
        assert os.path.isfile(python), "%s missing: run `make setup` (%s)" % (python, name)
    d = tmp_path_factory.mktemp("deps")
    return {name: (python, _deps_dir(python, str(d / name))) for name, python in INTERPRETERS.items()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{model: (ReduceResult, feeds path, reference outputs)} for the three benchmark models."""
    d = tmp_path_factory.mktemp("reduce")
    paths = bench.build_all(str(d / "onnx"), MODELS)
    out = {}
    for name in MODELS:
        feeds = bench.make_inputs(name)
        np.savez(str(d / (name + "_feeds.npz")), **feeds)
        try:
            import onnxruntime as ort
            ref = ort.InferenceSession(paths[name], providers=["CPUExecutionProvider"]).run(None, feeds)
        except ImportError:   # the Python 3.8 venv has no onnxruntime: the full install instead
            ref = onnxedge.InferenceSession(paths[name]).run(None, feeds)
        result = reduce([paths[name]], str(d / name))
        out[name] = (result, str(d / (name + "_feeds.npz")), ref, paths[name])
    return out


@pytest.mark.parametrize("interp", sorted(INTERPRETERS))
def test_stripped_wheels_run_the_benchmark_models_alone(built, pythons, interp, tmp_path):
    python, deps = pythons[interp]
    for name in MODELS:
        result, feeds, ref, _ = built[name]
        site = unpack(result.wheel, str(tmp_path / name))
        out = str(tmp_path / (name + "_out.npz"))
        proc = run_isolated(python, site, deps, RUNNER, site, result.models[name], feeds, out)
        assert proc.returncode == 0, "%s on %s: %s" % (name, interp, proc.stderr[-3000:])
        got = np.load(out)
        assert len(got.files) == len(ref)
        for i, want in enumerate(ref):
            np.testing.assert_allclose(got["arr_%d" % i], want, rtol=1e-4, atol=1e-5,
                                       err_msg="%s output %d on %s" % (name, i, interp))
        loaded = json.loads(proc.stdout.strip().splitlines()[-1])
        # the runtime wheel needs neither the optimizer, the .onnx loader, onnx nor flatbuffers
        assert not [m for m in loaded if m.split(".")[:2] in (["onnxedge", "optimizer"],
                    ["onnxedge", "onnx_loader"]) or m.split(".")[0] in ("onnx", "flatbuffers")], loaded
        assert "onnxedge.format.reader" in loaded and "onnxedge.optimizer_stamp" in loaded


def test_wheel_contents_and_metadata(built):
    result = built["mlp"][0]
    names = zipfile.ZipFile(result.wheel).namelist()
    for gone in ("onnxedge/optimizer/__init__.py", "onnxedge/onnx_loader.py", "onnxedge/cli.py",
                 "onnxedge/serve.py", "onnxedge/format/writer.py", "onnxedge/kernels/pool.py",
                 "onnxedge/kernels/elementwise.py"):
        assert gone not in names
    assert not [n for n in names if n.startswith("onnxedge/format/fb/")]
    meta = zipfile.ZipFile(result.wheel).read("onnxedge-%s.dist-info/METADATA" % onnxedge.__version__)
    assert b"Requires-Dist: numpy" in meta and b"flatbuffers" not in meta
    kernels = zipfile.ZipFile(result.wheel).read("onnxedge/kernels/matmul.py").decode()
    # only Gemm and FusedGemm of the matmul family stay, without docstrings or comments
    assert "FusedGemm" in kernels and "FusedMatMul" not in kernels and "MatMulNBits" not in kernels
    assert "onnxedge/kernels/conv.py" not in names and "onnxedge/kernels/attention.py" not in names
    assert '"""' not in kernels and "#" not in kernels
    assert open(result.config).read().splitlines()[1:] == [
        "ai.onnx;17;Gemm,Softmax", "com.onnxedge;1;FusedGemm"]
    assert scan.read_config(result.config) == scan.parse_config(
        zipfile.ZipFile(result.wheel).read("onnxedge/kernels/required_operators.config").decode())
    rep = json.load(open(result.report_json))
    assert rep["wheel_bytes"] == os.path.getsize(result.wheel)
    assert rep["models"]["mlp"]["bytes"] == os.path.getsize(result.models["mlp"])
    assert rep["ops_kept"] == 3 and "ops the wheel serves: 3 (the required ones)" in open(result.report_text).read()
    m = model_io.load(result.models["mlp"])
    assert m.metadata_props["onnxedge.optimized"].startswith("all ")
    assert [n.op_type for n in m.graph.nodes] == ["FusedGemm", "FusedGemm", "Gemm", "Softmax"]


def cos_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    g = helper.make_graph([helper.make_node("Cos", ["x"], ["y"])], "cosine", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


TRY = r"""
import sys, logging, numpy as np, onnxedge
logging.basicConfig()
try:
    s = onnxedge.InferenceSession(sys.argv[1])
    print("ran", s.run(None, {"x": np.array([0.0, 1.0, 2.0], np.float32)})[0].tolist())
except onnxedge.NotImplemented as e:
    print("NotImplemented:", e)
"""


def test_dropped_op_names_the_command_that_adds_it(built, pythons, tmp_path):
    result, _, _, mlp_path = built["mlp"]
    python, deps = pythons["py38"]
    site = unpack(result.wheel, str(tmp_path / "site"))
    cos = str(tmp_path / "cos.oxe")
    model_io.save(model_io.load(cos_model().SerializeToString()), cos)    # not optimized
    proc = run_isolated(python, site, deps, TRY, cos)
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert message.startswith("NotImplemented: no kernel for op Cos (domain ai.onnx, opset 17); "
                              "this is a reduced onnxedge build"), message
    command = "onnxedge reduce mlp.onnx --add-op 'ai.onnx;17;Cos' -o OUT/"
    assert command in message and site + "/onnxedge/kernels/required_operators.config" in message
    # the command it gives does make a build that runs the model (unoptimized: a warning says so)
    again = reduce([mlp_path], str(tmp_path / "again"), add_ops=["ai.onnx;17;Cos"])
    site2 = unpack(again.wheel, str(tmp_path / "site2"))
    index = open(os.path.join(site2, "onnxedge", "kernels", "op_modules.py")).read()
    assert "`onnxedge reduce mlp.onnx --config %(config_arg)s --add-op %(add_op)s" in index
    proc = run_isolated(python, site2, deps, TRY, cos)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(eval(proc.stdout.split("ran", 1)[1]), np.cos([0.0, 1.0, 2.0]), rtol=1e-6)
    assert "has no optimizer: it runs as loaded" in proc.stderr
    # an .onnx file is refused with the way to convert it
    onnx_path = str(tmp_path / "cos.onnx")
    with open(onnx_path, "wb") as f:
        f.write(cos_model().SerializeToString())
    proc = run_isolated(python, site2, deps, TRY, onnx_path)
    assert "NotImplemented: model %s is .onnx: this is a reduced onnxedge build without " \
           "onnx_loader (it reads only .oxe models); convert the model" % onnx_path in proc.stdout
    assert "onnxedge convert MODEL.onnx -o MODEL.oxe --optimize all" in proc.stdout


def test_cli_with_an_onnxruntime_config(tmp_path, capsys):
    config = tmp_path / "required_operators.config"
    config.write_text("# from onnxruntime's create_reduced_build_config.py\n"
                      "ai.onnx;13;Relu,Add{\"inputs\": {\"0\": [\"float\"]}}\n")
    cos = str(tmp_path / "cos.onnx")
    with open(cos, "wb") as f:
        f.write(cos_model().SerializeToString())
    rc = cli_main(["reduce", cos, "--config", str(config), "--add-op", "ai.onnx;13;Softmax",
                   "-o", str(tmp_path / "out")])
    assert rc == 0
    out = capsys.readouterr()
    assert "ops required: 4 (Add, Cos, Relu, Softmax)" in out.out
    assert "model cosine" not in out.out and "model cos: " in out.out
    assert scan.read_config(str(tmp_path / "out" / "required_operators.config")) == {
        ("ai.onnx", 13): {"Relu", "Add", "Softmax"}, ("ai.onnx", 17): {"Cos"}}
    wheel_path = os.path.join(str(tmp_path), "out", "onnxedge-%s-py3-none-any.whl" % onnxedge.__version__)
    index = zipfile.ZipFile(wheel_path).read("onnxedge/kernels/op_modules.py").decode()
    table = {}
    exec(compile(index, "op_modules.py", "exec"), table)
    assert set(table["OP_MODULES"]) == {("", "Add"), ("", "Cos"), ("", "Relu"), ("", "Softmax")}
    with pytest.raises(onnxedge.InvalidArgument, match="--add-op 'ai.onnx;x;Cos' line 1: opset 'x'"):
        reduce([], str(tmp_path / "bad"), add_ops=["ai.onnx;x;Cos"])
    with pytest.raises(onnxedge.InvalidArgument, match="nothing to reduce for"):
        reduce([], str(tmp_path / "none"))


def test_sizes_against_the_full_project_wheel(built, tmp_path):
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 61:
        pytest.skip("building the project wheel needs setuptools >= 61 (pyproject metadata)")
    full = build_full_wheel(str(tmp_path))
    full_bytes = os.path.getsize(full)
    sizes = {name: os.path.getsize(built[name][0].wheel) for name in MODELS}
    assert sizes["mlp"] <= 150 * 1024 and sizes["mlp"] <= 0.10 * full_bytes, (sizes, full_bytes)
    for name in MODELS:
        assert sizes[name] <= 0.15 * full_bytes, (name, sizes, full_bytes)
    # the profile that keeps the whole core (the Pi bundle's, with its CLI and server) is larger
    full_profile = reduce([built["mlp"][3]], str(tmp_path / "fullprofile"), profile="full")
    names = zipfile.ZipFile(full_profile.wheel).namelist()
    assert "onnxedge/cli.py" in names and "onnxedge/optimizer/__init__.py" in names
    assert os.path.getsize(full_profile.wheel) > sizes["mlp"]


def test_with_wasm_carries_the_page_kernels_as_web_assets(tmp_path, capsys):
    """`--with-wasm`: the wasm SIMD provider, oxk.js and both kernel modules ride in the wheel
    (byte-identical to the build's), and the provider's entry point is listed."""
    from onnxedge.web import wasm
    cos = str(tmp_path / "cos.onnx")
    with open(cos, "wb") as f:
        f.write(cos_model().SerializeToString())
    assert cli_main(["reduce", cos, "--with-wasm", "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    wheel_path = os.path.join(str(tmp_path), "out", "onnxedge-%s-py3-none-any.whl" % onnxedge.__version__)
    with zipfile.ZipFile(wheel_path) as zf:
        names = set(zf.namelist())
        for path in wasm.asset_paths():
            arc = "onnxedge/web/wasm/" + os.path.relpath(path, wasm.HERE).replace(os.sep, "/")
            assert arc in names, arc
            with open(path, "rb") as f:
                assert zf.read(arc) == f.read(), arc
        assert "onnxedge/web/wasm/provider.py" in names
        eps = zf.read("onnxedge-%s.dist-info/entry_points.txt" % onnxedge.__version__).decode()
    assert "WasmSimdExecutionProvider = onnxedge.web.wasm.provider:WasmSimdExecutionProvider" in eps


@pytest.mark.parametrize("interp", sorted(INTERPRETERS))
def test_with_onnx_opens_the_models_as_onnx(built, pythons, tmp_path, interp):
    """`reduce --with-onnx`: the runtime wheel keeps the pure-Python .onnx reader and the raw
    models' kernels, and runs the original .onnx file (no onnx package, no optimizer) with the
    same outputs; the default build stays without it."""
    _, feeds, ref, mlp_path = built["mlp"]
    result = reduce([mlp_path], str(tmp_path / "with_onnx"), with_onnx=True)
    names = zipfile.ZipFile(result.wheel).namelist()
    assert "onnxedge/onnx_loader.py" in names and "onnxedge/onnx_wire.py" in names
    assert "onnxedge/onnx_wire.py" not in zipfile.ZipFile(built["mlp"][0].wheel).namelist()
    python, deps = pythons[interp]
    site = unpack(result.wheel, str(tmp_path / "site"))
    out = str(tmp_path / "out.npz")
    proc = run_isolated(python, site, deps, RUNNER, site, mlp_path, feeds, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(out)
    for i, want in enumerate(ref):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=1e-4, atol=1e-5)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "onnxedge.onnx_wire" in loaded and not [m for m in loaded if m.split(".")[0] == "onnx"]
