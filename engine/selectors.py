"""Label selector requirements with exact apimachinery semantics.

``Requirement.matches`` is ``labels.Requirement.Matches`` from k8s.io/apimachinery
(pkg/labels/selector.go); node affinity (``NODE_OPERATORS``) and pod label selectors
(``POD_OPERATORS``, metav1.LabelSelector has no Gt/Lt) both evaluate through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import EngineValidationError, join_path, prefix_errors
from engine.labels import label_key_errors, label_map_errors, label_value_errors

NODE_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
POD_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist")

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_INT64_DIGITS = 19

Labels = Mapping[str, str]
Matcher = Callable[[Labels], bool]


def parse_go_int64(s: Any) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: the integer, or None where Go returns an error.

    Accepts one optional leading '+' or '-' and then one or more ASCII digits, nothing else
    (no spaces, no '_', no non-ASCII digits), within the int64 range. Python's ``int()`` is
    looser on every one of those points, so it only ever sees text validated here.
    """
    if not isinstance(s, str):
        return None
    if len(s) < _INT64_DIGITS and s.isdigit() and s.isascii():
        # Fast path for the usual label value, e.g. "3": fewer than 19 digits always fit.
        return int(s)
    body = s[1:] if s and s[0] in "+-" else s
    if not body.isascii() or not body.isdigit():
        return None
    # Leading zeros are legal in Go and do not count towards the range; stripping them also
    # keeps int() clear of CPython's limit on very long digit strings.
    significant = body.lstrip("0")
    if len(significant) > _INT64_DIGITS:
        return None
    value = int(significant or "0")
    if s[0] == "-":
        value = -value
    if value < INT64_MIN or value > INT64_MAX:
        return None
    return value


def _is_rule_integer(value: str) -> bool:
    # Validation is stricter than matching: a rule value must also be a valid label value,
    # which rules out a sign, so only plain digits that fit int64 pass.
    return value.isascii() and value.isdigit() and parse_go_int64(value) is not None


def requirement_errors(
    key: Any,
    operator: Any,
    values: Any,
    *,
    operators: Sequence[str] = NODE_OPERATORS,
) -> list[tuple[str, str]]:
    """Problems with one requirement as ``(field, message)`` pairs.

    Fields are ``key``, ``operator``, ``values`` and ``values[i]``. In/NotIn need at least one
    value, Exists/DoesNotExist none, Gt/Lt exactly one non-negative base-10 integer; every value
    must be a valid label value. ``values`` may be None (no values).
    """
    errors: list[tuple[str, str]] = []
    if key is None:
        errors.append(("key", "is required"))
    else:
        errors.extend(("key", msg) for msg in label_key_errors(key))

    allowed = ", ".join(operators)
    if operator is None:
        errors.append(("operator", f"is required: one of {allowed}"))
    elif not isinstance(operator, str) or operator not in operators:
        errors.append(("operator", f"unsupported operator {operator!r}: must be one of {allowed}"))
        operator = None

    if values is None:
        values = []
    if isinstance(values, str) or not isinstance(values, list | tuple):
        errors.append(("values", "must be a list of strings"))
        return errors

    integer_ops = operator in ("Gt", "Lt")
    for i, value in enumerate(values):
        where = f"values[{i}]"
        if not isinstance(value, str):
            errors.append((where, "must be a string"))
            continue
        if integer_ops and not _is_rule_integer(value):
            errors.append(
                (
                    where,
                    f"must be a non-negative base-10 integer (digits only, at most {INT64_MAX}) "
                    f"when operator is {operator}",
                )
            )
            continue
        errors.extend((where, msg) for msg in label_value_errors(value))

    count = len(values)
    if operator in ("In", "NotIn") and count == 0:
        errors.append(("values", f"must have at least one value when operator is {operator}"))
    elif operator in ("Exists", "DoesNotExist") and count:
        errors.append(("values", f"must be empty when operator is {operator}"))
    elif integer_ops and count != 1:
        errors.append(("values", f"must have exactly one value when operator is {operator}"))
    return errors


def _never(labels: Labels) -> bool:
    return False


def _compile(key: str, operator: str, values: tuple[str, ...]) -> Matcher:
    # One closure per operator, built once: matches() is then a single call with no branching
    # on the operator, which is what the snapshot builder runs for every node x requirement.
    if operator == "In":
        if len(values) == 1:
            only = values[0]
            return lambda labels: labels.get(key) == only
        allowed = frozenset(values)

        def match_in(labels: Labels) -> bool:
            value = labels.get(key)
            return value is not None and value in allowed

        return match_in
    if operator == "NotIn":
        excluded = frozenset(values)

        def match_not_in(labels: Labels) -> bool:
            # An absent label satisfies NotIn (apimachinery returns true when !ls.Has(key)).
            value = labels.get(key)
            return value is None or value not in excluded

        return match_not_in
    if operator == "Exists":
        return lambda labels: key in labels
    if operator == "DoesNotExist":
        return lambda labels: key not in labels
    if operator in ("Gt", "Lt"):
        # Go parses the rule value on every call and returns false when it is not exactly one
        # int64; parsing it once here gives the same answers.
        bound = parse_go_int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return _never
        greater = operator == "Gt"

        def match_compare(labels: Labels) -> bool:
            raw = labels.get(key)
            if raw is None:
                return False
            number = parse_go_int64(raw)
            if number is None:
                return False
            return number > bound if greater else number < bound

        return match_compare
    return _never


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key operator values`` requirement; ``matches`` follows apimachinery exactly.

    Construct through ``requirement_from_dict`` to validate. A directly constructed, invalid
    requirement never raises when matching: it matches what Go's would (usually nothing).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()
    _match: Matcher = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple):
            object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "_match", _compile(self.key, self.operator, self.values))

    def __reduce__(self) -> tuple[type[Requirement], tuple[str, str, tuple[str, ...]]]:
        # The compiled closure cannot be pickled (snapshots may be cached or sent to workers):
        # rebuild it from the three public fields instead.
        return (Requirement, (self.key, self.operator, self.values))

    def matches(self, labels: Labels) -> bool:
        """True when ``labels`` satisfy this requirement (docs/semantics.md, "Selectors")."""
        return self._match(labels)

    def describe(self) -> str:
        """Human-readable form: ``gpu In [A100, H100]``, ``spot DoesNotExist``, ``gen Gt 3``."""
        if self.operator in ("Exists", "DoesNotExist") and not self.values:
            return f"{self.key} {self.operator}"
        if self.operator in ("Gt", "Lt") and len(self.values) == 1:
            return f"{self.key} {self.operator} {self.values[0]}"
        return f"{self.key} {self.operator} [{', '.join(self.values)}]"


