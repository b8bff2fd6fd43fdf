"""Requirements and label selectors: apimachinery labels.Requirement semantics.

The contract is docs/semantics.md, "Selectors"."""

from __future__ import annotations

import copy
import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import EngineValidationError
from engine.selectors import (
    INT64_MAX,
    INT64_MIN,
    NODE_OPERATORS,
    POD_OPERATORS,
    LabelSelector,
    Requirement,
    label_selector_from_dict,
    parse_go_int64,
    requirement_errors,
    requirement_from_dict,
)

# ---------------------------------------------------------------- strconv.ParseInt(s, 10, 64)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0", 0, id="zero"),
        pytest.param("5", 5, id="digit"),
        pytest.param("+5", 5, id="plus-sign"),
        pytest.param("-5", -5, id="minus-sign"),
        pytest.param("-0", 0, id="minus-zero"),
        pytest.param("007", 7, id="leading-zeros"),
        pytest.param("0" * 30 + "1", 1, id="many-leading-zeros"),
        pytest.param("9223372036854775807", INT64_MAX, id="int64-max"),
        pytest.param("-9223372036854775808", INT64_MIN, id="int64-min"),
        pytest.param("9223372036854775808", None, id="overflow-by-one"),
        pytest.param("-9223372036854775809", None, id="underflow-by-one"),
        pytest.param("1" * 5000, None, id="huge-digit-string"),
        pytest.param("", None, id="empty"),
        pytest.param("+", None, id="sign-only"),
        pytest.param("-", None, id="minus-only"),
        pytest.param("+-5", None, id="two-signs"),
        pytest.param("--5", None, id="double-minus"),
        pytest.param(" 5", None, id="leading-space"),
        pytest.param("5 ", None, id="trailing-space"),
        pytest.param("5\n", None, id="trailing-newline"),
        pytest.param("1_0", None, id="underscore"),
        pytest.param("\u0663", None, id="arabic-indic-digit"),
        pytest.param("\u00b2", None, id="superscript-two"),
        pytest.param("\uff11", None, id="fullwidth-one"),
        pytest.param("0x10", None, id="hex"),
        pytest.param("1e3", None, id="exponent"),
        pytest.param("1.0", None, id="decimal-point"),
        pytest.param(5, None, id="not-a-string"),
    ],
)
def test_parse_go_int64(text: object, expected: int | None) -> None:
    assert parse_go_int64(text) == expected


_GO_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _reference_parse(text: str) -> int | None:
    if _GO_INT_RE.fullmatch(text) is None:
        return None
    value = int(text.lstrip("+-").lstrip("0") or "0") * (-1 if text.startswith("-") else 1)
    return value if INT64_MIN <= value <= INT64_MAX else None


@given(
    st.one_of(
        st.text(alphabet="0123456789+-_ .e\u0663²\t", max_size=25),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.text(max_size=10),
    )
)
def test_parse_go_int64_matches_reference(text: str) -> None:
    assert parse_go_int64(text) == _reference_parse(text)


# ---------------------------------------------------------------- Requirement.matches

