"""What a call's record carries for the decision log, filled once the answer is sent: every
rejected node with its reason (no cap), the pod's labels and requests, the candidate nodes."""

from __future__ import annotations

from typing import Any

import pytest

from decisions import log as decision_log
from decisions.records import CallRecord
from extender.verbs import pod_requests
from tests.extender.extender_support import call, extender  # noqa: F401
from tests.factories import load_nodes, make_cluster, make_policy, node_object

NODES = 120  # more than the 50 the log used to keep


@pytest.fixture
def records(db: Any, extender: None, monkeypatch: pytest.MonkeyPatch) -> list[CallRecord]:  # noqa: F811
    cluster = make_cluster("rec", is_default=True)
    load_nodes(
        cluster,
        [
            node_object(f"n{i}", {"nvidia.com/gpu.product": "A100" if i % 3 == 0 else "T4"})
            for i in range(NODES)
        ],
    )
    make_policy()
    captured: list[CallRecord] = []
    monkeypatch.setattr(decision_log, "submit", captured.append)
    return captured


POD = {
    "metadata": {"name": "trainer", "namespace": "ml", "uid": "u1", "labels": {"app": "train"}},
    "spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "3Gi"}}}]
    },
}


def test_a_filter_record_has_every_rejected_node_the_pod_and_the_candidates(
    records: list[CallRecord],
) -> None:
    names = [f"n{i}" for i in range(NODES)]
    response = call("/extender/rec/filter", {"Pod": POD, "NodeNames": names})
    assert response.status == 200
    (record,) = records
    rejected = dict(record.rejected)
    assert set(rejected) == {f"n{i}" for i in range(NODES) if i % 3}
    assert rejected == response.json()["FailedAndUnresolvableNodes"]
    assert record.pod_labels == {"app": "train"}
    assert record.pod_requests == {"cpu": "1500m", "memory": "3Gi"}
    assert record.candidates == names


def test_full_mode_and_prioritize_records_name_their_candidates(
    records: list[CallRecord],
) -> None:
    items = [node_object(f"x{i}", {"nvidia.com/gpu.product": "T4"}) for i in range(60)]
    response = call("/extender/rec/filter", {"Pod": POD, "Nodes": {"items": items}})
    assert response.status == 200
    assert call("/extender/rec/prioritize", {"Pod": POD, "NodeNames": ["n0", "n1"]}).status == 200
    full, prioritize = records
    assert full.candidates == [f"x{i}" for i in range(60)]
    assert len(full.rejected) == 60
    assert prioritize.candidates == ["n0", "n1"]
    assert prioritize.pod_requests == {"cpu": "1500m", "memory": "3Gi"}


def test_requests_of_several_containers_are_what_the_scheduler_counts() -> None:
    spec = (
        b'{"containers":[{"resources":{"requests":{"cpu":"500m","memory":"1Gi"}}},'
        b'{"resources":{"requests":{"cpu":"1"}}}],'
        b'"initContainers":[{"resources":{"requests":{"cpu":"2"}}}]}'
    )
    assert pod_requests(spec) == {"cpu": "2000m", "memory": str(1024**3)}
    assert pod_requests(b"") == {}
    assert pod_requests(b"[1, 2]") == {}
    assert pod_requests(b'{"containers": "nonsense"}') == {}
