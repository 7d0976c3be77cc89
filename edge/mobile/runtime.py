"""Device side of a mobile package: open a packaged model with its bridge provider.

    from onnxedge.edge.mobile import runtime
    sess = runtime.session("/path/to/package", "mlp")   # CoreML / NNAPI, CPU for the rest

The provider finds the pre-translated artifacts by key in the package's `artifacts/` folder and
loads them without translating (the wheel has no translator). This module is in the wheel.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from onnxedge import InferenceSession
from onnxedge.errors import InvalidArgument, NoSuchFile

MANIFEST = "manifest.json"


def load_manifest(package_dir: str) -> Dict[str, Any]:
    """The package's manifest.json, as a dict."""
    path = os.path.join(package_dir, MANIFEST)
    if not os.path.isfile(path):
        raise NoSuchFile("%s is not a mobile package: it has no %s" % (package_dir, MANIFEST))
    with open(path) as f:
        return json.load(f)


def provider_options(package_dir: str, reference: bool = False) -> Dict[str, Any]:
    """The bridge provider's options the package was made with, `artifact_dir` made absolute;
    `reference` runs the artifacts in the numpy reference interpreter (off the device)."""
    manifest = load_manifest(package_dir)
    opts = dict(manifest["provider_options"])
    opts["artifact_dir"] = os.path.join(os.path.abspath(package_dir), opts.get("artifact_dir",
                                                                                  "artifacts"))
    if reference:
        opts["reference"] = True
    return opts


def session(package_dir: str, model: str, reference: bool = False,
            sess_options: Optional[Any] = None) -> InferenceSession:
    """An InferenceSession on packaged model `model` (its name, e.g. "mlp") with the package's
    bridge provider first and the CPU provider for the rest."""
    manifest = load_manifest(package_dir)
    if model not in manifest["models"]:
        raise InvalidArgument("package %s has no model %r; it has %s"
                              % (package_dir, model, sorted(manifest["models"])))
    path = os.path.join(package_dir, manifest["models"][model]["file"])
    return InferenceSession(path, sess_options, providers=[
        (manifest["provider"], provider_options(package_dir, reference)), "CPUExecutionProvider"])
