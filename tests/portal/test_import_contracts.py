"""The import contracts (``[tool.importlinter]`` in pyproject.toml) name whole packages, so a
module added in the wrong place breaks them; and every package of the project is analysed.

The test copies the packages to a temporary folder, adds modules that break a rule, and runs
``lint-imports`` on the copy: the contracts must say BROKEN for each, without anyone having
listed the new module anywhere.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
# Folders with Python that are not the product's packages.
NOT_PACKAGES = {"tests", "bench", "deploy", "docs"}


def lint_imports(cwd: Path) -> str:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    return done.stdout + done.stderr


def contract_lines(output: str) -> dict[str, str]:
    """``{contract name: "KEPT" | "BROKEN"}`` from lint-imports' summary."""
    states: dict[str, str] = {}
    for line in output.splitlines():
        for state in ("KEPT", "BROKEN"):
            marker = f" {state}"
            if marker in line and not line.startswith(" "):
                states[line.split(marker)[0]] = state
    return states


def test_every_package_of_the_project_is_analysed() -> None:
    packages = {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_PACKAGES
    }
    assert packages == set(CONFIG["root_packages"]), (
        "a top-level package must be in [tool.importlinter] root_packages so that the contracts "
        "see it"
    )


def test_the_contracts_hold_on_the_tree() -> None:
    states = contract_lines(lint_imports(ROOT))
    assert len(states) == len(CONFIG["contracts"])
    assert set(states.values()) == {"KEPT"}, states


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "migrations", "templates", "static")
    for package in CONFIG["root_packages"]:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_new_modules_in_the_wrong_place_break_the_contracts(tree: Path) -> None:
    # A standard-library-only module added under policies/, imported by the engine.
    (tree / "policies" / "stdlib_helper.py").write_text("import json\n")
    (tree / "engine" / "uses_helper.py").write_text("from policies import stdlib_helper\n")
    # A new extender module, imported by the console.
    (tree / "extender" / "brand_new.py").write_text("VALUE = 1\n")
    (tree / "console" / "reads_new.py").write_text("from extender import brand_new\n")
    # A new module of the extender imported by one of its leaves.
    (tree / "extender" / "records_helper.py").write_text("VALUE = 2\n")
    with (tree / "extender" / "records.py").open("a") as records:
        records.write("\nfrom extender import records_helper  # noqa\n")
    # A new module of the project imported by an app.
    (tree / "portal" / "brand_new.py").write_text("VALUE = 3\n")
    (tree / "inventory" / "reads_project.py").write_text("from portal import brand_new\n")

    # A circle between two modules of a package, hidden in a function-level import.
    with (tree / "policies" / "queries.py").open("a") as queries:
        queries.write("\n\ndef _late():\n    from policies import services  # noqa\n")

    output = lint_imports(tree)
    states = contract_lines(output)
    broken = {name for name, state in states.items() if state == "BROKEN"}
    assert broken == {
        "The engine imports only the standard library",
        "The console reads the extender's decision log, nothing else of it",
        "The extender's records and models are leaves",
        "The apps do not import the project",
        "No circle between the modules of a package",
    }, output
    assert "engine.uses_helper -> policies.stdlib_helper" in output
    assert "console.reads_new -> extender.brand_new" in output
    assert "extender.records -> extender.records_helper" in output
    assert "inventory.reads_project -> portal.brand_new" in output


def test_a_new_app_importing_the_extender_breaks_the_contracts(tree: Path) -> None:
    (tree / "scheduling").mkdir()
    (tree / "scheduling" / "__init__.py").write_text("")
    (tree / "scheduling" / "reads.py").write_text("from extender import wire  # noqa\n")
    config = (tree / "pyproject.toml").read_text()
    (tree / "pyproject.toml").write_text(
        config.replace('root_packages = ["engine",', 'root_packages = ["scheduling", "engine",')
    )
    output = lint_imports(tree)
    assert (
        contract_lines(output)[
            "Only the entry points and the console import the extender, whatever the app"
        ]
        == "BROKEN"
    ), output
    assert "scheduling.reads -> extender.wire" in output
