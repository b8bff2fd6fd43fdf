"""The pod pages tell the truth, in a real browser: explain from the Pending page judges the
pod as stored; when the cluster's API server is lost the pages say so and Evict is off with the
reason; the dashboard's problems lead to the pods."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from inventory.models import ClusterSource
from inventory.pod_records import pod_record
from inventory.pod_services import pod_inventory_failed, pod_inventory_listed, pods_apply
from policies.compile import forget
from portal.demo import demo_seed
from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)
# Set to a folder to keep a screenshot of each page looked at (1,440 and 390 px wide).
SHOTS = os.environ.get("PORTAL_SCREENSHOTS", "")

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def installation() -> None:
    forget()
    demo_seed()
    big = {
        "metadata": {"namespace": "ml", "name": "big-0", "labels": {"app": "trainer"}},
        "spec": {
            "tolerations": [GPU_TOLERATION],
            "containers": [{"name": "m", "resources": {"requests": {"cpu": "64"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "96"}}}],
        },
        "status": {"phase": "Pending"},
    }
    from inventory.models import Cluster

    pods_apply(cluster=Cluster.objects.get(name="demo"), records=[pod_record(big)])  # type: ignore[list-item]
    kube = make_cluster("kube", source=ClusterSource.KUBERNETES, in_cluster=True)
    load_nodes(kube, [node_object("gpu-1", {"nvidia.com/gpu.product": "T4"})])
    make_policy(cluster="kube")  # ml pods only on A100 nodes: the pod below breaks it
    running = {
        "metadata": {"namespace": "ml", "name": "train-0", "labels": {"app": "train"}},
        "spec": {"nodeName": "gpu-1"},
        "status": {"phase": "Running"},
    }
    pods_apply(cluster=kube, records=[pod_record(running)], replace=True)  # type: ignore[list-item]
    pod_inventory_listed(kube, resource_version="1", seen=1)
    pod_inventory_failed(
        kube,
        "cannot reach the API server: HTTPSConnectionPool(host='10.0.0.1', port=6443): Max "
        "retries exceeded (Caused by NewConnectionError: [Errno 111] Connection refused)",
    )
    User.objects.create_superuser("admin-user", password=PASSWORD)
    yield
    forget()


def shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


@pytest.mark.usefixtures("installation")
def test_the_operators_journey_over_true_pages(browser, live_server) -> None:
    page = log_in(browser, live_server, "admin-user")
    # The dashboard names the held pods and the pods that break a rule, and leads to them.
    problems = page.locator("#console-dashboard .console-problems")
    text = problems.inner_text()
    assert "Cluster demo: " in text
    assert "Pending pods held by the portal's policies" in text
    assert "Cluster kube: 1 running pod breaks a rule" in text
    shot(page, "dashboard-1440")
    page.locator("a", has_text="see the Pending pods").first.click()
    page.wait_for_selector("#pending-counts")
    assert "connected" in page.locator("#freshness").inner_text() or "static" in (
        page.locator("#freshness").inner_text()
    )
    shot(page, "pending-1440")
    # Explain from the Pending page: the pod as stored (97 CPU with its init container).
    page.locator("a[title='Explain this pod']", has_text="ml/big-0").click()
    page.wait_for_selector("#scheduler-summary")
    summary = page.locator("#scheduler-summary").inner_text()
    assert "kube-scheduler would also reject: 3 Insufficient cpu" in summary
    assert "Together: no node would take this pod" in summary
    assert (
        "Judged as stored in the inventory: ml/big-0"
        in page.locator("#scheduler-stored").inner_text()
    )
    shot(page, "explain-stored-1440")
    # The cluster whose API server is lost: a banner, and Evict off with the reason.
    page.goto(f"{live_server.url}/admin/violations/?cluster=kube")
    banner = page.locator("#stale-banner")
    assert banner.is_visible()
    assert "The portal cannot reach the cluster's API server." in banner.inner_text()
    assert page.locator("input[type=submit][value^='Evict']").is_disabled()
    assert "Evict is off" in page.locator("#evict-blocked").inner_text()
    assert page.locator("input[name=pod]").first.is_disabled()
    shot(page, "violations-unreachable-1440")
    phone = log_in(browser, live_server, "admin-user", width=390, height=844)
    for path, name in (
        ("/admin/violations/?cluster=kube", "violations-unreachable-390"),
        ("/admin/pending/?cluster=demo", "pending-390"),
        ("/admin/", "dashboard-390"),
    ):
        phone.goto(f"{live_server.url}{path}")
        shot(phone, name)
        assert fits(phone), path
