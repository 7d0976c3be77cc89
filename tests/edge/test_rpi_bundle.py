"""The Raspberry Pi bundle: what `onnxedge package rpi` writes, and the whole path under qemu —
install.sh offline with the aarch64 CPython of the ARM sysroot, the service started as its systemd
unit says, a request from the host answered as native onnxedge answers it."""
from __future__ import annotations

import http.client
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

import numpy as np
import pytest

import onnxedge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from benchmarks import models as bench_models  # noqa: E402
from onnxedge.edge.rpi import bundle as rpi  # noqa: E402

ARM_DIR = os.environ.get("ARM_DIR", os.path.join(ROOT, ".arm"))
SYSROOT = os.path.join(ARM_DIR, "sysroot")
ARM_PYTHON = os.path.join(SYSROOT, "usr", "bin", "python3.11")
EMULATOR = ["qemu-aarch64", "-cpu", "cortex-a72", "-L", SYSROOT]


@pytest.fixture(scope="module")
def model_paths(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("rpi_models"))
    paths = bench_models.build_all(d, ["mlp"])
    conv = os.path.join(d, "conv.onnx")
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
        [numpy_helper.from_array(np.random.RandomState(0).standard_normal((3, 2, 3, 3))
                                 .astype(np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(conv, "wb") as f:
        f.write(m.SerializeToString())
    return {"mlp": paths["mlp"], "conv": conv}


@pytest.fixture(scope="module")
def bundle(model_paths, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bundle") / "mlp-pi")
    return rpi.make_bundle([model_paths["mlp"]], out)


def test_bundle_layout(bundle):
    names = sorted(os.listdir(bundle.folder))
    assert names == ["README.md", "SHA256SUMS", "install.sh", "models", "onnxedge.service",
                     "onnxedge.service.in", "required_operators.config", "size_report.json",
                     "size_report.txt", "wheels"]
    assert os.listdir(os.path.join(bundle.folder, "models")) == ["mlp.oxe"]
    wheels = sorted(os.listdir(os.path.join(bundle.folder, "wheels")))
    assert [w.split("-")[0] for w in wheels] == ["flatbuffers", "numpy", "onnxedge", "pip"]
    assert re.match(r"numpy-[\d.]+-cp311-cp311-.*aarch64.*\.whl$", wheels[1])
    # the onnxedge wheel: reduced, with the aarch64 NEON library only, and a platform tag
    assert re.match(r"onnxedge-[\d.]+-py3-none-manylinux_2_\d+_aarch64\.whl$", wheels[2]), wheels[2]
    names = zipfile.ZipFile(bundle.wheel).namelist()
    assert "onnxedge/edge/neon/lib/aarch64/libonnxedge_kernels.so" in names
    assert not [n for n in names if "/lib/x86_64/" in n or n.startswith("onnxedge/edge/rpi/")]
    assert "onnxedge/kernels/recurrent.py" not in names
    eps = zipfile.ZipFile(bundle.wheel).read("onnxedge-%s.dist-info/entry_points.txt"
                                             % onnxedge.__version__).decode()
    assert "NeonExecutionProvider = onnxedge.edge.neon" in eps and "WebGpu" not in eps
    assert "Root-Is-Purelib: false" in zipfile.ZipFile(bundle.wheel).read(
        "onnxedge-%s.dist-info/WHEEL" % onnxedge.__version__).decode()
    # the model is the optimized one, and its ops are what the config and the report name
    from onnxedge.reduced_build import scan
    req = scan.read_config(os.path.join(bundle.folder, "required_operators.config"))
    assert req == scan.required_operators(bundle.models[0])
    assert sorted(bundle.report["ops_required"]) == sorted(
        "%s%s" % ("" if d == "ai.onnx" else d + ".", op) for (d, _), ops in req.items() for op in ops)
    unit = open(os.path.join(bundle.folder, "onnxedge.service")).read()
    assert ("ExecStart=/opt/onnxedge/venv/bin/onnxedge serve /opt/onnxedge/models/mlp.oxe "
            "--host 127.0.0.1 --port 8080 --providers NeonExecutionProvider,CPUExecutionProvider") in unit
    readme = open(os.path.join(bundle.folder, "README.md")).read()
    assert "@" not in re.sub(r"--data-binary @x\.npy", "", readme), readme
    assert '"input": {"dtype": "float32", "shape": [1, 784]' in readme
    assert "the models' %d operators (its kernel modules serve %d ops)" % (
        len(bundle.report["ops_required"]), bundle.report["ops_kept"]) in readme
    install = open(os.path.join(bundle.folder, "install.sh")).read()
    assert "%%" not in install and "MODEL=mlp.oxe" in install and "PYVER=3.11" in install
    assert subprocess.run(["sh", "-n", os.path.join(bundle.folder, "install.sh")]).returncode == 0
    sums = dict(reversed(l.split("  ")) for l in open(os.path.join(bundle.folder, "SHA256SUMS"))
                .read().splitlines())
    assert "wheels/" + os.path.basename(bundle.wheel) in sums and "install.sh" in sums
    with tarfile.open(bundle.tarball) as tf:
        members = tf.getnames()
    assert "mlp-pi/install.sh" in members and "mlp-pi/models/mlp.oxe" in members


def test_cli_several_models_and_wheels_folder(bundle, model_paths, tmp_path):
    wheels = os.path.join(bundle.folder, "wheels")
    out = str(tmp_path / "two")
    proc = subprocess.run([sys.executable, "-m", "onnxedge.cli", "package", "rpi", model_paths["mlp"],
                           model_paths["conv"], "-o", out, "--wheels", wheels, "--serve", "conv",
                           "--port", "9000", "--no-neon"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "bundle: %s" % out in proc.stdout
    assert sorted(os.listdir(os.path.join(out, "models"))) == ["conv.oxe", "mlp.oxe"]
    unit = open(os.path.join(out, "onnxedge.service")).read()
    assert "models/conv.oxe --host 127.0.0.1 --port 9000 --providers CPUExecutionProvider" in unit
    [whl] = [w for w in os.listdir(os.path.join(out, "wheels")) if w.startswith("onnxedge-")]
    assert whl.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(os.path.join(out, "wheels", whl)).namelist()
    assert "onnxedge/kernels/conv.py" in names and not [n for n in names if "/neon/" in n]
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    unknown = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    unknown.ir_version = 8
    unknown_path = str(tmp_path / "unknown.onnx")
    with open(unknown_path, "wb") as f:
        f.write(unknown.SerializeToString())
    for args, message in [(["nope.onnx"], "model nope.onnx does not exist"),
                          ([unknown_path], "NotImplemented: the models use ops onnxedge has no "
                                           "kernel for: NoSuchOp"),
                          ([model_paths["mlp"], "--serve", "resnet"], "--serve resnet is not one of"),
                          ([model_paths["mlp"], "--wheels", "/nonexistent"], "--wheels /nonexistent is not a folder"),
                          ([model_paths["mlp"], "-o", os.path.dirname(model_paths["mlp"])],
                           "exists and is not an onnxedge bundle")]:
        proc = subprocess.run([sys.executable, "-m", "onnxedge.cli", "package", "rpi", "-o",
                               str(tmp_path / "bad"), "--no-neon"] + args, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
        assert not os.path.exists(str(tmp_path / "bad")), "a half-made bundle was left behind"


# ----------------------------------------------------------------------------- under qemu

def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _get(port: int, path: str, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST" if body is not None else "GET", path, body=body,
                 headers={"Content-Type": "application/json"} if body is not None else {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, json.loads(data.decode())


@pytest.mark.slow
def test_bundle_installs_offline_and_serves_under_qemu(bundle, model_paths):
    if not shutil.which("qemu-aarch64") or not os.path.isfile(ARM_PYTHON):
        pytest.skip("needs qemu-aarch64 and the aarch64 CPython sysroot (%s): run `make setup-neon`"
                    % ARM_PYTHON)
    # a private folder: pytest's numbered tmp folders may be pruned by a concurrent pytest run
    with tempfile.TemporaryDirectory(prefix="onnxedge-rpi-") as tmp:
        _install_and_query(bundle, model_paths, pathlib.Path(tmp))


def _install_and_query(bundle, model_paths, tmp_path):
    with tarfile.open(bundle.tarball) as tf:
        tf.extractall(str(tmp_path))
    prefix, port = str(tmp_path / "opt" / "onnxedge"), _free_port()
    env = dict(os.environ, ONNXEDGE_EMULATOR=" ".join(EMULATOR),
               PIP_INDEX_URL="http://127.0.0.1:9/unreachable", PIP_FIND_LINKS="")
    proc = subprocess.run(["sh", str(tmp_path / "mlp-pi" / "install.sh"), "--prefix", prefix, "--port",
                           str(port), "--no-systemd", "--python", " ".join(EMULATOR + [ARM_PYTHON])],
                          env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "providers: NeonExecutionProvider, CPUExecutionProvider" in proc.stdout, proc.stdout
    # start the service as its unit says, the venv's console script run by the emulated python
    unit = open(os.path.join(prefix, "onnxedge.service")).read()
    assert "@" not in unit, unit
    [cmd] = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    argv = shlex.split(cmd)
    assert argv[0] == os.path.join(prefix, "venv", "bin", "onnxedge") and argv[1] == "serve"
    assert "--port" in argv and argv[argv.index("--port") + 1] == str(port)
    [workdir] = re.findall(r"^WorkingDirectory=(.*)$", unit, re.M)
    assert workdir == prefix
    server = subprocess.Popen(EMULATOR + [os.path.join(prefix, "venv", "bin", "python")] + argv,
                              cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                assert _get(port, "/healthz") == (200, {"status": "ok"})
                break
            except (ConnectionError, OSError):
                assert server.poll() is None and time.time() < deadline, server.communicate()[1]
                time.sleep(0.5)
        status, meta = _get(port, "/metadata")
        assert status == 200 and meta["providers"] == ["NeonExecutionProvider", "CPUExecutionProvider"]
        x = bench_models.make_inputs("mlp", batch=2, seed=3)["input"]
        status, doc = _get(port, "/v1/run", json.dumps({"inputs": {"input": {
            "dtype": "float32", "shape": list(x.shape), "data": x.ravel().tolist()}}}).encode())
        assert status == 200, doc
        got = np.array(doc["outputs"]["output"]["data"], np.float32)
        want = onnxedge.InferenceSession(model_paths["mlp"]).run(None, {"input": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        status, doc = _get(port, "/v1/run", json.dumps({"inputs": {"input": [[1.0, 2.0]]}}).encode())
        assert status == 400 and "dimension 1 is 2, the model expects 784" in doc["error"]["message"]
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err
        assert "stopped (SIGTERM)" in err and '"POST /v1/run" 200' in err
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
