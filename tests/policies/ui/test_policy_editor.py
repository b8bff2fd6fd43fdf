"""The policy editor's safety net: warnings hold a save until confirmed, the impact preview
(live endpoint and "Preview impact" button) writes nothing, change notes reach the version."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from core.models import AuditEntry
from inventory.models import Cluster
from policies.models import Policy, PolicyVersion
from tests.support.ui_helpers import admin_url, change_url, form_data, run_action, set_rows

pytestmark = pytest.mark.django_db

PREVIEW_URL = "admin:policies_policy_preview"


def typo_policy(client: Client, **fields: Any) -> dict[str, Any]:
    """The issue's case: an enforce policy for payments with a misspelt GPU label key."""
    data = form_data(client.get(admin_url(Policy, "add")))
    data.update(name="payments-gpu", mode="enforce", enabled="on", namespaces="payments")
    data.update(fields)
    set_rows(
        data,
        "filter_rules",
        [{"kind": "label", "key": "nvidia.com/gpu.prodcut", "operator": "Exists"}],
    )
    return data


def test_a_typo_is_held_with_a_suggestion_and_saved_only_after_confirmation(
    admin_client: Client, nodes: None
) -> None:
    data = typo_policy(admin_client)
    held = admin_client.post(admin_url(Policy, "add"), data)
    assert held.status_code == 200
    page = held.content.decode()
    assert "did you mean nvidia.com/gpu.product?" in page
    assert "leaves 0 of 2 nodes" in page
    assert 'name="confirm_warnings"' in page
    assert not Policy.objects.filter(name="payments-gpu").exists()

    confirmed = admin_client.post(admin_url(Policy, "add"), {**data, "confirm_warnings": "1"})
    assert confirmed.status_code == 302
    assert Policy.objects.filter(name="payments-gpu").exists()


def test_the_correct_key_saves_at_once(admin_client: Client, nodes: None) -> None:
    data = typo_policy(admin_client)
    data["filter_rules-0-key"] = "nvidia.com/gpu.product"
    response = admin_client.post(admin_url(Policy, "add"), data)
    assert response.status_code == 302, response.context["errors"]


def test_preview_button_shows_the_impact_and_writes_nothing(
    admin_client: Client, policy: Policy, nodes: None
) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    data["filter_rules-0-values"] = "A100, H100"
    data["_preview"] = "Preview impact"
    response = admin_client.post(change_url(policy), data)
    assert response.status_code == 200
    report = response.context["draft_report"]
    assert report["clusters"][0]["nodes"] == 2
    assert report["clusters"][0]["rejected"] == 1  # node-b has no GPU label
    assert "A100&quot;, &quot;H100" in str(report["diff"]) or "H100" in str(report["diff"])
    policy.refresh_from_db()
    assert policy.version == 1


def test_live_preview_endpoint_follows_the_form(
    admin_client: Client, policy: Policy, nodes: None
) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    url = reverse(PREVIEW_URL)
    before = admin_client.post(url, {**data, "_object_id": str(policy.pk)})
    assert before.status_code == 200
    assert "rejects 1 of 2 nodes" in before.content.decode()
    # Widen the rule to a value no node has: the count changes and the warning names it.
    data["filter_rules-0-values"] = "H100"
    after = admin_client.post(url, {**data, "_object_id": str(policy.pk)}).content.decode()
    assert "rejects 2 of 2 nodes" in after
    assert "now rejects 1 more node" in after
    assert "No node has nvidia.com/gpu.product=H100" in after
    assert PolicyVersion.objects.filter(policy=policy).count() == 1


def test_live_preview_of_an_invalid_form_asks_to_fix_it(admin_client: Client, db: None) -> None:
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="Not A Slug")
    body = admin_client.post(reverse(PREVIEW_URL), data).content.decode()
    assert "Fix the errors in the form" in body


def test_live_preview_needs_a_post_and_a_staff_user(admin_client: Client, db: None) -> None:
    assert admin_client.get(reverse(PREVIEW_URL)).status_code == 405
    anonymous = Client().post(reverse(PREVIEW_URL), {})
    assert anonymous.status_code == 302  # to the login page
    assert "/login/" in anonymous["Location"]


def test_a_viewer_can_preview_but_not_save(
    viewer_client: Client, policy: Policy, nodes: None
) -> None:
    page = viewer_client.get(change_url(policy))
    assert page.status_code == 200
    response = viewer_client.post(reverse(PREVIEW_URL), {"_object_id": str(policy.pk)})
    assert response.status_code == 200


