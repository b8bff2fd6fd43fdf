"""Judging a repository's expectations offline, with the engine the extender runs.

The folder's nodes, label assignments and policies become a snapshot through
``engine.sources.snapshot_from_sources`` — what every extender process builds from the
database's contents — and each enabled expectation is judged by ``engine.expectations.outcomes``,
the function the portal's dashboard, apply and guard use. Same inputs, same verdicts
(tests/portalctl/test_parity.py runs a folder both ways).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.expectations import expectation_spec, outcomes
from engine.quantities import to_base_units
from engine.snapshot import ClusterSettings, NodeRecord, Snapshot
from engine.sources import snapshot_from_sources, sources_document
from portalctl.documents import Entry, Repository


@dataclass(frozen=True)
class Result:
    """One expectation in one cluster (``cluster`` is empty when the expectation covers no
    cluster at all)."""

    name: str
    cluster: str
    ok: bool
    message: str
    file: str
    line: int
    skipped: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cluster": self.cluster,
            "ok": self.ok,
            "skipped": self.skipped,
            "message": self.message,
            "file": self.file,
            "line": self.line,
        }


def node_record(obj: Mapping[str, Any]) -> NodeRecord:
    """What the inventory stores of a v1 Node (``inventory.node_objects``), for the snapshot."""
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    allocatable = {
        str(name): to_base_units(str(name), quantity)
        for name, quantity in (status.get("allocatable") or {}).items()
    }
    conditions = [
        {k: v for k, v in condition.items() if k != "lastHeartbeatTime"}
        for condition in status.get("conditions") or []
    ]
    return NodeRecord(
        name=metadata["name"],
        labels=dict(metadata.get("labels") or {}),
        allocatable=allocatable,
        conditions=conditions,
    )


def _setting(entry: Mapping[str, Any], key: str, default: Any) -> Any:
    value = entry.get(key)
    return default if value is None else value


def build_snapshot(repo: Repository) -> Snapshot:
    """The snapshot the extender would hold with the folder's contents (enabled objects only,
    as ``policies.compile.read_sources`` reads them)."""
    names = sorted(set(repo.nodes) | set(repo.clusters))
    clusters = []
    for name in names:
        entry = repo.clusters.get(name, {})
        clusters.append(
            ClusterSettings(
                name=name,
                unknown_node_action=_setting(entry, "unknown_node_action", "deny"),
                is_default=bool(_setting(entry, "is_default", False)),
            )
        )
    document = sources_document(
        revision=1,
        read_at=0.0,
        clusters=clusters,
        nodes={name: [node_record(o) for o in repo.nodes.get(name, [])] for name in names},
        policies=[(e.content, 1) for e in sorted(repo.policies, key=_name) if e.content["enabled"]],
        assignments=[
            (e.content["cluster"], e.content)
            for e in sorted(repo.assignments, key=_name)
            if e.content["enabled"]
        ],
    )
    return snapshot_from_sources(document, built_at=0.0)


def _name(entry: Entry) -> str:
    return str(entry.content["name"])


def run_expectations(repo: Repository) -> list[Result]:
    """Every expectation's verdict per cluster it covers, sorted by name and cluster; a
    disabled one is listed as skipped, as the portal does not judge it."""
    snapshot = build_snapshot(repo)
    results: list[Result] = []
    for entry in sorted(repo.expectations, key=_name):
        content = entry.content
        if not content["enabled"]:
            results.append(
                Result(
                    content["name"],
                    content["cluster"] or "",
                    True,
                    "disabled",
                    entry.file,
                    entry.line,
                    skipped=True,
                )
            )
            continue
        judged = outcomes(snapshot, [expectation_spec(content)])
        if not judged:
            results.append(
                Result(
                    content["name"],
                    content["cluster"] or "",
                    False,
                    "no cluster to judge it in (add nodes/<cluster>/)",
                    entry.file,
                    entry.line,
                )
            )
        for outcome in judged:
            results.append(
                Result(
                    outcome.name,
                    outcome.cluster,
                    outcome.ok,
                    outcome.message,
                    entry.file,
                    entry.line,
                )
            )
    return sorted(results, key=lambda r: (r.name, r.cluster))
