"""Label keys, label values and DNS-1123 names (k8s.io/apimachinery/pkg/util/validation)."""

from __future__ import annotations

import pytest

from engine.labels import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_map_errors,
    label_value_errors,
)

NAME_63 = "a" * 63
NAME_64 = "a" * 64
# Valid DNS labels joined by dots: 50 x "aaaa" with 49 dots is 249 characters, ".abc" makes 253.
PREFIX_253 = ".".join(["a" * 4] * 50) + ".abc"
PREFIX_254 = PREFIX_253 + "d"
assert (len(PREFIX_253), len(PREFIX_254)) == (253, 254)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("app", id="simple"),
        pytest.param("MyName", id="uppercase-name"),
        pytest.param("my.name_with-all", id="all-allowed-punctuation"),
        pytest.param("123-abc", id="leading-digit"),
        pytest.param("a", id="one-char"),
        pytest.param("nvidia.com/gpu.product", id="prefixed"),
        pytest.param("kubernetes.io/hostname", id="well-known"),
        pytest.param("node-role.kubernetes.io/control-plane", id="node-role"),
        pytest.param(NAME_63, id="name-63-chars"),
        pytest.param(f"example.com/{NAME_63}", id="prefixed-name-63-chars"),
        pytest.param(f"{PREFIX_253}/x", id="prefix-253-chars"),
    ],
)
def test_valid_label_keys(key: str) -> None:
    assert label_key_errors(key) == []


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("", "must be non-empty", id="empty-key"),
        pytest.param(NAME_64, "name part must be no more than 63 characters", id="name-64-chars"),
        pytest.param(
            f"example.com/{NAME_64}",
            "name part must be no more than 63 characters",
            id="prefixed-64",
        ),
        pytest.param("-app", "name part must consist of alphanumeric", id="leading-dash"),
        pytest.param("app_", "name part must consist of alphanumeric", id="trailing-underscore"),
        pytest.param("my app", "name part must consist of alphanumeric", id="space"),
        pytest.param("gpü", "name part must consist of alphanumeric", id="non-ascii-letter"),
        pytest.param("a/b/c", "must contain at most one '/'", id="two-slashes"),
        pytest.param("/name", "prefix part must be non-empty", id="empty-prefix"),
        pytest.param("example.com/", "name part must be non-empty", id="empty-name"),
        pytest.param(
            "Example.com/name", "uppercase letters are not allowed", id="prefix-uppercase"
        ),
        pytest.param(
            "exa_mple.com/name", "prefix part must be a lowercase RFC 1123 subdomain", id="prefix-_"
        ),
        pytest.param(
            f"{PREFIX_254}/x", "prefix part must be no more than 253 characters", id="prefix-254"
        ),
        pytest.param(None, "must be a string", id="none"),
        pytest.param(42, "must be a string", id="int"),
    ],
)
def test_invalid_label_keys(key: object, expected: str) -> None:
    errors = label_key_errors(key)
    assert any(expected in message for message in errors), errors


def test_name_part_message_is_kubernetes_like() -> None:
    assert label_key_errors("-x") == [
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
        "end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')"
    ]


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        pytest.param("", True, id="empty-is-valid"),
        pytest.param("A100", True, id="simple"),
        pytest.param("v1.2_3-rc", True, id="punctuation-inside"),
        pytest.param("a" * 63, True, id="63-chars"),
        pytest.param("a" * 64, False, id="64-chars"),
        pytest.param("-5", False, id="leading-sign"),
        pytest.param("+5", False, id="leading-plus"),
        pytest.param("a.", False, id="trailing-dot"),
        pytest.param("a b", False, id="space"),
        pytest.param("a/b", False, id="slash"),
        pytest.param("\u0663", False, id="unicode-digit"),
        pytest.param(None, False, id="none"),
        pytest.param(3, False, id="int"),
    ],
)
def test_label_values(value: object, valid: bool) -> None:
    assert (label_value_errors(value) == []) is valid


def test_label_value_length_message() -> None:
    assert label_value_errors("a" * 64) == ["must be no more than 63 characters"]


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        pytest.param("prod", True, id="simple"),
        pytest.param("eu-west-1", True, id="dashes"),
        pytest.param("0", True, id="digit"),
        pytest.param("a" * 63, True, id="63"),
        pytest.param("a" * 64, False, id="64"),
        pytest.param("Prod", False, id="uppercase"),
        pytest.param("-prod", False, id="leading-dash"),
        pytest.param("prod-", False, id="trailing-dash"),
        pytest.param("pr.od", False, id="dot"),
        pytest.param("pr_od", False, id="underscore"),
        pytest.param("", False, id="empty"),
        pytest.param(None, False, id="none"),
    ],
)
def test_dns1123_labels(name: object, valid: bool) -> None:
    assert (dns1123_label_errors(name) == []) is valid


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        pytest.param("example.com", True, id="domain"),
        pytest.param("ip-10-0-0-1.ec2.internal", True, id="node-name"),
        pytest.param(PREFIX_253, True, id="253"),
        pytest.param(PREFIX_254, False, id="254"),
        pytest.param("example..com", False, id="empty-label"),
        pytest.param(".example.com", False, id="leading-dot"),
        pytest.param("Example.com", False, id="uppercase"),
        pytest.param("", False, id="empty"),
    ],
)
def test_dns1123_subdomains(name: str, valid: bool) -> None:
    assert (dns1123_subdomain_errors(name) == []) is valid


def test_dns1123_label_reports_length_and_uppercase() -> None:
    errors = dns1123_label_errors("A" * 64)
    assert errors[0] == "must be no more than 63 characters"
    assert "uppercase letters are not allowed" in errors[1]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"zone": "a", "gpu": ""}, [], id="valid"),
        pytest.param({"Bad/x/y": "v"}, [("[Bad/x/y]", "invalid label key")], id="bad-key"),
        pytest.param({"k": "a" * 64}, [("[k]", "invalid label value")], id="bad-value"),
        pytest.param({"k": 1}, [("[k]", "invalid label value: must be a string")], id="int-value"),
        pytest.param(["k"], [("", "must be an object")], id="not-a-mapping"),
    ],
)
def test_label_map_errors(labels: object, expected: list[tuple[str, str]]) -> None:
    errors = label_map_errors(labels)
    assert len(errors) == len(expected)
    for (field, message), (want_field, want_text) in zip(errors, expected, strict=True):
        assert field == want_field
        assert want_text in message


def test_label_map_errors_prefix_path() -> None:
    assert label_map_errors({"-x": "v"}, path="labels")[0][0] == "labels[-x]"
