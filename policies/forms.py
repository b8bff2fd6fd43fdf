"""Admin forms for policies, their rules and label assignments.

The engine validators in ``policies.validation`` decide what is valid; these forms only collect
the values, call them in ``clean()`` and put each message next to the field it is about, so an
operator sees exactly what the REST API would have said.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from inventory.forms import add_content_errors
from policies.models import FilterRule, LabelAssignment, Policy, WeightRule
from policies.validation import (
    FILTER_FIELDS,
    WEIGHT_FIELDS,
    ContentError,
    clean_filter_rule,
    clean_label_assignment,
    clean_policy,
    clean_weight_rule,
)

VALUES_HELP = 'A JSON list of strings, e.g. ["a100", "h100"]; [] for Exists/DoesNotExist.'
EVERY_CLUSTER = "— every cluster —"


def conflict_message(what: str, current_version: int) -> str:
    """The message shown when an edit was based on a version that is no longer current."""
    return (
        f"This {what} was changed by someone else since you opened it "
        f"(now version {current_version}); reload the page and make your change again."
    )


class JSONListField(forms.JSONField):
    """A JSON list (empty input is ``[]``) with a message that shows the expected shape."""

    default_error_messages = {
        "invalid": f"Not valid JSON. {VALUES_HELP}",
    }

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            return []
        converted = super().to_python(value)
        if converted is None:
            return []
        if not isinstance(converted, list):
            raise ValidationError(f"Must be a list. {VALUES_HELP}", code="invalid")
        return converted


class JSONObjectField(forms.JSONField):
    """A JSON object (empty input is ``{}``) with a message that shows the expected shape."""

    def __init__(self, *, example: str, **kwargs: Any) -> None:
        self.example = example
        kwargs.setdefault("required", False)
        kwargs.setdefault("initial", dict)
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 4, "cols": 80}))
        super().__init__(**kwargs)
        self.error_messages["invalid"] = f"Not valid JSON. Expected an object such as {example}."

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            return {}
        converted = super().to_python(value)
        if converted is None:
            return {}
        if not isinstance(converted, dict):
            raise ValidationError(f"Must be a JSON object such as {self.example}.", code="invalid")
        return converted

    def prepare_value(self, value: Any) -> Any:
        # Indented, so a selector reads like the documentation shows it.
        if isinstance(value, dict) and value:
            return json.dumps(value, indent=2, ensure_ascii=False)
        return super().prepare_value(value)


class VersionedForm(forms.ModelForm):
    """Remembers the version the form was opened at, so a concurrent edit is not overwritten."""

    expected_version = forms.IntegerField(required=False, widget=forms.HiddenInput)
    conflict_subject = "object"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["expected_version"].initial = self.instance.version
        if "cluster" in self.fields:
            self.fields["cluster"].empty_label = EVERY_CLUSTER

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        expected = cleaned.get("expected_version")
        # self.instance was read from the database for this request: it holds the current version.
        if self.instance.pk and expected is not None and expected != self.instance.version:
            self.add_error(None, conflict_message(self.conflict_subject, self.instance.version))
        return cleaned


class PolicyForm(VersionedForm):
    conflict_subject = "policy"
    pod_selector = JSONObjectField(
        example='{"namespaces": ["ml"], "match_labels": {"team": "vision"}}',
        help_text='{"namespaces": [...], "match_labels": {...}, "match_expressions": '
        '[{"key": ..., "operator": ..., "values": [...]}]}; empty selects every pod.',
    )

    class Meta:
        model = Policy
        fields = ("name", "description", "cluster", "enabled", "mode", "pod_selector")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        # Rules are validated by their own inline forms; here only the policy's own fields.
        data = self.content_without_rules(cleaned)
        try:
            clean_policy(data)
        except ContentError as exc:
            add_content_errors(self, exc)
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
            "pod_selector": cleaned.get("pod_selector") or {},
            "filter_rules": [],
            "weight_rules": [],
        }


class RuleForm(forms.ModelForm):
    """One rule row: validated alone with the engine, its canonical content kept for saving."""

    kind_fields: dict[str, tuple[str, ...]] = {}
    extra_fields: tuple[str, ...] = ()
    cleaner: Callable[[Any, str], dict] = staticmethod(clean_filter_rule)

    values = JSONListField(
        required=False,
        initial=list,
        help_text=VALUES_HELP,
        widget=forms.TextInput(attrs={"size": 18}),
    )

    position = forms.IntegerField(
        required=False,
        min_value=0,
        help_text="Order of the rules; leave a new rule's position empty to put it last.",
        widget=forms.NumberInput(attrs={"style": "width: 4em"}),
    )

    def clean_position(self) -> int:
        # Empty sorts after every numbered rule (in row order); the service renumbers on save.
        self.sort_position = self.cleaned_data.get("position")
        return self.sort_position or 0

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
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
    kind_fields = FILTER_FIELDS
    cleaner = staticmethod(clean_filter_rule)

    class Meta:
        model = FilterRule
        fields = (
            "position",
            "kind",
            "key",
            "operator",
            "values",
            "resource",
            "quantity",
            "condition",
            "status",
            "pattern",
            "message",
            "enabled",
        )
        widgets = TEXT_WIDGETS


class WeightRuleForm(RuleForm):
    kind_fields = WEIGHT_FIELDS
    extra_fields = ("weight",)
    cleaner = staticmethod(clean_weight_rule)
    # No form-level range check: the engine's message ("Must be in [-100, 100], got 500.") is
    # the one the API gives too.
    weight = forms.IntegerField(widget=forms.NumberInput(attrs={"style": "width: 5em"}))

    class Meta:
        model = WeightRule
        fields = (
            "position",
            "kind",
            "key",
            "operator",
            "values",
            "resource",
            "weight",
            "message",
            "enabled",
        )
        widgets = TEXT_WIDGETS


class RuleInlineFormSet(forms.BaseInlineFormSet):
    def rule_contents(self) -> list[dict]:
        """Canonical rules of the kept rows, in position order (ties keep the row order, rows
        without a position come last)."""
        kept = []
        for index, form in enumerate(self.forms):
            if self.can_delete and self._should_delete_form(form):
                continue
            content = getattr(form, "rule_content", None)
            if content is None:
                continue  # an untouched extra row
            position = getattr(form, "sort_position", None)
            kept.append((position is None, position or 0, index, content))
        return [content for *_, content in sorted(kept, key=lambda t: t[:3])]


class LabelAssignmentForm(VersionedForm):
    conflict_subject = "label assignment"
    node_selector = JSONObjectField(
        example='{"node_names": ["gpu-*"], "match_expressions": []}',
        help_text='{"node_names": [glob, ...], "match_expressions": [{"key": ..., "operator": '
        '..., "values": [...]}]}; empty matches every node of the cluster.',
    )
    labels = JSONObjectField(
        example='{"example.com/pool": "gpu"}',
        help_text='The labels to assign, {"key": "value", ...}.',
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
    )

    class Meta:
        model = LabelAssignment
        fields = (
            "name",
            "cluster",
            "description",
            "enabled",
            "priority",
            "node_selector",
            "labels",
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        try:
            self.content = clean_label_assignment(self.service_data(cleaned))
        except ContentError as exc:
            add_content_errors(self, exc)
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
            "node_selector": cleaned.get("node_selector") or {},
            "labels": cleaned.get("labels") or {},
        }
