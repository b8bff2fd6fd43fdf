"""The replay report page: a draft (a policy from the editor's "Full replay" link, or a pasted
PolicySet) replayed against the recorded calls of a window, with the same numbers as
``POST /api/v1/replay/``."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from core.errors import ContentError
from inventory.models import Cluster
from replay.api import PERMISSIONS
from replay.replayer import draft_from_policy, draft_from_policy_set
from replay.service import clean_days, replay


def _document(text: str, field: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ContentError({field: [f"Not YAML or JSON: {exc}"]}) from None


def _days(text: str) -> int:
    if not text:
        return clean_days(None)
    if not text.isdigit():
        raise ContentError({"days": ["Must be a whole number of days."]})
    return clean_days(int(text))


def _run(data: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(result, form values) for the query string or the posted form."""
    form = {
        "policy": data.get("policy", ""),
        "policy_set": data.get("policy_set", ""),
        "prune": bool(data.get("prune")),
        "days": data.get("days", ""),
        "cluster": data.get("cluster", ""),
    }
    if not (form["policy"].strip() or form["policy_set"].strip()):
        return None, form
    days = _days(form["days"].strip())
    if form["policy_set"].strip():
        draft = draft_from_policy_set(
            _document(form["policy_set"], "policy_set"), prune=form["prune"]
        )
    else:
        draft = draft_from_policy(_document(form["policy"], "policy"))
    return replay(draft, days=days, cluster=form["cluster"] or None), form


def report_view(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perms(PERMISSIONS):
        raise PermissionDenied
    data = request.POST if request.method == "POST" else request.GET
    errors = None
    result = None
    try:
        result, form = _run(data)
    except ContentError as exc:
        errors = exc.errors
        form = {k: data.get(k, "") for k in ("policy", "policy_set", "days", "cluster")}
    context = {
        **admin.site.each_context(request),
        "title": "Replay a draft against recorded calls",
        "subtitle": None,
        "result": result,
        "errors": errors,
        "form": form,
        "policy_pretty": _pretty(form.get("policy", "")),
        "clusters": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
    }
    return TemplateResponse(request, "replay/report.html", context)


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2) if text.strip() else ""
    except ValueError:
        return text
