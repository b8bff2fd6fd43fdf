"""The errors every layer above the engine shares, and what each means to a caller.

``ContentError`` is invalid content with a message per field path; the engine's own
``EngineValidationError`` (the engine imports nothing but the standard library) is turned into it
where content is validated (``policies.validation``), so the admin, the API and ``apply`` only
ever see this one. The API maps each error to its status in ``core.api.errors``; the admin shows
it on the form (docs/architecture.md#errors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from engine.errors import join_path


class ContentError(ValueError):
    """Invalid content (a 400): ``errors`` maps a field path to its messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {k: list(v) for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in self.errors.items()))

    def merge_into(self, errors: MutableMapping[str, list[str]], prefix: str = "") -> None:
        """Add these messages to ``errors``, each path under ``prefix`` (a document's entry)."""
        for path, messages in self.errors.items():
            errors.setdefault(join_path(prefix, path), []).extend(messages)


class VersionConflict(Exception):
    """The caller based its change on a version that is no longer current (a 409)."""

    def __init__(self, current_version: int, expected_version: int) -> None:
        self.current_version = current_version
        self.expected_version = expected_version
        super().__init__(
            f"version {expected_version} is stale: the current version is {current_version}"
        )


def conflict_message(what: str, current_version: int) -> str:
    """The message shown when an edit was based on a version that is no longer current."""
    return (
        f"This {what} was changed by someone else since you opened it "
        f"(now version {current_version}); reload the page and make your change again."
    )


class ExpectationsBroken(Exception):
    """A change would make passing expectations fail; nothing was written (a 409 until the
    caller confirms with ``force``)."""

    def __init__(self, broken: list[dict[str, Any]]) -> None:
        self.broken = broken
        names = ", ".join(sorted({b["name"] for b in broken}))
        super().__init__(
            f"This change breaks {len(broken)} expectation"
            f"{'s' if len(broken) != 1 else ''} ({names}); confirm it to make it anyway."
        )


class ChangeHeld(Exception):
    """A write that needs approvals first (the two-person rule, ``changes``): nothing was
    written. The API answers 202 with the proposal, the admin redirects to it.

    The gate cannot store the proposal itself: it runs inside the write's transaction, which
    this exception rolls back. ``hold()`` stores it afterwards (once) and returns where it is.
    """

    def __init__(self, message: str, *, hold: Callable[[], HeldProposal]) -> None:
        self._hold = hold
        self.held: HeldProposal | None = None
        super().__init__(message)

    def hold(self) -> HeldProposal:
        """Store the proposal (the first call only) and say where it is."""
        if self.held is None:
            self.held = self._hold()
        return self.held


@dataclass(frozen=True)
class HeldProposal:
    """Where a held change waits: its number, API path, admin path and approvals needed."""

    pk: int
    api_path: str
    admin_path: str
    required: int
    message: str
