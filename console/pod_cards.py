"""The dashboard's pod cards: per cluster with a pod inventory, the Pending pods the portal
holds and the running pods that break a rule now, each linked to its page."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse

from inventory.models import Cluster, Pod
from inventory.pod_verdicts import pending_report, pod_count, violations


@dataclass
class PodCard:
    cluster: str
    pods: int
    pending: int
    held: int
    violations: int
    pending_url: str
    violations_url: str


def pod_cards() -> list[PodCard]:
    """One card per cluster that has pods (clusters without a pod inventory are left out)."""
    with_pods = set(Pod.objects.values_list("cluster_id", flat=True).distinct())
    cards = []
    for cluster in Cluster.objects.filter(pk__in=with_pods).order_by("name"):
        report = pending_report(cluster)
        query = urlencode({"cluster": cluster.name})
        cards.append(
            PodCard(
                cluster=cluster.name,
                pods=pod_count(cluster),
                pending=len(report.rows),
                held=report.held,
                violations=len(violations(cluster)),
                pending_url=f"{reverse('console-pending')}?{query}",
                violations_url=f"{reverse('console-violations')}?{query}",
            )
        )
    return cards
