"""Shell globs for node names: ``*``, ``?`` and ``[...]`` with fnmatch.fnmatchcase semantics.

Matching is case-sensitive and ``*`` also matches '.' and '/'. Unlike fnmatch, which quietly
treats an unclosed '[' as a literal, an unclosed class or a reversed range is reported as an
error: either is almost certainly a typo that would make the pattern match nothing.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from engine.errors import EngineValidationError

GLOB_MAX = 253  # a node name is a DNS-1123 subdomain: no pattern needs to be longer


def _class_errors(pattern: str) -> list[str]:
    # Walks brackets the way fnmatch.translate does: after '[' an optional '!' and then a ']'
    # are literal members, and the class ends at the next ']'.
    errors = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] != "[":
            i += 1
            continue
        start = i
        j = i + 1
        if j < n and pattern[j] == "!":
            j += 1
        if j < n and pattern[j] == "]":
            j += 1
        while j < n and pattern[j] != "]":
            j += 1
        if j >= n:
            errors.append(
                f"unclosed '[' at position {start}: a character class needs a closing ']' "
                "(write '[[]' to match a literal '[')"
            )
            return errors
        members = pattern[start + 1 : j]
        if members.startswith("!"):
            members = members[1:]
        k = 0
        while k + 2 < len(members):
            if members[k + 1] == "-" and members[k] > members[k + 2]:
                errors.append(
                    f"reversed range '{members[k : k + 3]}' in '{pattern[start : j + 1]}' "
                    "matches nothing"
                )
                k += 3
            else:
                k += 3 if members[k + 1] == "-" else 1
        i = j + 1
    return errors


def glob_errors(pattern: Any) -> list[str]:
    """Problems with ``pattern`` as a node-name glob; empty when it is usable."""
    if not isinstance(pattern, str):
        return ["must be a string"]
    if not pattern:
        return ["must be non-empty"]
    if len(pattern) > GLOB_MAX:
        return [f"must be no more than {GLOB_MAX} characters"]
    return _class_errors(pattern)


def _raise_if_invalid(pattern: Any) -> None:
    errors = glob_errors(pattern)
    if errors:
        raise EngineValidationError([("pattern", message) for message in errors])


@lru_cache(maxsize=4096)
def _compile_valid(pattern: str) -> Callable[[str], bool]:
    # Invalid patterns raise before anything is cached, so the cache only holds good ones.
    _raise_if_invalid(pattern)
    match = re.compile(fnmatch.translate(pattern)).match

    def matches(name: str) -> bool:
        return isinstance(name, str) and match(name) is not None

    return matches


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A predicate ``name -> bool`` for ``pattern``, compiled once and cached.

    Raises EngineValidationError when ``glob_errors`` reports a problem.
    """
    if not isinstance(pattern, str):
        _raise_if_invalid(pattern)
    return _compile_valid(pattern)


def glob_match(pattern: str, name: str) -> bool:
    """True when node ``name`` matches ``pattern`` (case-sensitive)."""
    return compile_glob(pattern)(name)


def globs_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any of ``patterns`` (each must be valid), for matching many names."""
    for pattern in patterns:
        _raise_if_invalid(pattern)
    return re.compile("|".join(fnmatch.translate(pattern) for pattern in patterns))
