"""The model zoo: models as people ship them, built locally with the tools users use.

Each family module in this folder (`ml.py`, `transformers_ort.py`, `quantized.py`, ...) lists
`ZooModel` records in a module-level `MODELS`. A record's `build(path)` writes the model file
(`.onnx`) with the user's own tool (skl2onnx, onnxmltools, onnxruntime's optimizer and
quantizers, torch.onnx, ...) and returns the feeds to run it with. Nothing is downloaded:
weights are random or fitted on generated data, with fixed seeds.

Built models are cached outside the repository in `~/.cache/onnxedge/zoo/<family>/`
(`$ONNXEDGE_ZOO_CACHE/<family>/` when set): a model is rebuilt only when its record's `key`
(tool versions and a recipe revision) changes. `test_zoo.py` compares every model with
onnxruntime; `python3 tests/zoo/report.py` writes the table in docs/ZOO.md.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
from typing import Any, Callable, Dict, List, NamedTuple, Optional

FAMILIES = ("ml", "transformers_ort", "quantized")


class ZooModel(NamedTuple):
    """One zoo model: how it is made and how its outputs are compared with onnxruntime.

    `build(path)` writes the model to `path` and returns the feeds {input name: array};
    `compare` is "float" (rtol/atol), "quantized" (within `atol` = one quantization step of the
    output scale) or "labels" (labels exact, probabilities at rtol/atol)."""

    name: str
    tool: str                       # e.g. "skl2onnx 1.19.1 (LogisticRegression)"
    build: Callable[[str], Dict[str, Any]]
    key: str = "1"                  # recipe revision: change it to force a rebuild
    compare: str = "float"
    rtol: float = 1e-4
    atol: float = 1e-5
    requires: tuple = ()            # importable modules the build needs (skipped when missing)


def cache_dir(family: str) -> str:
    """The cache folder of one zoo family."""
    base = os.environ.get("ONNXEDGE_ZOO_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "onnxedge", "zoo")
    return os.path.join(base, family)


def _stamp(model: ZooModel) -> str:
    return hashlib.sha256(("%s|%s|%s" % (model.name, model.tool, model.key)).encode()).hexdigest()


def ensure_built(family: str, model: ZooModel) -> Dict[str, Any]:
    """Build `model` into the cache unless an up-to-date copy is there; returns
    {"path": model file, "feeds": feeds}."""
    folder = os.path.join(cache_dir(family), model.name)
    path = os.path.join(folder, "model.onnx")
    feeds_path = os.path.join(folder, "feeds.pkl")
    stamp_path = os.path.join(folder, "STAMP")
    stamp = _stamp(model)
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        with open(feeds_path, "rb") as f:
            return {"path": path, "feeds": pickle.load(f)}
    os.makedirs(folder, exist_ok=True)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    feeds = model.build(path)
    with open(feeds_path, "wb") as f:
        pickle.dump(feeds, f)
    with open(stamp_path, "w") as f:
        f.write(stamp)
    return {"path": path, "feeds": feeds}


def family_models(family: str) -> List[ZooModel]:
    """The records of one family module (tests.zoo.<family>)."""
    module = importlib.import_module("zoo." + family)
    return list(module.MODELS)


def all_models(families: Optional[List[str]] = None) -> List[tuple]:
    """[(family, ZooModel)] over the families that exist (a family module not written yet is
    skipped)."""
    out = []
    for family in families or FAMILIES:
        try:
            models = family_models(family)
        except ModuleNotFoundError as exc:
            if exc.name == "zoo." + family:
                continue
            raise
        out.extend((family, m) for m in models)
    return out


def dumps_summary(rows: List[Dict[str, Any]]) -> str:
    """The zoo results as JSON (used by the report)."""
    return json.dumps(rows, indent=1, sort_keys=True)
