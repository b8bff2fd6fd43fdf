"""What every extender call reports: metrics and the decision log (filled in by observability).

The handler calls :func:`record_call` once per request, after the response body is built. It
must stay cheap: no I/O on the caller's thread.
"""

from __future__ import annotations

from typing import Any


def record_call(call: Any) -> None:
    """Report one extender call (see ``extender.handler.CallRecord``)."""


def record_error(verb: str, cluster: str, kind: str) -> None:
    """Count one rejected request (bad input, unknown cluster, ...)."""
