"""The page's binding reads the struct layouts from the wasm module itself (oxk_layout(), issue #16):
the real oxk.wasm runs natively in Node.js (wasm_node_kernels.py); its wasm32 table (4-byte
pointers) is checked against the binding's fields (onnxedge.oxk_layout.FIELDS), plans are packed
from it, and a module whose table disagrees is refused with a Fail naming the struct and field."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from onnxedge import oxk_layout
from onnxedge.errors import Fail

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wasm_node_kernels as W  # noqa: E402

pytestmark = pytest.mark.needs_setup   # node and the wasm build (edge/kernels/build.py --targets wasm)


@pytest.fixture(scope="module")
def node_kernels():
    why = W.available()
    if why:
        pytest.skip(why)
    k = W.NodeKernels()
    yield k
    k.close()


def test_module_states_wasm32_layouts(node_kernels):
    t = node_kernels.layout
    assert node_kernels.pointer_size == 4
    # natural wasm32 layouts of oxk.h: every field 4 bytes, no padding
    assert {n: t[n][0] for n in ("oxk_sgemm_plan", "oxk_conv_plan", "oxk_pool_plan", "oxk_slot",
                                 "oxk_instr", "oxk_program", "oxk_field")} == {
        "oxk_sgemm_plan": 52, "oxk_conv_plan": 96, "oxk_pool_plan": 64, "oxk_slot": 16,
        "oxk_instr": 44, "oxk_program": 16, "oxk_field": 20}
    assert [f[:3] for f in t["oxk_slot"][1]] == [("kind", 0, 4), ("index", 4, 4), ("offset", 8, 4),
                                                 ("data", 12, 4)]


def test_plans_pack_from_the_module_table(node_kernels):
    raw = node_kernels.packer.pack("oxk_sgemm_plan", (0, 1, 7, 9, 2.0, 0.0, 0, 64, 128, 2, 2, -1.0, 6.0))
    ints, floats = np.frombuffer(raw, "<i4"), np.frombuffer(raw, "<f4")
    assert list(ints[[1, 2, 3, 7, 8, 9, 10]]) == [1, 7, 9, 64, 128, 2, 2]
    assert list(floats[[4, 11, 12]]) == [2.0, -1.0, 6.0]
    none = (-1,) * 5
    raw = node_kernels.packer.pack_array("oxk_instr", [(1, 5, 96, (0, -1, 2) + none),
                                                       (9, 3, 0, (1, -1, 3, 4) + none[1:])])
    assert list(np.frombuffer(raw, "<i4")) == [1, 5, 96, 0, -1, 2] + [-1] * 5 + [9, 3, 0, 1, -1, 3, 4] \
        + [-1] * 4


def test_a_plan_written_by_python_runs_in_wasm(node_kernels):
    k = node_kernels
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    pa, pb, pc = k.put(a), k.put(b), k.alloc(4 * 15)
    plan = k.put_struct("oxk_sgemm_plan", (0, 0, 3, 7, 1.0, 0.0, 0, 0, 0, 0, 0, 0.0, 0.0))
    try:
        assert k.sgemm_run(plan, 5, pa, pb, pc) == 0
        y = np.empty((5, 3), np.float32)
        k.read(pc, y)
        np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    finally:
        for p in (pa, pb, pc, plan):
            k.free(p)


def _swap(rows, struct, a, b):
    out = []
    for r in rows:
        if r[0] == struct and r[1] in (a, b):
            r = [r[0], b if r[1] == a else a] + list(r[2:])
        out.append(r)
    return out


@pytest.mark.parametrize("hook, words", [
    (lambda rows: _swap(rows, "oxk_sgemm_plan", "transA", "transB"),
     ["oxk_sgemm_plan", "transA", "transB"]),
    (lambda rows: [r for r in rows if not (r[0] == "oxk_pool_plan" and r[1] == "OW")], ["oxk_pool_plan", "OW"]),
    (lambda rows: [r[:4] + ["i"] if r[0] == "oxk_conv_plan" and r[1] == "p0" else r for r in rows],
     ["oxk_conv_plan", "p0"]),
    (lambda rows: [r for r in rows if r[0] != "oxk_program"], ["oxk_program"]),
    (lambda rows: rows + [["oxk_slot", "extra", 16, 4, "i"]], ["oxk_slot", "extra"]),
])
def test_module_whose_layout_disagrees_is_refused(node_kernels, hook, words):
    with pytest.raises(Fail) as e:
        W.NodeKernels(rows_hook=hook)
    for w in words:
        assert w in str(e.value)


def test_table_checks_without_a_module():
    # the binding's own description is what check() holds a table to
    assert set(oxk_layout.FIELDS) >= {"oxk_sgemm_plan", "oxk_conv_plan", "oxk_pool_plan", "oxk_program"}
    with pytest.raises(Fail, match=r"no struct oxk_field"):
        oxk_layout.check({})


JS_REFUSAL = r"""
require(process.argv[1]);
const fs = require("fs");
const instantiate = WebAssembly.instantiate;
// the module's table with oxk_sgemm_plan.alpha stated as an int: oxk.js must refuse it
WebAssembly.instantiate = async (module, imports) => {
  const inst = await instantiate(module, imports);
  const ex = inst.exports, rows = new DataView(ex.memory.buffer);
  const str = (p) => {
    let s = "";
    for (const b = new Uint8Array(ex.memory.buffer); b[p]; p++) s += String.fromCharCode(b[p]);
    return s;
  };
  const countPtr = ex.oxk_malloc(4), base = ex.oxk_layout(countPtr);
  for (let i = 0; i < rows.getInt32(countPtr, true); i++) {
    const r = base + 20 * i;
    if (str(rows.getUint32(r, true)) === "oxk_sgemm_plan" && str(rows.getUint32(r + 4, true)) === "alpha")
      rows.setInt32(r + 16, "i".charCodeAt(0), true);
  }
  return inst;
};
console.log = () => {};
new onnxedgeWasm.Runtime().init({modules: {"oxk.wasm": fs.readFileSync(process.argv[2])}, threads: 1})
  .then(() => { process.stdout.write("accepted\n"); }, (e) => { process.stdout.write(String(e.message) + "\n"); });
"""


def test_oxk_js_refuses_a_module_whose_plan_layout_disagrees(node_kernels):
    import subprocess
    out = subprocess.run(["node", "-e", JS_REFUSAL, W.OXK_JS, W.OXK_WASM], capture_output=True, text=True,
                         timeout=60).stdout
    assert 'layout of oxk_sgemm_plan: field 4 is "alpha" (kind i' in out and '(kind f, 4 bytes) in oxk.js' in out, out