def test_change_note_is_kept_with_the_version_and_audit(
    admin_client: Client, policy: Policy, cluster: Cluster, admin_user: User
) -> None:
    data = form_data(admin_client.get(change_url(policy)))
    data.update(description="now with a note", change_note="OPS-7: clarify")
    assert admin_client.post(change_url(policy), data).status_code == 302
    version = PolicyVersion.objects.get(policy=policy, version=2)
    assert version.note == "OPS-7: clarify"
    assert AuditEntry.objects.filter(object_name=policy.name, note="OPS-7: clarify").exists()


def test_rule_cards_show_a_readable_summary(admin_client: Client, policy: Policy) -> None:
    page = admin_client.get(change_url(policy)).content.decode()
    assert "label nvidia.com/gpu.product In A100" in page
    assert "resource cpu, weight 10" in page


# --- risky actions: shown first, made only on "Yes" -------------------------------------------


@pytest.mark.parametrize(
    ("action", "diff_line", "field", "unchanged"),
    [
        ("disable_policies", '"enabled": false', "enabled", True),
        ("switch_to_dry_run", '"mode": "dry-run"', "mode", "enforce"),
    ],
)
def test_an_action_shows_the_diff_and_impact_before_changing_anything(
    admin_client: Client,
    policy: Policy,
    nodes: None,
    action: str,
    diff_line: str,
    field: str,
    unchanged: Any,
) -> None:
    page = run_action(admin_client, Policy, action, [policy])
    html = page.content.decode()
    assert page.status_code == 200
    assert "Nothing has been changed yet" in html
    assert diff_line in html.replace("&quot;", '"')
    assert "rejects 1 of 2 nodes" in html
    assert 'name="post" value="yes"' in html
    policy.refresh_from_db()
    assert (getattr(policy, field), policy.version) == (unchanged, 1)

    run_action(admin_client, Policy, action, [policy], confirm=True)
    policy.refresh_from_db()
    assert policy.version == 2


def test_rollback_shows_the_diff_first(
    admin_client: Client, admin_user: User, policy: Policy, nodes: None
) -> None:
    from policies.content import policy_content
    from policies.services import policy_update

    content = policy_content(policy)
    content["filter_rules"][0]["values"] = ["A100", "H100"]
    policy_update(actor=admin_user, policy=policy, data=content)
    first = PolicyVersion.objects.get(policy=policy, version=1)
    page = run_action(admin_client, PolicyVersion, "roll_back_to_version", [first])
    html = page.content.decode()
    assert "gpu-only: version 2 → content of version 1" in html
    assert "diff-del" in html
    assert "H100" in html.split("diff-del", 1)[1]
    policy.refresh_from_db()
    assert policy.version == 2


# --- label assignments: the label preview --------------------------------------------------


def test_label_preview_lists_the_nodes_whose_labels_change(
    admin_client: Client, assignment: Any, nodes: None
) -> None:
    from policies.models import LabelAssignment

    data = form_data(admin_client.get(change_url(assignment)))
    data["labels"] = "example.com/pool=blue"
    data["node_names"] = "node-a"
    body = admin_client.post(
        reverse("admin:policies_labelassignment_preview"),
        {**data, "_object_id": str(assignment.pk)},
    ).content.decode()
    assert "matches 1 of 2 nodes" in body
    assert "effective labels change on 2 nodes" in body
    assert "example.com/pool: gpu → blue" in body
    assignment.refresh_from_db()
    assert assignment.labels == {"example.com/pool": "gpu"}
    assert LabelAssignment.objects.count() == 1


def test_label_preview_of_an_invalid_form_asks_to_fix_it(admin_client: Client, db: None) -> None:
    from policies.models import LabelAssignment

    data = form_data(admin_client.get(admin_url(LabelAssignment, "add")))
    data.update(name="x", labels="no-equals-sign")
    body = admin_client.post(reverse("admin:policies_labelassignment_preview"), data)
    assert "Fix the errors in the form" in body.content.decode()


