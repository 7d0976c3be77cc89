"""Makes the Raspberry Pi bundle: a folder and its tarball, everything the Pi installs offline."""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import tarfile
import warnings
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from onnxedge import model_io, optimizer
from onnxedge.errors import InvalidArgument, NotImplemented
from onnxedge.reduced_build import report, scan, wheel
from onnxedge.reduced_build.build import model_stem

from . import deps

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
NEON_PACKAGE = "onnxedge.edge.neon"
ARCH = "aarch64"
DEFAULT_PORT = 8080
# what a model's file name in the bundle may hold: it goes into install.sh, a sed command and the
# systemd unit, so any other character of the input's name becomes "_"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class Bundle(NamedTuple):
    """What `make_bundle` wrote."""

    folder: str
    tarball: str
    wheel: str
    models: List[str]
    dependency_wheels: List[str]
    report: Dict[str, Any]
    notes: List[str]


def _neon_library_present() -> bool:
    import importlib.util
    spec = importlib.util.find_spec(NEON_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return False
    lib = os.path.join(list(spec.submodule_search_locations)[0], "lib", ARCH)
    return os.path.isdir(lib) and any(f.endswith(".so") for f in os.listdir(lib))


def safe_name(path: str) -> str:
    """The bundle's name for a model file: its stem with every character but `[A-Za-z0-9._-]`
    made "_" (and never starting with "." or "-"); InvalidArgument for control characters."""
    stem = _UNSAFE.sub("_", model_stem(path))
    return stem if stem and stem[0] not in ".-" else "_" + stem


def _render(name: str, values: Dict[str, Any], mark: str = "@", quote: Any = str) -> str:
    """A template with MARK+KEY+MARK replaced by quote(value) (install.sh uses %% to keep its own
    @KEY@ for sed, and shlex.quote for its values)."""
    with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
        text = f.read()
    marks = re.compile("%s(%s)%s" % (re.escape(mark), "|".join(re.escape(k) for k in values),
                                     re.escape(mark)))
    # one pass: a value holding another key's mark is left as it is
    return marks.sub(lambda m: quote(str(values[m.group(1)])), text)


def _unit_values(values: Dict[str, Any]) -> Dict[str, Any]:
    """values checked for the systemd unit: no whitespace, quotes, backslashes or `%`."""
    for key, value in values.items():
        if not re.match(r"[A-Za-z0-9._,/:-]+\Z", str(value)):
            raise InvalidArgument("%s %r cannot go into the systemd unit" % (key, str(value)))
    return values


def _write(path: str, text: str, mode: int = 0o644) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def convert_models(paths: Sequence[str], dest: str, level: str = "all") -> List[str]:
    """Optimize each model and save it into dest as .oxe."""
    os.makedirs(dest, exist_ok=True)
    out = []
    stems = set()
    for path in paths:
        if not os.path.isfile(path):
            raise InvalidArgument("model %s does not exist" % path)
        stem = safe_name(path)
        if stem in stems:
            raise InvalidArgument("two models are named %s in the bundle: rename one" % stem)
        stems.add(stem)
        model = optimizer.optimize(model_io.load(path), level)
        target = os.path.join(dest, stem + ".oxe")
        model_io.save(model, target)
        out.append(target)
    return out


def _io_example(model_path: str) -> Dict[str, Any]:
    """The README's request body for the served model, as one shell-quoted JSON argument (the
    input's name comes from the model: JSON-escaped, then shlex-quoted)."""
    from onnxedge import dtypes
    g = model_io.load(model_path).graph
    [first] = [v for v in g.inputs if v.name not in g.initializers][:1] or [None]
    name, dt, shape = "x", "float32", [1]
    if first is not None and first.type is not None and first.type.kind == "tensor":
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in (first.type.shape or [])]
        name, dt = first.name, dtypes.lookup(first.type.elem_type).numpy or "float32"
    body = '{"inputs": {%s: {"dtype": %s, "shape": %s, "data": [...]}}}' % (
        json.dumps(name), json.dumps(dt), json.dumps(shape))
    return {"BODY": shlex.quote(body)}


