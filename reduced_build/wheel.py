"""Builds a slim onnxedge wheel: the core, only the kernel modules some ops need, chosen extras.

    from onnxedge.reduced_build import scan, wheel
    req = scan.scan_models(["model.oxe"])
    result = wheel.build_wheel(req, "dist/", extra_packages=["onnxedge.edge.neon"], arch="aarch64")

The op-to-module table (`onnxedge/kernels/op_modules.py`) of the slim wheel lists only the ops whose
kernel modules it carries, so the registry of a reduced build reports any other op as NotImplemented at
session creation. The wheel's entry points are the installed onnxedge's, limited to the modules
the wheel holds (a dropped provider's entry point is left out). Files under a `lib/<arch>/` folder
are kept only for the target architecture; a wheel holding a shared library gets a platform tag
(`manylinux_2_N_<arch>` from the glibc versions the library asks for, else `linux_<arch>`).
"""
from __future__ import annotations

import ast
import base64
import hashlib
import importlib
import importlib.util
import os
import re
import shlex
import zipfile
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from onnxedge import checker
from onnxedge.errors import InvalidArgument
from onnxedge.kernels import op_modules as full_op_modules

from . import scan
from . import strip as strip_mod

ROOT_PACKAGE = "onnxedge"
KERNELS = "onnxedge/kernels/"
# kernels/ files every build keeps: the registry and private helpers (op_modules.py is rewritten)
KERNEL_INFRA = {"__init__", "registry", "op_modules"}
DATA_SUFFIXES = (".py", ".typed", ".fbs", ".so", ".json", ".wgsl", ".js", ".mjs", ".html", ".wasm")
ZIP_DATE = (1980, 1, 1, 0, 0, 0)   # fixed timestamps: the same inputs give the same bytes
# the registry fills in %(config)s (this build's config file), %(config_arg)s and %(add_op)s
# (both shell-quoted: the op comes from a model); {sources} are shell-quoted here
REBUILD_HINT = ("this is a reduced onnxedge build, holding only the kernels of %(config)s: "
                "rebuild it with this op added: `onnxedge reduce {sources}--add-op "
                "%(add_op)s -o OUT/`")
PROFILES = ("full", "runtime")
# what a "runtime" wheel leaves out: it runs pre-optimized .oxe models (no optimizer, no .onnx
# loader or writer, no .oxe writer and its flatbuffers code, no CLI or server)
RUNTIME_DROPS = ("onnxedge/optimizer/", "onnxedge/onnx_loader.py", "onnxedge/onnx_wire.py",
                 "onnxedge/onnx_writer.py",
                 "onnxedge/cli.py", "onnxedge/serve.py", "onnxedge/format/writer.py",
                 "onnxedge/format/fb/", "onnxedge/format/oxe.fbs", "onnxedge/py.typed")
# what a runtime wheel whose only provider is the CPU's also leaves out: the type/shape rules
# (a session works facts out only for other providers) and the op-support records they claim by
RUNTIME_CPU_ONLY_DROPS = ("onnxedge/fact_rules.py", "onnxedge/providers/support.py",   # C engine only:
                          "onnxedge/oxk_layout.py", "onnxedge/oxk_program.py", "onnxedge/oxk_movement.py",
                          "onnxedge/oxk_quant.py", "onnxedge/oxk_rnn.py", "onnxedge/subgraph_plans.py")
RUNTIME_DROPPED_REQUIRES = ("flatbuffers",)
# core helpers only kernels use: a stripped build keeps them only while a kept file imports them
HELPER_MODULES = ("onnxedge/fused_ops.py", "onnxedge/geometry.py", "onnxedge/numeric.py")
ARCHES = ("x86_64", "aarch64", "armv7l", "wasm32")
ROOMS = ("web", "edge", "reduced_build")   # onnxedge's subpackages that are not the core


