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
    assert "refused" in text
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