GPU = "nvidia.com/gpu.product"


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        pytest.param("In", ("A100", "H100"), {GPU: "A100"}, True, id="in-present-listed"),
        pytest.param("In", ("A100", "H100"), {GPU: "T4"}, False, id="in-present-unlisted"),
        pytest.param("In", ("A100",), {}, False, id="in-absent"),
        pytest.param("In", ("A100",), {GPU: "A100"}, True, id="in-single-value"),
        pytest.param("In", ("",), {GPU: ""}, True, id="in-empty-value"),
        pytest.param("In", ("",), {}, False, id="in-empty-value-absent"),
        pytest.param("NotIn", ("T4",), {GPU: "A100"}, True, id="notin-present-unlisted"),
        pytest.param("NotIn", ("T4",), {GPU: "T4"}, False, id="notin-present-listed"),
        pytest.param("NotIn", ("T4",), {}, True, id="notin-absent-is-true"),
        pytest.param("NotIn", ("T4",), {"other": "T4"}, True, id="notin-other-key"),
        pytest.param("Exists", (), {GPU: ""}, True, id="exists-empty-value"),
        pytest.param("Exists", (), {}, False, id="exists-absent"),
        pytest.param("DoesNotExist", (), {}, True, id="doesnotexist-absent"),
        pytest.param("DoesNotExist", (), {GPU: "x"}, False, id="doesnotexist-present"),
        pytest.param("Gt", ("3",), {GPU: "4"}, True, id="gt-greater"),
        pytest.param("Gt", ("3",), {GPU: "3"}, False, id="gt-equal"),
        pytest.param("Gt", ("3",), {GPU: "2"}, False, id="gt-smaller"),
        pytest.param("Gt", ("3",), {}, False, id="gt-absent"),
        pytest.param("Gt", ("3",), {GPU: "A100"}, False, id="gt-non-numeric-label"),
        pytest.param("Gt", ("3",), {GPU: ""}, False, id="gt-empty-label"),
        pytest.param("Gt", ("3",), {GPU: " 5"}, False, id="gt-label-leading-space"),
        pytest.param("Gt", ("3",), {GPU: "1_0"}, False, id="gt-label-underscore"),
        pytest.param("Gt", ("3",), {GPU: "+5"}, True, id="gt-label-plus-sign-accepted"),
        pytest.param("Gt", ("3",), {GPU: "05"}, True, id="gt-label-leading-zero"),
        pytest.param("Gt", ("3",), {GPU: "\u0665"}, False, id="gt-label-unicode-digit"),
        pytest.param("Gt", ("3",), {GPU: "4.0"}, False, id="gt-label-decimal"),
        pytest.param(
            "Gt", ("3",), {GPU: "9223372036854775808"}, False, id="gt-label-int64-overflow"
        ),
        pytest.param("Gt", ("3",), {GPU: "9223372036854775807"}, True, id="gt-label-int64-max"),
        pytest.param("Lt", ("3",), {GPU: "2"}, True, id="lt-smaller"),
        pytest.param("Lt", ("3",), {GPU: "3"}, False, id="lt-equal"),
        pytest.param("Lt", ("3",), {GPU: "-5"}, True, id="lt-label-negative-accepted"),
        pytest.param("Lt", ("0",), {GPU: "-9223372036854775808"}, True, id="lt-label-int64-min"),
        pytest.param(
            "Lt", ("0",), {GPU: "-9223372036854775809"}, False, id="lt-label-int64-underflow"
        ),
        pytest.param("Lt", ("3",), {}, False, id="lt-absent"),
        pytest.param("Gt", ("x",), {GPU: "4"}, False, id="gt-non-numeric-rule-value"),
        pytest.param("Gt", ("1", "2"), {GPU: "4"}, False, id="gt-two-rule-values"),
        pytest.param("Gt", (), {GPU: "4"}, False, id="gt-no-rule-value"),
        pytest.param("Gt", ("+1",), {GPU: "4"}, True, id="gt-signed-rule-value-matches-like-go"),
        pytest.param("Foo", ("x",), {GPU: "x"}, False, id="unknown-operator"),
    ],
)
def test_requirement_matches(
    operator: str, values: tuple[str, ...], labels: dict[str, str], expected: bool
) -> None:
    assert Requirement(GPU, operator, values).matches(labels) is expected


def test_requirement_accepts_list_values_and_stays_hashable() -> None:
    requirement = Requirement("zone", "In", ["a", "b"])  # type: ignore[arg-type]
    assert requirement.values == ("a", "b")
    assert requirement == Requirement("zone", "In", ("a", "b"))
    assert len({requirement, Requirement("zone", "In", ("a", "b"))}) == 1


def test_requirement_survives_pickle_and_deepcopy() -> None:
    requirement = Requirement("gen", "Gt", ("3",))
    for clone in (pickle.loads(pickle.dumps(requirement)), copy.deepcopy(requirement)):
        assert clone == requirement
        assert clone.matches({"gen": "4"})
        assert not clone.matches({"gen": "3"})


@pytest.mark.parametrize(
    ("requirement", "text"),
    [
        pytest.param(Requirement(GPU, "In", ("A100", "H100")), f"{GPU} In [A100, H100]", id="in"),
        pytest.param(Requirement("spot", "NotIn", ("true",)), "spot NotIn [true]", id="notin"),
        pytest.param(Requirement("spot", "DoesNotExist"), "spot DoesNotExist", id="doesnotexist"),
        pytest.param(Requirement("gpu", "Exists"), "gpu Exists", id="exists"),
        pytest.param(Requirement("gen", "Gt", ("3",)), "gen Gt 3", id="gt"),
        pytest.param(Requirement("gen", "Lt", ("10",)), "gen Lt 10", id="lt"),
    ],
)
def test_describe(requirement: Requirement, text: str) -> None:
    assert requirement.describe() == text


