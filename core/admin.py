"""Display helpers shared by the app admins, and the read-only audit log."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from core.errors import ContentError, ExpectationsBroken, VersionConflict, conflict_message
from core.models import ApiToken, AuditEntry

EMPTY = "—"


def merge_fields(*groups: Any) -> list[str]:
    """Field names of every group in order, each once (an admin's own plus a mixin's)."""
    out: list[str] = []
    for group in groups:
        out.extend(f for f in group if f not in out)
    return out


# --- display helpers ------------------------------------------------------------------------


def pretty_json(value: Any) -> str:
    """Stable, indented JSON text (keys sorted so two versions diff line by line)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def json_pre(value: Any) -> SafeString | str:
    """A JSON value as escaped, pretty-printed HTML ``<pre>``; a dash when empty."""
    if value is None:
        return EMPTY
    return format_html('<pre class="portal-json">{}</pre>', pretty_json(value))


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> SafeString | str:
    """An escaped HTML table; a dash when there are no rows."""
    rows = list(rows)
    if not rows:
        return EMPTY
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((_cell(c),) for c in row)),) for row in rows),
    )
    return format_html(
        '<table class="portal-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
        head,
        body,
    )


def _cell(value: Any) -> str:
    if value is None or value == "":
        return EMPTY
    if isinstance(value, SafeString):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def age(moment: datetime | None, *, never: str = "never") -> str:
    """'3 minutes ago' style age of a timestamp."""
    if moment is None:
        return never
    if timezone.now() - moment < timedelta(minutes=1):
        return "just now"
    return f"{timesince(moment, depth=1)} ago"


def labels_text(labels: dict[str, str] | None, limit: int = 0) -> str:
    """'k=v, k2=v2' (sorted), optionally cut after ``limit`` pairs."""
    items = sorted((labels or {}).items())
    shown = items[:limit] if limit else items
    text = ", ".join(f"{k}={v}" for k, v in shown)
    if limit and len(items) > limit:
        text += f", … (+{len(items) - limit})"
    return text or EMPTY


if TYPE_CHECKING:
    _ModelAdminBase = admin.ModelAdmin[Any]
else:
    _ModelAdminBase = object


class ServiceWriteMixin(_ModelAdminBase):
    """Turns a write the service refused at save time into a message instead of a 500.

    Forms already run the same validation and version check, so this only catches what changed
    between validating and saving (another user's edit in that instant).
    """

    conflict_subject = "object"

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except VersionConflict as exc:
            self.message_user(
                request,
                conflict_message(self.conflict_subject, exc.current_version),
                messages.ERROR,
            )
        except (ContentError, ExpectationsBroken) as exc:
            self.message_user(request, f"Not saved: {exc}", messages.ERROR)
        return HttpResponseRedirect(request.get_full_path())


HISTORY_ROWS = 50


class PortalHistory(_ModelAdminBase):
    """Django's "History" button shows the portal's own record of the object.

    The admin's change log (``LogEntry``) sees only edits made in the admin; the portal's
    services version and audit every write — API, apply, seed, sync — so the history page lists
    the object's versions (``history_versions``, for versioned objects) and its audit entries,
    each linked, instead of "no change history" for a policy with six versions."""

    history_object_type = ""  # the audit log's object_type for this model

    def history_versions(self, request: HttpRequest, obj: Any) -> tuple[list[dict], str]:
        """The object's newest versions (version, created_at, author, note, url) and the URL of
        all of them; none for objects that are not versioned."""
        return [], ""

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict | None = None
    ) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            # Django's own redirect for a missing object (undocumented, missing from the stubs).
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)  # type: ignore[attr-defined]
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        name = getattr(obj, "name", str(obj))
        entries = AuditEntry.objects.filter(
            object_type=self.history_object_type, object_name=name
        ).select_related("actor")
        can_read_audit = request.user.has_perm("portal.view_auditentry")
        versions, versions_url = self.history_versions(request, obj)
        context = {
            **self.admin_site.each_context(request),
            "title": f"History: {name}",
            "subtitle": None,
            "opts": self.opts,
            "module_name": str(self.opts.verbose_name_plural).capitalize(),
            "object": obj,
            "versions": versions,
            "versions_url": versions_url,
            "entries": list(entries[:HISTORY_ROWS]),
            "entry_total": entries.count(),
            "audit_url": reverse("admin:portal_auditentry_changelist")
            + "?"
            + urlencode({"object_type": self.history_object_type, "object_name": name})
            if can_read_audit
            else "",
            "can_read_audit": can_read_audit,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/portal_history.html", context)


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is written only by services: viewable, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# --- audit log ------------------------------------------------------------------------------


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor_display", "action", "object_type", "object_name", "note")
    list_filter = ("action", "object_type")
    search_fields = ("object_name", "actor_name", "note")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "actor_display",
        "action",
        "object_type",
        "object_name",
        "note",
        "before_display",
        "after_display",
    )
    readonly_fields = fields

    @admin.display(description="actor", ordering="actor_name")
    def actor_display(self, obj: AuditEntry) -> str:
        return obj.actor_name or "system"

    @admin.display(description="before")
    def before_display(self, obj: AuditEntry) -> SafeString | str:
        return json_pre(obj.before)

    @admin.display(description="after")
    def after_display(self, obj: AuditEntry) -> SafeString | str:
        return json_pre(obj.after)


# --- API tokens -------------------------------------------------------------------------------

# DRF's own token admin (it would show keys in clear) is unregistered by the admin's app config
# (portal.apps.PortalAdminConfig); the portal's tokens are hashed (core/tokens.py).


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Who holds a token and when it was used; keys are never shown (only issued, once)."""

    list_display = (
        "prefix_shown",
        "user",
        "role",
        "name",
        "created_at",
        "expires_at",
        "last_used_at",
    )
    list_filter = ("role", "user")
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = (
        "user",
        "role",
        "name",
        "prefix",
        "created_at",
        "expires_at",
        "last_used_at",
    )
    exclude = ("digest",)

    @admin.display(description="token", ordering="prefix")
    def prefix_shown(self, obj: ApiToken) -> str:
        return f"{obj.prefix}…"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # issued with `manage.py create_api_token`, which shows the key once

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