class BuildResult(NamedTuple):
    """What `build_wheel` made: the wheel path and what it kept and dropped."""

    path: str
    tag: str
    files: List[str]
    required_ops: List[Tuple[str, str]]
    kept_ops: List[Tuple[str, str]]
    dropped_ops: List[Tuple[str, str]]
    missing_ops: List[Tuple[str, str]]
    kept_modules: List[str]
    dropped_modules: List[str]
    entry_points: Dict[str, Dict[str, str]]


# ----------------------------------------------------------------------------- kernels

def _package_dir(package: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise InvalidArgument("package %s cannot be found: is it installed (pip install -e .)?"
                              % package)
    return list(spec.submodule_search_locations)[0]


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a `from ... import` in `package` reads (relative levels resolved)."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parent = ".".join(parts[:len(parts) - node.level + 1])
        base = parent + ("." + base if base else "")
    return base


def _imported_modules(path: str, package: str) -> Set[str]:
    """Absolute names of the modules a source file imports (relative imports resolved)."""
    with open(path, encoding="utf-8") as f:
        return _source_imports(f.read(), path, package)


def _source_imports(source: Any, name: str, package: str) -> Set[str]:
    """`_imported_modules` of source text (or bytes) named `name`."""
    tree = ast.parse(source, name)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, package)
            out.add(base)
            out.update(base + "." + a.name for a in node.names)
    return out


def _kernel_refs(path: str, package: str) -> Set[str]:
    """Kernel modules (names inside onnxedge.kernels) that a source file imports."""
    prefix = ROOT_PACKAGE + ".kernels."
    return {m[len(prefix):].split(".")[0] for m in _imported_modules(path, package)
            if m.startswith(prefix)}


def kernel_modules_for(ops: Iterable[Tuple[str, str]],
                       table: Optional[Dict[Tuple[str, str], List[str]]] = None,
                       kernel_dir: Optional[str] = None,
                       also: Iterable[str] = ()) -> Tuple[Set[str], Set[Tuple[str, str]]]:
    """(kernel modules needed by `ops` and `also`, with what they import; ops no module serves)."""
    table = full_op_modules.OP_MODULES if table is None else table
    kernel_dir = kernel_dir or _package_dir(ROOT_PACKAGE + ".kernels")
    needed: Set[str] = {m for m in also if m not in KERNEL_INFRA and not m.startswith("_")}
    missing: Set[Tuple[str, str]] = set()
    for op in ops:
        mods = table.get(op)
        if not mods:
            missing.add(op)
        needed.update(mods or ())
    needed = {m for m in needed if os.path.isfile(os.path.join(kernel_dir, m + ".py"))}
    todo = list(needed)
    while todo:
        path = os.path.join(kernel_dir, todo.pop() + ".py")
        for dep in _kernel_refs(path, ROOT_PACKAGE + ".kernels"):
            if dep not in needed and dep not in KERNEL_INFRA \
                    and os.path.isfile(os.path.join(kernel_dir, dep + ".py")):
                needed.add(dep)
                todo.append(dep)
    return needed, missing


def rebuild_hint(made_for: Sequence[str] = ()) -> str:
    """The registry's NotImplemented hint of a build made for `made_for` (model / config names)."""
    models = [m for m in made_for if m.lower().endswith((".onnx", ".oxe"))]
    sources = "".join(shlex.quote(m).replace("%", "%%") + " " for m in models)
    if not models or len(models) < len(made_for):   # ops from a config or --add-op too
        sources += "--config %(config_arg)s "
    return REBUILD_HINT.replace("{sources}", sources)


def check_ops(ops: Iterable[Tuple[str, str]]) -> None:
    """InvalidGraph unless every (domain, op) is a pair of plain identifiers: a reduced build
    writes them into Python, config files and shell hints, so other text is refused, not warned
    about."""
    for domain, op in sorted(ops, key=repr):
        checker.check_op_pair(domain, op, "reduced build: op (%r, %r)" % (domain, op))