def test_a_deleted_policy_is_restored_from_its_versions_after_a_confirmation(
    admin_client: Client, policy: Policy, nodes: None
) -> None:
    from policies.services import policy_delete

    policy_delete(actor=None, policy=policy)
    listing = admin_client.get(admin_url(PolicyVersion, "changelist") + "?deleted=yes")
    assert "gpu-only" in listing.content.decode()
    version = PolicyVersion.objects.get(policy_name="gpu-only", version=1)
    page = run_action(admin_client, PolicyVersion, "restore_policy", [version])
    assert "created again with the content of version 1" in page.content.decode()
    assert not Policy.objects.filter(name="gpu-only").exists()
    done = run_action(admin_client, PolicyVersion, "restore_policy", [version], confirm=True)
    assert "Restored gpu-only from version 1 as version 2." in done.content.decode()
    assert Policy.objects.get(name="gpu-only").version == 2


# --- the YAML toggle -------------------------------------------------------------------------


def yaml_url(policy: Policy) -> str:
    return reverse("admin:policies_policy_yaml", args=[policy.pk])


def test_yaml_shows_the_policyset_entry_and_saves_through_the_services(
    admin_client: Client, policy: Policy, nodes: None
) -> None:
    import yaml

    page = admin_client.get(change_url(policy)).content.decode()
    assert yaml_url(policy) in page
    document = admin_client.get(yaml_url(policy)).context["document"]
    content = yaml.safe_load(document)
    assert content["filter_rules"][0]["values"] == ["A100"]
    content["description"] = "edited as YAML"
    content["pod_selector"] = {"namespaces": ["ml"], "matchLabels": {"team": "vision"}}
    response = admin_client.post(
        yaml_url(policy),
        {"document": yaml.safe_dump(content), "change_note": "yaml!", "expected_version": "1"},
    )
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.version, policy.description) == (2, "edited as YAML")
    assert policy.pod_selector["match_labels"] == {"team": "vision"}
    assert PolicyVersion.objects.get(policy=policy, version=2).note == "yaml!"


def test_yaml_with_a_typo_is_held_until_confirmed(
    admin_client: Client, policy: Policy, nodes: None
) -> None:
    import yaml

    content = yaml.safe_load(admin_client.get(yaml_url(policy)).context["document"])
    content["filter_rules"][0]["key"] = "nvidia.com/gpu.prodcut"
    data = {"document": yaml.safe_dump(content), "expected_version": "1"}
    held = admin_client.post(yaml_url(policy), data)
    assert held.status_code == 200
    assert "did you mean nvidia.com/gpu.product?" in held.content.decode()
    assert Policy.objects.get(pk=policy.pk).version == 1
    saved = admin_client.post(yaml_url(policy), {**data, "confirm_warnings": "1"})
    assert saved.status_code == 302
    assert Policy.objects.get(pk=policy.pk).version == 2


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("a: [", "Not valid YAML, line 1, column 5: expected the node content"),
        ("base: &b {x: 1}\nother: *b\n", "Not valid YAML"),
        ("name: gpu-only\nfilter_rules: 3\n", "filter_rules"),
    ],
    ids=["broken", "alias", "invalid"],
)
def test_bad_yaml_is_named_and_nothing_is_written(
    admin_client: Client, policy: Policy, document: str, message: str
) -> None:
    response = admin_client.post(yaml_url(policy), {"document": document, "expected_version": "1"})
    assert response.status_code == 200
    assert any(message in e for e in response.context["errors"])
    assert Policy.objects.get(pk=policy.pk).version == 1


def test_a_viewer_reads_the_yaml_but_cannot_save(viewer_client: Client, policy: Policy) -> None:
    assert viewer_client.get(yaml_url(policy)).status_code == 200
    response = viewer_client.post(yaml_url(policy), {"document": "name: x"})
    assert response.status_code == 403


def test_a_policy_reaching_a_protected_namespace_is_held_until_confirmed(
    admin_client: Client, nodes: None
) -> None:
    """kube-system is protected (EVICTION_PROTECTED_NAMESPACES): a policy naming it warns."""
    data = typo_policy(admin_client, namespaces="kube-system")
    data["filter_rules-0-key"] = "nvidia.com/gpu.product"
    held = admin_client.post(admin_url(Policy, "add"), data)
    assert held.status_code == 200
    page = held.content.decode()
    assert "protected namespace kube-system" in page
    assert 'name="confirm_warnings"' in page
    assert not Policy.objects.filter(name="payments-gpu").exists()
    confirmed = admin_client.post(admin_url(Policy, "add"), {**data, "confirm_warnings": "1"})
    assert confirmed.status_code == 302


