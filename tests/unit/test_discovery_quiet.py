"""Provider discovery on a platform that lacks a module a provider needs (Pyodide has no
`ctypes`): the provider is left out quietly with its reason in `discovery.NOT_HERE`, while a
plug-in broken for another reason (a missing onnxedge module) still warns. Each case runs in a
subprocess that hides the module (`sys.modules[name] = None`, which makes importing it raise
ModuleNotFoundError as in Pyodide) with warnings turned into errors."""
from __future__ import annotations

import json
import subprocess
import sys

CODE = r"""
import json, sys, warnings
import numpy   # numpy 1.17 itself imports ctypes (Pyodide's build does not need it)
for hidden in %r:
    sys.modules[hidden] = None
warnings.simplefilter("error")   # any warning fails the import below
caught = []
try:
    import onnxedge
    from onnxedge.providers import discovery
    classes = sorted(discovery.provider_classes())
    available = onnxedge.get_available_providers()
except Warning as w:
    caught.append(str(w))
    classes = available = []
    from onnxedge.providers import discovery
print(json.dumps({"classes": classes, "available": available, "warnings": caught,
                  "not_here": discovery.NOT_HERE}))
"""


def _run(hidden: list) -> dict:
    proc = subprocess.run([sys.executable, "-c", CODE % (hidden,)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_ctypes_leaves_neon_out_without_a_warning() -> None:
    """As in Pyodide: `import ctypes` fails, so NEON is not loadable, quietly."""
    got = _run(["ctypes"])
    assert got["warnings"] == []
    for engine in ("NeonExecutionProvider", "X64ExecutionProvider"):   # the C engine, either build
        assert engine not in got["classes"]
        assert engine not in got["available"]
        assert "ctypes" in got["not_here"][engine]
    assert "CPUExecutionProvider" in got["available"]


def test_missing_onnxedge_module_still_warns() -> None:
    """A provider whose own onnxedge module is missing is a broken build: it warns."""
    got = _run(["onnxedge.edge.neon.library"])
    assert any("ExecutionProvider could not be loaded" in w and "onnxedge.edge.neon.library" in w
               for w in got["warnings"]), got
    assert not {"NeonExecutionProvider", "X64ExecutionProvider"} & set(got["not_here"])
