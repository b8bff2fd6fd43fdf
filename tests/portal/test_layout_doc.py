"""docs/architecture.md, "Where things live": each package's row names every module and
subpackage the package has, so the table is what ``ls`` shows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_MODULES = {"__init__", "__pycache__", "migrations", "templates", "static"}


def rows() -> dict[str, str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for line in section.splitlines():
        match = re.match(r"\| `([a-z_]+)/` \| (.*) \|$", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def contents(package: Path) -> set[str]:
    names = {path.stem for path in package.glob("*.py")}
    names |= {path.name for path in package.iterdir() if path.is_dir()}
    return names - NOT_MODULES


def test_every_package_and_each_of_its_modules_is_in_the_table() -> None:
    table = rows()
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages <= set(table), f"packages missing from the table: {packages - set(table)}"
    missing = {
        package: sorted(
            name
            for name in contents(ROOT / package)
            if f"`{name}`" not in table[package] and f"`{name}/" not in table[package]
        )
        for package in packages
    }
    assert {k: v for k, v in missing.items() if v} == {}
