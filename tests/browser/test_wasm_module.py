"""The wasm SIMD kernel modules (web/wasm/lib/oxk.wasm, oxk-mt.wasm) and their JS runtime
(web/wasm/oxk.js) in headless Chromium, through a plain cross-origin isolated page (no Pyodide).

Every case runs on two runtimes in the same page: `st` (oxk.wasm, one thread) and `mt` (oxk-mt.wasm
on a shared memory with one Web Worker: 2 threads). Both must match numpy computed natively in
float64 (rtol 1e-5, atol 1e-5 of the output's scale), and each other bit for bit (the C pool splits
work into blocks whose arithmetic does not depend on the thread count). Tensors travel as base64.
Build the modules first: `python edge/kernels/build.py --targets wasm` (make setup does).
"""
from __future__ import annotations

import base64
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

from conftest import LIFETIME, ROOT, SUMMARY
from server import PageServer, local_only_context

WASM_DIR = os.path.join(ROOT, "web", "wasm")
RTOL = 1e-5

PAGE_HTML = """<!doctype html><meta charset="utf-8"><title>oxk wasm test</title>
<script src="/wasm/oxk.js"></script>
<script>
const b64ToBytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
function bytesToB64(u) {
  let s = "";
  for (let i = 0; i < u.length; i += 0x8000) s += String.fromCharCode.apply(null, u.subarray(i, i + 0x8000));
  return btoa(s);
}
window.runtimes = {};
async function start() {
  const st = new onnxedgeWasm.Runtime();
  await st.init({baseURL: "/wasm/lib/", threads: 1});
  await onnxedgeWasm.init({baseURL: "/wasm/lib/", threads: 2});
  window.runtimes = {st, mt: onnxedgeWasm};
  return {st: st.threads, mt: onnxedgeWasm.threads, isolated: crossOriginIsolated,
          backend: st.backend(), noteSt: st.note, noteMt: onnxedgeWasm.note};
}
// spec: {inputs: {name: base64 of float32}, outputs: {name: float count}, body: JS using rt, P
// (name -> pointer) and keep(ptr) (freed after the case)}; returns per runtime {rc, outputs}.
function runCase(spec) {
  const result = {};
  for (const [label, rt] of Object.entries(window.runtimes)) {
    const P = {}, owned = [];
    const keep = (p) => { owned.push(p); return p; };
    for (const [name, b64] of Object.entries(spec.inputs)) {
      const bytes = b64ToBytes(b64);
      P[name] = keep(rt.alloc(bytes.length));
      rt.u8(P[name], bytes.length).set(bytes);
    }
    for (const [name, n] of Object.entries(spec.outputs)) {
      P[name] = keep(rt.alloc(4 * n));
      rt.f32(P[name], n).fill(NaN);
    }
    const rc = new Function("rt", "P", "keep", spec.body)(rt, P, keep);
    const outputs = {};
    for (const [name, n] of Object.entries(spec.outputs)) outputs[name] = bytesToB64(rt.u8(P[name], 4 * n).slice());
    owned.forEach((p) => rt.free(p));
    result[label] = {rc, outputs};
  }
  return result;
}
</script>
"""


@pytest.fixture(scope="module")
def wasm_page(browser: Any, tmp_path_factory: Any) -> Any:
    """A cross-origin isolated page with both runtimes ready (`runtimes.st`, `runtimes.mt`)."""
    for name in ("oxk.wasm", "oxk-mt.wasm"):
        path = os.path.join(WASM_DIR, "lib", name)
        if not os.path.isfile(path):
            pytest.fail("%s is missing: run `python edge/kernels/build.py --targets wasm` "
                        "(make setup does)" % path)
    root = str(tmp_path_factory.mktemp("wasm-page"))
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write(PAGE_HTML)
    server = PageServer({"/": root, "/wasm/": WASM_DIR}).start()
    blocked: List[str] = []
    console: List[str] = []
    context = local_only_context(browser, server.origin, blocked)
    LIFETIME.contexts.append(context)   # closed with the browser after the last browser test
    page = context.new_page()
    page.on("console", lambda msg: console.append(msg.text))
    page.on("pageerror", lambda err: console.append("pageerror: %s" % err))
    page.goto(server.origin + "/index.html")
    info = page.evaluate("start()")
    page.info = info
    page.console_lines = console
    yield page
    server.stop()
    assert not blocked, "the page tried to reach outside localhost: %s" % blocked


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype=np.float32).tobytes()).decode()


