"""Each finding of the pod pages' review, as an operator meets it in a real browser (Chromium
driven by Playwright against the live test server): the eviction that leaves the list at once,
the forbidden page in the portal's look, the dashboard's problems and errors as sentences with
their sources named, the header and the links, a policy save that would break running pods held
for a confirmation with the numbers and the list, YAML errors with line and column, the managed
resources' selector editor and over-capacity bars, and a login on the production hasher.

``PORTAL_SCREENSHOTS=<folder>`` keeps a screenshot of each page looked at."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, User
from django.core.cache import cache

from inventory.models import Cluster, ClusterSource, Pod
from inventory.pod_records import pod_record
from inventory.pod_services import pods_apply
from policies.compile import forget
from portal.demo import demo_seed
from tests.factories import load_nodes, make_cluster, make_policy, node_object
from tests.support.browser import PASSWORD, fits, log_in
from tests.support.fake_kube import FakeKubeServer
from tests.support.pods import realistic_pod

pytestmark = pytest.mark.django_db(transaction=True)
SHOTS = os.environ.get("PORTAL_SCREENSHOTS", "")


def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


@pytest.fixture
def demo() -> Iterator[None]:
    forget()
    demo_seed()
    User.objects.create_superuser("admin-user", password=PASSWORD)
    yield
    forget()


@pytest.fixture
def kube(tmp_path: Path, settings: Any) -> Iterator[tuple[FakeKubeServer, Cluster]]:
    forget()
    cache.clear()
    settings.EVICTION_INTERVAL_SECONDS = 0
    settings.KUBECONFIG_DIR = tmp_path
    with FakeKubeServer() as server:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        cluster = make_cluster(
            "prod",
            source=ClusterSource.KUBERNETES,
            kubeconfig_path="kubeconfig",
            kubeconfig_context="fake",
        )
        load_nodes(cluster, [node_object("gpu-1", {"nvidia.com/gpu.product": "T4"})])
        make_policy()  # ml pods only on A100 nodes: every ml pod on gpu-1 breaks it
        yield server, cluster
    forget()


def test_evicted_pods_are_marked_terminating_at_once(
    browser, live_server, kube: tuple[FakeKubeServer, Cluster]
) -> None:
    """Right after an eviction the list no longer offers the evicted pod as if nothing had
    happened (the watch may take seconds to report the deletion); a budget's refusal is shown
    word for word, with the namespace as written."""
    server, cluster = kube
    trainers = [
        server.add_pod(realistic_pod(i, node="gpu-1", namespace="ml", app="train", slim=True))
        for i in range(3)
    ]
    solo = server.add_pod(realistic_pod(9, node="gpu-1", namespace="ml", app="solo", slim=True))
    pods_apply(
        cluster=cluster,
        records=[pod_record(p) for p in [*trainers, solo]],  # type: ignore[misc]
        replace=True,
    )
    server.add_disruption_budget("ml", "train", {"app": "train"}, min_available=3)
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    page.goto(f"{live_server.url}/admin/violations/?cluster=prod")
    assert page.locator("input[name=pod]").count() == 4
    solo_key = f"ml/{solo['metadata']['name']}"
    trainer_key = f"ml/{trainers[0]['metadata']['name']}"
    page.check(f"input[name=pod][value='{solo_key}']")
    page.check(f"input[name=pod][value='{trainer_key}']")
    page.click("input[type=submit][value^='Evict']")
    page.wait_for_selector("text=Evict these pods?")
    assert server.evictions == []  # shown first, nothing sent
    page.click("input[type=submit][value='Yes, evict 2 pods']")
    page.wait_for_selector("#violations-title")
    messages = page.locator("ul.messagelist:not(.draft-warnings)").inner_text()
    assert "1 of 2 pods evicted." in messages
    assert f"Pod {trainer_key} refused: " in messages
    assert "needs 3 healthy pods" in messages
    assert "Ml/" not in messages  # a namespace is never capitalised
    shot(page, "violations-after-eviction-1440")
    # The evicted pod: marked terminating, no longer offered; the refused one still is.
    assert page.locator(f"input[name=pod][value='{solo_key}']").count() == 0
    assert page.locator(f"input[name=pod][value='{trainer_key}']").count() == 1
    row = page.locator("#violations-table tr", has_text=solo_key)
    if row.count():  # still in the cached verdicts: marked as leaving
        assert "terminating" in row.inner_text()
    assert "3 running pods" in page.locator("#violations-title").inner_text()
    assert Pod.objects.get(cluster=cluster, name=solo["metadata"]["name"]).terminating
    # Pending pods never list a terminating pod either; a phone shows the page whole.
    phone = log_in(browser, live_server, "admin-user", width=390, height=844)
    phone.goto(f"{live_server.url}/admin/violations/?cluster=prod")
    shot(phone, "violations-after-eviction-390")
    assert fits(phone)


def test_a_forbidden_page_is_the_portals_own_and_says_what_to_do(browser, live_server) -> None:
    User.objects.create_user("staff-only", password=PASSWORD, is_staff=True)
    page = log_in(browser, live_server, "staff-only")
    response = page.goto(f"{live_server.url}/admin/pending/")
    assert response is not None
    assert response.status == 403
    assert page.locator("#site-name").is_visible()  # the admin's header, not a bare page
    assert page.locator("h1").inner_text() == "You may not open this page"
    text = page.locator("#content-main").inner_text()
    assert "Your account (staff-only) lacks the permission" in text
    assert "Ask an administrator of the portal for the role you need" in text
    shot(page, "forbidden-1440")
    page.click("#content-main a", timeout=5000)  # back to the dashboard
    page.wait_for_url("**/admin/")
    # Which says the account has no role rather than showing figures (or zeros read as "fine").
    assert page.locator("#no-role-title").inner_text() == "Your account has no role yet"
    assert page.locator("#problems-title").count() == 0
    # Nor does the header offer the pod pages it may not open; explain answers 403 too.
    assert page.locator("nav.portal-links a", has_text="Pending pods").count() == 0
    response = page.goto(f"{live_server.url}/admin/explain/?cluster=demo&namespace=ml")
    assert response is not None
    assert response.status == 403
    shot(page, "no-role-dashboard-1440")


def test_the_dashboard_names_its_problems_and_their_sources(
    browser, live_server, demo: None
) -> None:
    """Held and rule-breaking pods are problems leading to their pages; the refusal counts
    name the extender's verb and the own scheduler apart; a sync error is a whole sentence that
    says what to do, not a Python exception cut mid-word."""
    from django.utils import timezone

    from decisions import store
    from decisions.records import CallRecord
    from inventory import sync_status

    now = timezone.now().timestamp()

    def record(verb: str, i: int, out: int) -> tuple[float, CallRecord]:
        return now, CallRecord(
            verb=verb,
            cluster="demo",
            mode="names",
            pod_namespace="ml",
            pod_name=f"{verb}-{i}",
            pod_uid=f"{verb}-{i}",
            nodes_in=3,
            nodes_out=out,
            duration_seconds=0.001,
            snapshot_revision=1,
            rejected=[("n1", "ml-on-gpu/ml pods need an A100 node")],
        )

    store.write_batch(
        [record("filter", i, 0 if i < 2 else 2) for i in range(5)]
        + [record("schedule", i, 0) for i in range(3)]
    )
    prod = make_cluster("prod")
    sync_status.failed(
        prod.pk,
        "cannot reach the API server: HTTPSConnectionPool(host='10.0.0.1', port=6443): Max "
        "retries exceeded with url: /api/v1/nodes?limit=500 (Caused by NewConnectionError("
        "'<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new "
        "connection: [Errno 111] Connection refused'))",
    )
    page = log_in(browser, live_server, "admin-user")
    problems = page.locator("#problems-title + ul").inner_text()
    assert "No problems" not in problems
    assert "Cluster demo: 5 Pending pods held by the portal's policies" in problems
    assert "Cluster demo: 1 running pod breaks a rule" in problems
    assert "The portal cannot reach the cluster's API server. Check that it is running" in (
        problems
    )
    assert "HTTPSConnectionPool" not in problems
    assert "Errno" not in problems
    body = page.locator("#console-dashboard").inner_text()
    assert "extender filter calls left a pod 0 nodes" in body
    assert "of the own scheduler's 3 attempts found no node" in body
    shot(page, "dashboard-problems-1440")
    page.locator("a", has_text="see the pods that break a rule").first.click()
    page.wait_for_selector("#violations-title")
    assert "ml/train-legacy-" in page.locator("#violations-table").inner_text()
    page.go_back()
    page.locator("a", has_text="see the Pending pods").first.click()
    page.wait_for_selector("#pending-counts")
    phone = log_in(browser, live_server, "admin-user", width=390, height=844)
    shot(phone, "dashboard-problems-390")
    assert fits(phone)


def test_the_header_has_violations_and_names_are_links(browser, live_server, demo: None) -> None:
    page = log_in(browser, live_server, "admin-user")
    page.locator("nav.portal-links a", has_text="Pods that break a rule").click()
    page.wait_for_selector("#violations-title")
    table = page.locator("#violations-table")
    # The pod's name explains it, the node's opens the node, the reason's opens the policy.
    pod = table.locator("a[title='Explain this pod']").first
    assert pod.inner_text().startswith("ml/train-legacy-")
    node = table.locator("td[data-label=Node] a").first
    node_name = node.inner_text()
    node.click()
    page.wait_for_url("**/admin/inventory/node/*/change/")
    assert node_name in page.locator("h1, h2").first.inner_text() or node_name in page.content()
    page.go_back()
    page.locator("#violations-table td[data-label='Rules it breaks'] a").first.click()
    page.wait_for_url("**/admin/policies/policy/*/change/")
    assert page.locator("input#id_name").input_value() == "ml-on-gpu"
    page.go_back()
    page.locator("#violations-table a[title='Explain this pod']").first.click()
    page.wait_for_selector("#scheduler-summary")
    # The Pending page: lower-case namespaces, each pod a link to explain it.
    page.locator("nav.portal-links a", has_text="Pending pods").click()
    page.goto(f"{live_server.url}/admin/pending/?cluster=demo")
    links = page.locator("a[title='Explain this pod']").all_inner_texts()
    assert any(text.startswith("ml/finetune-") for text in links)
    assert not any(text[:1].isupper() for text in links)


def test_a_policy_save_that_breaks_running_pods_waits_for_a_confirmation(
    browser, live_server, demo: None
) -> None:
    """The YAML editor: broken YAML is named by line and column; a change that makes running
    pods break a rule is held with the numbers and the list until "Save anyway"."""
    from policies.models import Policy

    policy = Policy.objects.get(name="ml-on-gpu")
    page = log_in(browser, live_server, "admin-user")
    page.goto(f"{live_server.url}/admin/policies/policy/{policy.pk}/yaml/")
    original = page.locator("#id_document").input_value()
    page.fill("#id_document", "name: ml-on-gpu\nfilter_rules: [\n")
    page.click("input[type=submit][name=_save]")
    errors = page.locator("ul.yaml-errors").inner_text()
    assert "Not valid YAML, line 3, column 1" in errors
    assert Policy.objects.get(pk=policy.pk).version == 1
    shot(page, "policy-yaml-error-1440")
    page.fill("#id_document", original.replace("A100-SXM4-40GB", "H100-SXM5-80GB"))
    page.click("input[type=submit][name=_save]")
    hold = page.locator(".draft-hold").inner_text()
    assert "Not saved yet: this change has" in hold
    assert "makes 3 running pods break a rule and leaves 3 Pending pods no node" in hold
    listed = page.locator(".draft-pod-list[data-kind=violations]").inner_text()
    assert "Saving makes 3 running pods break a rule" in listed
    assert "ml/train-" in listed
    assert "['" not in hold  # a sentence, not a Python list
    shot(page, "policy-save-held-1440")
    assert Policy.objects.get(pk=policy.pk).version == 1
    page.check("input[name=confirm_warnings]")
    page.click("input[type=submit][name=_save]")
    page.wait_for_selector("ul.messagelist:not(.draft-warnings)")
    saved = page.locator("ul.messagelist:not(.draft-warnings)").inner_text()
    assert "Saved ml-on-gpu as version 2." in saved
    assert Policy.objects.get(pk=policy.pk).version == 2


def test_managed_resources_edit_a_selector_and_show_a_node_over_capacity(
    browser, live_server
) -> None:
    from resources.models import ManagedResource
    from tests.resources.support import apply_pods, license_resource, licensed_nodes, pod_object

    cluster = make_cluster("prod")
    licensed_nodes(cluster, {"lic-1": 3, "lic-2": 1})
    license_resource(cluster)
    apply_pods(
        cluster,
        [pod_object("a", node="lic-1", licenses=2), pod_object("b", node="lic-2", licenses=2)],
    )
    User.objects.create_superuser("admin-user", password=PASSWORD)
    page = log_in(browser, live_server, "admin-user")
    assert (
        "node lic-2 has 2 allocated of 1 (1 over capacity)"
        in page.locator("#problems-title + ul").inner_text()
    )
    page.goto(f"{live_server.url}/admin/managed-resources/?cluster=prod")
    over = page.locator(".managed-bar.over")
    assert over.count() == 1
    assert over.get_attribute("aria-label") == (
        "example.com/license on lic-2: 2 of 1, over capacity"
    )
    # Not green: the over-capacity bar's fill is the alert colour, unlike a bar within capacity.
    colours = page.evaluate(
        """() => [...document.querySelectorAll('.managed-bar')].map(bar => {
            const fill = bar.querySelector('*') || bar;
            return getComputedStyle(fill).backgroundColor + '|' + getComputedStyle(fill).color;
        })"""
    )
    assert len(set(colours)) > 1, colours
    assert "-1: over capacity" in page.locator("body").inner_text()
    shot(page, "managed-over-1440")
    # The selector: names and requirement lines, not JSON; a key typo is held before saving.
    page.goto(f"{live_server.url}/admin/resources/managedresource/add/")
    assert page.locator("textarea[name=node_expressions]").count() == 1
    assert page.locator("[name=node_selector]").count() == 0
    page.select_option("#id_cluster", label="prod")
    page.fill("#id_name", "example.com/seat")
    page.fill("#id_node_expressions", "example.com/licence Exists")
    page.fill("#id_capacity", "2")
    page.click("input[type=submit][name=_save]")
    text = page.locator("#content-main").inner_text()
    assert "No node of cluster prod carries the label example.com/licence" in text
    assert "did you mean example.com/licenses?" in text
    assert "no node would offer this resource" in text
    assert "assignment" not in text  # the label editors' word, not this page's
    assert not ManagedResource.objects.filter(name="example.com/seat").exists()
    shot(page, "managed-typo-held-1440")
    page.check("input[name=confirm_warnings]")
    page.click("input[type=submit][name=_save]")
    page.wait_for_selector("ul.messagelist:not(.draft-warnings)")
    assert ManagedResource.objects.filter(name="example.com/seat").exists()


def test_a_login_on_the_production_hasher_upgrades_an_old_pbkdf2_hash(
    browser, live_server, settings
) -> None:
    """The portal's hashers (Argon2id first): a password stored under the old default
    (PBKDF2) still logs in, and is re-hashed with Argon2id at OWASP's parameters."""
    from portal import settings as portal_settings

    settings.PASSWORD_HASHERS = portal_settings.PASSWORD_HASHERS
    user = User.objects.create_user("old-hash", is_staff=True)
    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    user.save()
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    page = log_in(browser, live_server, "old-hash")
    assert page.locator("#console-dashboard").is_visible()
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    page.context.clear_cookies()
    again = log_in(browser, live_server, "old-hash")  # the new hash logs in too
    assert again.locator("#console-dashboard").is_visible()


