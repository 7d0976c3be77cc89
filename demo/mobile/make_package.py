"""Make the mobile packages of the demo models for both targets, then open each packaged model
the way the phone does (reference interpreter standing in for Core ML / NNAPI) and compare with
the CPU provider.

    .venv/bin/python demo/mobile/make_package.py [--out build/mobile] [--models mlp digits qdq_cnn]

Writes build/mobile/<target>/ (one package per target holding every model) and prints the size
reports and the comparison.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import models as bm  # noqa: E402

from onnxedge import InferenceSession  # noqa: E402
from onnxedge.edge.mobile import runtime  # noqa: E402
from onnxedge.edge.mobile.package import make_package  # noqa: E402

MODELS_DIR = os.path.join(ROOT, "demo", "models")


def model_files(names: Sequence[str]) -> Dict[str, str]:
    """Paths of the demo models by name: the MLP and digit CNN of demo/models (made by `make
    demo` / demo/make_models.py / demo/digits/train.py), qdq_cnn from benchmarks/models.py."""
    out = {}
    for name in names:
        path = os.path.join(MODELS_DIR, name + ".onnx")
        if name in bm.BUILDERS:
            path = bm.build_all(MODELS_DIR, [name])[name]
        elif not os.path.isfile(path):
            raise SystemExit("%s is missing: run `make demo/models/%s.onnx` first" % (path, name))
        out[name] = path
    return out


def feeds_for(path: str) -> Dict[str, np.ndarray]:
    """One random sample for every input of a model (symbolic dims = 1)."""
    sess = InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    return {a.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in a.shape])
            .astype(np.float32) for a in sess.get_inputs()}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Build, open and check the packages."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "mobile"))
    ap.add_argument("--models", nargs="*", default=["mlp", "digits", "qdq_cnn"])
    args = ap.parse_args(argv)
    paths = model_files(args.models)
    for target in ("ios", "android"):
        p = make_package(list(paths.values()), os.path.join(args.out, target), target)
        print(p.report_text.split("\n\nwheel:")[0])
        for name, path in paths.items():
            feeds = feeds_for(path)
            got = runtime.session(p.folder, name, reference=True).run(None, feeds)[0]
            want = InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
            print("  %s on %s (reference interpreter) vs CPU: max |diff| %.3g" % (name, target, diff))
        print("package: %s\n" % p.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