_REQUIREMENT_FIELDS = ("key", "operator", "values")


def requirement_from_dict(
    d: Any,
    *,
    operators: Sequence[str] = NODE_OPERATORS,
    path: str = "",
) -> Requirement:
    """Validate ``{"key", "operator", "values"}`` and build a Requirement.

    ``values`` may be missing or None (for Exists/DoesNotExist). Unknown fields are rejected so
    that a typo such as ``value`` cannot silently change the meaning. Raises
    EngineValidationError with field paths prefixed by ``path``.
    """
    if not isinstance(d, Mapping):
        raise EngineValidationError([(path, "must be an object with key, operator and values")])
    errors = [
        (join_path(path, str(name)), "unknown field: expected key, operator and values")
        for name in d
        if name not in _REQUIREMENT_FIELDS
    ]
    values = d.get("values")
    if values is None:
        values = ()
    errors.extend(
        prefix_errors(
            requirement_errors(d.get("key"), d.get("operator"), values, operators=operators), path
        )
    )
    if errors:
        raise EngineValidationError(errors)
    return Requirement(d["key"], d["operator"], tuple(values))


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: ``match_labels`` and ``match_expressions`` ANDed.

    An empty selector selects everything.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Labels) -> bool:
        """True when ``labels`` satisfy every match label and every expression."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)

    @property
    def is_empty(self) -> bool:
        """True when the selector has no terms, i.e. selects everything."""
        return not self.match_labels and not self.match_expressions


_SELECTOR_SPELLINGS = {
    "match_labels": "match_labels",
    "matchLabels": "match_labels",
    "match_expressions": "match_expressions",
    "matchExpressions": "match_expressions",
}


def requirements_from_list(
    raw: Any, *, operators: tuple[str, ...], path: str, errors: list[tuple[str, str]]
) -> list[Requirement]:
    """Parse a ``match_expressions`` list; problems are appended to ``errors`` with paths."""
    if raw is None:
        return []
    if isinstance(raw, str) or not isinstance(raw, list | tuple):
        errors.append((path, "must be a list of requirements"))
        return []
    requirements: list[Requirement] = []
    for i, item in enumerate(raw):
        try:
            requirements.append(
                requirement_from_dict(item, operators=operators, path=join_path(path, f"[{i}]"))
            )
        except EngineValidationError as exc:
            errors.extend(exc.errors)
    return requirements


def label_selector_from_dict(d: Any, *, path: str = "") -> LabelSelector:
    """Validate a pod label selector and build it; None means the empty selector.

    Accepts ``match_labels``/``match_expressions`` and Kubernetes' ``matchLabels``/
    ``matchExpressions``. Expressions use POD_OPERATORS. Unknown fields are rejected: a
    misspelt field silently ignored would turn the selector into "every pod". Raises
    EngineValidationError with field paths prefixed by ``path``.
    """
    if d is None:
        return LabelSelector()
    if not isinstance(d, Mapping):
        raise EngineValidationError(
            [(path, "must be an object with match_labels and/or match_expressions")]
        )
    errors: list[tuple[str, str]] = []
    given: dict[str, str] = {}
    for name in d:
        canonical = _SELECTOR_SPELLINGS.get(name) if isinstance(name, str) else None
        if canonical is None:
            errors.append(
                (
                    join_path(path, str(name)),
                    "unknown field: expected match_labels, match_expressions",
                )
            )
        elif canonical in given:
            errors.append(
                (join_path(path, name), f"duplicates {given[canonical]!r}: give only one of them")
            )
        else:
            given[canonical] = name

    match_labels: tuple[tuple[str, str], ...] = ()
    if "match_labels" in given:
        name = given["match_labels"]
        raw_labels = d[name]
        if raw_labels is None:
            raw_labels = {}
        label_errors = label_map_errors(raw_labels, path=join_path(path, name))
        errors.extend(label_errors)
        if not label_errors:
            match_labels = tuple(sorted(raw_labels.items()))

    expressions: list[Requirement] = []
    if "match_expressions" in given:
        name = given["match_expressions"]
        raw_expressions = d[name]
        if raw_expressions is None:
            raw_expressions = []
        expressions = requirements_from_list(
            raw_expressions, operators=POD_OPERATORS, path=join_path(path, name), errors=errors
        )

    if errors:
        raise EngineValidationError(errors)
    return LabelSelector(match_labels, tuple(expressions))
