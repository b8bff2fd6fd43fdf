"""portalctl against a running portal (pytest-django's live server): the offline verdicts equal
the portal's, apply --dry-run and diff write nothing, export seeds a folder, explain asks the
simulate API, and bad input gets the API's own messages (docs/portalctl.md)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core import tokens
from policies.models import Expectation, LabelAssignment, Policy
from portalctl.cli import main
from portalctl.client import Client
from portalctl.documents import load_repository
from portalctl.offline import run_expectations
from tests.support.api_fixtures import token_client

EXAMPLE = Path(__file__).parent / "example"
ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def token(role_users, monkeypatch) -> str:
    _, key = tokens.issue(role_users["editor"], role="editor")
    monkeypatch.setenv("PORTAL_TOKEN", key)
    return key


@pytest.fixture
def url(live_server, token) -> str:
    return live_server.url


def import_nodes(role_users, cluster: str) -> None:
    client = token_client(role_users["editor"], "editor")
    for path in sorted((EXAMPLE / "nodes" / cluster).glob("*.yaml")):
        response = client.post(
            f"/api/v1/clusters/{cluster}/nodes/import/",
            yaml.safe_load(path.read_text()),
            format="json",
        )
        assert response.status_code == 200, response.content


def verdicts(rows) -> set[tuple[str, str, bool, str]]:
    return {(r["name"], r["cluster"], r["ok"], r["message"]) for r in rows}


def test_the_offline_verdicts_equal_the_portals(url, role_users, tmp_path: Path) -> None:
    code, out, err = run("apply", "--url", url, str(EXAMPLE))
    assert code == 0, err
    assert "+ policy gpu-only" in out
    import_nodes(role_users, "prod")

    portal = verdicts(Client(url).outcomes())
    offline = verdicts(
        r.as_dict() for r in run_expectations(load_repository(EXAMPLE)) if not r.skipped
    )
    assert len(portal) == 6
    assert offline == portal
    assert [v[:3] for v in portal if not v[2]] == [("web-never-on-gpu", "prod", False)]

    report = tmp_path / "sub.json"
    done = subprocess.run(
        [sys.executable, "-m", "portalctl", "test", str(EXAMPLE), "--json", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    rows = [r for r in json.loads(report.read_text())["results"] if not r["skipped"]]
    assert verdicts(rows) == portal


def test_apply_dry_run_and_diff_write_nothing(url) -> None:
    code, out, _ = run("apply", "--dry-run", "--url", url, str(EXAMPLE))
    assert code == 0
    for line in (
        "+ cluster prod",
        "+ policy gpu-only",
        "+ policy batch-off-gold",
        "+ label_assignment gpu-pool",
        "+ expectation ml-lands-on-a100",
    ):
        assert line in out
    code, out, _ = run("diff", "--url", url, str(EXAMPLE))
    assert code == 1
    assert "+ policy gpu-only" in out
    assert Policy.objects.count() == LabelAssignment.objects.count() == 0
    assert Expectation.objects.count() == 0

    assert run("apply", "--url", url, str(EXAMPLE))[0] == 0
    assert Policy.objects.count() == 2
    code, out, _ = run("diff", "--url", url, str(EXAMPLE))
    assert (code, out.strip()) == (0, "no changes (11 unchanged)")


def test_dry_run_shows_a_change_field_by_field(url, tmp_path: Path) -> None:
    assert run("apply", "--url", url, str(EXAMPLE))[0] == 0
    folder = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(EXAMPLE), str(folder)], check=True)
    policy = folder / "policies" / "gpu.yaml"
    policy.write_text(policy.read_text().replace("weight: 10", "weight: 20"))
    code, out, _ = run("apply", "--dry-run", "--url", url, str(folder))
    assert code == 0
    assert "~ policy gpu-only" in out
    assert "    weight_rules[0].weight: 10 -> 20" in out
    assert Policy.objects.get(name="gpu-only").weight_rules.get().weight == 10


def test_bad_input_gets_the_apis_messages(editor, tmp_path: Path) -> None:
    document = {
        "apiVersion": "portal/v1",
        "kind": "PolicySet",
        "policies": [
            {
                "name": "typo",
                "pod_selector": {
                    "match_expressions": [{"key": "team", "operator": "Inn", "values": ["a"]}]
                },
                "filter_rules": [{"kind": "lable", "key": "tier", "operator": "In"}],
            }
        ],
        "expectations": [{"name": "e", "kind": "can_land", "pod": {"namespace": "Bad_NS"}}],
    }
    response = editor.post("/api/v1/apply/?dry_run=true", document, format="json")
    assert response.status_code == 400
    api = {(path, m) for path, messages in response.json().items() for m in messages}

    (tmp_path / "set.yaml").write_text(yaml.safe_dump(document))
    code, _, err = run("test", str(tmp_path))
    assert code == 2
    offline = set()
    for line in err.splitlines():
        _where, rest = line.split(": ", 1)  # set.yaml:LINE:COLUMN
        path, message = rest.split(": ", 1)
        offline.add((path, message))
    assert len(api) == 3  # the operator, the kind, the namespace
    assert offline == api


def test_export_seeds_a_folder_that_tests_the_same(url, role_users, tmp_path: Path) -> None:
    assert run("apply", "--url", url, str(EXAMPLE))[0] == 0
    import_nodes(role_users, "prod")
    folder = tmp_path / "seeded"
    code, out, _ = run(
        "export", "--url", url, "--cluster", "prod", "--clusters", "--nodes", str(folder)
    )
    assert code == 0
    (folder / "policy-set.yaml").write_text(out)
    exported = yaml.safe_load(out)
    assert [p["name"] for p in exported["policies"]] == ["batch-off-gold", "gpu-only"]
    assert [c["name"] for c in exported["clusters"]] == ["prod"]
    seeded = verdicts(r.as_dict() for r in run_expectations(load_repository(folder)))
    original = verdicts(r.as_dict() for r in run_expectations(load_repository(EXAMPLE)))
    assert seeded == original
    # And what was exported applies as a no-op.
    code, out, _ = run("diff", "--url", url, str(folder))
    assert code == 0, out


def test_explain_asks_the_simulate_api(url, role_users, tmp_path: Path) -> None:
    assert run("apply", "--url", url, str(EXAMPLE))[0] == 0
    import_nodes(role_users, "prod")
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: train, namespace: ml, labels: {}}\n"
    )
    code, out, _ = run("explain", str(pod), "--cluster", "prod", "--url", url)
    assert code == 0
    assert "pod ml/train in cluster prod" in out
    assert "policies: gpu-only (enforce)" in out
    assert "PASS gpu-1" in out
    assert "FAIL gpu-2" in out
    assert "nodes: 1 pass, 2 rejected of 3" in out


def test_without_a_token_or_with_a_wrong_one_nothing_is_sent(live_server, monkeypatch) -> None:
    monkeypatch.delenv("PORTAL_TOKEN", raising=False)
    code, _, err = run("diff", "--url", live_server.url, str(EXAMPLE))
    assert code == 1
    assert "Set PORTAL_TOKEN" in err
    monkeypatch.setenv("PORTAL_TOKEN", "wrong")
    code, _, err = run("export", "--url", live_server.url)
    assert code == 1
    assert "HTTP 401" in err


def test_explain_of_a_bad_pod_is_bad_input_with_the_apis_message(url, tmp_path: Path) -> None:
    assert run("apply", "--url", url, str(EXAMPLE))[0] == 0
    pod = tmp_path / "pod.yaml"
    pod.write_text("metadata: {name: p, namespace: ml, labels: {'bad key!': x}}\n")
    code, out, err = run("explain", str(pod), "--cluster", "prod", "--url", url)
    assert (code, out) == (2, "")
    assert "HTTP 400" in err
    assert "  pod.metadata.labels[bad key!]: " in err
