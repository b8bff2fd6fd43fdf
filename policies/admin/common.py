"""Helpers shared by the policy, label-assignment and version admins."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin import pretty_json
from policies.models import Expectation, LabelAssignment, Policy

HISTORY_FIELDS = ("version", "created_at", "created_by", "updated_at", "updated_by")


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def cluster_display(obj: Policy | LabelAssignment | Expectation) -> str:
    return obj.cluster.name if obj.cluster is not None else "all clusters"


def version_diff(
    previous: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    labels: tuple[str, str] = ("previous version", "this version"),
) -> SafeString | str:
    """A unified diff of two versions' pretty JSON, coloured line by line."""
    if previous is None:
        return "First version: nothing to compare with."
    lines = list(
        difflib.unified_diff(
            pretty_json(previous).splitlines(),
            pretty_json(current).splitlines(),
            fromfile=labels[0],
            tofile=labels[1],
            lineterm="",
        )
    )
    if not lines:
        return "Same content as the previous version."

    def css(line: str) -> str:
        if line.startswith("@@"):
            return "diff-hunk"
        if line.startswith("+") and not line.startswith("+++"):
            return "diff-add"
        if line.startswith("-") and not line.startswith("---"):
            return "diff-del"
        return ""

    body = format_html_join("\n", '<span class="{}">{}</span>', ((css(x), x) for x in lines))
    return format_html('<pre class="portal-diff">{}</pre>', body)


HISTORY_VERSIONS = 50


def version_rows(versions: QuerySet, url_name: str) -> list[dict[str, Any]]:
    """The newest versions for an object's history page, each linked to its diff."""
    return [
        {
            "version": v.version,
            "created_at": v.created_at,
            "author": v.author_name,
            "note": v.note,
            "url": reverse(url_name, args=[v.pk]),
        }
        for v in versions.order_by("-version")[:HISTORY_VERSIONS]
    ]
