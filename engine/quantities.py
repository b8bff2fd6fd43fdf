"""Kubernetes resource quantities, parsed exactly like Go's ``resource.ParseQuantity``.

Upstream: k8s.io/apimachinery pkg/api/resource (quantity.go, suffix.go, amount.go, math.go).
Grammar: ``<sign>? <digits>? ('.' <digits>?)? <suffix>?`` where the suffix is a binary SI suffix
(Ki Mi Gi Ti Pi Ei), a decimal SI suffix (n u m "" k M G T P E) or an exponent (e3, E-2, e+6).
Points that differ from a naive reading, all taken from the upstream source and tests:

* ``1K`` is invalid (kilo is ``k``), ``1E`` is 10^18 while ``1E3`` is 1000, ``1e`` is invalid.
* Go's scanner accepts a number part with no digits as 0: ``.``, ``+``, ``-.``, ``Ki``, ``m`` and
  ``e3`` all parse as zero (upstream's own tests cover ``.`` and ``-.``). The empty string is an
  error, and so are digitless forms that Go routes to its inf.Dec path (``e-10``, ``Pi``, ``Ei``).
* An exponent must fit int64 (it is read with ``strconv.ParseInt``) and is then truncated to
  int32, as Go does: ``1e4294967296`` is 1.
* Values keep full precision down to 10^-9; a finer non-zero value is rounded away from zero to
  the next nano (``0.9n`` -> 1n, ``1e-10`` -> 1n).
* Binary-suffixed values are capped in magnitude at 2^63-1 (``9Ei`` -> 9223372036854775807);
  decimal ones are not capped.
"""

from __future__ import annotations

import re
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_UP,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
)
from typing import Any

from engine.selectors import INT64_MAX, INT64_MIN, parse_go_int64


class QuantityError(ValueError):
    """A string that Go's ``resource.ParseQuantity`` would reject."""


# Syntactic shape of everything ParseQuantity accepts (use .match or .fullmatch; anchored with
# \A/\Z because '$' would also accept a trailing newline). parse_quantity adds the rules a
# pattern cannot express: the exponent must fit int64 and a few digitless forms are errors.
QUANTITY_RE = re.compile(
    r"\A(?=.)[+-]?[0-9]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?\Z", re.DOTALL
)

# Go's scanner: number, then a run of suffix letters, an optional sign and digits. Splitting the
# same way lets the error say which part is wrong.
_SCAN_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)"
)

# A number followed by something suffix-like, to name the suffix in the error message.
_LOOSE_RE = re.compile(r"[+-]?(?=\.?[0-9])[0-9]*(?:\.[0-9]*)?(?P<suffix>[A-Za-z][A-Za-z0-9+-]*)")

