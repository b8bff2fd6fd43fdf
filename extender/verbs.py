"""The extender verbs: filter, prioritize, preempt, bind, decided from the snapshot.

Each takes the decoded request and the cluster's snapshot and returns the reply body and the
CallRecord for metrics and the decision log. Names mode (``NodeNames``) reads the inventory in
the snapshot; full mode (``Nodes``) judges the request's node objects (plus label assignments)
and echoes the passing ones unchanged.
"""

from __future__ import annotations

import logging

# What collections.Counter counts with: the C loop where the interpreter has one, its own Python
# loop elsewhere (collections chooses).
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import Any

import orjson
from msgspec import Raw

from core.verbs import BIND, FILTER, PREEMPT, PRIORITIZE
from decisions.records import CallRecord
from engine.evaluate import (
    ALLOW,
    ClusterEvaluator,
    FilterOutcome,
    PolicySetTable,
    RuleKey,
    dry_run_rejections,
    filter_names,
)
from engine.facts import NodeFacts, node_facts
from engine.pods import PodFacts, pod_facts_from_dict
from engine.podspec import pod_requests as podspec_requests
from engine.quantities import QuantityError, to_base_units
from engine.snapshot import ClusterSnapshot, Snapshot
from extender import managed, wire
from extender.config.scheduler_config import served_scheduler_names
from inventory.binding import BindError, BindingFailed, fit_refusal
from resources import binding

# How many top scores one decision-log entry keeps (rejected nodes: all of them).
MAX_RECORDED_SCORES = 10
MAX_CACHED_QUANTITIES = 100_000

logger = logging.getLogger(__name__)
_quantities: dict[tuple[str, str], int] = {}


@dataclass(slots=True)
class Reply:
    body: bytes
    record: CallRecord


def _record(
    verb: str,
    cluster: ClusterSnapshot,
    snapshot: Snapshot,
    mode: str,
    pod: PodFacts,
    nodes_in: int,
    nodes_out: int,
    table: PolicySetTable | None,
) -> CallRecord:
    # The pod's labels are the decoded map itself (never changed): no copy on the hot path.
    return CallRecord(
        pod_labels=pod.labels,
        verb=verb,
        cluster=cluster.name,
        mode=mode,
        pod_namespace=pod.namespace,
        pod_name=pod.name,
        pod_uid=pod.uid,
        nodes_in=nodes_in,
        nodes_out=nodes_out,
        duration_seconds=0.0,
        snapshot_revision=snapshot.revision,
        # The table's own map (never changed once built): the decision-log writer copies it.
        policy_versions=table.versions if table is not None else {},
    )


def _count_rules(
    names: Iterable[str], rule_ids: dict[str, int], table: PolicySetTable
) -> dict[RuleKey, int]:
    by_id: dict[int | None, int] = {}
    # Rejected nodes share a few rule combinations, numbered when the table was built: count the
    # numbers (small ints, cheap, counted in C) and expand each combination once.
    _count_elements(by_id, map(rule_ids.get, names))
    by_id.pop(None, None)  # not rejected by a rule (an unknown node)
    counts: dict[RuleKey, int] = {}
    for ident, times in by_id.items():
        assert ident is not None  # popped above
        for key in table.rule_sets[ident]:
            counts[key] = counts.get(key, 0) + times
    return counts


def _count_reasons(rejected: dict[str, str], table: PolicySetTable) -> dict[RuleKey, int]:
    """Rejected nodes per (policy, rule) of their wire reason; unknown nodes are not counted."""
    by_reason: dict[str, int] = {}
    # The reasons are a few interned strings: counting them in C beats any per-node lookup.
    _count_elements(by_reason, rejected.values())
    rules = table.reason_rules
    return {rules[reason]: times for reason, times in by_reason.items() if reason in rules}


