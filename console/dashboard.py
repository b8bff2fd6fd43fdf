"""What the dashboard shows: clusters, policies, extender traffic and problems.

Every panel is a fixed number of queries, whatever the size of the inventory or the decision
log (tests/console/ asserts the bound), so the landing page stays fast at 5,000 nodes and
millions of decisions: its traffic panel reads the log's hourly rollups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from console.managed import over_capacity_problems
from console.pod_cards import PodCard, pod_cards, pod_problems
from core.models import AuditEntry
from decisions import rollups
from decisions.models import shed_totals
from engine.assignment_checks import LabelIndex, assignment_warnings
from engine.assignments import node_selector_from_dict
from engine.errors import EngineValidationError
from engine.sampling import PassRatio, hidden_rules
from inventory import sources
from inventory.display import describe_inventory_age, plain_error
from inventory.models import Cluster, Node, QuarantinedObject, SyncState
from inventory.sync import inventory_age_seconds
from policies.compile import current_snapshot
from policies.expectations import current_outcomes
from policies.models import FilterRule, LabelAssignment, Policy
from policies.rollouts import held_rollouts

RECENT_CHANGES = 8
CHART_HOURS = 24


@dataclass
class ClusterRow:
    name: str
    source: str
    state: str
    badge: str  # ok | warn | bad | idle
    age: str
    error: str
    nodes: int
    ready: int
    url: str
    nodes_url: str


@dataclass
class Problem:
    message: str
    url: str
    fix: str


@dataclass
class Dashboard:
    clusters: list[ClusterRow]
    policy_counts: dict[str, int]
    changes: list[AuditEntry]
    traffic: dict[str, int]
    no_nodes_url: str
    top_rules: list[tuple[str, int]]
    hourly: list[tuple[str, int, int]]
    problems: list[Problem] = field(default_factory=list)
    # Every enabled expectation's outcome per cluster (name, cluster, ok, message).
    expectations: list[dict] = field(default_factory=list)
    # Per cluster with a pod inventory: Pending pods held, violations (console.pod_cards).
    pods: list[PodCard] = field(default_factory=list)
    # What the decision log kept and shed over 24 h, summed over clusters (kept, shed_clean,
    # shed_rejecting, failed).
    log_counts: dict[str, int] = field(default_factory=dict)

    @property
    def expectations_failing(self) -> list[dict]:
        return [e for e in self.expectations if not e["ok"]]


def _stale_after(cluster: Cluster) -> float:
    return 2 * max(cluster.sync_interval_seconds, 60) + 60


def _badge(cluster: Cluster, age: float | None) -> str:
    if cluster.sync_state in (SyncState.ERROR, SyncState.HELD):
        return "bad"
    if not sources.of(cluster).live:
        # An uploaded inventory does not go stale: nothing syncs it.
        return "ok" if age is not None else "idle"
    if age is None:
        return "idle"
    return "warn" if age > _stale_after(cluster) else "ok"


def cluster_rows(now: datetime) -> list[ClusterRow]:
    clusters = Cluster.objects.annotate(
        node_count=Count("nodes"), ready_count=Count("nodes", filter=Q(nodes__ready=True))
    ).order_by("name")
    rows = []
    for cluster in clusters:
        age = inventory_age_seconds(cluster, now=now)
        rows.append(
            ClusterRow(
                name=cluster.name,
                source=cluster.get_source_display(),
                state=cluster.get_sync_state_display(),
                badge=_badge(cluster, age),
                age=describe_inventory_age(cluster, now=now),
                # A sentence that says what to do, never a raw exception cut mid-word.
                error=plain_error(cluster.sync_error),
                nodes=cluster.node_count,
                ready=cluster.ready_count,
                url=reverse("admin:inventory_cluster_change", args=[cluster.pk]),
                nodes_url=reverse("admin:inventory_node_changelist")
                + f"?cluster__id__exact={cluster.pk}",
            )
        )
    return rows


def policy_counts() -> dict[str, int]:
    counts = Policy.objects.aggregate(
        enforce=Count("id", filter=Q(enabled=True, mode="enforce")),
        dry_run=Count("id", filter=Q(enabled=True, mode="dry-run")),
        disabled=Count("id", filter=Q(enabled=False)),
    )
    return {key: value or 0 for key, value in counts.items()}


def traffic(
    now: datetime,
) -> tuple[dict[str, int], list[tuple[str, int]], list[tuple[str, int, int]]]:
    """Calls, filter calls that left 0 nodes and the top rejecting rules over 24 hours, from the
    decision log's hourly rollups (a few rows per hour, never the decision table)."""
    data = rollups.traffic(now, hours=CHART_HOURS)
    # Each count says where it comes from: the own scheduler's attempts are no extender calls.
    by_verb, refused = data.get("calls_by_verb", {}), data.get("refused_by_verb", {})
    data["totals"] = {
        **data["totals"],
        "extender_day": data["totals"]["calls_day"] - by_verb.get("schedule", 0),
        "scheduler_day": by_verb.get("schedule", 0),
        "refused_filter": refused.get("filter", 0),
        "refused_schedule": refused.get("schedule", 0),
    }
    local = timezone.localtime
    hourly = [
        (local(moment).strftime("%H:00"), calls, refused)
        for moment, (calls, refused) in data["hourly"]
    ]
    return data["totals"], data["top_rules"], hourly


