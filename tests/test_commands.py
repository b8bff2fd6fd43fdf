"""The management commands: seed_demo, create_api_token, ensure_admin."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from core import tokens
from core.models import ApiToken, AuditEntry
from core.revisions import current_snapshot_revision
from inventory.models import Cluster, Node
from policies.models import LabelAssignment, Policy, PolicyVersion
from portal.demo import demo_nodes

pytestmark = pytest.mark.django_db


def run(*args: str, **options: object) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def snapshot_of_demo() -> dict:
    return {
        "clusters": list(Cluster.objects.values_list("name", "is_default")),
        "nodes": Node.objects.count(),
        "node_writes": sorted(Node.objects.values_list("name", "last_seen")),
        "assignments": sorted(LabelAssignment.objects.values_list("name", "version")),
        "policies": sorted(Policy.objects.values_list("name", "version")),
        "versions": PolicyVersion.objects.count(),
        "audit": AuditEntry.objects.count(),
        "revision": current_snapshot_revision(),
    }


# --- seed_demo ------------------------------------------------------------------------------


def test_seed_demo_creates_the_demo_cluster_as_default() -> None:
    run("seed_demo")
    cluster = Cluster.objects.get(name="demo")
    assert cluster.is_default
    assert cluster.display_name == "Demo cluster"
    assert cluster.source == "static"
    assert cluster.unknown_node_action == "deny"


def test_seed_demo_loads_a_realistic_inventory() -> None:
    run("seed_demo")
    nodes = list(Node.objects.filter(cluster__name="demo"))
    assert 55 <= len(nodes) <= 65
    assert [n.name for n in nodes if not n.ready] == ["demo-general-1b-03"]
    cordoned = [n for n in nodes if n.unschedulable]
    assert len(cordoned) == 1
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in cordoned[0].taints
    assert {n.labels["topology.kubernetes.io/zone"] for n in nodes} == {
        "eu-west-1a",
        "eu-west-1b",
        "eu-west-1c",
    }
    assert {n.labels["eks.amazonaws.com/capacityType"] for n in nodes} == {"SPOT", "ON_DEMAND"}
    assert any(n.labels["kubernetes.io/arch"] == "arm64" for n in nodes)
    assert all(n.warnings == [] for n in nodes)
    general = next(n for n in nodes if n.labels["node.kubernetes.io/instance-type"] == "m5.xlarge")
    assert general.allocatable["cpu"] == "3920m"
    assert general.allocatable_parsed["cpu"] == 3920
    assert general.allocatable_parsed["memory"] == 15147148 * 1024
    assert general.allocatable_parsed["pods"] == 58


def test_seed_demo_gpu_nodes_have_gpus_products_and_taints() -> None:
    run("seed_demo")
    gpu_nodes = [n for n in Node.objects.all() if "nvidia.com/gpu.product" in n.labels]
    by_product = {
        product: {
            n.allocatable_parsed["nvidia.com/gpu"]
            for n in gpu_nodes
            if n.labels["nvidia.com/gpu.product"] == product
        }
        for product in {n.labels["nvidia.com/gpu.product"] for n in gpu_nodes}
    }
    assert by_product == {"A100-SXM4-40GB": {8}, "A10G": {1}}
    for node in gpu_nodes:
        assert "-gpu-" in node.name
        assert node.labels["nvidia.com/gpu.count"] == str(node.allocatable_parsed["nvidia.com/gpu"])
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node.taints
    non_gpu = [n for n in Node.objects.all() if n not in gpu_nodes]
    assert all("nvidia.com/gpu" not in n.allocatable_parsed for n in non_gpu)


def test_seed_demo_creates_assignments_and_policies_with_history() -> None:
    run("seed_demo")
    assert set(LabelAssignment.objects.values_list("name", flat=True)) == {
        "gpu-tier",
        "zone-a-maintenance",
    }
    policies = {p.name: p for p in Policy.objects.all()}
    assert set(policies) == {"ml-on-gpu", "prefer-on-demand", "inference-on-h100", "no-small-nodes"}
    assert [name for name, p in policies.items() if p.mode == "dry-run"] == ["no-small-nodes"]
    for policy in policies.values():
        assert policy.version == 1
        assert list(policy.versions.values_list("version", flat=True)) == [1]
        assert AuditEntry.objects.filter(object_type="policy", object_name=policy.name).count() == 1
    ml = policies["ml-on-gpu"]
    assert ml.pod_selector["namespaces"] == ["ml"]
    assert ml.filter_rules.count() == 2
    assert ml.weight_rules.count() == 2


def test_seed_demo_twice_changes_nothing() -> None:
    out, _ = run("seed_demo")
    assert "Created policy ml-on-gpu." in out
    before = snapshot_of_demo()
    out, _ = run("seed_demo")
    assert "nothing changed" in out
    assert snapshot_of_demo() == before


def test_seed_demo_leaves_existing_objects_alone() -> None:
    run("seed_demo")
    Policy.objects.filter(name="prefer-on-demand").update(description="edited by an operator")
    Node.objects.filter(name="demo-arm64-1a-01").delete()
    out, _ = run("seed_demo")
    assert Policy.objects.get(name="prefer-on-demand").description == "edited by an operator"
    assert not Node.objects.filter(name="demo-arm64-1a-01").exists()
    assert "nothing changed" in out


def test_seed_demo_does_not_take_the_default_from_another_cluster() -> None:
    Cluster.objects.create(name="prod", is_default=True)
    run("seed_demo")
    assert Cluster.objects.get(name="prod").is_default
    assert not Cluster.objects.get(name="demo").is_default


def test_demo_nodes_are_deterministic() -> None:
    assert demo_nodes() == demo_nodes()


# --- create_api_token -----------------------------------------------------------------------


def test_create_api_token_prints_only_the_key_of_a_new_user_in_the_role_group() -> None:
    out, _ = run("create_api_token", "ci", role="editor")
    key = out.strip()
    token = tokens.check(key)
    assert token is not None
    user = token.user
    assert user.username == "ci"
    assert user.is_staff
    assert not user.is_superuser
    assert not user.has_usable_password()
    assert list(user.groups.values_list("name", flat=True)) == ["editor"]


def test_create_api_token_issues_a_new_token_and_rotate_revokes_the_others() -> None:
    first = run("create_api_token", "ci", "--role", "viewer")[0].strip()
    again = run("create_api_token", "ci", "--role", "viewer")[0].strip()
    assert again != first  # keys are not stored: each call shows a new one, once
    assert tokens.check(first) is not None
    assert tokens.check(again) is not None
    rotated = run("create_api_token", "ci", "--role", "viewer", "--rotate")[0].strip()
    assert tokens.check(rotated) is not None
    assert tokens.check(first) is None
    assert tokens.check(again) is None


def test_tokens_are_stored_hashed_and_expire() -> None:
    key = run("create_api_token", "ci", "--role", "viewer", "--expires-days", "1")[0].strip()
    stored = ApiToken.objects.get()
    dumped = repr(list(ApiToken.objects.values()))
    assert key not in dumped  # a database dump holds no usable key
    assert stored.digest != key
    assert stored.expires_at is not None
    ApiToken.objects.update(expires_at=timezone.now())
    assert tokens.check(key) is None


def test_create_api_token_for_an_existing_user_keeps_the_account() -> None:
    user = get_user_model().objects.create_user("alice", password="s3cret-pass-word")
    key = run("create_api_token", "alice", role="admin")[0].strip()
    user.refresh_from_db()
    assert tokens.check(key).user == user
    assert user.check_password("s3cret-pass-word")
    assert user.groups.filter(name="admin").exists()


def test_create_api_token_rejects_an_unknown_role() -> None:
    with pytest.raises(CommandError, match="Unknown role 'owner'"):
        run("create_api_token", "ci", role="owner")
    assert not get_user_model().objects.filter(username="ci").exists()


@pytest.mark.parametrize("username", ["", "   ", "bad user!", "x" * 151])
def test_create_api_token_rejects_an_invalid_user_name(username: str) -> None:
    with pytest.raises(CommandError, match="user name"):
        run("create_api_token", username, role="viewer")
    assert not ApiToken.objects.exists()


def test_create_api_token_recreates_a_missing_role_group() -> None:
    Group.objects.filter(name="viewer").delete()
    key = run("create_api_token", "ci", role="viewer")[0].strip()
    group = Group.objects.get(name="viewer")
    assert tokens.check(key).user.groups.get() == group
    assert group.permissions.filter(codename="view_policy").exists()


# --- ensure_admin ---------------------------------------------------------------------------


def test_ensure_admin_creates_a_superuser_with_a_printed_random_password(monkeypatch) -> None:
    monkeypatch.delenv("PORTAL_ADMIN_PASSWORD", raising=False)
    out, _ = run("ensure_admin")
    password = out.split("password ", 1)[1].split(" ", 1)[0]
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert admin.is_staff
    assert admin.check_password(password)
    out, _ = run("ensure_admin")
    assert "password unchanged" in out
    assert password not in out
    admin.refresh_from_db()
    assert admin.check_password(password)


def test_ensure_admin_takes_and_resets_the_password_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("PORTAL_ADMIN_PASSWORD", "first-chosen-password")
    out, _ = run("ensure_admin")
    assert "first-chosen-password" not in out
    assert get_user_model().objects.get(username="admin").check_password("first-chosen-password")
    monkeypatch.setenv("PORTAL_ADMIN_PASSWORD", "second-chosen-password")
    run("ensure_admin")
    assert get_user_model().objects.get(username="admin").check_password("second-chosen-password")


# --- deploy/supervise.py (the process runner behind `make run`) -------------------------------

SUPERVISOR = Path(__file__).resolve().parent.parent / "deploy" / "supervise.py"


def supervise(*specs: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SUPERVISOR), *specs],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )


def read_until(proc: subprocess.Popen, done: Callable[[str], bool], limit: int = 2000) -> str:
    """Output lines until ``done(output so far)`` (bounded by a line count, not a clock)."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if done("".join(lines)) or len(lines) >= limit:
            break
    return "".join(lines)


