"""``{% open_proposals %}``: the proposals waiting for a decision, for the dashboard."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from changes.models import Proposal, ProposalStatus, Verdict
from changes.services import mark_stale

register = template.Library()

SHOWN = 10
# Read at most this many to count and show (a longer queue is "more than 100").
READ = 101


@register.inclusion_tag("changes/open_proposals.html", takes_context=True)
def open_proposals(context: Any) -> dict[str, Any]:
    waiting = list(
        Proposal.objects.filter(
            status__in=[ProposalStatus.PENDING, ProposalStatus.STALE]
        ).prefetch_related("approvals")[:READ]
    )
    mark_stale(waiting)
    total = len(waiting)
    rows = [
        {
            "number": p.pk,
            "url": reverse("admin:changes_proposal_change", args=[p.pk]),
            "object": f"{p.get_object_type_display()} {p.object_name}",
            "operation": p.operation,
            "status": p.get_status_display(),
            "stale": p.status == ProposalStatus.STALE,
            "approvals": sum(1 for a in p.approvals.all() if a.verdict == Verdict.APPROVE),
            "required": p.required_approvals,
            "author": p.author_name,
        }
        for p in waiting[:SHOWN]
    ]
    return {
        "rows": rows,
        "total": f"more than {READ - 1}" if total >= READ else total,
        "list_url": reverse("admin:changes_proposal_changelist"),
    }