def test_a_save_that_breaks_running_pods_or_holds_pending_ones_is_confirmed_first(
    admin_client: Client,
) -> None:
    """The demo's ml pods: a rule keeping them off A100 nodes would make the 3 training pods
    running there break it and leave the 3 Pending fine-tuning pods no node."""
    from policies.compile import forget
    from portal.demo import demo_seed

    forget()
    demo_seed()
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="ml-off-a100", mode="enforce", enabled="on", namespaces="ml")
    set_rows(
        data,
        "filter_rules",
        [
            {
                "kind": "label",
                "key": "nvidia.com/gpu.product",
                "operator": "NotIn",
                "values": '["A100-SXM4-40GB"]',
            }
        ],
    )
    held = admin_client.post(admin_url(Policy, "add"), data)
    assert held.status_code == 200
    page = held.content.decode()
    assert "makes 3 running pods break a rule" in page
    assert "leaves 3 Pending pods no node" in page
    assert "Saving makes 3 running pods break a rule" in page
    assert "ml/train-" in page
    assert " on demo-gpu-a100-" in page
    assert "Saving leaves 3 Pending pods with no node" in page
    assert "ml/finetune-" in page
    assert 'name="confirm_warnings"' in page
    assert not Policy.objects.filter(name="ml-off-a100").exists()
    confirmed = admin_client.post(admin_url(Policy, "add"), {**data, "confirm_warnings": "1"})
    assert confirmed.status_code == 302
    assert Policy.objects.filter(name="ml-off-a100").exists()
    forget()


def test_the_policy_page_follows_the_requeue_its_change_started(admin_client: Client) -> None:
    """After a change frees pods and the portal asks kube-scheduler to retry them, the policy's
    own page says how many got placed and in how long, and which still wait with
    kube-scheduler's last word (a nudge from before the change is not this change's)."""
    from datetime import timedelta

    from django.utils import timezone

    from inventory.pod_services import pod_inventory_listed, pod_inventory_nudged, pods_apply
    from policies.services import policy_create
    from tests.console.test_pods import simple_pod

    cluster = Cluster.objects.create(name="prod")
    policy = policy_create(
        actor=None,
        data={"name": "web-anywhere", "cluster": "prod", "pod_selector": {"namespaces": ["web"]}},
    )
    before = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods_apply(
        cluster=cluster,
        records=[
            simple_pod(f"p{i}", at=before, message="0/3 nodes are available.") for i in range(3)
        ],
        replace=True,
    )
    pod_inventory_listed(cluster, resource_version="1", seen=3)
    pod_inventory_nudged(
        cluster, at=policy.updated_at - timedelta(minutes=1), pods=3, revision=1, node="n"
    )
    html = admin_client.get(change_url(policy)).content.decode()
    assert "After this change" not in html  # that nudge came before the change

    nudged = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    pod_inventory_nudged(cluster, at=nudged, pods=3, revision=2, node="n")
    placed = (nudged + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods_apply(
        cluster=cluster,
        records=[simple_pod(f"p{i}", node="n", at=placed, rv="2") for i in range(2)],
    )
    html = admin_client.get(change_url(policy)).content.decode()
    assert "<strong>After this change</strong> on prod" in html
    assert "<strong>2 of 3</strong> pods placed in 2 s." in html
    assert "Still waiting (1): web/p2 — “0/3 nodes are available.”" in html
    assert "/admin/pending/?cluster=prod" in html


def test_the_save_message_says_the_freed_pods_are_followed(admin_client: Client, db: None) -> None:
    """After a save, where the portal requeues the pods a change frees (a live cluster with
    requeue on), the message says so and links the policy's page that follows them."""
    from inventory.models import ClusterSource

    Cluster.objects.create(name="live", source=ClusterSource.KUBERNETES, in_cluster=True)
    Cluster.objects.create(name="quiet", source=ClusterSource.KUBERNETES, requeue_pending=False)
    Cluster.objects.create(name="static", source=ClusterSource.STATIC)
    data = form_data(admin_client.get(admin_url(Policy, "add")))
    data.update(name="web-anywhere", mode="enforce", enabled="on", namespaces="web")
    response = admin_client.post(admin_url(Policy, "add"), data, follow=True)
    policy = Policy.objects.get(name="web-anywhere")
    html = response.content.decode()
    assert "Pending pods this change frees are retried on live at once" in html
    assert f'<a href="{change_url(policy)}">the policy\'s page</a>' in html
