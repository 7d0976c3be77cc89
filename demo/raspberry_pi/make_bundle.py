"""Make the Raspberry Pi bundle of the demo MLP, and (optionally) try it under qemu.

    python demo/raspberry_pi/make_bundle.py [--out build/rpi/mlp-pi] [--try-qemu]

Writes the demo MLP (demo/models/mlp.onnx), then runs `onnxedge package rpi` on it. With
--try-qemu it also installs the bundle with the aarch64 CPython of `.arm/` (made by
`make setup-neon`) under qemu-aarch64, starts the service, sends the sample input from this
machine and prints both answers: what the Pi's onnxedge says and what native onnxedge says.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from typing import List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ARM = os.path.join(ROOT, ".arm", "sysroot")
EMULATOR = ["qemu-aarch64", "-cpu", "cortex-a72", "-L", ARM]


def run(cmd: List[str], **kw) -> None:
    """Run a command, echoing it; stop on failure."""
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def try_qemu(out: str, model: str, sample: str, port: int = 18080) -> None:
    """Install the bundle under qemu into OUT-installed/ and ask the service for the sample."""
    prefix = out + "-installed"
    env = dict(os.environ, ONNXEDGE_EMULATOR=" ".join(EMULATOR))
    run(["sh", os.path.join(out, "install.sh"), "--prefix", prefix, "--port", str(port),
         "--no-systemd", "--python", " ".join(EMULATOR + [os.path.join(ARM, "usr/bin/python3.11")])],
        env=env)
    unit = open(os.path.join(prefix, "onnxedge.service")).read()
    argv = shlex.split(re.search(r"^ExecStart=(.*)$", unit, re.M).group(1))
    server = subprocess.Popen(EMULATOR + [os.path.join(prefix, "venv/bin/python")] + argv, cwd=prefix)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5)
                break
            except OSError:
                time.sleep(0.5)
        x = np.load(sample)
        body = json.dumps({"inputs": {"input": x.tolist()}}).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/run" % port, body,
                                     {"Content-Type": "application/json"})
        got = np.array(json.load(urllib.request.urlopen(req, timeout=120))["outputs"]["output"]["data"])
        sys.path.insert(0, ROOT)
        import onnxedge
        want = onnxedge.InferenceSession(model).run(None, {"input": x})[0]
        print("Pi (qemu) answer: top class %d, %s" % (got.argmax(), np.round(got, 4).tolist()))
        print("native answer:    top class %d, max abs difference %.2e"
              % (want.argmax(), float(np.abs(got - want).max())))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Build the demo model and its bundle (and try it under qemu when asked)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "build", "rpi", "mlp-pi"))
    p.add_argument("--try-qemu", action="store_true", help="install and query it under qemu-aarch64")
    args = p.parse_args(argv)
    models = os.path.join(ROOT, "demo", "models")
    run([sys.executable, os.path.join(ROOT, "demo", "make_models.py"), "--out-dir", models])
    model = os.path.join(models, "mlp.onnx")
    run([sys.executable, "-m", "onnxedge.cli", "package", "rpi", model, "-o", args.out])
    print(open(os.path.join(args.out, "size_report.txt")).read())
    if args.try_qemu:
        try_qemu(os.path.abspath(args.out), model, os.path.join(models, "mlp_input.npy"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
