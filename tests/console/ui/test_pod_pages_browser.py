"""The Pending and Violations pages in a real browser: accessible (axe-core), readable on a
phone, and an eviction shown for confirmation before anything is sent."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inventory.models import ClusterSource
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from policies.compile import forget
from portal.demo import demo_seed
from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.policies.ui.test_editor_browser import serious_violations
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def installation() -> None:
    forget()
    demo_seed()
    kube = make_cluster("kube", source=ClusterSource.KUBERNETES, in_cluster=True)
    load_nodes(kube, [node_object("gpu-1", {"nvidia.com/gpu.product": "T4"})])
    make_policy()  # ml pods only on A100 nodes: both pods below break it
    pods = [
        {
            "metadata": {"namespace": "ml", "name": f"train-{i}", "labels": {"app": "train"}},
            "spec": {"nodeName": "gpu-1"},
            "status": {"phase": "Running"},
        }
        for i in range(2)
    ]
    pods_apply(cluster=kube, records=[pod_record(p) for p in pods], replace=True)  # type: ignore[misc]
    User.objects.create_superuser("admin-user", password=PASSWORD)
    yield
    forget()


@pytest.mark.usefixtures("installation")
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pod_pages_have_no_serious_accessibility_violations(
    browser, live_server, scheme: str
) -> None:
    page = log_in(browser, live_server, "admin-user")
    page.emulate_media(color_scheme=scheme)
    found: list[str] = []
    for path in (
        "/admin/pending/?cluster=demo",
        "/admin/violations/?cluster=demo",
        "/admin/violations/?cluster=kube",
    ):
        page.goto(f"{live_server.url}{path}")
        found += [f"{scheme} {path}: {v}" for v in serious_violations(page)]
    page.check("input[name=pod][value='ml/train-0']")
    page.click("text=Evict the chosen pods")
    page.wait_for_selector("#evict-impact")
    assert "ml/train-0" in page.locator("#evict-impact").inner_text()
    found += [f"confirm: {v}" for v in serious_violations(page)]
    assert found == [], "\n".join(found)


@pytest.mark.usefixtures("installation")
def test_pending_page_fits_a_phone(browser, live_server) -> None:
    page = log_in(browser, live_server, "admin-user", width=390, height=844)
    page.goto(f"{live_server.url}/admin/pending/?cluster=demo")
    assert page.locator("#pending-counts").is_visible()
    assert fits(page)
