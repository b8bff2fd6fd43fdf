"""What would happen to this pod: the extender's own decision, explained per node.

A thin adapter: the verdicts and scores come from ``engine.evaluate`` on the snapshot
the extender serves (``policies.compile.current_snapshot``: the same revision, the same object
where the extender runs in the process), through the same calls the extender's names mode
makes (``ClusterEvaluator.active`` + ``table``, ``filter_names``, and scores over the nodes the
filter kept, as kube-scheduler calls prioritize with them). The per-rule breakdown reads the
same compiled rules (``FilterCheck.judge``/``reason``, ``WeightCheck.contribution``) over the same
node columns, so it explains the decision rather than recomputing it. ``wire_reason`` is the one
reason kube-scheduler gets for a rejected node; ``reasons`` are every failing rule with what the
node has (docs/semantics.md#which-reason-goes-on-the-wire).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.errors import ContentError
from engine.evaluate import ClusterEvaluator, PolicySetTable, evaluate_names
from engine.labels import label_key_errors, label_value_errors
from engine.pods import PodFacts, pod_facts_from_dict
from engine.policy import CompiledPolicy
from engine.snapshot import ClusterSnapshot, Snapshot
from policies.compile import current_snapshot

MAX_NODES = 20_000


def clean_pod(pod: Any) -> PodFacts:
    """PodFacts of a v1 Pod object; ContentError naming the field for anything malformed."""
    if not isinstance(pod, Mapping):
        raise ContentError({"pod": ["Must be a v1 Pod object."]})
    metadata = pod.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise ContentError({"pod.metadata": ["Must be an object."]})
    errors: dict[str, list[str]] = {}
    for key in ("namespace", "name", "uid"):
        if metadata.get(key) is not None and not isinstance(metadata[key], str):
            errors[f"pod.metadata.{key}"] = ["Must be a string."]
    labels = metadata.get("labels")
    if labels is not None:
        if not isinstance(labels, Mapping):
            errors["pod.metadata.labels"] = ["Must be an object of key: value strings."]
        else:
            for key, value in labels.items():
                problems = label_key_errors(key) if isinstance(key, str) else ["Not a string."]
                problems += (
                    label_value_errors(value)
                    if isinstance(value, str)
                    else ["The value must be a string."]
                )
                if problems:
                    errors[f"pod.metadata.labels[{key}]"] = problems
    if errors:
        raise ContentError(errors)
    return pod_facts_from_dict(pod)


def _cluster(snapshot: Snapshot, name: Any) -> ClusterSnapshot:
    if name is None:
        name = snapshot.default_cluster
        if name is None:
            raise ContentError({"cluster": ["No default cluster: name one."]})
    if not isinstance(name, str):
        raise ContentError({"cluster": ["Must be a cluster name."]})
    cluster = snapshot.clusters.get(name)
    if cluster is None:
        raise ContentError({"cluster": [f"No cluster named {name!r}."]})
    return cluster


def _node_names(evaluator: ClusterEvaluator, nodes: Any) -> list[str]:
    if nodes is None:
        return list(evaluator.nodes.names)
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
        raise ContentError({"nodes": ["Must be a list of node names."]})
    if len(nodes) > MAX_NODES:
        raise ContentError({"nodes": [f"At most {MAX_NODES} names."]})
    return nodes


def _value(evaluator: ClusterEvaluator, column: Any, name: str) -> Any:
    index = evaluator.nodes.index.get(name)
    if index is None:
        return None
    codes, values = evaluator.nodes.column(column)
    return values[codes[index]]


def _reasons(
    evaluator: ClusterEvaluator, policies: Sequence[CompiledPolicy], name: str
) -> list[dict]:
    out = []
    for policy in policies:
        for check in policy.filters:
            observed = check.judge(_value(evaluator, check.column, name))
            if observed is not None:
                out.append(
                    {"policy": check.policy, "rule": check.label, "message": check.reason(observed)}
                )
    return out


def _contributions(
    evaluator: ClusterEvaluator,
    policies: Sequence[CompiledPolicy],
    name: str,
    scored_names: Sequence[str],
) -> list[dict]:
    """Per weight rule, what it adds to ``name``'s raw score among ``scored_names``."""
    out = []
    for policy in policies:
        for check in policy.weights:
            if check.contribution is not None:
                amount = check.contribution(_value(evaluator, check.column, name))
            else:
                # Resource weights scale by the largest allocatable among the scored nodes.
                top = max(
                    (_value(evaluator, check.column, n) or 0 for n in scored_names), default=0
                )
                mine = _value(evaluator, check.column, name) or 0
                amount = check.weight * mine / top if top > 0 else 0.0
            if amount:
                out.append({"policy": check.policy, "rule": check.label, "value": amount})
    return out


def simulate(*, cluster: Any, pod: Any, nodes: Any = None) -> dict:
    """Every node's verdict and score for ``pod``, as the extender decides them now."""
    facts = clean_pod(pod)
    snapshot = current_snapshot()
    target = _cluster(snapshot, cluster)
    evaluator = target.evaluator
    names = _node_names(evaluator, nodes)
    table: PolicySetTable = evaluator.table(evaluator.active(facts))
    result = evaluate_names(
        evaluator,
        facts,
        names,
        cluster=target.name,
        unknown_node_action=target.unknown_node_action,
    )
    passed = set(result.passed)
    node_rows = []
    for name in names:
        known = name in evaluator.nodes.index
        ok = name in passed
        reasons = _reasons(evaluator, table.enforce, name) if known else []
        if not ok and not known:
            reasons = [{"policy": None, "rule": None, "message": result.rejected[name]}]
        dry_reasons = _reasons(evaluator, table.dry_run, name) if known else []
        node_rows.append(
            {
                "name": name,
                "known": known,
                "passed": ok,
                "wire_reason": result.rejected.get(name),
                "reasons": reasons,
                "contributions": _contributions(evaluator, table.enforce, name, result.passed)
                if ok
                else [],
                "raw_score": result.raw_scores.get(name),
                "score": result.scores.get(name),
                "dry_run": {
                    "would_pass": name not in result.dry_run_rejected,
                    "reasons": dry_reasons,
                    "contributions": _contributions(evaluator, table.dry_run, name, result.passed)
                    if ok
                    else [],
                    "score": result.dry_run_scores.get(name),
                },
            }
        )
    return {
        "cluster": target.name,
        "snapshot_revision": snapshot.revision,
        "pod": {"namespace": facts.namespace, "name": facts.name, "labels": dict(facts.labels)},
        "policies": [
            {"name": p.name, "version": p.version, "mode": p.mode}
            for p in (*table.enforce, *table.dry_run)
        ],
        "summary": {
            "nodes": len(names),
            "passed": len(result.passed),
            "rejected": len(result.rejected),
            "dry_run_would_reject": len(result.dry_run_rejected),
        },
        "nodes": node_rows,
    }