def run_case(page: Any, inputs: Dict[str, np.ndarray], outputs: Dict[str, Tuple[int, ...]],
             body: str) -> Dict[str, Tuple[int, Dict[str, np.ndarray]]]:
    """Run `body` on both runtimes; {runtime: (rc, {output: array shaped as asked})}."""
    spec = {"inputs": {k: _b64(v) for k, v in inputs.items()},
            "outputs": {k: int(np.prod(s)) for k, s in outputs.items()}, "body": body}
    res = page.evaluate("spec => runCase(spec)", spec)
    out = {}
    for label, r in res.items():
        arrays = {k: np.frombuffer(base64.b64decode(v), np.float32).reshape(outputs[k])
                  for k, v in r["outputs"].items()}
        out[label] = (r["rc"], arrays)
    return out


def check(res: Dict[str, Tuple[int, Dict[str, np.ndarray]]], name: str, want: np.ndarray,
          what: str) -> None:
    """rc 0, the output within rtol 1e-5 of numpy (atol 1e-5 of its scale) on both runtimes, and
    the one-thread and two-thread outputs bitwise equal."""
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    for label, (rc, outs) in res.items():
        assert rc == 0, "%s: %s returned %d" % (what, label, rc)
        np.testing.assert_allclose(outs[name], want, rtol=RTOL, atol=RTOL * scale,
                                   err_msg="%s on %s" % (what, label))
    np.testing.assert_array_equal(res["st"][1][name], res["mt"][1][name],
                                  err_msg="%s: 1 thread != 2 threads" % what)


def test_runtime_started(wasm_page: Any) -> None:
    info = wasm_page.info
    assert info["isolated"] is True
    assert (info["st"], info["mt"]) == (1, 2)
    assert info["backend"] == "wasm-simd128"
    lines = [ln for ln in wasm_page.console_lines if ln.startswith("onnxedge wasm SIMD kernels:")]
    assert "onnxedge wasm SIMD kernels: 2 threads (cross-origin isolated)" in lines, lines
    assert "onnxedge wasm SIMD kernels: 1 thread (asked for one thread)" in lines, lines


def test_worker_runs_tasks(wasm_page: Any) -> None:
    """With 2 threads the Web Worker takes part: it runs some of a big GEMM's 64 blocks."""
    res = wasm_page.evaluate("""() => {
      const rt = window.runtimes.mt, [M, N, K] = [256, 1024, 256];
      const A = rt.alloc(4 * M * K), B = rt.alloc(4 * K * N), C = rt.alloc(4 * M * N);
      const plan = rt.sgemmPlan({N, K});
      const before = rt.exports.oxk_worker_tasks();
      let rc = 0;
      for (let i = 0; i < 20 && rc === 0; i++) rc = rt.sgemmRun(plan, M, A, B, C);
      const after = rt.exports.oxk_worker_tasks();
      [A, B, C, plan].forEach((p) => rt.free(p));
      return {rc, tasks: after - before, started: rt.exports.oxk_workers_started()};
    }""")
    assert res["rc"] == 0 and res["started"] == 1
    assert 0 < res["tasks"] < 20 * 64, res


