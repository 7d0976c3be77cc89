"""Adds a (reduced) onnxedge wheel to a current Pyodide distribution, so that
`pyodide.loadPackage('onnxedge')` installs it from that distribution's own folder.

    lock, compiled, notes = register_wheel("dist/pyodide", "out/onnxedge-0.1.0-py3-none-any.whl")

It uses pyodide-build's CLI (`pyodide`, found in ONNXEDGE_PYODIDE_CLI, the checkout's
`.venv-pyodide/` made by `make setup`, or PATH): `pyodide lockfile add-wheels` adds it to
`pyodide-lock.json`, and `pyodide py-compile` turns it into `.pyc` when the distribution's Python
(the lock's `info.python`) is the compiler's own. Runs natively only.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from typing import Callable, List, Optional, Tuple

from onnxedge.errors import InvalidArgument, NoSuchFile

LOCK = "pyodide-lock.json"
CLI_ENV = "ONNXEDGE_PYODIDE_CLI"
Progress = Optional[Callable[[str], None]]


def find_cli() -> str:
    """Path of pyodide-build's `pyodide` command, or InvalidArgument saying how to get it."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (os.environ.get(CLI_ENV), os.path.join(here, ".venv-pyodide", "bin", "pyodide"),
                      shutil.which("pyodide")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise InvalidArgument("pyodide-build's `pyodide` command was not found (set %s, or run `make "
                          "setup`, which installs pyodide-build 0.39.2 into .venv-pyodide/)" % CLI_ENV)


def _run(cmd: List[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InvalidArgument("%s failed (%s): %s" % (what, " ".join(cmd),
                                                      (proc.stderr or proc.stdout)[-2000:]))
    return proc.stdout


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def cli_python(cli: str) -> str:
    """The Python version (major.minor) the pyodide-build CLI runs under, hence compiles for."""
    python = os.path.join(os.path.dirname(cli), "python")
    if not os.path.isfile(python):
        with open(cli, encoding="utf-8", errors="replace") as f:
            first = f.readline()
        python = first[2:].strip() if first.startswith("#!") else "python3"
    out = _run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
               "asking pyodide-build's Python for its version")
    return out.strip()


def register_wheel(pyodide_dir: str, wheel: str, progress: Progress = None) -> Tuple[str, bool, List[str]]:
    """Copy `wheel` into a Pyodide distribution folder, compile it to .pyc when the Pythons
    match, and add it to the folder's pyodide-lock.json.

    Returns (the lock path, whether the wheel was compiled, notes). A dependency whose wheel the
    folder lacks (numpy in the npm `pyodide` core, which ships no wheels) is left out of the
    new entry with a note, so loading does not fetch a file that is not there.
    """
    lock = os.path.join(pyodide_dir, LOCK)
    if not os.path.isfile(lock):
        raise NoSuchFile("%s has no %s: give the folder of a current Pyodide distribution (0.25 "
                         "or newer, e.g. web/node_modules/pyodide)" % (pyodide_dir, LOCK))
    if not os.path.isfile(wheel) or not wheel.endswith(".whl"):
        raise NoSuchFile("wheel %s does not exist (expected a .whl file)" % wheel)
    with open(lock, encoding="utf-8") as f:
        info = json.load(f).get("info", {})
    dist_python = _major_minor(str(info.get("python", "")))
    cli = find_cli()
    notes: List[str] = []
    target = os.path.join(pyodide_dir, os.path.basename(wheel))
    if os.path.abspath(target) != os.path.abspath(wheel):
        shutil.copyfile(wheel, target)
    if progress:
        progress("adding %s to %s" % (os.path.basename(target), lock))
    new = lock + ".new"
    _run([cli, "lockfile", "add-wheels", "--input", lock, "--output", new,
          "--base-path", pyodide_dir, target], "pyodide lockfile add-wheels")
    notes += _drop_absent_dependencies(new, pyodide_dir, os.path.basename(target))
    os.replace(new, lock)
    compiled = False
    compiler = cli_python(cli)
    if dist_python and dist_python == compiler:
        if progress:
            progress("compiling %s to .pyc for Python %s" % (os.path.basename(target), compiler))
        # after add-wheels: pyodide-lock 0.39 refuses cpXY-none-any tags, which py-compile gives
        before = set(os.listdir(pyodide_dir))
        _run([cli, "py-compile", "--silent", "--no-keep", target], "pyodide py-compile")
        made = sorted(n for n in set(os.listdir(pyodide_dir)) - before if n.endswith(".whl"))
        if made:
            _update_entry(lock, os.path.basename(target), os.path.join(pyodide_dir, made[0]))
            compiled = True
    else:
        notes.append("not compiled to .pyc: the distribution runs Python %s, pyodide-build's "
                     "compiler is Python %s (the wheel stays .py, which Pyodide compiles on import)"
                     % (dist_python or "?", compiler))
    return lock, compiled, notes


def _update_entry(lock: str, old_name: str, wheel: str) -> None:
    """Point the lock's entry of `old_name` at `wheel` (its name and sha256)."""
    with open(lock, encoding="utf-8") as f:
        data = json.load(f)
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    for entry in data["packages"].values():
        if entry.get("file_name") == old_name:
            entry["file_name"], entry["sha256"] = os.path.basename(wheel), digest
    with open(lock, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _drop_absent_dependencies(lock: str, pyodide_dir: str, file_name: str) -> List[str]:
    """Remove from the entry of `file_name` the dependencies whose wheel is not in pyodide_dir."""
    with open(lock, encoding="utf-8") as f:
        data = json.load(f)
    packages = data["packages"]
    entry = [p for p in packages.values() if p.get("file_name") == file_name]
    if not entry:
        raise InvalidArgument("pyodide lockfile add-wheels left %s out of %s" % (file_name, lock))
    notes, kept = [], []
    for dep in entry[0].get("depends", []):
        dep_file = packages.get(dep, {}).get("file_name", "")
        if dep_file and os.path.isfile(os.path.join(pyodide_dir, dep_file)):
            kept.append(dep)
        else:
            notes.append("dependency %s left out of onnxedge's lock entry: its wheel %s is not in "
                         "%s (a core-only distribution); add it there for `import onnxedge` to work"
                         % (dep, dep_file or "(none listed)", pyodide_dir))
    entry[0]["depends"] = kept
    with open(lock, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return notes
