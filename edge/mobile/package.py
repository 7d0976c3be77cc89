"""`make_package`: the slim package an iOS or Android app ships.

    from onnxedge.edge.mobile.package import make_package
    p = make_package(["mlp.onnx"], "out/", target="android")
    p.manifest["sizes"], p.folder

OUT/ holds the reduced onnxedge wheel (runtime profile: session, .oxe reader, the kernels of the
models' ops, the bridge provider's device-side modules: provider and runtime loader, no
translator), `models/<name>.oxe` (optimized), `artifacts/<key>/` (the bridge's pre-translated
subgraphs, left out by `artifacts=False`), `manifest.json` (models, ops, providers, partitions,
groups with artifact keys, sizes), `size_report.json` / `.txt`, `required_operators.config` and a
README. On the device `onnxedge.edge.mobile.runtime.session(OUT, "mlp")` opens a model.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from onnxedge import InferenceSession, __version__, model_io
from onnxedge.errors import InvalidArgument, NoSuchFile, NotImplemented
from onnxedge.providers import discovery

from .. import bridge
from . import runtime

Progress = Optional[Callable[[str], None]]
HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST_FORMAT = 1


class Target(NamedTuple):
    """A phone platform: its bridge provider and what of it the device wheel carries."""

    name: str
    provider: str
    package: str
    device_modules: Tuple[str, ...]     # modules of `package` the wheel keeps
    option: str                         # the target option (--feature-level / --deployment-target)
    artifact_kind: str


TARGETS: Dict[str, Target] = {
    "ios": Target("ios", "CoreMLExecutionProvider", "onnxedge.edge.coreml",
                  ("provider", "support", "runtime"), "minimum_deployment_target",
                  ".mlpackage (Core ML ML Program)"),
    "android": Target("android", "NnapiExecutionProvider", "onnxedge.edge.nnapi",
                      ("provider", "support", "runtime", "serialize", "model", "codes"),
                      "feature_level",
                      "NNAPI model (model.nnapi)"),
}
# what every mobile wheel adds to the runtime profile: the bridge base, its shape inference,
# and the device-side loader of packages
SHARED_MODULES = ("onnxedge.edge.bridge", "onnxedge.facts", "onnxedge.fact_rules",
                  "onnxedge.edge.mobile.runtime")


class PackageResult(NamedTuple):
    """What make_package wrote."""

    folder: str
    wheel: str
    models: Dict[str, str]           # name -> OUT/models/<name>.oxe
    artifacts: Dict[str, str]        # key -> OUT/artifacts/<key>
    manifest: Dict[str, Any]
    manifest_path: str
    report_text: str


def target_of(name: str) -> Target:
    """The Target named `name`; InvalidArgument naming the known ones otherwise."""
    if name not in TARGETS:
        raise InvalidArgument("unknown mobile target %r: expected one of %s"
                              % (name, sorted(TARGETS)))
    return TARGETS[name]


def wheel_modules(target: Target) -> List[str]:
    """The modules the device wheel adds to the runtime profile (those that exist here)."""
    from onnxedge.reduced_build import wheel
    wanted = list(SHARED_MODULES) + ["%s.%s" % (target.package, m) for m in target.device_modules]
    return [m for m in wanted if wheel.single_module_file(m) is not None]


def default_dims(model_path: str, dims: Optional[Dict[str, int]] = None) -> Dict[str, int]:
    """Sizes for the symbolic dims of the model's inputs: `dims` where given, else 1 (the bridges
    need static shapes; the app feeds these shapes)."""
    out = dict(dims or {})
    graph = model_io.load(model_path).graph
    for vi in graph.inputs:
        if vi.type is not None and vi.type.shape:
            for d in vi.type.shape:
                if isinstance(d, str) and d not in out:
                    out[d] = 1
    return out


def partition(model_path: str, provider: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Partition of a model with [provider (reference mode), CPU]: nodes per provider, groups
    (node names, ops, artifact key and size) and each node's assignment with fallback reasons."""
    opts = dict(options)
    opts["reference"] = True
    sess = InferenceSession(model_path, providers=[(provider, opts), "CPUExecutionProvider"])
    prov = bridge.provider_of(sess, provider)
    nodes = sess.model.graph.nodes
    report = sess.partition_report()
    groups = []
    for indices, key in prov.groups:
        art = prov.artifacts[key]
        groups.append({"nodes": [report[i]["node"] for i in indices],
                       "ops": [nodes[i].op_type for i in indices], "artifact": key,
                       "inputs": list(art.inputs), "outputs": list(art.outputs),
                       "bytes": art.size()})
    counts = collections.Counter(r["provider"] for r in report)
    return {"nodes": len(nodes), "nodes_per_provider": dict(counts), "groups": groups,
            "assignments": [{"node": r["node"], "op_type": r["op_type"], "domain": r["domain"],
                             "provider": r["provider"],
                             "fallback_reason": r["fallback_reasons"].get(provider)}
                            for r in report],
            "_artifacts": prov.artifacts,
            "inputs": {a.name: list(a.shape) for a in sess.get_inputs()}}


