"""The `onnxedge` command line: `run` and `inspect`, plus subcommands that plug-ins register.

Packages outside the core add subcommands through the entry-point group `onnxedge.commands`:
the entry point names a function that receives argparse's subparsers object, adds its parser and
sets `func` on it (a function taking the parsed arguments and returning an exit code).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import dtypes, ir
from .errors import InvalidArgument, OnnxEdgeError

COMMAND_GROUP = "onnxedge.commands"
_LEVELS = {"disable": 0, "basic": 1, "extended": 2, "all": 99}   # GraphOptimizationLevel values


def parse_providers(text: Optional[str]) -> Optional[List[str]]:
    """The `--providers` option's comma-separated list (None when not given)."""
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def _bridge_providers(names: Optional[List[str]], dims: Dict[str, int]) -> Optional[List[Any]]:
    """Providers for a partition report. A bridge provider (one with a reference `interpret`:
    CoreML, NNAPI) gets `dims` (it needs static shapes) and, when it is not available on this
    machine, its reference mode, so the report still shows what it would claim on the device."""
    if not names:
        return names
    from .providers import discovery
    classes = discovery.provider_classes()
    out: List[Any] = []
    for name in names:
        cls = classes.get(name)
        if cls is None or not callable(getattr(cls, "interpret", None)):
            out.append(name)
            continue
        opts: Dict[str, Any] = {"dims": dict(dims)} if dims else {}
        if not cls.is_available():
            opts["reference"] = True
        out.append((name, opts) if opts else name)
    return out


def parse_dims(items: Sequence[str]) -> Dict[str, int]:
    """{name: size} from repeated `--dim NAME=INT` arguments (the CLI's and plug-ins')."""
    dims = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit():
            raise InvalidArgument("--dim %r: expected NAME=INT with INT >= 0, e.g. --dim batch=4"
                                  % item)
        dims[name.strip()] = int(value)
    return dims


def check_dims(dims: Dict[str, int], args: Sequence[Any]) -> None:
    """Refuse a `--dim NAME=...` whose NAME is no symbolic dimension of the given NodeArgs."""
    symbolic = sorted({d for a in args for d in (a.shape or ()) if isinstance(d, str)})
    unknown = sorted(set(dims) - set(symbolic))
    if unknown:
        raise InvalidArgument("--dim %s: the model has no symbolic dimension named %s; its "
                              "symbolic dimensions are %s" % (
                                  ", ".join(unknown), " or ".join(repr(u) for u in unknown),
                                  symbolic or "none"))


def check_feed_names(feeds: Dict[str, Any], args: Sequence[Any]) -> None:
    """Refuse `--input NAME=...` for a NAME the model has no input called."""
    names = [a.name for a in args]
    unknown = [n for n in feeds if n not in names]
    if unknown:
        raise InvalidArgument("--input %s: the model has no input named %r; its inputs are %s"
                              % (unknown[0], unknown[0], names))


def random_input(arg: Any, dims: Dict[str, int], rng: np.random.RandomState) -> np.ndarray:
    """A random tensor for a NodeArg; symbolic dims come from `dims` or default to 1."""
    shape = []
    for d in arg.shape:
        if isinstance(d, int) and d >= 0:
            shape.append(d)
        elif isinstance(d, str) and d in dims:
            shape.append(dims[d])
        else:
            shape.append(1)
    type_str = arg.type
    if not type_str.startswith("tensor("):
        raise InvalidArgument("input %r has type %s: give it with --input, random values are made "
                              "only for tensors" % (arg.name, type_str))
    elem = type_str[len("tensor("):-1]
    code = dtypes.from_ort_name(elem)
    if code is None:
        raise InvalidArgument("input %r has element type %r, which this build does not know"
                              % (arg.name, elem))
    np_type = dtypes.to_numpy(code)
    if np_type.kind == "f":
        return rng.standard_normal(shape).astype(np_type)
    if np_type.kind in "iu":
        return rng.randint(0, 10, size=shape).astype(np_type)
    if np_type.kind == "b":
        return rng.randint(0, 2, size=shape).astype(bool)
    if np_type.kind == "O":
        out = np.empty(shape, dtype=object)
        out[...] = "text"
        return out
    return rng.standard_normal(shape).astype(np_type)


