"""One call's record (``CallRecord``): what a verb decided, for the metrics and the decision log.

Both binders write it: the extender's verbs (``filter``, ``prioritize``, ``preempt``, ``bind``)
and the own scheduler (``schedule``). A leaf: it imports nothing, so the verbs and the scheduler
build records without pulling in the writer, the store or the metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(slots=True)
class CallRecord:
    verb: str  # one of core.verbs.RECORDED_VERBS: an extender verb, or "schedule"
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
    policy_versions: Mapping[str, int] = field(default_factory=dict)
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
    # The pod as the call saw it, so a recorded decision can be explained again as it was and
    # replayed against a draft: its labels, its requests (resource -> quantity string) and the
    # candidate node names kube-scheduler sent (empty for verbs that send none).
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_requests: Mapping[str, str] = field(default_factory=dict)
    candidates: list[str] = field(default_factory=list)
    # What is left to work out once the answer is sent (the verb fills the fields above);
    # record_call runs it first.
    finish: Callable[[CallRecord], None] | None = None

    def complete(self) -> None:
        finish, self.finish = self.finish, None
        if finish is not None:
            finish(self)
