"""The Pending and Violations pages: the portal's verdict on the cluster's pods now.

Both read ``policies.pod_verdicts`` (the engine's judgement with the snapshot the extender
serves). Viewers read; only users holding ``inventory.evict_pod`` (admins and the ``evictor``
grant, not editors as such) may evict, never in a protected namespace, and an eviction is shown
with its impact and confirmed first (``inventory.evict`` does it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Max, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from console.frame import page_context
from core.errors import ContentError
from inventory import sources
from inventory.display import freshness, plain_error
from inventory.evict import (
    MAX_PER_REQUEST,
    pods_evict,
    protected_namespaces,
    stored_pods,
    terminating_among,
)
from inventory.models import Cluster, Node, Pod, PodInventory
from inventory.pod_queries import placed_since
from policies.models import Policy
from policies.pod_verdicts import PendingRow, ViolationRow, pending_report, violations

SHOWN_PER_GROUP = 50
SHOWN_VIOLATIONS = 500
VIEW_PERMISSION = "inventory.view_pod"
EVICT_PERMISSION = "inventory.evict_pod"


@dataclass
class Group:
    reason: str
    count: int
    policy: str = ""
    policy_url: str = ""
    explain_url: str = ""
    rows: list[PendingRow] = field(default_factory=list)
    # (row, its explain link) for the pods Pending for other reasons
    links: list[tuple[PendingRow, str]] = field(default_factory=list)

    @property
    def hidden(self) -> int:
        return max(0, self.count - len(self.rows))


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied


def _pick_cluster(request: HttpRequest) -> tuple[list[str], Cluster | None]:
    names = list(Cluster.objects.order_by("-is_default", "name").values_list("name", flat=True))
    wanted = (
        request.GET.get("cluster") or request.POST.get("cluster") or (names[0] if names else "")
    )
    return names, Cluster.objects.filter(name=wanted).first()


def explain_url(cluster: str, namespace: str, name: str, labels: dict[str, str]) -> str:
    """The explain page for this pod as the inventory stores it (``stored``: its requests,
    tolerations and node selection are judged too; the labels stay for a pod gone since)."""
    query = {
        "cluster": cluster,
        "namespace": namespace,
        "name": name,
        "labels": "\n".join(f"{k}={v}" for k, v in sorted(labels.items())),
        "stored": "1",
    }
    return f"{reverse('admin:console-explain')}?{urlencode(query)}"


def _policy_urls(names: set[str]) -> dict[str, str]:
    return {
        name: reverse("admin:policies_policy_change", args=[pk])
        for pk, name in Policy.objects.filter(name__in=names).values_list("pk", "name")
    }


def pending_groups(cluster: str, rows: list[PendingRow]) -> tuple[list[Group], Group | None]:
    """Pods the portal holds (no passing node), grouped by the reason that rejects most of
    their nodes; and the rest, Pending for kube-scheduler's own reasons."""
    held: dict[str, Group] = {}
    for row in rows:
        if not row.held:
            continue
        group = held.setdefault(row.first_reason, Group(row.first_reason, 0))
        group.count += 1
        if len(group.rows) < SHOWN_PER_GROUP:
            group.rows.append(row)
    urls = _policy_urls({reason.partition("/")[0] for reason in held})
    for group in held.values():
        group.policy = group.reason.partition("/")[0]
        group.policy_url = urls.get(group.policy, "")
        sample = group.rows[0]
        group.explain_url = explain_url(cluster, sample.namespace, sample.name, sample.labels)
        group.links = [(r, explain_url(cluster, r.namespace, r.name, r.labels)) for r in group.rows]
    ordered = sorted(held.values(), key=lambda g: (-g.count, g.reason))
    others = [row for row in rows if not row.held]
    rest = None
    if others:
        shown = others[:SHOWN_PER_GROUP]
        rest = Group(
            "",
            len(others),
            rows=shown,
            links=[(r, explain_url(cluster, r.namespace, r.name, r.labels)) for r in shown],
        )
    return ordered, rest


SHOWN_WAITING = 10


