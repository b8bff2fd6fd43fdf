"""Replay in a real browser (tests/support/browser.py): the policy editor's sampled line
follows the form and holds a save with its numbers; its link opens the full replay on the
report page, whose worst example opens explain with the recorded pod."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from policies.models import Policy
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)

ALL = ["gpu-1", "gpu-2", "cpu-1"]


@pytest.fixture
def admin_page(browser, live_server, record):
    record(6, "ml", {"app": "train"}, ALL, name="train")
    record(4, "web", {"app": "site"}, ALL, name="site")
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    yield page
    page.close()


def test_the_editor_line_and_the_report_page(admin_page, browser, live_server) -> None:
    page = admin_page
    policy = Policy.objects.get(name="gpu-only")
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    line = page.locator("#draft-preview .draft-line")
    line.wait_for()
    assert "Last 7 days: 0 of 10 calls would get 0 nodes" in line.inner_text()
    page.fill("#id_filter_rules-0-values", "H100")
    page.wait_for_function(
        "() => { const e = document.querySelector('#draft-preview .draft-line');"
        " return e && e.textContent.includes('6 of 10 calls would get 0 nodes'); }"
    )
    assert "nodes judged as they are now" in line.inner_text()
    page.click("input[name=_save]")
    page.wait_for_load_state()
    hold = page.locator("#draft-preview .draft-hold").inner_text()
    assert "would have left 6 of the last 7 days' 10 recorded calls with 0 nodes" in hold
    assert Policy.objects.get(name="gpu-only").version == policy.version

    page.locator("#draft-preview .draft-line a").click()
    page.wait_for_selector("#replay-result")
    counts = page.locator("#replay-counts").inner_text()
    assert "6 calls (1 shapes) would get 0 nodes instead of some" in counts
    assert "as the inventory has them now" in page.locator("#replay-result").inner_text()
    assert "ml/train-5" in page.locator("#replay-worst").inner_text()
    assert "gpu-only/" in page.locator("#replay-by-rule").inner_text()
    assert fits(page)
    page.locator("#replay-worst a", has_text="Explain").first.click()
    page.wait_for_url("**/admin/explain/**")
    assert page.locator("#id_namespace").input_value() == "ml"
    assert "app=train" in page.locator("#id_labels").input_value()

    phone = log_in(browser, live_server, "admin-user", width=390, height=844)
    phone.goto(f"{live_server.url}/admin/replay/")
    phone.fill("#replay-policy", '{"name": "gpu-only", "filter_rules": []}')
    phone.click("#replay-report button[type=submit]")
    phone.wait_for_selector("#replay-result")
    assert "0 calls (0 shapes) would get 0 nodes" in phone.locator("#replay-counts").inner_text()
    assert fits(phone)
    phone.close()
