"""Size report of a reduced build: wheel bytes, files, kernel modules and ops kept and dropped."""
from __future__ import annotations

import json
import os
import zipfile
from typing import Any, Dict, Optional

from .wheel import BuildResult


def _op_name(pair: Any) -> str:
    domain, op = pair
    return "%s.%s" % (domain, op) if domain else op


def size_report(result: BuildResult, full_wheel: Optional[str] = None) -> Dict[str, Any]:
    """A JSON-able report of a build; `full_wheel` (a path) adds the comparison with it."""
    with zipfile.ZipFile(result.path) as zf:
        infos = zf.infolist()
    biggest = sorted(infos, key=lambda i: -i.compress_size)[:10]
    report: Dict[str, Any] = {
        "wheel": os.path.basename(result.path),
        "tag": result.tag,
        "wheel_bytes": os.path.getsize(result.path),
        "unpacked_bytes": sum(i.file_size for i in infos),
        "files": len(infos),
        "biggest_files": [{"name": i.filename, "bytes": i.file_size, "compressed": i.compress_size}
                          for i in biggest],
        "kernel_modules_kept": result.kept_modules,
        "kernel_modules_dropped": result.dropped_modules,
        "ops_required": [_op_name(p) for p in result.required_ops],
        "ops_missing": [_op_name(p) for p in result.missing_ops],
        "ops_kept": len(result.kept_ops),
        "ops_dropped": len(result.dropped_ops),
        "ops_kept_list": [_op_name(p) for p in result.kept_ops],
        "entry_points": result.entry_points,
    }
    if full_wheel:
        full = os.path.getsize(full_wheel)
        report["full_wheel"] = os.path.basename(full_wheel)
        report["full_wheel_bytes"] = full
        report["ratio"] = round(report["wheel_bytes"] / float(full), 4)
    return report


def format_text(report: Dict[str, Any]) -> str:
    """The report as a few lines of text."""
    lines = ["%s (%s)" % (report["wheel"], report["tag"]),
             "  wheel: %d bytes (%d unpacked), %d files" % (report["wheel_bytes"],
                                                             report["unpacked_bytes"], report["files"])]
    if "full_wheel_bytes" in report:
        lines.append("  full wheel %s: %d bytes; this one is %.1f%% of it"
                     % (report["full_wheel"], report["full_wheel_bytes"], 100 * report["ratio"]))
    lines.append("  ops required: %d (%s)" % (len(report["ops_required"]),
                                              ", ".join(report["ops_required"])))
    lines.append("  ops the wheel serves: %d (the required ones%s), dropped: %d"
                 % (report["ops_kept"], "" if report["ops_kept"] == len(report["ops_required"])
                    else " plus the rest of their kernel modules", report["ops_dropped"]))
    if report["ops_missing"]:
        lines.append("  WARNING: no kernel in onnxedge for: %s" % ", ".join(report["ops_missing"]))
    lines.append("  kernel modules kept: %s" % (", ".join(report["kernel_modules_kept"]) or "-"))
    lines.append("  kernel modules dropped: %s" % (", ".join(report["kernel_modules_dropped"]) or "-"))
    providers = sorted(report["entry_points"].get("onnxedge.providers", {}))
    lines.append("  providers: %s" % (", ".join(providers) or "-"))
    lines.append("  biggest files: " + ", ".join("%s %d" % (f["name"], f["compressed"])
                                                for f in report["biggest_files"][:5]))
    return "\n".join(lines) + "\n"


def write_report(report: Dict[str, Any], json_path: str, text_path: Optional[str] = None) -> None:
    """Write the report as JSON (and as text when text_path is given)."""
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    if text_path:
        with open(text_path, "w", encoding="utf-8") as f:
            f.write(format_text(report))
