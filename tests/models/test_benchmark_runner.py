"""Smoke test of benchmarks/run.py: one tiny model, a few runs, JSON and PNG written."""
from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

pytest.importorskip("onnxruntime")
pytest.importorskip("matplotlib")
from benchmarks import run  # noqa: E402


def test_run_writes_results(tmp_path, capsys) -> None:
    """Both engines, both thread settings: medians, ratios, a table and a chart."""
    status = run.main(["--models", "mlp", "--runs", "3", "--warmup", "1",
                       "--model-dir", str(tmp_path / "models"), "--out", str(tmp_path),
                       "--no-serve"])   # benchmarks/serve.py has its own smoke test
    assert status == 0
    report = json.loads((tmp_path / "latest.json").read_text())
    engine = run._engine_available()   # onnxedge with its C engine, where the library loads
    assert len(report["results"]) == (6 if engine else 4)
    assert all(r["median_ms"] > 0 and r["runs"] == 3 for r in report["results"])
    assert all(r["max_abs_diff"] < 1e-5 for r in report["results"] if r["engine"] != "onnxruntime")
    assert set(report["ratios_onnxedge_over_onnxruntime"]["mlp"]) == (
        {"1", "default", "1 engine", "default engine"} if engine else {"1", "default"})
    assert (tmp_path / "latest.png").stat().st_size > 1000
    assert "| mlp | 1 |" in capsys.readouterr().out
