"""The dashboard's pod cards: per cluster with a pod inventory, the Pending pods the portal
holds and the running pods that break a rule now, each linked to its page."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse

from inventory.models import Cluster
from policies.pod_verdicts import pending_report, pod_count, violations


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


def pod_problems(cards: list[PodCard]) -> list[tuple[str, str, str]]:
    """The dashboard's problems of the pods: (message, link, what to do there) per cluster with
    Pending pods the portal holds or running pods that break a rule."""
    found = []
    for card in cards:
        if card.held:
            plural = "s" if card.held != 1 else ""
            found.append(
                (
                    f"Cluster {card.cluster}: {card.held} Pending pod{plural} "
                    "held by the portal's policies (no node passes them).",
                    card.pending_url,
                    "see the Pending pods",
                )
            )
        if card.violations:
            many = card.violations != 1
            found.append(
                (
                    f"Cluster {card.cluster}: {card.violations} running pod{'s' if many else ''} "
                    f"break{'' if many else 's'} a rule (on nodes the enforce policies now "
                    "reject).",
                    card.violations_url,
                    "see the pods that break a rule",
                )
            )
    return found
