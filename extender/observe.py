"""What every extender call reports: metrics and the decision log.

The handler builds one :class:`CallRecord` per request, after the response body is built, and
passes it to :func:`record_call`. That must stay cheap: no I/O on the caller's thread (the
decision log is queued and written in batches by a background thread).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from extender import decisions, metrics, refresh

logger = logging.getLogger(__name__)


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
    # (node, wire reason) for rejected nodes; the handler caps the list
    rejected: list[tuple[str, str]] = field(default_factory=list)
    # node -> every failing rule with what the node has (the snapshot's immutable map), looked
    # up when the decision is written, off the request path; None: the wire reason says it all
    rejected_detail: dict[str, str] | None = None
    # (policy, rule label) -> number of nodes it rejected in this call
    rejections_by_rule: dict[tuple[str, str], int] = field(default_factory=dict)
    # same for dry-run policies: what they would have rejected
    dry_run_rejections_by_rule: dict[tuple[str, str], int] = field(default_factory=dict)
    dry_run_rejected: list[tuple[str, str]] = field(default_factory=list)
    # (host, score), best first, capped
    top_scores: list[tuple[str, int]] = field(default_factory=list)
    # What is left to work out once the answer is sent (the verb fills the fields above);
    # record_call runs it first.
    finish: Callable[[CallRecord], None] | None = None

    def complete(self) -> None:
        finish, self.finish = self.finish, None
        if finish is not None:
            finish(self)


def record_call(call: CallRecord) -> None:
    """Report one extender call to metrics and the decision log.

    A few counter increments, one histogram observation and a non-blocking queue put; never
    raises, since the response is already built and must still be sent.
    """
    try:
        call.complete()
        metrics.observe_call(call)
        decisions.submit(call)
    except Exception:
        logger.exception("recording an extender call failed")


def record_error(verb: str, cluster: str, kind: str) -> None:
    """Count one rejected request (kind: bad_json, bad_request, unknown_cluster, too_large, ...).

    Verb and cluster come from the URL; values the portal does not know are counted as
    ``other`` so that hostile URLs cannot create unbounded metric series.
    """
    try:
        holder = refresh.get_holder()
        snapshot = holder.snapshot if holder is not None else None
        known = getattr(snapshot, "clusters", None) or ()
        metrics.observe_error(verb, cluster, kind, known)
    except Exception:
        logger.exception("recording an extender error failed")
