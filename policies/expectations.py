"""Expectations: their only writers, their outcomes, and the guard every policy change passes.

An expectation is a saved test case ("a pod like this must be able to land on nodes matching
S"; see docs/semantics.md, "Expectations"). Every policy save, rollback, enable/disable, mode
switch, delete and PolicySet apply asks :func:`guard_policy_change` first: a change that makes
an expectation fail that passed before raises :class:`ExpectationsBroken` and writes nothing,
unless the caller confirmed it (``force``). Expectations already failing do not block other
changes; they show as failing on the dashboard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from django.db import transaction

from core.audit import audit_record
from core.errors import ContentError, ExpectationsBroken
from core.models import AuditAction
from engine.errors import EngineValidationError
from engine.expectations import (
    ExpectationSpec,
    expectation_spec,
    outcomes,
)
from engine.policy import compile_policy
from policies.compile import current_snapshot
from policies.models import Expectation
from policies.queries import resolve_cluster
from policies.validation import clean_expectation

OBJECT_TYPE = "expectation"


# --- content and writes ----------------------------------------------------------------------


def expectation_content(obj: Expectation) -> dict[str, Any]:
    return {
        "name": obj.name,
        "description": obj.description,
        "cluster": obj.cluster.name if obj.cluster is not None else None,
        "enabled": obj.enabled,
        "kind": obj.kind,
        "pod": obj.pod,
        "node_selector": obj.node_selector,
    }


def _fields(content: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": content["name"],
        "description": content["description"],
        "cluster": resolve_cluster(content["cluster"]),
        "enabled": content["enabled"],
        "kind": content["kind"],
        "pod": content["pod"],
        "node_selector": content["node_selector"],
    }


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "is_authenticated", False) else None


@transaction.atomic
def expectation_create(*, actor: Any, data: Any, note: str = "") -> Expectation:
    content = clean_expectation(data)
    if Expectation.objects.filter(name=content["name"]).exists():
        raise ContentError({"name": [f"An expectation named {content['name']!r} exists."]})
    obj = Expectation.objects.create(
        **_fields(content), created_by=_user(actor), updated_by=_user(actor)
    )
    audit_record(
        actor=actor,
        action=AuditAction.CREATE,
        object_type=OBJECT_TYPE,
        object_name=obj.name,
        after=content,
        note=note,
    )
    return obj


@transaction.atomic
def expectation_update(
    *, actor: Any, expectation: Expectation, data: Any, note: str = ""
) -> Expectation:
    locked = Expectation.objects.select_for_update().get(pk=expectation.pk)
    before = expectation_content(locked)
    content = clean_expectation(data)
    if content == before:
        return locked
    if content["name"] != locked.name and Expectation.objects.filter(name=content["name"]):
        raise ContentError({"name": [f"An expectation named {content['name']!r} exists."]})
    for field, value in _fields(content).items():
        setattr(locked, field, value)
    locked.version += 1
    locked.updated_by = _user(actor)
    locked.save()
    audit_record(
        actor=actor,
        action=AuditAction.UPDATE,
        object_type=OBJECT_TYPE,
        object_name=locked.name,
        before=before,
        after=content,
        note=note,
    )
    return locked


@transaction.atomic
def expectation_delete(*, actor: Any, expectation: Expectation) -> None:
    before = expectation_content(expectation)
    expectation.delete()
    audit_record(
        actor=actor,
        action=AuditAction.DELETE,
        object_type=OBJECT_TYPE,
        object_name=before["name"],
        before=before,
    )


# --- outcomes ---------------------------------------------------------------------------------


def _specs(rows: Iterable[Expectation]) -> list[ExpectationSpec]:
    specs = []
    for row in rows:
        try:
            specs.append(expectation_spec(expectation_content(row)))
        except (EngineValidationError, KeyError):
            continue  # stored before a validator became stricter; the admin shows it invalid
    return specs


def enabled_specs() -> list[ExpectationSpec]:
    return _specs(Expectation.objects.filter(enabled=True).select_related("cluster"))


def broken_by(replace: Mapping[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The expectations that pass now and would fail with ``replace`` applied.

    Only expectations whose pod a replaced policy (before or after) selects can change
    outcome, so only those are judged.
    """
    specs = enabled_specs()
    if not specs:
        return []
    snapshot = current_snapshot()
    changed = [p for p in snapshot.policies if p.name in replace]
    changed += [compile_policy(c, version=0) for c in replace.values() if c is not None]
    specs = [s for s in specs if any(p.selects(s.pod) for p in changed)]
    if not specs:
        return []
    passing = {(o.name, o.cluster) for o in outcomes(snapshot, specs) if o.ok}
    return [
        asdict(o)
        for o in outcomes(snapshot, specs, replace)
        if not o.ok and (o.name, o.cluster) in passing
    ]


def guard_policy_change(replace: Mapping[str, dict[str, Any] | None], *, force: bool) -> None:
    """Raise ExpectationsBroken when ``replace`` (old name -> new content, None for a removal)
    breaks a passing expectation, unless ``force``."""
    if force:
        return
    broken = broken_by(replace)
    if broken:
        raise ExpectationsBroken(broken)


def current_outcomes() -> list[dict[str, Any]]:
    """Every enabled expectation's outcome now (the dashboard and the admin list)."""
    specs = enabled_specs()
    if not specs:
        return []
    return [asdict(o) for o in outcomes(current_snapshot(), specs)]


def broken_by_assignment(name: str, content: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The expectations that pass now and would fail once the label assignment ``name`` has
    ``content`` (None: removed). Assignments change effective labels, so the snapshot is
    rebuilt from one read of its sources with the assignment replaced."""
    specs = enabled_specs()
    if not specs:
        return []
    from engine.sources import snapshot_from_sources
    from policies.compile import read_sources

    document = read_sources()
    before = snapshot_from_sources(document)
    assignments = [[scope, c] for scope, c in document["assignments"] if c["name"] != name]
    if content is not None and content.get("enabled", True):
        assignments.append([content.get("cluster"), content])
    after = snapshot_from_sources({**document, "assignments": assignments})
    passing = {(o.name, o.cluster) for o in outcomes(before, specs) if o.ok}
    return [
        asdict(o) for o in outcomes(after, specs) if not o.ok and (o.name, o.cluster) in passing
    ]


def guard_assignment_change(name: str, content: dict[str, Any] | None, *, force: bool) -> None:
    """Raise ExpectationsBroken when the assignment change breaks a passing expectation."""
    if force:
        return
    broken = broken_by_assignment(name, content)
    if broken:
        raise ExpectationsBroken(broken)
