"""The explain page beside the portal's verdict: kube-scheduler's own checks (console/fit.py,
judged by engine.fit), scores with ties called ties, rejected nodes grouped by reason,
globs in "Only these nodes", and an expectation saved from the pod as it was explained."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
import yaml
from django.test import Client

from portal.demo import demo_seed

pytestmark = pytest.mark.django_db
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"


@pytest.fixture(autouse=True)
def demo(db) -> None:
    demo_seed()


def explain(client: Client, **fields: str) -> str:
    response = client.get(f"/admin/explain/?{urlencode({'cluster': 'demo', **fields})}")
    assert response.status_code == 200
    return response.content.decode()


def manifest(*, namespace: str | None = "ml", spec: dict | None = None) -> str:
    metadata: dict = {"name": "trainer-0", "labels": {"app": "trainer", "team": "vision"}}
    if namespace is not None:
        metadata["namespace"] = namespace
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
    pod["spec"] = spec or {"containers": [{"name": "main", "image": "trainer"}]}
    return yaml.safe_dump(pod)


def section(html: str, ident: str) -> str:
    start = html.index(f'id="{ident}"')
    return html[start : html.index("</section>", start)]


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_the_taint_is_named_apart_from_the_portals_verdict(admin_client: Client) -> None:
    html = explain(admin_client, namespace="ml")
    # The portal's own verdict is unchanged: 3 A100 nodes pass its policies.
    assert "<strong>3</strong> of <strong>60</strong> nodes pass" in section(html, "summary-title")
    scheduler = section(html, "explain-scheduler")
    assert "kube-scheduler would also reject: 3 node(s) had untolerated taint(s)" in scheduler
    assert f"untolerated taint {GPU_TAINT}" in scheduler
    assert "no node would take this pod" in scheduler
    message = re.search(r'<q id="scheduler-message">([^<]*)</q>', scheduler)
    assert message is not None
    assert message.group(1).startswith("0/60 nodes are available: ")
    assert "49 ml-on-gpu/ml pods need an A100 node" in message.group(1)
    # And it says what it cannot judge; the demo's pods on each node are counted.
    assert "Pods already on each node are not counted" not in scheduler
    assert "pod topology spread" in scheduler
    assert "This pod has no spec" in scheduler


def test_a_pod_that_tolerates_the_taint_lands(admin_client: Client) -> None:
    spec = {"tolerations": [GPU_TOLERATION], "containers": [{"name": "m", "image": "t"}]}
    html = explain(admin_client, manifest=manifest(spec=spec))
    scheduler = section(html, "explain-scheduler")
    assert "basic checks pass every node the portal passes" in scheduler
    assert "Together: <strong>3</strong> of 60 nodes would take this pod." in scheduler


def test_requests_and_node_selection_are_judged(admin_client: Client) -> None:
    spec = {
        "tolerations": [GPU_TOLERATION],
        # A label the portal assigns (gpu-tier) but never pushed: kube-scheduler cannot see it.
        "nodeSelector": {"portal.example.com/tier": "gpu"},
        "containers": [{"name": "m", "image": "t", "resources": {"requests": {"cpu": "200"}}}],
    }
    scheduler = section(explain(admin_client, manifest=manifest(spec=spec)), "explain-scheduler")
    assert "kube-scheduler would also reject: 3 node(s) didn&#x27;t match Pod&#x27;s node" in (
        scheduler
    )
    assert "nodeSelector portal.example.com/tier=gpu (node lacks the label)" in scheduler
    spec["nodeSelector"] = {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    scheduler = section(explain(admin_client, manifest=manifest(spec=spec)), "explain-scheduler")
    assert "kube-scheduler would also reject: 3 Insufficient cpu" in scheduler
    assert re.search(r"cpu: requests 200, \d+m free of 95690m", scheduler)
    assert "The pod requests cpu 200" in scheduler


def test_without_a_listed_pod_inventory_the_pods_on_nodes_are_said_to_be_uncounted(
    admin_client: Client,
) -> None:
    from inventory.models import PodInventory

    spec = {"tolerations": [GPU_TOLERATION], "containers": [{"name": "m", "image": "t"}]}
    counted = section(explain(admin_client, manifest=manifest(spec=spec)), "explain-scheduler")
    assert "Pods already on each node are not counted" not in counted
    PodInventory.objects.filter(cluster__name="demo").update(listed_at=None)
    uncounted = section(explain(admin_client, manifest=manifest(spec=spec)), "explain-scheduler")
    assert "Pods already on each node are not counted" in uncounted


def test_ties_are_called_ties_and_the_best_are_named(admin_client: Client) -> None:
    # The three A100 nodes have the same raw score: the extender gives each 0.
    tied = section(explain(admin_client, namespace="ml"), "summary-title")
    assert "all 3 passing nodes tie" in tied
    assert "best score" not in tied
    ranked = section(explain(admin_client, namespace="web"), "summary-title")
    assert "best score 10: " in ranked
    assert "tie (the extender" not in ranked


def test_passing_nodes_come_first_and_rejected_ones_are_grouped(admin_client: Client) -> None:
    html = explain(admin_client, namespace="ml")
    nodes = section(html, "nodes-title")
    assert nodes.index('id="explain-passing"') < nodes.index('class="explain-group"')
    groups = re.findall(r'<details class="explain-group">\s*<summary>(.*?)</summary>', nodes, re.S)
    assert len(groups) == 1
    assert "<strong>57 nodes</strong>" in groups[0]
    assert "ml-on-gpu/ml pods need an A100 node" in groups[0]
    # The 57 rows are still there, folded inside their group.
    assert nodes.count('<tr class="rejected">') == 57


def test_only_these_nodes_takes_globs(admin_client: Client) -> None:
    html = explain(admin_client, namespace="ml", nodes="demo-gpu-*")
    assert "<strong>3</strong> of <strong>9</strong> nodes pass" in html
    mixed = explain(admin_client, namespace="ml", nodes="demo-gpu-a100-1?-01\nghost-node")
    assert "<strong>3</strong> of <strong>4</strong> nodes pass" in mixed
    assert "not in the portal&#x27;s inventory" in mixed
    nothing = explain(admin_client, namespace="ml", nodes="gpu-*")
    assert "nodes: gpu-* matches no node of the cluster." in nothing
    reversed_range = explain(admin_client, namespace="ml", nodes="demo-[z-a]*")
    assert "nodes: demo-[z-a]*: reversed range" in reversed_range


def save_link(html: str) -> str:
    link = re.search(r'href="([^"]*expectation/add/\?[^"]*)"', html)
    assert link, "no 'Save as an expectation' link"
    return link.group(1).replace("&amp;", "&")


def test_an_expectation_from_a_manifest_keeps_its_namespace_and_labels(
    admin_client: Client,
) -> None:
    # The form's own fields say otherwise: the manifest wins, and so does its pod.
    html = explain(
        admin_client, namespace="web", labels="app=web", manifest=manifest(), nodes="demo-gpu-*"
    )
    form = admin_client.get(save_link(html)).context["adminform"].form
    assert form["namespace"].value() == "ml"
    assert form["pod_labels"].value() == "app=trainer\nteam=vision"
    assert form["node_names"].value() == "demo-gpu-*"
    assert form["kind"].value() == "can_land"
    nowhere = explain(admin_client, namespace="ml", nodes="demo-general-*")
    assert admin_client.get(save_link(nowhere)).context["adminform"].form["kind"].value() == (
        "never_lands"
    )


def test_a_manifest_without_a_namespace_takes_the_forms(admin_client: Client) -> None:
    html = explain(admin_client, namespace="ml", manifest=manifest(namespace=None))
    assert "<strong>3</strong> of <strong>60</strong> nodes pass" in html
    form = admin_client.get(save_link(html)).context["adminform"].form
    assert form["namespace"].value() == "ml"


def test_required_node_affinity_is_judged_on_the_labels_nodes_carry(admin_client: Client) -> None:
    arm = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    spec = {
        "tolerations": [GPU_TOLERATION],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [arm]}]
                }
            }
        },
        "containers": [{"name": "m", "image": "t"}],
    }
    html = explain(admin_client, manifest=manifest(spec=spec))
    scheduler = section(html, "explain-scheduler")
    # The portal passes the three A100 nodes (amd64): kube-scheduler's affinity rejects them.
    assert "kube-scheduler would also reject: 3 node(s) didn&#x27;t match Pod&#x27;s node" in (
        scheduler
    )
    assert "required node affinity: no term matches (kubernetes.io/arch In [arm64])" in scheduler
    # 15 arm64 nodes fit kube-scheduler (their rows say so), though the portal rejects them.
    assert html.count('<span class="verdict-pass">fits</span>') == 15


def stored_pod(name: str, spec: dict) -> None:
    from inventory.models import Cluster
    from inventory.pod_records import pod_record
    from inventory.pod_services import pods_apply

    pod = {
        "metadata": {"namespace": "ml", "name": name, "labels": {"app": "trainer"}},
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    record = pod_record(pod)
    assert record is not None
    pods_apply(cluster=Cluster.objects.get(name="demo"), records=[record])


def test_a_pod_from_the_inventory_is_judged_as_stored(admin_client: Client) -> None:
    """The Pending page's explain link judges the pod's own requests (init containers and
    overhead counted), tolerations and selection, not only its labels."""
    stored_pod(
        "big-0",
        {
            "tolerations": [GPU_TOLERATION],
            "overhead": {"cpu": "1"},
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "96"}}}],
            "containers": [{"name": "m", "resources": {"requests": {"cpu": "2"}}}],
        },
    )
    pending = admin_client.get("/admin/pending/?cluster=demo").content.decode()
    link = re.search(r'href="(/admin/explain/\?[^"]*name=big-0[^"]*)"', pending)
    assert link is not None
    html = admin_client.get(link.group(1).replace("&amp;", "&")).content.decode()
    # The portal's verdict is its own: the 3 A100 nodes pass its policies.
    assert "<strong>3</strong> of <strong>60</strong> nodes pass" in section(html, "summary-title")
    scheduler = section(html, "explain-scheduler")
    assert "kube-scheduler would also reject: 3 Insufficient cpu" in scheduler
    assert "Together: no node would take this pod" in scheduler
    assert "The pod requests cpu 97" in scheduler
    assert "as stored in the inventory" in scheduler
    assert "This pod has no spec" not in scheduler


def test_a_stored_pod_that_is_gone_is_said_so(admin_client: Client) -> None:
    html = explain(admin_client, namespace="ml", name="nobody", stored="1")
    assert "No pod ml/nobody in the inventory of cluster demo" in html


def test_the_api_explains_a_stored_pod_apart_from_the_portals_verdict(admin_client: Client) -> None:
    stored_pod(
        "big-1",
        {
            "tolerations": [GPU_TOLERATION],
            "overhead": {"cpu": "1"},
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "96"}}}],
            "containers": [{"name": "m", "resources": {"requests": {"cpu": "2"}}}],
        },
    )
    response = admin_client.get("/api/v1/clusters/demo/pods/ml/big-1/explain/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["portal"]["passed"] == 3
    assert body["kube_scheduler"]["also_rejects"] == 3
    assert body["kube_scheduler"]["landing"] == 0
    assert body["kube_scheduler"]["requests"] == {"cpu": "97"}
    assert body["kube_scheduler"]["message"].startswith("0/60 nodes are available:")
    assert body["kube_scheduler"]["reasons"][0]["reason"] == "Insufficient cpu"
    gone = admin_client.get("/api/v1/clusters/demo/pods/ml/nobody/explain/")
    assert gone.status_code == 404
    assert "No pod ml/nobody in the inventory of cluster demo" in gone.json()["detail"]
    assert admin_client.get("/api/v1/clusters/nope/pods/ml/x/explain/").status_code == 404


def test_a_nul_in_a_stored_pods_name_is_refused_before_any_query(admin_client: Client) -> None:
    html = explain(admin_client, namespace="ml", name="a\x00b", stored="1")
    assert "Must not contain NUL characters." in html
    response = admin_client.get("/api/v1/clusters/demo/pods/ml/a%00b/explain/")
    assert response.status_code == 400
