"""`onnxedge package mobile --target {android,ios} MODEL... -o OUT/`, registered through the
`onnxedge.commands` group (sharing the `package` command with `package rpi`)."""
from __future__ import annotations

import argparse
from typing import Any

from onnxedge.cli import add_optimize_option


def cmd_package_mobile(args: argparse.Namespace) -> int:
    """Make the mobile package and print its sizes and partitions."""
    from onnxedge.cli import parse_dims

    from .package import make_package
    p = make_package(args.models, args.output, args.platform, config=args.config,
                     artifacts=not args.no_artifacts, feature_level=args.feature_level,
                     deployment_target=args.deployment_target, dims=parse_dims(args.dim),
                     level=args.optimize)
    print(p.report_text.split("\n\nwheel:")[0])
    print("package: %s (manifest %s)" % (p.folder, p.manifest_path))
    return 0


def register(sub: Any) -> None:
    """Add `package mobile` to the CLI (sharing a `package` command other targets add too)."""
    from onnxedge.cli import add_package_target
    p = add_package_target(sub, "mobile", "iOS / Android package: reduced wheel with the CoreML / "
                                          "NNAPI bridge, .oxe models, pre-translated bridge "
                                          "artifacts, manifest, size report")
    p.add_argument("--target", required=True, choices=["android", "ios"], dest="platform",
                   help="android (NNAPI) or ios (Core ML)")
    p.add_argument("models", nargs="+", metavar="MODEL", help=".onnx or .oxe models to package")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="package folder to write "
                   "(replaced when it holds an earlier package)")
    p.add_argument("--config", metavar="FILE", help="a required_operators.config whose ops the "
                   "wheel keeps too")
    p.add_argument("--no-artifacts", action="store_true", help="leave the pre-translated bridge "
                   "artifacts out")
    p.add_argument("--feature-level", type=int, metavar="N", help="NNAPI feature level (android)")
    p.add_argument("--deployment-target", metavar="iOS15", help="Core ML deployment target (ios)")
    p.add_argument("--dim", action="append", metavar="NAME=SIZE", help="size of a symbolic input "
                   "dim (default 1 for each); repeatable")
    add_optimize_option(p, "all")
    p.set_defaults(func=cmd_package_mobile)
