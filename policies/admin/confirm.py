"""The step before a risky admin action: what changes, what it will do, then "Yes, I'm sure".

Enable, disable, mode switches and rollback are shown here first: for each policy the content
diff, the impact preview of the new content (the same call as ``POST
/api/v1/policies/preview/``) and its warnings (docs/operations.md, "Editing policies safely").
The page posts the same action back with ``post=yes``, which then runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.contrib.admin import ModelAdmin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.http import HttpRequest
from django.template.response import TemplateResponse

from core.errors import ContentError
from policies.admin.common import version_diff
from policies.content import policy_content
from policies.models import Policy
from policies.preview import preview_policy

CONFIRMED = "yes"


def confirmed(request: HttpRequest) -> bool:
    return request.POST.get("post") == CONFIRMED


def change_item(policy: Policy, before: dict, after: dict) -> dict[str, Any]:
    """One policy on the confirmation page: its diff, and the impact of the new content."""
    item: dict[str, Any] = {"policy": policy, "unchanged": before == after}
    item["diff"] = version_diff(before, after, ("now", "after this change"))
    try:
        item["report"] = preview_policy(after)
    except ContentError as exc:
        item["report"] = {"clusters": [], "warnings": [], "problem": str(exc)}
    return item


def policy_changes(
    queryset: Iterable[Policy], change: Callable[[dict], dict]
) -> list[dict[str, Any]]:
    items = []
    for policy in queryset:
        before = policy_content(policy)
        items.append(change_item(policy, dict(before), change(dict(before))))
    return items


def confirmation_page(
    modeladmin: ModelAdmin,
    request: HttpRequest,
    *,
    title: str,
    action: str,
    selected: Iterable[Any],
    items: list[dict[str, Any]],
    button: str,
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
        "warnings": sum(len(i["report"]["warnings"]) for i in items if i.get("report")),
        "changes": sum(not i["unchanged"] for i in items),
        "broken": sum(
            len(i["report"].get("broken_expectations") or []) for i in items if i.get("report")
        ),
    }
    return TemplateResponse(request, "admin/policies/confirm_action.html", context)
