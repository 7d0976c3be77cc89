"""`onnxedge package rpi MODEL... -o OUT/`, registered through the `onnxedge.commands` group."""
from __future__ import annotations

import argparse
import shlex
from typing import Any

from onnxedge.cli import add_optimize_option


def cmd_package_rpi(args: argparse.Namespace) -> int:
    """Make the Raspberry Pi bundle and print what it holds."""
    from .bundle import make_bundle
    b = make_bundle(args.models, args.output, python=args.python, wheels_dir=args.wheels,
                    neon=not args.no_neon, serve=args.serve, port=args.port, level=args.optimize)
    print("bundle: %s (and %s)" % (b.folder, b.tarball))
    print("  wheel: %s (%d bytes, %d ops kept)" % (b.wheel, b.report["wheel_bytes"], b.report["ops_kept"]))
    for m in b.models:
        print("  model: %s" % m)
    for w in b.dependency_wheels:
        print("  dependency: %s" % w)
    for note in b.notes:
        print("  note: %s" % note)
    print("on the Pi: tar xzf %s && cd %s && sudo ./install.sh"
          % (shlex.quote(b.tarball.rsplit("/", 1)[-1]), shlex.quote(b.folder.rsplit("/", 1)[-1])))
    return 0


def register(sub: Any) -> None:
    """Add `package rpi` to the CLI (sharing a `package` command other targets add too)."""
    from onnxedge.cli import add_package_target
    p = add_package_target(sub, "rpi", "Raspberry Pi bundle: reduced aarch64 wheel + NEON, .oxe "
                                       "models, install.sh, systemd unit, tarball")
    p.add_argument("models", nargs="+", metavar="MODEL", help=".onnx or .oxe models to bundle")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="bundle folder to write "
                   "(replaced); OUT.tar.gz is written beside it")
    p.add_argument("--python", default="3.11", help="the Pi's Python version (default 3.11)")
    p.add_argument("--wheels", metavar="DIR", help="take the aarch64 numpy/flatbuffers/pip wheels "
                   "from DIR instead of downloading them")
    p.add_argument("--serve", metavar="MODEL", help="the model the service runs (default the first)")
    p.add_argument("--port", type=int, default=8080, help="the service's port (default 8080)")
    add_optimize_option(p, "all")
    p.add_argument("--no-neon", action="store_true", help="leave the NEON provider out (numpy only)")
    p.set_defaults(func=cmd_package_rpi)