def requeue_outcome(
    cluster: Cluster, inventory: PodInventory | None, rows: list[PendingRow]
) -> dict[str, Any] | None:
    """What followed the last requeue nudge: how many pods kube-scheduler placed since (their
    PodScheduled condition turned True after it) and how long the last one took, and which of
    the Pending pods the portal leaves nodes still wait, with kube-scheduler's word on them."""
    if inventory is None or inventory.nudged_at is None:
        return None
    placed, seconds = placed_since(cluster, inventory.nudged_at)
    waiting = [row for row in rows if not row.held]
    return {
        "placed": placed,
        "nudged": inventory.nudged_pods,
        "seconds": seconds,
        "waiting": waiting[:SHOWN_WAITING],
        "waiting_count": len(waiting),
    }


def _requeue_state(cluster: Cluster, rows: list[PendingRow]) -> dict[str, Any]:
    inventory = PodInventory.objects.filter(cluster=cluster).first()
    return {
        "static": not sources.of(cluster).live,
        "enabled": cluster.requeue_pending,
        "inventory": inventory,
        "outcome": requeue_outcome(cluster, inventory, rows),
    }


def _marked(
    cluster: Cluster, rest: Group | None, changed: Any
) -> list[tuple[PendingRow, str, bool]]:
    """The rest's rows with their explain link and whether kube-scheduler's message was last
    seen before the policies last changed (the watch rewrites a pod's row, and its
    ``last_seen``, whenever kube-scheduler rewrites the message)."""
    if rest is None:
        return []
    seen: dict[tuple[str, str], Any] = {}
    if changed is not None:
        names = [row.name for row, _ in rest.links]
        for namespace, name, last_seen in Pod.objects.filter(
            cluster=cluster, name__in=names
        ).values_list("namespace", "name", "last_seen"):
            seen[(namespace, name)] = last_seen
    return [
        (
            row,
            url,
            bool(
                row.scheduler_message
                and changed is not None
                and (row.namespace, row.name) in seen
                and seen[(row.namespace, row.name)] < changed
            ),
        )
        for row, url in rest.links
    ]


def last_policy_change(cluster: Cluster) -> Any:
    """When a policy that applies to the cluster last changed: kube-scheduler's messages
    written before may name a rule as it was then."""
    return (
        Policy.objects.filter(Q(cluster__isnull=True) | Q(cluster=cluster))
        .aggregate(last=Max("updated_at"))
        .get("last")
    )


def pending_view(request: HttpRequest) -> HttpResponse:
    """Pending pods of a cluster with the portal's verdict now, grouped by reason."""
    _require(request, VIEW_PERMISSION)
    names, cluster = _pick_cluster(request)
    context: dict[str, Any] = page_context(
        request,
        "Pending pods",
        clusters=names,
        cluster=cluster,
    )
    if cluster is not None:
        context["freshness"] = freshness(cluster, pods=True)
        report = pending_report(cluster, namespace=request.GET.get("namespace") or None)
        groups, rest = pending_groups(cluster.name, report.rows)
        changed = last_policy_change(cluster)
        context.update(
            report=report,
            groups=groups,
            rest=rest,
            requeue=_requeue_state(cluster, report.rows),
            rules_changed_at=changed,
            rest_rows=_marked(cluster, rest, changed),
            namespace=request.GET.get("namespace", ""),
        )
    return TemplateResponse(request, "console/pending.html", context)


def _violation_key(row: ViolationRow) -> str:
    return f"{row.namespace}/{row.name}"


