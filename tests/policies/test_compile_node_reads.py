"""A snapshot read keeps the node records of unchanged nodes (policies.compile._nodes): the
stored text of a node's columns, hashed with its name, says whether it changed, so a rebuild
after one node of thousands changed decodes that one. What these tests pin is that the
shortcut never serves an old record, and that anything stored is read."""

from __future__ import annotations

import pytest

from inventory.models import Node
from inventory.services import nodes_apply
from policies import compile as compiling
from tests.factories import make_cluster, node_object

pytestmark = pytest.mark.django_db


def records(cluster: str = "prod") -> dict[str, object]:
    document = compiling.read_sources()
    return {row[0]: row for row in document["nodes"][cluster]}


def test_an_unchanged_node_keeps_its_record_and_a_changed_one_is_read_again() -> None:
    compiling.forget()
    cluster = make_cluster("prod")
    nodes_apply(
        cluster=cluster,
        objects=[node_object(f"n-{i}", {"zone": "a"}) for i in range(5)],
        replace=True,
    )
    first = compiling._nodes({cluster.pk: "prod"}, whole=True)["prod"]
    nodes_apply(cluster=cluster, objects=[node_object("n-3", {"zone": "b"})], replace=False)
    second = compiling._nodes({cluster.pk: "prod"}, whole=True)["prod"]
    by_name = {r.name: r for r in second}
    assert by_name["n-3"].labels["zone"] == "b"
    assert by_name["n-3"] is not first[3]
    assert by_name["n-3"].digest != first[3].digest
    assert all(by_name[r.name] is r for r in first if r.name != "n-3")
    # A deleted node is not served from the kept records.
    Node.objects.filter(cluster=cluster, name="n-0").delete()
    third = compiling._nodes({cluster.pk: "prod"}, whole=True)["prod"]
    assert [r.name for r in third] == ["n-1", "n-2", "n-3", "n-4"]


def test_the_digest_is_the_fingerprint_and_reaches_the_snapshot_build() -> None:
    compiling.forget()
    cluster = make_cluster("prod")
    nodes_apply(cluster=cluster, objects=[node_object("n-1", {"zone": "a"})], replace=True)
    (record,) = compiling._nodes({cluster.pk: "prod"}, whole=True)["prod"]
    assert record.digest is not None
    assert record.fingerprint() == record.digest
    row = records()["n-1"]
    assert row[-1] == record.digest  # kept in the sources document (and so on disk)
    snapshot = compiling.build_snapshot()
    assert snapshot.clusters["prod"].fingerprints["n-1"] == record.digest


def test_a_node_whose_numbers_pass_64_bits_is_read() -> None:
    compiling.forget()
    cluster = make_cluster("prod")
    nodes_apply(cluster=cluster, objects=[node_object("big", {})], replace=True)
    huge = 2**80
    Node.objects.filter(name="big").update(allocatable_parsed={"cpu": huge}, labels={"a": "\x01"})
    (record,) = compiling._nodes({cluster.pk: "prod"}, whole=True)["prod"]
    assert record.allocatable == {"cpu": huge}
    assert record.labels == {"a": "\x01"}