def test_the_pending_page_confirms_the_placement_and_marks_old_messages(
    browser, live_server, kube: tuple[FakeKubeServer, Cluster]
) -> None:
    """After a change frees pods and the portal asks kube-scheduler to retry them, the Pending
    page says how many got placed and in how long, which still wait and why; kube-scheduler's
    message written before the policies last changed is marked as possibly naming an old rule."""
    from datetime import timedelta

    from django.utils import timezone

    from inventory.pod_services import pod_inventory_listed, pod_inventory_nudged
    from tests.console.test_pods import simple_pod

    _, cluster = kube
    nudged = timezone.now().replace(microsecond=0) - timedelta(seconds=30)
    before = (nudged - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = "0/1 nodes are available: 1 Insufficient cpu."
    pods_apply(
        cluster=cluster,
        records=[simple_pod(f"p{i}", at=before, message=message) for i in range(3)],
        replace=True,
    )
    pod_inventory_listed(cluster, resource_version="1", seen=3)
    pod_inventory_nudged(cluster, at=nudged, pods=3, revision=7, node="gpu-1")
    placed = (nudged + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods_apply(
        cluster=cluster,
        records=[simple_pod(f"p{i}", node="gpu-1", at=placed, rv="2") for i in range(2)],
    )
    # The rules change after kube-scheduler wrote its message about p2.
    from policies.content import policy_content
    from policies.models import Policy
    from policies.services import policy_update

    policy = Policy.objects.get(name="gpu-only")
    content = dict(policy_content(policy))
    content["description"] = "Changed after kube-scheduler wrote its messages."
    policy_update(actor=None, policy=policy, data=content)
    User.objects.create_superuser("admin-user", password=PASSWORD)
    for width in (1440, 390):
        page = log_in(browser, live_server, "admin-user", width=width, height=900)
        page.locator("nav.portal-links a", has_text="Pending pods").click()
        page.goto(f"{live_server.url}/admin/pending/?cluster=prod")
        state = page.locator("#requeue-state").inner_text()
        assert "Since then: 2 of 3 pods placed in 2 s." in state
        assert "Still waiting (1): web/p2" in state
        older = page.locator(".older-message")
        assert older.count() == 1
        assert "Seen before the policies last changed" in older.inner_text()
        shot(page, f"pending-requeue-{width}")
        assert fits(page)
