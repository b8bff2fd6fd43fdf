"""The policy editor in a real browser (tests/support/browser.py): no JSON to type, a preview that
follows the form, a typo held until confirmed, a rollback shown before it is made, and a form
that fits 1,440 px and a phone."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User

from policies.content import policy_content
from policies.models import Policy, PolicyVersion
from policies.services import policy_update
from portal.demo import demo_seed
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)

A100 = "A100-SXM4-40GB"


@pytest.fixture
def admin_page(browser, live_server):
    demo_seed()
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    yield page
    page.close()


def rejected(page) -> int:
    """The first cluster's "rejects X of Y nodes" count in the impact preview."""
    page.wait_for_selector("#draft-preview .draft-rejects")
    text = page.locator("#draft-preview .draft-rejects").first.inner_text()
    return int(re.search(r"rejects (\d+) of", text).group(1))


def test_a_policy_is_made_in_the_editor_without_json(admin_page, live_server) -> None:
    page = admin_page
    page.goto(f"{live_server.url}/admin/policies/policy/add/")
    page.fill("#id_name", "a100-training")
    page.fill("#id_namespaces", "training")
    page.select_option("#id_filter_rules-0-kind", "label")
    # Only the label kind's fields show.
    assert page.locator("#id_filter_rules-0-key").is_visible()
    assert not page.locator("#id_filter_rules-0-quantity").is_visible()
    assert not page.locator("#id_filter_rules-0-pattern").is_visible()
    assert "Keeps nodes whose label" in page.locator("#filter_rules-0 .rule-help").inner_text()
    page.fill("#id_filter_rules-0-key", "nvidia.com/gpu.product")
    page.select_option("#id_filter_rules-0-operator", "In")
    page.fill("#id_filter_rules-0-values", f"{A100}, A10G")
    page.select_option("#id_weight_rules-0-kind", "resource")
    assert not page.locator("#id_weight_rules-0-key").is_visible()
    page.fill("#id_weight_rules-0-resource", "nvidia.com/gpu")
    page.fill("#id_weight_rules-0-weight", "10")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/policies/policy/")
    content = policy_content(Policy.objects.get(name="a100-training"))
    assert content["pod_selector"]["namespaces"] == ["training"]
    assert content["filter_rules"][0]["values"] == [A100, "A10G"]
    assert content["weight_rules"][0]["resource"] == "nvidia.com/gpu"


def test_the_preview_follows_the_values(admin_page, live_server) -> None:
    page = admin_page
    policy = Policy.objects.get(name="ml-on-gpu")
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    before = rejected(page)
    page.fill("#id_filter_rules-0-values", f"{A100}, A10G")
    page.wait_for_function(
        "(n) => { const e = document.querySelector('#draft-preview .draft-rejects');"
        " return e && !e.textContent.includes('rejects ' + n + ' of'); }",
        arg=before,
    )
    assert rejected(page) < before
    assert "fewer node" in page.locator("#draft-preview").inner_text()
    assert PolicyVersion.objects.filter(policy=policy).count() == 1


def test_the_typo_is_caught_and_saved_only_when_confirmed(admin_page, live_server) -> None:
    page = admin_page
    page.goto(f"{live_server.url}/admin/policies/policy/add/")
    page.fill("#id_name", "payments-gpu")
    page.fill("#id_namespaces", "payments")
    page.select_option("#id_filter_rules-0-kind", "label")
    page.fill("#id_filter_rules-0-key", "nvidia.com/gpu.prodcut")
    page.select_option("#id_filter_rules-0-operator", "Exists")
    warning = page.locator("#draft-preview .draft-warnings")
    warning.wait_for()
    assert "did you mean nvidia.com/gpu.product?" in warning.inner_text()

    page.click("input[name=_save]")
    page.wait_for_load_state()
    assert "Not saved yet" in page.locator("#draft-preview .draft-hold").inner_text()
    assert not Policy.objects.filter(name="payments-gpu").exists()

    page.check("input[name=confirm_warnings]")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/policies/policy/")
    assert Policy.objects.filter(name="payments-gpu").exists()


def test_a_rollback_shows_the_diff_before_it_is_made(admin_page, live_server) -> None:
    policy = Policy.objects.get(name="ml-on-gpu")
    content = policy_content(policy)
    content["filter_rules"][0]["values"] = [A100, "A10G"]
    policy_update(actor=None, policy=policy, data=content)
    first = PolicyVersion.objects.get(policy=policy, version=1)
    page = admin_page
    page.goto(f"{live_server.url}/admin/policies/policyversion/")
    page.check(f"input[name=_selected_action][value='{first.pk}']")
    page.select_option("select[name=action]", "roll_back_to_version")
    page.click("button[name=index]")
    page.wait_for_selector(".confirm-item")
    assert any("A10G" in t for t in page.locator(".confirm-item .diff-del").all_inner_texts())
    policy.refresh_from_db()
    assert policy.version == 2
    page.click("input[type=submit][value='Yes, roll back']")
    page.wait_for_selector(".messagelist .success")
    policy.refresh_from_db()
    assert policy.version == 3
    assert policy_content(policy)["filter_rules"][0]["values"] == [A100]


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)], ids=["1440", "phone"])
def test_the_policy_form_fits(browser, live_server, width: int, height: int) -> None:
    demo_seed()
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user", width=width, height=height)
    policy = Policy.objects.get(name="ml-on-gpu")
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    page.wait_for_selector("#draft-preview .draft-rejects")
    assert fits(page)
    page.goto(f"{live_server.url}/admin/policies/policy/add/")
    assert fits(page)
    page.close()


def serious_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page (axe-playwright-python ships
    axe-core; it is injected through the DevTools protocol, not fetched)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_editors_and_console_have_no_serious_accessibility_violations(
    admin_page, live_server, scheme: str
) -> None:
    """axe in light and in dark mode (the admin follows the system's colour scheme): colour
    contrast is among its serious checks, verdict and diff colours included."""
    page = admin_page
    page.emulate_media(color_scheme=scheme)
    policy = Policy.objects.get(name="ml-on-gpu")
    found = []
    for path in (
        "/admin/policies/policy/add/",
        f"/admin/policies/policy/{policy.pk}/change/",
        f"/admin/policies/policy/{policy.pk}/history/",
        "/admin/policies/policyversion/",
        "/admin/policies/labelassignment/add/",
        "/admin/inventory/node/?_facets=True",
        "/admin/",
        "/admin/explain/?cluster=demo&namespace=ml&nodes=demo-gpu-*",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        # Open the folded groups so their rows are checked too.
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        found.extend(f"{scheme} {path}: {v}" for v in serious_violations(page))
    assert found == [], "\n".join(found)
