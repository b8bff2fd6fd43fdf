"""How a full replay reads the log: keys first, candidate sets only for the keys a draft can
change, node ids as bits of each cluster's own space, groups streamed under the bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from replay import recorded
from replay.replayer import Replayer, draft_from_policy
from replay.service import replay
from tests.factories import load_nodes, make_cluster, node_object
from tests.replay.conftest import GPU

pytestmark = pytest.mark.django_db

H100 = [{"kind": "label", "key": GPU, "operator": "In", "values": ["H100"]}]
DRAFT = {"name": "gpu-only", "filter_rules": H100}


def _window() -> tuple[datetime, datetime]:
    until = datetime.now(tz=UTC)
    return until - timedelta(days=7), until


def test_only_the_shapes_a_draft_changes_are_read_by_candidate_set(record) -> None:
    record(2, "ml", {"app": "train"}, ["gpu-1", "gpu-2"])
    record(3, "ml", {"app": "train"}, ["gpu-1"])
    for i in range(4):  # web pods: gpu-only does not select them
        record(1, "web", {"app": "site"}, ["cpu-1", f"gpu-{i % 2 + 1}"] + ["old"] * i)
    since, until = _window()
    keys = recorded.keys(since, until, None, 100)
    assert sorted((k.namespace, k.calls) for k in keys) == [("ml", 5), ("web", 4)]
    from replay.replayer import snapshot_now

    replayer = Replayer(snapshot_now(), draft_from_policy(DRAFT))
    changed = replayer.changes(keys)
    assert {ns for _, ns, _ in changed} == {"ml"}
    read = list(recorded.groups(since, until, None, changed))
    assert sorted(g.calls for g in read) == [2, 3]
    result = replay(draft_from_policy(DRAFT), days=7, cluster=None)
    assert (result["calls"], result["shapes"], result["judged_shapes"]) == (9, 2, 2)
    assert result["to_zero"] == {"calls": 5, "shapes": 2}
    # The web calls named a node that is gone, but the draft cannot change them: not read.
    assert result["gone_nodes"]["calls"] == 0


def test_node_ids_of_two_clusters_interleaved_are_judged_per_cluster(record, prod) -> None:
    other = make_cluster("other")
    load_nodes(other, [node_object("o-gpu", {GPU: "H100"}), node_object("o-cpu", {})])
    # Calls of both clusters in turn: the log hands out their node ids interleaved.
    for i in range(3):
        record(1, "ml", {}, [f"gpu-{i % 2 + 1}", "cpu-1"], name=f"p{i}")
        record(1, "ml", {}, ["o-cpu", "o-gpu"], name=f"o{i}", cluster="other")
    space = recorded.node_space("prod")
    assert {n for n in space.names if n} == {"gpu-1", "gpu-2", "cpu-1"}
    assert "" in space.names  # ids of the other cluster in between
    result = replay(draft_from_policy({**DRAFT, "cluster": None}), days=7, cluster=None)
    # In prod every A100 candidate is lost; in other, o-gpu (an H100) still passes.
    by_cluster = {(r["cluster"], r.get("to_zero", 0)) for r in result["by_namespace"]}
    assert ("prod", 3) in by_cluster
    assert ("other", 0) in by_cluster
    assert result["gone_nodes"]["nodes"] == 0


def test_the_bound_holds_for_candidate_sets_streamed_past_it(record, settings) -> None:
    settings.REPLAY_MAX_SHAPES = 2
    record(1, "ml", {}, ["gpu-1"])
    record(1, "ml", {}, ["gpu-2"])
    assert replay(draft_from_policy(DRAFT), days=7, cluster=None)["judged_shapes"] == 2
    record(1, "ml", {}, ["gpu-1", "gpu-2"])  # one key, a third candidate set
    from core.errors import ContentError

    with pytest.raises(ContentError) as refused:
        replay(draft_from_policy(DRAFT), days=7, cluster=None)
    assert "more than 2 distinct recorded pod shapes" in str(refused.value.errors)


def test_progress_counts_the_calls_of_the_changed_shapes(record) -> None:
    record(4, "ml", {}, ["gpu-1"])
    record(2, "ml", {}, ["gpu-2"])
    record(7, "web", {}, ["cpu-1"])
    seen: list[tuple[int, int]] = []
    replay(
        draft_from_policy(DRAFT), days=7, cluster=None, progress=lambda d, t: seen.append((d, t))
    )
    assert seen[-1] == (6, 6)
    assert all(total == 6 and done <= total for done, total in seen)


@pytest.mark.parametrize(
    "ids",
    [[], [5], [5, 6, 7], [3, 9, 10, 11, 40], list(range(100, 600, 3)), list(range(7, 900))],
)
def test_a_stored_candidate_list_becomes_the_mask_of_its_ids(ids) -> None:
    from decisions import codec

    base = 3
    # As rows are written now (the smallest format) and as older rows were (ranges).
    for stored in (codec.pack_candidates(ids), codec.pack(codec.to_ranges(ids))):
        mask = recorded.candidate_mask(stored, base)
        assert [i + base for i in range(mask.bit_length()) if mask >> i & 1] == sorted(ids)
