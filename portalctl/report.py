"""``portalctl test``'s outputs: a table for people, JUnit XML and JSON for pipelines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from portalctl.offline import Result

SUITE = "portalctl"


def summary(results: Sequence[Result]) -> dict[str, int]:
    judged = [r for r in results if not r.skipped]
    return {
        "total": len(results),
        "passed": sum(1 for r in judged if r.ok),
        "failed": sum(1 for r in judged if not r.ok),
        "skipped": len(results) - len(judged),
    }


def status(result: Result) -> str:
    if result.skipped:
        return "SKIP"
    return "PASS" if result.ok else "FAIL"


def table(results: Sequence[Result], *, only_failures: bool = False) -> str:
    """One line per expectation and cluster (``only_failures``: per failing one), then the
    counts of all."""
    rows = [("RESULT", "EXPECTATION", "CLUSTER", "MESSAGE")]
    rows += [
        (status(r), r.name, r.cluster or "-", r.message)
        for r in results
        if not (only_failures and (r.ok or r.skipped))
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  "
        + row[3]
        for row in rows
    ]
    counts = summary(results)
    lines.append("")
    lines.append(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
        f"({counts['total']} in all)"
    )
    return "\n".join(lines)


def as_json(results: Sequence[Result]) -> dict[str, Any]:
    counts = summary(results)
    return {
        "ok": counts["failed"] == 0,
        "summary": counts,
        "results": [r.as_dict() for r in results],
    }


def junit(results: Sequence[Result]) -> bytes:
    """JUnit XML: one test case per expectation and cluster (class name: the file)."""
    counts = summary(results)
    suites = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=SUITE,
        tests=str(counts["total"]),
        failures=str(counts["failed"]),
        errors="0",
        skipped=str(counts["skipped"]),
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=r.file,
            name=f"{r.name} [{r.cluster}]" if r.cluster else r.name,
        )
        if r.skipped:
            ET.SubElement(case, "skipped", message=r.message)
        elif not r.ok:
            failure = ET.SubElement(case, "failure", message=r.message, type="ExpectationFailed")
            failure.text = f"{r.file}:{r.line}: {r.name} in {r.cluster or '-'}: {r.message}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def write_outputs(
    results: Sequence[Result], *, junit_path: str | None, json_path: str | None
) -> None:
    if junit_path:
        Path(junit_path).write_bytes(junit(results))
    if json_path:
        Path(json_path).write_text(json.dumps(as_json(results), indent=2) + "\n", encoding="utf-8")
