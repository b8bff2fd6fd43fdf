"""Admin forms for policies, their rules and label assignments.

The engine validators in ``policies.validation`` decide what is valid; these forms only collect
the values, call them in ``clean()`` and put each message next to the field it is about, so an
operator sees exactly what the REST API would have said.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django import forms

from core.errors import ContentError, conflict_message
from core.formfields import ListTextField, MapTextField, RequirementsTextField
from core.limits import MAX_NOTE_CHARS
from engine import kinds, rollout
from inventory.forms import add_content_errors
from policies.expectations import broken_by_assignment
from policies.models import FilterRule, LabelAssignment, Policy, WeightRule
from policies.preview import preview_label_assignment
from policies.validation import (
    clean_filter_rule,
    clean_label_assignment,
    clean_policy,
    clean_weight_rule,
)
from policies.windows import schedule_content

EVERY_CLUSTER = "— every cluster —"
NOTE_HELP = "Why you make this change; kept with the new version and in the audit log."


def move_paths(error: ContentError, moves: dict[str, str]) -> ContentError:
    """``error`` with each path under a key of ``moves`` re-rooted at its value, so a message
    about ``pod_selector.match_labels`` lands on the form's ``pod_labels`` field."""
    moved: dict[str, list[str]] = {}
    for path, messages in error.errors.items():
        for old, new in moves.items():
            if path == old or path.startswith((old + ".", old + "[")):
                path = new + path[len(old) :]
                break
        moved.setdefault(path, []).extend(messages)
    return ContentError(moved)


class VersionedForm(forms.ModelForm):
    """Remembers the version the form was opened at, so a concurrent edit is not overwritten."""

    expected_version = forms.IntegerField(required=False, widget=forms.HiddenInput)
    change_note = forms.CharField(
        required=False,
        max_length=MAX_NOTE_CHARS,
        help_text=NOTE_HELP,
        widget=forms.TextInput(
            attrs={"size": 60, "placeholder": "e.g. OPS-123: keep GPU jobs off spot"}
        ),
    )
    conflict_subject = "object"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["expected_version"].initial = self.instance.version
        if "cluster" in self.fields:
            cast(forms.ModelChoiceField, self.fields["cluster"]).empty_label = EVERY_CLUSTER

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        expected = cleaned.get("expected_version")
        # self.instance was read from the database for this request: it holds the current version.
        if self.instance.pk and expected is not None and expected != self.instance.version:
            self.add_error(None, conflict_message(self.conflict_subject, self.instance.version))
        return cleaned


POD_SELECTOR_MOVES = {
    "pod_selector.namespaces": "namespaces",
    "pod_selector.match_labels": "pod_labels",
    "pod_selector.matchLabels": "pod_labels",
    "pod_selector.match_expressions": "pod_expressions",
    "pod_selector.matchExpressions": "pod_expressions",
}


SCHEDULE_MOVES = {
    "schedule.active_from": "schedule_from",
    "schedule.active_until": "schedule_until",
    "schedule.cron": "schedule_cron",
    "schedule.duration": "schedule_duration",
    "rollout.stage": "rollout_stage",
    "rollout.canary_namespaces": "canary_namespaces",
    "rollout.min_stage": "rollout_min_stage",
    "rollout.max_zero_node_pods": "max_zero_node_pods",
    "rollout.max_zero_node_calls": "max_zero_node_calls",
    "rollout.rollback": "rollout_rollback",
}
STAGE_CHOICES = [("", "— no staged rollout —"), *((s, s) for s in rollout.STAGES)]


def _text_input(placeholder: str, size: int = 24) -> forms.TextInput:
    return forms.TextInput(attrs={"size": size, "placeholder": placeholder})


