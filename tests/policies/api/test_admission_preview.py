"""The preview and the policy page say where each rule is enforced — admission and extender, or
the extender alone and why — and warn about rules on labels the portal assigns but has not
pushed to the nodes (an autoscaler cannot create such a node)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from inventory.services import cluster_update
from policies.assignment_services import label_assignment_create
from policies.compile import forget
from policies.models import Policy
from policies.services import policy_create
from tests.factories import load_nodes, make_cluster, node_object

pytestmark = pytest.mark.django_db
URL = "/api/v1/policies/preview/"

DRAFT = {
    "name": "ml-on-gpu",
    "pod_selector": {"namespaces": ["ml"]},
    "filter_rules": [
        {"kind": "label", "key": "gpu", "operator": "In", "values": ["A100"]},
        {"kind": "label", "key": "pool", "operator": "In", "values": ["gpu"]},
        {"kind": "resource", "resource": "memory", "operator": "Gte", "quantity": "8Gi",
         "message": "min-memory"},
        {"kind": "name", "pattern": "gpu-*", "operator": "Matches"},
        {"kind": "label", "key": "zone", "operator": "Exists", "enabled": False},
    ],
    "weight_rules": [
        {"kind": "label", "key": "zone", "operator": "In", "values": ["a"], "weight": 20},
        {"kind": "label", "key": "zone", "operator": "In", "values": ["b"], "weight": -20},
    ],
}  # fmt: skip


@pytest.fixture
def prod(db):
    cluster = make_cluster("prod", admission="mutate")
    load_nodes(
        cluster,
        [
            node_object("gpu-1", {"gpu": "A100", "zone": "a"}),
            node_object("gpu-2", {"gpu": "A100", "zone": "b"}),
            node_object("cpu-1", {"zone": "a"}),
        ],
    )
    # The portal assigns pool=gpu to the GPU nodes; the nodes do not carry it (not pushed).
    label_assignment_create(
        actor=None,
        data={"name": "gpu-pool", "node_selector": {"node_names": ["gpu-*"]},
              "labels": {"pool": "gpu"}},
    )  # fmt: skip
    forget()
    return cluster


def where(entry: dict) -> dict[str, tuple[str, str]]:
    return {
        rule["path"]: (" + ".join(rule["enforced_by"]), rule["reason"])
        for rule in entry["enforcement"]
    }


def test_each_rule_says_where_it_is_enforced_and_why(editor, prod) -> None:
    response = editor.post(URL, DRAFT, format="json")
    assert response.status_code == 200, response.content
    (entry,) = response.json()["clusters"]
    assert entry["admission"] == "mutate"
    rules = where(entry)
    assert set(rules) == {
        "filter_rules[0]",
        "filter_rules[1]",
        "filter_rules[2]",
        "filter_rules[3]",
        "weight_rules[0]",
        "weight_rules[1]",
    }  # the disabled rule is no one's
    assert rules["filter_rules[0]"] == ("admission + extender", "")
    assert rules["weight_rules[0]"] == ("admission + extender", "")
    assert rules["filter_rules[1]"][0] == "extender"
    assert "label assignment" in rules["filter_rules[1]"][1]
    assert "autoscaler cannot create such a node" in rules["filter_rules[1]"][1]
    assert rules["filter_rules[2]"] == (
        "extender",
        "resource rules have no node-affinity equivalent",
    )
    assert "glob" in rules["filter_rules[3]"][1]
    assert "1..100" in rules["weight_rules[1]"][1]
    warnings = [w for w in response.json()["warnings"] if w["code"] == "unpushed_labels"]
    assert [w["path"] for w in warnings] == ["filter_rules[1]"]
    assert "an autoscaler cannot create such a node" in warnings[0]["message"]


def test_pushed_labels_compile_and_stop_the_warning(editor, prod) -> None:
    load_nodes(
        prod,
        [
            node_object("gpu-1", {"gpu": "A100", "zone": "a", "pool": "gpu"}),
            node_object("gpu-2", {"gpu": "A100", "zone": "b", "pool": "gpu"}),
            node_object("cpu-1", {"zone": "a"}),
        ],
    )
    forget()
    body = editor.post(URL, DRAFT, format="json").json()
    assert where(body["clusters"][0])["filter_rules[1]"] == ("admission + extender", "")
    assert not [w for w in body["warnings"] if w["code"] == "unpushed_labels"]


@pytest.mark.parametrize(("mode", "fragment"), [("off", "is off"), ("annotate", "annotate")])
def test_admission_off_or_annotate_leaves_every_rule_to_the_extender(editor, prod, mode, fragment):
    cluster_update(actor=None, cluster=prod, data={"admission": mode})
    forget()
    body = editor.post(URL, DRAFT, format="json").json()
    rules = where(body["clusters"][0])
    assert rules["filter_rules[0]"][0] == "extender"
    assert fragment in rules["filter_rules[0]"][1]
    # With admission off nobody expects autoscalers to see the rules: no save held for it;
    # annotate is the step before mutate, so it warns already.
    unpushed = [w for w in body["warnings"] if w["code"] == "unpushed_labels"]
    assert len(unpushed) == (0 if mode == "off" else 1)


def test_the_policy_page_shows_it(client, prod) -> None:
    client.force_login(User.objects.create_superuser("root", password="x"))
    policy = policy_create(actor=None, data=DRAFT, force=True)
    forget()
    page = client.get(reverse("admin:policies_policy_change", args=[policy.pk]))
    html = page.content.decode()
    assert "Where each rule is enforced" in html
    assert 'data-cluster="prod"' in html
    assert html.count("admission + extender") == 2
    assert "extender only" in html
    assert 'class="unpushed"' in html
    added = client.get(reverse("admin:policies_policy_add")).content.decode()
    assert "Where each rule is enforced" not in added
    assert Policy.objects.count() == 1
