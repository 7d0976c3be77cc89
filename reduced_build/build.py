"""`reduce`: one call from models (and/or a required_operators.config) to a reduced build folder.

    from onnxedge.reduced_build.build import reduce
    r = reduce(["mlp.onnx"], "out/")
    r.wheel, r.config, r.models["mlp"], r.report["wheel_bytes"]

The folder holds `required_operators.config` (onnxruntime's format), the slim wheel, the models
converted to optimized (stamped) `.oxe` under `models/`, and `size_report.json` / `.txt`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from onnxedge import model_io, optimizer
from onnxedge.errors import InvalidArgument, NoSuchFile

from . import report, scan, wheel

Progress = Optional[Callable[[str], None]]


class ReduceResult(NamedTuple):
    """What `reduce` wrote into its output folder."""

    wheel: str                 # path of the slim wheel in out_dir
    config: str                # path of out_dir/required_operators.config
    models: Dict[str, str]     # model name (file stem) -> out_dir/models/<stem>.oxe
    report: Dict[str, Any]     # the size report (report.size_report + models)
    report_json: str           # out_dir/size_report.json
    report_text: str           # out_dir/size_report.txt


def parse_op(entry: str) -> scan.Requirements:
    """Requirements from one "domain;opset;Op[,Op2]" entry (the --add-op form)."""
    return scan.parse_config(entry, "--add-op %r" % entry)


def _model_files(models: Sequence[str]) -> List[str]:
    """The model paths, folders expanded to their .onnx / .oxe files."""
    out = []
    for path in models:
        if os.path.isdir(path):
            out += [os.path.join(path, n) for n in sorted(os.listdir(path))
                    if n.lower().endswith((".onnx", ".oxe"))]
        elif not os.path.isfile(path):
            raise NoSuchFile("model file %s does not exist" % path)
        else:
            out.append(path)
    return out


def model_stem(path: str) -> str:
    """A model's name (its file name without extension); InvalidArgument when the file name holds
    control characters (newlines, NUL, ...), which no generated file or page should carry."""
    name = os.path.basename(path)
    bad = [c for c in name if not c.isprintable()]
    if bad:
        raise InvalidArgument("model file name %r holds control characters (%s): rename the file"
                              % (name, ", ".join(sorted({repr(c) for c in bad}))))
    return os.path.splitext(name)[0]


def convert_models(models: Sequence[str], out_dir: str, level: str = "all",
                   progress: Progress = None) -> Dict[str, str]:
    """Each model optimized at `level` (stamped) and saved as out_dir/<stem>.oxe."""
    os.makedirs(out_dir, exist_ok=True)
    out: Dict[str, str] = {}
    for path in _model_files(models):
        stem = model_stem(path)
        if stem in out:
            raise InvalidArgument("two models are named %s (%s and %s): model names must differ"
                                  % (stem, out[stem], path))
        model = optimizer.optimize(model_io.load(path), level)
        target = os.path.join(out_dir, stem + ".oxe")
        model_io.save(model, target)
        if progress:
            progress("model %s: %d nodes -> %s (%d bytes)" % (
                os.path.basename(path), len(model.graph.nodes), target, os.path.getsize(target)))
        out[stem] = target
    return out


def build_full_wheel(out_dir: str, progress: Progress = None) -> str:
    """The whole project's wheel (`pip wheel --no-deps .`) in out_dir, for size comparisons."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        raise InvalidArgument("--compare-full needs onnxedge's source checkout (no pyproject.toml "
                              "in %s); pass full_wheel= instead" % root)
    if progress:
        progress("building the full project wheel for comparison (pip wheel %s)" % root)
    os.makedirs(out_dir, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", out_dir, root],
                          capture_output=True, text=True)
    wheels = [f for f in os.listdir(out_dir) if f.startswith("onnxedge-") and f.endswith(".whl")]
    if proc.returncode != 0 or not wheels:
        raise InvalidArgument("pip wheel of %s failed: %s" % (root, proc.stderr[-2000:]))
    return os.path.join(out_dir, wheels[0])


# the modules that read `.onnx` without the onnx package (kept by --with-onnx)
ONNX_READER = ("onnxedge.onnx_loader", "onnxedge.onnx_wire")


def reduce(models: Sequence[str], out_dir: str, config: Optional[str] = None, level: str = "all",
           extra_packages: Sequence[str] = (), arch: Optional[str] = None,
           add_ops: Sequence[str] = (), full_wheel: Optional[str] = None,
           progress: Progress = None, profile: str = "runtime",
           strip: bool = True, with_onnx: bool = False) -> ReduceResult:
    """Reduced build of `models` (and the ops of `config` and `add_ops`) into out_dir.

    `profile` "runtime" makes a wheel for pre-optimized `.oxe` models (no optimizer, no `.onnx`
    loader, no CLI); "full" keeps the whole core. `strip` drops unused kernel functions and
    docstrings. `full_wheel` (a path, or "build" to make one) adds the size comparison.
    `with_onnx` keeps the `.onnx` reader (onnx_loader + onnx_wire, no `onnx` package needed)
    and the kernels of the models' ops as they are in the file, so the wheel also opens the
    models as `.onnx` (run unoptimized, as a runtime wheel has no optimizer).
    """
    if not models and not config and not add_ops:
        raise InvalidArgument("nothing to reduce for: give models, a --config file or --add-op ops")
    optimizer.level_name(level)   # fail early on a bad level
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    converted = convert_models(models, os.path.join(out_dir, "models"), level, progress)
    reqs = [scan.required_operators(p, None) for p in converted.values()]
    if with_onnx:
        extra_packages = list(extra_packages) + list(ONNX_READER)
        reqs.extend(scan.required_operators(p, None) for p in _model_files(models))
    sources = [os.path.basename(p) for p in _model_files(models)]
    if config:
        reqs.append(scan.read_config(config))
        sources.append(os.path.basename(config))
    for entry in add_ops:
        reqs.append(parse_op(entry))
    required = scan.merge(*reqs)
    config_path = os.path.join(out_dir, "required_operators.config")
    scan.write_config(required, config_path, "required operators of " + ", ".join(sources))
    if progress:
        progress("required operators: %d (%s)" % (len(scan.op_pairs(required)), config_path))
    made_for = sources + (["--add-op"] if add_ops else [])
    build = wheel.build_wheel(required, out_dir, extra_packages=extra_packages, arch=arch,
                              profile=profile, strip=strip, made_for=made_for)
    if progress:
        progress("wheel: %s (%d bytes)" % (build.path, os.path.getsize(build.path)))
    scratch = None
    if full_wheel == "build":
        scratch = tempfile.mkdtemp(prefix="onnxedge-full-")
        full_wheel = build_full_wheel(scratch, progress)
    try:
        rep = report.size_report(build, full_wheel)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    rep["models"] = {stem: {"path": os.path.relpath(p, out_dir), "bytes": os.path.getsize(p)}
                     for stem, p in converted.items()}
    json_path = os.path.join(out_dir, "size_report.json")
    text_path = os.path.join(out_dir, "size_report.txt")
    report.write_report(rep, json_path, text_path)
    return ReduceResult(build.path, config_path, converted, rep, json_path, text_path)