def _load_inputs(items: Sequence[str]) -> Dict[str, np.ndarray]:
    feeds = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if not sep:
            raise InvalidArgument("--input %r: expected NAME=FILE.npy" % item)
        if not os.path.isfile(path):
            raise InvalidArgument("--input %s: file %s does not exist" % (name, path))
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise InvalidArgument("--input %s: %s is not a .npy file (%s)" % (name, path, e)) from None
    return feeds


def _print_value(name: str, value: Any, out) -> None:
    if isinstance(value, np.ndarray):
        print("%s: %s %s" % (name, value.dtype, list(value.shape)), file=out)
        with np.printoptions(threshold=20, edgeitems=3, precision=5, suppress=True):
            print("  " + np.array2string(value, prefix="  "), file=out)
        if value.dtype.kind == "f" and value.ndim >= 1 and value.size > 1:
            flat = value.reshape(value.shape[0], -1) if value.ndim > 1 else value[None]
            print("  argmax per row: %s" % flat.argmax(axis=-1).tolist()[:10], file=out)
    elif isinstance(value, list):
        print("%s: sequence of %d" % (name, len(value)), file=out)
    else:
        print("%s: %r" % (name, value), file=out)


def _feeds_for(sess: Any, args: argparse.Namespace) -> Dict[str, Any]:
    """The feeds of `run`/`profile`: --input files, random values for the other inputs."""
    feeds = _load_inputs(args.input)
    dims = parse_dims(args.dim)
    check_feed_names(feeds, sess.get_inputs())
    check_dims(dims, sess.get_inputs())
    rng = np.random.RandomState(args.seed)
    for arg in sess.get_inputs():
        if arg.name not in feeds:
            feeds[arg.name] = random_input(arg, dims, rng)
            print("input %s: random %s %s" % (arg.name, feeds[arg.name].dtype,
                                              list(feeds[arg.name].shape)))
    return feeds


def _session_for(args: argparse.Namespace, profile_prefix: Optional[str] = None) -> Any:
    """The session of `run` / `profile`: --threads, --optimize, --providers (profiling on when a
    trace prefix is given)."""
    from .session import InferenceSession, SessionOptions
    opts = SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.graph_optimization_level = _LEVELS[args.optimize]
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return InferenceSession(args.model, opts, providers=parse_providers(args.providers))


def cmd_profile(args: argparse.Namespace) -> int:
    """Run a model with profiling on: onnxruntime's trace JSON, a per-op table and a PNG."""
    from . import profiling
    out_dir = args.output_dir or "."
    os.makedirs(out_dir, exist_ok=True)
    # as in onnxruntime, the prefix may name a folder: the trace is written there
    sess = _session_for(args, profile_prefix=os.path.join(out_dir, "onnxruntime_profile_"))
    feeds = _feeds_for(sess, args)
    sess.run(None, feeds)                      # warm-up, kept out of the table
    for _ in range(max(1, args.repeat)):
        sess.run(None, feeds)
    trace = os.path.abspath(sess.end_profiling())
    with open(trace) as f:
        events = json.load(f)
    first_run = [e for e in events if e["name"] == "model_run"][0]
    warm_end = first_run["ts"] + first_run["dur"]
    events = [e for e in events if e["ts"] >= warm_end]
    rows = profiling.summarize(events)
    runs = [e["dur"] for e in events if e["name"] == "model_run"]
    print("%d run(s), median %.3f ms; time per op (providers: %s):"
          % (len(runs), float(np.median(runs)) / 1000 if runs else 0.0,
             ", ".join(sess.get_providers())))
    print("  %-28s %-28s %7s %12s %10s %7s" % ("op", "provider", "calls", "total ms",
                                               "mean us", "share"))
    for r in rows:
        print("  %-28s %-28s %7d %12.3f %10.1f %6.1f%%" % (
            printable(r["op"], 28), r["provider"], r["calls"], r["total_us"] / 1000,
            r["mean_us"], 100 * r["share"]))
    print("trace: %s (open it in Perfetto or chrome://tracing)" % trace)
    png = os.path.splitext(trace)[0] + ".png"
    if _plot_profile(rows, png, os.path.basename(args.model)):
        print("plot: %s" % png)
    return 0