# ---------------------------------------------------------------- requirement_errors


@pytest.mark.parametrize(
    ("key", "operator", "values", "expected"),
    [
        pytest.param(GPU, "In", ["A100"], [], id="valid-in"),
        pytest.param("gen", "Gt", ["3"], [], id="valid-gt"),
        pytest.param("gen", "Lt", ["9223372036854775807"], [], id="valid-lt-int64-max"),
        pytest.param("gpu", "Exists", [], [], id="valid-exists"),
        pytest.param("gpu", "DoesNotExist", None, [], id="valid-doesnotexist-none"),
        pytest.param("zone", "In", [""], [], id="valid-in-empty-string-value"),
        pytest.param("zone", "In", [], [("values", "at least one value")], id="in-empty"),
        pytest.param("zone", "NotIn", None, [("values", "at least one value")], id="notin-none"),
        pytest.param("gpu", "Exists", ["x"], [("values", "must be empty")], id="exists-with-value"),
        pytest.param(
            "gpu", "DoesNotExist", ["x"], [("values", "must be empty")], id="doesnotexist-value"
        ),
        pytest.param("gen", "Gt", [], [("values", "exactly one value")], id="gt-no-value"),
        pytest.param(
            "gen", "Lt", ["1", "2"], [("values", "exactly one value")], id="lt-two-values"
        ),
        pytest.param(
            "gen", "Gt", ["-1"], [("values[0]", "non-negative base-10 integer")], id="gt-negative"
        ),
        pytest.param(
            "gen", "Gt", ["+1"], [("values[0]", "non-negative base-10 integer")], id="gt-plus"
        ),
        pytest.param(
            "gen", "Gt", ["1.5"], [("values[0]", "non-negative base-10 integer")], id="gt-decimal"
        ),
        pytest.param(
            "gen",
            "Gt",
            ["\u0663"],
            [("values[0]", "non-negative base-10 integer")],
            id="gt-unicode",
        ),
        pytest.param(
            "gen",
            "Gt",
            ["9223372036854775808"],
            [("values[0]", "non-negative base-10 integer")],
            id="gt-overflow",
        ),
        pytest.param(
            "gen",
            "Gt",
            ["0" * 64 + "1"],
            [("values[0]", "no more than 63 characters")],
            id="gt-too-long-for-a-label-value",
        ),
        pytest.param(
            "zone", "In", ["a", "b c"], [("values[1]", "must be empty or consist")], id="bad-value"
        ),
        pytest.param("zone", "In", ["a", 3], [("values[1]", "must be a string")], id="int-value"),
        pytest.param("zone", "In", "a", [("values", "must be a list")], id="values-is-a-string"),
        pytest.param("zone", "In", {"a": 1}, [("values", "must be a list")], id="values-is-dict"),
        pytest.param(
            "zone", "Gte", ["a"], [("operator", "must be one of In, NotIn")], id="bad-operator"
        ),
        pytest.param("zone", None, ["a"], [("operator", "is required")], id="missing-operator"),
        pytest.param(None, "Exists", [], [("key", "is required")], id="missing-key"),
        pytest.param("a/b/c", "Exists", [], [("key", "at most one '/'")], id="bad-key"),
    ],
)
def test_requirement_errors(
    key: object, operator: object, values: object, expected: list[tuple[str, str]]
) -> None:
    errors = requirement_errors(key, operator, values)
    assert len(errors) == len(expected), errors
    for (field, message), (want_field, want_text) in zip(errors, expected, strict=True):
        assert field == want_field
        assert want_text in message


def test_pod_operators_reject_gt() -> None:
    errors = requirement_errors("gen", "Gt", ["3"], operators=POD_OPERATORS)
    assert errors == [
        ("operator", "unsupported operator 'Gt': must be one of In, NotIn, Exists, DoesNotExist")
    ]


# ---------------------------------------------------------------- requirement_from_dict


def test_requirement_from_dict_builds_requirement() -> None:
    requirement = requirement_from_dict({"key": "gpu", "operator": "In", "values": ["A100"]})
    assert requirement == Requirement("gpu", "In", ("A100",))


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"key": "gpu", "operator": "Exists"}, id="values-missing"),
        pytest.param({"key": "gpu", "operator": "Exists", "values": None}, id="values-null"),
    ],
)
def test_requirement_from_dict_without_values(data: dict) -> None:
    assert requirement_from_dict(data).values == ()


