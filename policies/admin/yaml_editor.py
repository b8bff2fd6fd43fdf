"""Edit a policy as YAML — the same content as its PolicySet entry — with the form's safety
net: the impact preview, warnings and broken expectations hold the save until confirmed.

The admin's "Edit as YAML" link on a policy opens it; the document is read with the bounded,
alias-free YAML loader the API uses, validated by ``clean_policy`` and written by the same
services (one version, one audit entry, the change note kept).
"""

from __future__ import annotations

from typing import Any

import yaml
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.forms.utils import ErrorList
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from core.api.formats import yaml_dump, yaml_error_text, yaml_load
from core.errors import ContentError, ExpectationsBroken, VersionConflict
from core.limits import MAX_DOCUMENT_BYTES, MAX_NOTE_CHARS
from policies.admin.draft import CONFIRM_FIELD, PREVIEW_BUTTON, draft_report, hold_message
from policies.content import policy_content
from policies.models import Policy
from policies.services import policy_update
from policies.validation import clean_policy


def yaml_view(modeladmin: Any, request: HttpRequest, object_id: str) -> HttpResponse:
    policy = modeladmin.get_object(request, object_id)
    if policy is None:
        return modeladmin._get_obj_does_not_exist_redirect(request, Policy._meta, object_id)
    if not modeladmin.has_view_permission(request, policy):
        raise PermissionDenied
    can_change = modeladmin.has_change_permission(request, policy)
    text = yaml_dump(policy_content(policy))
    note = ""
    errors: list[str] = []
    report = None
    hold = None
    if request.method == "POST":
        if not can_change:
            raise PermissionDenied
        text = request.POST.get("document", "")
        note = request.POST.get("change_note", "")[:MAX_NOTE_CHARS]
        content = _read(text, errors)
        if content is not None:
            report = draft_report(content, policy)
            problems = (
                report["warnings"]
                or report.get("broken_expectations")
                or report.get("pods_affected")
            )
            confirmed = bool(request.POST.get(CONFIRM_FIELD))
            if PREVIEW_BUTTON not in request.POST and (confirmed or not problems):
                done = _save(modeladmin, request, policy, content, note, confirmed, errors)
                if done is not None:
                    return done
            elif problems and PREVIEW_BUTTON not in request.POST:
                hold = ErrorList([hold_message(report)])
    opts = Policy._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{'Edit ' if can_change else ''}{policy.name} as YAML",
        "subtitle": None,
        "opts": opts,
        "original": policy,
        "document": text,
        "change_note": note,
        "errors": errors,
        "draft_report": report,
        "draft_hold": hold,
        "confirm_field": CONFIRM_FIELD,
        "preview_button": PREVIEW_BUTTON,
        "can_change": can_change,
        "form_url": reverse("admin:policies_policy_change", args=[policy.pk]),
    }
    return TemplateResponse(request, "admin/policies/policy/yaml.html", context)


def _read(text: str, errors: list[str]) -> dict | None:
    if len(text.encode()) > MAX_DOCUMENT_BYTES:
        errors.append(f"The document is larger than {MAX_DOCUMENT_BYTES} bytes.")
        return None
    try:
        data = yaml_load(text)
    except yaml.YAMLError as exc:
        errors.append(f"Not valid YAML, {yaml_error_text(exc)}.")
        return None
    try:
        return clean_policy(data)
    except ContentError as exc:
        errors.extend(f"{path}: {m}" if path else m for path, ms in exc.errors.items() for m in ms)
        return None


def _save(
    modeladmin: Any,
    request: HttpRequest,
    policy: Policy,
    content: dict,
    note: str,
    confirmed: bool,
    errors: list[str],
) -> HttpResponse | None:
    try:
        saved = policy_update(
            actor=request.user,
            policy=policy,
            data=content,
            expected_version=_int(request.POST.get("expected_version")),
            note=note or "edited as YAML",
            force=confirmed,
        )
    except VersionConflict as exc:
        errors.append(
            f"This policy was changed by someone else (now version {exc.current_version}); "
            "reload the page and make your change again."
        )
        return None
    except (ContentError, ExpectationsBroken) as exc:
        errors.append(str(exc))
        return None
    if saved.version == policy.version:
        modeladmin.message_user(request, "No change: the document equals the saved policy.")
    else:
        modeladmin.message_user(
            request, f"Saved {saved.name} as version {saved.version}.", messages.SUCCESS
        )
    return HttpResponseRedirect(reverse("admin:policies_policy_change", args=[saved.pk]))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