_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Go parses digitless "Pi"/"Ei" on its inf.Dec path (its int64 fast path's precision estimate
# goes negative for 2^50 and 2^60), where inf.Dec.SetString rejects a number without digits.
_DIGITLESS_BINARY_ERRORS = frozenset({"Pi", "Ei"})
_NANO_EXPONENT = -9
_NANO = Decimal("1e-9")
_CAP = Decimal(INT64_MAX)

_SUFFIX_LIST = "n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3"
_FORMAT_MSG = (
    "must be a Kubernetes quantity: an optional sign, a number and an optional suffix "
    f"({_SUFFIX_LIST}), e.g. '500m', '1.5', '2Gi' or '1e3'"
)


def _suffix_hint(suffix: str) -> str:
    if suffix == "K":
        return "; did you mean 'k' (10^3) or 'Ki' (2^10)?"
    if len(suffix) == 2 and suffix[1] == "i" and suffix[0].upper() + "i" in _BINARY_SUFFIXES:
        return f"; binary suffixes are capitalised: did you mean '{suffix[0].upper()}i'?"
    if suffix.upper().endswith("B") and suffix[:-1] in _DECIMAL_SUFFIXES | {"K": 0}:
        return "; quantities take no unit: write e.g. '512Mi' (2^20) or '512M' (10^6)"
    return ""


def _wrap_int32(value: int) -> int:
    # Go converts the parsed int64 exponent with int32(parsed), which wraps.
    return ((value + (1 << 31)) % (1 << 32)) - (1 << 31)


def parse_quantity(s: Any) -> Decimal:
    """Exact value of quantity ``s`` in base units (cores, bytes, ...), as Go parses it.

    Raises QuantityError for anything ParseQuantity rejects (whitespace, '_', ``1K``, NaN,
    non-ASCII digits, ...). The Decimal can carry a very large exponent (``1e999999``); do
    arithmetic on it with a context of sufficient range, or use ``to_base_units``.
    """
    if not isinstance(s, str):
        raise QuantityError("must be a string")
    if not s:
        raise QuantityError("must be non-empty, e.g. '500m', '1.5' or '2Gi'")
    if any(ch.isspace() for ch in s):
        raise QuantityError("must not contain whitespace")
    if not s.isascii():
        raise QuantityError("must contain only ASCII characters (digits 0-9, sign, '.', suffix)")
    scan = _SCAN_RE.fullmatch(s)
    if scan is None:
        loose = _LOOSE_RE.fullmatch(s)
        if loose is not None:
            tail = loose["suffix"]
            raise QuantityError(f"unknown suffix {tail!r}: use {_SUFFIX_LIST}{_suffix_hint(tail)}")
        raise QuantityError(_FORMAT_MSG)
    negative = scan["sign"] == "-"
    whole, frac, suffix = scan["int"], scan["frac"] or "", scan["suffix"]

    base, exponent = 10, 0
    if suffix in _DECIMAL_SUFFIXES:
        exponent = _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        base, exponent = 2, _BINARY_SUFFIXES[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE":
        parsed = parse_go_int64(suffix[1:])
        if parsed is None:
            if suffix[1:].lstrip("+-").isdigit():
                raise QuantityError(f"exponent {suffix[1:]} does not fit a 64-bit integer")
            raise QuantityError(f"invalid exponent {suffix!r}: expected e.g. 'e3' or 'E-2'")
        exponent = _wrap_int32(parsed)
    elif suffix[0] in "+-":
        # Go calls "1-3" a bad suffix; to a person it is a misplaced sign.
        raise QuantityError(_FORMAT_MSG)
    else:
        raise QuantityError(f"unknown suffix {suffix!r}: use {_SUFFIX_LIST}{_suffix_hint(suffix)}")

    digits = (whole + frac).lstrip("0") or "0"
    if (
        not whole
        and not frac
        and ((base == 10 and exponent < _NANO_EXPONENT) or suffix in _DIGITLESS_BINARY_ERRORS)
    ):
        raise QuantityError("the number part has no digits")

    # Every step below is exact: the precision covers the digits given plus 2^60 (19 digits),
    # and Inexact is trapped so that a mistake here fails loudly instead of rounding quietly.
    context = Context(
        prec=len(digits) + 40,
        Emax=MAX_EMAX,
        Emin=MIN_EMIN,
        traps=[InvalidOperation, DivisionByZero, Overflow, Inexact],
    )
    if base == 10:
        value = Decimal(f"{digits}E{exponent - len(frac)}")
    else:
        value = context.multiply(Decimal(digits), Decimal(1 << exponent))
        value = value.scaleb(-len(frac), context)
    if negative:
        value = value.copy_negate()
    if value.is_zero():
        return Decimal(0)
    exponent_now = value.as_tuple().exponent
    if isinstance(exponent_now, int) and exponent_now < _NANO_EXPONENT:
        # Go keeps nano precision and rounds anything finer away from zero.
        context.traps[Inexact] = False
        value = value.quantize(_NANO, rounding=ROUND_UP, context=context)
    if base == 2 and value.copy_abs() > _CAP:
        value = _CAP.copy_negate() if negative else _CAP
    return value


def quantity_errors(s: Any) -> list[str]:
    """Problems with ``s`` as a Kubernetes quantity; empty when Go would accept it."""
    try:
        parse_quantity(s)
    except QuantityError as exc:
        return [str(exc)]
    return []


def to_base_units(resource: str, s: Any) -> int:
    """Integer value the scheduler compares: CPU in millicores, anything else in whole units.

    Rounds up like Go's ``MilliValue`` (for ``cpu``) and ``Value``: a fraction goes to the next
    integer away from zero (``100m`` of memory -> 1, ``0.0001`` CPU -> 1m, ``-1.5`` -> -2), and
    the result saturates at the int64 limits as Go's int64 accessors do. Raises QuantityError.
    """
    sign, digit_tuple, exponent = parse_quantity(s).as_tuple()
    if not any(digit_tuple):
        return 0
    assert isinstance(exponent, int)  # parse_quantity never returns NaN or infinity
    if resource == "cpu":
        exponent += 3
    # More than 19 integer digits is beyond int64 whatever the digits are: saturate without
    # building a number that could have millions of digits.
    if len(digit_tuple) + exponent > 19:
        return INT64_MIN if sign else INT64_MAX
    coefficient = int("".join(map(str, digit_tuple)))
    value: int
    if exponent >= 0:
        value = coefficient * pow(10, exponent)
    else:
        value, remainder = divmod(coefficient, pow(10, -exponent))
        if remainder:
            value += 1
    if sign:
        value = -value
    return max(INT64_MIN, min(INT64_MAX, value))


_BINARY_UNITS = (
    ("Ei", 1 << 60),
    ("Pi", 1 << 50),
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
    ("Mi", 1 << 20),
    ("Ki", 1 << 10),
)
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")


def format_amount(resource: str, value: int) -> str:
    """A base-unit amount (``to_base_units``) in quantity notation people read: CPU as cores
    or millicores (``8``, ``3920m``), bytes in binary units (``16Gi``, ``14.4Gi`` rounded),
    counts as they are."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        for unit, size in _BINARY_UNITS:
            if abs(value) >= size:
                if value % size == 0:
                    return f"{value // size}{unit}"
                return f"{value / size:.1f}{unit}"
    return str(value)
