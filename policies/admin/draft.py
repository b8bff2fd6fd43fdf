"""The policy being edited, before it is saved: its impact preview, warnings and diff.

The change form and the live preview endpoint both build the draft from the same POST (the
policy form plus its two rule formsets) and ask ``policies.preview`` — the call behind
``POST /api/v1/policies/preview/`` — what it would do. A save whose draft has warnings is held
until the operator ticks "Save anyway" (``confirm_warnings``); a save with ``_preview`` only shows
the preview. See docs/operations.md, "Editing policies safely".
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from django.forms import BaseFormSet
from django.forms.utils import ErrorList
from django.http import HttpRequest

from core.errors import ContentError
from engine import kinds
from policies.admin.common import version_diff
from policies.compile import current_snapshot
from policies.content import policy_content
from policies.forms import RuleInlineFormSet
from policies.models import FilterRule, Policy
from policies.preview import preview_policy
from policies.preview_lines import preview_lines

CONFIRM_FIELD = "confirm_warnings"
PREVIEW_BUTTON = "_preview"
MAX_HINT_KEYS = 300
MAX_HINT_VALUES = 40


def draft_content(draft: dict | None, formsets: list[BaseFormSet]) -> dict[str, Any] | None:
    """The full content the form would save (``draft``: the policy form's own fields, as
    ``PolicyForm.clean`` left them), or None while any part of it is invalid."""
    if draft is None or not all(f.is_valid() for f in formsets):
        return None
    content = dict(draft)
    for formset in cast(list[RuleInlineFormSet], formsets):
        key = "filter_rules" if formset.model is FilterRule else "weight_rules"
        content[key] = formset.rule_contents()
    return content


def pod_consequences(report: dict[str, Any]) -> tuple[int, int]:
    """Running pods a save would make break a rule, and Pending pods it would leave without a
    node, summed over the clusters of the report (``engine.PodImpact``)."""
    pods = [c["pods"] for c in report.get("clusters", []) if c.get("pods")]
    return sum(p["new_violations"] for p in pods), sum(p["new_held"] for p in pods)


def hold_message(report: dict[str, Any]) -> str:
    """Why a save is held until confirmed, with the numbers (warnings, broken expectations,
    running pods made to break a rule, Pending pods left no node); empty when nothing holds it."""
    warnings = report["warnings"]
    broken = report.get("broken_expectations") or []
    violations, held = pod_consequences(report)
    parts = []
    if warnings:
        parts.append(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''}")
    if broken:
        parts.append(f"breaks {len(broken)} expectation{'s' if len(broken) != 1 else ''}")
    if violations:
        parts.append(f"makes {violations} running pod{'s' if violations != 1 else ''} break a rule")
    if held:
        parts.append(f"leaves {held} Pending pod{'s' if held != 1 else ''} no node")
    # Lines of other subsystems (the replay of recorded calls) that hold the save.
    parts.extend(line["hold"] for line in report.get("lines") or [] if line.get("hold"))
    if not parts:
        return ""
    return (
        f"Not saved yet: this change has {' and '.join(parts)}. Read the impact "
        "preview below, then tick “Save anyway” and save again."
    )


def draft_report(content: dict[str, Any], saved: Policy | None) -> dict[str, Any]:
    """Impact, warnings and (for an existing policy) the diff from its saved content."""
    try:
        report = preview_policy(content)
    except ContentError as exc:
        # E.g. a cluster the snapshot does not know yet: say so instead of failing the page.
        return {"clusters": [], "warnings": [], "problem": str(exc)}
    report["lines"] = preview_lines(content)
    report["pods_affected"] = any(pod_consequences(report)) or any(
        line.get("hold") for line in report["lines"]
    )
    if saved is not None and saved.pk:
        # Read again: the form has already copied the edited fields onto ``saved``.
        stored = Policy.objects.filter(pk=saved.pk).first()
        if stored is not None:
            report["diff"] = version_diff(policy_content(stored), content, ("saved", "this form"))
    return report


class DraftCheck:
    """A stand-in formset the admin validates after the real ones: it holds a save that has
    unconfirmed warnings or asked only for a preview, and keeps the report for the page.

    It has no inline, so the admin neither renders nor saves it; ``save_related`` skips it.
    """

    model = None
    new_objects: list = []
    changed_objects: list = []
    deleted_objects: list = []

    def __init__(self, request: HttpRequest, policy: Policy, formsets: list[BaseFormSet]):
        # ``policy`` is the form's instance: PolicyForm.clean leaves its draft there.
        self.request = request
        self.policy = policy
        self.formsets = formsets
        self.report: dict[str, Any] | None = None
        self._errors = ErrorList()

    def is_valid(self) -> bool:
        content = draft_content(getattr(self.policy, "portal_draft", None), self.formsets)
        if content is None:
            return True  # the form's own errors hold the save
        self.report = draft_report(content, self.policy if self.policy.pk else None)
        if PREVIEW_BUTTON in self.request.POST:
            return False
        hold = hold_message(self.report)
        if hold and not self.request.POST.get(CONFIRM_FIELD):
            self._errors = ErrorList([hold])
            return False
        return True

    def non_form_errors(self) -> ErrorList:
        return self._errors

    @property
    def errors(self) -> list:
        return []


def editor_hints(policy: Policy | None) -> dict[str, Any]:
    """What the rule editor's script needs: the fields of each rule kind, and the label keys
    and values the inventory has, for autocompletion (bounded, most common first)."""
    snapshot = current_snapshot()
    clusters = snapshot.clusters
    if policy is not None and policy.cluster is not None:
        name = policy.cluster.name
        clusters = {k: v for k, v in clusters.items() if k == name}
    counts: Counter[str] = Counter()
    values: dict[str, Counter[str]] = {}
    for cluster in clusters.values():
        for node in cluster.facts:
            for key, value in node.labels.items():
                counts[key] += 1
                values.setdefault(key, Counter())[value] += 1
    keys = [key for key, _ in counts.most_common(MAX_HINT_KEYS)]
    return {
        "filter_fields": kinds.fields_by_kind(kinds.FILTER),
        "weight_fields": kinds.fields_by_kind(kinds.WEIGHT),
        "help": {
            "filter_rules": {kind.name: kind.help for kind in kinds.kinds(kinds.FILTER)},
            "weight_rules": {kind.name: kind.help for kind in kinds.kinds(kinds.WEIGHT)},
        },
        "keys": keys,
        "values": {k: [v for v, _ in values[k].most_common(MAX_HINT_VALUES)] for k in keys},
    }
