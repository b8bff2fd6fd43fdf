"""The console's dashboard: the admin's landing page (console/dashboard.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from core.models import AuditEntry
from decisions import store
from decisions.records import CallRecord
from inventory.models import Cluster, SyncState
from inventory.services import nodes_apply
from policies.assignment_services import label_assignment_create, label_assignment_update
from policies.compile import forget
from policies.models import LabelAssignment, Policy
from policies.services import policy_create, policy_update
from portal.demo import demo_seed
from tests.factories import make_cluster, node_object

pytestmark = pytest.mark.django_db

TYPO = {
    "name": "payments-gpu",
    "pod_selector": {"namespaces": ["payments"]},
    "filter_rules": [
        {"kind": "label", "key": "nvidia.com/gpu.prodcut", "operator": "In", "values": ["A100"]}
    ],
}


@pytest.fixture
def viewer_client() -> Client:
    user = User.objects.create_user("viewer-user", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client


def decisions(count: int, *, refused_every: int = 3) -> None:
    """``count`` filter calls written through the decision log's store (rows and rollups)."""
    now = timezone.now()
    store.write_batch(
        [
            (
                (now - timedelta(minutes=i % 1400)).timestamp(),
                CallRecord(
                    verb="filter",
                    cluster="demo",
                    mode="names",
                    pod_namespace="ml",
                    pod_name=f"p{i}",
                    pod_uid=f"u{i}",
                    nodes_in=3,
                    nodes_out=0 if i % refused_every == 0 else 2,
                    duration_seconds=0.001,
                    snapshot_revision=1,
                    rejected=[("n1", "ml-on-gpu/ml pods need an A100 node")],
                ),
            )
            for i in range(count)
        ]
    )


def test_the_landing_page_answers_the_operator_questions(admin_client: Client) -> None:
    demo_seed()
    decisions(30)
    page = admin_client.get("/admin/")
    assert page.status_code == 200
    html = page.content.decode()
    # Clusters: the demo's inventory, fresh from its upload, ready / total.
    assert "demo" in html
    assert '<span class="console-badge ok">ok</span>' in html
    assert "last successful import" in html
    assert "59 / 60" in html
    # Policies by mode and the last changes.
    assert "enforce" in html
    assert "create policy" in html or "create</" in html
    # Traffic: pods refused everywhere (every third of 30), linked to those decisions.
    assert "<strong>10</strong> extender <code>filter</code> calls left a pod 0 nodes" in html
    assert "outcome=no-nodes" in html
    assert "ml-on-gpu/ml pods need an A100 node" in html
    assert "<svg" in html
    # The app list follows, accounts last.
    assert html.index("Decisions") < html.index("Groups")


def test_a_typo_in_a_label_key_is_a_problem_until_fixed(admin_client: Client) -> None:
    demo_seed()
    policy_create(actor=None, data=TYPO)
    html = admin_client.get("/admin/").content.decode()
    assert "label key &#x27;nvidia.com/gpu.prodcut&#x27; is on no node" in html
    fixed = {**TYPO, "filter_rules": [{**TYPO["filter_rules"][0], "key": "nvidia.com/gpu.product"}]}
    policy_update(actor=None, policy=Policy.objects.get(name="payments-gpu"), data=fixed)
    html = admin_client.get("/admin/").content.decode()
    assert "is on no node" not in html
    assert "Policy payments-gpu" not in html


ASSIGNMENT_TYPO = {
    "name": "spot-pool",
    "cluster": "demo",
    "node_selector": {
        "match_expressions": [
            {"key": "karpenter.sh/capacity-typ", "operator": "In", "values": ["spot"]}
        ]
    },
    "labels": {"example.com/pool": "spot"},
}


def test_a_label_assignment_that_labels_nothing_is_a_problem(admin_client: Client) -> None:
    demo_seed()
    label_assignment_create(actor=None, data=ASSIGNMENT_TYPO, force=True)
    html = admin_client.get("/admin/").content.decode()
    assert (
        "Label assignment spot-pool: No node of cluster demo carries the label "
        "karpenter.sh/capacity-typ; did you mean karpenter.sh/capacity-type?"
    ) in html
    assert "matches 0 of 60 nodes of cluster demo: this assignment labels nothing" in html
    fixed = {
        **ASSIGNMENT_TYPO,
        "node_selector": {
            "match_expressions": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
            ]
        },
    }
    assignment = LabelAssignment.objects.get(name="spot-pool")
    label_assignment_update(actor=None, assignment=assignment, data=fixed, force=True)
    assert "Label assignment spot-pool" not in admin_client.get("/admin/").content.decode()


