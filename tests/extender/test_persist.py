"""A restarted extender process serves the snapshot kept on disk, without the database."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from core.revisions import bump_snapshot_revision
from engine.evaluate import filter_names
from engine.pods import PodFacts
from extender import persist
from extender.holder import SnapshotHolder
from policies.services import policy_create
from tests.factories import load_nodes, make_cluster, node_object

POD = PodFacts(namespace="ml", name="p", uid="u", labels={})


def answers(holder: SnapshotHolder) -> list[str]:
    assert holder.snapshot is not None
    cluster = holder.snapshot.clusters["c"]
    table = cluster.evaluator.table(cluster.evaluator.active(POD))
    return filter_names(table, ["n1", "n2"], unknown_node_action="deny", cluster="c").passed


@pytest.fixture
def stored(db: Any) -> None:
    cluster = make_cluster("c")
    load_nodes(cluster, [node_object("n1", {"zone": "a"}), node_object("n2", {"zone": "b"})])
    policy_create(
        actor=None,
        data={
            "name": "zone-a",
            "filter_rules": [{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        },
    )


@pytest.mark.usefixtures("stored")
def test_a_new_process_rebuilds_the_same_snapshot_from_disk_without_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = SnapshotHolder()
    built = first.load()
    assert persist.sources_path().exists()

    def no_database(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("restore must not touch the database")

    monkeypatch.setattr("policies.compile.read_sources", no_database)
    restarted = SnapshotHolder()
    restored = restarted.restore()
    assert restored is not None
    assert restored.revision == built.revision
    assert restarted.from_disk
    assert answers(restarted) == answers(first) == ["n1"]
    # Dated by the read it came from, so /readyz can tell how old it really is.
    assert restored.built_at <= built.built_at


def test_nothing_on_disk_or_an_unreadable_file_restores_nothing(db: Any) -> None:
    assert SnapshotHolder().restore() is None
    path = persist.sources_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"format": 1, "revis')
    assert SnapshotHolder().restore() is None
    path.write_bytes(b'{"format": 999}')
    assert SnapshotHolder().restore() is None


@pytest.mark.usefixtures("stored")
def test_the_file_is_replaced_whole(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persist, "KEEP_UNREFERENCED_SECONDS", -1.0)  # no grace for old files
    holder = SnapshotHolder()
    holder.load()
    first = persist.sources_path().read_bytes()
    policy_create(actor=None, data={"name": "more", "filter_rules": []})
    holder.load()
    second = persist.sources_path().read_bytes()
    assert first != second
    # The index and the node file of the cluster as last read, nothing else (no temporary
    # files, no node file of an earlier read).
    assert holder.snapshot is not None
    inputs = holder.snapshot.clusters["c"].inputs
    assert inputs is not None
    leftovers = sorted(p.name for p in persist.sources_path().parent.iterdir())
    assert leftovers == sorted([persist.FILE_NAME, persist.node_file_name("c", inputs.facts)])


@pytest.mark.usefixtures("stored")
def test_node_files_another_process_may_name_are_kept_for_a_while() -> None:
    """Processes sharing the directory: one's index names files the other no longer does."""
    first, second = SnapshotHolder(), SnapshotHolder()
    first.load()
    directory = persist.sources_path().parent
    older = {p.name for p in directory.glob("nodes-*.json")}
    bump_snapshot_revision("every cluster's facts")
    second.load()  # its index names new node files
    newer = {p.name for p in directory.glob("nodes-*.json")} - older
    assert older
    assert newer
    assert older <= {p.name for p in directory.glob("nodes-*.json")}  # kept: first names them

    for name in older:  # long unreferenced: removed at the next save
        os.utime(directory / name, (time.time() - 3600, time.time() - 3600))
    bump_snapshot_revision("every cluster's facts again")
    second.load()
    remaining = {p.name for p in directory.glob("nodes-*.json")}
    assert not older & remaining
