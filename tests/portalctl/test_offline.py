"""portalctl test: a folder judged offline — verdicts, exit codes, the table, JUnit XML and
JSON, and bad input named by file, line and field (docs/portalctl.md)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from portalctl.cli import main

EXAMPLE = Path(__file__).parent / "example"
ROOT = Path(__file__).parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the example with only passing expectations."""
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    path = target / "expectations" / "ml.yaml"
    text = path.read_text()
    start = text.index("# Fails on purpose")
    end = text.index("- name: disabled-one")
    path.write_text(text[:start] + text[end:])
    return target


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_the_example_fails_on_its_one_failing_expectation(tmp_path: Path) -> None:
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    code, out, _ = run("test", str(EXAMPLE), "--junit", str(junit), "--json", str(report))
    assert code == 1
    lines = {line.split()[1]: line.split()[0] for line in out.splitlines()[1:] if line.strip()}
    assert lines["web-never-on-gpu"] == "FAIL"
    assert lines["ml-prefers-gold"] == "PASS"
    assert lines["ml-on-the-gpu-pool"] == "PASS"  # the label assignment's label counts
    assert lines["disabled-one"] == "SKIP"
    assert "5 passed, 1 failed, 1 skipped (7 in all)" in out

    data = json.loads(report.read_text())
    assert data["ok"] is False
    assert data["summary"] == {"total": 7, "passed": 5, "failed": 1, "skipped": 1}
    (failed,) = [r for r in data["results"] if not r["ok"]]
    assert failed["name"] == "web-never-on-gpu"
    assert failed["cluster"] == "prod"
    assert failed["file"] == "expectations/ml.yaml"
    assert failed["message"] == "a pod in web can land on 2 nodes named gpu-*: gpu-1, gpu-2"

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("7", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    failure = cases["web-never-on-gpu [prod]"].find("failure")
    assert failure is not None
    assert failure.get("message") == failed["message"]
    assert cases["disabled-one"].find("skipped") is not None
    assert cases["ml-never-on-cpu [prod]"].find("failure") is None


def test_a_folder_whose_expectations_all_pass_exits_0(folder: Path) -> None:
    code, out, _ = run("test", str(folder))
    assert code == 0
    assert "5 passed, 0 failed, 1 skipped" in out


def test_quiet_lists_only_the_failures_and_counts_all() -> None:
    code, out, _ = run("test", str(EXAMPLE), "--quiet")
    assert code == 1
    rows = [line.split()[1] for line in out.splitlines()[1:] if line.strip()][:-1]
    assert rows == ["web-never-on-gpu"]
    assert "5 passed, 1 failed, 1 skipped (7 in all)" in out


def test_a_folder_without_expectations_passes_and_says_so(folder: Path) -> None:
    (folder / "expectations" / "ml.yaml").unlink()
    code, out, err = run("test", str(folder))
    assert code == 0
    assert "no expectations found" in err
    assert "0 passed, 0 failed, 0 skipped (0 in all)" in out


def test_a_policy_change_that_breaks_an_expectation_fails_the_build(folder: Path) -> None:
    policy = folder / "policies" / "gpu.yaml"
    policy.write_text(policy.read_text().replace("values: [A100]", "values: [H100]"))
    code, out, _ = run("test", str(folder))
    assert code == 1
    assert "FAIL    ml-lands-on-a100" in out
    assert "can land on none of the 1 nodes" in out


def test_every_cluster_is_judged_for_an_expectation_without_a_cluster(folder: Path) -> None:
    shutil.copytree(folder / "nodes" / "prod", folder / "nodes" / "staging")
    _, _, _ = run("test", str(folder), "--json", str(folder / "r.json"))
    results = json.loads((folder / "r.json").read_text())["results"]
    clusters = {r["cluster"] for r in results if r["name"] == "ml-never-on-cpu"}
    assert clusters == {"prod", "staging"}
    # One with a cluster is judged there only.
    assert {r["cluster"] for r in results if r["name"] == "ml-on-the-gpu-pool"} == {"prod"}


# --- bad input ---------------------------------------------------------------------------------


def test_an_unknown_rule_kind_and_a_selector_typo_name_file_line_and_field(folder: Path) -> None:
    write(
        folder,
        "policies/bad.yaml",
        """\
        apiVersion: portal/v1
        kind: PolicySet
        policies:
        - name: typo
          pod_selector:
            match_expressions: [{key: team, operator: Inn, values: [a]}]
          filter_rules:
          - {kind: lable, key: tier, operator: In, values: [gold]}
        """,
    )
    code, out, err = run("test", str(folder))
    assert code == 2
    assert out == ""
    assert (
        "policies/bad.yaml:6:37: policies[0].pod_selector.match_expressions[0].operator: "
        "unsupported operator 'Inn': must be one of In, NotIn, Exists, DoesNotExist"
    ) in err
    assert (
        "policies/bad.yaml:8:6: policies[0].filter_rules[0].kind: "
        "Must be one of label, resource, condition, name."
    ) in err


def test_a_missing_field_points_at_the_object_that_lacks_it(folder: Path) -> None:
    write(
        folder,
        "expectations/bad.yaml",
        """\
        apiVersion: portal/v1
        kind: PolicySet
        expectations:
        - name: no-pod
          kind: can_lnd
        """,
    )
    code, _, err = run("test", str(folder))
    assert code == 2
    assert "expectations/bad.yaml:5:3: expectations[0].kind: Must be one of can_land" in err
    assert (
        "expectations/bad.yaml:4:3: expectations[0].pod.namespace: A namespace is required." in err
    )


def test_document_level_mistakes(folder: Path) -> None:
    write(
        folder,
        "more.yaml",
        """\
        apiVersion: portal/v2
        kind: PolicySet
        polices: []
        expectations:
        - name: ml-never-on-cpu
          cluster: staging
          kind: never_lands
          pod: {namespace: ml}
        """,
    )
    code, _, err = run("test", str(folder))
    assert code == 2
    assert "more.yaml:1:1: apiVersion: Must be portal/v1." in err
    assert "more.yaml:3:1: polices: Unknown field." in err
    assert "more.yaml:5:3: expectations[0].name: 'ml-never-on-cpu' appears twice (first in" in err
    assert "more.yaml:6:3: expectations[0].cluster: No cluster named 'staging'." in err


def test_broken_yaml_names_the_line(folder: Path) -> None:
    write(folder, "policies/broken.yaml", "apiVersion: portal/v1\nkind: PolicySet\npolicies: [\n")
    code, _, err = run("test", str(folder))
    assert code == 2
    assert err.startswith("policies/broken.yaml:4:1: Not valid YAML:")


def test_a_bad_node_names_its_field(folder: Path) -> None:
    write(
        folder,
        "nodes/prod/more.yaml",
        """\
        kind: Node
        metadata: {name: odd-1}
        status:
          allocatable: {cpu: four}
        """,
    )
    code, _, err = run("test", str(folder))
    assert code == 2
    assert "nodes/prod/more.yaml:4:17: status.allocatable[cpu]: Invalid quantity 'four'" in err


def test_no_folder_and_bad_options_are_bad_input(tmp_path: Path) -> None:
    assert run("test", str(tmp_path / "missing"))[0] == 2
    assert run("test")[0] == 2
    assert run("frobnicate")[0] == 2


# --- as a program --------------------------------------------------------------------------------


def test_as_a_subprocess_the_verdicts_and_exit_code_are_the_same(tmp_path: Path) -> None:
    report = tmp_path / "sub.json"
    done = subprocess.run(
        [sys.executable, "-m", "portalctl", "test", str(EXAMPLE), "--json", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    run("test", str(EXAMPLE), "--json", str(tmp_path / "in.json"))
    assert json.loads(report.read_text()) == json.loads((tmp_path / "in.json").read_text())


def test_offline_work_imports_no_django() -> None:
    script = (
        "import sys\n"
        "from portalctl.cli import main\n"
        f"code = main(['test', {str(EXAMPLE)!r}, '-q'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'core', 'policies', 'inventory', 'portal'))\n"
        "print(code, bad)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "1 []"