def test_the_demo_records_its_import_as_an_upload_does(admin_client: Client) -> None:
    demo_seed()
    cluster = Cluster.objects.get(name="demo")
    assert cluster.sync_state == SyncState.OK
    assert cluster.last_success_at is not None
    assert cluster.nodes_seen == 60
    assert AuditEntry.objects.filter(action="import", object_name="demo").count() == 1
    # The cluster's own page tells the same story as the dashboard.
    page = admin_client.get(f"/admin/inventory/cluster/{cluster.pk}/change/").content.decode()
    assert "never synced" not in page
    assert "last successful import" in page


def test_a_held_or_failing_sync_is_a_problem(admin_client: Client) -> None:
    cluster = make_cluster("prod", source="kubernetes", kubeconfig_path="prod")
    Cluster.objects.filter(pk=cluster.pk).update(
        sync_state=SyncState.HELD, sync_error="held: the list would remove all 4 nodes"
    )
    html = admin_client.get("/admin/").content.decode()
    assert "Cluster prod: held: needs confirmation. Held: the list would remove all 4" in html


def test_a_quarantined_node_is_a_problem_naming_it(admin_client: Client) -> None:
    """A node no column can hold (inventory.storable) is named until its next change stores."""
    cluster = make_cluster("prod")
    hostile = node_object("odd-1", {})
    hostile["status"]["nodeInfo"] = {"bootID": 2**70}
    nodes_apply(cluster=cluster, objects=[hostile, node_object("fine-1", {})], replace=True)
    html = admin_client.get("/admin/").content.decode()
    assert "Cluster prod: node odd-1 is not in the inventory (quarantined:" in html
    assert "beyond 64 bits" in html
    hostile["status"]["nodeInfo"] = {"bootID": "b-1"}
    nodes_apply(cluster=cluster, objects=[hostile], replace=False)
    assert "node odd-1 is not in the inventory" not in admin_client.get("/admin/").content.decode()


def test_the_outcome_filter_lists_pods_refused_everywhere(admin_client: Client) -> None:
    decisions(9)
    page = admin_client.get("/admin/extender/decision/?outcome=no-nodes")
    assert page.status_code == 200
    assert page.content.decode().count('class="field-pod"') == 3


def test_a_viewer_sees_the_dashboard(viewer_client: Client) -> None:
    demo_seed()
    page = viewer_client.get("/admin/")
    assert page.status_code == 200
    assert "59 / 60" in page.content.decode()


def test_queries_are_bounded_whatever_the_data(
    admin_client: Client, django_assert_max_num_queries
) -> None:
    demo_seed()
    decisions(50)
    # 32 for the panels (proposals and held rollouts among them), and a few per cluster with a
    # pod inventory for the Pods card.
    with django_assert_max_num_queries(40) as small:
        admin_client.get("/admin/")
    for n in range(5):
        cluster = make_cluster(f"more-{n}")
        nodes_apply(
            cluster=cluster,
            objects=[node_object(f"n{n}-{i}", {"zone": "a"}) for i in range(40)],
            replace=True,
        )
        policy_create(actor=None, data={**TYPO, "name": f"typo-{n}", "cluster": f"more-{n}"})
        label_assignment_create(
            actor=None,
            data={**ASSIGNMENT_TYPO, "name": f"typo-{n}", "cluster": f"more-{n}"},
            force=True,
        )
    decisions(500)
    with django_assert_max_num_queries(len(small.captured_queries)):
        admin_client.get("/admin/")


def test_a_failing_expectation_is_a_problem_and_counted(admin_client: Client) -> None:
    from policies.expectations import expectation_create

    demo_seed()
    for name, selector in (("ml-on-a100", "gpu-a100-*"), ("ml-on-general", "*-general-*")):
        expectation_create(
            actor=None,
            data={
                "name": name,
                "kind": "can_land",
                "pod": {"namespace": "ml"},
                "node_selector": {"node_names": [f"demo-{selector}"]},
            },
        )
    html = admin_client.get("/admin/").content.decode()
    assert "Expectation ml-on-general fails in demo" in html
    assert "Expectation ml-on-a100" not in html
    assert "<strong>1</strong> failing" in html


def test_every_admin_page_names_the_portals_favicon(admin_client: Client) -> None:
    from django.contrib.staticfiles import finders

    html = admin_client.get("/admin/").content.decode()
    assert 'rel="icon" type="image/svg+xml"' in html
    assert finders.find("portal/favicon.svg")