@pytest.mark.parametrize(
    ("data", "fields"),
    [
        pytest.param({"key": "gpu", "operator": "In"}, ["rule.values"], id="in-without-values"),
        pytest.param(
            {"key": "gpu", "operator": "Exists", "value": "x"}, ["rule.value"], id="unknown-field"
        ),
        pytest.param(
            {"key": "Bad Key", "operator": "Gt", "values": ["x"]},
            ["rule.key", "rule.values[0]"],
            id="several-errors",
        ),
        pytest.param(["gpu", "Exists"], ["rule"], id="not-an-object"),
    ],
)
def test_requirement_from_dict_errors(data: object, fields: list[str]) -> None:
    with pytest.raises(EngineValidationError) as excinfo:
        requirement_from_dict(data, path="rule")
    assert [field for field, _ in excinfo.value.errors] == fields


def test_engine_validation_error_str_names_fields() -> None:
    with pytest.raises(EngineValidationError, match=r"x\.values: must have at least one value"):
        requirement_from_dict({"key": "gpu", "operator": "In", "values": []}, path="x")


# ---------------------------------------------------------------- LabelSelector


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param({}, {}, True, id="empty-selects-everything"),
        pytest.param(None, {"app": "web"}, True, id="none-selects-everything"),
        pytest.param({"match_labels": {"app": "web"}}, {"app": "web"}, True, id="labels-match"),
        pytest.param({"match_labels": {"app": "web"}}, {"app": "db"}, False, id="labels-differ"),
        pytest.param({"match_labels": {"app": "web"}}, {}, False, id="labels-absent"),
        pytest.param({"matchLabels": {"app": "web"}}, {"app": "web"}, True, id="camel-case"),
        pytest.param(
            {
                "match_labels": {"app": "web"},
                "match_expressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]}],
            },
            {"app": "web"},
            True,
            id="anded-notin-absent",
        ),
        pytest.param(
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch"]}],
            },
            {"app": "web", "tier": "online"},
            False,
            id="anded-expression-fails",
        ),
        pytest.param(
            {"match_expressions": [{"key": "team", "operator": "Exists"}]},
            {"team": "ml"},
            True,
            id="exists",
        ),
    ],
)
def test_label_selector_matches(selector: object, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_from_dict(selector).matches(labels) is expected


def test_label_selector_is_empty() -> None:
    assert label_selector_from_dict({}).is_empty
    assert label_selector_from_dict({"match_labels": None, "match_expressions": None}).is_empty
    assert not label_selector_from_dict({"match_labels": {"a": "b"}}).is_empty
    assert LabelSelector().is_empty


@pytest.mark.parametrize(
    ("selector", "fields"),
    [
        pytest.param(
            {"match_expressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]},
            ["pod_selector.match_expressions[0].operator"],
            id="gt-not-allowed-for-pods",
        ),
        pytest.param({"matchlabels": {"a": "b"}}, ["pod_selector.matchlabels"], id="misspelt"),
        pytest.param(
            {"match_labels": {"a": "b"}, "matchLabels": {"a": "b"}},
            ["pod_selector.matchLabels"],
            id="both-spellings",
        ),
        pytest.param(
            {"match_labels": {"a/b/c": "x", "ok": "a" * 64}},
            ["pod_selector.match_labels[a/b/c]", "pod_selector.match_labels[ok]"],
            id="bad-key-and-value",
        ),
        pytest.param({"match_labels": ["a"]}, ["pod_selector.match_labels"], id="labels-a-list"),
        pytest.param(
            {"match_expressions": {"key": "a"}},
            ["pod_selector.match_expressions"],
            id="expressions-not-a-list",
        ),
        pytest.param("app=web", ["pod_selector"], id="string-selector"),
    ],
)
def test_label_selector_errors(selector: object, fields: list[str]) -> None:
    with pytest.raises(EngineValidationError) as excinfo:
        label_selector_from_dict(selector, path="pod_selector")
    assert [field for field, _ in excinfo.value.errors] == fields


def test_node_operators_constant() -> None:
    assert NODE_OPERATORS == ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    assert NODE_OPERATORS[:4] == POD_OPERATORS
