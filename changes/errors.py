"""What a proposal action can be refused for, with the HTTP status the API answers."""

from __future__ import annotations


class ProposalError(Exception):
    """A proposal action refused: ``status`` is the API's answer, the message says why."""

    status = 409

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ProposalClosed(ProposalError):
    """The proposal was already applied or rejected."""


class ProposalStale(ProposalError):
    """The object moved on since the proposal was made: rebase it first."""


class RebaseConflict(ProposalError):
    """The proposal and the newer version changed the same fields differently."""


class SelfApproval(ProposalError):
    """The author of a proposal cannot approve it (the point of a second pair of eyes)."""

    status = 403


class ProposalInput(ProposalError):
    """A comment or reason missing or too long."""

    status = 400
