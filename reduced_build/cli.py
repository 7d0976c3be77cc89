"""`onnxedge reduce MODEL... -o OUT/`, registered through the `onnxedge.commands` group."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from onnxedge.cli import add_optimize_option


def cmd_reduce(args: argparse.Namespace) -> int:
    """Make the reduced build and print its size report."""
    from . import report
    from .build import reduce
    extra = list(args.package or [])
    if args.with_webgpu:
        extra.append("onnxedge.web.webgpu")
    if args.with_wasm:
        extra.append("onnxedge.web.wasm")
    result = reduce(args.models, args.output, config=args.config, level=args.optimize,
                    extra_packages=extra, arch=args.arch, add_ops=args.add_op or (),
                    full_wheel="build" if args.compare_full else None,
                    progress=lambda msg: print(msg, file=sys.stderr),
                    profile=args.profile, strip=not args.no_strip,
                    with_onnx=args.with_onnx)
    print(report.format_text(result.report), end="")
    for stem, path in sorted(result.models.items()):
        print("  model %s: %s" % (stem, path))
    print("  config: %s" % result.config)
    print("  report: %s, %s" % (result.report_json, result.report_text))
    return 0


def register(sub: Any) -> None:
    """Add `reduce` to the CLI."""
    p = sub.add_parser(
        "reduce", help="reduced build: required_operators.config, a slim wheel holding only the "
                       "kernels the models need, the models as optimized .oxe, a size report")
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help=".onnx / .oxe models (or folders of them); may be empty with --config")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output folder")
    p.add_argument("--config", metavar="FILE", help="a required_operators.config (onnxruntime's "
                   "format) whose ops are added to the models'")
    p.add_argument("--add-op", action="append", metavar="'DOMAIN;OPSET;OP'",
                   help="an extra op, e.g. 'ai.onnx;13;Softmax' (repeatable)")
    add_optimize_option(p, "all")
    p.add_argument("--profile", default="runtime", choices=["runtime", "full"],
                   help="runtime (default): runs pre-optimized .oxe models only, needs numpy alone; "
                        "full: the whole core (optimizer, .onnx loader, CLI, server)")
    p.add_argument("--no-strip", action="store_true", help="keep whole kernel modules, docstrings "
                   "and comments")
    p.add_argument("--with-onnx", action="store_true",
                   help="keep the .onnx reader (no onnx package needed) and the kernels of the "
                        "models' ops as in the file: the wheel opens .onnx too, unoptimized")
    p.add_argument("--with-webgpu", action="store_true",
                   help="include the WebGPU provider (onnxedge.web.webgpu) for the browser page")
    p.add_argument("--with-wasm", action="store_true",
                   help="include the page's wasm SIMD provider (onnxedge.web.wasm) with its web "
                        "assets: oxk.js and the oxk.wasm / oxk-mt.wasm kernel modules")
    p.add_argument("--package", action="append", metavar="PKG",
                   help="another onnxedge subpackage to include (repeatable)")
    p.add_argument("--arch", help="target architecture of included shared libraries (e.g. aarch64)")
    p.add_argument("--compare-full", action="store_true",
                   help="build the full project wheel too and report the size ratio")
    p.set_defaults(func=cmd_reduce)