def _note_filter(
    names: list[str],
    outcome: FilterOutcome,
    table: PolicySetTable,
    spec: Raw | None,
    record: CallRecord,
) -> None:
    """What the log and the metrics keep of a filter, worked out after the answer is sent
    (``CallRecord.finish``): the dry-run verdicts, the counts per rule, every rejected node with
    its reason, the candidates and the pod's requests."""
    outcome.dry_run_rejected = dry_run_rejections(table, names, outcome.rejected)
    rejected = outcome.rejected
    if rejected:
        record.rejected = list(rejected.items())
        # The log keeps the full story (every failing rule, what the node has), looked up on the
        # way to the decision-log writer.
        record.rejected_detail = table.reject_detail
        record.rejections_by_rule = _count_reasons(rejected, table)
    dry = outcome.dry_run_rejected
    if dry:
        record.dry_run_rejected = list(dry.items())
        record.dry_run_rejections_by_rule = _count_rules(dry, table.dry_reject_rule_ids, table)
    record.candidates = names
    record.pod_requests = pod_requests(spec)


def _note_scores(names: list[str], scores: list[int], spec: Raw | None, record: CallRecord) -> None:
    """The best scores, the candidates and the pod's requests for the log, worked out after
    the answer is sent."""
    record.top_scores = _top_scores(names, scores)
    record.candidates = names
    record.pod_requests = pod_requests(spec)


def pod_requests(spec: Raw | bytes | None) -> dict[str, str]:
    """The pod's requests (resource -> quantity) from its undecoded ``spec``: as the pod states
    them when one container states them all; otherwise what kube-scheduler counts (containers
    summed, init containers, overhead: ``engine.podspec.pod_requests``) as exact quantities
    (CPU in millicores, ``1500m``; anything else in units). Empty for an unreadable spec."""
    if not spec:
        return {}
    try:
        decoded = orjson.loads(bytes(spec))
    except (orjson.JSONDecodeError, TypeError):
        return {}
    if not isinstance(decoded, dict):
        return {}
    containers = decoded.get("containers")
    simple = (
        isinstance(containers, list)
        and len(containers) == 1
        and not decoded.get("initContainers")
        and not decoded.get("overhead")
        and not decoded.get("resources")
        and isinstance(containers[0], dict)
    )
    if simple:
        assert isinstance(containers, list)
        resources = containers[0].get("resources")
        if isinstance(resources, dict) and not resources.get("limits"):
            requests = resources.get("requests")
            if isinstance(requests, dict):
                return {k: v for k, v in requests.items() if isinstance(v, str)}
            return {}
    counted = podspec_requests(decoded)
    return {name: (f"{v}m" if name == "cpu" else str(v)) for name, v in counted.items()}


def _top_scores(names: Sequence[str], scores: list[int]) -> list[tuple[str, int]]:
    # Scores are 0..10: find the best ones by value with list.index (C speed) instead of
    # sorting every node of a large request.
    best: list[tuple[str, int]] = []
    for score in sorted(set(scores), reverse=True):
        start = 0
        while len(best) < MAX_RECORDED_SCORES:
            try:
                i = scores.index(score, start)
            except ValueError:
                break
            best.append((names[i], score))
            start = i + 1
        if len(best) >= MAX_RECORDED_SCORES:
            break
    return best


_SCORE_ENDINGS = tuple(b"%d}," % score for score in range(11))
_MISSING = b""


def host_prefix(name: str) -> bytes:
    """The start of a HostPriority for ``name``: everything up to the score."""
    return b'{"Host":' + orjson.dumps(name) + b',"Score":'


def encode_priorities(
    names: Sequence[str], scores: Sequence[int], prefixes: dict[str, bytes]
) -> bytes:
    """The HostPriorityList ``[{"Host": name, "Score": score}, ...]`` from pre-encoded parts."""
    if not names:
        return b"[]"
    parts: list[bytes] = list(map(prefixes.get, names, repeat(_MISSING)))
    if _MISSING in parts:
        parts = [p or host_prefix(n) for n, p in zip(names, parts, strict=True)]
    # Interleave prefixes and "<score>}," endings, then drop the last comma: no per-node
    # intermediate objects.
    flat: list[bytes] = [_MISSING] * (2 * len(parts))
    flat[0::2] = parts
    flat[1::2] = map(_SCORE_ENDINGS.__getitem__, scores)
    body = b"".join(flat)
    return b"[" + body[:-1] + b"]"


