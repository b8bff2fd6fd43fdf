"""The import contracts (``[tool.importlinter]`` in pyproject.toml) name whole packages, so a
module added in the wrong place breaks them; every package of the project is analysed and placed
in the layers; the engine imports nothing but the standard library (an allow-list, checked here
with ``ast`` because import-linter only has deny-lists).

The test copies the packages to a temporary folder, adds modules that break a rule, and runs
``lint-imports`` on the copy: the contracts must say BROKEN for each, without anyone having
listed the new module anywhere.
"""

from __future__ import annotations

import ast
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


def top_level_packages(root: Path) -> set[str]:
    return {
        path.parent.name
        for path in root.glob("*/__init__.py")
        if path.parent.name not in NOT_PACKAGES
    }


def layered_packages(config: dict) -> set[str]:
    """The packages the ``layers`` contract places, ``"a | b"`` read as two."""
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return {
        name.strip("() ")
        for layer in contract["layers"]
        for name in layer.replace(":", "|").split("|")
    }


def undeclared_packages(root: Path) -> set[str]:
    """Top-level packages some contract cannot see: missing from ``root_packages`` or from the
    layers (a package the layers do not name may import, and be imported by, anything)."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    on_disk = top_level_packages(root)
    return (on_disk - set(config["root_packages"])) | (on_disk - layered_packages(config))


def engine_imports_outside_stdlib(engine: Path) -> list[str]:
    """``"file:line module"`` for each import in ``engine/`` (module- or function-level) whose top
    module is neither the standard library nor the engine itself."""
    allowed = set(sys.stdlib_module_names) | {"engine", "__future__"}
    found = []
    for path in sorted(engine.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue  # relative imports stay inside the engine
            for name in names:
                if name.split(".")[0] not in allowed:
                    found.append(f"{path.relative_to(engine)}:{node.lineno} {name}")
    return found


def test_every_package_of_the_project_is_analysed_and_layered() -> None:
    assert top_level_packages(ROOT) == set(CONFIG["root_packages"]), (
        "a top-level package must be in [tool.importlinter] root_packages so that the contracts "
        "see it"
    )
    assert layered_packages(CONFIG) == set(CONFIG["root_packages"])
    assert undeclared_packages(ROOT) == set()


def test_the_engine_imports_only_the_standard_library() -> None:
    assert engine_imports_outside_stdlib(ROOT / "engine") == []


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


LAYERS = "The layers: each package imports only the packages below it"
EXTENDER = "Only the entry points import the extender, whatever the app"
LEAVES = "The records and the decision log's models are leaves"
WRITER = "Apps use the decision log's surface, not its writer's internals"


def test_new_modules_in_the_wrong_place_break_the_contracts(tree: Path) -> None:
    # A standard-library-only module added under policies/, imported by the engine.
    (tree / "policies" / "stdlib_helper.py").write_text("import json\n")
    (tree / "engine" / "uses_helper.py").write_text("from policies import stdlib_helper\n")
    # A new extender module, imported by the console (which reads the decision log, not the
    # extender).
    (tree / "extender" / "brand_new.py").write_text("VALUE = 1\n")
    (tree / "console" / "reads_new.py").write_text("from extender import brand_new\n")
    # A new module of the decision log imported by one of its leaves.
    (tree / "decisions" / "records_helper.py").write_text("VALUE = 2\n")
    with (tree / "decisions" / "records.py").open("a") as records:
        records.write("\nfrom decisions import records_helper  # noqa\n")
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
        LAYERS,
        EXTENDER,
        LEAVES,
        "No circle between the modules of a package",
    }, output
    assert "engine.uses_helper -> policies.stdlib_helper" in output
    assert "console.reads_new -> extender.brand_new" in output
    assert "decisions.records -> decisions.records_helper" in output
    assert "inventory.reads_project -> portal.brand_new" in output


@pytest.mark.parametrize(
    "app", ["core", "inventory", "resources", "policies", "decisions", "scheduler", "extender"]
)
def test_an_app_importing_a_console_module_breaks_the_layers(tree: Path, app: str) -> None:
    (tree / "console" / "brand_new.py").write_text("VALUE = 1\n")
    (tree / app / "reads_console.py").write_text("from console import brand_new\n")
    output = lint_imports(tree)
    assert contract_lines(output)[LAYERS] == "BROKEN", output
    assert f"{app}.reads_console -> console.brand_new" in output


def test_resources_importing_policies_breaks_the_layers(tree: Path) -> None:
    # policies -> resources is the real direction (policies.apply); the other closes a circle.
    (tree / "resources" / "reads_policies.py").write_text("from policies import models\n")
    output = lint_imports(tree)
    states = contract_lines(output)
    assert states[LAYERS] == "BROKEN", output
    assert "resources.reads_policies -> policies.models" in output


def test_policies_importing_resources_outside_apply_breaks_a_contract(tree: Path) -> None:
    (tree / "policies" / "reads_resources.py").write_text("from resources import ledger\n")
    output = lint_imports(tree)
    states = contract_lines(output)
    broken = {name for name, state in states.items() if state == "BROKEN"}
    assert broken == {"Of the managed resources, policies import them only to apply a PolicySet"}, (
        output
    )
    assert "policies.reads_resources -> resources.ledger" in output


def test_the_scheduler_importing_resources_breaks_a_contract(tree: Path) -> None:
    with (tree / "scheduler" / "loop.py").open("a") as loop:
        loop.write("\n\ndef _late():\n    from resources import scheduling  # noqa\n")
    output = lint_imports(tree)
    states = contract_lines(output)
    broken = {name for name, state in states.items() if state == "BROKEN"}
    assert broken == {
        "Of the managed resources, the own scheduler imports only the binders' protocol"
    }, output
    assert "scheduler.loop -> resources.scheduling" in output


def test_the_inventory_judging_pods_again_breaks_the_layers(tree: Path) -> None:
    # The pod verdicts and the requeue are the policies' (policies.pod_verdicts, .requeue); the
    # inventory reaching for them, even inside a function, is a back-arrow.
    with (tree / "inventory" / "pod_queries.py").open("a") as queries:
        queries.write("\n\ndef _late():\n    from policies import pod_verdicts  # noqa\n")
    output = lint_imports(tree)
    assert contract_lines(output)[LAYERS] == "BROKEN", output
    assert "inventory.pod_queries -> policies.pod_verdicts" in output


def test_the_engine_importing_a_third_party_package_is_found(tmp_path: Path) -> None:
    engine = tmp_path / "engine"
    shutil.copytree(ROOT / "engine", engine, ignore=shutil.ignore_patterns("__pycache__"))
    # Packages no deny-list named: one at module level, one inside a function.
    (engine / "fast.py").write_text("import json\nimport attrs\n")
    with (engine / "snapshot.py").open("a") as snapshot:
        snapshot.write("\n\ndef _late():\n    from pydantic import BaseModel  # noqa\n")
    found = engine_imports_outside_stdlib(engine)
    assert [entry.split(" ")[1] for entry in found] == ["attrs", "pydantic"], found
    assert found[0] == "fast.py:2 attrs"


def test_an_app_added_later_must_be_declared(tree: Path) -> None:
    # A new app the contracts do not name: import-linter does not see it at all.
    (tree / "scheduling").mkdir()
    (tree / "scheduling" / "__init__.py").write_text("")
    assert undeclared_packages(tree) == {"scheduling"}
    # In root_packages but not in the layers: still undeclared (nothing holds its imports).
    config = (tree / "pyproject.toml").read_text()
    (tree / "pyproject.toml").write_text(
        config.replace('root_packages = ["engine",', 'root_packages = ["scheduling", "engine",')
    )
    assert undeclared_packages(tree) == {"scheduling"}


def test_a_new_app_importing_the_extender_breaks_the_contracts(tree: Path) -> None:
    (tree / "scheduling").mkdir()
    (tree / "scheduling" / "__init__.py").write_text("")
    (tree / "scheduling" / "reads.py").write_text("from extender import wire  # noqa\n")
    config = (tree / "pyproject.toml").read_text()
    (tree / "pyproject.toml").write_text(
        config.replace('root_packages = ["engine",', 'root_packages = ["scheduling", "engine",')
    )
    output = lint_imports(tree)
    assert contract_lines(output)[EXTENDER] == "BROKEN", output
    assert "scheduling.reads -> extender.wire" in output


def test_the_scheduler_importing_the_extender_breaks_the_contracts(tree: Path) -> None:
    # Both binders write the decision log's CallRecord; neither imports the other.
    with (tree / "scheduler" / "loop.py").open("a") as loop:
        loop.write("\n\ndef _late():\n    from extender import observe  # noqa\n")
    output = lint_imports(tree)
    states = contract_lines(output)
    broken = {name for name, state in states.items() if state == "BROKEN"}
    # The extender reaches the managed resources, so the scheduler would too (indirectly).
    assert broken == {
        LAYERS,
        EXTENDER,
        "Of the managed resources, the own scheduler imports only the binders' protocol",
    }, output
    assert "scheduler.loop -> extender.observe" in output


@pytest.mark.parametrize("upper", ["extender", "scheduler", "console"])
def test_the_decision_log_importing_its_writers_or_readers_breaks_the_layers(
    tree: Path, upper: str
) -> None:
    (tree / upper / "brand_new.py").write_text("VALUE = 1\n")
    (tree / "decisions" / "reads_up.py").write_text(f"from {upper} import brand_new\n")
    output = lint_imports(tree)
    assert contract_lines(output)[LAYERS] == "BROKEN", output
    assert f"decisions.reads_up -> {upper}.brand_new" in output


@pytest.mark.parametrize(
    ("app", "internal"),
    [
        ("extender", "writer"),
        ("scheduler", "channel"),
        ("console", "store"),
        ("portal", "dimensions"),
    ],
)
def test_an_app_importing_the_decision_logs_writer_internals_breaks_a_contract(
    tree: Path, app: str, internal: str
) -> None:
    (tree / app / "writes_log.py").write_text(f"from decisions import {internal}  # noqa\n")
    output = lint_imports(tree)
    states = contract_lines(output)
    broken = {name for name, state in states.items() if state == "BROKEN"}
    assert broken == {WRITER}, output
    assert f"{app}.writes_log -> decisions.{internal}" in output


def test_the_decision_logs_surface_is_open_to_its_writers_and_readers(tree: Path) -> None:
    # What the contracts allow: the scheduler and the console use the log's entry points, reads
    # and records (only the entry points import the extender).
    (tree / "scheduler" / "logs.py").write_text("from decisions import log, records  # noqa\n")
    (tree / "console" / "reads_log.py").write_text("from decisions import queries  # noqa\n")
    states = contract_lines(lint_imports(tree))
    assert set(states.values()) == {"KEPT"}, states