def violations_view(request: HttpRequest) -> HttpResponse:
    """Running pods on nodes the enforce policies now reject; evictors may evict some."""
    _require(request, VIEW_PERMISSION)
    names, cluster = _pick_cluster(request)
    can_evict = bool(
        cluster is not None and sources.of(cluster).live and request.user.has_perm(EVICT_PERMISSION)
    )
    fresh = freshness(cluster, pods=True) if cluster is not None else None
    # Offered, but off while the cluster's API cannot be reached (the reason is shown).
    evict_blocked = fresh.api_blocked if fresh is not None and can_evict else ""
    context: dict[str, Any] = page_context(
        request,
        "Pods that break a rule",
        clusters=names,
        cluster=cluster,
        can_evict=can_evict,
        evict_blocked=evict_blocked,
        freshness=fresh,
        max_per_request=MAX_PER_REQUEST,
        protected=sorted(protected_namespaces()),
    )
    if cluster is None:
        return TemplateResponse(request, "console/violations.html", context)
    rows = violations(cluster, namespace=request.GET.get("namespace") or None)
    # Pods evicted a moment ago (or being deleted) are marked as such at once, whatever the
    # cached verdicts still say, and are not offered for eviction again.
    terminating = terminating_among(cluster, [(r.namespace, r.name) for r in rows])
    if request.method == "POST":
        if not can_evict:
            raise PermissionDenied
        if evict_blocked:
            messages.error(request, evict_blocked)
            back = f"{reverse('admin:console-violations')}?{urlencode({'cluster': cluster.name})}"
            return HttpResponseRedirect(back)
        live = [r for r in rows if (r.namespace, r.name) not in terminating]
        return _evict_flow(request, cluster, live, context)
    shown = rows[:SHOWN_VIOLATIONS]
    urls = _policy_urls({reason.partition("/")[0] for r in shown for reason in r.reasons})
    nodes = dict(
        Node.objects.filter(cluster=cluster, name__in={r.node for r in shown}).values_list(
            "name", "pk"
        )
    )
    context.update(
        # Each row with its links: the node's page, each reason's policy, explain.
        items=[
            (
                row,
                reverse("admin:inventory_node_change", args=[nodes[row.node]])
                if row.node in nodes
                else "",
                [(reason, urls.get(reason.partition("/")[0], "")) for reason in row.reasons],
                explain_url(cluster.name, row.namespace, row.name, row.labels),
                (row.namespace, row.name) in terminating,
            )
            for row in shown
        ],
        rows=shown,
        hidden=max(0, len(rows) - SHOWN_VIOLATIONS),
        total=len(rows) - len(terminating),
        terminating_count=len(terminating),
        policy_urls=urls,
        namespace=request.GET.get("namespace", ""),
    )
    return TemplateResponse(request, "console/violations.html", context)


def _evict_flow(
    request: HttpRequest, cluster: Cluster, rows: list[ViolationRow], context: dict[str, Any]
) -> HttpResponse:
    chosen = [key for key in request.POST.getlist("pod") if "/" in key]
    by_key = {_violation_key(row): row for row in rows}
    selected = [by_key[key] for key in dict.fromkeys(chosen) if key in by_key]
    back = f"{reverse('admin:console-violations')}?{urlencode({'cluster': cluster.name})}"
    if not selected:
        messages.warning(request, "Choose the pods to evict: none of those sent breaks a rule now.")
        return HttpResponseRedirect(back)
    if len(selected) > MAX_PER_REQUEST:
        messages.error(request, f"At most {MAX_PER_REQUEST} pods at a time.")
        return HttpResponseRedirect(back)
    if request.POST.get("confirm") != "yes":
        keys = [(row.namespace, row.name) for row in selected]
        owners = {(p.namespace, p.name): p for p in stored_pods(cluster, keys)}
        context.update(
            title="Evict these pods?",
            selected=selected,
            owners=owners,
        )
        return TemplateResponse(request, "console/evict_confirm.html", context)
    try:
        results = pods_evict(
            actor=request.user, cluster=cluster, pods=[(r.namespace, r.name) for r in selected]
        )
    except ContentError as exc:
        for problems in exc.errors.values():
            for problem in problems:
                messages.error(request, problem)
        return HttpResponseRedirect(back)
    evicted = sum(r.ok for r in results)
    level = messages.SUCCESS if evicted == len(results) else messages.WARNING
    messages.add_message(request, level, f"{evicted} of {len(results)} pods evicted.")
    for result in results:
        if not result.ok:
            # A budget's refusal is shown word for word; a failed call as what to do about it.
            text = plain_error(result.message) if result.outcome == "failed" else result.message
            # "Pod ml/x ...": the admin capitalises a message's first letter, never a namespace.
            messages.warning(
                request, f"Pod {result.namespace}/{result.name} {result.outcome}: {text}"
            )
    return HttpResponseRedirect(back)