def test_not_isolated_page_runs_one_thread(wasm_page: Any) -> None:
    """A page served without COOP/COEP gets 1 thread, whatever it asks for, and says why."""
    origin = wasm_page.url.rsplit("/", 1)[0]
    page = wasm_page.context.new_page()
    lines: List[str] = []
    page.on("console", lambda msg: lines.append(msg.text))
    page.route(origin + "/plain.html", lambda route: route.fulfill(
        status=200, content_type="text/html", body='<script src="/wasm/oxk.js"></script>'))
    page.goto(origin + "/plain.html")
    got = page.evaluate("""async () => {
      let error = "";
      try { await onnxedgeWasm.init({baseURL: "/missing/", threads: 4}); } catch (e) { error = e.message; }
      await onnxedgeWasm.init({baseURL: "/wasm/lib/", threads: 4});   // a failed init may be retried
      return {isolated: crossOriginIsolated, threads: onnxedgeWasm.threads,
              backend: onnxedgeWasm.backend(), error};
    }""")
    page.close()
    assert got.pop("error") == "onnxedge wasm: fetching /missing/oxk.wasm failed: HTTP 404"
    assert got == {"isolated": False, "threads": 1, "backend": "wasm-simd128"}
    assert ("onnxedge wasm SIMD kernels: 1 thread (page not cross-origin isolated: serve with "
            "COOP/COEP for threads)") in lines, lines


# ------------------------------------------------------------------------------------- sgemm
def _act(y: np.ndarray, act: int, p0: float, p1: float) -> np.ndarray:
    if act == 1:
        return np.maximum(y, 0)
    if act == 2:
        return np.clip(y, p0, p1)
    if act == 3:
        return 1 / (1 + np.exp(-y))
    if act == 4:
        return 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    if act == 5:
        return np.where(y >= 0, y, y * p0)
    if act == 6:
        return np.tanh(y)
    return y


GEMMS = [  # M, N, K, transA, transB
    (1, 1, 1, 0, 0), (1, 1000, 1000, 0, 0), (7, 1, 13, 0, 0), (5, 9, 7, 0, 0), (33, 65, 1023, 0, 0),
    (64, 96, 257, 1, 0), (37, 70, 300, 0, 1), (20, 24, 35, 1, 1), (4, 16, 20000, 0, 0),
    (130, 200, 600, 0, 0),
]


@pytest.mark.parametrize("M,N,K,ta,tb", GEMMS)
def test_sgemm_shapes(wasm_page: Any, M: int, N: int, K: int, ta: int, tb: int) -> None:
    rng = np.random.default_rng(M * 7919 + N * 31 + K)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    A = a.T.copy() if ta else a
    B = b.T.copy() if tb else b
    want = a.astype(np.float64) @ b
    body = ("const plan = keep(rt.sgemmPlan({transA: %d, transB: %d, N: %d, K: %d}));"
            "return rt.sgemmRun(plan, %d, P.a, P.b, P.c);" % (ta, tb, N, K, M))
    check(run_case(wasm_page, {"a": A, "b": B}, {"c": (M, N)}, body), "c", want, "sgemm %s" % ((M, N, K, ta, tb),))
    # pre-packed weights: B (and A) packed once, as a session packs them
    body = ("const pb = keep(rt.packB(%d, %d, %d, P.b, %d)); const pa = keep(rt.packA(%d, %d, %d, P.a, %d));"
            "const plan = keep(rt.sgemmPlan({transA: %d, transB: %d, N: %d, K: %d, packA: pa, packB: pb}));"
            "return rt.sgemmRun(plan, %d, 0, 0, P.c);"
            % (tb, N, K, K if tb else N, ta, M, K, M if ta else K, ta, tb, N, K, M))
    check(run_case(wasm_page, {"a": A, "b": B}, {"c": (M, N)}, body), "c", want, "packed sgemm")


@pytest.mark.parametrize("act,p0,p1", [(0, 0, 0), (1, 0, 0), (2, -0.5, 0.7), (3, 0, 0), (4, 0, 0),
                                       (5, 0.1, 0), (6, 0, 0)])
