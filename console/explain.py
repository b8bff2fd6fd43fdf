"""The explain page: why a pod can (not) go where, from the very call the extender makes.

The form is read from the query string, so a result is a permalink that re-runs the same pod
against the current policies and inventory. The portal's verdict comes from
``policies.simulate`` — the same code path as ``POST /api/v1/simulate/`` and the extender's
own evaluation. Beside it, never mixed into it, the page shows what kube-scheduler's own filter
plugins would say of the same nodes (``console.fit``: taints, node selection, requests against
allocatable, cordons), and what neither judges.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson
import yaml
from django.utils.html import format_html
from django.utils.safestring import SafeString

from console import fit as scheduler_fit
from core.api.formats import yaml_error_text, yaml_load
from core.errors import ContentError
from engine import fit
from engine.globs import compile_glob, glob_errors
from engine.podspec import PodSpecFacts
from engine.quantities import format_amount
from inventory.models import Cluster, Pod
from inventory.pod_queries import pod_spec_facts
from policies.compile import current_snapshot
from policies.simulate import simulate

MAX_SHOWN_NODES = 500
# Rejected nodes are folded by reason: each group shows this many of its rows.
MAX_GROUP_ROWS = 200
DEFAULT_NAMESPACE = "default"
GLOB_CHARACTERS = frozenset("*?[")
BEST_NAMES = 3


def _form_namespace(query: Mapping[str, str]) -> str:
    return (query.get("namespace") or DEFAULT_NAMESPACE).strip() or DEFAULT_NAMESPACE


def pod_from_query(query: Mapping[str, str]) -> dict[str, Any]:
    """A v1 Pod from the form: a pasted manifest (YAML or JSON) wins over the fields.

    A manifest without ``metadata.namespace`` lands in the form's namespace, as ``kubectl
    apply -n`` would put it."""
    manifest = (query.get("manifest") or "").strip()
    if manifest:
        try:
            pod = orjson.loads(manifest) if manifest.startswith("{") else yaml_load(manifest)
        except orjson.JSONDecodeError as exc:
            message = f"Not a JSON Pod, line {exc.lineno}, column {exc.colno}: {exc.msg}."
            raise ContentError({"manifest": [message]}) from None
        except yaml.YAMLError as exc:
            message = f"Not a YAML Pod, {yaml_error_text(exc)}. Paste the whole manifest."
            raise ContentError({"manifest": [message]}) from None
        if not isinstance(pod, dict):
            raise ContentError({"manifest": ["Must be a Pod object."]})
        if pod.get("metadata") is None:
            pod["metadata"] = {}
        if isinstance(pod["metadata"], dict) and not pod["metadata"].get("namespace"):
            pod["metadata"]["namespace"] = _form_namespace(query)
        return pod
    labels: dict[str, str] = {}
    for n, line in enumerate((query.get("labels") or "").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ContentError({"labels": [f"Line {n}: write key=value."]})
        labels[key.strip()] = value.strip()
    metadata: dict[str, Any] = {
        "name": (query.get("name") or "explained-pod").strip(),
        "namespace": _form_namespace(query),
        "labels": labels,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def stored_pod(query: Mapping[str, str]) -> tuple[dict[str, Any], PodSpecFacts, Pod] | None:
    """The pod the form names, as the cluster's inventory stores it, when the form asks for it
    (``stored``, what the Pending and Violations pages link with) and pastes no manifest.

    Its labels are the stored ones, and kube-scheduler's checks read its stored requests
    (init containers, sidecars and overhead already counted), tolerations, ``nodeSelector`` and
    required node affinity. A pod the inventory no longer holds is an error that says so."""
    if not query.get("stored") or (query.get("manifest") or "").strip():
        return None
    if any("\x00" in (query.get(key) or "") for key in ("cluster", "namespace", "name")):
        # PostgreSQL cannot compare NUL characters: refuse before any query.
        raise ContentError({"name": ["Must not contain NUL characters."]})
    cluster = Cluster.objects.filter(name=query.get("cluster") or "").first()
    if cluster is None:
        cluster = Cluster.objects.filter(is_default=True).first()
    namespace = _form_namespace(query)
    name = (query.get("name") or "").strip()
    row = (
        Pod.objects.filter(cluster=cluster, namespace=namespace, name=name).first()
        if cluster is not None
        else None
    )
    if row is None:
        where = cluster.name if cluster is not None else "(none)"
        raise ContentError(
            {
                "name": [
                    f"No pod {namespace}/{name} in the inventory of cluster {where}: it was "
                    "deleted or has finished. Open the Pending page again, or paste the pod's "
                    "manifest to explain it."
                ]
            }
        )
    labels = row.labels if isinstance(row.labels, dict) else {}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": row.name, "namespace": row.namespace, "labels": dict(labels)},
    }
    return pod, pod_spec_facts(row), row


def node_patterns(query: Mapping[str, str]) -> list[str]:
    """ "Only these nodes": names or globs, one per line or comma-separated."""
    parts = [n.strip() for n in (query.get("nodes") or "").replace(",", "\n").splitlines()]
    return [n for n in parts if n]


def node_subset(patterns: list[str], known: tuple[str, ...] | list[str]) -> list[str] | None:
    """The nodes the patterns name, in inventory order; None (every node) without patterns.

    Globs (``*``, ``?``, ``[...]``, as expectations and label assignments take them) match the
    inventory's node names; a plain name is kept even when the inventory lacks it, so the page
    shows what the extender does with an unknown node. A glob that matches nothing is an error:
    it is almost certainly a typo."""
    if not patterns:
        return None
    chosen: dict[str, None] = {}
    problems: list[str] = []
    for pattern in patterns:
        if not GLOB_CHARACTERS & set(pattern):
            chosen[pattern] = None
            continue
        errors = glob_errors(pattern)
        if errors:
            problems.extend(f"{pattern}: {error}" for error in errors)
            continue
        matches = compile_glob(pattern)
        hits = [name for name in known if matches(name)]
        if not hits:
            problems.append(f"{pattern} matches no node of the cluster.")
        chosen.update(dict.fromkeys(hits))
    if problems:
        raise ContentError({"nodes": problems})
    return list(chosen)


def _cluster_node_names(cluster: str | None) -> list[str]:
    snapshot = current_snapshot()
    name = cluster or snapshot.default_cluster
    target = snapshot.clusters.get(name) if name else None
    # An unknown cluster is reported by simulate, with its own message.
    return list(target.evaluator.nodes.names) if target is not None else []


def fit_cell(detail: fit.FitDetail | None, *, judged: bool) -> SafeString:
    """A node's kube-scheduler column (built here: a template include per row costs more than
    the rest of the row at thousands of nodes)."""
    if not judged:
        return format_html('<span class="console-muted">{}</span>', "not in the inventory")
    if detail is None:
        return format_html('<span class="verdict-pass">{}</span>', "fits")
    return format_html(
        '<span class="verdict-reject">{}</span><br><span class="console-muted">{}</span>',
        ", ".join(detail.reasons),
        detail.detail,
    )


def score_story(passed: list[dict]) -> dict[str, Any]:
    """How the passing nodes score, with ties called ties.

    The extender's scores are normalised over the nodes it is asked about, and when every raw
    score is the same every node gets 0 (docs/semantics.md): that 0 means "all tie", not
    "worst"."""
    if not passed:
        return {"kind": "none"}
    raws = {row["raw_score"] for row in passed}
    if len(raws) <= 1:
        return {"kind": "tie", "nodes": len(passed)}
    top = max(row["score"] or 0 for row in passed)
    best = sorted(row["name"] for row in passed if (row["score"] or 0) == top)
    return {
        "kind": "best",
        "score": top,
        "names": best[:BEST_NAMES],
        "more": max(0, len(best) - BEST_NAMES),
        "tied": len(best),
    }


def _groups(rejected: list[dict]) -> list[dict[str, Any]]:
    """Rejected nodes grouped by the reason kube-scheduler gets (largest group first)."""
    by_reason: dict[str, list[dict]] = {}
    for row in rejected:
        by_reason.setdefault(row["wire_reason"] or "", []).append(row)
    ordered = sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        {"reason": reason, "count": len(rows), "rows": rows[:MAX_GROUP_ROWS]}
        for reason, rows in ordered
    ]


def _scheduler(
    rows: list[dict], report: scheduler_fit.FitReport, total: int, stored: Pod | None = None
) -> dict[str, Any]:
    """kube-scheduler's side: its own rejections, and what the two together leave."""
    portal_passes = [row for row in rows if row["passed"]]
    also = [row for row in portal_passes if row["fit"] is not None]
    also_reasons: Counter[str] = Counter()
    for row in also:
        also_reasons.update(row["fit"].reasons)
    # What kube-scheduler would report: its plugins run first, the extender sees the rest.
    final: Counter[str] = Counter()
    landing = 0
    for row in rows:
        if row["fit"] is not None:
            final.update(row["fit"].reasons)
        elif not row["passed"]:
            final[row["wire_reason"] or "rejected"] += 1
        else:
            landing += 1
    return {
        "by_reason": report.by_reason(),
        "also_rejects": len(also),
        "also_reasons": sorted(also_reasons.items(), key=lambda item: (-item[1], item[0])),
        "landing": landing,
        "message": fit.summary(total, final) if landing == 0 else "",
        "usage_counted": report.usage_counted,
        "has_spec": report.has_spec,
        "requests": [
            (name, format_amount(name, value)) for name, value in sorted(report.requests.items())
        ],
        "unjudged_nodes": sum(1 for row in rows if row["name"] not in report.verdicts),
        "not_judged": fit.NOT_JUDGED,
        "stored": stored,
    }


