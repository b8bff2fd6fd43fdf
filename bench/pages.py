"""The operator pages at production size: 5,000 nodes, 100 policies, 20 label assignments and
100,000 decisions (target: each answers in under 300 ms, p50 of 5 requests after one warm-up).

Builds the data in a scratch database — ``BENCH_DATABASE_URL``, default a SQLite file in a
temporary directory — through the services (nodes, policies) and bulk inserts (decisions), then
requests every console and admin page with Django's test client. Writes bench/results/pages.md.

    .venv/bin/python bench/pages.py
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "pages.md"
NODES, POLICIES, DECISIONS, RUNS = 5000, 100, 100_000, 5
ASSIGNMENTS = 20  # label assignments: the dashboard checks each selector over the nodes
TARGET_MS = 300
# A pod with requests, a toleration and a node selector: explain judges kube-scheduler's fit too.
MANIFEST = """
metadata: {name: bench, namespace: team-1}
spec:
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: dedicated, operator: Exists}]
  containers: [{name: main, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
"""


def setup_django(var: str) -> str:
    url = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{var}/bench.sqlite3"
    os.environ.update(DEBUG="true", PORTAL_VAR_DIR=var, DATABASE_URL=url)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not url.startswith("sqlite"):
        call_command("flush", "--no-input", verbosity=0)
    return url.split(":", 1)[0]


def seed() -> dict:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from extender.models import Decision
    from inventory.services import cluster_create, nodes_apply
    from policies.services import label_assignment_create, policy_create
    from tests.support.nodes import ZONES, realistic_node

    cluster = cluster_create(actor=None, data={"name": "prod", "is_default": True})
    nodes_apply(
        cluster=cluster,
        objects=[realistic_node(i, slim=True) for i in range(NODES)],
        replace=True,
    )
    for i in range(ASSIGNMENTS):
        zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONES[i % 3]]}
        label_assignment_create(
            actor=None,
            data={
                "name": f"assignment-{i:02d}",
                "cluster": "prod",
                "node_selector": {"match_expressions": [zone]},
                "labels": {f"example.com/pool-{i}": "yes"},
            },
        )
    rng = random.Random(5)
    for i in range(POLICIES):
        policy_create(
            actor=None,
            data={
                "name": f"policy-{i:03d}",
                "mode": "dry-run" if i % 4 == 0 else "enforce",
                "pod_selector": {"namespaces": [f"team-{i % 20}"]},
                "filter_rules": [
                    {
                        "kind": "label",
                        "key": "topology.kubernetes.io/zone",
                        "operator": "In",
                        "values": [f"zone-{'abc'[i % 3]}"],
                    }
                ],
                "weight_rules": [{"kind": "resource", "resource": "cpu", "weight": 5}],
            },
        )
    now = timezone.now()
    rows = []
    for i in range(DECISIONS):
        node = f"node-{rng.randrange(NODES):05d}"
        rows.append(
            Decision(
                created_at=now - timedelta(seconds=rng.randrange(86400)),
                cluster="prod",
                verb="filter",
                mode="names",
                pod_namespace=f"team-{i % 20}",
                pod_name=f"pod-{i}",
                pod_uid=f"uid-{i}",
                nodes_in=NODES,
                nodes_out=rng.randrange(NODES),
                rejected=[[node, f"policy-{i % POLICIES:03d}/zone"]],
                rejected_count=rng.randrange(NODES),
                dry_run_rejected=[[node, "policy-000/zone"]] if i % 10 == 0 else [],
                top_scores=[[node, 10]],
                duration_ms=1.0,
                policy_versions={},
                snapshot_revision=1,
            )
        )
    Decision.objects.bulk_create(rows, batch_size=5000)
    User.objects.create_superuser("bench", password="bench-password")
    return {"node": "node-00042"}


def measure(client, path: str) -> float:
    client.get(path)  # warm-up: the snapshot is built once per revision
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as var:
        engine = setup_django(var)
        started = time.perf_counter()
        data = seed()
        seeded = time.perf_counter() - started
        from django.contrib.auth.models import User
        from django.test import Client

        from policies.models import Policy

        client = Client(HTTP_HOST="localhost")
        client.force_login(User.objects.get(username="bench"))
        policy = Policy.objects.get(name="policy-001")
        pages = {
            "dashboard": "/admin/",
            "explain": "/admin/explain/?cluster=prod&namespace=team-1",
            "explain, a manifest": "/admin/explain/?"
            + urlencode({"cluster": "prod", "manifest": MANIFEST}),
            "decisions": "/admin/extender/decision/",
            "decisions by node": f"/admin/extender/decision/?node={data['node']}",
            "policies": "/admin/policies/policy/",
            "policy editor": f"/admin/policies/policy/{policy.pk}/change/",
            "dry-run report": "/admin/dry-run/policy-000/",
            "nodes": "/admin/inventory/node/",
            "expectations": "/admin/policies/expectation/",
        }
        results = {name: measure(client, path) for name, path in pages.items()}
    lines = [
        "# Operator pages at production size",
        "",
        f"{NODES} nodes, {POLICIES} policies, {ASSIGNMENTS} label assignments, {DECISIONS} "
        f"decisions on {engine}; p50 of {RUNS} "
        f"requests after a warm-up, Django's test client in-process (seeding took "
        f"{seeded:.0f} s). Produced by `bench/pages.py`.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}.",
        "",
        "| page | p50 | target |",
        "|---|---:|---:|",
    ]
    for name, value in results.items():
        mark = "" if value <= TARGET_MS else " (over)"
        lines.append(f"| {name} | {value:.0f} ms{mark} | <= {TARGET_MS} ms |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
