"""onnxedge.web.wasm: the kernel library of edge/kernels/ built for wasm32 simd128 (lib/oxk.wasm,
lib/oxk-mt.wasm, by `python edge/kernels/build.py --targets wasm`) and its JS runtime oxk.js
(globalThis.onnxedgeWasm in the page). See docs/providers/WASM.md."""
from __future__ import annotations

import os
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.path.join(HERE, "lib")
MODULES = ("oxk.wasm", "oxk-mt.wasm")
RUNTIME_JS = os.path.join(HERE, "oxk.js")


def asset_paths() -> List[str]:
    """The files a page needs (oxk.js and both modules), as absolute paths; raises
    onnxedge's Fail naming the missing module when the wasm build has not run."""
    from onnxedge.errors import Fail
    paths = [RUNTIME_JS] + [os.path.join(LIB_DIR, m) for m in MODULES]
    for p in paths:
        if not os.path.isfile(p):
            raise Fail("%s is missing: build the wasm kernels with `python edge/kernels/build.py "
                       "--targets wasm` (make setup does)" % p)
    return paths
