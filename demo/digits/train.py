"""Train the in-browser demo's digit classifier and export it to ONNX.

    python3 demo/digits/train.py [--out demo/models/digits.onnx] [--seed 0] [--epochs 12]

Data: scikit-learn's bundled `load_digits` (1,797 8x8 images, no download), scaled from 0..16
to [0, 1] (ink = 1); a seeded 80/20 split. The CNN (`cnn.py`, pure numpy) trains in a few seconds
on one core; the held-out accuracy is printed. Writes the model and, beside it,
`digits_samples.npz` (held-out `images` [20, 1, 8, 8] float32 and their `labels`, two per class).
Same seed, same files.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import cnn  # noqa: E402
import export  # noqa: E402

DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "models", "digits.onnx")
SAMPLES_NAME = "digits_samples.npz"


def load_split(seed: int = 0, test_fraction: float = 0.2):
    """(train images, train labels, test images, test labels); images [N, 1, 8, 8] in [0, 1]."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(images))
    n_test = int(round(len(images) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return images[train], labels[train], images[test], labels[test]


def pick_samples(images: np.ndarray, labels: np.ndarray, per_class: int = 2) -> Dict[str, np.ndarray]:
    """The first `per_class` images of each class, in class order."""
    idx = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(10)])
    return {"images": images[idx], "labels": labels[idx]}


def build(out: str, seed: int = 0, epochs: int = 12) -> Dict[str, float]:
    """Train, export to `out` and save the samples beside it; returns accuracy and timing."""
    x_train, y_train, x_test, y_test = load_split(seed)
    t = time.perf_counter()
    params = cnn.train(x_train, y_train, epochs=epochs, seed=seed)
    train_s = time.perf_counter() - t
    accuracy = float(np.mean(cnn.predict(params, x_test).argmax(axis=1) == y_test))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "wb") as f:
        f.write(export.to_onnx(params).SerializeToString())
    np.savez(os.path.join(os.path.dirname(os.path.abspath(out)), SAMPLES_NAME),
             **pick_samples(x_test, y_test))
    return {"accuracy": accuracy, "train_s": train_s, "n_train": len(x_train),
            "n_test": len(x_test)}


def main(argv: Optional[Sequence[str]] = None) -> None:
    """CLI entry: train, export, print the held-out accuracy."""
    parser = argparse.ArgumentParser(description="Train the digit CNN and export it to ONNX.")
    parser.add_argument("--out", default=DEFAULT_OUT, help="the .onnx file to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=12)
    args = parser.parse_args(argv)
    info = build(args.out, args.seed, args.epochs)
    print("trained on %d digits in %.1f s; held-out accuracy %.1f%% (%d images)"
          % (info["n_train"], info["train_s"], 100 * info["accuracy"], info["n_test"]))
    print("wrote %s and %s" % (os.path.relpath(args.out), os.path.join(
        os.path.relpath(os.path.dirname(os.path.abspath(args.out))), SAMPLES_NAME)))


if __name__ == "__main__":
    main()