def stop(proc: subprocess.Popen, seen: str) -> str:
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    return seen + rest


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def started_pids(output: str) -> dict[str, int]:
    pids = {}
    for line in output.splitlines():
        if "| started " in line:
            name, pid = line.split("| started ", 1)[1].split(" (pid ", 1)
            pids[name] = int(pid.split(")", 1)[0])
    return pids


def test_supervisor_restarts_a_process_that_died_and_leaves_the_others_running() -> None:
    """A real child killed from outside is started again; its neighbour keeps its pid."""
    proc = supervise(
        "sleeper=sleep 120",
        "victim=sh -c 'echo victim-up; exec sleep 120'",
        SUPERVISE_BACKOFF_SECONDS="0.2",
    )
    seen = read_until(proc, lambda out: out.count("victim   | victim-up") == 1)
    first = started_pids(seen)
    os.kill(first["victim"], signal.SIGKILL)
    seen += read_until(proc, lambda out: "victim   | victim-up" in out)
    output = stop(proc, seen)
    assert "victim was killed by signal 9 after" in output
    assert "restarted victim (restart 1)" in output
    assert output.count("started victim (pid ") == 2
    assert output.count("started sleeper (pid ") == 1
    assert proc.returncode == 0
    restarted = [
        int(line.split("(pid ", 1)[1].split(")", 1)[0])
        for line in output.splitlines()
        if "| started victim (pid " in line
    ]
    assert restarted[0] != restarted[1]
    assert all(not alive(pid) for pid in restarted)
    assert not alive(first["sleeper"])


