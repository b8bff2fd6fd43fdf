"""The Managed resources page and the node page's section in a real browser: no serious
accessibility violation (axe-core), light and dark, and readable on a phone."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inventory.models import Node
from tests.factories import make_cluster
from tests.policies.ui.test_editor_browser import serious_violations
from tests.resources.support import apply_pods, license_resource, licensed_nodes, pod_object
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def installation() -> int:
    cluster = make_cluster("prod")
    licensed_nodes(cluster, {"lic-1": 3, "lic-2": 1})
    license_resource(cluster)
    apply_pods(cluster, [pod_object("a", node="lic-1", licenses=2)])
    User.objects.create_superuser("admin-user", password=PASSWORD)
    return Node.objects.get(cluster=cluster, name="lic-1").pk


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_managed_pages_have_no_serious_accessibility_violations(
    browser,
    live_server,
    installation: int,
    scheme: str,
) -> None:
    page = log_in(browser, live_server, "admin-user")
    page.emulate_media(color_scheme=scheme)
    found: list[str] = []
    for path in (
        "/admin/managed-resources/?cluster=prod",
        f"/admin/inventory/node/{installation}/change/",
    ):
        page.goto(f"{live_server.url}{path}")
        assert page.locator(".managed-bar").count() >= 1
        found += [f"{scheme} {path}: {v}" for v in serious_violations(page)]
    assert found == [], "\n".join(found)


def test_managed_page_fits_a_phone(
    browser,
    live_server,
    installation: int,
) -> None:
    page = log_in(browser, live_server, "admin-user", width=390, height=844)
    page.goto(f"{live_server.url}/admin/managed-resources/?cluster=prod")
    assert page.locator("text=example.com/license: 2 of 4 allocated").is_visible()
    assert fits(page)
