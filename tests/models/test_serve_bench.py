"""Smoke test of benchmarks/serve.py: a short run against a real `onnxedge serve` process writes
serve.json (every configuration answered, no errors, the server drained and exited 0) and
serve.png. No speed is asserted."""
from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

pytest.importorskip("matplotlib")
from benchmarks import serve as serve_bench  # noqa: E402


def test_serve_bench_writes_results(tmp_path, capsys) -> None:
    status = serve_bench.main(["--clients", "1", "4", "--duration", "0.5",
                               "--model-dir", str(tmp_path / "models"), "--out", str(tmp_path)])
    assert status == 0
    report = json.loads((tmp_path / "serve.json").read_text())
    assert report["server_exit_code"] == 0
    rows = {(r["body"], r["clients"]): r for r in report["results"]}
    assert set(rows) == {("json", 1), ("json", 4), ("npy", 1), ("npy", 4)}
    for r in rows.values():
        assert r["errors"] == 0 and r["requests"] > 0 and r["p99_ms"] >= r["p50_ms"] > 0
    assert (tmp_path / "serve.png").stat().st_size > 1000
    assert "| json | 1 |" in capsys.readouterr().out