class ScheduleFields(forms.Form):
    """The time window and staged rollout fields of the policy form (as text, judged by the
    same validators as the API: docs/windows-and-rollouts.md)."""

    schedule_from = forms.CharField(
        required=False,
        label="Active from",
        help_text="ISO 8601, UTC unless an offset is given, e.g. <code>2026-12-13T02:00:00Z</code>;"
        " empty: already.",
        widget=_text_input("2026-12-13T02:00:00Z"),
    )
    schedule_until = forms.CharField(
        required=False,
        label="Active until",
        help_text="Empty: no end.",
        widget=_text_input("2027-01-31T00:00:00Z"),
    )
    schedule_cron = forms.CharField(
        required=False,
        label="Recurring window (cron)",
        help_text="When the window opens, in UTC: <code>minute hour day month weekday</code>, "
        "e.g. <code>0 2 * * 0</code> (Sundays 02:00). Empty: no recurring window.",
        widget=_text_input("0 2 * * 0"),
    )
    schedule_duration = forms.CharField(
        required=False,
        label="Window duration",
        help_text="How long each window stays open, e.g. <code>2h</code> or <code>1h30m</code>.",
        widget=_text_input("2h", 8),
    )
    rollout_stage = forms.ChoiceField(
        required=False,
        choices=STAGE_CHOICES,
        label="Stage",
        help_text="dry-run → canary (enforced in the canary namespaces only) → everywhere. The "
        "beat advances it when the stage's minimum time has passed and every gate holds.",
    )
    canary_namespaces = ListTextField(
        help_text="Comma-separated, e.g. <code>team-a, staging</code>.",
        widget=_text_input("team-a, staging", 40),
    )
    rollout_min_stage = forms.CharField(
        required=False,
        label="Minimum time per stage",
        widget=_text_input("1h", 8),
    )
    max_zero_node_pods = forms.IntegerField(
        required=False,
        min_value=0,
        label="Gate: pods left with 0 nodes at most",
        help_text="In the dry-run report (and the Pending pods it would reject) since the stage "
        "began.",
    )
    max_zero_node_calls = forms.IntegerField(
        required=False,
        min_value=0,
        label="Gate: 0-node calls at most",
        help_text="Calls of the decision log that left a pod of the policy with 0 nodes since "
        "the stage began.",
    )
    rollout_rollback = forms.BooleanField(
        required=False,
        label="Roll back a stage when a gate fails",
    )

    @staticmethod
    def initial_from(policy: Policy) -> dict[str, Any]:
        out: dict[str, Any] = {}
        schedule = schedule_content(policy) or {}
        out["schedule_from"] = schedule.get("active_from") or ""
        out["schedule_until"] = schedule.get("active_until") or ""
        out["schedule_cron"] = schedule.get("cron") or ""
        out["schedule_duration"] = schedule.get("duration") or ""
        plan = policy.rollout or {}
        out["rollout_stage"] = plan.get("stage", "")
        out["canary_namespaces"] = plan.get("canary_namespaces") or []
        out["rollout_min_stage"] = plan.get("min_stage", "")
        out["max_zero_node_pods"] = plan.get("max_zero_node_pods", 0)
        out["max_zero_node_calls"] = plan.get("max_zero_node_calls", 0)
        out["rollout_rollback"] = plan.get("rollback", False)
        return out

    @staticmethod
    def content(cleaned: dict[str, Any]) -> dict[str, Any]:
        """``schedule`` and ``rollout`` content from the fields (None when left empty)."""
        schedule = {
            "active_from": cleaned.get("schedule_from") or None,
            "active_until": cleaned.get("schedule_until") or None,
            "cron": cleaned.get("schedule_cron") or "",
            "duration": cleaned.get("schedule_duration") or None,
        }
        plan = None
        if cleaned.get("rollout_stage"):
            plan = {
                "stage": cleaned["rollout_stage"],
                "canary_namespaces": cleaned.get("canary_namespaces") or [],
                "min_stage": cleaned.get("rollout_min_stage") or None,
                "max_zero_node_pods": cleaned.get("max_zero_node_pods") or 0,
                "max_zero_node_calls": cleaned.get("max_zero_node_calls") or 0,
                "rollback": bool(cleaned.get("rollout_rollback")),
            }
        return {
            "schedule": schedule if any(schedule.values()) else None,
            "rollout": plan,
        }


