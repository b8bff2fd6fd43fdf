"""POST /api/v1/label-assignments/preview/: matched nodes and effective-label changes, writing
nothing, and equal to what the snapshot shows once the draft is saved."""

from __future__ import annotations

import pytest

from core.models import AuditEntry
from inventory.services import nodes_apply
from policies.assignment_services import label_assignment_create
from policies.compile import current_snapshot
from policies.models import LabelAssignment
from tests.factories import assignment_data, make_cluster
from tests.support.ui_helpers import node_object

pytestmark = pytest.mark.django_db
URL = "/api/v1/label-assignments/preview/"


@pytest.fixture
def inventory(db):
    cluster = make_cluster("prod")
    nodes_apply(
        cluster=cluster,
        objects=[
            node_object("gpu-1", labels={"example.com/tier": "gpu", "zone": "a"}),
            node_object("gpu-2", labels={"zone": "b"}),
            node_object("cpu-1", labels={"zone": "a"}),
        ],
        replace=True,
    )
    label_assignment_create(
        actor=None, data=assignment_data("gpu-tier", labels={"example.com/tier": "gpu"})
    )
    return cluster


def by_node(result: dict) -> dict[str, dict]:
    (cluster,) = result["clusters"]
    return {change["node"]: change for change in cluster["changes"]}


def test_a_new_assignment_lists_matched_nodes_and_added_labels(editor, inventory):
    audit_before = AuditEntry.objects.count()
    draft = assignment_data(
        "zone-a-pool",
        node_selector={"match_expressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        labels={"example.com/pool": "blue"},
    )
    response = editor.post(URL, draft, format="json")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["saved"] is False
    (cluster,) = result["clusters"]
    assert (cluster["nodes"], cluster["matched"], cluster["changed_nodes"]) == (3, 2, 2)
    assert sorted(cluster["matched_sample"]) == ["cpu-1", "gpu-1"]
    assert by_node(result)["cpu-1"]["added"] == {"example.com/pool": "blue"}
    assert not LabelAssignment.objects.filter(name="zone-a-pool").exists()
    assert AuditEntry.objects.count() == audit_before


def test_changing_a_saved_assignment_shows_changed_and_removed_labels(editor, inventory):
    draft = assignment_data(
        "gpu-tier", node_selector={"node_names": ["gpu-1"]}, labels={"example.com/tier": "accel"}
    )
    result = editor.post(URL, draft, format="json").json()
    assert result["saved"] is True
    changes = by_node(result)
    # gpu-1 observed tier=gpu itself; the saved assignment also said gpu; now accel.
    assert changes["gpu-1"]["changed"] == {"example.com/tier": ["gpu", "accel"]}
    # gpu-2 had tier only from the saved assignment: it goes.
    assert changes["gpu-2"]["removed"] == ["example.com/tier"]
    assert "cpu-1" not in changes


def test_disabling_in_the_draft_removes_its_labels(editor, inventory):
    draft = assignment_data("gpu-tier", enabled=False)
    result = editor.post(URL, draft, format="json").json()
    assert by_node(result)["gpu-2"]["removed"] == ["example.com/tier"]
    assert result["clusters"][0]["matched"] == 0


def test_the_preview_equals_the_snapshot_after_saving(editor, inventory):
    draft = assignment_data(
        "gpu-tier", node_selector={"node_names": ["*-1"]}, labels={"example.com/tier": "x"}
    )
    result = editor.post(URL, draft, format="json").json()
    before = {f.name: dict(f.labels) for f in current_snapshot().clusters["prod"].facts}
    assert (
        editor.put("/api/v1/label-assignments/gpu-tier/", draft, format="json").status_code == 200
    )
    after = {f.name: dict(f.labels) for f in current_snapshot().clusters["prod"].facts}
    changes = by_node(result)
    assert set(changes) == {n for n in after if after[n] != before[n]}
    for node, change in changes.items():
        expected = dict(before[node])
        expected.update(change["added"])
        expected.update({k: new for k, (_, new) in change["changed"].items()})
        for key in change["removed"]:
            expected.pop(key)
        assert expected == after[node]


def test_an_invalid_draft_is_a_400_naming_the_field(editor, inventory):
    response = editor.post(URL, assignment_data("bad", labels={"bad key!": "x"}), format="json")
    assert response.status_code == 400
    assert any(key.startswith("labels") for key in response.json())


def test_a_viewer_may_preview(viewer, inventory):
    assert viewer.post(URL, assignment_data("gpu-tier"), format="json").status_code == 200


@pytest.mark.parametrize(
    ("selector", "codes", "message"),
    [
        pytest.param(
            {"match_expressions": [{"key": "zon", "operator": "In", "values": ["a"]}]},
            {"unknown_key", "matches_no_nodes"},
            "No node carries the label zon; did you mean zone?",
            id="typo-key",
        ),
        pytest.param(
            {"match_expressions": [{"key": "zone", "operator": "In", "values": ["c"]}]},
            {"unknown_value", "matches_no_nodes"},
            "No node has zone=c. Values on the nodes: a, b.",
            id="unknown-value",
        ),
        pytest.param(
            {"node_names": ["gpu-*", "tpu-*"]},
            {"unmatched_name"},
            "No node name matches tpu-*.",
            id="glob-matching-nothing",
        ),
        pytest.param({"node_names": ["gpu-*"]}, set(), "", id="sound"),
    ],
)
def test_the_preview_warns_about_a_selector_that_labels_nothing(
    editor, inventory, selector: dict, codes: set[str], message: str
) -> None:
    draft = assignment_data("draft", node_selector=selector, labels={"example.com/x": "y"})
    result = editor.post(URL, draft, format="json").json()
    assert {w["code"] for w in result["warnings"]} == codes
    if message:
        assert message in [w["message"] for w in result["warnings"]]