def restricted_op_modules_source(table: Dict[Tuple[str, str], List[str]], modules: Set[str],
                                 required: Iterable[Tuple[str, str]], only_required: bool = False,
                                 hint: str = "") -> str:
    """op_modules.py for a build keeping `modules`: every op all of whose modules are kept (only the
    required ones with `only_required`, for builds whose kernel modules are stripped)."""
    req = sorted(required)
    check_ops(req)
    check_ops(table)
    # model text reaches this file only as repr() constants, never inside the docstring
    lines = ['"""Which kernel module holds each op, in a REDUCED onnxedge build '
             '(onnxedge.reduced_build); do not edit.',
             "",
             "KEPT_MODULES lists the kernel modules kept, REQUIRED_OPS the (domain, op) pairs the",
             "build was made for. Ops missing here fail at session creation; rebuild the wheel with",
             "them (see onnxedge/kernels/required_operators.config for what this build was made",
             "from).",
             '"""', "",
             "KEPT_MODULES = %r" % sorted(modules),
             "REQUIRED_OPS = %r" % [tuple(k) for k in req], "",
             "# read by the registry (when it supports it) to end its NotImplemented message",
             "REDUCED_BUILD_HINT = %r" % (hint or rebuild_hint()), "", "OP_MODULES = {"]
    wanted = set(req)
    for key in sorted(table):
        if only_required and key not in wanted:
            continue
        if table[key] and all(m in modules for m in table[key]):
            lines.append("    (%r, %r): %r," % (key[0], key[1], list(table[key])))
    lines.append("}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- files

def _walk_package(package: str, arch: Optional[str]) -> Dict[str, str]:
    """{archive name: source path} of a package's files, subpackages included."""
    top = _package_dir(package)
    prefix = package.replace(".", "/")
    out: Dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        rel = os.path.relpath(dirpath, top)
        parts = [] if rel == "." else rel.split(os.sep)
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "node_modules")
                             and not d.startswith(".")
                             and not (package == ROOT_PACKAGE and not parts and d in ROOMS))
        data_only = not os.path.isfile(os.path.join(dirpath, "__init__.py")) and "lib" not in parts
        if "lib" in parts:
            i = parts.index("lib")
            if i + 1 < len(parts) and parts[i + 1] in ARCHES and parts[i + 1] != arch:
                continue   # a shared library built for another architecture
        for name in sorted(filenames):
            if data_only and name.endswith(".py"):
                continue   # a data folder of a package (e.g. shaders/), not a package itself
            if name.endswith(DATA_SUFFIXES) and not name.startswith("."):
                arc = "/".join([prefix] + parts + [name])
                out[arc] = os.path.join(dirpath, name)
    return out


