"""Run the ONNX backend node suite through onnxedge (and optionally onnxruntime) and report.

    python3 tests/conformance/run.py                       # every case on onnxedge's CPU provider
    python3 tests/conformance/run.py --op Conv -k pads     # a subset
    python3 tests/conformance/run.py --reference onnxruntime --report docs/CONFORMANCE.md
    python3 tests/conformance/run.py --update-expected     # rewrite expected_failures/<provider>.txt

Exits 1 when onnxedge fails a case its expected-failures file does not list, or passes one it
does (delete that line), 2 on a usage or set-up error, 0 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

if __name__ == "__main__" and not __package__:   # run as a script: import as the package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "conformance"
    import conformance  # noqa: F401

from . import cases as node_cases  # noqa: E402
from . import expected as expected_file  # noqa: E402
from . import report  # noqa: E402
from .compare import compare_outputs  # noqa: E402
from .engines import Engine, call_with_timeout, make_engine  # noqa: E402
from .families import family_of  # noqa: E402

DEFAULT_TIMEOUT = 30.0
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


class Result(NamedTuple):
    """The outcome of one case on one engine."""

    name: str
    op_type: str
    family: str
    status: str            # passed / failed / skipped
    error: str             # "<ErrorType>: <first line>", "" when passed
    seconds: float


_ORT_NOISE = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : |/onnxruntime_src/\S+:\d+ \S.*?\) ")


def first_line(exc: BaseException) -> str:
    """`Type: first non-empty line of the message`, at most 240 characters.

    onnxruntime's status prefix and C++ source location are dropped.
    """
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = "%s: %s" % (type(exc).__name__, _ORT_NOISE.sub("", lines[0]) if lines else "(no message)")
    return text if len(text) <= 240 else text[:237] + "..."


def _needs_missing_package(exc: BaseException) -> bool:
    return type(exc).__name__ == "NotImplemented" and "optional package" in str(exc)


def select(infos: Sequence[node_cases.CaseInfo], substrings: Sequence[str] = (),
           ops: Sequence[str] = ()) -> List[node_cases.CaseInfo]:
    """Cases whose name contains any of `substrings` and whose op is one of `ops` (when given)."""
    ops_l = {o.lower() for o in ops}
    return [c for c in infos
            if (not substrings or any(s in c.name for s in substrings))
            and (not ops_l or c.op_type.lower() in ops_l)]


def run_one(case: node_cases.Case, engine: Engine, timeout: Optional[float]) -> Result:
    """Run a loaded case on one engine and compare every data set; never raises."""
    info = case.info
    fam = family_of(info.op_type, info.domain)
    start = time.perf_counter()

    def work() -> None:
        run = engine.prepare(case.model)
        for inputs, want in case.data_sets:
            got = run(dict(zip(case.input_names, inputs)))
            compare_outputs(got, want, info.rtol, info.atol, case.output_names)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call_with_timeout(work, timeout)
    except Exception as e:  # every failure is a result, whatever raised it
        return Result(info.name, info.op_type, fam, FAILED, first_line(e), time.perf_counter() - start)
    return Result(info.name, info.op_type, fam, PASSED, "", time.perf_counter() - start)


def run_suite(infos: Sequence[node_cases.CaseInfo], engines: Sequence[Engine],
              timeout: Optional[float] = DEFAULT_TIMEOUT,
              progress: Optional[Callable[[int, int, str], None]] = None) -> Dict[str, List[Result]]:
    """Every case on every engine: {engine name: results in case order}."""
    results: Dict[str, List[Result]] = {e.name: [] for e in engines}
    for n, info in enumerate(infos, 1):
        if progress:
            progress(n, len(infos), info.name)
        fam = family_of(info.op_type, info.domain)
        try:
            case = node_cases.load_case(info)
        except Exception as e:
            status = SKIPPED if _needs_missing_package(e) else FAILED
            for eng in engines:
                results[eng.name].append(Result(info.name, info.op_type, fam, status,
                                                first_line(e) + " (reading the case data)", 0.0))
            continue
        for eng in engines:
            results[eng.name].append(run_one(case, eng, timeout))
    return results


def counts(results: Sequence[Result]) -> Dict[str, int]:
    """{passed, failed, skipped} totals."""
    out = {PASSED: 0, FAILED: 0, SKIPPED: 0}
    for r in results:
        out[r.status] += 1
    return out


class Verdict(NamedTuple):
    """A run checked against the expected-failures file."""

    unexpected_failures: List[Result]
    unexpected_passes: List[Result]
    stale: List[str]


def check(results: Sequence[Result], entries: Dict[str, str], known: Sequence[str]) -> Verdict:
    """Failures the file does not expect here, passes it does, and names not in the suite."""
    here = expected_file.active(entries)
    return Verdict([r for r in results if r.status == FAILED and r.name not in here],
                   [r for r in results if r.status == PASSED and r.name in here
                    and not expected_file.is_flaky(here[r.name])],
                   expected_file.stale(entries, known))


def write_json(path: str, engines: Sequence[Engine], results: Dict[str, List[Result]]) -> None:
    """Per-case results of every engine as JSON."""
    data = {"onnx_cases": node_cases.GENERATOR_ONNX, "python": sys.version.split()[0],
            "engines": {e.name: {"version": e.version, "provider": e.provider,
                                 "totals": counts(results[e.name]),
                                 "cases": [r._asdict() for r in results[e.name]]}
                        for e in engines}}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def _progress_printer(stream: Any) -> Callable[[int, int, str], None]:
    tty = hasattr(stream, "isatty") and stream.isatty()

    def show(n: int, total: int, name: str) -> None:
        if tty:
            stream.write("\r[%4d/%d] %-70s" % (n, total, name[:70]))
            if n == total:
                stream.write("\r" + " " * 80 + "\r")
        elif n % 200 == 0 or n == total:
            stream.write("[%d/%d]\n" % (n, total))
        stream.flush()
    return show


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--provider", default="CPUExecutionProvider",
                    help="onnxedge execution provider under test (default: %(default)s)")
    ap.add_argument("-k", dest="substrings", action="append", default=[], metavar="SUBSTRING",
                    help="only cases whose name contains SUBSTRING (repeatable: any of them)")
    ap.add_argument("--op", dest="ops", action="append", default=[], metavar="OPTYPE",
                    help="only cases of this op type (repeatable; *_expanded cases count for the "
                         "op whose function they expand)")
    ap.add_argument("--reference", choices=["onnxruntime"],
                    help="also run onnxruntime on the same cases for a comparison table")
    ap.add_argument("--engine", choices=["onnxedge", "onnxedge-oxe", "onnxruntime"],
                    default="onnxedge",
                    help="the runtime under test; onnxedge-oxe runs each model after "
                         ".onnx -> .oxe (and .oxe -> .onnx) (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                    help="per-case time limit, 0 for none (default: %(default)s)")
    ap.add_argument("--json", metavar="PATH", help="write per-case results as JSON")
    ap.add_argument("--report", metavar="MD", help="write the markdown summary (docs/CONFORMANCE.md)")
    ap.add_argument("--plot", metavar="PNG", help="bar chart of pass rates per family (matplotlib)")
    ap.add_argument("--expected", metavar="PATH",
                    help="expected-failures file (default: expected_failures/<provider>.txt)")
    ap.add_argument("--update-expected", action="store_true",
                    help="rewrite the expected-failures file from this run")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case's result")
    ap.add_argument("--failures", type=int, default=40, metavar="N",
                    help="list at most N unexpected failures and passes (default: %(default)s)")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    """The CLI."""
    args = _parser().parse_args(argv)
    try:
        infos = node_cases.load_manifest(node_cases.ensure_cache())
    except node_cases.CacheMissing as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    chosen = select(infos, args.substrings, args.ops)
    if not chosen:
        sys.stderr.write("error: no case matches the filters\n")
        return 2
    try:
        engines = [make_engine(args.engine, args.provider)]
        if args.reference and args.reference != args.engine:
            engines.append(make_engine(args.reference))
    except ImportError as e:
        sys.stderr.write("error: cannot import a runtime: %s\n" % e)
        return 2
    main_engine = engines[0]
    t0 = time.time()
    results = run_suite(chosen, engines, args.timeout or None, _progress_printer(sys.stderr))
    elapsed = time.time() - t0

    mine = results[main_engine.name]
    if args.verbose:
        for r in mine:
            print("%-7s %-60s %s" % (r.status, r.name, r.error))
    print(report.summary_line(main_engine, mine, len(chosen)))
    for eng in engines[1:]:
        print(report.summary_line(eng, results[eng.name], len(chosen)))
    print("(%d cases in %.1fs)\n" % (len(chosen), elapsed))
    print(report.text_table(engines, results))

    rc = 0
    if main_engine.name in ("onnxedge", "onnxedge-oxe"):
        path = args.expected or expected_file.path_for(args.provider)
        try:
            entries = expected_file.read(path)
        except expected_file.BadExpectedFile as e:
            sys.stderr.write("error: %s\n" % e)
            return 2
        known = [c.name for c in infos]
        if args.update_expected:
            failures = {r.name: r.error for r in mine if r.status == FAILED}
            ran = [r.name for r in mine if r.status != SKIPPED]   # a skipped case keeps its line
            new = expected_file.updated(entries, ran, failures, known)
            expected_file.write(path, new, args.provider, node_cases.GENERATOR_ONNX)
            print("\nwrote %s (%d entries, was %d)" % (report.show_path(path), len(new), len(entries)))
        else:
            verdict = check(mine, entries, known)
            print(report.verdict_text(verdict, path, args.failures))
            if verdict.unexpected_failures or verdict.unexpected_passes:
                rc = 1
    if args.json:
        write_json(args.json, engines, results)
    if args.report:
        report.write_markdown(args.report, engines, results, len(chosen) == len(infos), args.plot)
        print("wrote %s" % args.report)
    if args.plot:
        report.plot(args.plot, engines, results)
        print("wrote %s" % args.plot)
    return rc


if __name__ == "__main__":
    sys.exit(main())
