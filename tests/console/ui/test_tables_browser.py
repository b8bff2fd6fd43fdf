"""Wide tables in a real browser: the node and cluster lists whole at 1,440 px, and at phone
width every table that scrolls sideways can take the keyboard's focus (axe-core's
scrollable-region-focusable), so it can be scrolled without a mouse."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from policies.compile import forget
from portal.demo import demo_seed
from tests.support.browser import PASSWORD, log_in

pytestmark = pytest.mark.django_db(transaction=True)

LISTS = ("/admin/inventory/node/", "/admin/inventory/cluster/")
PAGES = (
    *LISTS,
    "/admin/",
    "/admin/pending/?cluster=demo",
    "/admin/violations/?cluster=demo",
    "/admin/managed-resources/?cluster=demo",
    "/admin/explain/?cluster=demo&namespace=ml",
)

CUT = """() => [...document.querySelectorAll('table')].filter(t => {
    const box = t.getBoundingClientRect();
    let el = t.parentElement, cut = box.right > document.documentElement.clientWidth + 1;
    while (el && !cut) { cut = el.scrollWidth > el.clientWidth + 1 &&
        getComputedStyle(el).overflowX !== 'visible'; el = el.parentElement; }
    return cut; }).map(t => t.id || t.className || 'table')"""


@pytest.fixture
def installation():
    forget()
    demo_seed()
    User.objects.create_superuser("admin-user", password=PASSWORD)
    yield
    forget()


def scrollable_region_violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": ["scrollable-region-focusable"]})
    return [str([n["target"] for n in v["nodes"]][:3]) for v in results.response["violations"]]


@pytest.mark.usefixtures("installation")
def test_node_and_cluster_lists_are_whole_at_1440(browser, live_server) -> None:
    page = log_in(browser, live_server, "admin-user", width=1440, height=900)
    found = {}
    for path in LISTS:
        page.goto(f"{live_server.url}{path}")
        cut = page.evaluate(CUT)
        if cut:
            found[path] = cut
    assert found == {}


@pytest.mark.usefixtures("installation")
def test_tables_that_scroll_at_phone_width_take_the_keyboard(browser, live_server) -> None:
    page = log_in(browser, live_server, "admin-user", width=390, height=844)
    found = {}
    for path in PAGES:
        page.goto(f"{live_server.url}{path}")
        violations = scrollable_region_violations(page)
        if violations:
            found[path] = violations
    assert found == {}