def test_the_traffic_panel_shows_what_the_decision_log_kept_and_shed(admin_client) -> None:
    from decisions.models import DecisionShed

    hour = int(timezone.now().timestamp()) // 3600 * 3600
    DecisionShed.objects.add_counts(
        [
            (hour, "demo", 120, 30, 2, 1),
            (hour, "other", 5, 0, 0, 0),
            (hour - 3 * 86400, "demo", 9, 9, 9, 9),
        ]
    )
    html = admin_client.get("/admin/").content.decode()
    assert "<strong>125</strong> recorded" in html
    assert "<strong>30</strong> clean passes not recorded" in html
    assert "<strong>2</strong> rejecting decisions lost" in html
    assert "<strong>1</strong> refused by the database" in html


def test_a_rule_sampling_would_hide_is_a_problem(admin_client: Client) -> None:
    """2 of 1,000 nodes carry the license a policy needs: kube-scheduler's default sample of
    420 feasible nodes holds neither in a third of its attempts."""
    forget()
    cluster = make_cluster("big")

    def licensed(count: int) -> None:
        nodes_apply(
            cluster=cluster,
            objects=[
                node_object(f"n-{i:04d}", {"example.com/license": "yes"} if i < count else {})
                for i in range(1000)
            ],
            replace=True,
        )

    licensed(2)
    policy = policy_create(
        actor=None,
        data={
            "name": "licensed",
            "pod_selector": {"namespaces": ["batch"]},
            "filter_rules": [{"kind": "label", "key": "example.com/license", "operator": "Exists"}],
        },
    )
    page = admin_client.get("/admin/").content.decode()
    assert "policy licensed passes 2 of 1000 nodes of cluster big" in page
    assert "percentageOfNodesToScore: 100" in page
    assert f"/admin/policies/policy/{policy.pk}/change/" in page
    # 30 licensed nodes: a sample misses them all in 0.58 ** 30 of attempts; no problem.
    licensed(30)
    assert "passes 30 of 1000" not in admin_client.get("/admin/").content.decode()
    forget()


def test_held_pods_and_rule_breakers_are_problems_linked_to_their_pages(
    admin_client: Client,
) -> None:
    demo_seed()
    html = admin_client.get("/admin/").content.decode()
    problems = html[html.index('id="problems-title"') : html.index('id="clusters-title"')]
    assert "No problems" not in problems
    assert "Cluster demo: 5 Pending pods held by the portal&#x27;s policies" in problems
    assert '<a href="/admin/pending/?cluster=demo">see the Pending pods</a>' in problems
    assert "Cluster demo: 1 running pod breaks a rule" in problems
    assert '<a href="/admin/violations/?cluster=demo">see the pods that break a rule</a>' in (
        problems
    )


def test_the_own_schedulers_attempts_are_not_counted_as_extender_calls(
    admin_client: Client,
) -> None:
    demo_seed()
    decisions(6)  # 2 of 6 extender filter calls leave 0 nodes
    now = timezone.now().timestamp()
    store.write_batch(
        [
            (
                now,
                CallRecord(
                    verb="schedule",
                    cluster="demo",
                    mode="names",
                    pod_namespace="ml",
                    pod_name=f"s{i}",
                    pod_uid=f"s{i}",
                    nodes_in=3,
                    nodes_out=0,
                    duration_seconds=0.001,
                    snapshot_revision=1,
                    rejected=[("n1", "ml-on-gpu/ml pods need an A100 node")],
                ),
            )
            for i in range(4)
        ]
    )
    html = admin_client.get("/admin/").content.decode()
    assert "<strong>6</strong> extender calls" in html
    assert "<strong>2</strong> extender <code>filter</code> calls left a pod 0 nodes" in html
    assert "<strong>4</strong> of the own scheduler's 4 attempts found no node" in html
    assert "outcome=no-nodes&amp;verb=schedule" in html


def test_a_sync_error_is_a_sentence_that_says_what_to_do(admin_client: Client) -> None:
    from inventory import sync_status
    from tests.factories import make_cluster

    cluster = make_cluster("prod")
    sync_status.failed(
        cluster.pk,
        "cannot reach the API server: HTTPSConnectionPool(host='10.0.0.1', port=6443): Max "
        "retries exceeded with url: /api/v1/nodes?limit=500 (Caused by NewConnectionError("
        "'<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new "
        "connection: [Errno 111] Connection refused'))",
    )
    html = admin_client.get("/admin/").content.decode()
    assert (
        "The portal cannot reach the cluster&#x27;s API server. Check that it is running and "
        "that the kubeconfig&#x27;s server address is right" in html
    )
    assert "HTTPSConnectionPool" not in html
