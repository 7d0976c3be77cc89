"""Bytecode for a page's wheel: a wheel installed in Pyodide holds `.py` sources, which Python
compiles on first import in every page load (most of onnxedge's own share of page load -> first
result in Pyodide 0.17.1: ~0.5-1 s of the digit demo's start-up). `compile_wheel` adds
`__pycache__/*.cpython-XY.pyc` files made by a native interpreter of the page's Python version
(unchecked-hash .pyc: valid whatever the files' times after unpacking), so imports skip the
compiler. With `sourceless`, each `module.py` is replaced by `module.pyc` beside it, compiled
without docstrings (`-OO`; the core has no asserts): half the files to unpack (creating a file
costs Pyodide's in-memory file system about 1 ms) and a smaller wheel; tracebacks then name file
and line without the source text.

    compiled, note = compile_wheel("dist/onnxedge-0.1.0-py3-none-any.whl", "3.8", sourceless=True)

Runs natively only; the interpreter comes from ONNXEDGE_PYC_PYTHON, the checkout's `.venv38`
(made by `make setup`) or `python3.8` on PATH. Without one, the wheel stays as it is and the note
says why.
"""
from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from typing import List, Optional, Tuple

PYTHON_ENV = "ONNXEDGE_PYC_PYTHON"

_COMPILE = r"""
import importlib.util, json, py_compile, sys
root, sourceless = sys.argv[1], sys.argv[2] == "1"
out = []
for rel in json.load(sys.stdin):
    src = root + "/" + rel
    pyc = src + "c" if sourceless else importlib.util.cache_from_source(src)
    py_compile.compile(src, cfile=pyc, dfile=rel, doraise=True, optimize=2 if sourceless else -1,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    out.append([rel, pyc[len(root) + 1:]])
json.dump(out, sys.stdout)
"""


def _version_of(python: str) -> Optional[str]:
    try:
        proc = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def find_python(version: str) -> Optional[str]:
    """A native interpreter of `version` ("3.8"), or None: ONNXEDGE_PYC_PYTHON, the checkout's
    .venv38, python<version> on PATH."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tag = version.replace(".", "")
    for candidate in (os.environ.get(PYTHON_ENV),
                      os.path.join(here, ".venv%s" % tag, "bin", "python"),
                      shutil.which("python%s" % version)):
        if candidate and os.path.isfile(candidate) and _version_of(candidate) == version:
            return candidate
    return None


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def compile_wheel(wheel: str, version: str, python: Optional[str] = None,
                  sourceless: bool = False) -> Tuple[bool, str]:
    """Add .pyc files for Python `version` to `wheel` (rewritten in place, RECORD updated; with
    `sourceless` they replace the .py files). Returns (compiled, a note saying what was done or
    why not)."""
    python = python or find_python(version)
    if python is None:
        return False, ("not compiled to .pyc: no Python %s here (set %s); the page compiles the "
                       "modules on import" % (version, PYTHON_ENV))
    with tempfile.TemporaryDirectory(prefix="onnxedge-pyc-") as tmp:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            zf.extractall(tmp)
        sources = [i.filename for i in infos if i.filename.endswith(".py")
                   and ".dist-info/" not in i.filename]
        import json
        proc = subprocess.run([python, "-c", _COMPILE, tmp, "1" if sourceless else "0"],
                              input=json.dumps(sources),
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return False, "not compiled to .pyc: Python %s failed: %s" % (
                version, (proc.stderr or proc.stdout)[-500:])
        pairs = json.loads(proc.stdout)
        dropped = set(sources) if sourceless else set()
        _rewrite(wheel, tmp, [i for i in infos if i.filename not in dropped],
                 [pyc for _, pyc in pairs])
    return True, "compiled %d modules to .pyc for Python %s%s" % (
        len(pairs), version, " (sourceless)" if sourceless else "")


def _rewrite(wheel: str, root: str, infos: List[zipfile.ZipInfo], added: List[str]) -> None:
    """The wheel again from the unpacked folder, with `added` files and their RECORD lines."""
    record = next(i.filename for i in infos if i.filename.endswith(".dist-info/RECORD"))
    new = wheel + ".new"
    with zipfile.ZipFile(new, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        lines: List[str] = []
        names = [i.filename for i in infos if i.filename != record and not i.is_dir()]
        for name in names + added:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            zf.writestr(name, data)
            lines.append(_record_line(name, data))
        lines.append(record + ",,")
        zf.writestr(record, "\n".join(lines) + "\n")
    os.replace(new, wheel)


def main(argv: Optional[List[str]] = None) -> int:
    """`python -m onnxedge.web.pyc WHEEL [--python-version 3.8] [--sourceless]`: compile a wheel
    for a Pyodide app of your own (e.g. the full wheel a JupyterLite site installs)."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m onnxedge.web.pyc", description=main.__doc__)
    p.add_argument("wheel")
    p.add_argument("--python-version", default="3.8",
                   help="the Pyodide's Python (3.8 for Pyodide 0.17.1)")
    p.add_argument("--python", default=None, help="that interpreter (default: found)")
    p.add_argument("--sourceless", action="store_true", help=".pyc instead of the .py files")
    args = p.parse_args(argv)
    compiled, note = compile_wheel(args.wheel, args.python_version, args.python, args.sourceless)
    print(note)
    return 0 if compiled else 1


__all__ = ["compile_wheel", "find_python", "main", "PYTHON_ENV"]

if __name__ == "__main__":
    raise SystemExit(main())
