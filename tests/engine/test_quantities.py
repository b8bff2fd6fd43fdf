"""Quantities exactly as Go's resource.ParseQuantity, MilliValue and Value (docs/semantics.md).

Expected values marked "upstream" come from apimachinery's pkg/api/resource/quantity_test.go.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.quantities import (
    QUANTITY_RE,
    QuantityError,
    format_amount,
    parse_quantity,
    quantity_errors,
    to_base_units,
)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0", "0", id="zero"),
        pytest.param("1", "1", id="one"),
        pytest.param("+1", "1", id="explicit-plus"),
        pytest.param("-1", "-1", id="negative"),
        pytest.param("1.", "1", id="trailing-dot"),
        pytest.param(".5", "0.5", id="leading-dot"),
        pytest.param("100m", "0.1", id="milli"),
        pytest.param("5n", "0.000000005", id="nano"),
        pytest.param("4u", "0.000004", id="micro"),
        pytest.param("8k", "8000", id="kilo"),
        pytest.param("7M", "7000000", id="mega"),
        pytest.param("6G", "6e9", id="giga"),
        pytest.param("5T", "5e12", id="tera"),
        pytest.param("2P", "2e15", id="peta"),
        pytest.param("1E", "1e18", id="E-alone-is-exa"),
        pytest.param("1E3", "1000", id="E3-is-exponent"),
        pytest.param("1e3", "1000", id="e3-is-exponent"),
        pytest.param("1E+3", "1000", id="exponent-plus"),
        pytest.param("1e-3", "0.001", id="exponent-minus"),
        pytest.param("1.3E+6", "1300000", id="upstream-1.3E+6"),
        pytest.param("1Ki", "1024", id="kibi"),
        pytest.param("1Gi", "1073741824", id="gibi"),
        pytest.param("1.5Gi", "1610612736", id="fractional-gibi"),
        pytest.param("3Ei", str(3 * 2**60), id="upstream-3Ei"),
        pytest.param("100.035Ki", "102435.84", id="upstream-fractional-binary"),
        pytest.param("1.G", "1e9", id="upstream-1.G"),
        pytest.param(".0001k", "0.1", id="upstream-.0001k"),
        pytest.param("1e30", "1e30", id="large-exact"),
        pytest.param(
            "123456789012345678901234567890", "123456789012345678901234567890", id="30-digits"
        ),
        pytest.param("9223372036854775808", "9223372036854775808", id="decimal-not-capped"),
        pytest.param("9Ei", str(INT64_MAX), id="upstream-binary-capped"),
        pytest.param("9223372036854775807Ki", str(INT64_MAX), id="upstream-binary-capped-ki"),
        pytest.param("-9Ei", str(-INT64_MAX), id="negative-binary-capped"),
        pytest.param("3.001n", "0.000000004", id="upstream-sub-nano-rounds-up"),
        pytest.param("0.9n", "0.000000001", id="upstream-0.9n"),
        pytest.param("1e-10", "0.000000001", id="exponent-below-nano"),
        pytest.param("-1e-10", "-0.000000001", id="negative-rounds-away-from-zero"),
        pytest.param("0.00000012345", "0.000000124", id="upstream-rounds-at-nano"),
        pytest.param("0.000000000001Ki", "0.000000002", id="upstream-troll-binary"),
        pytest.param(".", "0", id="upstream-lone-dot-is-zero"),
        pytest.param("-.", "0", id="upstream-minus-dot-is-zero"),
        pytest.param("+", "0", id="lone-sign-is-zero"),
        pytest.param("Ki", "0", id="digitless-binary-is-zero"),
        pytest.param("m", "0", id="digitless-decimal-is-zero"),
        pytest.param("e3", "0", id="digitless-exponent-is-zero"),
        pytest.param("0Ei", "0", id="zero-exbi"),
        pytest.param("1e0003", "1000", id="exponent-leading-zeros"),
        pytest.param("1e4294967296", "1", id="exponent-truncated-to-int32-like-go"),
    ],
)
def test_parse_quantity(text: str, expected: str) -> None:
    assert parse_quantity(text) == Decimal(expected)
    assert quantity_errors(text) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "non-empty", id="empty"),
        pytest.param("1K", "did you mean 'k'", id="capital-K"),
        pytest.param("1Ki0", "unknown suffix 'Ki0'", id="suffix-then-digits"),
        pytest.param("1e", "unknown suffix 'e'", id="bare-e"),
        pytest.param("1e+", "invalid exponent", id="exponent-sign-only"),
        pytest.param("1ee3", "invalid exponent", id="double-e"),
        pytest.param("1.5e3Mi", "unknown suffix 'e3Mi'", id="exponent-and-suffix"),
        pytest.param("1e3Mi", "unknown suffix", id="exponent-and-suffix-2"),
        pytest.param(" 1 ", "whitespace", id="surrounding-spaces"),
        pytest.param(" 1", "whitespace", id="upstream-leading-space"),
        pytest.param("1 ", "whitespace", id="upstream-trailing-space"),
        pytest.param("1\n", "whitespace", id="trailing-newline"),
        pytest.param("1_000", "Kubernetes quantity", id="underscore"),
        pytest.param("NaN", "Kubernetes quantity", id="nan"),
        pytest.param("Inf", "Kubernetes quantity", id="inf"),
        pytest.param("-inf", "Kubernetes quantity", id="minus-inf"),
        pytest.param("\u0663", "ASCII", id="unicode-digit"),
        pytest.param("1.1.M", "Kubernetes quantity", id="upstream-two-dots"),
        pytest.param("1+1.0M", "Kubernetes quantity", id="upstream-inner-sign"),
        pytest.param("1-3", "Kubernetes quantity", id="sign-after-number"),
        pytest.param("0.1mi", "did you mean 'Mi'", id="upstream-lowercase-binary"),
        pytest.param("0.1am", "unknown suffix", id="upstream-unknown-letter"),
        pytest.param("aoeu", "Kubernetes quantity", id="upstream-word"),
        pytest.param(".5i", "unknown suffix 'i'", id="upstream-bare-i"),
        pytest.param("-3.01e-", "invalid exponent", id="upstream-dangling-exponent"),
        pytest.param("1KB", "quantities take no unit", id="unit-bytes"),
        pytest.param("++1", "Kubernetes quantity", id="double-sign"),
        pytest.param("1e9223372036854775808", "does not fit", id="exponent-beyond-int64"),
        pytest.param("e-10", "no digits", id="digitless-below-nano"),
        pytest.param("Pi", "no digits", id="digitless-pebi"),
        pytest.param(".Ei", "no digits", id="digitless-exbi"),
        pytest.param(5, "must be a string", id="not-a-string"),
        pytest.param(None, "must be a string", id="none"),
    ],
)
def test_invalid_quantities(text: object, message: str) -> None:
    with pytest.raises(QuantityError, match=None) as excinfo:
        parse_quantity(text)
    assert message in str(excinfo.value)
    assert quantity_errors(text) == [str(excinfo.value)]


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        pytest.param("cpu", "100m", 100, id="cpu-100m"),
        pytest.param("cpu", "1.5", 1500, id="cpu-1.5"),
        pytest.param("cpu", "2", 2000, id="cpu-2"),
        pytest.param("cpu", "0.0001", 1, id="cpu-rounds-up"),
        pytest.param("cpu", "1n", 1, id="cpu-nano-rounds-up"),
        pytest.param("cpu", "1001u", 2, id="cpu-micro-rounds-up"),
        pytest.param("cpu", "0", 0, id="cpu-zero"),
        pytest.param("cpu", "-100m", -100, id="cpu-negative-exact"),
        pytest.param("cpu", "-0.0001", -1, id="cpu-negative-away-from-zero"),
        pytest.param("cpu", "1E", INT64_MAX, id="cpu-saturates"),
        pytest.param("memory", "1Gi", 1073741824, id="memory-1Gi"),
        pytest.param("memory", "1.5Gi", 1610612736, id="memory-1.5Gi"),
        pytest.param("memory", "1e3", 1000, id="memory-1e3"),
        pytest.param("memory", "1.5", 2, id="memory-1.5-rounds-up"),
        pytest.param("memory", "100m", 1, id="memory-100m-rounds-up"),
        pytest.param("memory", "5n", 1, id="memory-5n"),
        pytest.param("memory", "0", 0, id="memory-zero"),
        pytest.param("memory", "129M", 129000000, id="memory-129M"),
        pytest.param("memory", "-1.5", -2, id="memory-negative-away-from-zero"),
        pytest.param("memory", "9Ei", INT64_MAX, id="memory-binary-cap"),
        pytest.param("memory", "1e30", INT64_MAX, id="memory-saturates"),
        pytest.param("memory", "-1e30", INT64_MIN, id="memory-saturates-negative"),
        pytest.param("memory", "1e999999999", INT64_MAX, id="huge-exponent-saturates-fast"),
        pytest.param("ephemeral-storage", "100Gi", 107374182400, id="storage"),
        pytest.param("pods", "110", 110, id="pods"),
        pytest.param("nvidia.com/gpu", "8", 8, id="extended-resource"),
        pytest.param("memory", "9223372036854775807", INT64_MAX, id="int64-max"),
    ],
)
def test_to_base_units(resource: str, text: str, expected: int) -> None:
    assert to_base_units(resource, text) == expected


def test_to_base_units_rejects_invalid() -> None:
    with pytest.raises(QuantityError):
        to_base_units("memory", "1K")


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        pytest.param("500m", True, id="milli"),
        pytest.param("1.5e3", True, id="exponent"),
        pytest.param("2Gi", True, id="binary"),
        pytest.param(".", True, id="dot"),
        pytest.param("", False, id="empty"),
        pytest.param("1\n", False, id="newline"),
        pytest.param("1K", False, id="capital-K"),
        pytest.param("1.5e3Mi", False, id="exponent-and-suffix"),
        pytest.param("\u0663", False, id="unicode-digit"),
    ],
)
def test_quantity_re(text: str, matches: bool) -> None:
    assert (QUANTITY_RE.match(text) is not None) is matches


_QUANTITY_ALPHABET = "0123456789+-.eEinumkKMGTP _\u0663xB"


@given(
    st.one_of(
        st.text(alphabet=_QUANTITY_ALPHABET, max_size=30),
        st.from_regex(QUANTITY_RE),
        st.text(max_size=12),
    )
)
def test_parse_quantity_only_raises_quantity_error(text: str) -> None:
    try:
        value = parse_quantity(text)
    except QuantityError:
        assert quantity_errors(text)
        return
    # Whatever parses fits the documented grammar and converts without surprises.
    assert QUANTITY_RE.match(text) is not None
    for resource in ("cpu", "memory"):
        units = to_base_units(resource, text)
        assert INT64_MIN <= units <= INT64_MAX
        if value >= 0:
            assert units >= 0


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 8000, "8"),
        ("cpu", 3920, "3920m"),
        ("cpu", 0, "0"),
        ("memory", 16 * 1024**3, "16Gi"),
        ("memory", 15147148 * 1024, "14.4Gi"),
        ("memory", 512, "512"),
        ("ephemeral-storage", 76224326324, "71.0Gi"),
        ("hugepages-2Mi", 4 * 1024**2, "4Mi"),
        ("nvidia.com/gpu", 8, "8"),
        ("pods", 110, "110"),
    ],
)
def test_amounts_are_written_as_people_read_quantities(
    resource: str, value: int, text: str
) -> None:
    assert format_amount(resource, value) == text
