"""The dashboard's pod cards: per cluster with a pod inventory, the Pending pods the portal
holds and the running pods that break a rule now, each linked to its page."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse

from inventory.models import Cluster
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
    cards = []
    for cluster in Cluster.objects.filter(pod_inventory__isnull=False).order_by("name"):
        count = pod_count(cluster)
        if not count:
            continue
        report = pending_report(cluster)
        query = urlencode({"cluster": cluster.name})
        cards.append(
            PodCard(
                cluster=cluster.name,
                pods=count,
                pending=len(report.rows),
                held=report.held,
                violations=len(violations(cluster)),
                pending_url=f"{reverse('admin:console-pending')}?{query}",
                violations_url=f"{reverse('admin:console-violations')}?{query}",
            )
        )
    return cards
