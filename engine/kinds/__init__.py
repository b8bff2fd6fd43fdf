"""The rule-kind registry: every kind of filter and weight rule, declared once.

A kind says which rule columns it uses, which values its columns may take, how its content is
validated, how it is described and how it compiles into a check (docs/semantics.md#rule-kinds).
Everything else derives from here: the model's kind choices and check constraints, the
validators, the admin forms and the rule editor, the API serializers and the PolicySet schema,
the stored content of a rule.

Each module of this package declares its kinds by calling :func:`register` when imported; the
package imports every module it contains. Adding a kind is one module here plus the migration
that ``makemigrations`` then writes (the new choice and check constraint)
(docs/architecture.md#adding-a-rule-kind).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.affinity import NodeRequirement
from engine.checks import FilterCheck, WeightCheck

FILTER = "filter"
WEIGHT = "weight"
ROLES = (FILTER, WEIGHT)

# Every column a rule model has for its kinds' fields, in the order forms and content show them.
COLUMNS = ("key", "operator", "values", "resource", "quantity", "condition", "status", "pattern")

Errors = list[tuple[str, str]]
# Raw rule content -> (the kind's canonical fields, problems as (field, message) pairs).
Cleaner = Callable[[Mapping[str, Any]], tuple[dict[str, Any], Errors]]
# Canonical fields -> the node-affinity requirement, or why this rule has none.
AffinityCompiler = Callable[[Mapping[str, Any]], NodeRequirement | str]


@dataclass(frozen=True, slots=True)
class RuleKind:
    """One kind of rule in one role (``filter`` or ``weight``).

    ``fields`` are the rule columns the kind uses (see ``COLUMNS``); ``choices`` restricts some of
    them to fixed values and ``required`` lists those that may not be empty — both also become
    the database's check constraint. ``clean`` validates raw content into the canonical fields,
    ``describe`` names canonical content when the rule has no message, and ``build`` compiles
    canonical content (``FilterCheck`` for a filter kind, ``WeightCheck`` for a weight kind:
    ``build(policy, label, fields)`` and ``build(policy, label, fields, weight)``).
    ``reads_labels`` says the kind reads node labels (the draft checks name unknown keys);
    ``node_affinity`` turns canonical content into the ``NodeSelectorRequirement`` that
    kube-scheduler's NodeAffinity plugin evaluates itself, or says why this rule has none
    (``engine.affinity``): the native profile and the admission webhook write it.
    """

    name: str
    role: str
    fields: tuple[str, ...]
    clean: Cleaner
    describe: Callable[[Mapping[str, Any]], str]
    build: Callable[..., FilterCheck | WeightCheck | None]
    help: str
    title: str = ""
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    reads_labels: bool = False
    node_affinity: AffinityCompiler | None = None
    order: int = 100

    @property
    def label(self) -> str:
        return self.title or self.name.replace("_", " ")


_REGISTRY: dict[str, dict[str, RuleKind]] = {FILTER: {}, WEIGHT: {}}


def register(kind: RuleKind) -> RuleKind:
    """Add ``kind`` to the registry; a second kind of the same role and name is an error."""
    if kind.role not in _REGISTRY:
        raise ValueError(f"rule kind {kind.name!r}: role must be one of {', '.join(ROLES)}")
    unknown = set(kind.fields) - set(COLUMNS)
    if unknown or not set(kind.choices) | set(kind.required) <= set(kind.fields):
        raise ValueError(f"rule kind {kind.name!r}: fields must be rule columns it declares")
    kinds = _REGISTRY[kind.role]
    if kind.name in kinds:
        raise ValueError(f"{kind.role} rule kind {kind.name!r} is registered twice")
    kinds[kind.name] = kind
    _REGISTRY[kind.role] = dict(sorted(kinds.items(), key=lambda item: (item[1].order, item[0])))
    return kind


def unregister(role: str, name: str) -> None:
    """Remove a kind (for tests that register a throwaway kind)."""
    del _REGISTRY[role][name]


def kinds(role: str) -> tuple[RuleKind, ...]:
    """The kinds of ``role`` in their display order."""
    return tuple(_REGISTRY[role].values())


def names(role: str) -> tuple[str, ...]:
    return tuple(_REGISTRY[role])


def get(role: str, name: Any) -> RuleKind | None:
    """The kind of ``role`` called ``name``, or None."""
    return _REGISTRY[role].get(name) if isinstance(name, str) else None


def fields_by_kind(role: str) -> dict[str, tuple[str, ...]]:
    """``{kind: its columns}``: what the editor shows and the stored content keeps."""
    return {kind.name: kind.fields for kind in kinds(role)}


def columns(role: str) -> tuple[str, ...]:
    """The columns the kinds of ``role`` use, in ``COLUMNS`` order."""
    used = {column for kind in kinds(role) for column in kind.fields}
    return tuple(column for column in COLUMNS if column in used)


def column_choices(column: str, roles: tuple[str, ...] = ROLES) -> tuple[str, ...]:
    """Every value any kind allows for ``column`` (e.g. all operators), first-seen order."""
    seen: dict[str, None] = {}
    for role in roles:
        for kind in kinds(role):
            seen.update(dict.fromkeys(kind.choices.get(column, ())))
    return tuple(seen)


def _discover() -> Iterator[str]:
    for module in pkgutil.iter_modules(__path__):
        yield f"{__name__}.{module.name}"


for _module in _discover():
    importlib.import_module(_module)
