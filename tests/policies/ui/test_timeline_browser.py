"""The schedule timeline on the policy page in a real browser (tests/support/browser.py): the
windows of the next days drawn, the next switches listed in UTC with the operator's own zone
beside each; a bad cron expression is refused on the form with a specific message."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from policies.models import Policy
from policies.services import policy_create
from tests.factories import make_cluster, policy_data
from tests.support.browser import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tokyo_page(browser, live_server):
    make_cluster("prod", is_default=True)
    User.objects.create_superuser("admin-user", password=PASSWORD)
    # A 24-hour locale: the page formats times in the browser's own locale, and en-US would
    # write the 04:00 UTC switch (the next one between 02:00 and 04:00 UTC) as "01:00 PM".
    context = browser.new_context(
        timezone_id="Asia/Tokyo", locale="en-GB", viewport={"width": 1440, "height": 900}
    )
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin-user")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    yield page
    context.close()


def test_the_timeline_shows_the_next_switches_in_utc_and_the_operators_zone(
    tokyo_page, live_server
) -> None:
    policy = policy_create(
        actor=None,
        data=policy_data("drain-zone-a", schedule={"cron": "0 2 * * *", "duration": "2h"}),
    )
    page = tokyo_page
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    page.wait_for_selector(".schedule-timeline")
    # A window every day for a week: seven or eight bars on the timeline.
    assert 7 <= page.locator(".timeline-bar .timeline-window").count() <= 8
    switches = page.locator(".timeline-switch")
    assert switches.count() == 8
    first = switches.nth(0).inner_text()
    assert "T02:00:00Z" in first or "T04:00:00Z" in first
    # The operator's zone, filled in by the page's script, beside the UTC time.
    page.wait_for_function(
        "() => document.querySelector('.timeline-switch .local-time').textContent.length > 0"
    )
    local = switches.nth(0).locator(".local-time").inner_text()
    assert "Asia/Tokyo" in local
    assert "11:00" in local or "13:00" in local  # 02:00 or 04:00 UTC in Tokyo (UTC+9)
    assert "Asia/Tokyo" in page.locator(".operator-zone").inner_text()


def test_a_bad_cron_expression_is_refused_on_the_form(tokyo_page, live_server) -> None:
    policy = policy_create(actor=None, data=policy_data("drain-zone-a"))
    page = tokyo_page
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    page.fill("#id_schedule_cron", "0 25 * * *")
    page.fill("#id_schedule_duration", "2h")
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    assert (
        "not a valid cron expression" in page.locator(".form-row.field-schedule_cron").inner_text()
    )
    assert Policy.objects.get(pk=policy.pk).window_cron == ""
    page.fill("#id_schedule_cron", "0 2 * * 0")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/policies/policy/")
    stored = Policy.objects.get(pk=policy.pk)
    assert (stored.window_cron, stored.window_duration) == ("0 2 * * 0", 7200)
