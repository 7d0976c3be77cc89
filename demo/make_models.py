"""Write the default demo model (the benchmark MLP) and a sample input into demo/models/.

    python3 demo/make_models.py [--out-dir demo/models]

Produces `mlp.onnx` (input "input" float32 [batch, 784] -> "output" [batch, 10] probabilities)
and `mlp_input.npy` (one [1, 784] float32 sample), and prints the top class the model gives for
the sample, as computed by onnx's reference evaluator, so `onnxedge run` can be checked by eye.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import models  # noqa: E402


def make(out_dir: str) -> int:
    """Write the model and sample input into out_dir; return the expected top class."""
    path = models.build_all(out_dir, ["mlp"])["mlp"]
    feeds = models.make_inputs("mlp", batch=1, seed=0)
    np.save(os.path.join(out_dir, "mlp_input.npy"), feeds["input"])
    from onnx.reference import ReferenceEvaluator
    (probs,) = ReferenceEvaluator(path).run(None, feeds)
    return int(np.argmax(probs[0]))


def main(argv: Optional[Sequence[str]] = None) -> None:
    """CLI entry: build the demo model and say what `onnxedge run` should print."""
    parser = argparse.ArgumentParser(description="Write the demo MLP and a sample input.")
    parser.add_argument("--out-dir", default=os.path.join(HERE, "models"))
    args = parser.parse_args(argv)
    top = make(args.out_dir)
    rel = os.path.relpath(args.out_dir)
    print("wrote %s/mlp.onnx and %s/mlp_input.npy; expected top class: %d" % (rel, rel, top))
    print("try: onnxedge run %s/mlp.onnx -i input=%s/mlp_input.npy" % (rel, rel))


if __name__ == "__main__":
    main()
