"""Small stand-ins for the snapshot holder, for the metrics, health and refresh tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from decisions.records import CallRecord


@dataclass
class FakeCluster:
    last_success_at: float | None = None


@dataclass
class FakeSnapshot:
    revision: int
    built_at: float = field(default_factory=time.time)
    clusters: dict[str, FakeCluster] = field(default_factory=dict)


class FakeHolder:
    """Behaves like ``extender.holder.holder``: load() builds from a source or raises."""

    def __init__(self, snapshot: FakeSnapshot | None = None) -> None:
        self.snapshot = snapshot
        self.last_refresh_ok = time.time() if snapshot is not None else 0.0
        self.last_error = ""
        self.revision_in_db = snapshot.revision if snapshot is not None else 0
        self.load_error: Exception | None = None
        self.loads = 0

    def load(self) -> FakeSnapshot:
        if self.load_error is not None:
            self.last_error = str(self.load_error)
            raise self.load_error
        self.loads += 1
        self.snapshot = FakeSnapshot(revision=self.revision_in_db)
        self.last_refresh_ok = time.time()
        self.last_error = ""
        return self.snapshot


def call_record(**overrides: Any) -> CallRecord:
    """A filter call on cluster ``c1`` that rejected one of three nodes."""
    values: dict[str, Any] = {
        "verb": "filter",
        "cluster": "c1",
        "mode": "names",
        "pod_namespace": "ml",
        "pod_name": "trainer-0",
        "pod_uid": "8f1c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f",
        "nodes_in": 3,
        "nodes_out": 2,
        "duration_seconds": 0.00042,
        "snapshot_revision": 7,
        "policy_versions": {"gpu-only": 3},
        "rejected": [("node-c", "gpu-only: label gpu In [a100]: node has no gpu label")],
        "rejections_by_rule": {("gpu-only", "filter_rules[0]"): 1},
        "dry_run_rejections_by_rule": {("spread", "filter_rules[1]"): 2},
        "dry_run_rejected": [("node-a", "spread: ..."), ("node-b", "spread: ...")],
        "top_scores": [],
    }
    values.update(overrides)
    return CallRecord(**values)