class PolicyForm(VersionedForm, ScheduleFields):
    """A policy's own fields; its pod selector typed as three plain fields instead of JSON; its
    time windows and staged rollout (``ScheduleFields``)."""

    conflict_subject = "policy"
    namespaces = ListTextField(
        help_text="Comma-separated, e.g. <code>ml, vision</code>; empty: every namespace.",
        widget=forms.TextInput(attrs={"size": 60, "placeholder": "ml, vision"}),
    )
    pod_labels = MapTextField(
        label="Pod labels",
        help_text="The pod must carry all of these; one <code>key=value</code> per line.",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60, "placeholder": "team=vision"}),
    )
    pod_expressions = RequirementsTextField(
        label="Pod label expressions",
        help_text="One per line: <code>key Operator values</code> with In, NotIn, Exists or "
        "DoesNotExist, e.g. <code>tier In gold, silver</code>. Nothing in these three "
        "fields: the policy applies to every pod.",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60, "placeholder": "tier In gold, silver"}),
    )

    class Meta:
        model = Policy
        fields = ("name", "description", "cluster", "enabled", "mode")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        selector = (self.instance.pod_selector or {}) if self.instance.pk else {}
        self.fields["namespaces"].initial = selector.get("namespaces") or []
        self.fields["pod_labels"].initial = selector.get("match_labels") or {}
        self.fields["pod_expressions"].initial = selector.get("match_expressions") or []
        if self.instance.pk:
            for name, value in ScheduleFields.initial_from(self.instance).items():
                self.fields[name].initial = value

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        # Rules are validated by their own inline forms; here only the policy's own fields.
        data = self.content_without_rules(cleaned)
        self.draft: dict[str, Any] | None = None
        try:
            self.draft = clean_policy(data)
        except ContentError as exc:
            add_content_errors(self, move_paths(exc, {**POD_SELECTOR_MOVES, **SCHEDULE_MOVES}))
        # For the admin's draft check, which sees the instance but not the form.
        self.instance.portal_draft = self.draft if not self.errors else None
        return cleaned

    @staticmethod
    def content_without_rules(cleaned: dict[str, Any]) -> dict[str, Any]:
        """The policy's own fields in service form (cluster by name, None = every cluster)."""
        cluster = cleaned.get("cluster")
        return {
            "name": cleaned.get("name"),
            "description": cleaned.get("description") or "",
            "cluster": cluster.name if cluster else None,
            "enabled": bool(cleaned.get("enabled")),
            "mode": cleaned.get("mode"),
            "pod_selector": {
                "namespaces": cleaned.get("namespaces") or [],
                "match_labels": cleaned.get("pod_labels") or {},
                "match_expressions": cleaned.get("pod_expressions") or [],
            },
            "filter_rules": [],
            "weight_rules": [],
            **ScheduleFields.content(cleaned),
        }


class RuleForm(forms.ModelForm):
    """One rule row: validated alone with the engine, its canonical content kept for saving."""

    kind_fields: dict[str, tuple[str, ...]] = {}
    extra_fields: tuple[str, ...] = ()
    cleaner: Callable[[Any, str], dict] = staticmethod(clean_filter_rule)

    values = ListTextField(
        help_text="Comma-separated, e.g. <code>A100, H100</code>; none for Exists and "
        "DoesNotExist; one integer for Gt and Lt.",
        widget=forms.TextInput(attrs={"size": 24, "placeholder": "A100, H100"}),
    )

    position = forms.IntegerField(
        required=False,
        min_value=0,
        help_text="Order; empty: last.",
        widget=forms.NumberInput(attrs={"style": "width: 4em"}),
    )

    def clean_position(self) -> int:
        # Empty sorts after every numbered rule (in row order); the service renumbers on save.
        self.sort_position = self.cleaned_data.get("position")
        return self.sort_position or 0

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        self.rule_content: dict | None = None
        kind = cleaned.get("kind")
        if not kind:
            return cleaned
        rule: dict[str, Any] = {
            "kind": kind,
            "message": cleaned.get("message") or "",
            "enabled": bool(cleaned.get("enabled")),
        }
        for field in (*self.kind_fields.get(kind, ()), *self.extra_fields):
            value = cleaned.get(field)
            # An empty text box means "not given", which the validators word as "required".
            rule[field] = None if value == "" else value
        try:
            self.rule_content = type(self).cleaner(rule, "")
        except ContentError as exc:
            add_content_errors(self, exc)
        return cleaned


TEXT_WIDGETS = {
    "key": forms.TextInput(attrs={"size": 22}),
    "resource": forms.TextInput(attrs={"size": 14}),
    "quantity": forms.TextInput(attrs={"size": 8}),
    "condition": forms.TextInput(attrs={"size": 12}),
    "pattern": forms.TextInput(attrs={"size": 14}),
    "message": forms.TextInput(attrs={"size": 20}),
}


class FilterRuleForm(RuleForm):
    kind_fields = kinds.fields_by_kind(kinds.FILTER)
    cleaner = staticmethod(clean_filter_rule)

    class Meta:
        model = FilterRule
        fields = ("position", "kind", *kinds.columns(kinds.FILTER), "message", "enabled")
        widgets = TEXT_WIDGETS


class WeightRuleForm(RuleForm):
    kind_fields = kinds.fields_by_kind(kinds.WEIGHT)
    extra_fields = ("weight",)
    cleaner = staticmethod(clean_weight_rule)
    # No form-level range check: the engine's message ("Must be in [-100, 100], got 500.") is
    # the one the API gives too.
    weight = forms.IntegerField(widget=forms.NumberInput(attrs={"style": "width: 5em"}))

    class Meta:
        model = WeightRule
        fields = ("position", "kind", *kinds.columns(kinds.WEIGHT), "weight", "message", "enabled")
        widgets = TEXT_WIDGETS