def problems(rows: list[ClusterRow], expectations: list[dict]) -> list[Problem]:
    found = []
    for row in rows:
        if row.badge == "bad":
            found.append(
                Problem(
                    f"Cluster {row.name}: {row.state}. {row.error}", row.url, "open the cluster"
                )
            )
        elif row.badge == "warn":
            found.append(
                Problem(
                    f"Cluster {row.name}: inventory is stale ({row.age}).",
                    row.url,
                    "check its sync",
                )
            )
    found.extend(_quarantined())
    nodes = _nodes_by_cluster()
    found.extend(_unknown_label_keys(nodes))
    found.extend(_assignment_problems(nodes))
    found.extend(_sampling_problems())
    listing = reverse("admin:policies_expectation_changelist")
    for outcome in expectations:
        if not outcome["ok"]:
            found.append(
                Problem(
                    f"Expectation {outcome['name']} fails in {outcome['cluster']}: "
                    f"{outcome['message']}",
                    f"{listing}?q={outcome['name']}",
                    "see the expectation",
                )
            )
    return found


QUARANTINE_SHOWN = 10


def _quarantined() -> list[Problem]:
    """Nodes and pods the inventory could not store (inventory.quarantine): one query."""
    held = QuarantinedObject.objects.select_related("cluster").order_by("-last_seen")
    return [
        Problem(
            f"Cluster {q.cluster.name}: {q} is not in the inventory (quarantined: {q.reason}); "
            "it is stored again with its next change.",
            reverse("admin:inventory_cluster_change", args=[q.cluster_id]),
            "fix the object in Kubernetes",
        )
        for q in held[:QUARANTINE_SHOWN]
    ]


NodesByCluster = dict[int, list[tuple[str, dict[str, str]]]]


def _nodes_by_cluster() -> NodesByCluster:
    """Every node's name and observed labels, per cluster id: one read for every check."""
    nodes: NodesByCluster = {}
    for cluster_id, name, labels in Node.objects.values_list(
        "cluster_id", "name", "labels"
    ).iterator(chunk_size=2000):
        nodes.setdefault(cluster_id, []).append((name, labels or {}))
    return nodes


def _unknown_label_keys(nodes: NodesByCluster) -> list[Problem]:
    """Label rules of enabled policies whose key no node of their clusters carries (typos)."""
    keys_by_cluster = {
        cluster_id: {key for _, labels in members for key in labels}
        for cluster_id, members in nodes.items()
    }
    every_key = set().union(*keys_by_cluster.values()) if keys_by_cluster else set()
    rules = (
        FilterRule.objects.filter(policy__enabled=True, kind="label", enabled=True)
        .select_related("policy", "policy__cluster")
        .order_by("policy__name", "position")
    )
    found = []
    for rule in rules:
        policy = rule.policy
        keys = keys_by_cluster.get(policy.cluster_id, set()) if policy.cluster_id else every_key
        if not keys or rule.key in keys or rule.operator == "DoesNotExist":
            continue
        where = "any cluster" if policy.cluster is None else f"cluster {policy.cluster.name}"
        found.append(
            Problem(
                f"Policy {policy.name}: label key {rule.key!r} is on no node of {where} (a typo?)",
                reverse("admin:policies_policy_change", args=[policy.pk]),
                "edit the policy",
            )
        )
    return found