def _dense_priorities(names: Sequence[str], encoded: dict[str, bytes]) -> bytes | None:
    """The HostPriorityList from entries encoded once per set of policies (the usual case);
    None when a name has no entry."""
    # One join makes the body: "[" first, the last entry without its comma, "]" last. A name
    # without an entry leaves a None, which makes the join (or the slice) raise.
    parts: list[Any] = [b"["]  # bytes, or None for a name without an entry
    parts += map(encoded.get, names)
    try:
        parts[-1] = parts[-1][:-1]
        parts.append(b"]")
        return b"".join(parts)
    except TypeError:
        return None


# --- names mode -----------------------------------------------------------------------------


def names_table(cluster: ClusterSnapshot, pod: PodFacts) -> PolicySetTable:
    """The combined verdicts over the inventory for the policies that select ``pod``."""
    evaluator = cluster.evaluator
    return evaluator.table(evaluator.active(pod))


# --- full mode ------------------------------------------------------------------------------


def _base_units(resource: str, quantity: str) -> int:
    key = (resource, quantity)
    value = _quantities.get(key)
    if value is None:
        try:
            value = to_base_units(resource, quantity)
        except (QuantityError, TypeError, ValueError):
            value = 0  # like the inventory: an unreadable quantity counts as absent
        if len(_quantities) >= MAX_CACHED_QUANTITIES:
            _quantities.clear()
        _quantities[key] = value
    return value


def _facts(cluster: ClusterSnapshot, node: wire.NodeObject) -> NodeFacts:
    key = (node.name, node.resource_version)
    if node.resource_version:
        cached = cluster.node_object_facts.get(key)
        if cached is not None:
            return cached
    facts = node_facts(
        node.name,
        labels=node.labels,
        allocatable={r: _base_units(r, q) for r, q in node.allocatable.items()},
        conditions=node.conditions,
        assignments=cluster.assignments,
    )
    if node.resource_version:
        cluster.remember_node_object(key, facts)
    return facts


def full_table(
    cluster: ClusterSnapshot, pod: PodFacts, nodes: Sequence[wire.NodeObject]
) -> PolicySetTable:
    """Combined verdicts over the request's own node objects for the policies selecting ``pod``."""
    active = [cluster.policies[i] for i in cluster.evaluator.active(pod)]
    evaluator = ClusterEvaluator(active, [_facts(cluster, node) for node in nodes])
    return evaluator.table(tuple(range(len(active))))


def _decode_nodes(raws: list[Raw]) -> list[wire.NodeObject]:
    return [wire.decode_node(raw, i) for i, raw in enumerate(raws)]


# --- verbs ----------------------------------------------------------------------------------


def _managed_filter(
    cluster: ClusterSnapshot, body: bytes, spec: Raw | None, outcome: FilterOutcome
) -> dict[str, str]:
    """Move the passing nodes without enough free of a managed resource the pod requests to
    the rejected ones (``insufficient <resource>``); what was moved (extender.managed)."""
    split = managed.filter_split(cluster.name, body, spec, outcome.passed)
    if split is None:
        return {}
    outcome.passed, short = split
    outcome.rejected.update(short)  # a dict of this call's own (engine.evaluate.filter_names)
    return short


def _request_nodes(
    args: wire.ExtenderArgs,
) -> tuple[list[str] | None, list[wire.NodeObject] | None]:
    names, raws = args.node_names, args.node_items
    if names is not None and raws is not None:
        raise wire.bad_request("request has both Nodes and NodeNames: send one of them")
    if names is None and raws is None:
        raise wire.bad_request("request has neither NodeNames nor Nodes")
    return names, (_decode_nodes(raws) if raws is not None else None)


