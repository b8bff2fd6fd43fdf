"""Pod records: the typed list decoder and a watch event's dict give the same record, and the
requests are the engine's count."""

from __future__ import annotations

import json

from engine.podspec import pod_requests
from inventory.pod_records import decode_pod_list, pod_record
from tests.support.pods import realistic_pod


def test_list_pages_and_watch_objects_make_the_same_records() -> None:
    pods = [realistic_pod(i, node=f"node-{i}" if i % 3 else None) for i in range(40)]
    pods[5]["spec"]["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "2"}}},
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
    ]
    pods[6]["spec"]["overhead"] = {"memory": "64Mi"}
    pods[7]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    pods[8]["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    raw = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": pods})
    records, version, token, skipped = decode_pod_list(raw.encode())
    assert (version, token, skipped) == ("7", None, 0)
    assert [r.columns() for r in records] == [pod_record(p).columns() for p in pods]  # type: ignore[union-attr]
    assert records[5].requests == pod_requests(pods[5]["spec"])
    assert records[6].requests["memory"] == 512 * 2**20 + 64 * 2**20  # container + overhead
    assert records[7].required_affinity is not None
    assert records[8].terminating


def test_a_page_with_an_odd_item_falls_back_and_skips_it() -> None:
    raw = json.dumps(
        {"metadata": {"resourceVersion": "9", "continue": "abc"}, "items": [1, realistic_pod(1)]}
    )
    records, version, token, skipped = decode_pod_list(raw.encode())
    assert (len(records), version, token, skipped) == (1, "9", "abc", 1)