@pytest.mark.parametrize("bias_kind", [1, 2])
def test_sgemm_epilogues(wasm_page: Any, act: int, p0: float, p1: float, bias_kind: int) -> None:
    rng = np.random.default_rng(act * 10 + bias_kind)
    M, N, K = 45, 70, 300   # K > the K block: the epilogue runs once, on the last block
    a = (rng.standard_normal((M, K)) / 8).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    bias = rng.standard_normal(M if bias_kind == 1 else N).astype(np.float32)
    pre = 0.5 * (a.astype(np.float64) @ b) + 0.25 * c + (bias[:, None] if bias_kind == 1 else bias[None, :])
    want = _act(pre, act, p0, p1)
    body = ("rt.f32(P.out, %d).set(rt.f32(P.c, %d));"
            "const plan = keep(rt.sgemmPlan({N: %d, K: %d, alpha: 0.5, beta: 0.25, bias: P.bias, "
            "biasKind: %d, act: %d, p0: %r, p1: %r}));"
            "return rt.sgemmRun(plan, %d, P.a, P.b, P.out);"
            % (M * N, M * N, N, K, bias_kind, act, p0, p1, M))
    res = run_case(wasm_page, {"a": a, "b": b, "c": c, "bias": bias}, {"out": (M, N)}, body)
    check(res, "out", want, "sgemm act %d bias %d" % (act, bias_kind))


def test_expf_tanhf_within_two_ulp(wasm_page: Any) -> None:
    """wasm_rt.c's expf/tanhf through the Sigmoid/Tanh epilogues (C = act(x * 1), K = 1) over
    [-100, 100] and tiny values: within 2 float32 ulp of float64 numpy."""
    rng = np.random.default_rng(11)
    x = np.concatenate([np.linspace(-100, 100, 20001), rng.standard_normal(5000) * 3,
                        np.logspace(-30, 1, 400), -np.logspace(-30, 1, 400),
                        [0.0, 88.0, 88.7, -87.0, -88.7, -103.0, 9.0, -9.0]]).astype(np.float32)
    n = x.size
    for act, ref in ((3, lambda v: 1 / (1 + np.exp(-v))), (6, np.tanh)):
        body = ("const plan = keep(rt.sgemmPlan({N: 1, K: 1, act: %d})); rt.f32(P.one, 1)[0] = 1;"
                "return rt.sgemmRun(plan, %d, P.x, P.one, P.y);" % (act, n))
        res = run_case(wasm_page, {"x": x, "one": np.ones(1, np.float32)}, {"y": (n, 1)}, body)
        want = ref(x.astype(np.float64))
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        for label, (rc, outs) in res.items():
            err = np.abs(outs["y"][:, 0].astype(np.float64) - want)
            assert rc == 0 and (err <= 2 * ulp + 1e-37).all(), \
                (label, act, x[err > 2 * ulp + 1e-37][:5], (err / ulp).max())


