"""Run the ONNX backend node suite through onnxedge (and optionally onnxruntime) and report.

    python3 tests/conformance/run.py                       # every case on onnxedge's CPU provider
    python3 tests/conformance/run.py --op Conv -k pads     # a subset
    python3 tests/conformance/run.py --reference onnxruntime --report docs/CONFORMANCE.md
    python3 tests/conformance/run.py --update-expected     # rewrite expected_failures/<provider>.txt
    python3 tests/conformance/run.py --provider X64ExecutionProvider   # another provider's cases
    python3 tests/conformance/run.py --providers           # every provider: passed / claimed counts

A provider other than CPU runs the cases of the ops its table lists, in a session with providers
[P, CPU]; a case it does not claim is not run (see providers.py).

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
from . import providers as eps  # noqa: E402
from . import report  # noqa: E402
from .compare import compare_outputs  # noqa: E402
from .engines import Engine, call_with_timeout, make_engine, onnxedge_engine  # noqa: E402
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
    claimed: bool = True   # False: the provider under test ran none of its nodes (not run)


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
        try:
            case = node_cases.load_case(info)
        except Exception as e:
            for eng in engines:
                results[eng.name].append(_read_failure(info, e))
            continue
        for eng in engines:
            results[eng.name].append(run_one(case, eng, timeout))
    return results


def _read_failure(info: node_cases.CaseInfo, e: BaseException) -> Result:
    status = SKIPPED if _needs_missing_package(e) else FAILED
    return Result(info.name, info.op_type, family_of(info.op_type, info.domain), status,
                  first_line(e) + " (reading the case data)", 0.0)


def _claimed_session(case: node_cases.Case, target: eps.Target) -> tuple:
    """(case, session, placement): a bridge passing the case over gets it again with its inputs
    after the first frozen into initializers."""
    sess = target.session(case.model)
    where = eps.placement(sess, target.name, case.info.op_type)
    if not where.claimed and target.name in eps.FIXED_WEIGHTS:
        alt = eps.frozen(case)
        if alt is not None:
            sess_alt = target.session(alt.model)
            where_alt = eps.placement(sess_alt, target.name, case.info.op_type)
            if where_alt.claimed:
                return alt, sess_alt, where_alt
            where = where._replace(reason="%s; with its inputs after the first constant: %s"
                                   % (where.reason, where_alt.reason))
    return case, sess, where


def run_case(info: node_cases.CaseInfo, target: eps.Target,
             timeout: Optional[float] = DEFAULT_TIMEOUT) -> Result:
    """One case on one provider (never raises). Not CPU: a case the provider does not claim is
    SKIPPED with claimed=False and the provider's reason; a session that fails to build FAILED."""
    try:
        case = node_cases.load_case(info)
    except Exception as e:
        return _read_failure(info, e)
    if target.name == eps.CPU:
        return run_one(case, onnxedge_engine(eps.CPU), timeout)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case, sess, where = _claimed_session(case, target)
    except Exception as e:
        return Result(info.name, info.op_type, family_of(info.op_type, info.domain), FAILED,
                      first_line(e) + " (building the session)", time.perf_counter() - start)
    if not where.claimed:
        return Result(info.name, info.op_type, family_of(info.op_type, info.domain), SKIPPED,
                      "not claimed: %s" % where.reason, time.perf_counter() - start, False)
    engine = Engine("onnxedge", "", target.name, lambda model: lambda feeds: list(sess.run(None, feeds)))
    return run_one(case, engine, timeout)


def run_provider(infos: Sequence[node_cases.CaseInfo], provider: str,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 progress: Optional[Callable[[int, int, str], None]] = None) -> List[Result]:
    """The provider's cases among `infos` (see providers.candidates), each run by run_case.

    Raises eps.Unavailable (with the reason) when the provider cannot run here."""
    target = eps.Target(provider)
    why = target.unavailable()
    if why:
        target.close()
        raise eps.Unavailable("%s cannot run here: %s" % (provider, why))
    chosen = eps.candidates(provider, infos)
    try:
        out = []
        for n, info in enumerate(chosen, 1):
            if progress:
                progress(n, len(chosen), info.name)
            out.append(run_case(info, target, timeout))
        return out
    finally:
        target.close()


