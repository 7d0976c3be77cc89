"""The aarch64 wheels a Pi bundle needs besides onnxedge: numpy, flatbuffers and pip.

Taken from a folder the user gives (`--wheels DIR`), else downloaded once with pip into a cache
(`~/.cache/onnxedge/rpi-wheels/cp311-aarch64/`) and copied from there.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Optional

from onnxedge.errors import Fail, InvalidArgument

PINS = {"numpy": "2.4.6", "flatbuffers": "25.12.19", "pip": "26.3"}
PLATFORM = "manylinux_2_28_aarch64"


def cache_dir(python: str) -> str:
    """The download cache for a Python version's aarch64 wheels."""
    root = os.environ.get("ONNXEDGE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "onnxedge")
    return os.path.join(root, "rpi-wheels", "cp%s-aarch64" % python.replace(".", ""))


def _patterns(name: str, python: str) -> List[str]:
    cp = "cp" + python.replace(".", "")
    if name == "numpy":
        return ["numpy-*-%s-%s-*aarch64*.whl" % (cp, cp)]
    return ["%s-*-py3-none-any.whl" % name, "%s-*-py2.py3-none-any.whl" % name]


def find(folder: str, name: str, python: str, version: Optional[str] = None) -> Optional[str]:
    """The newest wheel of `name` for the Pi in folder (of `version` when given), or None."""
    if not os.path.isdir(folder):
        return None
    hits = []
    for f in os.listdir(folder):
        if any(fnmatch.fnmatch(f, p) for p in _patterns(name, python)):
            if version is None or f.split("-")[1] == version:
                hits.append(f)
    return os.path.join(folder, sorted(hits)[-1]) if hits else None


def download(python: str, dest: str, pins: Dict[str, str] = PINS) -> None:
    """pip download the pinned wheels for aarch64 / `python` into dest (needs PyPI)."""
    os.makedirs(dest, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--platform", PLATFORM,
           "--python-version", python, "--implementation", "cp", "--no-deps", "-d", dest]
    cmd += ["%s==%s" % kv for kv in sorted(pins.items())]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Fail("downloading the aarch64 wheels failed (%s); give a folder holding them with "
                   "--wheels DIR\n%s" % (" ".join(cmd), proc.stderr[-1500:]))


def gather(dest: str, python: str, wheels_dir: Optional[str] = None) -> List[str]:
    """Copy numpy, flatbuffers and pip wheels for the Pi into dest; returns their paths."""
    if wheels_dir is not None and not os.path.isdir(wheels_dir):
        raise InvalidArgument("--wheels %s is not a folder" % wheels_dir)
    cache = cache_dir(python)
    out = []
    for name in sorted(PINS):
        src = find(wheels_dir, name, python) if wheels_dir else None
        if src is None:
            src = find(cache, name, python, PINS[name])
        if src is None:
            download(python, cache)
            src = find(cache, name, python, PINS[name])
        if src is None:
            raise Fail("no %s wheel for aarch64 / Python %s in %s" % (name, python, wheels_dir or cache))
        target = os.path.join(dest, os.path.basename(src))
        shutil.copyfile(src, target)
        out.append(target)
    return out
