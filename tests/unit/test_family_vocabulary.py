"""One op-family vocabulary across the numpy kernels, the WebGPU ops, the WGSL templates and the C
kernels, read from its one list (the "Op families" table of docs/ARCHITECTURE.md) and held
against the files on disk and the two op tables."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
SHARED = "(shared)"
# table column -> (folder, which files of it the table must list)
COLUMNS = {
    "core/kernels/": ("core/kernels", (".py",)),
    "web/webgpu/ops/": ("web/webgpu/ops", (".py",)),
    "web/webgpu/shaders/": ("web/webgpu/shaders", (".wgsl",)),
    "edge/kernels/": ("edge/kernels", (".c", ".h")),
}


def read_vocabulary() -> Tuple[List[str], Dict[str, Dict[str, List[str]]]]:
    """(families in table order, {column: {family: [files]}}) from the Op families table."""
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Op families", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip().strip("`") for c in rows[0].strip("|").split("|")]
    families: List[str] = []
    files: Dict[str, Dict[str, List[str]]] = {c: {} for c in COLUMNS}
    for line in rows[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        fam = cells[0].strip("`")
        families.append(fam)
        for name, cell in zip(header, cells):
            if name in COLUMNS:
                files[name][fam] = re.findall(r"`([^`]+)`", cell)
    return families, files


def on_disk(column: str) -> Set[str]:
    """The files of a column's folder that the table must list (package markers aside)."""
    folder, suffixes = COLUMNS[column]
    return {n for n in os.listdir(os.path.join(ROOT, folder))
            if n.endswith(suffixes) and n != "__init__.py"}


def family_of(name: str, families: List[str]) -> str:
    """The family a file name belongs to by its name: `<family>` or `<family>_<part>`."""
    stem = name.split(".", 1)[0]
    best = ""
    for fam in families:
        if (stem == fam or stem.startswith(fam + "_")) and len(fam) > len(best):
            best = fam
    return best


def test_the_table_lists_every_file_once_and_only_files_that_exist():
    families, files = read_vocabulary()
    assert len(families) == len(set(families)), families
    assert {"elementwise", "matmul", "normalization", "conv", "pool"} <= set(families)
    for column in COLUMNS:
        listed = [f for fam in files[column] for f in files[column][fam]]
        dupes = sorted({f for f in listed if listed.count(f) > 1})
        assert not dupes, "%s: listed twice in the Op families table: %s" % (column, dupes)
        missing = sorted(on_disk(column) - set(listed))
        assert not missing, ("%s: files not in the Op families table of docs/ARCHITECTURE.md "
                             "(add each to its family's row): %s" % (column, missing))
        gone = sorted(set(listed) - on_disk(column))
        assert not gone, "%s: the Op families table lists files that do not exist: %s" % (column,
                                                                                          gone)


def test_every_file_is_named_by_its_family():
    families, files = read_vocabulary()
    names = [f for f in families if f != SHARED]
    wrong = []
    for column in COLUMNS:
        for fam, listed in files[column].items():
            for name in listed:
                if fam == SHARED:
                    if family_of(name, names):
                        wrong.append("%s%s is shared but named like family %r"
                                     % (column, name, family_of(name, names)))
                elif family_of(name, names) != fam:
                    wrong.append("%s%s is in row %r but its name says %r"
                                 % (column, name, fam, family_of(name, names) or "no family"))
    assert not wrong, wrong


def test_shaders_and_c_kernels_start_with_a_family_name():
    families, _ = read_vocabulary()
    names = [f for f in families if f != SHARED]
    shaders = on_disk("web/webgpu/shaders/")
    assert shaders and not [s for s in shaders if not family_of(s, names)], shaders
    _, files = read_vocabulary()
    shared_c = set(files["edge/kernels/"].get(SHARED, []))
    c_files = {n for n in on_disk("edge/kernels/") if n.endswith(".c")} - shared_c
    assert c_files and not [c for c in c_files if not family_of(c, names)], c_files


def test_an_op_on_cpu_and_webgpu_lives_in_the_same_family():
    from onnxedge.kernels.op_modules import OP_MODULES
    from onnxedge.web.webgpu.ops import OPS
    disagree = []
    for key, spec in sorted(OPS.items()):
        if key not in OP_MODULES:
            continue
        gpu = spec.fn.__module__.rsplit(".", 1)[-1]
        cpu = sorted(set(OP_MODULES[key]))
        if cpu != [gpu]:
            disagree.append("%s: core/kernels/%s.py but web/webgpu/ops/%s.py" % (key, cpu, gpu))
    assert not disagree, disagree
    assert len([k for k in OPS if k in OP_MODULES]) > 50   # the check saw the real tables


def test_names_outside_the_vocabulary_have_no_family():
    """The old names (sgemm.c, rownorm.wgsl) would be caught; family parts are recognized."""
    families, _ = read_vocabulary()
    names = [f for f in families if f != SHARED]
    assert family_of("sgemm.c", names) == "" and family_of("rownorm.wgsl", names) == ""
    assert family_of("matmul_int8.c", names) == "matmul"
    assert family_of("normalization_rows_wg.wgsl", names) == "normalization"