def _target_options(target: Target, feature_level: Optional[int],
                    deployment_target: Optional[str]) -> Dict[str, Any]:
    if feature_level is not None and target.name != "android":
        raise InvalidArgument("--feature-level is an NNAPI (android) option, not one for %s"
                              % target.name)
    if deployment_target is not None and target.name != "ios":
        raise InvalidArgument("--deployment-target is a Core ML (ios) option, not one for %s"
                              % target.name)
    value = feature_level if target.name == "android" else deployment_target
    return {target.option: value} if value is not None else {}


def _folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def make_package(models: Sequence[str], out_dir: str, target: str, config: Optional[str] = None,
                 artifacts: bool = True, feature_level: Optional[int] = None,
                 deployment_target: Optional[str] = None, dims: Optional[Dict[str, int]] = None,
                 level: str = "all", progress: Progress = None) -> PackageResult:
    """Build the mobile package of `models` for `target` ("ios" or "android") into out_dir
    (replaced). `dims` fixes symbolic input dims (default 1); `config` adds the ops of a
    required_operators.config; `artifacts=False` leaves the translated subgraphs out."""
    from onnxedge.reduced_build.build import reduce
    tgt = target_of(target)
    if not models:
        raise InvalidArgument("no models given: a mobile package needs at least one model")
    for path in models:
        if not os.path.exists(path):
            raise NoSuchFile("model file %s does not exist" % path)
    if tgt.provider not in discovery.provider_classes():
        raise NotImplemented("this onnxedge has no %s (%s): the %s target needs it installed"
                             % (tgt.provider, tgt.package, target))
    target_opts = _target_options(tgt, feature_level, deployment_target)
    if level == "all" and getattr(discovery.provider_classes()[tgt.provider], "keeps_qdq_groups", False):
        level = "extended"   # the bridge translates QDQ groups itself (qdq_fusion would hide them)
    out_dir = os.path.abspath(out_dir)
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        if not os.path.isfile(os.path.join(out_dir, runtime.MANIFEST)):
            raise InvalidArgument("output folder %s exists and is not a mobile package: give an "
                                  "empty or new folder" % out_dir)
        shutil.rmtree(out_dir)
    built = reduce(list(models), out_dir, config=config, level=level,
                   extra_packages=wheel_modules(tgt), profile="runtime", strip=True,
                   progress=progress)
    art_dir = os.path.join(out_dir, "artifacts")
    manifest_models: Dict[str, Any] = {}
    all_artifacts: Dict[str, bridge.Artifact] = {}
    art_model: Dict[str, List[str]] = {}
    model_dims: Dict[str, int] = {}
    for name, oxe in sorted(built.models.items()):
        model_dims.update(default_dims(oxe, dims))
    provider_opts = dict(target_opts, dims=model_dims)
    for name, oxe in sorted(built.models.items()):
        part = partition(oxe, tgt.provider, provider_opts)
        found = part.pop("_artifacts")
        if not part["groups"]:
            reasons = collections.Counter(a["fallback_reason"] for a in part["assignments"])
            shutil.rmtree(out_dir, ignore_errors=True)
            raise InvalidArgument(
                "model %s: %s claims none of its %d nodes (%s), so a %s package would run it "
                "all on the CPU; use `onnxedge reduce` for a CPU-only build"
                % (name, tgt.provider, part["nodes"],
                   "; ".join("%d x %s" % (n, r) for r, n in reasons.most_common(3)), target))
        for key, art in found.items():
            all_artifacts[key] = art
            art_model.setdefault(key, []).append(name)
        ops = sorted({"%s.%s" % (a["domain"], a["op_type"]) if a["domain"] != "ai.onnx"
                      else a["op_type"] for a in part["assignments"]})
        part.update({"file": os.path.relpath(oxe, out_dir), "bytes": os.path.getsize(oxe),
                     "ops": ops})
        manifest_models[name] = part
        if progress:
            progress("model %s: %s" % (name, ", ".join("%d nodes on %s" % (n, p) for p, n in
                                                       part["nodes_per_provider"].items())))
    saved: Dict[str, str] = {}
    if artifacts:
        for key, art in sorted(all_artifacts.items()):
            saved[key] = art.save(os.path.join(art_dir, key))
    wheel_bytes = os.path.getsize(built.wheel)
    model_bytes = sum(m["bytes"] for m in manifest_models.values())
    art_bytes = _folder_bytes(art_dir) if artifacts else 0
    manifest: Dict[str, Any] = {
        "format": MANIFEST_FORMAT, "onnxedge": __version__, "target": target,
        "provider": tgt.provider, "providers": [tgt.provider, "CPUExecutionProvider"],
        "provider_options": dict(provider_opts, artifact_dir="artifacts"),
        "artifact_kind": tgt.artifact_kind,
        "wheel": {"file": os.path.basename(built.wheel), "bytes": wheel_bytes,
                  "bridge_modules": wheel_modules(tgt), "ops_kept": built.report["ops_kept"],
                  "ops": built.report["ops_kept_list"]},
        "models": manifest_models,
        "artifacts": {key: {"models": art_model[key], "bytes": art.size(),
                            "files": sorted(art.files), "included": artifacts,
                            "meta": art.meta}
                      for key, art in sorted(all_artifacts.items())},
        "sizes": {},
    }
    manifest_path = os.path.join(out_dir, runtime.MANIFEST)
    readme_path = os.path.join(out_dir, "README.md")
    _write_readme(readme_path, manifest)
    report_json = os.path.join(out_dir, "size_report.json")
    report_txt = os.path.join(out_dir, "size_report.txt")
    with open(built.report_text) as f:
        wheel_text = f.read()   # reduce's report, replaced below by the package's
    small = (manifest_path, readme_path, report_json, report_txt, built.config)
    # the sizes of the small files depend on the sizes they list: write until they settle
    extra = -1
    for _ in range(6):
        now = sum(os.path.getsize(p) for p in small if os.path.exists(p))
        if now == extra:
            break
        extra = now
        manifest["sizes"] = {
            "wheel": wheel_bytes, "models": model_bytes, "artifacts": art_bytes,
            "metadata": extra,
            "total": wheel_bytes + model_bytes + art_bytes + extra,
            "without_artifacts": wheel_bytes + model_bytes + extra,
            "without_artifacts_and_models": wheel_bytes + extra,
        }
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        rep = dict(built.report, mobile=manifest["sizes"], target=target,
                   artifacts={k: v["bytes"] for k, v in manifest["artifacts"].items()})
        with open(report_json, "w") as f:
            json.dump(rep, f, indent=1, sort_keys=True)
        text = size_text(manifest) + "\n\nwheel:\n" + _indent(wheel_text)
        with open(report_txt, "w") as f:
            f.write(text)
    return PackageResult(out_dir, built.wheel, dict(built.models), saved, manifest, manifest_path,
                         text)


