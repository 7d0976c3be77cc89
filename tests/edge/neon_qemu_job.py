"""Runs inside the aarch64 python under qemu (see test_neon_qemu.py): reads the cases the host
wrote into DIR, runs them through onnxedge's NEON provider / kernel library, writes DIR/out_*.npy
and DIR/report.json. Usage: qemu-python neon_qemu_job.py DIR"""
from __future__ import annotations

import json
import os
import platform
import sys

import numpy as np

import onnxedge
from onnxedge.edge.neon import library


def main(d: str) -> None:
    lib = library.load()
    lib.set_num_threads(2)
    report = {"machine": platform.machine(), "backend": lib.backend, "dotprod": lib.has_dotprod(),
              "library": lib.path, "available": onnxedge.get_available_providers(), "partition": {}}
    cases = json.load(open(os.path.join(d, "cases.json")))
    for c in cases.get("sgemm", []):
        a, b = np.load(os.path.join(d, c + "_a.npy")), np.load(os.path.join(d, c + "_b.npy"))
        bias = np.load(os.path.join(d, c + "_bias.npy"))
        np.save(os.path.join(d, "out_" + c + ".npy"),
                lib.sgemm(a, b, bias=bias, bias_kind=library.BIAS_COL, act="GeluTanh"))
    for c in cases.get("conv", []):
        x, w = np.load(os.path.join(d, c + "_x.npy")), np.load(os.path.join(d, c + "_w.npy"))
        spec = json.load(open(os.path.join(d, c + ".json")))
        np.save(os.path.join(d, "out_" + c + ".npy"),
                lib.conv2d(x, w, None, spec["group"], spec["strides"], spec["dilations"], spec["pads"],
                           spec["out"], act="Relu", path=spec["path"]))
    for c in cases.get("pool", []):
        x = np.load(os.path.join(d, c + "_x.npy"))
        spec = json.load(open(os.path.join(d, c + ".json")))
        np.save(os.path.join(d, "out_" + c + ".npy"),
                lib.pool2d(x, spec["kind"], spec["kernel"], spec["strides"], [1, 1], spec["pads"],
                           spec["out"], spec["include_pad"]))
    for c in cases.get("qgemm", []):
        a, b = np.load(os.path.join(d, c + "_a.npy")), np.load(os.path.join(d, c + "_b.npy"))
        za, zb = np.load(os.path.join(d, c + "_za.npy")), np.load(os.path.join(d, c + "_zb.npy"))
        np.save(os.path.join(d, "out_" + c + ".npy"), lib.qgemm(a, b, za, zb, packed_b=lib.qpack_b(b)))
    for c in cases.get("models", []):
        feeds = dict(np.load(os.path.join(d, c + "_in.npz")))
        sess = onnxedge.InferenceSession(os.path.join(d, c + ".oxe"),
                                         providers=["NeonExecutionProvider", "CPUExecutionProvider"])
        np.save(os.path.join(d, "out_" + c + ".npy"), sess.run(None, feeds)[0])
        report["partition"][c] = [(r["op_type"], r["provider"]) for r in sess.partition_report()]
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
