"""The expected-failures file of a provider: `case_name  # reason`, one line per case.

The file only shrinks: a case that starts passing is an *unexpected pass* and its line must go.
A reason may start with conditions, `[numpy<2]` or `[python<3.10, numpy<2]`: the line then
applies only where they all hold (elsewhere the case must pass). `[flaky]` marks a case whose
result is left to chance (random ops): it may fail, and passing is no reason to drop its line.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Dict, Iterable, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "expected_failures")
OLD_INTERPRETER_TAG = "[python<3.10]"   # the project's onnx-1.14 / numpy-1.17 side
FLAKY = "flaky"

HEADER = """\
# Expected failures of the ONNX backend node suite on {provider} (cases of onnx {onnx}).
# Not CPU: cases of the ops its table lists that it claims, run with [{provider}, CPU]
# (tests/conformance/providers.py); a listed case it no longer claims must lose its line too.
# One line per case: `case_name  # reason` (a reason is mandatory). The list only shrinks:
# when a case passes, the conformance tests fail until its line is deleted.
# A reason starting with `[numpy<2]`, `[python<3.10]` (comparisons of python / numpy versions,
# comma-separated) applies only where its conditions hold; `[flaky]` lets the case pass or fail.
# Rewrite from a run:
#   python3 tests/conformance/run.py --provider {provider} --update-expected
# which drops passing cases, adds new failures with their error's first line (`ErrorType: ...`;
# tagged {old_tag} when made under Python < 3.10), refreshes reasons of that machine-made form,
# and keeps reasons written by hand (start them in lower case, e.g.
# `not implemented yet: op X (issue 3)`).
"""

_CONDITIONS = re.compile(r"^\[([^\]]*)\]\s*")
_CONDITION = re.compile(r"^\s*(python|numpy)\s*(<=|>=|==|!=|<|>)\s*([0-9][0-9.]*)\s*$")
_MACHINE_MADE = re.compile(r"^[A-Z][A-Za-z0-9_.]*: ")


class BadExpectedFile(ValueError):
    """A line of an expected-failures file has no case name, no reason or a bad condition."""


def path_for(provider: str) -> str:
    """The expected-failures file of an execution provider."""
    if provider == "NeonExecutionProvider":   # the C engine: one list for its two builds
        provider = "X64ExecutionProvider"
    return os.path.join(FOLDER, "%s.txt" % provider)


def _version(text: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _here(what: str) -> Tuple[int, ...]:
    if what == "python":
        return tuple(sys.version_info[:3])
    import numpy
    return _version(numpy.__version__)


def split_conditions(reason: str) -> Tuple[List[str], str]:
    """(["numpy<2", ...], rest of the reason) of a reason with a leading `[...]` tag."""
    m = _CONDITIONS.match(reason)
    if not m:
        return [], reason
    return [c.strip() for c in m.group(1).split(",") if c.strip()], reason[m.end():]


def _holds(cond: str) -> bool:
    if cond == FLAKY:
        return True
    m = _CONDITION.match(cond)
    if not m:
        raise BadExpectedFile("bad condition %r (expected e.g. numpy<2 or python>=3.10)" % cond)
    what, op, ver = m.groups()
    have, want = _here(what), _version(ver)
    have = have[:len(want)]
    return {"<": have < want, "<=": have <= want, ">": have > want, ">=": have >= want,
            "==": have == want, "!=": have != want}[op]


def applies(reason: str) -> bool:
    """True when every condition of the reason holds in this interpreter (or it has none)."""
    return all(_holds(c) for c in split_conditions(reason)[0])


def is_flaky(reason: str) -> bool:
    """True for a line tagged `[flaky]`: the case may pass or fail."""
    return FLAKY in split_conditions(reason)[0]


def is_machine_made(reason: str) -> bool:
    """True for a reason that is an error's first line (`ErrorType: message`), tag aside."""
    return bool(_MACHINE_MADE.match(split_conditions(reason)[1]))


def read(path: str) -> Dict[str, str]:
    """{case name: reason} from an expected-failures file ({} when the file does not exist)."""
    if not os.path.isfile(path):
        return {}
    entries: Dict[str, str] = {}
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, reason = line.partition("#")
            name, reason = name.strip(), reason.strip()
            if not sep or not split_conditions(reason)[1].strip() or not name or " " in name:
                raise BadExpectedFile("%s:%d: expected `case_name  # reason`, got %r" % (path, n, line))
            if name in entries:
                raise BadExpectedFile("%s:%d: %s is listed twice" % (path, n, name))
            try:
                applies(reason)
            except BadExpectedFile as e:
                raise BadExpectedFile("%s:%d: %s" % (path, n, e)) from None
            entries[name] = reason
    return entries


def active(entries: Dict[str, str]) -> Dict[str, str]:
    """The entries whose conditions hold here: the failures expected in this interpreter."""
    return {name: reason for name, reason in entries.items() if applies(reason)}


def _group(reason: str) -> str:
    """Reasons sharing this key sit together: the text before its first `(` or second `:`."""
    head = split_conditions(reason)[1].split("(", 1)[0]
    return ":".join(head.split(":")[:2]).strip()


def write(path: str, entries: Dict[str, str], provider: str, onnx_version: str) -> None:
    """Write entries grouped by reason (a blank line between reason families), names sorted."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = [HEADER.format(provider=provider, onnx=onnx_version,
                           old_tag=OLD_INTERPRETER_TAG).rstrip("\n")]
    last = None
    order = sorted(entries.items(), key=lambda kv: (split_conditions(kv[1])[1], kv[1], kv[0]))
    for name, reason in order:
        if _group(reason) != last:
            lines.append("")
            last = _group(reason)
        lines.append("%s  # %s" % (name, reason.replace("\n", " ")))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def updated(old: Dict[str, str], ran: Iterable[str], failures: Dict[str, str],
            known: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """The entries after a run: cases that ran keep their line only while they fail.

    `failures` maps each failing case to its error's first line, the reason of new entries and of
    entries whose reason is machine-made (a condition tag stays); hand-written reasons stay.
    Lines whose conditions do not hold here, and cases that did not run, are kept, except names
    no longer in the suite (`known`). New entries made under Python < 3.10 are tagged as such.
    """
    ran = set(ran)
    keep = set(known) if known is not None else None
    new: Dict[str, str] = {}
    for name, reason in old.items():
        if keep is not None and name not in keep:
            continue
        if name in ran and applies(reason) and not is_flaky(reason):
            continue
        new[name] = reason
    for name, first_line in failures.items():
        reason = old.get(name)
        if reason is None:
            tag = OLD_INTERPRETER_TAG + " " if sys.version_info < (3, 10) else ""
            new[name] = tag + first_line
        elif applies(reason) and is_machine_made(reason):
            conds = split_conditions(reason)[0]
            new[name] = ("[%s] " % ", ".join(conds) if conds else "") + first_line
        else:
            new[name] = reason
    return new


def stale(entries: Dict[str, str], known: Iterable[str]) -> List[str]:
    """Listed names that are not cases of the suite (misspelled or removed upstream)."""
    known = set(known)
    return sorted(n for n in entries if n not in known)
