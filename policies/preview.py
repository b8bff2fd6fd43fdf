"""The impact preview of an unsaved policy (what it would reject, per cluster, and warnings) or
label assignment (which nodes it matches and whose effective labels change).

The API (``POST /api/v1/policies/preview/``) and the UI call this with the same body as a create
or update; nothing is written. The judging is the engine's (``engine.preview``) over
the node facts of the snapshot the extender serves, so the preview is what the extender would do.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from core.errors import ContentError
from engine import preview as engine
from engine.assignment_checks import assignment_warnings
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy
from engine.sampling import PassRatio, nodes_sampled
from engine.snapshot import ClusterSnapshot
from engine.sources import assignment_spec_from_content
from inventory.evict import protected_namespaces
from inventory.models import Cluster, Node, Pod
from inventory.pod_queries import bound_pods, cluster_pods, pending_pods
from policies.compile import current_snapshot
from policies.content import label_assignment_content, policy_content
from policies.expectations import broken_by
from policies.models import LabelAssignment, Policy
from policies.validation import clean_label_assignment, clean_policy


def preview_policy(data: Any) -> dict[str, Any]:
    """Impact per cluster of the draft (and the change from the saved policy of that name)."""
    content = clean_policy(data)
    snapshot = current_snapshot()
    if content["cluster"] is not None:
        if content["cluster"] not in snapshot.clusters:
            raise ContentError({"cluster": [f"No cluster named {content['cluster']!r}."]})
        names = [content["cluster"]]
    else:
        names = sorted(snapshot.clusters)
    saved_row = Policy.objects.filter(name=content["name"]).first()
    saved = policy_content(saved_row) if saved_row is not None else None
    clusters = []
    worst: engine.Impact | None = None
    all_facts: list[NodeFacts] = []
    placement_warnings: list[engine.DraftWarning] = []
    for name in names:
        cluster = snapshot.clusters[name]
        facts = cluster.facts
        all_facts.extend(facts)
        result = engine.impact(content, facts, cluster=name)
        rules = engine.enforcement(
            content, unpushed=cluster.unpushed_keys, admission=cluster.admission
        )
        entry = {
            "cluster": name,
            **asdict(result),
            "admission": cluster.admission,
            "enforcement": [asdict(rule) for rule in rules],
        }
        entry["sampling"] = _sampling(name, content, result)
        pods = _pod_impact(content, saved, snapshot.clusters[name])
        if pods is not None:
            entry["pods"] = {**asdict(pods), "summary": pods.summary}
        if cluster.admission != "off":
            # Those who turned admission on expect autoscalers to see the rules.
            placement_warnings.extend(engine.unpushed_warnings(name, rules))
        if saved is not None and (saved["cluster"] in (None, name)):
            before = engine.impact(saved, facts, cluster=name)
            entry["saved_rejected"] = before.rejected
            entry["change"] = _change(result.rejected - before.rejected)
        clusters.append(entry)
        if worst is None or result.passing < worst.passing:
            worst = result
    warnings = engine.warnings(content, all_facts, worst) + placement_warnings
    warnings += _protected_warnings(content, names)
    return {
        "name": content["name"],
        "snapshot_revision": snapshot.revision,
        "clusters": clusters,
        "warnings": [asdict(w) for w in warnings],
        # Passing now, failing once this draft is saved (a save would need force).
        "broken_expectations": broken_by(
            {saved_row.name if saved_row else content["name"]: content}
        ),
    }


def _protected_warnings(content: dict[str, Any], clusters: list[str]) -> list[engine.DraftWarning]:
    """A warning when the draft's scope reaches a protected namespace: it names one, or it
    selects every namespace and the pod inventory has pods of a protected one it selects
    (coredns in kube-system, the portal's own pods). Such pods are never evicted, and a rule
    that rejects their nodes keeps their replacements Pending (docs/operations.md)."""
    protected = protected_namespaces()
    named = set((content.get("pod_selector") or {}).get("namespaces") or ())
    if named:
        reached = sorted(named & protected)
    else:
        draft = compile_policy({**content, "cluster": None}, version=0)
        rows = Pod.objects.filter(
            cluster__name__in=clusters, namespace__in=sorted(protected)
        ).values_list("namespace", "labels")
        reached = sorted(
            {ns for ns, lbls in rows if draft.selects(PodFacts(namespace=ns, labels=lbls or {}))}
        )
    if not reached:
        return []
    return [
        engine.DraftWarning(
            code="protected_namespace",
            message=(
                f"this policy selects pods in the protected namespace"
                f"{'s' if len(reached) != 1 else ''} {', '.join(reached)} "
                "(EVICTION_PROTECTED_NAMESPACES): cluster components run there, a rule that "
                "rejects their nodes keeps their replacements Pending, and the portal never "
                "evicts them. Limit pod_selector.namespaces unless this is meant."
            ),
            path="pod_selector.namespaces",
        )
    ]


def _sampling(cluster: str, content: dict[str, Any], result: engine.Impact) -> dict[str, Any]:
    """The draft's pass count against kube-scheduler's default sample of the cluster's nodes,
    and whether the sample would likely hide the passing nodes (engine.sampling)."""
    ratio = PassRatio(
        cluster, content["name"], "", result.passing, result.nodes, nodes_sampled(result.nodes)
    )
    hidden = content.get("mode", "enforce") == "enforce" and ratio.hidden
    return {
        "passing": ratio.passing,
        "nodes": ratio.nodes,
        "sampled": ratio.sampled,
        "miss_chance": round(ratio.miss, 4),
        "hidden": hidden,
        "message": ratio.message() if hidden else "",
    }


def _namespaces(*contents: Any) -> list[str] | None:
    """The namespaces the drafts select in, or None when one of them selects in every one."""
    found: set[str] = set()
    for content in contents:
        if content is None:
            continue
        namespaces = (content.get("pod_selector") or {}).get("namespaces") or []
        if not namespaces:
            return None
        found.update(namespaces)
    return sorted(found)


def _pod_impact(
    content: dict[str, Any], saved: Any, cluster: ClusterSnapshot
) -> engine.PodImpact | None:
    """The draft's effect on the cluster's pod inventory; None when it has none."""
    row = Cluster.objects.filter(name=cluster.name).first()
    if row is None or not cluster_pods(row).exists():
        return None
    bound = bound_pods(row)
    pending = pending_pods(row)
    namespaces = _namespaces(content, saved)
    if namespaces is not None:
        # Pods of other namespaces are selected by neither version: they cannot change.
        bound, pending = (
            bound.filter(namespace__in=namespaces),
            pending.filter(namespace__in=namespaces),
        )
    bound_facts = [
        (PodFacts(namespace=ns, name=n, labels=labels or {}), node)
        for ns, n, labels, node in bound.values_list("namespace", "name", "labels", "node_name")
    ]
    pending_facts = [
        PodFacts(namespace=ns, name=n, labels=labels or {})
        for ns, n, labels in pending.values_list("namespace", "name", "labels")
    ]
    return engine.pod_impact(content, cluster, bound_facts, pending_facts)


def _change(delta: int) -> str:
    if delta > 0:
        return f"now rejects {delta} more node{'s' if delta != 1 else ''}"
    if delta < 0:
        return f"now rejects {-delta} fewer node{'s' if delta != -1 else ''}"
    return "rejects the same number of nodes"


def preview_label_assignment(data: Any) -> dict[str, Any]:
    """Per cluster: the nodes the draft matches and the effective-label changes it makes,
    compared with the saved assignment of the same name (every other assignment as now)."""
    content = clean_label_assignment(data)
    clusters = Cluster.objects.order_by("name")
    if content["cluster"] is not None:
        clusters = clusters.filter(name=content["cluster"])
        if not clusters.exists():
            raise ContentError({"cluster": [f"No cluster named {content['cluster']!r}."]})
    saved_row = (
        LabelAssignment.objects.select_related("cluster").filter(name=content["name"]).first()
    )
    saved_content = label_assignment_content(saved_row) if saved_row is not None else None
    others = [
        row
        for row in LabelAssignment.objects.filter(enabled=True).select_related("cluster")
        if row.name != content["name"]
    ]
    selector = assignment_spec_from_content(content).selector
    draft = assignment_spec_from_content(content) if content["enabled"] else None
    result = []
    scoped: list[tuple[str, dict]] = []
    for cluster in clusters:

        def applies(scope: str | None, name: str = cluster.name) -> bool:
            return scope is None or scope == name

        saved = None
        if (
            saved_content is not None
            and saved_content["enabled"]
            and applies(saved_content["cluster"])
        ):
            saved = assignment_spec_from_content(saved_content)
        specs = [
            assignment_spec_from_content(label_assignment_content(row))
            for row in others
            if applies(row.cluster.name if row.cluster is not None else None)
        ]
        nodes = [
            (name, labels if isinstance(labels, dict) else {})
            for name, labels in Node.objects.filter(cluster=cluster)
            .order_by("name")
            .values_list("name", "labels")
        ]
        impact = engine.assignment_impact(draft, saved, specs, nodes)
        result.append({"cluster": cluster.name, **asdict(impact)})
        scoped.extend(nodes)
    where = f" of cluster {content['cluster']}" if content["cluster"] else ""
    return {
        "name": content["name"],
        "saved": saved_content is not None,
        "clusters": result,
        # A typo in the selector, or a selector that labels nothing: held until confirmed.
        "warnings": [asdict(w) for w in assignment_warnings(selector, scoped, where=where)],
    }