def make_bundle(models: Sequence[str], out: str, python: str = "3.11",
                wheels_dir: Optional[str] = None, neon: bool = True, serve: Optional[str] = None,
                port: int = DEFAULT_PORT, level: str = "all") -> Bundle:
    """Write the bundle folder `out` and `out`.tar.gz for `models` (see the package docstring)."""
    if not models:
        raise InvalidArgument("give at least one model")
    for path in models:
        if not os.path.isfile(path):
            raise InvalidArgument("model %s does not exist" % path)
    stems = [os.path.splitext(os.path.basename(p))[0] for p in models]
    safe = [safe_name(p) for p in models]
    if serve and os.path.splitext(os.path.basename(serve))[0] not in stems + safe:
        raise InvalidArgument("--serve %s is not one of the models %s" % (serve, stems))
    if not re.match(r"[0-9]+\.[0-9]+\Z", str(python)):
        raise InvalidArgument("python %r is not a version like 3.11" % (python,))
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidArgument("port %r is not a port number (1..65535)" % (port,))
    if wheels_dir is not None and not os.path.isdir(wheels_dir):
        raise InvalidArgument("--wheels %s is not a folder" % wheels_dir)
    if neon and not _neon_library_present():
        raise InvalidArgument("no aarch64 NEON library in %s (lib/%s/*.so): build it with `make "
                              "neon-kernels` (edge/kernels/build.py), or pass --no-neon"
                              % (NEON_PACKAGE, ARCH))
    out = os.path.abspath(out.rstrip("/"))
    if os.path.exists(out):
        if os.listdir(out) and not os.path.isfile(os.path.join(out, "install.sh")):
            raise InvalidArgument("output %s exists and is not an onnxedge bundle: give a new or "
                                  "empty folder (a previous bundle is replaced)" % out)
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "wheels"))
    try:
        return _fill(out, models, python, wheels_dir, neon, serve, port, level)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)   # no half-made bundle left behind
        raise


def _fill(out: str, models: Sequence[str], python: str, wheels_dir: Optional[str], neon: bool,
          serve: Optional[str], port: int, level: str) -> Bundle:
    notes: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model_files = convert_models(models, os.path.join(out, "models"), level)
    notes.extend(str(w.message) for w in caught)
    names = [os.path.basename(p) for p in model_files]
    served = names[0]
    if serve:
        want = os.path.splitext(os.path.basename(serve))[0]
        served = [n for p, n in zip(models, names)
                  if want in (os.path.splitext(os.path.basename(p))[0], safe_name(p))][0]

    req = scan.scan_models(model_files)
    scan.write_config(req, os.path.join(out, "required_operators.config"),
                      "operators of " + ", ".join(names))
    build = wheel.build_wheel(req, os.path.join(out, "wheels"),
                              extra_packages=[NEON_PACKAGE] if neon else [], arch=ARCH)
    if build.missing_ops:
        raise NotImplemented("the models use ops onnxedge has no kernel for: %s; the bundle would "
                             "not load them" % ", ".join("%s%s" % (d + "." if d else "", o)
                                                         for d, o in build.missing_ops))
    rep = report.size_report(build)
    report.write_report(rep, os.path.join(out, "size_report.json"), os.path.join(out, "size_report.txt"))
    dep_wheels = deps.gather(os.path.join(out, "wheels"), python, wheels_dir)

    providers = "NeonExecutionProvider,CPUExecutionProvider" if neon else "CPUExecutionProvider"
    values = {"MODEL": served, "PORT": port, "PYVER": python, "PROVIDERS": providers,
              "HOST": "127.0.0.1", "PREFIX": "/opt/onnxedge"}
    _write(os.path.join(out, "install.sh"), _render("install.sh", values, "%%", shlex.quote), 0o755)
    shutil.copyfile(os.path.join(TEMPLATES, "onnxedge.service.in"),
                    os.path.join(out, "onnxedge.service.in"))
    _write(os.path.join(out, "onnxedge.service"),
           _render("onnxedge.service.in", _unit_values(values)))
    values.update(_io_example(os.path.join(out, "models", served)))
    values.update({"DATE": datetime.date.today().isoformat(), "NOPS": rep["ops_kept"], "NREQ": len(rep["ops_required"]),
                   "NEON": "yes" if neon else "no", "WHEEL": os.path.basename(build.path),
                   "MODELS": ", ".join("`models/%s`" % n for n in names),
                   "TARBALL": shlex.quote(os.path.basename(out) + ".tar.gz"),
                   "DIRNAME": shlex.quote(os.path.basename(out))})
    _write(os.path.join(out, "README.md"), _render("README.md.in", values))
    _write_manifest(out)
    tarball = out + ".tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(out, arcname=os.path.basename(out))
    return Bundle(out, tarball, build.path, model_files, dep_wheels, rep, notes)


def _write_manifest(out: str) -> None:
    files = {}
    for dirpath, _, filenames in os.walk(out):
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, out)] = hashlib.sha256(f.read()).hexdigest()
    _write(os.path.join(out, "SHA256SUMS"),
           "".join("%s  %s\n" % (digest, name) for name, digest in sorted(files.items())))
