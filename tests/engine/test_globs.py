"""Node-name globs: fnmatch.fnmatchcase semantics, with typos reported instead of ignored."""

from __future__ import annotations

import fnmatch

import pytest

from engine.errors import EngineValidationError
from engine.globs import compile_glob, glob_errors, glob_match, globs_regex


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        pytest.param("ip-10-*", "ip-10-0-3-7.ec2.internal", True, id="prefix-star"),
        pytest.param("ip-10-*", "ip-11-0-3-7", False, id="prefix-star-miss"),
        pytest.param("ip-10-*", "ip-10-", True, id="star-matches-empty"),
        pytest.param("gpu-?", "gpu-1", True, id="question-mark"),
        pytest.param("gpu-?", "gpu-12", False, id="question-mark-one-char-only"),
        pytest.param("gpu-?", "gpu-", False, id="question-mark-needs-a-char"),
        pytest.param("[abc]*", "b-node", True, id="class"),
        pytest.param("[abc]*", "d-node", False, id="class-miss"),
        pytest.param("[!abc]*", "d-node", True, id="negated-class"),
        pytest.param("node-[0-9]", "node-7", True, id="range"),
        pytest.param("node-[0-9]", "node-x", False, id="range-miss"),
        pytest.param("Node-*", "node-1", False, id="case-sensitive"),
        pytest.param("*", "anything.at.all", True, id="star-only"),
        pytest.param("*.internal", "a.b.internal", True, id="star-crosses-dots"),
        pytest.param("worker-1", "worker-1", True, id="literal"),
        pytest.param("worker-1", "worker-10", False, id="literal-is-anchored"),
        pytest.param("[[]x", "[x", True, id="escaped-bracket"),
        pytest.param("[]]x", "]x", True, id="bracket-first-in-class"),
    ],
)
def test_glob_match(pattern: str, name: str, expected: bool) -> None:
    assert glob_match(pattern, name) is expected
    assert fnmatch.fnmatchcase(name, pattern) is expected


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        pytest.param("", "must be non-empty", id="empty"),
        pytest.param("a" * 254, "no more than 253 characters", id="too-long"),
        pytest.param(None, "must be a string", id="none"),
        pytest.param(["a*"], "must be a string", id="list"),
        pytest.param("node-[", "unclosed '[' at position 5", id="unclosed-bracket"),
        pytest.param("node-[0-9", "unclosed '['", id="unclosed-range"),
        pytest.param("[]", "unclosed '['", id="bracket-pair-is-unclosed"),
        pytest.param("[!]", "unclosed '['", id="negated-bracket-pair-is-unclosed"),
        pytest.param("node-[9-0]", "reversed range '9-0'", id="reversed-range"),
    ],
)
def test_glob_errors(pattern: object, message: str) -> None:
    errors = glob_errors(pattern)
    assert any(message in error for error in errors), errors


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("a" * 253, id="253-chars"),
        pytest.param("ip-10-*", id="prefix-star"),
        pytest.param("[a-]x", id="trailing-hyphen-in-class"),
        pytest.param("x]", id="lone-closing-bracket"),
        pytest.param("[a-c-e]", id="chained-ranges"),
    ],
)
def test_valid_globs(pattern: str) -> None:
    assert glob_errors(pattern) == []


def test_compile_glob_is_cached_and_rejects_invalid() -> None:
    assert compile_glob("gpu-*") is compile_glob("gpu-*")
    with pytest.raises(EngineValidationError, match=r"pattern: unclosed '\['"):
        compile_glob("gpu-[")
    with pytest.raises(EngineValidationError):
        compile_glob(None)  # type: ignore[arg-type]


def test_compiled_glob_ignores_non_strings() -> None:
    assert compile_glob("*")(None) is False  # type: ignore[arg-type]


def test_globs_regex_matches_any() -> None:
    regex = globs_regex(("gpu-*", "cpu-?"))
    assert regex.match("gpu-a100-1")
    assert regex.match("cpu-1")
    assert not regex.match("cpu-12")