def _parents(package: str) -> List[str]:
    parts = package.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def single_module_file(name: str) -> Optional[str]:
    """The source file of `name` when it is a plain module (not a package), else None."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is not None or not spec.origin:
        return None
    return spec.origin if spec.origin.endswith(".py") else None


def module_files(modules: Sequence[str]) -> Dict[str, str]:
    """{archive name: source path} of single modules and their packages' `__init__.py` only
    (an `extra_packages` entry naming a module keeps that module, not its whole package)."""
    out: Dict[str, str] = {}
    for name in modules:
        src = single_module_file(name)
        if src is None:
            raise InvalidArgument("extra module %s is not a single .py module of onnxedge" % name)
        for parent in _parents(name)[1:]:
            out[parent.replace(".", "/") + "/__init__.py"] = os.path.join(
                _package_dir(parent), "__init__.py")
        out[name.replace(".", "/") + ".py"] = src
    return out


def collect_files(extra_packages: Sequence[str] = (), arch: Optional[str] = None) -> Dict[str, str]:
    """{archive name: source path} of the core (every kernel module) plus extra packages; an
    entry naming a single module (e.g. onnxedge.edge.coreml.provider) adds only that module."""
    files = _walk_package(ROOT_PACKAGE, arch)
    for package in extra_packages:
        if not package.startswith(ROOT_PACKAGE + "."):
            raise InvalidArgument("extra package %s is not part of onnxedge" % package)
        if single_module_file(package) is not None:
            files.update(module_files([package]))
            continue
        for parent in _parents(package)[1:]:
            init = os.path.join(_package_dir(parent), "__init__.py")
            files[parent.replace(".", "/") + "/__init__.py"] = init
        files.update(_walk_package(package, arch))
    return files


def _kernel_module_of(arc: str) -> Optional[str]:
    if arc.startswith(KERNELS) and arc.count("/") == 2 and arc.endswith(".py"):
        mod = arc[len(KERNELS):-3]
        if mod not in KERNEL_INFRA and not mod.startswith("_"):
            return mod
    return None


def kernels_imported_outside(files: Dict[str, str]) -> Set[str]:
    """Kernel modules that files other than the kernels import directly (providers, passes)."""
    out: Set[str] = set()
    for arc, src in files.items():
        if arc.endswith(".py") and not arc.startswith(KERNELS):
            package = arc[:-3].replace("/", ".")
            if not arc.endswith("/__init__.py"):
                package = package.rsplit(".", 1)[0]
            else:
                package = package[:-len(".__init__")]
            out |= _kernel_refs(src, package)
    return out


def drop_kernels(files: Dict[str, str], modules: Set[str]) -> List[str]:
    """Remove the kernel modules not in `modules` from files; returns the dropped names."""
    dropped = []
    for arc in list(files):
        mod = _kernel_module_of(arc)
        if mod is not None and mod not in modules:
            dropped.append(mod)
            del files[arc]
    return sorted(dropped)


# ------------------------------------------------------------------------------ tags

def _glibc_floor(paths: Iterable[str]) -> Optional[Tuple[int, int]]:
    """The newest GLIBC_x.y symbol version the shared libraries ask for, or None."""
    best: Optional[Tuple[int, int]] = None
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        for m in re.finditer(rb"GLIBC_(\d+)\.(\d+)", data):
            v = (int(m.group(1)), int(m.group(2)))
            best = v if best is None or v > best else best
    return best


def platform_tag(files: Dict[str, str], arch: Optional[str]) -> str:
    """py3-none-any for pure wheels; a manylinux / linux tag for wheels with a .so."""
    libs = [src for arc, src in files.items() if arc.endswith(".so")]
    if not libs:
        return "py3-none-any"
    if not arch:
        raise InvalidArgument("the wheel holds shared libraries (%s): give arch= (e.g. aarch64)"
                              % ", ".join(sorted(os.path.basename(p) for p in libs)))
    floor = _glibc_floor(libs)
    if floor is None or floor[0] != 2:
        return "py3-none-linux_%s" % arch
    return "py3-none-manylinux_2_%d_%s" % (max(17, floor[1]), arch)


# ------------------------------------------------------------------------- dist-info

def _installed():
    from importlib import metadata
    return metadata.distribution(ROOT_PACKAGE)


def _module_in(module: str, names: Set[str]) -> bool:
    path = module.replace(".", "/")
    return path + ".py" in names or path + "/__init__.py" in names


def entry_points_for(names: Set[str]) -> Dict[str, Dict[str, str]]:
    """The installed onnxedge's entry points whose modules are among the archive names."""
    out: Dict[str, Dict[str, str]] = {}
    for ep in _installed().entry_points:
        module = ep.value.split(":")[0].strip()
        if _module_in(module, names):
            out.setdefault(ep.group, {})[ep.name] = ep.value
    return out


