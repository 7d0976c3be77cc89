"""Tables of a conformance run: the console summary, docs/CONFORMANCE.md and an optional plot."""
from __future__ import annotations

import os
import sys
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .families import family_order

STATUSES = ("passed", "failed", "skipped")


class ProviderRow(NamedTuple):
    """One provider's counts: the cases it runs, claims, passes and is expected to fail."""

    provider: str
    cases: int           # cases of the ops its table lists (CPU: every case)
    claimed: int         # cases it ran at least one node of
    passed: int          # claimed cases whose outputs match
    expected: int        # claimed cases failing as its expected-failures file says
    unexpected: int      # claimed cases failing that the file does not list
    note: str            # why it did not run here ("" when it did)


def provider_text(rows: Sequence[ProviderRow]) -> str:
    """The per-provider counts for the console."""
    head = "%-27s %6s %8s %7s %9s %11s" % ("provider", "cases", "claimed", "passed", "expected",
                                           "unexpected")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.note:
            lines.append("%-27s %s" % (r.provider, r.note))
        else:
            lines.append("%-27s %6d %8d %7d %9d %11d" % (r.provider, r.cases, r.claimed, r.passed,
                                                         r.expected, r.unexpected))
    return "\n".join(lines)


def provider_section(rows: Sequence[ProviderRow]) -> List[str]:
    """The markdown section of per-provider counts."""
    from .providers import WHERE
    lines = ["", "## By execution provider", "",
             "One runner, `tests/conformance/test_node_suite.py` (test ids `<provider>/<case>`), "
             "runs every case on CPU and, on every other provider, the cases of the ops its "
             "op-support table lists (`*_expanded` function bodies left out), each in a session "
             "with [provider, CPU]. *Claimed*: the provider ran at least one of the case's "
             "nodes (Wasm SIMD, Core ML and NNAPI fix weights when compiling: a case they pass "
             "over because an input is fed at run time is tried again with its inputs after the "
             "first as initializers); cases it does not claim run on CPU, counted there. "
             "*Passed*: claimed cases whose outputs match the suite's. *Expected failures*: "
             "claimed cases failing as `tests/conformance/expected_failures/<provider>.txt` "
             "lists (one reason per line; a listed case that passes fails the tests, so the "
             "files only shrink).",
             "",
             "| provider | runs here as | cases of its ops | claimed | passed | expected failures |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        if r.note:
            lines.append("| %s | %s | not run here: %s | | | |"
                         % (r.provider, WHERE.get(r.provider, ""), r.note.replace("|", "\\|")))
            continue
        extra = " (+%d not listed)" % r.unexpected if r.unexpected else ""
        lines.append("| %s | %s | %d | %d | %d | %d%s |" % (r.provider, WHERE.get(r.provider, ""),
                                                           r.cases, r.claimed, r.passed,
                                                           r.expected, extra))
    return lines


def _counts(results: Sequence[Any]) -> Dict[str, int]:
    out = {s: 0 for s in STATUSES}
    for r in results:
        out[r.status] += 1
    return out


def _label(engine: Any) -> str:
    return "%s %s" % (engine.name, engine.version)


def summary_line(engine: Any, results: Sequence[Any], total: int) -> str:
    """`onnxedge 0.1.0 [CPUExecutionProvider]: P passed, F failed, S skipped of N cases`."""
    c = _counts(results)
    return "%s [%s]: %d passed, %d failed, %d skipped of %d cases" % (
        _label(engine), engine.provider, c["passed"], c["failed"], c["skipped"], total)


def _grouped(results: Sequence[Any], key: str) -> "OrderedDict[str, List[Any]]":
    groups: "OrderedDict[str, List[Any]]" = OrderedDict()
    for r in results:
        groups.setdefault(getattr(r, key), []).append(r)
    return groups


def family_rows(engines: Sequence[Any], results: Dict[str, List[Any]]) -> List[Tuple[str, int, list]]:
    """[(family, cases, [counts per engine])] in table order, then a `total` row."""
    first = results[engines[0].name]
    order = {f: i for i, f in enumerate(family_order())}
    fams = sorted({r.family for r in first}, key=lambda f: (order.get(f, len(order)), f))
    rows = []
    for fam in fams:
        per = [_counts([r for r in results[e.name] if r.family == fam]) for e in engines]
        rows.append((fam, sum(per[0].values()), per))
    rows.append(("total", len(first), [_counts(results[e.name]) for e in engines]))
    return rows


def text_table(engines: Sequence[Any], results: Dict[str, List[Any]]) -> str:
    """The per-family table for the console."""
    head = "%-24s %6s" % ("family", "cases")
    for e in engines:
        head += "  | %-11s %6s %6s %6s" % (e.name[:11], "pass", "fail", "skip")
    lines = [head, "-" * len(head)]
    for fam, n, per in family_rows(engines, results):
        if fam == "total":
            lines.append("-" * len(head))
        line = "%-24s %6d" % (fam, n)
        for c in per:
            line += "  | %-11s %6d %6d %6d" % ("", c["passed"], c["failed"], c["skipped"])
        lines.append(line)
    return "\n".join(lines)


def show_path(path: str) -> str:
    """`path` relative to the working directory when it lies inside it, else absolute."""
    rel = os.path.relpath(path)
    return os.path.abspath(path) if rel.startswith("..") else rel


def verdict_text(verdict: Any, path: str, limit: int) -> str:
    """What differs from the expected-failures file, and what to do about it."""
    rel = show_path(path)
    out = []
    if verdict.unexpected_failures:
        out.append("\n%d unexpected failures (not in %s):" % (len(verdict.unexpected_failures), rel))
        for r in verdict.unexpected_failures[:limit]:
            out.append("  %-55s %s" % (r.name, r.error))
        if len(verdict.unexpected_failures) > limit:
            out.append("  ... and %d more (use --failures N or --json)"
                       % (len(verdict.unexpected_failures) - limit))
    if verdict.unexpected_passes:
        out.append("\n%d unexpected passes: delete their lines from %s (--update-expected does):"
                   % (len(verdict.unexpected_passes), rel))
        out.extend("  %s" % r.name for r in verdict.unexpected_passes[:limit])
        if len(verdict.unexpected_passes) > limit:
            out.append("  ... and %d more" % (len(verdict.unexpected_passes) - limit))
    if verdict.stale:
        out.append("\n%d entries of %s are not cases of this suite (delete them): %s"
                   % (len(verdict.stale), rel, ", ".join(verdict.stale)))
    if not out:
        out.append("\nall results as %s expects" % rel)
    return "\n".join(out)


def _pct(n: int, total: int) -> str:
    return "%d (%.0f%%)" % (n, 100.0 * n / total) if total else "0"


def write_markdown(path: str, engines: Sequence[Any], results: Dict[str, List[Any]],
                   full_suite: bool, plot_path: Optional[str] = None,
                   provider_rows: Optional[Sequence[ProviderRow]] = None) -> None:
    """docs/CONFORMANCE.md: totals, per-provider counts (when given), the per-family table and a
    per-op table, every engine."""
    from .cases import GENERATOR_ONNX, GENERATE_COMMAND
    import numpy
    total = len(results[engines[0].name])
    lines = [
        "# Conformance: the ONNX backend node suite",
        "",
        "Generated by `python3 tests/conformance/run.py --reference onnxruntime%s --report %s%s`"
        % (" --providers" if provider_rows else "", os.path.relpath(path),
           " --plot %s" % os.path.relpath(plot_path) if plot_path else "")
        + ("" if full_suite else " (on a filtered subset)") + " (`make conformance-report`).",
        "Do not edit by hand.",
        "",
        "Cases: the %d node cases of onnx %s (`onnx.backend.test.case.node.collect_testcases()`, "
        "cached by `%s`), compared like onnx's backend runner (rtol=1e-3, atol=1e-7 for floats, "
        "exact otherwise). Python %s, numpy %s."
        % (total, GENERATOR_ONNX, GENERATE_COMMAND, sys.version.split()[0], numpy.__version__),
        "",
        "| runtime | provider | passed | failed | skipped |",
        "|---|---|---:|---:|---:|",
    ]
    for e in engines:
        c = _counts(results[e.name])
        lines.append("| %s | %s | %s | %d | %d |" % (_label(e), e.provider, _pct(c["passed"], total),
                                                     c["failed"], c["skipped"]))
    if plot_path:
        rel = os.path.relpath(os.path.abspath(plot_path), os.path.dirname(os.path.abspath(path)))
        lines += ["", "![node cases passed per family](%s)" % rel.replace(os.sep, "/")]
    if provider_rows:
        lines += provider_section(provider_rows)
    lines += ["", "## By op family", "",
              "| family | cases | " + " | ".join("%s passed" % e.name for e in engines) + " |",
              "|---|---:|" + "---:|" * len(engines)]
    for fam, n, per in family_rows(engines, results):
        cells = " | ".join(_pct(c["passed"], n) for c in per)
        name = "**total**" if fam == "total" else fam
        lines.append("| %s | %d | %s |" % (name, n, cells))
    lines += ["", "## By op", "",
              "Cases per op type (`*_expanded` cases count for the op whose function they expand).",
              "", "| op | family | cases | " + " | ".join(e.name for e in engines) + " |",
              "|---|---|---:|" + "---:|" * len(engines)]
    ops = _grouped(results[engines[0].name], "op_type")
    for op in sorted(ops, key=str.lower):
        n = len(ops[op])
        per = [_counts([r for r in results[e.name] if r.op_type == op]) for e in engines]
        lines.append("| %s | %s | %d | %s |" % (op, ops[op][0].family, n,
                                                 " | ".join(str(c["passed"]) for c in per)))
    for k, e in enumerate(engines):
        lines += _failure_section(e, results[e.name], listed=(k == 0))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _failure_section(engine: Any, results: Sequence[Any], listed: bool) -> List[str]:
    """Failures of one runtime, counted by the start of their error."""
    failed = [r for r in results if r.status == "failed"]
    if not failed:
        return []
    groups: Dict[str, List[str]] = {}
    for r in failed:
        key = r.error.split("(", 1)[0]
        key = ":".join(key.split(":")[:2]).strip()
        key = key if len(key) <= 90 else key[:87] + "..."
        groups.setdefault(key, []).append(r.name)
    lines = ["", "## Where %s fails" % engine.name, ""]
    if listed:
        lines += ["Every failing case is listed with its reason in "
                  "`tests/conformance/expected_failures/%s.txt`." % engine.provider, ""]
    lines += ["| error | cases | examples |", "|---|---:|---|"]
    for key, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join("`%s`" % n for n in names[:3]) + (", ..." if len(names) > 3 else "")
        lines.append("| %s | %d | %s |" % (key.replace("|", "\\|"), len(names), shown))
    return lines


def plot(path: str, engines: Sequence[Any], results: Dict[str, List[Any]]) -> None:
    """A horizontal bar chart of the pass rate per family for every engine (needs matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = family_rows(engines, results)
    fams = [r[0] for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(fams) + 1.5))
    height = 0.8 / len(engines)
    for k, e in enumerate(engines):
        rates = [100.0 * r[2][k]["passed"] / r[1] if r[1] else 0.0 for r in rows][::-1]
        ax.barh([i + k * height for i in range(len(fams))], rates, height=height, label=_label(e))
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(fams))])
    ax.set_yticklabels(fams)
    ax.set_xlabel("node cases passed (%)")
    ax.set_xlim(0, 100)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(engines), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
