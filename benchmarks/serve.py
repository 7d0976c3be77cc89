"""Benchmark `onnxedge serve` on the benchmark MLP (784-128-64-10): requests per second and
latency percentiles for 1 and 32 keep-alive clients, JSON and .npy bodies.

The server runs as `onnxedge serve` in its own process (request logging off); clients are
threads of this process on raw keep-alive sockets with prebuilt requests and a minimal response
reader, so the client costs little next to the server. Every answer is checked (status 200, the
same output bytes as the first answer). Writes `results/serve.json` and `results/serve.png`.

    python3 benchmarks/serve.py [--clients 1 32] [--duration 5] [--bodies json npy]
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import re
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import models  # noqa: E402

HERE = os.path.join(ROOT, "benchmarks")


def request_bytes(body_kind: str, x: np.ndarray, port: int) -> bytes:
    """One complete keep-alive POST /v1/run request for input `x` (JSON or .npy body)."""
    if body_kind == "json":
        body = json.dumps({"inputs": {"input": {"dtype": "float32", "shape": list(x.shape),
                                                "data": x.ravel().tolist()}}}).encode()
        ctype = "application/json"
    else:
        buf = io.BytesIO()
        np.save(buf, x)
        body = buf.getvalue()
        ctype = "application/x-npy"
    head = ("POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\n"
            "Content-Length: %d\r\n\r\n" % (port, ctype, len(body)))
    return head.encode("latin-1") + body


class _Conn:
    """A keep-alive connection that sends raw requests and reads (status, body) answers."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def roundtrip(self, req: bytes) -> Tuple[int, bytes]:
        """Send one request, return (status, body)."""
        self.sock.sendall(req)
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        status = int(head[9:12])
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        n = int(m.group(1)) if m else 0
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, body

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def _client(port: int, req: bytes, want: bytes, stop_at: float, warm_until: float,
            out: List[float], errors: List[str]) -> None:
    try:
        conn = _Conn(port)
    except OSError as e:
        errors.append("connect: %s" % e)
        return
    try:
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                break
            status, body = conn.roundtrip(req)
            t1 = time.perf_counter()
            if status != 200 or body != want:
                errors.append("status %d: %s" % (status, body[:200]))
                if len(errors) > 100:
                    break
                continue
            if t0 >= warm_until:
                out.append(t1 - t0)
    except OSError as e:
        errors.append("%s: %s" % (type(e).__name__, e))
    finally:
        conn.close()


def measure(port: int, req: bytes, clients: int, duration: float,
            warmup: float = 0.5) -> Dict[str, Any]:
    """`clients` keep-alive connections sending `req` back to back for `duration` seconds."""
    first = _Conn(port)
    try:
        status, want = first.roundtrip(req)
    finally:
        first.close()
    if status != 200:
        raise RuntimeError("the server answered %d: %s" % (status, want[:300]))
    start = time.perf_counter()
    warm_until, stop_at = start + warmup, start + warmup + duration
    lat: List[List[float]] = [[] for _ in range(clients)]
    errors: List[str] = []
    threads = [threading.Thread(target=_client, args=(port, req, want, stop_at, warm_until,
                                                      lat[i], errors), daemon=True)
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration + warmup + 60)
    ms = np.array([x for per in lat for x in per]) * 1e3
    if ms.size == 0:
        return {"clients": clients, "error": errors[0] if errors else "no answers"}
    return {"clients": clients, "requests": int(ms.size), "req_per_s": ms.size / duration,
            "p50_ms": float(np.percentile(ms, 50)), "p90_ms": float(np.percentile(ms, 90)),
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
            "errors": len(errors), "first_error": errors[0] if errors else None}


def start_server(model: str, extra: Sequence[str] = ()) -> Tuple[subprocess.Popen, int]:
    """`onnxedge serve MODEL --port 0 --quiet` in a process; returns it and its port."""
    cmd = [sys.executable, "-m", "onnxedge.cli", "serve", model, "--port", "0", "--quiet"]
    proc = subprocess.Popen(cmd + list(extra), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            universal_newlines=True)
    deadline = time.time() + 60
    lines = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()   # keep it drained
            return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError("the server did not start: %s" % "".join(lines))