def _metadata_text(version: str, summary: str, drop: Sequence[str] = ()) -> str:
    requires = [r for r in (_installed().requires or []) if "extra ==" not in r
                and not r.startswith(tuple(drop))]
    lines = ["Metadata-Version: 2.1", "Name: %s" % ROOT_PACKAGE, "Version: %s" % version,
             "Summary: %s" % summary, "Requires-Python: >=3.8", "License: MIT"]
    lines += ["Requires-Dist: %s" % r for r in requires]
    return "\n".join(lines) + "\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def write_wheel(path: str, contents: Dict[str, bytes]) -> None:
    """Write a wheel: `contents` plus a RECORD of their sha256 digests, deterministic order."""
    dist_info = [n for n in contents if n.endswith(".dist-info/WHEEL")]
    if len(dist_info) != 1:
        raise InvalidArgument("a wheel needs exactly one .dist-info/WHEEL, got %s" % dist_info)
    record_name = dist_info[0].rsplit("/", 1)[0] + "/RECORD"
    order = sorted(n for n in contents if ".dist-info/" not in n) + \
        sorted(n for n in contents if ".dist-info/" in n)
    record = [_record_line(n, contents[n]) for n in order] + [record_name + ",,"]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in order + [record_name]:
            data = contents[name] if name != record_name else ("\n".join(record) + "\n").encode()
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            zf.writestr(info, data)


def build_wheel(required: scan.Requirements, out_dir: str, extra_packages: Sequence[str] = (),
                arch: Optional[str] = None, version: Optional[str] = None,
                all_ops: bool = False, profile: str = "full", strip: bool = False,
                made_for: Sequence[str] = ()) -> BuildResult:
    """Build the slim wheel into out_dir for the ops of `required` (all_ops keeps every kernel).

    `profile` "full" keeps the whole core (CLI and server included: the Pi bundle runs `onnxedge
    serve`); "runtime" leaves out RUNTIME_DROPS (and flatbuffers from Requires-Dist). `strip`
    cuts kernel modules down to the kept ops' kernels and drops docstrings and comments.
    `made_for` (model or config file names) goes into the hint a dropped op's error gives.
    """
    import onnxedge
    if profile not in PROFILES:
        raise InvalidArgument("profile %r is not one of %s" % (profile, list(PROFILES)))
    table = full_op_modules.OP_MODULES
    req_ops = scan.op_pairs(required)
    check_ops(req_ops)
    files = collect_files(extra_packages, arch)
    if profile == "runtime":
        asked = module_files([m for m in extra_packages if single_module_file(m) is not None])
        drops = RUNTIME_DROPS
        if not any(m.split(".")[1:2] and m.split(".")[1] in ROOMS for m in extra_packages):
            drops = drops + RUNTIME_CPU_ONLY_DROPS
        for arc in [a for a in files if a.startswith(drops) and a not in asked]:
            del files[arc]
    modules, missing = kernel_modules_for(set(table) if all_ops else req_ops, table,
                                          also=kernels_imported_outside(files))
    dropped_modules = drop_kernels(files, modules)
    tag = platform_tag(files, arch)
    version = version or onnxedge.__version__
    dist = "%s-%s.dist-info" % (ROOT_PACKAGE, version)
    contents: Dict[str, bytes] = {}
    for arc, src in files.items():
        with open(src, "rb") as f:
            contents[arc] = f.read()
    kept_ops = sorted(k for k in table if all(m in modules for m in table[k]))
    if strip and not all_ops:
        kept_ops = sorted(k for k in kept_ops if k in req_ops)
        gone = strip_kernels(contents, set(kept_ops), table)
        modules = modules - set(gone)
        dropped_modules = sorted(set(dropped_modules) | set(gone))
    if strip:
        for arc in contents:
            if arc.endswith(".py"):
                contents[arc] = strip_mod.strip_text(contents[arc].decode("utf-8"), arc).encode("utf-8")
    if strip:
        drop_unimported_helpers(contents)
    contents[KERNELS + "op_modules.py"] = restricted_op_modules_source(
        table, modules, req_ops, only_required=strip and not all_ops,
        hint=rebuild_hint(made_for)).encode()
    contents[KERNELS + "required_operators.config"] = scan.format_config(
        required, "required operators this reduced onnxedge build was made for").encode()
    eps = entry_points_for(set(contents))
    summary = "onnxedge reduced build: %d kernel modules, %d ops" % (len(modules), len(kept_ops))
    drop_requires = RUNTIME_DROPPED_REQUIRES if profile == "runtime" else ()
    contents[dist + "/METADATA"] = _metadata_text(version, summary, drop_requires).encode()
    contents[dist + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: onnxedge.reduced_build %s\n"
                                 "Root-Is-Purelib: %s\nTag: %s\n"
                                 % (onnxedge.__version__, "true" if tag.endswith("-any") else "false",
                                    tag)).encode()
    if eps:
        contents[dist + "/entry_points.txt"] = "".join(
            "[%s]\n%s\n" % (group, "".join("%s = %s\n" % kv for kv in sorted(items.items())))
            for group, items in sorted(eps.items())).encode()
    if profile != "runtime":
        contents[dist + "/top_level.txt"] = (ROOT_PACKAGE + "\n").encode()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "%s-%s-%s.whl" % (ROOT_PACKAGE, version, tag))
    write_wheel(path, contents)
    return BuildResult(path, tag, sorted(contents) + [dist + "/RECORD"], sorted(req_ops), kept_ops,
                       sorted(set(table) - set(kept_ops)), sorted(missing), sorted(modules),
                       dropped_modules, eps)


