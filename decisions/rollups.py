"""Hourly rollups of the decision log, upserted with every batch, and the reads built on them.

The dashboard's traffic panel and the dry-run report read only these rows (a few per hour,
cluster and rule), never the decision table. Kinds are listed on ``DecisionRollup``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Sum

from core.verbs import NODE_CHOOSING_VERBS
from decisions import codec

# An ``decisions.records.CallRecord``: not imported, so the console, which reads the rollups, stays
# clear of the extender's request path (the import contracts).
CallRecord = Any
CALL, NO_NODES, REJECT, DRY_RUN, STRAND = "call", "no-nodes", "reject", "dry-run", "strand"
DRY_CALLS = "dry-calls"  # filter calls in which a dry-run policy would reject a node
# (hour, cluster, kind, verb, policy, rule)
Key = tuple[datetime, str, str, str, str, str]


class Counts:
    """What a batch adds to the rollups: calls and nodes per key, and the last pod seen."""

    def __init__(self) -> None:
        self.calls: Counter[Key] = Counter()
        self.nodes: Counter[Key] = Counter()
        self.sample: dict[Key, str] = {}

    def add(self, key: Key, nodes: int = 0, pod: str = "") -> None:
        self.calls[key] += 1
        self.nodes[key] += nodes
        if pod:
            self.sample[key] = pod


def hour_of(at: float) -> datetime:
    return datetime.fromtimestamp(at - at % 3600, tz=UTC)


def _by_rule(pairs: Iterable[tuple[str, str]], *, dry: bool) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for _, reason in pairs:
        for wire in codec.wire_reasons(reason) if dry else (reason,):
            counts[codec.split_reason(wire)] += 1
    return counts


def stranded_by(call: CallRecord) -> list[str]:
    """Dry-run policies that, enforced, would have left this filter call with 0 nodes: every node
    the enforced policies let through is one the policy would reject."""
    if call.verb not in NODE_CHOOSING_VERBS or call.nodes_out <= 0 or not call.dry_run_rejected:
        return []
    rejected = {name for name, _ in call.rejected}
    per_policy: Counter[str] = Counter()
    for name, detail in call.dry_run_rejected:
        if name in rejected:
            continue
        for policy in {codec.split_reason(w)[0] for w in codec.wire_reasons(detail)}:
            per_policy[policy] += 1
    return sorted(p for p, n in per_policy.items() if n >= call.nodes_out)


def count_batch(batch: list[tuple[float, CallRecord]]) -> Counts:
    counts = Counts()
    for at, call in batch:
        hour, cluster, verb = hour_of(at), call.cluster[:63], call.verb[:16]
        pod = f"{call.pod_namespace}/{call.pod_name}"[:510].replace("\x00", "")
        counts.add((hour, cluster, CALL, verb, "", ""))
        if verb in NODE_CHOOSING_VERBS and call.nodes_in > 0 and call.nodes_out == 0:
            counts.add((hour, cluster, NO_NODES, verb, "", ""), pod=pod)
        enforced: Any = call.rejections_by_rule or _by_rule(call.rejected, dry=False)
        if len(call.rejected) > sum(enforced.values()):
            enforced = _by_rule(call.rejected, dry=False)
        for (policy, rule), nodes in enforced.items():
            counts.add((hour, cluster, REJECT, verb, policy[:100], rule[:500]), nodes, pod)
        dry: Any = _by_rule(call.dry_run_rejected, dry=True)
        if call.dry_run_rejections_by_rule and sum(call.dry_run_rejections_by_rule.values()) > sum(
            dry.values()
        ):
            dry = call.dry_run_rejections_by_rule
        for (policy, rule), nodes in dry.items():
            counts.add((hour, cluster, DRY_RUN, verb, policy[:100], rule[:500]), nodes, pod)
        for policy in sorted({policy for policy, _ in dry}):
            counts.add((hour, cluster, DRY_CALLS, verb, policy[:100], ""))
        for policy in stranded_by(call):
            counts.add((hour, cluster, STRAND, verb, policy[:100], ""), pod=pod)
    return counts


UPSERT = (
    "INSERT INTO extender_decisionrollup "
    "(hour, cluster, kind, verb, policy, rule, calls, nodes, sample) VALUES {values} "
    "ON CONFLICT (hour, cluster, kind, verb, policy, rule) DO UPDATE SET "
    "calls = extender_decisionrollup.calls + EXCLUDED.calls, "
    "nodes = extender_decisionrollup.nodes + EXCLUDED.nodes, "
    "sample = CASE WHEN EXCLUDED.sample = '' THEN extender_decisionrollup.sample "
    "ELSE EXCLUDED.sample END"
)
UPSERT_ROWS = 200


def upsert(counts: Counts) -> None:
    """Add ``counts`` to the rollups (keys in a fixed order: concurrent writers do not
    deadlock)."""
    adapt = connection.ops.adapt_datetimefield_value
    keys = sorted(counts.calls)
    with connection.cursor() as cursor:
        for i in range(0, len(keys), UPSERT_ROWS):
            chunk = keys[i : i + UPSERT_ROWS]
            params: list[Any] = []
            for key in chunk:
                hour, *rest = key
                params.extend(
                    (
                        adapt(hour),
                        *rest,
                        counts.calls[key],
                        counts.nodes[key],
                        counts.sample.get(key, ""),
                    )
                )
            values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
            cursor.execute(UPSERT.format(values=values), params)


# --- reads ------------------------------------------------------------------------------------


def _since(hours: int, now: datetime) -> datetime:
    now = now.astimezone(UTC)
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)


def traffic(now: datetime, hours: int = 24) -> dict[str, Any]:
    """The dashboard's traffic: calls last hour and over ``hours``, filter calls, filter calls
    that left 0 nodes, calls and 0-node calls per hour, the rules that rejected most nodes."""
    from decisions.models import DecisionRollup

    start = _since(hours, now)
    this_hour = _since(1, now)
    rows = (
        DecisionRollup.objects.filter(hour__gte=start, kind__in=(CALL, NO_NODES))
        .values("hour", "kind", "verb")
        .annotate(total=Sum("calls"))
    )
    hourly: dict[datetime, list[int]] = {start + timedelta(hours=i): [0, 0] for i in range(hours)}
    calls_hour = calls_day = filters_day = refused_day = 0
    # Per verb: the own scheduler's attempts (``schedule``) are not extender calls.
    calls_by_verb: Counter[str] = Counter()
    refused_by_verb: Counter[str] = Counter()
    for row in rows:
        hour = row["hour"].astimezone(UTC)
        bucket = hourly.get(hour)
        if row["kind"] == CALL:
            calls_by_verb[row["verb"]] += row["total"]
        else:
            refused_by_verb[row["verb"]] += row["total"]
        if row["kind"] == CALL:
            calls_day += row["total"]
            filters_day += row["total"] if row["verb"] == "filter" else 0
            if hour >= this_hour:
                calls_hour += row["total"]
            if bucket is not None:
                bucket[0] += row["total"]
        else:
            refused_day += row["total"]
            if bucket is not None:
                bucket[1] += row["total"]
    top = (
        DecisionRollup.objects.filter(hour__gte=start, kind=REJECT)
        .values("policy", "rule")
        .annotate(total=Sum("nodes"))
        .order_by("-total", "policy", "rule")[:5]
    )
    return {
        "totals": {
            "calls_hour": calls_hour,
            "calls_day": calls_day,
            "filters_day": filters_day,
            "refused_day": refused_day,
        },
        "calls_by_verb": dict(calls_by_verb),
        "refused_by_verb": dict(refused_by_verb),
        "hourly": sorted(hourly.items()),
        "top_rules": [
            (f"{r['policy']}/{r['rule']}" if r["policy"] else r["rule"], r["total"]) for r in top
        ],
    }


def dry_run(policy: str, now: datetime, hours: int = 24) -> dict[str, Any]:
    """What ``policy`` would have rejected, per rule, in the last hour and ``hours``; filter
    calls it would have left with 0 nodes; sample pods."""
    from decisions.models import DecisionRollup

    start, this_hour = _since(hours, now), _since(1, now)
    rows = DecisionRollup.objects.filter(
        kind__in=(DRY_RUN, STRAND, DRY_CALLS), policy=policy, hour__gte=start
    ).values_list("kind", "rule", "hour", "calls", "nodes", "sample")
    rules: dict[str, dict[str, Any]] = {}
    stranded: dict[str, Any] = {"day": 0, "hour": 0, "pods": []}
    samples: list[tuple[datetime, str]] = []
    total_calls = 0
    for kind, rule, hour, calls, nodes, sample in rows:
        recent = hour >= this_hour
        if kind == DRY_CALLS:
            total_calls += calls
            continue
        if kind == STRAND:
            stranded["day"] += calls
            stranded["hour"] += calls if recent else 0
            if sample and sample not in stranded["pods"]:
                stranded["pods"].append(sample)
            continue
        entry = rules.setdefault(
            rule, {"reason": f"{policy}/{rule}", "rule": rule, "day": 0, "hour": 0, "calls": 0}
        )
        entry["day"] += nodes
        entry["calls"] += calls
        entry["hour"] += nodes if recent else 0
        if sample:
            samples.append((hour, sample))
    pods: list[str] = []
    for _, sample in sorted(samples, reverse=True):
        if sample not in pods:
            pods.append(sample)
    ordered = sorted(rules.values(), key=lambda e: (-e["day"], e["rule"]))
    return {
        "rules": ordered,
        "calls": total_calls,
        "nodes_day": sum(e["day"] for e in ordered),
        "nodes_hour": sum(e["hour"] for e in ordered),
        "stranded": stranded,
        "sample_pods": pods,
    }


def purge_before(cutoff: datetime) -> int:
    from decisions.models import DecisionRollup

    deleted, _ = DecisionRollup.objects.filter(hour__lt=cutoff).delete()
    return deleted
