"""What every extender call reports: metrics and the decision log.

The handler builds one :class:`CallRecord` per request, after the response body is built, and
passes it to :func:`record_call`. That must stay cheap: no I/O on the caller's thread (the
decision log is queued and written in batches by a background thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CallRecord:
    verb: str  # filter | prioritize | preempt | bind
    cluster: str
    mode: str  # "names" (NodeNames in) or "full" (Nodes in)
    pod_namespace: str
    pod_name: str
    pod_uid: str
    nodes_in: int
    nodes_out: int
    duration_seconds: float
    snapshot_revision: int
    # policy name -> version, for the active policies (enforce and dry-run)
    policy_versions: dict[str, int] = field(default_factory=dict)
    # (node, reason) for rejected nodes; the handler caps the list
    rejected: list[tuple[str, str]] = field(default_factory=list)
    # (policy, rule label) -> number of nodes it rejected in this call
    rejections_by_rule: dict[tuple[str, str], int] = field(default_factory=dict)
    # same for dry-run policies: what they would have rejected
    dry_run_rejections_by_rule: dict[tuple[str, str], int] = field(default_factory=dict)
    dry_run_rejected: list[tuple[str, str]] = field(default_factory=list)
    # (host, score), best first, capped
    top_scores: list[tuple[str, int]] = field(default_factory=list)


def record_call(call: CallRecord) -> None:
    """Report one extender call to metrics and the decision log."""


def record_error(verb: str, cluster: str, kind: str) -> None:
    """Count one rejected request (kind: bad_json, bad_request, unknown_cluster, too_large, ...)."""