def _peak_rss_mb(pid: int) -> Optional[float]:
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _cpu_s(pid: int) -> Optional[float]:
    """User + system CPU seconds a process has used so far (Linux /proc), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def stop_server(proc: subprocess.Popen) -> int:
    """SIGTERM, wait for the drain; returns the exit code."""
    proc.terminate()
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def plot(results: List[Dict[str, Any]], path: str, title: str) -> None:
    """Two panels: requests/s and p99 latency per (body, clients)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if "req_per_s" in r]
    labels = ["%s\n%d client%s" % (r["body"], r["clients"], "" if r["clients"] == 1 else "s")
              for r in ok]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 4))
    for ax, key, name in ((ax1, "req_per_s", "requests / s"), (ax2, "p99_ms", "p99 latency, ms")):
        values = [r[key] for r in ok]
        bars = ax.bar(range(len(ok)), values, color=["C0" if r["body"] == "json" else "C1"
                                                     for r in ok])
        for bar, v in zip(bars, values):
            ax.annotate("%.0f" % v if v >= 10 else "%.2f" % v,
                        (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom",
                        fontsize=8)
        ax.set_xticks(range(len(ok)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(name)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown_table(results: List[Dict[str, Any]]) -> str:
    """One row per (body, clients)."""
    rows = ["| body | clients | req/s | p50 ms | p99 ms | server CPU ms/request | errors |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "req_per_s" in r:
            rows.append("| %s | %d | %.0f | %.2f | %.2f | %.2f | %d |" % (
                r["body"], r["clients"], r["req_per_s"], r["p50_ms"], r["p99_ms"],
                r.get("server_cpu_ms_per_request", float("nan")), r["errors"]))
        else:
            rows.append("| %s | %d | error: %s | | | |" % (r["body"], r["clients"],
                                                           str(r["error"])[:60]))
    return "\n".join(rows)


def _machine() -> Dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       cpu)
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__}


def _loadavg() -> Optional[List[float]]:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run every (body, clients) configuration against one server; write serve.json / .png."""
    p = argparse.ArgumentParser(description="Benchmark `onnxedge serve` on the MLP.")
    p.add_argument("--clients", nargs="+", type=int, default=[1, 32])
    p.add_argument("--bodies", nargs="+", default=["json", "npy"], choices=["json", "npy"])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per configuration")
    p.add_argument("--model-dir", default=os.path.join(HERE, "build"))
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--server-arg", action="append", default=[],
                   help="extra argument for `onnxedge serve` (repeatable)")
    args = p.parse_args(argv)
    model = models.build_all(args.model_dir, ["mlp"])["mlp"]
    x = models.make_inputs("mlp", batch=1)["input"]
    proc, port = start_server(model, args.server_arg)
    results: List[Dict[str, Any]] = []
    try:
        for body in args.bodies:
            req = request_bytes(body, x, port)
            for clients in args.clients:
                print("serve mlp, %s body, %d keep-alive client(s) ..." % (body, clients),
                      end=" ", flush=True)
                cpu0 = _cpu_s(proc.pid)
                r = measure(port, req, clients, args.duration)
                cpu1 = _cpu_s(proc.pid)
                r.update(body=body, request_bytes=len(req))
                if cpu0 is not None and cpu1 is not None and r.get("requests"):
                    # includes the warm-up's requests: an upper bound, independent of the load
                    r["server_cpu_ms_per_request"] = 1e3 * (cpu1 - cpu0) / r["requests"]
                results.append(r)
                print("%.0f req/s, p50 %.2f ms, p99 %.2f ms, server CPU %.2f ms/request, %d errors"
                      % (r["req_per_s"], r["p50_ms"], r["p99_ms"],
                         r.get("server_cpu_ms_per_request", float("nan")), r["errors"])
                      if "req_per_s" in r else "FAILED: %s" % r["error"], flush=True)
        rss = _peak_rss_mb(proc.pid)
    finally:
        code = stop_server(proc)
    report = {"created": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": _machine(), "model": "mlp 784-128-64-10, batch 1",
              "server": "onnxedge serve --quiet %s" % " ".join(args.server_arg),
              "duration_s": args.duration, "server_peak_rss_mb": rss,
              "load_average": _loadavg(),
              "server_exit_code": code, "results": results}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "serve.json"), "w") as f:
        json.dump(report, f, indent=2)
    plot(results, os.path.join(args.out, "serve.png"),
         "onnxedge serve, MLP 784-128-64-10, keep-alive clients, %s, %s cores"
         % (report["machine"]["cpu"], report["machine"]["cpu_count"]))
    print()
    print(markdown_table(results))
    print("\nwrote %s/serve.json and serve.png" % args.out)
    failed = code != 0 or any("error" in r or r["errors"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
