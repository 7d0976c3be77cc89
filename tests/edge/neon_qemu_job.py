"""Runs inside the aarch64 python under qemu (see test_neon_qemu.py): reads the cases the host
wrote into DIR, runs them through onnxedge's NEON provider / kernel library, writes DIR/out_*.npy
and DIR/report.json. Usage: qemu-python neon_qemu_job.py DIR"""
from __future__ import annotations

import json
import os
import platform
import sys
import threading

import numpy as np

import onnxedge
from onnxedge.edge.neon import library


def _concurrent(path: str) -> dict:
    """Several Python threads run one session at once, each with its own batch size (so per-thread
    scratch of different sizes and shared per-shape plans): every result must equal the serial one."""
    sess = onnxedge.InferenceSession(path, providers=["NeonExecutionProvider", "CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    feeds = [rng.standard_normal((b, 3, 20, 18)).astype(np.float32) for b in (1, 2, 3, 1)]
    serial = [sess.run(None, {"x": x})[0] for x in feeds]
    diffs, runs = [], [0]

    def work(i: int) -> None:
        for _ in range(2):
            y = sess.run(None, {"x": feeds[i]})[0]
            diffs.append(float(np.abs(y - serial[i]).max()))
            runs[0] += 1
    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(feeds))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"runs": runs[0], "max_abs_diff": max(diffs) if diffs else -1.0}


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
    for c in cases.get("gemm_ext", []):
        z, spec = np.load(os.path.join(d, c + ".npz")), json.load(open(os.path.join(d, c + ".json")))
        a, b, cm, bias = z["a"], z["b"], z["c"], z["bias"]
        ta, tb, kind = bool(spec["ta"]), bool(spec["tb"]), spec["kind"]
        y = lib.sgemm(a, b, ta, tb, spec["alpha"], spec["beta"], cm, bias if kind else None, kind,
                      spec["act"], spec["params"])
        np.save(os.path.join(d, "out_" + c + ".npy"), y)
        if spec["beta"] == 0.0 and kind != 1:   # a plan takes these: pre-packed B, per-column bias
            M, N, K = y.shape[0], y.shape[1], (a.shape[0] if ta else a.shape[1])
            plan = lib.sgemm_plan(N, K, ta, tb, spec["alpha"], lib.pack_b(b, tb), bias if kind else None,
                                  spec["act"], spec["params"])
            yp = np.empty((M, N), np.float32)
            lib.check(plan.fn(plan.addr, M, library.data_address(a)[1], None, library.data_address(yp)[1]), c)
            np.save(os.path.join(d, "out_" + c + "_plan.npy"), yp)
    for c in cases.get("conv_plans", []):
        z, spec = np.load(os.path.join(d, c + ".npz")), json.load(open(os.path.join(d, c + ".json")))
        x, w = z["x"], z["w"]
        plan = lib.conv_plan(x.shape, w, z["bias"], spec["group"], spec["strides"], spec["dilations"],
                             spec["pads"], spec["out"], "Clip", (-0.5, 1.0), packed_w=lib.conv_pack(w, spec["group"]))
        y = np.empty((x.shape[0], w.shape[0]) + tuple(spec["out"]), np.float32)
        rc = plan.fn(plan.addr, x.shape[0], library.data_address(x)[1], library.data_address(y)[1])
        lib.check(rc, c)
        np.save(os.path.join(d, "out_" + c + ".npy"), y)
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
        sess.run(None, feeds)   # node by node, recording shapes; the second run is the C program
        np.save(os.path.join(d, "out_" + c + ".npy"), sess.run(None, feeds)[0])
        report["partition"][c] = [(r["op_type"], r["provider"]) for r in sess.partition_report()]
    if "cnn" in cases.get("models", []):
        report["threads"] = _concurrent(os.path.join(d, "cnn.oxe"))
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