def explain(query: Mapping[str, str]) -> dict[str, Any]:
    """The simulate result plus what the page shows first: counts by reason, scores, and
    kube-scheduler's own checks beside the portal's verdict."""
    stored = stored_pod(query)
    pod = stored[0] if stored is not None else pod_from_query(query)
    cluster = query.get("cluster") or None
    patterns = node_patterns(query)
    names = node_subset(patterns, _cluster_node_names(cluster)) if patterns else None
    result = simulate(cluster=cluster, pod=pod, nodes=names)
    rows = result["nodes"]
    report = scheduler_fit.judge(
        pod,
        result["cluster"],
        [row["name"] for row in rows],
        every_node=names is None,
        spec=stored[1] if stored is not None else None,
    )
    for row in rows:
        row["fit"] = report.verdicts.get(row["name"])
        row["fit_judged"] = row["name"] in report.verdicts
    passed = sorted(
        (row for row in rows if row["passed"]), key=lambda row: (-(row["score"] or 0), row["name"])
    )
    rejected = [row for row in rows if not row["passed"]]
    by_reason = Counter(row["wire_reason"] for row in rejected)
    score_counts = Counter(row["score"] for row in passed if row["score"] is not None)
    dry_run = [row for row in passed if not row["dry_run"]["would_pass"]]
    groups = _groups(rejected)
    shown = passed[:MAX_SHOWN_NODES]
    for row in (*shown, *(row for group in groups for row in group["rows"])):
        row["fit_cell"] = fit_cell(row["fit"], judged=row["fit_judged"])
    return {
        **result,
        "by_reason": sorted(by_reason.items(), key=lambda item: (-item[1], item[0] or "")),
        "scores": score_story(passed),
        "score_histogram": [(str(score), score_counts.get(score, 0), 0) for score in range(11)],
        "dry_run_rejects": dry_run,
        "passed_rows": shown,
        "passed_hidden": max(0, len(passed) - MAX_SHOWN_NODES),
        "rejected_groups": groups,
        "scheduler": _scheduler(rows, report, len(rows), stored[2] if stored is not None else None),
        "patterns": patterns,
    }