def drop_unimported_helpers(contents: Dict[str, bytes]) -> List[str]:
    """Remove the HELPER_MODULES no other kept file imports (after kernel stripping a build may
    need none of them; one helper importing another keeps it only while it stays); the ones
    removed, in order."""
    dropped: List[str] = []
    while True:
        imported: Set[str] = set()
        for arc, data in contents.items():
            if arc.endswith(".py"):
                package = arc[:-3].replace("/", ".").rsplit(".", 1)[0]
                imported |= _source_imports(data, arc, package)
        gone = [arc for arc in HELPER_MODULES
                if arc in contents and arc[:-3].replace("/", ".") not in imported]
        if not gone:
            return dropped
        for arc in gone:
            del contents[arc]
        dropped += gone


def _kernel_imports(contents: Dict[str, bytes]) -> Tuple[Dict[str, Set[str]], Set[str]]:
    """({kernel module: names other files import from it}, kernel modules imported whole)."""
    names: Dict[str, Set[str]] = {}
    whole: Set[str] = set()
    prefix = ROOT_PACKAGE + ".kernels."
    for arc, data in contents.items():
        if not arc.endswith(".py"):
            continue
        package = arc[:-3].replace("/", ".").rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(data, arc)):
            if isinstance(node, ast.Import):
                whole.update(a.name[len(prefix):] for a in node.names if a.name.startswith(prefix))
            elif isinstance(node, ast.ImportFrom):
                base = _from_module(node, package)
                if base.startswith(prefix):
                    names.setdefault(base[len(prefix):], set()).update(a.name for a in node.names)
                elif base == prefix[:-1]:
                    whole.update(a.name for a in node.names)
    return names, whole


def strip_kernels(contents: Dict[str, bytes], kept_ops: Set[Tuple[str, str]],
                  table: Optional[Dict[Tuple[str, str], List[str]]] = None) -> List[str]:
    """Cut each kernel module in contents down to what the kept ops and other files use, until
    nothing changes; modules left serving nothing are removed (their names are returned)."""
    table = full_op_modules.OP_MODULES if table is None else table
    serving = {m for op in kept_ops for m in table.get(op, ())}
    original = {arc: data.decode("utf-8") for arc, data in contents.items()
                if _kernel_module_of(arc) is not None or arc == KERNELS + "_util.py"}
    removed: List[str] = []
    for _ in range(20):
        names, whole = _kernel_imports(contents)
        changed = False
        for arc, source in sorted(original.items()):
            mod = arc[len(KERNELS):-3]
            if arc not in contents or mod in whole:
                continue
            if mod not in serving and mod not in names:
                del contents[arc]
                removed.append(mod)
                changed = True
                continue
            new = strip_mod.strip_unused(source, kept_ops, names.get(mod, ()), arc).encode("utf-8")
            if new != contents[arc]:
                contents[arc] = new
                changed = True
        if not changed:
            break
    return sorted(removed)
