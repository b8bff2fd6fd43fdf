"""Validation errors shared by the engine modules."""

from __future__ import annotations

from collections.abc import Iterable


def join_path(base: str, part: str) -> str:
    """Join two field-path fragments: ``a`` + ``b`` -> ``a.b``, ``a`` + ``[0]`` -> ``a[0]``."""
    if not base:
        return part
    if not part:
        return base
    return f"{base}{part}" if part.startswith("[") else f"{base}.{part}"


def prefix_errors(errors: Iterable[tuple[str, str]], base: str) -> list[tuple[str, str]]:
    """Return ``errors`` with every field path prefixed by ``base``."""
    return [(join_path(base, field), message) for field, message in errors]


class EngineValidationError(ValueError):
    """Invalid engine input; ``errors`` lists ``(field path, message)`` pairs.

    A field path is dotted for object members, ``[i]`` for list items and ``[key]`` for map
    entries, e.g. ``node_selector.match_expressions[0].values``. The empty path means the value
    itself.
    """

    def __init__(self, errors: Iterable[tuple[str, str]]) -> None:
        self.errors: list[tuple[str, str]] = list(errors)
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.errors:
            return "invalid value"
        return "; ".join(
            f"{field}: {message}" if field else message for field, message in self.errors
        )

    def __str__(self) -> str:
        return self._render()

    def as_dict(self) -> dict[str, list[str]]:
        """Messages grouped by field path, in first-seen order (handy for a 400 response)."""
        grouped: dict[str, list[str]] = {}
        for field, message in self.errors:
            grouped.setdefault(field, []).append(message)
        return grouped
