"""A rebuild redoes only the clusters a change touches, and is the snapshot a whole build makes.

Every write names the clusters it can change and whether it changed policies only
(core.revisions); the holder re-reads and rebuilds the clusters whose nodes are judged
differently, judges again only the rules of those whose policies alone changed, and shares
everything else with the snapshot it served. Each test checks both what was reused (object
identity) and that the result decides exactly like a snapshot built from scratch at the same
revision.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.revisions import bump_snapshot_revision, current_snapshot_revision
from engine.pods import PodFacts
from engine.snapshot import Snapshot
from extender import persist
from extender.holder import SnapshotHolder
from inventory.models import Cluster
from inventory.services import cluster_update
from policies.assignment_services import label_assignment_update
from policies.compile import build_snapshot, read_sources
from policies.models import LabelAssignment, Policy
from policies.services import policy_create, policy_delete, policy_update
from tests.factories import (
    assignment_data,
    load_nodes,
    make_assignment,
    make_cluster,
    node_object,
    policy_data,
)

pytestmark = pytest.mark.django_db

PODS = [
    PodFacts(namespace="ml", name="trainer", uid="u1", labels={"app": "trainer"}),
    PodFacts(namespace="web", name="front", uid="u2", labels={"app": "web"}),
]


def nodes(prefix: str) -> list[dict]:
    return [
        node_object(f"{prefix}-gpu-{i}", {"gpu": "a100", "zone": "a" if i % 2 else "b"})
        for i in range(4)
    ] + [node_object(f"{prefix}-cpu-{i}", {"zone": "a"}) for i in range(4)]


def gpu_only(name: str, cluster: str | None, **overrides: Any) -> dict:
    fields: dict[str, Any] = {
        "cluster": cluster,
        "pod_selector": {"namespaces": ["ml"]},
        "filter_rules": [{"kind": "label", "key": "gpu", "operator": "In", "values": ["a100"]}],
        "weight_rules": [
            {"kind": "label", "key": "zone", "operator": "In", "values": ["a"], "weight": 5}
        ],
    }
    return policy_data(name, **{**fields, **overrides})


@pytest.fixture
def stored() -> None:
    for name in ("alpha", "beta", "gamma"):
        load_nodes(make_cluster(name), nodes(name))
        policy_create(actor=None, data=gpu_only(f"{name}-gpu", name))
    zone_b = {"match_expressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    make_assignment("zone-b-tier", cluster="beta", node_selector=zone_b, labels={"tier": "b"})


@pytest.fixture
def holder(stored: None) -> SnapshotHolder:
    holder = SnapshotHolder()
    holder.load()
    assert holder.last_read == ("alpha", "beta", "gamma")  # the first load reads them all
    return holder


def decisions(snapshot: Snapshot) -> dict[str, Any]:
    """Everything a decision depends on, per cluster, comparable across snapshots."""
    out: dict[str, Any] = {}
    for name, cluster in snapshot.clusters.items():
        per_pod = []
        for pod in PODS:
            table = cluster.evaluator.table(cluster.evaluator.active(pod))
            per_pod.append(
                (dict(table.reject), dict(table.scores.dense_scores), dict(table.versions))
            )
        out[name] = {
            "settings": (
                cluster.unknown_node_action,
                cluster.bind_enabled,
                cluster.is_default,
                cluster.last_success_at,
                cluster.sync_state,
            ),
            "policies": [(p.name, p.version, p.mode) for p in cluster.policies],
            "labels": {f.name: dict(f.labels) for f in cluster.facts},
            "pods": per_pod,
        }
    return out


def reload_and_compare(holder: SnapshotHolder) -> tuple[Snapshot, Snapshot]:
    """Load incrementally; assert it decides like a whole build at the committed revision."""
    before = holder.snapshot
    assert before is not None
    after = holder.load()
    assert after.revision == current_snapshot_revision()
    assert decisions(after) == decisions(build_snapshot())
    return before, after


def reused(before: Snapshot, after: Snapshot, name: str) -> bool:
    return after.clusters[name].evaluator is before.clusters[name].evaluator


def test_a_change_to_one_clusters_policy_rebuilds_that_cluster_only(
    holder: SnapshotHolder,
) -> None:
    policy = Policy.objects.get(name="alpha-gpu")
    policy_update(
        actor=None,
        policy=policy,
        data=gpu_only("alpha-gpu", "alpha", filter_rules=[]),
    )
    before, after = reload_and_compare(holder)

    # alpha's rules are judged again over the node facts it had; no node is read.
    assert holder.last_read == ()
    assert holder.last_rejudged == ("alpha",)
    assert holder.last_reused == ("beta", "gamma")
    assert not reused(before, after, "alpha")
    assert after.clusters["alpha"].facts is before.clusters["alpha"].facts
    assert reused(before, after, "beta")
    assert reused(before, after, "gamma")
    # The reused clusters share their compiled policies and facts too.
    assert after.clusters["beta"].policies is before.clusters["beta"].policies
    assert after.clusters["beta"].facts is before.clusters["beta"].facts
    # alpha now lets CPU nodes through for ML pods; the others still do not.
    ml = PODS[0]
    alpha = after.clusters["alpha"].evaluator
    beta = after.clusters["beta"].evaluator
    assert alpha.table(alpha.active(ml)).reject["alpha-cpu-0"] is None
    assert beta.table(beta.active(ml)).reject["beta-cpu-0"] is not None


def test_a_policy_for_every_cluster_rebuilds_them_all(holder: SnapshotHolder) -> None:
    policy_create(actor=None, data=gpu_only("everywhere", None, mode="dry-run"))
    before, after = reload_and_compare(holder)

    assert holder.last_read == ()
    assert holder.last_rejudged == ("alpha", "beta", "gamma")
    assert not any(reused(before, after, name) for name in ("alpha", "beta", "gamma"))
    assert all("everywhere" in [p.name for p in c.policies] for c in after.clusters.values())


def test_a_policy_moved_between_clusters_rebuilds_both(holder: SnapshotHolder) -> None:
    policy = Policy.objects.get(name="alpha-gpu")
    policy_update(actor=None, policy=policy, data=gpu_only("alpha-gpu", "gamma"))
    before, after = reload_and_compare(holder)

    assert holder.last_rejudged == ("alpha", "gamma")
    assert reused(before, after, "beta")
    assert [p.name for p in after.clusters["alpha"].policies] == []
    assert sorted(p.name for p in after.clusters["gamma"].policies) == ["alpha-gpu", "gamma-gpu"]


def test_deleting_a_policy_rebuilds_its_cluster(holder: SnapshotHolder) -> None:
    policy_delete(actor=None, policy=Policy.objects.get(name="beta-gpu"))
    _, after = reload_and_compare(holder)

    assert holder.last_rejudged == ("beta",)
    assert after.clusters["beta"].policies == ()


def test_a_node_sync_rebuilds_that_cluster_only(holder: SnapshotHolder) -> None:
    gamma = Cluster.objects.get(name="gamma")
    load_nodes(gamma, [*nodes("gamma"), node_object("gamma-gpu-new", {"gpu": "a100"})])
    before, after = reload_and_compare(holder)

    assert holder.last_read == ("gamma",)
    assert holder.last_rejudged == ()
    assert reused(before, after, "alpha")
    assert reused(before, after, "beta")
    assert "gamma-gpu-new" in after.clusters["gamma"].evaluator.nodes.names


def test_a_label_assignment_change_rebuilds_its_cluster(holder: SnapshotHolder) -> None:
    assignment = LabelAssignment.objects.get(name="zone-b-tier")
    label_assignment_update(
        actor=None,
        assignment=assignment,
        data=assignment_data(
            "zone-b-tier",
            cluster="beta",
            node_selector={
                "match_expressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
            },
            labels={"tier": "c"},
        ),
    )
    _, after = reload_and_compare(holder)

    assert holder.last_read == ("beta",)
    labels = {f.name: f.labels for f in after.clusters["beta"].facts}
    assert labels["beta-gpu-0"]["tier"] == "c"


def test_cluster_settings_and_unscoped_writes_rebuild_everything(holder: SnapshotHolder) -> None:
    cluster_update(
        actor=None, cluster=Cluster.objects.get(name="beta"), data={"bind_enabled": True}
    )
    _, after = reload_and_compare(holder)
    assert holder.last_read == ("alpha", "beta", "gamma")
    assert after.clusters["beta"].bind_enabled

    bump_snapshot_revision("a writer that does not say what it touched")
    reload_and_compare(holder)
    assert holder.last_read == ("alpha", "beta", "gamma")


def test_a_reused_cluster_takes_its_current_settings(holder: SnapshotHolder) -> None:
    # A sync outcome is written without a revision bump; the next rebuild carries it even for
    # a cluster it reuses.
    Cluster.objects.filter(name="gamma").update(sync_state="failed")
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="alpha-gpu"),
        data=gpu_only("alpha-gpu", "alpha", mode="dry-run"),
    )
    before, after = reload_and_compare(holder)

    assert reused(before, after, "gamma")
    assert after.clusters["gamma"].sync_state == "failed"


def test_only_the_touched_clusters_nodes_are_read(holder: SnapshotHolder) -> None:
    assert holder.snapshot is not None
    known = {name: c.inputs for name, c in holder.snapshot.clusters.items() if c.inputs}
    assert read_sources(known=known)["nodes"] == {}  # nothing moved: no node read
    policy_create(actor=None, data=gpu_only("alpha-extra", "alpha"))
    assert read_sources(known=known)["nodes"] == {}  # a policy: no node read either

    load_nodes(Cluster.objects.get(name="beta"), nodes("beta")[:3])
    document = read_sources(known=known)
    assert list(document["nodes"]) == ["beta"]
    assert len(document["nodes"]["beta"]) == 3
    assert sorted(document["inputs"]) == ["alpha", "beta", "gamma"]


def test_a_restarted_process_restores_the_incremental_snapshot_from_disk(
    holder: SnapshotHolder,
) -> None:
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="alpha-gpu"),
        data=gpu_only("alpha-gpu", "alpha", filter_rules=[]),
    )
    load_nodes(Cluster.objects.get(name="beta"), nodes("beta")[:5])
    for _ in range(2):
        reload_and_compare(holder)
    assert holder.snapshot is not None
    restarted = SnapshotHolder()
    restored = restarted.restore()
    assert restored is not None
    assert restored.revision == holder.snapshot.revision
    assert decisions(restored) == decisions(holder.snapshot)
    # A node file per cluster, at the counters each was last read with.
    files = {p.name for p in persist.sources_path().parent.glob("nodes-*.json")}
    expected = {
        persist.node_file_name(name, cluster.inputs.facts)
        for name, cluster in holder.snapshot.clusters.items()
        if cluster.inputs is not None
    }
    assert len(expected) == 3
    assert expected <= files

    # The restored process rebuilds incrementally from what it restored.
    policy_create(actor=None, data=gpu_only("gamma-extra", "gamma"))
    restarted.load()
    assert restarted.last_rejudged == ("gamma",)
    load_nodes(Cluster.objects.get(name="alpha"), nodes("alpha")[:2])
    restarted.load()
    assert restarted.last_read == ("alpha",)


def test_a_missing_node_file_makes_the_next_load_read_everything(holder: SnapshotHolder) -> None:
    assert holder.snapshot is not None
    directory = persist.sources_path().parent
    beta = holder.snapshot.clusters["beta"].inputs
    assert beta is not None
    (directory / persist.node_file_name("beta", beta.facts)).unlink()
    policy_create(actor=None, data=gpu_only("alpha-extra", "alpha"))
    holder.load()  # reuses beta in memory, but cannot keep it on disk
    assert holder.last_read == ()
    policy_create(actor=None, data=gpu_only("alpha-more", "alpha"))
    holder.load()
    assert holder.last_read == ("alpha", "beta", "gamma")
    assert (directory / persist.node_file_name("beta", beta.facts)).exists()


@pytest.mark.usefixtures("stored")
def test_the_portals_own_snapshot_is_rebuilt_incrementally_too() -> None:
    """``current_snapshot`` (simulate, previews, expectations in the web process)."""
    from policies.compile import current_snapshot

    before = current_snapshot()
    policy_update(
        actor=None,
        policy=Policy.objects.get(name="gamma-gpu"),
        data=gpu_only("gamma-gpu", "gamma", mode="dry-run"),
    )
    after = current_snapshot()
    assert after.revision == current_snapshot_revision() != before.revision
    assert reused(before, after, "alpha")
    assert not reused(before, after, "gamma")
    assert decisions(after) == decisions(build_snapshot())