class RuleInlineFormSet(forms.BaseInlineFormSet):
    def rule_contents(self) -> list[dict]:
        """Canonical rules of the kept rows, in position order (ties keep the row order, rows
        without a position come last)."""
        kept = []
        for index, form in enumerate(self.forms):
            # Django's own test for a row marked deleted (missing from the stubs).
            if self.can_delete and self._should_delete_form(form):  # type: ignore[attr-defined]
                continue
            content = getattr(form, "rule_content", None)
            if content is None:
                continue  # an untouched extra row
            position = getattr(form, "sort_position", None)
            kept.append((position is None, position or 0, index, content))
        return [content for *_, content in sorted(kept, key=lambda t: t[:3])]


NODE_SELECTOR_MOVES = {
    "node_selector.node_names": "node_names",
    "node_selector.match_expressions": "node_expressions",
    "node_selector.matchExpressions": "node_expressions",
}


class LabelAssignmentForm(VersionedForm):
    """An assignment; its node selector and labels typed as plain lines instead of JSON."""

    conflict_subject = "label assignment"
    node_names = ListTextField(
        label="Node names",
        help_text="Globs, comma-separated or one per line, e.g. <code>gpu-*, node-?1</code>.",
        widget=forms.TextInput(attrs={"size": 60, "placeholder": "gpu-*"}),
    )
    node_expressions = RequirementsTextField(
        label="Node label expressions",
        help_text="One per line: <code>key Operator values</code> with In, NotIn, Exists, "
        "DoesNotExist, Gt or Lt, e.g. <code>node.kubernetes.io/instance-type In p4d.24xlarge"
        "</code>. Nothing here and no names: every node of the cluster.",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )
    labels = MapTextField(
        help_text="The labels to assign, one <code>key=value</code> per line.",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "placeholder": "example.com/pool=gpu"}),
    )

    # Rendered in the label preview (next to the warnings it confirms), not in a fieldset.
    confirm_warnings = forms.BooleanField(
        required=False,
        label="Save anyway: I have read the warnings",
        help_text="A selector that matches no node, a label no node carries, or a change that "
        "makes a passing expectation fail is held until this is ticked.",
    )

    class Meta:
        model = LabelAssignment
        fields = ("name", "cluster", "description", "enabled", "priority", "labels")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        selector = (self.instance.node_selector or {}) if self.instance.pk else {}
        self.fields["node_names"].initial = selector.get("node_names") or []
        self.fields["node_expressions"].initial = selector.get("match_expressions") or []

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        # The label preview of this draft, with its warnings: kept for the page (held saves).
        self.draft_report: dict[str, Any] | None = None
        try:
            self.content = clean_label_assignment(self.service_data(cleaned))
        except ContentError as exc:
            add_content_errors(self, move_paths(exc, NODE_SELECTOR_MOVES))
            return cleaned
        if self.errors:
            return cleaned
        name = self.instance.name if self.instance.pk else self.content["name"]
        broken = broken_by_assignment(name, self.content)
        try:
            self.draft_report = preview_label_assignment(self.content)
        except ContentError as exc:
            add_content_errors(self, exc)
            return cleaned
        self.draft_report["broken_expectations"] = broken
        warnings = self.draft_report["warnings"]
        if (warnings or broken) and not cleaned.get("confirm_warnings"):
            for item in broken:
                self.add_error(
                    None,
                    f"Breaks expectation {item['name']} in {item['cluster']}: {item['message']}.",
                )
            parts = []
            if warnings:
                parts.append(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''}")
            if broken:
                parts.append(f"breaks {len(broken)} expectation{'s' if len(broken) != 1 else ''}")
            self.add_error(
                None,
                f"Not saved yet: this change has {' and '.join(parts)}. Read the label preview "
                "below, then tick “Save anyway” and save again.",
            )
        return cleaned

    @staticmethod
    def service_data(cleaned: dict[str, Any]) -> dict[str, Any]:
        """The assignment in service form (cluster by name, None = every cluster)."""
        cluster = cleaned.get("cluster")
        return {
            "name": cleaned.get("name"),
            "cluster": cluster.name if cluster else None,
            "description": cleaned.get("description") or "",
            "enabled": bool(cleaned.get("enabled")),
            "priority": cleaned.get("priority", 0),
            "node_selector": {
                "node_names": cleaned.get("node_names") or [],
                "match_expressions": cleaned.get("node_expressions") or [],
            },
            "labels": cleaned.get("labels") or {},
        }
