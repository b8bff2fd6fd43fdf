"""Expectations: saved test cases for the policies (docs/semantics.md, "Expectations").

"A pod like this must be able to land on nodes matching S", "... must never land on nodes
matching T", "... must score nodes matching U highest". Each is judged with the same
``evaluate_pod`` the extender runs, over a cluster's node facts (effective labels); the node
selector is a label assignment's (``node_names`` globs and ``match_expressions``), matched
against the node's effective labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.assignments import NodeSelector, node_selector_from_dict
from engine.evaluate import evaluate_pod
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import CompiledPolicy, compile_policy
from engine.snapshot import Snapshot

CAN_LAND = "can_land"
NEVER_LANDS = "never_lands"
PREFERS = "prefers"
KINDS = {
    CAN_LAND: "must be able to land on",
    NEVER_LANDS: "must never land on",
    PREFERS: "must score highest",
}


@dataclass(frozen=True)
class ExpectationSpec:
    name: str
    kind: str
    cluster: str | None  # None: every cluster
    pod: PodFacts
    selector: NodeSelector
    selector_text: str


@dataclass(frozen=True)
class Outcome:
    name: str
    cluster: str
    ok: bool
    message: str


def selector_text(selector: Mapping[str, Any]) -> str:
    """``nodes named gpu-* with tier In gold``: a node selector in words."""
    parts = []
    names = selector.get("node_names") or []
    if names:
        parts.append("named " + " or ".join(names))
    for r in selector.get("match_expressions") or []:
        values = ", ".join(r.get("values") or [])
        parts.append(f"with {r['key']} {r['operator']}{' ' + values if values else ''}")
    return "nodes " + " and ".join(parts) if parts else "any node"


def expectation_spec(content: Mapping[str, Any]) -> ExpectationSpec:
    """The engine's view of an expectation's canonical content (``clean_expectation``)."""
    pod = content["pod"]
    return ExpectationSpec(
        name=content["name"],
        kind=content["kind"],
        cluster=content.get("cluster"),
        pod=PodFacts(
            namespace=pod["namespace"],
            name=f"expectation-{content['name']}",
            uid=f"expectation-{content['name']}",
            labels=dict(pod.get("labels") or {}),
        ),
        selector=node_selector_from_dict(content.get("node_selector") or {}),
        selector_text=selector_text(content.get("node_selector") or {}),
    )


def evaluate_expectation(
    spec: ExpectationSpec,
    policies: Sequence[CompiledPolicy],
    facts: Sequence[NodeFacts],
    *,
    cluster: str,
) -> Outcome:
    """Whether ``spec`` holds in ``cluster`` with ``policies``, and why in one sentence."""
    selected = [n for n in facts if spec.selector.matches(n.name, n.labels)]
    matching = {n.name for n in selected}
    # Landing is decided node by node: judge only the selected nodes. Scores are relative to
    # the whole list, so "prefers" judges every node.
    result = evaluate_pod(
        policies, spec.pod, facts if spec.kind == PREFERS else selected, cluster=cluster
    )
    passed = set(result.passed)
    what = f"a pod in {spec.pod.namespace}"
    if spec.kind == CAN_LAND:
        landing = sorted(passed & matching)
        if landing:
            return Outcome(
                spec.name,
                cluster,
                True,
                f"{what} can land on {len(landing)} of {len(matching)} {spec.selector_text}",
            )
        if not matching:
            return Outcome(spec.name, cluster, False, f"there are no {spec.selector_text}")
        reasons = sorted({result.rejected[n] for n in matching if n in result.rejected})
        why = f" (rejected: {'; '.join(reasons[:3])})" if reasons else ""
        return Outcome(
            spec.name,
            cluster,
            False,
            f"{what} can land on none of the {len(matching)} {spec.selector_text}{why}",
        )
    if spec.kind == NEVER_LANDS:
        landing = sorted(passed & matching)
        if not landing:
            return Outcome(
                spec.name,
                cluster,
                True,
                f"{what} lands on none of the {len(matching)} {spec.selector_text}",
            )
        sample = ", ".join(landing[:3]) + ("…" if len(landing) > 3 else "")
        return Outcome(
            spec.name,
            cluster,
            False,
            f"{what} can land on {len(landing)} {spec.selector_text}: {sample}",
        )
    # PREFERS: the best-scoring passing node is one of the matching nodes.
    if not passed:
        return Outcome(spec.name, cluster, False, f"{what} can land on no node at all")
    best = max(result.raw_scores.get(n, 0.0) for n in passed)
    top = sorted(n for n in passed if result.raw_scores.get(n, 0.0) == best)
    if passed & matching and all(n in matching for n in top):
        return Outcome(
            spec.name, cluster, True, f"{spec.selector_text} score highest ({best:g}) for {what}"
        )
    outsiders = [n for n in top if n not in matching]
    return Outcome(
        spec.name,
        cluster,
        False,
        f"{', '.join(outsiders[:3])} (not "
        f"{spec.selector_text}) score highest ({best:g}) for {what}",
    )


def outcomes(
    snapshot: Snapshot,
    specs: Iterable[ExpectationSpec],
    replace: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> list[Outcome]:
    """Each expectation in each cluster it covers, with the snapshot's policies and, for each
    name in ``replace``, that policy replaced by the given content (None: removed)."""
    replace = replace or {}
    drafts: list[CompiledPolicy] = [
        compile_policy(content, version=0) for content in replace.values() if content is not None
    ]
    results = []
    for spec in specs:
        names = [spec.cluster] if spec.cluster else sorted(snapshot.clusters)
        for name in names:
            cluster = snapshot.clusters.get(name)
            if cluster is None:
                continue
            policies = [p for p in cluster.policies if p.name not in replace] + drafts
            results.append(evaluate_expectation(spec, policies, cluster.facts, cluster=name))
    return results