def _indent(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.splitlines()) + "\n"


def size_text(manifest: Dict[str, Any]) -> str:
    """The package's sizes and partitions as a few lines of text."""
    s = manifest["sizes"]
    lines = ["mobile package for %s (%s)" % (manifest["target"], manifest["provider"]),
             "  wheel %-40s %9d bytes" % (manifest["wheel"]["file"], s["wheel"])]
    for name, m in sorted(manifest["models"].items()):
        lines.append("  model %-40s %9d bytes   %s" % (m["file"], m["bytes"], ", ".join(
            "%s %d" % (p.replace("ExecutionProvider", ""), n)
            for p, n in sorted(m["nodes_per_provider"].items()))))
    for key, a in sorted(manifest["artifacts"].items()):
        lines.append("  artifact %-37s %9d bytes%s" % (key[:16] + "...", a["bytes"],
                                                       "" if a["included"] else " (left out)"))
    lines += ["  metadata (manifest, report, README, config)    %9d bytes" % s["metadata"],
              "  total                                          %9d bytes" % s["total"],
              "  without the bridge artifacts                   %9d bytes" % s["without_artifacts"],
              "  without the artifacts and the model files      %9d bytes"
              % s["without_artifacts_and_models"]]
    return "\n".join(lines)


def _write_readme(path: str, manifest: Dict[str, Any]) -> None:
    with open(os.path.join(HERE, "templates", "README.md.in")) as f:
        template = f.read()
    models = "\n".join("- `%s` (%s): %s" % (
        m["file"], name, ", ".join("%d nodes on %s" % (n, p)
                                   for p, n in sorted(m["nodes_per_provider"].items())))
        for name, m in sorted(manifest["models"].items()))
    first = sorted(manifest["models"])[0]
    with open(path, "w") as f:   # the model's name reaches the Python snippets only through repr
        f.write(template.format(target=manifest["target"], provider=manifest["provider"],
                                wheel=manifest["wheel"]["file"], models=models,
                                model_py=repr(first),
                                model_file_py=repr(manifest["models"][first]["file"]),
                                kind=manifest["artifact_kind"],
                                options=json.dumps(manifest["provider_options"], sort_keys=True)))
