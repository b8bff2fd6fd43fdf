"""The rule-kind registry: every layer derives its kinds from it, and a new kind is one module.

The throwaway kind below (``name_prefix``: keep nodes whose name starts with a prefix) is
written as a module the way a real kind is, registered in a fresh interpreter before Django
loads, and then used through validation, compilation and evaluation, the admin form, the API
serializer and the OpenAPI schema; ``makemigrations`` must see exactly the migration the
architecture promises (the kind's choice and the check constraint) and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.db.models import Q

from core.errors import ContentError
from engine import kinds
from engine.checks import NAME_COLUMN, FilterCheck
from engine.errors import EngineValidationError
from engine.rules import compile_filter_rule
from policies.forms import FilterRuleForm, WeightRuleForm
from policies.models import FilterRule, WeightRule, kind_fields_constraint
from policies.validation import clean_filter_rule

ROOT = Path(__file__).resolve().parents[2]

THROWAWAY_KIND = '''
"""name_prefix filter rules: the node name starts with a prefix (a test's throwaway kind)."""

from engine.checks import NAME_COLUMN, FilterCheck
from engine.kinds import FILTER, RuleKind, register


def clean(rule):
    prefix = rule.get("pattern")
    if not isinstance(prefix, str) or not prefix:
        return {"pattern": prefix}, [("pattern", "A name prefix is required.")]
    return {"pattern": prefix}, []


def build(policy, label, fields):
    prefix = fields["pattern"]

    def judge(name):
        return None if name.startswith(prefix) else "node name has another prefix"

    return FilterCheck(policy, label, NAME_COLUMN, judge)


register(
    RuleKind(
        name="name_prefix",
        role=FILTER,
        fields=("pattern",),
        clean=clean,
        describe=lambda fields: f"name_prefix: {fields['pattern']}",
        build=build,
        help="Keeps nodes whose name starts with the prefix.",
        required=("pattern",),
        order=50,
    )
)
'''

PROBE = """
import io, json, sys
sys.path.insert(0, sys.argv[1])
import engine.kinds
import throwaway_kind  # registers name_prefix before any model, form or serializer exists

import django
django.setup()

from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator

from policies.api.serializers import FilterRuleSerializer
from engine.evaluate import evaluate_pod
from engine.facts import NodeFacts
from engine.pods import PodFacts
from engine.policy import compile_policy
from policies.forms import FilterRuleForm
from policies.validation import clean_policy

content = clean_policy({
    "name": "gpu-only",
    "filter_rules": [{"kind": "name_prefix", "pattern": "gpu-"}],
})
policy = compile_policy(content)
nodes = [NodeFacts("gpu-1"), NodeFacts("cpu-1")]
result = evaluate_pod([policy], PodFacts("default", "p"), nodes, cluster="c")
try:
    clean_policy({"name": "bad", "filter_rules": [{"kind": "name_prefix"}]})
    refused = None
except Exception as exc:
    refused = exc.errors

serializer = FilterRuleSerializer(data={"kind": "name_prefix", "pattern": "gpu-"})
schema = SchemaGenerator().get_schema(request=None, public=True)
out = io.StringIO()
call_command("makemigrations", "--dry-run", "-v", "3", stdout=out, no_color=True)
print(json.dumps({
    "content": content["filter_rules"],
    "passed": result.passed,
    "rejected": result.rejected,
    "refused": refused,
    "serializer_valid": serializer.is_valid(),
    "form_kinds": [value for value, _ in FilterRuleForm.base_fields["kind"].choices],
    "form_fields": FilterRuleForm.kind_fields["name_prefix"],
    "schema_kinds": schema["components"]["schemas"]["FilterKindEnum"]["enum"],
    "migration": out.getvalue(),
}))
"""


def test_every_layer_takes_its_kinds_from_the_registry() -> None:
    filter_names = list(kinds.names(kinds.FILTER))
    weight_names = list(kinds.names(kinds.WEIGHT))
    assert filter_names == ["label", "resource", "condition", "name"]
    assert weight_names == ["label", "label_value", "resource", "managed_resource"]
    assert [v for v, _ in FilterRule._meta.get_field("kind").choices] == filter_names
    assert [v for v, _ in WeightRule._meta.get_field("kind").choices] == weight_names
    assert list(FilterRuleForm.kind_fields) == filter_names
    assert list(WeightRuleForm.kind_fields) == weight_names
    operators = [v for v, _ in FilterRule._meta.get_field("operator").choices]
    label = kinds.get(kinds.FILTER, "label")
    assert label is not None
    assert operators == [
        *label.choices["operator"],
        "Gte",
        "Lte",
        "Matches",
        "NotMatches",
        "Pack",
        "Spread",
    ]


def test_the_check_constraint_is_built_from_each_kinds_choices_and_required_columns() -> None:
    constraint = kind_fields_constraint(kinds.WEIGHT)
    label = kinds.get(kinds.WEIGHT, "label")
    assert label is not None
    expected = (
        Q(kind="label", operator__in=list(label.choices["operator"])) & ~Q(key="")
        | Q(kind="label_value") & ~Q(key="")
        | Q(kind="resource") & ~Q(resource="")
        | Q(kind="managed_resource", operator__in=["Pack", "Spread"]) & ~Q(resource="")
    )
    assert constraint == expected


def test_a_kind_cannot_be_registered_twice_or_use_a_column_rules_do_not_have() -> None:
    existing = kinds.get(kinds.FILTER, "name")
    assert existing is not None
    with pytest.raises(ValueError, match="registered twice"):
        kinds.register(existing)
    with pytest.raises(ValueError, match="rule columns"):
        kinds.register(
            kinds.RuleKind(
                name="taint",
                role=kinds.FILTER,
                fields=("taint_key",),
                clean=existing.clean,
                describe=existing.describe,
                build=existing.build,
                help="",
            )
        )
    assert "taint" not in kinds.names(kinds.FILTER)


def test_an_unknown_kind_is_refused_with_the_registered_kinds_named() -> None:
    with pytest.raises(ContentError) as caught:
        clean_filter_rule({"kind": "zone"}, "filter_rules[0]")
    assert caught.value.errors == {
        "filter_rules[0].kind": ["Must be one of label, resource, condition, name."]
    }
    with pytest.raises(EngineValidationError, match="unknown filter rule kind 'zone'"):
        compile_filter_rule("p", {"kind": "zone"})


def test_a_kind_registered_at_run_time_is_validated_and_compiled() -> None:
    def clean(rule):  # type: ignore[no-untyped-def]
        return {"pattern": rule.get("pattern")}, [] if rule.get("pattern") else [
            ("pattern", "required")
        ]

    kinds.register(
        kinds.RuleKind(
            name="exact_name",
            role=kinds.FILTER,
            fields=("pattern",),
            clean=clean,
            describe=lambda fields: f"exact_name: {fields['pattern']}",
            build=lambda policy, label, fields: FilterCheck(
                policy, label, NAME_COLUMN, lambda n: None if n == fields["pattern"] else "other"
            ),
            help="",
        )
    )
    try:
        rule = clean_filter_rule({"kind": "exact_name", "pattern": "n1"}, "r")
        assert rule == {"kind": "exact_name", "pattern": "n1", "message": "", "enabled": True}
        check = compile_filter_rule("p", rule)
        assert check is not None
        assert check.wire_reason == "p/exact_name: n1"
        assert check.judge("n1") is None
        assert check.judge("n2") == "other"
        with pytest.raises(ContentError, match=r"r\.pattern: required"):
            clean_filter_rule({"kind": "exact_name"}, "r")
    finally:
        kinds.unregister(kinds.FILTER, "exact_name")


def test_adding_a_kind_is_one_module_and_the_migration_makemigrations_writes(
    tmp_path: Path,
) -> None:
    (tmp_path / "throwaway_kind.py").write_text(textwrap.dedent(THROWAWAY_KIND))
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "probe.py"), str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["content"] == [
        {"kind": "name_prefix", "pattern": "gpu-", "message": "", "enabled": True}
    ]
    assert seen["passed"] == ["gpu-1"]
    assert seen["rejected"] == {"cpu-1": "gpu-only/name_prefix: gpu-"}
    assert seen["refused"] == {"filter_rules[0].pattern": ["A name prefix is required."]}
    assert seen["serializer_valid"] is True
    assert seen["form_kinds"][-1] == "name_prefix"
    assert seen["form_fields"] == ["pattern"]
    assert seen["schema_kinds"] == ["label", "resource", "condition", "name", "name_prefix"]
    migration = seen["migration"]
    summary = migration.split("Full migrations file")[0]
    operations = [
        line.strip() for line in summary.splitlines() if line.strip()[:2] in ("- ", "~ ", "+ ")
    ]
    assert operations == [
        "- Remove constraint filter_rule_kind_fields from model filterrule",
        "~ Alter field kind on filterrule",
        "+ Create constraint filter_rule_kind_fields on model filterrule",
    ], migration
    assert summary.count("Migrations for '") == 1
    assert "Migrations for 'policies'" in summary
    assert "name_prefix" in migration
