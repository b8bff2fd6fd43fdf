"""The Django admin as the operator UI: every page, roles, history, list queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from core import tokens
from core.admin import age
from core.models import AuditEntry
from inventory.models import Cluster, Node
from inventory.services import nodes_apply
from policies.assignment_services import label_assignment_create
from policies.models import FilterRule, LabelAssignment, Policy, PolicyVersion, WeightRule
from policies.services import policy_clone
from tests.support.ui_helpers import admin_url, change_url, form_data, node_object

pytestmark = pytest.mark.django_db


REGISTERED = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)
REGISTERED_IDS = [model._meta.label for model, _ in REGISTERED]


@pytest.fixture
def populated(admin_user: User, nodes: None, policy: Policy, assignment: LabelAssignment) -> None:
    """One object of every portal model, made through the services (plus an API token)."""

    tokens.issue(admin_user, role="admin")


# --- every page renders ---------------------------------------------------------------------


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=REGISTERED_IDS)
def test_every_admin_page_renders_for_a_superuser(
    admin_client: Client, admin_user: User, populated: None, model: Any, model_admin: Any
) -> None:
    assert admin_client.get(admin_url(model, "changelist")).status_code == 200

    request = admin_client.get("/").wsgi_request
    request.user = admin_user
    add = admin_client.get(admin_url(model, "add"))
    assert add.status_code == (200 if model_admin.has_add_permission(request) else 403)

    obj = model._default_manager.first()
    if obj is not None:
        response = admin_client.get(change_url(obj))
        assert response.status_code == 200, change_url(obj)


def test_portal_models_all_have_an_object_to_show(populated: None) -> None:
    # Guards the test above: a portal model without rows would skip its change page.
    for model in (Cluster, Node, Policy, LabelAssignment, PolicyVersion, AuditEntry):
        assert model.objects.exists(), model


def test_site_is_branded(admin_client: Client) -> None:
    response = admin_client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert "Scheduling Policy Portal" in response.content.decode()


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=REGISTERED_IDS)
def test_anonymous_users_are_sent_to_login(client: Client, model: Any, model_admin: Any) -> None:
    url = admin_url(model, "changelist")
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


# --- viewer role ----------------------------------------------------------------------------


def test_viewer_can_view_but_not_change(
    viewer_client: Client, nodes: None, policy: Policy, assignment: LabelAssignment
) -> None:
    for model in (Cluster, Node, Policy, LabelAssignment, PolicyVersion, AuditEntry):
        assert viewer_client.get(admin_url(model, "changelist")).status_code == 200
    page = viewer_client.get(change_url(policy))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert "A100" in page.content.decode()  # the inline rules are shown, read-only

    data = {"name": "renamed", "mode": "enforce"}
    assert viewer_client.post(change_url(policy), data).status_code == 403
    assert viewer_client.get(admin_url(Policy, "add")).status_code == 403
    assert viewer_client.post(admin_url(Cluster, "add"), {"name": "x"}).status_code == 403
    actions = viewer_client.post(
        admin_url(Policy, "changelist"),
        {"action": "disable_policies", "_selected_action": [policy.pk]},
    )
    assert actions.status_code in (200, 302)
    policy.refresh_from_db()
    assert policy.enabled
    assert policy.version == 1
    assert Policy.objects.get().name == "gpu-only"


def test_editor_edits_policies_and_deletes_a_cluster_with_everything_in_it(
    editor_client: Client, nodes: None, policy: Policy, assignment: LabelAssignment
) -> None:
    data = form_data(editor_client.get(change_url(policy)))
    data["weight_rules-0-weight"] = "-20"
    assert editor_client.post(change_url(policy), data).status_code == 302
    policy.refresh_from_db()
    assert policy.version == 2
    assert PolicyVersion.objects.get(policy=policy, version=2).author_name == "editor1"

    cluster = Cluster.objects.get(name="prod")
    policy_data = form_data(editor_client.get(change_url(policy)))
    policy_data["cluster"] = str(cluster.pk)
    assert editor_client.post(change_url(policy), policy_data).status_code == 302

    # Nodes and versions have no delete permission of their own; they go with the cluster.
    url = admin_url(Cluster, "delete", cluster.pk)
    assert "Are you sure" in editor_client.get(url).content.decode()
    assert editor_client.post(url, {"post": "yes"}).status_code == 302
    assert not Cluster.objects.exists()
    assert not Policy.objects.exists()
    assert not LabelAssignment.objects.exists()


def test_changelists_make_no_query_per_row(
    admin_client: Client,
    admin_user: User,
    cluster: Cluster,
    policy: Policy,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    # The node list's drift reuses each cluster's assignments for a couple of seconds: on a
    # loaded machine the warm-up and the counted request could fall on either side of that.
    # Kept for the test, and forgotten after it so no later test reads these.
    from inventory.drift import forget_cached_assignments

    monkeypatch.setattr("inventory.drift._CACHE_SECONDS", 3600.0)
    forget_cached_assignments()
    request.addfinalizer(forget_cached_assignments)

    def query_counts() -> dict[str, int]:
        counts = {}
        for model in (Cluster, Node, Policy, LabelAssignment, PolicyVersion, AuditEntry):
            url = admin_url(model, "changelist")
            admin_client.get(url)  # warm any per-revision caches the page uses
            with CaptureQueriesContext(connection) as queries:
                assert admin_client.get(url).status_code == 200
            counts[model._meta.label] = len(queries)
        return counts

    def add_rows(start: int, count: int) -> None:
        names = [f"n-{i}" for i in range(start, start + count)]
        nodes_apply(cluster=cluster, objects=[node_object(n) for n in names], replace=False)
        for name in names:
            policy_clone(actor=admin_user, policy=policy, name=f"p-{name}")
            label_assignment_create(
                actor=admin_user,
                data={"name": f"a-{name}", "cluster": "prod", "labels": {"example.com/x": "1"}},
            )

    add_rows(0, 2)
    few = query_counts()
    add_rows(2, 10)
    assert query_counts() == few


def test_ages_read_like_people_say_them() -> None:

    now = timezone.now()
    assert age(None) == "never"
    assert age(now) == "just now"
    assert age(now - timedelta(minutes=3, seconds=5)) == "3\xa0minutes ago"
    assert age(now - timedelta(days=2, hours=5)) == "2\xa0days ago"


# --- history is read-only -------------------------------------------------------------------


def test_versions_and_audit_are_read_only(admin_client: Client, policy: Policy) -> None:
    version = PolicyVersion.objects.get()
    entry = AuditEntry.objects.filter(object_type="policy").get()
    for obj in (version, entry):
        page = admin_client.get(change_url(obj)).content.decode()
        assert 'name="_save"' not in page
        assert admin_client.post(change_url(obj), {"note": "x"}).status_code == 403
    audit_page = admin_client.get(change_url(entry)).content.decode()
    assert '<pre class="portal-json">' in audit_page
    assert "&quot;nvidia.com/gpu.product&quot;" in audit_page
    assert admin_client.get(admin_url(AuditEntry, "changelist"), {"action__exact": "create"})
    assert FilterRule.objects.count() == 1
    assert WeightRule.objects.count() == 1
