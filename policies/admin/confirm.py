"""The step before a risky admin action: what changes, what it does before and after, then
"Yes, I'm sure".

Enable, disable, mode switches, rollback, restore and delete (one object or many) are shown
here first: for each policy the content diff, and per cluster what the policy does now and what
it will do once changed — both judged by the same call as ``POST /api/v1/policies/preview/`` —
with the new content's warnings and the expectations the change breaks; for a label assignment
the nodes it labels now and after, and how many nodes' effective labels change
(docs/operations.md, "Editing policies safely"). The page posts the same action back with
``post=yes``, which then runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.contrib.admin import ModelAdmin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.http import HttpRequest
from django.template.response import TemplateResponse

from core.errors import ContentError
from policies.admin.common import version_diff
from policies.content import label_assignment_content, policy_content
from policies.expectations import broken_by, broken_by_assignment
from policies.models import LabelAssignment, Policy
from policies.preview import preview_label_assignment, preview_policy

CONFIRMED = "yes"
DELETED = "deleted"


def confirmed(request: HttpRequest) -> bool:
    return request.POST.get("post") == CONFIRMED


def _state(content: Mapping[str, Any] | None) -> str:
    if content is None:
        return DELETED
    if not content.get("enabled", True):
        return "disabled"
    return "dry-run" if content.get("mode") == "dry-run" else "enforced"


def _preview(content: Mapping[str, Any] | None) -> dict[str, Any]:
    if content is None:
        return {"clusters": [], "warnings": []}
    try:
        return preview_policy(dict(content))
    except ContentError as exc:
        # E.g. a cluster the snapshot does not know yet: say so instead of failing the page.
        return {"clusters": [], "warnings": [], "problem": str(exc)}


def _side(state: str, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the policy does in one cluster in one state: only an enforced policy rejects."""
    if state == DELETED:
        return {"state": state, "rejected": 0, "would_reject": 0, "applies": True}
    if entry is None:
        return {"state": state, "rejected": 0, "would_reject": 0, "applies": False}
    enforced = state == "enforced"
    return {
        "state": state,
        "rejected": entry["rejected"] if enforced else 0,
        "would_reject": entry["rejected"],
        "applies": True,
    }


def impact_rows(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per cluster, what the policy does now and after the change; and the after-report (its
    warnings, and the expectations it breaks)."""
    now, then = _preview(before), _preview(after)
    now_by = {c["cluster"]: c for c in now["clusters"]}
    then_by = {c["cluster"]: c for c in then["clusters"]}
    rows = []
    for cluster in sorted(set(now_by) | set(then_by)):
        entry = then_by.get(cluster) or now_by[cluster]
        rows.append(
            {
                "cluster": cluster,
                "nodes": entry["nodes"],
                "before": _side(_state(before), now_by.get(cluster)),
                "after": _side(_state(after), then_by.get(cluster)),
            }
        )
    return rows, then


def change_item(
    policy: Policy, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> dict[str, Any]:
    """One policy on the confirmation page: its diff, and what it does before and after.

    ``before`` None: the policy is deleted (a restore); ``after`` None: it goes."""
    item: dict[str, Any] = {"policy": policy, "unchanged": before == after}
    # A delete's diff would be every line removed: the impact says it better.
    item["diff"] = (
        version_diff(before or {}, after, ("now", "after this change")) if after else None
    )
    item["gone"] = after is None
    rows, report = impact_rows(before, after)
    item["impact"] = rows
    if after is None:
        report = {**report, "broken_expectations": broken_by({policy.name: None})}
    item["report"] = report
    return item


def policy_changes(
    queryset: Iterable[Policy], change: Callable[[dict], dict | None]
) -> list[dict[str, Any]]:
    items = []
    for policy in queryset:
        before = dict(policy_content(policy))
        items.append(change_item(policy, before, change(dict(before))))
    return items


def assignment_item(
    assignment: LabelAssignment, after: Mapping[str, Any] | None, label: str = ""
) -> dict[str, Any]:
    """One label assignment on the confirmation page: its diff, the nodes it labels now and
    after, and the nodes whose effective labels change (``after`` None: it goes)."""
    before = dict(label_assignment_content(assignment))
    draft = dict(after) if after is not None else {**before, "enabled": False}
    try:
        now = preview_label_assignment(before)
        then = preview_label_assignment(draft)
    except ContentError as exc:
        now = then = {"clusters": [], "warnings": [], "problem": str(exc)}
    then_by = {c["cluster"]: c for c in then["clusters"]}
    labels = [
        {
            "cluster": c["cluster"],
            "nodes": c["nodes"],
            "before": c["matched"] if before["enabled"] else 0,
            "after": then_by[c["cluster"]]["matched"] if c["cluster"] in then_by else 0,
            "changed": then_by[c["cluster"]]["changed_nodes"] if c["cluster"] in then_by else 0,
        }
        for c in now["clusters"]
    ]
    report = {
        "warnings": then.get("warnings", []) if after is not None else [],
        "problem": then.get("problem"),
        "broken_expectations": broken_by_assignment(
            assignment.name, dict(after) if after is not None else None
        ),
    }
    return {
        "label": label or assignment.name,
        "policy": assignment,
        "unchanged": before == after,
        "diff": version_diff(before, after, ("now", "after this change")) if after else None,
        "labels": labels,
        "report": report,
        "gone": after is None,
    }


def confirmation_page(
    modeladmin: ModelAdmin,
    request: HttpRequest,
    *,
    title: str,
    action: str,
    selected: Iterable[Any],
    items: list[dict[str, Any]],
    button: str,
    note: str = "",
) -> TemplateResponse:
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "subtitle": None,
        "opts": opts,
        "app_label": opts.app_label,
        "action": action,
        "action_checkbox_name": ACTION_CHECKBOX_NAME,
        "selected": [obj.pk for obj in selected],
        "select_across": request.POST.get("select_across", "0"),
        "items": items,
        "button": button,
        "note": note,
        "warnings": sum(len(i["report"]["warnings"]) for i in items if i.get("report")),
        "changes": sum(not i["unchanged"] for i in items),
        "broken": sum(
            len(i["report"].get("broken_expectations") or []) for i in items if i.get("report")
        ),
    }
    return TemplateResponse(request, "admin/policies/confirm_action.html", context)