def _plot_profile(rows: List[Dict[str, Any]], path: str, title: str) -> bool:
    """A horizontal bar chart of time per op; False (and a note) without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: skipped (matplotlib is not installed)")
        return False
    top = rows[:20][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(top) + 1.2))
    ax.barh(["%s (%s)" % (r["op"], r["provider"].replace("ExecutionProvider", ""))
             for r in top], [r["total_us"] / 1000 for r in top])
    ax.set_xlabel("total ms over the profiled runs")
    ax.set_title("onnxedge profile: %s" % title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def cmd_run(args: argparse.Namespace) -> int:
    """Run a model on given (or random) inputs and print its outputs."""
    sess = _session_for(args)
    feeds = _feeds_for(sess, args)
    times = []
    outputs: List[Any] = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        outputs = sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    for arg, value in zip(sess.get_outputs(), outputs):
        _print_value(arg.name, value, sys.stdout)
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
            if isinstance(value, np.ndarray):
                np.save(os.path.join(args.output_dir, arg.name.replace("/", "_") + ".npy"), value)
    print("providers: %s" % ", ".join(sess.get_providers()))
    print("latency: median %.3f ms over %d run(s)" % (1000 * float(np.median(times)), len(times)))
    return 0


def printable(text: str, limit: int = 200) -> str:
    """Model text for a terminal: control characters escaped (a model cannot move the cursor or
    recolour the screen), long values cut."""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                  for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


def _shape_text(arg: Any) -> str:
    return "[" + ", ".join(str(d) if d is not None else "?" for d in arg.shape) + "]"


def _print_missing_kernels(path: str) -> bool:
    """Print every op of the model (as in the file, subgraphs included) that this build has no
    kernel for, with its domain and opset; True when there is any."""
    from . import executor, model_io
    model = model_io.load(path)
    functions = {(f.domain, f.name): f for f in model.functions}
    missing = executor.unsupported_ops(model.graph.nodes, dict(model.opset_imports), functions)
    if missing:
        print("model: %s" % path)
        print("this onnxedge build has no kernel for %d op(s) the model uses:" % len(missing))
        for node in missing:
            print("  %-32s domain %-16s opset %d   (first used by %s)"
                  % (node.op_type, node.domain or "ai.onnx",
                     model.opset_imports.get(node.domain, 0), node.describe()))
    return bool(missing)


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print a model's inputs, outputs, opsets, op histogram and partition."""
    from .session import InferenceSession, SessionOptions
    if _print_missing_kernels(args.model):
        return 1
    opts = SessionOptions()
    opts.graph_optimization_level = _LEVELS[args.optimize]
    sess = InferenceSession(args.model, opts, providers=_bridge_providers(
        parse_providers(args.providers), parse_dims(args.dim)))
    model: ir.Model = sess.model
    meta = sess.get_modelmeta()
    print("model: %s" % args.model)
    producer = " ".join(t for t in (model.producer_name, model.producer_version) if t) or "(not recorded)"
    print("producer: %s, ir_version %d, graph %r" % (producer, model.ir_version, meta.graph_name))
    for label, value in (("domain", meta.domain), ("model version", meta.version or ""),
                         ("description", meta.description),
                         ("graph description", meta.graph_description)):
        if value:
            print("%s: %s" % (label, printable(value)))
    if meta.custom_metadata_map:
        print("metadata:")
        for key, value in sorted(meta.custom_metadata_map.items()):
            print("  %s: %s" % (printable(key), printable(value)))
    print("opsets: " + ", ".join("%s %d" % (d or "ai.onnx", v)
                                 for d, v in sorted(model.opset_imports.items())))
    print("inputs:")
    for a in sess.get_inputs():
        print("  %-24s %-18s %s" % (a.name, a.type, _shape_text(a)))
    print("outputs:")
    for a in sess.get_outputs():
        print("  %-24s %-18s %s" % (a.name, a.type, _shape_text(a)))
    hist = collections.Counter(
        ("%s.%s" % (n.domain, n.op_type)) if n.domain else n.op_type for n in model.graph.nodes)
    n_params = sum(int(v.size) for v in model.graph.initializers.values() if isinstance(v, np.ndarray))
    print("nodes: %d, initializers: %d (%d values)" % (len(model.graph.nodes),
                                                       len(model.graph.initializers), n_params))
    if len(model.graph.nodes) != sess.loaded_node_count:
        print("  (after the optimizer at level %s; %d nodes in the file, --optimize disable "
              "shows them)" % (args.optimize, sess.loaded_node_count))
    print("op histogram:")
    for op, count in hist.most_common():
        print("  %-28s %d" % (op, count))
    check_dims(parse_dims(args.dim), sess.get_inputs())
    report = sess.partition_report()
    by_provider = collections.Counter(r["provider"] for r in report)
    print("partition (providers: %s):" % ", ".join(sess.get_providers()))
    for prov, count in by_provider.items():
        print("  %-28s %d nodes" % (prov, count))
    if args.verbose:
        for r in report:
            line = "  %-32s %-20s -> %s" % (r["node"], r["op_type"], r["provider"])
            if r["fallback_reasons"]:
                line += "   (" + "; ".join("%s: %s" % kv for kv in r["fallback_reasons"].items()) + ")"
            print(line)
    else:
        for r in report:
            if r["fallback_reasons"]:
                print("  fell back: %s (%s) -> %s: %s" % (
                    r["node"], r["op_type"], r["provider"],
                    "; ".join("%s: %s" % kv for kv in r["fallback_reasons"].items())))
    return 0


