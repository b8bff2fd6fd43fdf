"""The console in a real browser: Debian's Chromium driven by Playwright against a live server
(tests/support/browser.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from policies.services import policy_create
from portal.demo import demo_seed
from tests.support.browser import PASSWORD, log_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_dashboard_shows_the_demo_and_a_typo(browser, live_server) -> None:
    demo_seed()
    policy_create(
        actor=None,
        data={
            "name": "payments-gpu",
            "filter_rules": [
                {
                    "kind": "label",
                    "key": "nvidia.com/gpu.prodcut",
                    "operator": "In",
                    "values": ["x"],
                }
            ],
        },
    )
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    clusters = page.locator("#clusters-title + table")
    assert "59 / 60" in clusters.inner_text()
    assert "last successful import" in clusters.inner_text()
    problems = page.locator("#problems-title + ul").inner_text()
    assert "nvidia.com/gpu.prodcut" in problems
    # It fits: no horizontal scroll at 1,440 px or on a phone.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    phone = log_in(browser, live_server, "admin-user", width=390, height=844)
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_viewer_sees_the_dashboard_but_no_write_links(browser, live_server) -> None:
    demo_seed()
    viewer = User.objects.create_user("viewer-user", password=PASSWORD, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    page = log_in(browser, live_server, "viewer-user")
    assert "59 / 60" in page.locator("#clusters-title + table").inner_text()
    assert page.locator("a.addlink").count() == 0
    assert page.locator("a.changelink").count() == 0


def test_no_page_violates_the_content_security_policy(browser, live_server) -> None:
    demo_seed()
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    for path in (
        "/admin/",
        "/admin/explain/?cluster=demo&namespace=ml",
        "/admin/policies/policy/add/",
        "/admin/policies/policy/",
        "/admin/inventory/node/",
        "/api/docs/",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        violations = [f"{path}: {v}" if not v.startswith("/") else v for v in violations]
    # The admin's own scripts run: the inline formset's "add another" link is built by them.
    page.goto(f"{live_server.url}/admin/policies/policy/add/")
    assert page.locator(".add-row a").count() >= 1
    # And Swagger UI rendered from its static files.
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui", timeout=15000)
    assert violations == [], "\n".join(violations)


def test_decisions_are_found_by_node_and_pages_are_accessible(browser, live_server) -> None:
    from decisions.models import Decision
    from tests.decisions.test_decisions_retention import decision
    from tests.policies.ui.test_editor_browser import serious_violations

    demo_seed()
    decision(
        0,
        cluster="demo",
        pod_name="trainer-7",
        rejected=[["demo-general-1a-01", "ml-on-gpu/no A100"]],
    )
    decision(0, cluster="demo", pod_name="web-1", rejected=[["demo-arm64-1a-01", "x/y"]])
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    page.goto(f"{live_server.url}/admin/inventory/node/")
    page.fill("#searchbar", "demo-general-1a-01")
    page.press("#searchbar", "Enter")
    page.click("text=demo-general-1a-01")
    page.click("text=Calls that rejected or scored demo-general-1a-01")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1
    assert "ml/trainer-7" in rows.first.inner_text()
    page.click("#result_list tbody tr a")
    page.wait_for_selector(".decision-table")
    assert "ml-on-gpu/no A100" in page.locator(".decision-table").first.inner_text()
    found = serious_violations(page)
    page.goto(f"{live_server.url}/admin/extender/decision/")
    found += serious_violations(page)
    assert found == [], "\n".join(found)
    assert Decision.objects.count() == 2


def test_explain_in_the_browser_agrees_with_simulate_and_reports_dry_runs(
    browser, live_server
) -> None:
    import re

    from rest_framework.test import APIClient

    from decisions.models import Decision
    from tests.decisions.test_decisions_retention import decision

    demo_seed()
    admin_user = User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    page.goto(f"{live_server.url}/admin/explain/")
    page.select_option("#id_cluster", "demo")
    page.fill("#id_namespace", "ml")
    page.click("input[type=submit][value=Explain]")
    summary = page.locator("#explain-summary").inner_text()
    passed, total = map(int, re.match(r"(\d+) of (\d+) nodes pass", summary).groups())
    api = APIClient()
    api.force_authenticate(admin_user)
    pod = {"metadata": {"name": "explained-pod", "namespace": "ml"}}
    result = api.post("/api/v1/simulate/", {"cluster": "demo", "pod": pod}, format="json").json()
    assert (passed, total) == (result["summary"]["passed"], result["summary"]["nodes"])

    # "What would this dry-run policy do": its report, reached from the policy page.
    reason = "no-small-nodes/under 16Gi"
    decision(0, cluster="demo", dry_run_rejected=[["demo-general-1a-01", reason]])
    policy = "no-small-nodes"
    page.goto(f"{live_server.url}/admin/policies/policy/?q={policy}")
    page.click(f"#result_list a:text-is('{policy}')")
    page.click("text=would have rejected")
    assert reason in page.locator(".console-table").inner_text()
    assert Decision.objects.count() == 1
