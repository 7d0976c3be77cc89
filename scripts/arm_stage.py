"""Lays out this checkout as an importable `onnxedge` for the aarch64 python under qemu.

Usage: .venv/bin/python scripts/arm_stage.py [DEST]     (DEST defaults to .arm/stage)
then:  PYTHONPATH=DEST scripts/qemu-python -c "import onnxedge; print(onnxedge.get_available_providers())"

DEST/onnxedge/ holds symlinks to every entry of core/ plus edge/, web/ and reduced_build/ (as
setuptools' package-dir maps them), and DEST/onnxedge-<version>.dist-info/ carries the entry
points of pyproject.toml, so providers and CLI commands are found as in an installed wheel.
The C library the NEON provider loads there is edge/neon/lib/aarch64/ (edge/kernels/build.py).
Re-run after adding files to core/ (it is cheap and idempotent).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

try:
    import tomllib
except ImportError:  # pragma: no cover - Python < 3.11
    tomllib = None  # type: ignore

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def stage(dest: str) -> str:
    """Build DEST (atomically replaced) and return it."""
    proj = _project()
    dirs = proj["tool"]["setuptools"]["package-dir"]
    parent = os.path.dirname(os.path.abspath(dest)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".stage-", dir=parent)
    pkg = os.path.join(tmp, "onnxedge")
    os.makedirs(pkg)
    core = os.path.join(REPO, dirs["onnxedge"])
    for entry in os.listdir(core):
        if entry != "__pycache__":
            os.symlink(os.path.join(core, entry), os.path.join(pkg, entry))
    for name, folder in dirs.items():
        if name != "onnxedge" and name.count(".") == 1:
            os.symlink(os.path.join(REPO, folder), os.path.join(pkg, name.split(".")[1]))
    version = proj["project"]["version"]
    info = os.path.join(tmp, "onnxedge-%s.dist-info" % version)
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: onnxedge\nVersion: %s\n" % version)
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, eps in proj["project"].get("entry-points", {}).items():
            f.write("[%s]\n" % group)
            for k, v in eps.items():
                f.write("%s = %s\n" % (k, v))
            f.write("\n")
        f.write("[console_scripts]\n")
        for k, v in proj["project"].get("scripts", {}).items():
            f.write("%s = %s\n" % (k, v))
    old = dest + ".old"
    if os.path.exists(dest):
        os.rename(dest, old)
    os.rename(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


if __name__ == "__main__":
    out = stage(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, ".arm", "stage"))
    print("[arm-stage] onnxedge staged for qemu at %s" % out)