def _size_text(n: int) -> str:
    return "%.2f MB" % (n / 1e6) if n >= 1e5 else "%d bytes" % n


def cmd_convert(args: argparse.Namespace) -> int:
    """Convert between .onnx and .oxe (either way, without loss), optionally optimizing."""
    from . import model_io
    src, dst = args.model, args.output
    if os.path.abspath(src) == os.path.abspath(dst):
        raise InvalidArgument("convert: the output %s is the input model itself" % dst)
    if not dst.lower().endswith((".oxe", ".onnx")):
        raise InvalidArgument("convert: output %r must end in .oxe or .onnx" % dst)
    t0 = time.perf_counter()
    model = model_io.load(src)
    t_load = time.perf_counter() - t0
    print("loaded %s (%s, %d nodes) in %.3f s" % (src, _size_text(os.path.getsize(src)),
                                                  len(model.graph.nodes), t_load))
    if args.optimize != "disable":
        from .optimizer import optimize
        t0 = time.perf_counter()
        before = len(model.graph.nodes)
        model = optimize(model, args.optimize)
        print("optimized (%s): %d -> %d nodes in %.3f s" % (args.optimize, before,
                                                            len(model.graph.nodes),
                                                            time.perf_counter() - t0))

    def progress(done: int, total: int) -> None:
        print("  writing tensor data: %d%% of %s" % (100 * done // max(total, 1),
                                                     _size_text(total)), flush=True)
    t0 = time.perf_counter()
    if dst.lower().endswith(".oxe"):
        model_io.save(model, dst, external_data_threshold=args.external_data_threshold,
                      progress=progress)
    else:
        model_io.save(model, dst, external_data_threshold=args.external_data_threshold)
    extra = ""
    if args.external_data_threshold is not None and os.path.isfile(dst + ".data"):
        extra = " + %s external data in %s" % (_size_text(os.path.getsize(dst + ".data")),
                                               dst + ".data")
    print("wrote %s (%s%s) in %.3f s" % (dst, _size_text(os.path.getsize(dst)), extra,
                                         time.perf_counter() - t0))
    return 0


def add_optimize_option(p: argparse.ArgumentParser, default: str) -> None:
    """`--optimize LEVEL` (alias `--level`), the one name every subcommand uses for the graph
    optimization level; the value lands in `args.optimize`."""
    p.add_argument("--optimize", "--level", dest="optimize", choices=list(_LEVELS), default=default,
                   help="graph optimization level (default: %(default)s)")


