"""An operator's journeys in a real browser (tests/support/browser.py): what a viewer is shown, the
safety net of the editors, and the explain page's answers, each as the page presents it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from policies.models import Expectation, LabelAssignment, Policy
from portal.demo import demo_seed
from tests.support.browser import PASSWORD, fits, log_in

pytestmark = pytest.mark.django_db(transaction=True)

MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: trainer-0
  namespace: ml
  labels:
    app: trainer
    team: vision
spec:
  containers:
  - name: main
    image: trainer:1
"""


@pytest.fixture
def demo(db) -> None:
    demo_seed()


def user(name: str, group: str | None = None) -> None:
    if group is None:
        User.objects.create_superuser(name, password=PASSWORD)
        return
    person = User.objects.create_user(name, password=PASSWORD, is_staff=True)
    person.groups.add(Group.objects.get(name=group))


@pytest.fixture
def editor_page(browser, live_server, demo):
    user("editor-user", "editor")
    page = log_in(browser, live_server, "editor-user")
    yield page
    page.close()


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)], ids=["1440", "phone"])
def test_a_viewer_sees_the_real_selector_and_no_write_controls(
    browser, live_server, demo, width: int, height: int
) -> None:
    user("viewer-user", "viewer")
    page = log_in(browser, live_server, "viewer-user", width=width, height=height)
    policy = Policy.objects.get(name="ml-on-gpu")
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    assert page.locator(".field-namespaces_shown .readonly").inner_text() == "ml"
    rules = page.locator("#filter_rules-group").inner_text()
    assert "label: nvidia.com/gpu.product In [A100-SXM4-40GB]" in rules
    assert "rejects 57 of 60 nodes" in page.locator("#draft-preview").inner_text()
    for control in ("input[name=_save]", "input[name=_preview]", "text=Edit as YAML"):
        assert page.locator(control).count() == 0, control
    assert fits(page)
    assignment = LabelAssignment.objects.get(name="gpu-tier")
    page.goto(f"{live_server.url}/admin/policies/labelassignment/{assignment.pk}/change/")
    assert page.locator(".field-node_names_shown .readonly").inner_text() == "*-gpu-*"
    assert page.locator(".field-labels_shown .readonly").inner_text() == (
        "portal.example.com/tier=gpu"
    )
    assert page.locator("input[type=submit]").count() == 0
    page.close()


def test_the_assignment_typo_is_held(editor_page, live_server) -> None:
    page = editor_page
    page.goto(f"{live_server.url}/admin/policies/labelassignment/add/")
    page.fill("#id_name", "spot-pool")
    page.select_option("#id_cluster", label="demo")
    page.fill("#id_node_expressions", "karpenter.sh/capacity-typ In spot")
    page.fill("#id_labels", "example.com/pool=spot")
    warnings = page.locator("#draft-preview .draft-warnings")
    warnings.wait_for()
    text = warnings.inner_text()
    assert "did you mean karpenter.sh/capacity-type?" in text
    assert "matches 0 of 60 nodes" in text
    page.click("input[name=_save]")
    page.wait_for_load_state()
    assert "Not saved yet" in page.locator("ul.errorlist.nonfield").inner_text()
    # The held page shows the same warnings and the box that confirms them.
    assert "did you mean" in page.locator("#draft-preview .draft-warnings").inner_text()
    assert not LabelAssignment.objects.filter(name="spot-pool").exists()
    page.check("input[name=confirm_warnings]")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/policies/labelassignment/")
    assert LabelAssignment.objects.filter(name="spot-pool").exists()


def test_a100_suggests_the_a100_the_nodes_have(editor_page, live_server) -> None:
    page = editor_page
    policy = Policy.objects.get(name="ml-on-gpu")
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/change/")
    page.wait_for_selector("#draft-preview .draft-rejects")
    page.fill("#id_filter_rules-0-values", "A100")
    warning = page.locator("#draft-preview .draft-warnings li[data-code=unknown_value]")
    warning.wait_for()
    text = warning.inner_text()
    assert "did you mean A100-SXM4-40GB?" in text
    assert "Values on the nodes: A10G, A100-SXM4-40GB." in text


def test_explain_names_the_taint_apart_from_the_portals_verdict(browser, live_server, demo) -> None:
    user("viewer-user", "viewer")
    page = log_in(browser, live_server, "viewer-user")
    page.goto(f"{live_server.url}/admin/explain/")
    page.select_option("#id_cluster", "demo")
    page.fill("#id_namespace", "ml")
    page.click("input[type=submit][value=Explain]")
    page.wait_for_selector("#explain-scheduler")
    assert (
        "3 of 60 nodes pass the portal's policies" in page.locator("#explain-summary").inner_text()
    )
    summary = page.locator("#scheduler-summary").inner_text()
    assert "kube-scheduler would also reject: 3 node(s) had untolerated taint(s)" in summary
    reasons = page.locator("#scheduler-reasons").inner_text()
    assert "untolerated taint nvidia.com/gpu=present:NoSchedule" in reasons
    # Rejected nodes are folded by reason, passing ones listed first.
    group = page.locator("details.explain-group").first
    assert "57 nodes" in group.locator("summary").inner_text()
    assert not group.locator("tr.rejected").first.is_visible()
    group.locator("summary").click()
    assert group.locator("tr.rejected").first.is_visible()
    page.close()


def test_an_expectation_from_a_pasted_manifest_keeps_namespace_and_labels(
    editor_page, live_server
) -> None:
    page = editor_page
    page.goto(f"{live_server.url}/admin/explain/")
    page.select_option("#id_cluster", "demo")
    page.fill("#id_manifest", MANIFEST)
    page.click("input[type=submit][value=Explain]")
    page.click("text=Save as an expectation")
    page.wait_for_url("**/admin/policies/expectation/add/**")
    assert page.input_value("#id_namespace") == "ml"
    assert page.input_value("#id_pod_labels") == "app=trainer\nteam=vision"
    assert page.input_value("#id_kind") == "can_land"  # 3 nodes pass the portal today
    page.fill("#id_name", "trainer-lands")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/policies/expectation/")
    saved = Expectation.objects.get(name="trainer-lands")
    assert saved.pod == {"namespace": "ml", "labels": {"app": "trainer", "team": "vision"}}


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)], ids=["1440", "phone"])
def test_the_explain_page_fits(browser, live_server, demo, width: int, height: int) -> None:
    user("admin-user")
    page = log_in(browser, live_server, "admin-user", width=width, height=height)
    page.goto(f"{live_server.url}/admin/explain/?cluster=demo&namespace=ml")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert fits(page)
    page.close()