def provider_row(provider: str, results: Sequence[Result], entries: Dict[str, str]) -> report.ProviderRow:
    """The counts of one provider's run for the docs: cases, claimed, passed, expected failures."""
    here = expected_file.active(entries)
    claimed = [r for r in results if r.claimed and r.status != SKIPPED]
    return report.ProviderRow(provider, len(results), len(claimed),
                              sum(1 for r in claimed if r.status == PASSED),
                              sum(1 for r in claimed if r.status == FAILED and r.name in here),
                              sum(1 for r in claimed if r.status == FAILED and r.name not in here), "")


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
    """Failures the file does not expect here, passes (or cases no longer claimed) it does, and
    names not in the suite."""
    here = expected_file.active(entries)
    return Verdict([r for r in results if r.status == FAILED and r.name not in here],
                   [r for r in results if (r.status == PASSED or not r.claimed) and r.name in here
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
    ap.add_argument("--providers", action="store_true",
                    help="also run every provider's cases: passed / claimed / expected-failure "
                         "counts per provider (printed, and in --report)")
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


def _main_results(args: Any, chosen: Sequence[node_cases.CaseInfo], progress: Any) -> tuple:
    """(engines, {engine: results}, the cases run) of the runtime under test (and the reference)."""
    if args.provider != eps.CPU and args.engine == "onnxedge":
        mine = run_provider(chosen, args.provider, args.timeout or None, progress)
        chosen = eps.candidates(args.provider, chosen)
        engines = [Engine("onnxedge", make_engine("onnxedge").version, args.provider, None)]
        results = {"onnxedge": mine}
        if args.reference:
            ref = make_engine(args.reference)
            engines.append(ref)
            results.update(run_suite(chosen, [ref], args.timeout or None, progress))
        return engines, results, chosen
    engines = [make_engine(args.engine, args.provider)]
    if args.reference and args.reference != args.engine:
        engines.append(make_engine(args.reference))
    return engines, run_suite(chosen, engines, args.timeout or None, progress), chosen


def _provider_rows(args: Any, chosen: Sequence[node_cases.CaseInfo], mine: Sequence[Result],
                   progress: Any) -> List[report.ProviderRow]:
    """A row of counts for every provider (the main run's results reused for its provider)."""
    rows = []
    for p in eps.PROVIDERS:
        try:
            results = (mine if p == args.provider and args.engine == "onnxedge"
                       else run_provider(chosen, p, args.timeout or None, progress))
        except (eps.Unavailable, ImportError) as e:
            rows.append(report.ProviderRow(p, 0, 0, 0, 0, 0, str(e)))
            continue
        rows.append(provider_row(p, results, expected_file.read(expected_file.path_for(p))))
    return rows


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
    if args.provider not in eps.PROVIDERS or (args.provider != eps.CPU and args.engine != "onnxedge"):
        sys.stderr.write("error: --provider is one of %s (not CPU: with --engine onnxedge)\n"
                         % ", ".join(eps.PROVIDERS))
        return 2
    progress = _progress_printer(sys.stderr)
    t0 = time.time()
    try:
        engines, results, chosen = _main_results(args, chosen, progress)
    except ImportError as e:
        sys.stderr.write("error: cannot import a runtime: %s\n" % e)
        return 2
    except eps.Unavailable as e:
        sys.stderr.write("error: %s\n" % e)
        return 2
    elapsed = time.time() - t0
    main_engine = engines[0]

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
        known = [c.name for c in eps.candidates(args.provider, infos)]
        if args.update_expected:
            failures = {r.name: r.error for r in mine if r.status == FAILED}
            # a skipped case keeps its line, one the provider no longer claims loses it
            ran = [r.name for r in mine if r.status != SKIPPED or not r.claimed]
            new = expected_file.updated(entries, ran, failures, known)
            expected_file.write(path, new, args.provider, node_cases.GENERATOR_ONNX)
            print("\nwrote %s (%d entries, was %d)" % (report.show_path(path), len(new), len(entries)))
        else:
            verdict = check(mine, entries, known)
            print(report.verdict_text(verdict, path, args.failures))
            if verdict.unexpected_failures or verdict.unexpected_passes:
                rc = 1
    rows = None
    if args.providers:
        rows = _provider_rows(args, chosen, mine, progress)
        print("\n" + report.provider_text(rows))
    if args.json:
        write_json(args.json, engines, results)
    if args.report:
        report.write_markdown(args.report, engines, results, len(chosen) == len(infos), args.plot,
                              rows)
        print("wrote %s" % args.report)
    if args.plot:
        report.plot(args.plot, engines, results)
        print("wrote %s" % args.plot)
    return rc


if __name__ == "__main__":
    sys.exit(main())
