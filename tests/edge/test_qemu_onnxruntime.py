"""onnxruntime's own aarch64 wheel in the ARM sysroot (scripts/arm_sysroot.sh), under
qemu-aarch64 -cpu cortex-a72: it imports, runs the benchmark MLP, and agrees with onnxedge (NEON
provider and numpy CPU provider) in the same emulated process and with onnxruntime on the host.
This is what benchmarks/aarch64_ort.py counts instructions on; skipped where qemu, the sysroot
or its onnxruntime is missing (make setup-neon)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from onnxedge import model_io

from neon_helpers import REPO, ensure_built, mlp, ort_run

pytestmark = pytest.mark.needs_setup   # qemu-user, the aarch64 sysroot with onnxruntime, the C kernels

ARM = os.environ.get("ARM_DIR", os.path.join(REPO, ".arm"))
QEMU_PY = os.path.join(REPO, "scripts", "qemu-python")
GUEST = """
import json, platform, sys
import numpy as np
import onnxruntime, onnxedge
d = sys.argv[1]
feeds = dict(np.load(d + "/mlp.npz"))
opts = onnxruntime.SessionOptions()
opts.intra_op_num_threads = 1
ort = onnxruntime.InferenceSession(d + "/mlp.onnx", opts, providers=["CPUExecutionProvider"])
np.save(d + "/out_ort.npy", ort.run(None, feeds)[0])
for tag, providers in (("neon", ["NeonExecutionProvider", "CPUExecutionProvider"]),
                       ("cpu", ["CPUExecutionProvider"])):
    sess = onnxedge.InferenceSession(d + "/mlp.oxe", providers=providers)
    np.save(d + "/out_%s.npy" % tag, sess.run(None, feeds)[0])
json.dump({"machine": platform.machine(), "onnxruntime": onnxruntime.__version__,
           "ort_file": onnxruntime.__file__, "ort_providers": ort.get_providers(),
           "onnxedge_providers": onnxedge.get_available_providers()}, open(d + "/report.json", "w"))
"""


def _skip_reason() -> str:
    if shutil.which("qemu-aarch64") is None:
        return "qemu-aarch64 is not installed (make setup-neon)"
    if not os.path.exists(os.path.join(ARM, "sysroot", "usr", "bin", "python3.11")):
        return "no aarch64 sysroot at %s (make setup-neon)" % ARM
    if not os.path.isdir(os.path.join(ARM, "site", "onnxruntime")):
        return "no onnxruntime aarch64 wheel in %s/site (scripts/arm_sysroot.sh)" % ARM
    if shutil.which("aarch64-linux-gnu-gcc") is None and not os.path.exists(
            os.path.join(REPO, "edge", "neon", "lib", "aarch64", "libonnxedge_kernels.so")):
        return "no aarch64 cross compiler to build the NEON kernels (make setup-neon)"
    return ""


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    """Run the MLP in the aarch64 sysroot under qemu: (report, outputs by engine, host reference)."""
    why = _skip_reason()
    if why:
        pytest.skip(why)
    ensure_built("aarch64")
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import arm_stage
    stage = arm_stage.stage(str(tmp_path_factory.mktemp("stage") / "site"))
    d = str(tmp_path_factory.mktemp("ort_qemu"))
    model, feeds = mlp()
    with open(os.path.join(d, "mlp.onnx"), "wb") as f:
        f.write(model)
    model_io.save(model_io.load(model), os.path.join(d, "mlp.oxe"))   # the sysroot has no `onnx`
    np.savez(os.path.join(d, "mlp.npz"), **feeds)
    with open(os.path.join(d, "guest.py"), "w") as f:
        f.write(GUEST)
    env = dict(os.environ, PYTHONPATH=stage, QEMU_CPU="cortex-a72", ARM_DIR=ARM)
    r = subprocess.run([QEMU_PY, os.path.join(d, "guest.py"), d], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, "qemu guest failed:\n%s\n%s" % (r.stdout[-3000:], r.stderr[-3000:])
    with open(os.path.join(d, "report.json")) as f:
        report = json.load(f)
    outs = {e: np.load(os.path.join(d, "out_%s.npy" % e)) for e in ("ort", "neon", "cpu")}
    return report, outs, ort_run(model, feeds)[0]


def test_onnxruntime_aarch64_wheel_imports_under_qemu(guest):
    report = guest[0]
    assert report["machine"] == "aarch64"
    assert report["ort_file"].startswith(os.path.join(ARM, "site")), report["ort_file"]
    assert report["ort_providers"] == ["CPUExecutionProvider"]
    assert "NeonExecutionProvider" in report["onnxedge_providers"]


def test_onnxruntime_aarch64_matches_host_onnxruntime(guest):
    _, outs, host = guest
    assert outs["ort"].shape == host.shape == (3, 10)
    np.testing.assert_allclose(outs["ort"], host, rtol=1e-4, atol=1e-5 * float(np.abs(host).max()))


@pytest.mark.parametrize("engine", ["neon", "cpu"])
def test_onnxedge_matches_onnxruntime_aarch64(guest, engine):
    _, outs, _ = guest
    ref = outs["ort"]
    np.testing.assert_allclose(outs[engine], ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