def _assignment_problems(nodes: NodesByCluster) -> list[Problem]:
    """Enabled label assignments whose selector has a typo or labels no node: the checks the
    editor holds a save for (engine.assignment_checks), on what is saved."""
    every_node = [node for members in nodes.values() for node in members]
    indexes: dict[int | None, LabelIndex] = {}  # one per scope, shared by its assignments
    found: list[Problem] = []
    assignments = LabelAssignment.objects.filter(enabled=True).select_related("cluster")
    for assignment in assignments.order_by("name"):
        scope = nodes.get(assignment.cluster_id, []) if assignment.cluster_id else every_node
        if assignment.cluster_id not in indexes:
            indexes[assignment.cluster_id] = LabelIndex(scope)
        where = f" of cluster {assignment.cluster.name}" if assignment.cluster else ""
        try:
            selector = node_selector_from_dict(assignment.node_selector)
        except EngineValidationError:
            continue  # stored content is validated on write; nothing to judge here
        url = reverse("admin:policies_labelassignment_change", args=[assignment.pk])
        found.extend(
            Problem(f"Label assignment {assignment.name}: {warning.message}", url, "edit it")
            for warning in assignment_warnings(
                selector, scope, where=where, index=indexes[assignment.cluster_id]
            )
        )
    return found


def _sampling_problems() -> list[Problem]:
    """Enforce policies whose passing nodes kube-scheduler's default sampling likely hides from
    the extender (engine.sampling), per cluster: the policy as a whole, or its hidden rules
    when the whole passes no node. Counted once per compiled cluster, off the hot path."""
    snapshot = current_snapshot()
    hidden: list[PassRatio] = []
    for name in sorted(snapshot.clusters):
        entries = hidden_rules(snapshot.clusters[name])
        wholes = {entry.policy for entry in entries if not entry.rule}
        hidden.extend(e for e in entries if not e.rule or e.policy not in wholes)
    if not hidden:
        return []
    ids = dict(
        Policy.objects.filter(name__in={entry.policy for entry in hidden}).values_list("name", "pk")
    )
    return [
        Problem(
            entry.message(),
            reverse("admin:policies_policy_change", args=[ids[entry.policy]]),
            "see the policy",
        )
        for entry in hidden
        if entry.policy in ids
    ]


def held_rollout_problems() -> list[Problem]:
    """Staged rollouts a failing gate holds, and why (policies.rollouts)."""
    return [
        Problem(
            f"The rollout of {r['policy']} is held at {r['stage']}: {r['reason']}",
            reverse("admin:policies_policy_change", args=[r["pk"]]),
            "see the policy",
        )
        for r in held_rollouts()
    ]


def build(now: datetime | None = None) -> Dashboard:
    now = now or timezone.now()
    rows = cluster_rows(now)
    totals, top_rules, hourly = traffic(now)
    changes = list(
        AuditEntry.objects.select_related("actor").order_by("-created_at")[:RECENT_CHANGES]
    )
    expectations = current_outcomes()
    pods = pod_cards()
    return Dashboard(
        expectations=expectations,
        clusters=rows,
        policy_counts=policy_counts(),
        changes=changes,
        traffic=totals,
        no_nodes_url=reverse("admin:extender_decision_changelist") + "?outcome=no-nodes",
        top_rules=top_rules,
        hourly=hourly,
        problems=problems(rows, expectations)
        + [Problem(message, url, fix) for message, url, fix in pod_problems(pods)]
        + [Problem(message, url, fix) for message, url, fix in over_capacity_problems()]
        + held_rollout_problems(),
        pods=pods,
        log_counts=log_counts(now),
    )


def log_counts(now: datetime) -> dict[str, int]:
    """The decision log's kept and shed records over 24 hours (``DecisionShed``, a row per
    hour and cluster), summed over the clusters."""
    totals = {"kept": 0, "shed_clean": 0, "shed_rejecting": 0, "failed": 0}
    for counts in shed_totals(now - timedelta(hours=CHART_HOURS)).values():
        for key in totals:
            totals[key] += counts.get(key, 0)
    return totals
