"""The fix loop's end in a real browser: after a policy change freed pods and the portal asked
kube-scheduler to retry them, the policy's page says how many got placed and which still wait
(readable, accessible), and links the Pending page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from inventory.models import Cluster
from inventory.pod_services import pod_inventory_listed, pod_inventory_nudged, pods_apply
from policies.compile import forget
from policies.services import policy_create
from tests.console.test_pods import simple_pod
from tests.policies.ui.test_editor_browser import serious_violations
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def requeued() -> int:
    forget()
    cluster = Cluster.objects.create(name="prod")
    policy = policy_create(
        actor=None,
        data={"name": "web-anywhere", "cluster": "prod", "pod_selector": {"namespaces": ["web"]}},
    )
    before = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    waiting = "0/3 nodes are available: 3 Insufficient cpu."
    pods_apply(
        cluster=cluster,
        records=[simple_pod(f"p{i}", at=before, message=waiting) for i in range(12)],
        replace=True,
    )
    pod_inventory_listed(cluster, resource_version="1", seen=12)
    nudged = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    pod_inventory_nudged(cluster, at=nudged, pods=12, revision=2, node="n")
    placed = (nudged + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods_apply(
        cluster=cluster,
        records=[simple_pod(f"p{i}", node="n", at=placed, rv="2") for i in range(11)],
    )
    User.objects.create_superuser("admin-user", password=PASSWORD)
    yield policy.pk
    forget()


@pytest.mark.parametrize("width", [1440, 390])
def test_the_policy_page_confirms_the_placement(
    browser, live_server, requeued: int, width: int
) -> None:
    page = log_in(browser, live_server, "admin-user", width=width, height=900)
    page.goto(f"{live_server.url}/admin/policies/policy/{requeued}/change/")
    page.wait_for_load_state("networkidle")  # the editor's live preview has answered
    followup = page.get_by_role("status").filter(has_text="After this change")
    text = followup.inner_text()
    assert "11 of 12 pods placed in 2 s" in text
    assert "Still waiting (1): web/p11 — “0/3 nodes are available: 3 Insufficient cpu.”" in text
    assert fits(page)
    assert serious_violations(page) == []
    followup.get_by_role("link", name="Pending pods on prod").click()
    page.wait_for_url("**/admin/pending/?cluster=prod")
    page.wait_for_load_state("networkidle")
