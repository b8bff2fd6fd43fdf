"""The Pending and Violations pages: grouped by the portal's reason, readable by viewers, and
an eviction that only evictors (not editors as such) can ask for, shown and confirmed before
anything is sent, never in a protected namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.test import Client

from inventory.models import Cluster, ClusterSource
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from policies.compile import forget
from policies.models import Policy
from portal.demo import demo_seed
from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.support.fake_kube import FakeKubeServer
from tests.support.pods import realistic_pod

pytestmark = pytest.mark.django_db


def client_for(role: str, *grants: str) -> Client:
    user = User.objects.create_user(f"{role}-x", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=role), *Group.objects.filter(name__in=grants))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def demo() -> Iterator[None]:
    forget()
    demo_seed()
    yield
    forget()


@pytest.mark.usefixtures("demo")
def test_pending_page_groups_held_pods_by_reason() -> None:
    html = client_for("viewer").get("/admin/pending/?cluster=demo").content.decode()
    assert "demo: 8 Pending pods" in html
    assert "<strong>5</strong> held by the portal" in html
    assert (
        '<span class="console-badge bad">5</span> inference-on-h100/inference pods need an '
        "H100 node" in html
    )
    assert "Open policy inference-on-h100" in html
    assert "/admin/explain/?cluster=demo&amp;namespace=inference&amp;name=llm-server-" in html
    assert "labels=app%3Dllm-server" in html
    assert "Pending for kube-scheduler's own reasons (3)" in html
    assert "3 Insufficient nvidia.com/gpu" in html
    assert "A static cluster: no API server to nudge" in html


@pytest.mark.usefixtures("demo")
def test_violations_page_for_a_viewer_offers_no_eviction() -> None:
    viewer = client_for("viewer")
    html = viewer.get("/admin/violations/?cluster=demo").content.decode()
    assert "demo: 1 running pod on nodes the enforce policies now reject" in html
    assert "ml/train-legacy-" in html
    assert "ml-on-gpu/ml pods need an A100 node" in html
    assert 'name="pod"' not in html
    assert viewer.post("/admin/violations/?cluster=demo", {"pod": "ml/x"}).status_code == 403


@pytest.mark.usefixtures("demo")
def test_the_pages_need_the_pod_view_permission() -> None:
    user = User.objects.create_user("staff-only", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    assert client.get("/admin/pending/").status_code == 403
    assert client.get("/admin/violations/").status_code == 403


@pytest.fixture
def kube(tmp_path: Path, settings: Any) -> Iterator[tuple[FakeKubeServer, Cluster]]:
    forget()
    cache.clear()
    settings.KUBECONFIG_DIR = tmp_path  # clusters name a kubeconfig in it, as in production
    with FakeKubeServer() as server:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        cluster = make_cluster(
            "prod",
            source=ClusterSource.KUBERNETES,
            kubeconfig_path="kubeconfig",
            kubeconfig_context="fake",
        )
        load_nodes(cluster, [node_object("gpu-1", {"nvidia.com/gpu.product": "T4"})])
        make_policy()  # ml pods only on A100 nodes
        yield server, cluster
    forget()


def test_eviction_is_shown_confirmed_and_respects_a_budget(
    kube: tuple[FakeKubeServer, Cluster], settings
) -> None:
    settings.EVICTION_INTERVAL_SECONDS = 0
    server, cluster = kube
    pods = [
        server.add_pod(realistic_pod(i, node="gpu-1", namespace="ml", app="train", slim=True))
        for i in range(3)
    ]
    pods_apply(cluster=cluster, records=[pod_record(p) for p in pods], replace=True)  # type: ignore[misc]
    server.add_disruption_budget("ml", "train", {"app": "train"}, min_available=3)
    editor = client_for("editor", "evictor")
    page = editor.get("/admin/violations/?cluster=prod").content.decode()
    assert page.count('name="pod"') == 3
    chosen = f"ml/{pods[0]['metadata']['name']}"
    confirm = editor.post("/admin/violations/?cluster=prod", {"cluster": "prod", "pod": [chosen]})
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert "Evict these pods?" in html
    assert chosen in html
    assert "PodDisruptionBudget" in html
    assert server.evictions == []  # shown, nothing sent yet
    done = editor.post(
        "/admin/violations/?cluster=prod",
        {"cluster": "prod", "pod": [chosen], "confirm": "yes"},
        follow=True,
    )
    text = done.content.decode()
    assert "0 of 1 pods evicted." in text
    assert f"Pod {chosen} refused: " in text
    assert "Ml/" not in text  # the admin capitalises a message's first letter
    assert "needs 3 healthy pods and has 3 currently" in text
    assert [e.code for e in server.evictions] == [429]
    assert len(server.pods()) == 3


@pytest.mark.usefixtures("demo")
def test_dashboard_card_counts_held_pods_and_violations() -> None:
    html = client_for("viewer").get("/admin/").content.decode()
    assert '<th scope="row">demo</th>' in html
    assert "/admin/pending/?cluster=demo" in html
    assert '8 (<span class="console-bad">5 held</span>)' in html
    assert '/admin/violations/?cluster=demo"><span class="console-bad">1</span>' in html


@pytest.mark.usefixtures("demo")
def test_node_page_lists_its_pods_and_what_they_request() -> None:
    from inventory.models import Node

    node = Node.objects.get(name="demo-gpu-a100-1a-01")
    html = client_for("viewer").get(f"/admin/inventory/node/{node.pk}/change/").content.decode()
    assert "Pods on this node" in html
    assert "ml/train-" in html
    assert "nvidia.com/gpu 8 of 8" in html
    assert "1 pods;" in html


def test_an_editor_cannot_evict_unless_granted(kube: tuple[FakeKubeServer, Cluster]) -> None:
    """Editing policies does not imply evicting: the page offers nothing and a POST is 403."""
    server, cluster = kube
    pod = server.add_pod(realistic_pod(1, node="gpu-1", namespace="ml", app="train", slim=True))
    pods_apply(cluster=cluster, records=[pod_record(pod)], replace=True)  # type: ignore[misc]
    editor = client_for("editor")
    page = editor.get("/admin/violations/?cluster=prod")
    assert page.status_code == 200
    assert 'name="pod"' not in page.content.decode()
    chosen = f"ml/{pod['metadata']['name']}"
    refused = editor.post(
        "/admin/violations/?cluster=prod", {"cluster": "prod", "pod": [chosen], "confirm": "yes"}
    )
    assert refused.status_code == 403
    assert server.evictions == []


def test_protected_namespaces_offer_no_eviction(
    kube: tuple[FakeKubeServer, Cluster], settings
) -> None:
    settings.EVICTION_INTERVAL_SECONDS = 0
    server, cluster = kube
    make_policy(name="everywhere", pod_selector={})  # every namespace, kube-system too
    pods = [
        server.add_pod(realistic_pod(i, node="gpu-1", namespace=ns, app="train", slim=True))
        for i, ns in enumerate(["ml", "kube-system"])
    ]
    pods_apply(cluster=cluster, records=[pod_record(p) for p in pods], replace=True)  # type: ignore[misc]
    admin = client_for("admin")
    html = admin.get("/admin/violations/?cluster=prod").content.decode()
    system = f"kube-system/{pods[1]['metadata']['name']}"
    assert system in html
    assert f'value="{system}"' not in html
    assert f'value="ml/{pods[0]["metadata"]["name"]}"' in html
    done = admin.post(
        "/admin/violations/?cluster=prod",
        {"cluster": "prod", "pod": [system], "confirm": "yes"},
        follow=True,
    )
    assert "0 of 1 pods evicted." in done.content.decode()
    assert "namespace kube-system is protected" in done.content.decode()
    assert server.evictions == []


def test_pages_say_how_current_they_are_and_evict_waits_for_the_api(
    kube: tuple[FakeKubeServer, Cluster], settings
) -> None:
    """The pod pages show the inventory's age and the connection; when the watch lost the API
    server, a banner says the page may be out of date and Evict is off with the reason."""
    from inventory.pod_services import pod_inventory_failed

    server, cluster = kube
    pods = [server.add_pod(realistic_pod(0, node="gpu-1", namespace="ml", app="train", slim=True))]
    pods_apply(cluster=cluster, records=[pod_record(p) for p in pods], replace=True)  # type: ignore[misc]
    from inventory.pod_services import pod_inventory_listed

    pod_inventory_listed(cluster, resource_version="1", seen=1)
    editor = client_for("editor", "evictor")
    html = editor.get("/admin/violations/?cluster=prod").content.decode()
    assert '<span class="console-badge ok">connected</span> Data as of' in html
    assert "stale-banner" not in html
    assert 'value="Evict the chosen pods…">' in html

    pod_inventory_failed(
        cluster,
        "cannot reach the API server: HTTPSConnectionPool(host='127.0.0.1', port=6443): Max "
        "retries exceeded with url: /api/v1/pods (Caused by NewConnectionError: [Errno 111] "
        "Connection refused)",
    )
    for path in ("/admin/violations/?cluster=prod", "/admin/pending/?cluster=prod"):
        html = editor.get(path).content.decode()
        assert "API unreachable" in html
        assert "This page may not show the cluster as it is now." in html
        assert "The portal cannot reach the cluster&#x27;s API server." in html
    html = editor.get("/admin/violations/?cluster=prod").content.decode()
    assert 'value="Evict the chosen pods…" disabled' in html
    assert "Evict is off: Evicting needs the cluster&#x27;s API server, and the portal" in html
    chosen = f"ml/{pods[0]['metadata']['name']}"
    refused = editor.post(
        "/admin/violations/?cluster=prod", {"cluster": "prod", "pod": [chosen]}, follow=True
    )
    assert "Evicting needs the cluster&#x27;s API server, and" in refused.content.decode()
    assert server.evictions == []


def test_an_old_inventory_is_called_stale(kube: tuple[FakeKubeServer, Cluster]) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from inventory.models import PodInventory

    _, cluster = kube
    old = timezone.now() - timedelta(hours=2)
    PodInventory.objects.update_or_create(
        cluster=cluster, defaults={"listed_at": old, "current_at": old}
    )
    html = client_for("viewer").get("/admin/pending/?cluster=prod").content.decode()
    assert '<span class="console-badge warn">stale</span>' in html
    assert "Nothing has come from the cluster for 2 h" in html


def test_a_node_page_says_when_its_cluster_cannot_be_reached(
    kube: tuple[FakeKubeServer, Cluster],
) -> None:
    from inventory import sync_status
    from inventory.models import Node

    _, cluster = kube
    node = Node.objects.get(cluster=cluster, name="gpu-1")
    url = f"/admin/inventory/node/{node.pk}/change/"
    viewer = client_for("viewer")
    sync_status.succeeded(cluster.pk, {})
    html = viewer.get(url).content.decode()
    assert "This page may not show the node" not in html
    assert '<span class="console-badge ok">connected</span> as of' in html
    sync_status.failed(cluster.pk, "API server timed out: read timed out")
    html = viewer.get(url).content.decode()
    assert "This page may not show the node as it is now." in html
    assert "The cluster&#x27;s API server did not answer in time." in html


@pytest.mark.usefixtures("demo")
def test_names_are_links_and_violations_are_in_the_header() -> None:
    from inventory.models import Node, Pod
    from policies.models import Policy

    viewer = client_for("viewer")
    html = viewer.get("/admin/violations/?cluster=demo").content.decode()
    assert '<a href="/admin/violations/">Pods that break a rule</a>' in html  # the header
    legacy = Pod.objects.get(cluster__name="demo", name__startswith="train-legacy-")
    node = Node.objects.get(cluster__name="demo", name=legacy.node_name)
    assert f'<a href="/admin/inventory/node/{node.pk}/change/">{node.name}</a>' in html
    policy = Policy.objects.get(name="ml-on-gpu")
    assert f'<a href="/admin/policies/policy/{policy.pk}/change/">ml-on-gpu/' in html
    assert 'title="Explain this pod">ml/train-legacy-' in html
    pending = viewer.get("/admin/pending/?cluster=demo").content.decode()
    assert 'title="Explain this pod">inference/llm-server-' in pending
    assert 'title="Explain this pod">ml/finetune-' in pending


def test_a_forbidden_page_is_in_the_admins_look_and_says_what_to_do() -> None:
    user = User.objects.create_user("staff-only", password="x", is_staff=True)
    client = Client()
    client.force_login(user)
    response = client.get("/admin/pending/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "You may not open this page" in html
    assert "Your account (staff-only) lacks the permission" in html
    assert 'id="site-name"' in html  # the admin's header
    assert "Ask an administrator of the portal for the role you need" in html


def simple_pod(name: str, *, node: str = "", at: str = "", message: str = "", rv: str = "1") -> Any:
    conditions = (
        [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
        if node
        else [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": at,
            }
        ]
    )
    return pod_record(
        {
            "metadata": {
                "namespace": "web",
                "name": name,
                "labels": {"app": "web"},
                "resourceVersion": rv,
            },
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": "Running" if node else "Pending", "conditions": conditions},
        }
    )


def test_the_pending_page_follows_the_requeue(kube: tuple[FakeKubeServer, Cluster]) -> None:
    """After a change frees pods and the portal asks kube-scheduler to retry them, the page
    says how many got placed since and how long it took, and which still wait."""
    from datetime import timedelta

    from django.utils import timezone

    from inventory.pod_services import pod_inventory_listed, pod_inventory_nudged

    _, cluster = kube
    nudged = timezone.now().replace(microsecond=0) - timedelta(seconds=30)
    before = (nudged - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods_apply(
        cluster=cluster,
        records=[
            simple_pod(f"p{i}", at=before, message="0/1 nodes are available.") for i in range(3)
        ],
        replace=True,
    )
    pod_inventory_listed(cluster, resource_version="1", seen=3)
    pod_inventory_nudged(cluster, at=nudged, pods=3, revision=7, node="gpu-1")
    placed = (nudged + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods_apply(
        cluster=cluster,
        records=[simple_pod(f"p{i}", node="gpu-1", at=placed, rv="2") for i in range(2)],
    )
    html = client_for("viewer").get("/admin/pending/?cluster=prod").content.decode()
    assert "Since then: <strong>2 of 3</strong> pods placed in 2 s." in html
    assert "Still waiting (1): web/p2" in html


@pytest.mark.usefixtures("demo")
def test_scheduler_messages_seen_before_a_policy_change_are_marked() -> None:
    from policies.content import policy_content
    from policies.services import policy_update

    viewer = client_for("viewer")
    policy = Policy.objects.get(name="ml-on-gpu")
    content = dict(policy_content(policy))
    content["description"] = "Changed after kube-scheduler wrote its messages."
    policy_update(actor=None, policy=policy, data=content)
    html = viewer.get("/admin/pending/?cluster=demo").content.decode()
    rest = html[html.index('id="rest-title"') :]
    assert rest.count("Seen before the policies last changed") == 3


@pytest.mark.usefixtures("demo")
def test_a_pod_recorded_terminating_is_marked_even_while_verdicts_are_cached(settings) -> None:
    """An eviction records the pod terminating at once; the Violations page marks it so and
    stops counting it even when the verdicts it shows were computed before."""
    from inventory.evict import mark_terminating
    from inventory.models import Pod

    settings.POD_VERDICT_MAX_AGE_SECONDS = 3600  # the cached verdicts are reused
    viewer = client_for("viewer")
    before = viewer.get("/admin/violations/?cluster=demo").content.decode()
    assert "demo: 1 running pod on nodes" in before
    legacy = Pod.objects.get(cluster__name="demo", name__startswith="train-legacy-")
    cluster = legacy.cluster
    assert mark_terminating(cluster, [("ml", legacy.name), ("ml", "no-such-pod")]) == 1
    assert mark_terminating(cluster, [("ml", legacy.name)]) == 0  # already marked
    html = viewer.get("/admin/violations/?cluster=demo").content.decode()
    assert "demo: 0 running pods on nodes the enforce policies now reject, and 1 terminating" in (
        html
    )
    assert "terminating: evicted, being deleted" in html