def do_filter(snapshot: Snapshot, cluster: ClusterSnapshot, body: bytes) -> Reply:
    """ExtenderArgs -> ExtenderFilterResult; rejects go to FailedAndUnresolvableNodes."""
    args = wire.decode_extender_args(body)
    pod = args.pod
    names, nodes = _request_nodes(args)
    if names is not None:
        # A pod requesting managed resources: nodes lacking them rejected too (extender.managed).
        table = managed.names_table(cluster.name, body, args.pod_spec, names_table(cluster, pod))
        outcome = filter_names(
            table,
            names,
            unknown_node_action=cluster.unknown_node_action,
            cluster=cluster.name,
            dry_run=False,
        )
        body = orjson.dumps(
            {
                "Nodes": None,
                "NodeNames": outcome.passed,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": outcome.rejected,
                "Error": "",
            }
        )
        record = _record(FILTER, cluster, snapshot, "names", pod, len(names), 0, table)
    else:
        assert nodes is not None
        table = full_table(cluster, pod, nodes)
        node_names = [node.name for node in nodes]
        outcome = filter_names(
            table, node_names, unknown_node_action=ALLOW, cluster=cluster.name, dry_run=False
        )
        reject = table.reject
        short = _managed_filter(cluster, body, args.pod_spec, outcome)
        kept = [
            node.raw for node in nodes if reject.get(node.name) is None and node.name not in short
        ]
        body = b"".join(
            (
                b'{"Nodes":{"metadata":{},"items":[',
                b",".join(kept),
                b']},"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":',
                orjson.dumps(outcome.rejected),
                b',"Error":""}',
            )
        )
        record = _record(FILTER, cluster, snapshot, "full", pod, len(nodes), 0, table)
        names = node_names
    record.nodes_out = len(outcome.passed)
    record.finish = partial(_note_filter, names, outcome, table, args.pod_spec)
    return Reply(body, record)


def do_prioritize(snapshot: Snapshot, cluster: ClusterSnapshot, body: bytes) -> Reply:
    """ExtenderArgs -> HostPriorityList: one integer score 0..10 per input node, in order."""
    args = wire.decode_extender_args(body)
    pod = args.pod
    names, nodes = _request_nodes(args)
    if names is not None:
        table = names_table(cluster, pod)
        mode = "names"
    else:
        assert nodes is not None
        table = full_table(cluster, pod, nodes)
        names = [node.name for node in nodes]
        mode = "full"
    scores, dense = table.scores.scores_from_table(names)
    adjusted = managed.score(cluster.name, names, table)
    if adjusted is not None:  # managed_resource weight rules: scored from what is free now
        scores, dense = adjusted, False
    reply = None
    if dense and mode == "names" and names:
        reply = _dense_priorities(names, table.scores.encoded(cluster.host_prefixes))
    if reply is None:
        reply = encode_priorities(names, scores, cluster.host_prefixes if mode == "names" else {})
    record = _record(PRIORITIZE, cluster, snapshot, mode, pod, len(names), len(names), table)
    record.finish = partial(_note_scores, names, scores, args.pod_spec)
    return Reply(reply, record)


def do_preempt(snapshot: Snapshot, cluster: ClusterSnapshot, body: bytes) -> Reply:
    """ExtenderPreemptionArgs -> ExtenderPreemptionResult: the candidates that pass the pod's
    filter — its managed resources judged with the victims' holdings credited back — victims
    unchanged; placeholders (no victims) pass through."""
    fields = wire.decode_body(body)
    pod, spec = wire.decode_pod_and_spec(fields)
    candidates = wire.decode_victims(fields)
    table = names_table(cluster, pod)
    names = list(candidates)
    outcome = filter_names(
        table,
        names,
        unknown_node_action=cluster.unknown_node_action,
        cluster=cluster.name,
        dry_run=False,
    )
    rejected = outcome.rejected
    # Managed resources: a candidate must have room for the pod once its victims are gone
    # (what they hold there credited back), placeholders without victims aside.
    short = managed.preemption_rejects(
        cluster.name,
        spec,
        body,
        {name: victims.uids for name, victims in candidates.items() if victims.uids},
    )
    kept = {
        name: wire.encode_victims(victims)
        for name, victims in candidates.items()
        if not victims.uids or (name not in rejected and name not in short)
    }
    body = orjson.dumps({"NodeNameToMetaVictims": kept})
    record = _record(PREEMPT, cluster, snapshot, "names", pod, len(candidates), len(kept), table)
    record.finish = partial(_note_filter, names, outcome, table, spec)
    return Reply(body, record)


