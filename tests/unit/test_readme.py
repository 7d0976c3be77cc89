"""The README is a user guide: it starts with the two commands, stays under 15 KB, and its links
(and those of docs/) point at files that exist; every `make` target it names is in the Makefile."""
from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
MAX_BYTES = 15 * 1024
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _markdown_files() -> list:
    """README.md and every .md under docs/."""
    out = [README]
    for folder, _, files in os.walk(DOCS):
        out += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return out


def test_readme_starts_with_the_two_commands():
    """Title, then one code block holding exactly `make demo` and `make test`."""
    lines = _read(README).splitlines()
    assert lines[0] == "# onnxedge"
    block = lines[lines.index("```"):]
    end = block.index("```", 1)
    commands = [line.split("#")[0].strip() for line in block[1:end]]
    assert commands == ["make demo", "make test"], block[:end + 1]
    assert all(not line.strip() for line in lines[1:lines.index("```")])


def test_readme_is_at_most_15_kb():
    """Internals and measurements live in docs/, not in the README."""
    size = len(_read(README).encode("utf-8"))
    assert size <= MAX_BYTES, "README.md is %d bytes, over %d: move details to docs/" % (
        size, MAX_BYTES)


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_point_at_files(path):
    """Every relative link (before any #anchor) names a file or folder of the checkout."""
    missing = []
    for target in LINK.findall(_read(path)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        local = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
        if not os.path.exists(local):
            missing.append(target)
    assert not missing, "%s links to missing files: %s" % (os.path.relpath(path, ROOT), missing)


def test_make_targets_named_in_the_readme_exist():
    """Every `make X` the README names is a Makefile target listed by `make help` (## text)."""
    makefile = _read(os.path.join(ROOT, "Makefile"))
    documented = set(re.findall(r"^([a-z0-9-]+):.*## ", makefile, re.M))
    named = set(re.findall(r"`make ([a-z0-9-]+)", _read(README)))
    named |= {"demo", "test"}
    assert named <= documented, "README names make targets without a `## help` line: %s" % (
        sorted(named - documented))
