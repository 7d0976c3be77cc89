"""The page's real wasm kernel module natively: web/wasm/oxk.js and web/wasm/lib/oxk.wasm (wasm32,
4-byte pointers, one thread) in a Node.js child process, driven line by line (JSON, tensors as
base64) as a `transport.Kernels`. What the page's JsKernels does through Pyodide's JS bridge, this
does through a pipe: the module's own oxk_layout() table, plans and programs written with the
binding's packer, one `oxk_program_run` call into wasm per run. Counts of copies and calls are kept
for the tests. `available()` says whether node and the built module are here.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional

import numpy as np

from onnxedge.web.wasm import transport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OXK_JS = os.path.join(ROOT, "web", "wasm", "oxk.js")
OXK_WASM = os.path.join(ROOT, "web", "wasm", "lib", "oxk.wasm")

SERVER = r"""
console.log = (...a) => console.error(...a);   // stdout carries the protocol
require(process.argv[1]);
const fs = require("fs");
const rl = require("readline").createInterface({input: process.stdin});
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
(async () => {
  const rt = new onnxedgeWasm.Runtime();
  await rt.init({modules: {"oxk.wasm": fs.readFileSync(process.argv[2])}, threads: 1});
  out({ok: rt.layoutJSON(), threads: rt.threads, backend: rt.backend()});
  for await (const line of rl) {
    const m = JSON.parse(line);
    try {
      let r = 0;
      if (m.op === "alloc") r = rt.alloc(m.n);
      else if (m.op === "free") rt.free(m.p);
      else if (m.op === "write") { const b = Buffer.from(m.b64, "base64"); rt.u8(m.p, b.length).set(b); }
      else if (m.op === "read") r = Buffer.from(rt.u8(m.p, m.n)).toString("base64");
      else if (m.op === "call") r = rt.exports[m.name](...m.args);
      else if (m.op === "method") r = rt[m.name](...m.args);
      else if (m.op === "runProgram") {
        const TYPED = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array,
                       uint8: Uint8Array, bool: Uint8Array, float64: Float64Array};
        const data = m.inputs.map((b, i) => new TYPED[m.types[i]](Uint8Array.from(Buffer.from(b, "base64")).buffer));
        r = rt.runProgram(m.desc, data, m.which).map((a) => Buffer.from(a.buffer).toString("base64"));
      }
      out({ok: r});
    } catch (e) {
      out({error: String(e && e.stack || e)});
    }
  }
})().catch((e) => { out({error: String(e && e.stack || e)}); process.exit(1); });
"""


def available() -> Optional[str]:
    """None when node and the built oxk.wasm are here, else why not."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isfile(OXK_WASM):
        return "%s is missing: run `python edge/kernels/build.py --targets wasm`" % OXK_WASM
    return None


class NodeKernels(transport.Kernels):
    """transport.Kernels over oxk.js + oxk.wasm in a node child process (see the module docstring).
    `rows_hook(rows)` may alter the module's layout rows before they are checked (tests)."""

    def __init__(self, rows_hook: Any = None):
        self.proc = subprocess.Popen(["node", "-e", SERVER, OXK_JS, OXK_WASM], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.counts: Dict[str, int] = {}
        self.live: Dict[int, int] = {}
        hello = self._recv()
        self.threads = int(hello["threads"])
        self.backend = str(hello["backend"])
        rows: List[Any] = json.loads(hello["ok"])
        try:
            self.set_layout(rows_hook(rows) if rows_hook else rows)
        except BaseException:
            self.close()
            raise

    def _recv(self) -> Dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the node kernel process ended")
        msg = json.loads(line)
        if "error" in msg:
            raise RuntimeError("node kernel process: " + msg["error"])
        return msg

    def _ask(self, **msg: Any) -> Any:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        return self._recv()["ok"]

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def close(self) -> None:
        """End the node process."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)

    def alloc(self, nbytes: int) -> int:
        ptr = int(self._ask(op="alloc", n=int(nbytes)))
        self.live[ptr] = int(nbytes)
        return ptr

    def free(self, ptr: int) -> None:
        assert self.live.pop(ptr, None) is not None, "free of %d, which is not allocated" % ptr
        self._ask(op="free", p=int(ptr))

    def write(self, ptr: int, array: np.ndarray) -> None:
        self._count("write")
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8).tobytes()
        self._ask(op="write", p=int(ptr), b64=base64.b64encode(raw).decode())

    def read(self, ptr: int, out: np.ndarray) -> None:
        self._count("read")
        raw = base64.b64decode(self._ask(op="read", p=int(ptr), n=int(out.nbytes)))
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(raw, np.uint8)

    def call(self, name: str, *args: Any) -> int:
        self._count(name)
        return int(self._ask(op="call", name=name, args=[float(a) if isinstance(a, float) else int(a)
                                                          for a in args]))

    def _method(self, key: str, name: str, *args: int) -> int:
        self._count(key)
        return int(self._ask(op="method", name=name, args=[int(a) for a in args]))

    def sgemm_run(self, plan: int, m: int, a: int, b: int, c: int) -> int:
        return self._method("sgemm_run", "sgemmRun", plan, m, a, b, c)

    def conv_run(self, plan: int, n: int, x: int, y: int) -> int:
        return self._method("conv_run", "conv2dRun", plan, n, x, y)

    def pool_run(self, plan: int, nc: int, x: int, y: int) -> int:
        return self._method("pool_run", "pool2dRun", plan, nc, x, y)

    def global_pool(self, x: int, nc: int, hw: int, kind: int, y: int) -> int:
        return self._method("global_pool", "globalPool", x, nc, hw, kind, y)

    def program_run(self, program: int, inputs: int, outputs: int, arena: int) -> int:
        return self._method("program_run", "programRun", program, inputs, outputs, arena)

    def run_described(self, desc: Dict[str, Any], inputs: List[np.ndarray],
                      which: Optional[List[int]] = None) -> List[np.ndarray]:
        """oxk.js's runProgram (what onnxedge.js calls for runs without Python): a program
        described by WasmProgram.describe() run on `inputs` (as JS typed arrays of their own
        element types); its outputs (flat)."""
        self._count("runProgram")
        got = self._ask(op="runProgram", desc=desc, which=which, types=[str(x.dtype) for x in inputs],
                        inputs=[base64.b64encode(np.ascontiguousarray(x).tobytes()).decode()
                                for x in inputs])
        return [np.frombuffer(base64.b64decode(b), np.float32) for b in got]