def _bind_refusal(
    cluster: ClusterSnapshot, args: wire.BindingArgs, pod: Mapping[str, Any]
) -> str | None:
    """Why ``pod`` (as the API server has it) may not be bound to ``args.node``; None if it may.

    In order: a pod naming a scheduler the portal's generated configuration does not serve
    (``scheduler_config.served_scheduler_names``); kube-scheduler's basic fit of the whole pod
    on the node (``inventory.binding.fit_refusal``, the own scheduler's judge: node selection,
    taints, cordon, allocatable against the pods on the node); then the pod's enforce policies,
    the table the filter verb judges with."""
    where = f"pod {args.pod_namespace}/{args.pod_name} may not run on node {args.node}"
    spec = pod.get("spec")
    named = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    named = named if isinstance(named, str) and named else "default-scheduler"
    if named not in served_scheduler_names():
        return (
            f"pod {args.pod_namespace}/{args.pod_name} names scheduler {named!r}, which this "
            f"extender does not serve; not bound"
        )
    free = managed.table(cluster.name)
    ignored = tuple(free.free) if free is not None else ()
    misfit = fit_refusal(cluster.name, pod, args.node, ignored_resources=ignored)
    if misfit is not None:
        return f"{where}: {misfit}; not bound"
    facts = pod_facts_from_dict(pod)
    reason = names_table(cluster, facts).reject.get(args.node)
    if reason is None:
        return None
    return f"{where}: {reason}; not bound"


def do_bind(snapshot: Snapshot, cluster: ClusterSnapshot, body: bytes) -> Reply:
    """ExtenderBindingArgs -> ExtenderBindingResult; a failure is HTTP 200 with Error set.

    The node must be in the cluster's inventory and pass the pod's enforce policies (judged on
    the pod as the API server has it, like a filter call); otherwise no Binding is made and the
    Error says why."""
    if not cluster.bind_enabled:
        raise wire.WireError(
            404, "bind_disabled", f"bind is not enabled for cluster {cluster.name}"
        )
    fields = wire.decode_body(body)
    args = wire.decode_binding(fields)
    pod = PodFacts(namespace=args.pod_namespace, name=args.pod_name, uid=args.pod_uid)
    error = ""
    if args.node not in names_table(cluster, pod).reject:  # every known node has an entry
        error = f"node {args.node} is not in cluster {cluster.name}'s inventory: not bound"
    else:
        try:
            held = binding.bind(
                cluster_name=cluster.name,
                namespace=args.pod_namespace,
                name=args.pod_name,
                uid=args.pod_uid,
                node=args.node,
                judge=partial(_bind_refusal, cluster, args),
                managed=managed.managed_in(cluster.name),
            )
            managed.note_held(cluster.name, args.node, held)
        except BindingFailed as exc:
            if exc.refused:
                managed.note_given_back()
            error = str(exc) or "binding failed"
        except BindError as exc:
            error = str(exc) or "binding failed"
        except Exception as exc:  # the scheduler must get an answer it can read, not a 500
            logger.exception(
                "binding %s/%s to %s failed", args.pod_namespace, args.pod_name, args.node
            )
            error = f"binding failed: {exc}"
    body = orjson.dumps({"Error": error})
    record = _record(BIND, cluster, snapshot, "names", pod, 1, 0 if error else 1, None)
    record.candidates = [args.node]
    if error:
        record.rejected = [(args.node, error)]
    return Reply(body, record)


# One handler per verb of the registry (core.verbs.EXTENDER_VERBS), in its order.
VERBS = {
    FILTER: do_filter,
    PRIORITIZE: do_prioritize,
    PREEMPT: do_preempt,
    BIND: do_bind,
}