# -------------------------------------------------------------------------------------- conv
def conv_ref(x: np.ndarray, w: np.ndarray, b: Optional[np.ndarray], group: int, strides: Sequence[int],
             dil: Sequence[int], pads: Sequence[int]) -> np.ndarray:
    """2-D convolution in float64, one kernel tap at a time (pads: top, left, bottom, right)."""
    N, C, H, W = x.shape
    Cout, Cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    OH = (H + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    OW = (W + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((N, Cout, OH, OW))
    co_g = Cout // group
    for g in range(group):
        xg = xp[:, g * Cg:(g + 1) * Cg]
        for i in range(kh):
            for k in range(kw):
                tap = xg[:, :, i * dil[0]: i * dil[0] + strides[0] * (OH - 1) + 1: strides[0],
                         k * dil[1]: k * dil[1] + strides[1] * (OW - 1) + 1: strides[1]]
                y[:, g * co_g:(g + 1) * co_g] += np.einsum("nchw,oc->nohw", tap,
                                                           w[g * co_g:(g + 1) * co_g, :, i, k])
    if b is not None:
        y += b[None, :, None, None]
    return y


CONVS = [  # (N, C, H, W), (Cout, kh, kw), group, strides, dilations, pads (t, l, b, r), path
    ((1, 3, 32, 32), (16, 7, 7), 1, (2, 2), (1, 1), (3, 3, 3, 3), 0),      # ResNet stem
    ((1, 16, 14, 14), (16, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1), 0),    # ResNet 3x3 block
    ((1, 16, 14, 14), (32, 1, 1), 1, (2, 2), (1, 1), (0, 0, 0, 0), 0),    # downsample 1x1 s2
    ((2, 7, 5, 6), (4, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), 0),        # pointwise
    ((1, 4, 9, 11), (6, 3, 3), 1, (1, 1), (1, 1), (0, 2, 1, 0), 2),       # direct 3x3 (forced)
    ((1, 6, 10, 9), (6, 3, 3), 6, (2, 1), (1, 2), (1, 0, 2, 1), 0),       # depthwise, strided
    ((2, 8, 20, 21), (8, 5, 5), 8, (1, 1), (1, 1), (2, 2, 2, 2), 3),      # depthwise 5x5
    ((1, 6, 11, 9), (9, 3, 2), 3, (2, 2), (2, 1), (0, 1, 1, 0), 1),       # grouped, dilated
    ((1, 1, 1, 1), (3, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), 0),
    ((1, 2, 3, 3), (1, 3, 3), 1, (3, 3), (1, 1), (2, 2, 2, 2), 0),
]


@pytest.mark.parametrize("xs,ws,group,strides,dil,pads,path", CONVS)
def test_conv2d(wasm_page: Any, xs: Tuple[int, ...], ws: Tuple[int, ...], group: int,
                strides: Tuple[int, int], dil: Tuple[int, int], pads: Tuple[int, ...], path: int) -> None:
    rng = np.random.default_rng(sum(xs) * 13 + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((ws[0], xs[1] // group, ws[1], ws[2])).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    want = conv_ref(x, w, b, group, strides, dil, pads)
    fields = ("C: %d, H: %d, W: %d, Cout: %d, kh: %d, kw: %d, group: %d, sh: %d, sw: %d, dh: %d, "
              "dw: %d, pt: %d, pl: %d, pb: %d, pr: %d, path: %d, weight: P.w, bias: P.b"
              % (xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], group, strides[0], strides[1], dil[0],
                 dil[1], pads[0], pads[1], pads[2], pads[3], path))
    body = "const plan = keep(rt.convPlan({%s})); return rt.conv2dRun(plan, %d, P.x, P.y);" % (fields, xs[0])
    what = "conv %s w %s group %d path %d" % (xs, ws, group, path)
    check(run_case(wasm_page, {"x": x, "w": w, "b": b}, {"y": want.shape}, body), "y", want, what)
    if path in (0, 1):   # packed weights + a fused Relu
        body = ("const pw = keep(rt.convPack(P.w, %d, %d, %d, %d, %d));"
                "const plan = keep(rt.convPlan({%s, packW: pw, act: 1}));"
                "return rt.conv2dRun(plan, %d, P.x, P.y);" % (ws[0], xs[1] // group, ws[1], ws[2], group,
                                                              fields, xs[0]))
        res = run_case(wasm_page, {"x": x, "w": w, "b": b}, {"y": want.shape}, body)
        check(res, "y", np.maximum(want, 0), what + " packed + Relu")


# ------------------------------------------------------------------------------------- pools
def pool_ref(x: np.ndarray, kind: int, k: Sequence[int], s: Sequence[int], d: Sequence[int],
             pads: Sequence[int], OH: int, OW: int, include_pad: bool) -> np.ndarray:
    """Max (kind 0) / average (kind 1) pool in float64; windows may run past the pads (ceil mode):
    those cells never count, pad cells count for the average only with include_pad."""
    NC, H, W = x.shape
    Hx = max(H + pads[0] + pads[2], (OH - 1) * s[0] + (k[0] - 1) * d[0] + 1)
    Wx = max(W + pads[1] + pads[3], (OW - 1) * s[1] + (k[1] - 1) * d[1] + 1)
    val = np.zeros((NC, Hx, Wx))
    val[:, pads[0]:pads[0] + H, pads[1]:pads[1] + W] = x
    real = np.zeros((Hx, Wx), bool)
    real[pads[0]:pads[0] + H, pads[1]:pads[1] + W] = True
    padded = np.zeros((Hx, Wx), bool)
    padded[:H + pads[0] + pads[2], :W + pads[1] + pads[3]] = True
    y = np.zeros((NC, OH, OW))
    for oh in range(OH):
        for ow in range(OW):
            rows = oh * s[0] + np.arange(k[0]) * d[0]
            cols = ow * s[1] + np.arange(k[1]) * d[1]
            win = val[:, rows][:, :, cols]
            m = real[np.ix_(rows, cols)]
            if kind == 0:
                y[:, oh, ow] = np.where(m, win, -np.inf).max(axis=(1, 2))
            else:
                n = padded[np.ix_(rows, cols)].sum() if include_pad else m.sum()
                y[:, oh, ow] = (win * m).sum(axis=(1, 2)) / max(n, 1)
    return y


POOLS = [  # (NC, H, W), kernel, strides, dilations, pads, ceil, count_include_pad
    ((6, 9, 10), (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 0, 0),
    ((64, 28, 28), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0, 0),      # ResNet's max pool
    ((5, 9, 10), (3, 2), (2, 3), (1, 1), (1, 0, 0, 1), 1, 0),
    ((5, 9, 10), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, 1),
    ((3, 11, 13), (2, 3), (1, 1), (2, 1), (0, 1, 1, 1), 0, 0),
    ((4, 1, 1), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 0, 0),
]


def _pool_out(n: int, k: int, s: int, d: int, p0: int, p1: int, ceil: int) -> int:
    span = n + p0 + p1 - (k - 1) * d - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p0:   # the last window must start inside the input or left pad
        out -= 1
    return out


@pytest.mark.parametrize("xs,k,s,d,pads,ceil,incl", POOLS)
def test_pool2d(wasm_page: Any, xs: Tuple[int, ...], k: Tuple[int, int], s: Tuple[int, int],
                d: Tuple[int, int], pads: Tuple[int, ...], ceil: int, incl: int) -> None:
    x = np.random.default_rng(sum(xs)).standard_normal(xs).astype(np.float32)
    OH = _pool_out(xs[1], k[0], s[0], d[0], pads[0], pads[2], ceil)
    OW = _pool_out(xs[2], k[1], s[1], d[1], pads[1], pads[3], ceil)
    for kind in (0, 1):
        want = pool_ref(x, kind, k, s, d, pads, OH, OW, bool(incl))
        body = ("const plan = keep(rt.poolPlan({H: %d, W: %d, kind: %d, kh: %d, kw: %d, sh: %d, sw: %d, "
                "dh: %d, dw: %d, pt: %d, pl: %d, pb: %d, pr: %d, countIncludePad: %d, OH: %d, OW: %d}));"
                "return rt.pool2dRun(plan, %d, P.x, P.y);"
                % (xs[1], xs[2], kind, k[0], k[1], s[0], s[1], d[0], d[1], pads[0], pads[1], pads[2],
                   pads[3], incl, OH, OW, xs[0]))
        res = run_case(wasm_page, {"x": x}, {"y": (xs[0], OH, OW)}, body)
        check(res, "y", want, "pool kind %d %s k %s s %s" % (kind, xs, k, s))


@pytest.mark.parametrize("NC,HW", [(1, 1), (6, 35), (512, 49), (3, 1000)])
def test_global_pool(wasm_page: Any, NC: int, HW: int) -> None:
    x = np.random.default_rng(NC + HW).standard_normal((NC, HW)).astype(np.float32)
    for kind, want in ((0, x.max(axis=1)), (1, x.astype(np.float64).mean(axis=1))):
        res = run_case(wasm_page, {"x": x}, {"y": (NC,)},
                       "return rt.globalPool(P.x, %d, %d, %d, P.y);" % (NC, HW, kind))
        check(res, "y", want, "global pool kind %d (%d, %d)" % (kind, NC, HW))


# -------------------------------------------------------------------------- errors, allocator
BAD_CALLS = [
    "rt.sgemmRun(keep(rt.sgemmPlan({N: 4, K: 4})), -1, P.x, P.x, P.x)",                 # M < 0
    "rt.sgemmRun(keep(rt.sgemmPlan({N: 4, K: 4})), 2, 0, P.x, P.x)",                    # no A
    "rt.sgemmRun(keep(rt.sgemmPlan({N: 4, K: 4, biasKind: 1})), 2, P.x, P.x, P.x)",     # no bias
    "rt.sgemmRun(0, 2, P.x, P.x, P.x)",                                                  # no plan
    "rt.conv2dRun(keep(rt.convPlan({C: 3, H: 4, W: 4, Cout: 4, kh: 3, kw: 3, group: 2, weight: P.x})), 1, P.x, P.x)",
    "rt.conv2dRun(keep(rt.convPlan({C: 4, H: 4, W: 4, Cout: 4, kh: 3, kw: 3, weight: P.x, path: 3})), 1, P.x, P.x)",
    "rt.conv2dRun(keep(rt.convPlan({C: 4, H: 4, W: 4, Cout: 4, kh: 3, kw: 3, weight: P.x, sh: 0, OH: 2, OW: 2})), 1, P.x, P.x)",
    "rt.pool2dRun(keep(rt.poolPlan({H: 4, W: 4, kind: 2, kh: 2, kw: 2})), 1, P.x, P.x)",
    "rt.globalPool(P.x, 1, 0, 0, P.x)",
    "rt.globalPool(P.x, 1, 4, 5, P.x)",
]


@pytest.mark.parametrize("call", BAD_CALLS)
def test_bad_arguments_return_earg(wasm_page: Any, call: str) -> None:
    """Bad arguments come back as OXK_EARG (-1), not a trap; the runtime keeps working."""
    x = np.zeros(64, np.float32)
    res = run_case(wasm_page, {"x": x}, {}, "return %s;" % call)
    assert {k: v[0] for k, v in res.items()} == {"st": -1, "mt": -1}
    ok = run_case(wasm_page, {"x": x}, {"y": (1,)}, "return rt.globalPool(P.x, 1, 4, 1, P.y);")
    assert ok["st"][0] == 0 and ok["mt"][0] == 0


def test_allocator_keeps_blocks_apart_and_reports_oom(wasm_page: Any) -> None:
    """Random allocations and frees (with growth): every live block keeps its own fill; 16-byte
    alignment; an impossible allocation throws a JS error naming the size."""
    result = wasm_page.evaluate("""() => {
      const out = {};
      for (const [label, rt] of Object.entries(window.runtimes)) {
        let seed = 12345;
        const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
        const live = [];
        let bad = 0, misaligned = 0;
        for (let step = 0; step < 3000; step++) {
          if (live.length && rand() < 0.45) {
            const [p, n, v] = live.splice(Math.floor(rand() * live.length), 1)[0];
            const view = rt.u8(p, n);
            for (let i = 0; i < n; i += 97) if (view[i] !== v) bad++;
            rt.free(p);
          } else {
            const n = 1 + Math.floor(rand() ** 3 * (rand() < 0.02 ? 8e6 : 5e4));
            const p = rt.alloc(n), v = step & 255;
            if (p & 15) misaligned++;
            rt.u8(p, n).fill(v);
            live.push([p, n, v]);
          }
        }
        for (const [p, n, v] of live) {
          const view = rt.u8(p, n);
          for (let i = 0; i < n; i += 97) if (view[i] !== v) bad++;
          rt.free(p);
        }
        let oom = "";
        try { rt.alloc(4000000000); } catch (e) { oom = String(e.message); }
        out[label] = {bad, misaligned, oom};
      }
      return out;
    }""")
    for label, r in result.items():
        assert r["bad"] == 0 and r["misaligned"] == 0, (label, r)
        assert "out of memory allocating 4000000000 bytes" in r["oom"], (label, r)


# ------------------------------------------------------------------------------- performance
PERF_JS = """(cfg) => {
  const out = {};
  for (const [label, rt, threads] of [["1 thread", window.runtimes.st, 1], ["2 threads", window.runtimes.mt, 2]]) {
    rt.setThreads(threads);
    const f = (n) => { const p = rt.alloc(4 * n); const v = rt.f32(p, n); for (let i = 0; i < n; i++) v[i] = Math.sin(i); return p; };
    const res = {};
    const time = (fn, flops) => {   // median and best of up to 25 runs (~0.4 s)
      fn();
      const ts = [];
      for (let t0 = performance.now(); ts.length < 25 && performance.now() - t0 < 400;) {
        const t = performance.now(); fn(); ts.push(performance.now() - t);
      }
      ts.sort((a, b) => a - b);
      const median = ts[ts.length >> 1];
      return {ms: median, best: ts[0], gflops: flops / median / 1e6};
    };
    { const [M, N, K] = [256, 1024, 1024];
      const A = f(M * K), B = f(K * N), C = rt.alloc(4 * M * N);
      const pb = rt.packB(0, N, K, B, N), plan = rt.sgemmPlan({N, K, packB: pb});
      res["matmul 256x1024 @ 1024x1024"] = time(() => rt.sgemmRun(plan, M, A, 0, C), 2 * M * N * K);
      [A, B, C, pb, plan].forEach((p) => rt.free(p)); }
    for (const c of cfg.convs) {
      const x = f(c.C * c.H * c.W), w = f(c.Cout * c.C * c.k * c.k);
      const OH = Math.floor((c.H + 2 * c.p - c.k) / c.s) + 1, OW = Math.floor((c.W + 2 * c.p - c.k) / c.s) + 1;
      const y = rt.alloc(4 * c.Cout * OH * OW), pw = rt.convPack(w, c.Cout, c.C, c.k, c.k, 1);
      const plan = rt.convPlan({C: c.C, H: c.H, W: c.W, Cout: c.Cout, kh: c.k, kw: c.k, sh: c.s, sw: c.s,
                                pt: c.p, pl: c.p, pb: c.p, pr: c.p, weight: w, packW: pw, act: 1});
      res[c.name] = time(() => rt.conv2dRun(plan, 1, x, y), 2 * c.Cout * OH * OW * c.C * c.k * c.k);
      [x, w, y, pw, plan].forEach((p) => rt.free(p));
    }
    out[label] = res;
  }
  window.runtimes.mt.setThreads(2);
  return out;
}"""
RESNET_CONVS = [  # ResNet-18 at 224x224: the stem and one 3x3 conv of each stage
    dict(name="conv 7x7/2 3->64 @224", C=3, H=224, W=224, Cout=64, k=7, s=2, p=3),
    dict(name="conv 3x3 64->64 @56", C=64, H=56, W=56, Cout=64, k=3, s=1, p=1),
    dict(name="conv 3x3 128->128 @28", C=128, H=28, W=28, Cout=128, k=3, s=1, p=1),
    dict(name="conv 3x3 256->256 @14", C=256, H=14, W=14, Cout=256, k=3, s=1, p=1),
    dict(name="conv 3x3 512->512 @7", C=512, H=7, W=7, Cout=512, k=3, s=1, p=1),
]


def test_performance_smoke(wasm_page: Any) -> None:
    """GFLOP/s of the 256x1024 @ 1024x1024 matmul and ResNet-18's convs, 1 and 2 threads: printed in
    the terminal summary, not asserted (the machine is shared)."""
    res = wasm_page.evaluate(PERF_JS, {"convs": RESNET_CONVS})
    for label, rows in res.items():
        for name, r in rows.items():
            line = ("wasm simd128 %-9s %-30s median %7.2f ms %6.1f GFLOP/s (best %.2f ms)"
                    % (label, name, r["ms"], r["gflops"], r["best"]))
            SUMMARY.append(line)
            print(line)
            assert r["ms"] > 0