def _plugin_commands() -> list:
    from .providers.discovery import entry_points
    return entry_points(COMMAND_GROUP)


def add_package_target(sub: Any, target: str, help_text: str) -> argparse.ArgumentParser:
    """The parser of `onnxedge package TARGET`: plug-ins (rpi, mobile, ...) share one `package`
    command, made by whichever registers first."""
    pkg = sub.choices.get("package")
    if pkg is None:
        pkg = sub.add_parser("package", help="make a deployment bundle (targets: rpi, mobile, ...)")
        pkg.set_defaults(func=lambda args: pkg.print_help() or 2)
        pkg._onnxedge_targets = pkg.add_subparsers(dest="target", metavar="TARGET")
    return pkg._onnxedge_targets.add_parser(target, help=help_text)


def _add_run_options(p: argparse.ArgumentParser, repeat: int, repeat_help: str,
                     out_help: str) -> None:
    """The options `run` and `profile` share: model, inputs, dims, providers, threads, seed."""
    p.add_argument("model", help="path to a .onnx or .oxe model")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input from a .npy file (repeatable); others get random values")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=INT",
                   help="size of a symbolic dimension for random inputs (default 1)")
    p.add_argument("--providers", help="comma-separated execution providers, in priority order")
    p.add_argument("--repeat", type=int, default=repeat, help=repeat_help)
    p.add_argument("--threads", type=int, default=0, help="intra_op_num_threads (0 = default)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--output-dir", "-o", help=out_help)
    add_optimize_option(p, "all")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with plug-in subcommands added."""
    parser = argparse.ArgumentParser(prog="onnxedge", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run a model and print its outputs")
    _add_run_options(p, repeat=1, repeat_help="run this many times and report latency",
                     out_help="also save each output as NAME.npy here")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("profile", help="profile a model: time per op (table, PNG) and "
                                       "onnxruntime's trace JSON")
    _add_run_options(p, repeat=10, repeat_help="profiled runs after one warm-up (default 10)",
                     out_help="folder for the trace and the plot (default .)")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("inspect", help="print inputs, outputs, opsets, op histogram and partition")
    p.add_argument("model", help="path to a .onnx or .oxe model")
    p.add_argument("--providers", help="comma-separated execution providers, in priority order")
    p.add_argument("--verbose", "-v", action="store_true", help="list the provider of every node")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=INT",
                   help="fix a symbolic dimension for the CoreML / NNAPI bridges, which need "
                        "static shapes (repeatable), e.g. --dim batch=1")
    add_optimize_option(p, "all")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("convert", help="convert .onnx <-> .oxe (lossless), optionally optimizing")
    p.add_argument("model", help="path to a .onnx or .oxe model")
    p.add_argument("--output", "-o", required=True, help="output path: .oxe or .onnx")
    add_optimize_option(p, "disable")
    p.add_argument("--external-data-threshold", type=int, metavar="BYTES",
                   help="store initializers of at least BYTES bytes in OUTPUT.data beside it")
    p.set_defaults(func=cmd_convert)

    for ep in _plugin_commands():
        try:
            register = ep.load()
            register(sub)
        except Exception as e:  # a broken plug-in must not break the CLI
            print("onnxedge: subcommand %s could not be loaded: %s" % (ep.name, e), file=sys.stderr)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the `onnxedge` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__
        print("onnxedge %s" % __version__)
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()     # a closed pipe shows here, not in the interpreter's exit
        return code
    except OnnxEdgeError as e:
        print("onnxedge %s: %s: %s" % (args.command, type(e).__name__, e), file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `onnxedge run ... | head`: the reader left; say nothing, as other command-line tools do
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
    except KeyboardInterrupt:
        print("onnxedge %s: interrupted" % args.command, file=sys.stderr)
        return 130
    except OSError as e:
        what = (" %s" % e.filename) if getattr(e, "filename", None) else ""
        print("onnxedge %s: %s%s: %s" % (args.command, type(e).__name__, what,
                                         e.strerror or e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
