"""The portal's verdict on the pods of the inventory, now: Pending pods and the nodes its
policies leave them, bound pods on nodes its enforce policies reject, which Pending pods a
new snapshot frees, and which ones kube-scheduler holds under older rules.

Pure, and made of the calls the extender makes for a pod (``ClusterEvaluator.active`` and
``table``, then ``filter_names`` over the cluster's nodes), so a Pending pod's verdict here is
the answer ``/filter`` and ``POST /api/v1/simulate/`` give for it. Pods of one workload select
the same policies: the filter runs once per distinct set of active policies, not per pod.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.evaluate import UNKNOWN, filter_names
from engine.pods import PodFacts
from engine.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class PendingVerdict:
    """What the portal's enforce policies leave a pod among the cluster's nodes."""

    nodes: int
    passing: frozenset[str]
    # The one reason kube-scheduler gets per rejected node (``<policy>/<rule>``) -> nodes.
    reasons: dict[str, int]
    # The enforce policies that decided it, (name, version): the rules the verdict is under.
    rules: tuple[tuple[str, int], ...] = ()

    @property
    def held(self) -> bool:
        """True when the portal leaves the pod no node at all."""
        return self.nodes > 0 and not self.passing


@dataclass(frozen=True, slots=True)
class Violation:
    """A bound pod on a node that the enforce policies selecting it now reject."""

    node: str
    # Every failing enforce rule, ``<policy>/<rule>``, in wire order (the first is the one
    # kube-scheduler would be told).
    rules: tuple[str, ...]


def judge_pending(cluster: ClusterSnapshot, pods: Iterable[PodFacts]) -> list[PendingVerdict]:
    """The verdict for each pod over every node of the cluster's inventory, in order."""
    evaluator = cluster.evaluator
    names = evaluator.nodes.names
    by_set: dict[tuple[int, ...], PendingVerdict] = {}
    verdicts = []
    for pod in pods:
        positions = evaluator.active(pod)
        verdict = by_set.get(positions)
        if verdict is None:
            table = evaluator.table(positions)
            outcome = filter_names(
                table,
                names,
                unknown_node_action=cluster.unknown_node_action,
                cluster=cluster.name,
                dry_run=False,
            )
            verdict = PendingVerdict(
                nodes=len(names),
                passing=frozenset(outcome.passed),
                reasons=dict(Counter(outcome.rejected.values())),
                rules=tuple((policy.name, policy.version) for policy in table.enforce),
            )
            by_set[positions] = verdict
        verdicts.append(verdict)
    return verdicts


@dataclass(frozen=True, slots=True)
class RejectingScope:
    """Where one enforce policy's violations can be: pods of ``namespaces`` (None: every
    namespace) carrying ``match_labels``, on ``nodes`` (None: any node of the cluster)."""

    namespaces: frozenset[str] | None
    match_labels: tuple[tuple[str, str], ...]
    nodes: frozenset[str] | None


def rejecting_scopes(cluster: ClusterSnapshot) -> list[RejectingScope]:
    """Per enforce policy that rejects some node: the pods it could hold in violation. Only
    pods in one of these scopes need to be read and judged (``judge_bound`` still decides,
    with every policy that selects the pod)."""
    evaluator = cluster.evaluator
    total = len(evaluator.nodes)
    scopes = []
    for position, policy in enumerate(evaluator.policies):
        if not (policy.enforce and policy.filters):
            continue
        table = evaluator.table((position,))
        rejected = frozenset(name for name, reason in table.reject.items() if reason is not None)
        if not rejected:
            continue
        scopes.append(
            RejectingScope(
                namespaces=policy.namespaces or None,
                match_labels=policy.selector.match_labels,
                nodes=None if len(rejected) == total else rejected,
            )
        )
    return scopes


def judge_bound(
    cluster: ClusterSnapshot, pods: Iterable[tuple[PodFacts, str]]
) -> list[Violation | None]:
    """For each (pod, its node): the violation, or None when the node passes (or is not in
    the inventory, where nothing can be judged)."""
    evaluator = cluster.evaluator
    out: list[Violation | None] = []
    for pod, node in pods:
        table = evaluator.table(evaluator.active(pod))
        reason = table.reject.get(node, UNKNOWN)
        if reason is None or reason is UNKNOWN:
            out.append(None)
            continue
        rules = tuple(f"{policy}/{rule}" for policy, rule in table.reject_rules.get(node, ()))
        out.append(Violation(node=node, rules=rules or (reason,)))
    return out


def freed(
    before: ClusterSnapshot | None, after: ClusterSnapshot, pods: Sequence[PodFacts]
) -> list[frozenset[str]]:
    """Per pod, the nodes that pass it under ``after`` and did not under ``before``: a pod with
    any is one a published change freed (kube-scheduler must retry it to notice)."""
    if before is None:
        return [frozenset() for _ in pods]
    old = judge_pending(before, pods)
    new = judge_pending(after, pods)
    return [n.passing - o.passing for o, n in zip(old, new, strict=True)]


# In kube-scheduler's unschedulable message ("0/3 nodes are available: 2 Insufficient cpu,
# 1 <policy>/<rule>. preemption: ..."), where a count of nodes is followed by a reason of the
# portal: a policy name (a DNS label) and a slash. kube-scheduler's own reasons never start so.
_PORTAL_COUNT = re.compile(r"(?:: |, )(\d+) (?=[a-z0-9](?:[-a-z0-9]*[a-z0-9])?/)")


def held_under_older_rules(verdict: PendingVerdict, message: str) -> bool:
    """True when kube-scheduler holds a pod unschedulable with a ``message`` naming rejections
    by the portal that the rules in force (``verdict``) cannot have given, while those rules
    leave the pod some node: the pod was last tried under older rules and must be retried.

    A rejection is explained by the rules in force when they give the same reason to at least
    as many nodes as the message counts (kube-scheduler counts only the nodes it asked the
    extender about, never more). A message naming no reason of the portal says the portal did
    not hold the pod; nothing is known against it (docs/operations.md, "Requeue after a change").
    """
    if not verdict.passing or not message:
        return False
    # What follows is preemption's own summary; only the filter's part names rejections.
    text = message.split(" preemption: ", 1)[0]
    for match in _PORTAL_COUNT.finditer(text):
        count, rest = int(match.group(1)), text[match.end() :]
        if not any(
            rest.startswith(reason) and rest[len(reason) : len(reason) + 1] in ("", ",", ".")
            for reason, nodes in verdict.reasons.items()
            if nodes >= count
        ):
            return True
    return False