def test_a_process_that_keeps_dying_is_restarted_with_a_growing_capped_delay() -> None:
    proc = supervise(
        "steady=sleep 120",
        "quitter=sh -c 'echo bye; exit 3'",
        SUPERVISE_BACKOFF_SECONDS="0.05",
        SUPERVISE_BACKOFF_MAX_SECONDS="0.4",
    )
    seen = read_until(proc, lambda out: out.count("quitter  | bye") >= 6)
    output = stop(proc, seen)
    delays = [
        line.split("restarting in ", 1)[1]
        for line in output.splitlines()
        if "quitter exited with status 3 after" in line
    ]
    assert len(delays) >= 5
    assert "quitter keeps exiting within 60s of starting" in output
    assert "restarting it every 0s until it stays up" in output
    assert output.count("started steady (pid ") == 1
    assert proc.returncode == 0
    assert not alive(started_pids(output)["steady"])


def test_an_exited_process_takes_its_own_children_with_it() -> None:
    """What a dead leader leaves behind (a gunicorn or Celery worker) does not outlive it."""
    proc = supervise(
        "leader=sh -c 'sleep 120 & echo orphan=$!; sleep 0.5; exit 1'",
        SUPERVISE_BACKOFF_SECONDS="30",
    )
    seen = read_until(proc, lambda out: "leader exited with status 1" in out)
    orphan = int(seen.split("| orphan=", 1)[1].split()[0])
    output = stop(proc, seen)
    assert gone(orphan), output


def gone(pid: int) -> bool:
    """Whether a process killed elsewhere has ended (its reaping by init is not instant)."""
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return not alive(pid)


def test_supervisor_stops_everything_on_sigterm_and_exits_zero() -> None:
    marker = "ready-" + str(os.getpid())
    proc = supervise("one=sleep 120", f"two=sh -c 'echo {marker}; exec sleep 120'")
    output = stop(proc, read_until(proc, lambda out: marker in out))
    assert proc.returncode == 0
    assert "stopping all processes" in output
    assert all(not alive(pid) for pid in started_pids(output).values())
