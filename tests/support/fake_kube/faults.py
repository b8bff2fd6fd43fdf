"""Programmable faults of the fake API server; every method is safe to call from any thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class _Failure:
    remaining: int
    status: int
    path_contains: str | None


@dataclass
class _Delay:
    seconds: float
    path_contains: str | None
    remaining: int | None


def _matches(needle: str | None, target: str) -> bool:
    return needle is None or needle in target


class Faults:
    """Faults consulted by the request handler.

    ``target`` below is the request's path plus query string (``/api/v1/nodes?watch=true&...``),
    so ``path_contains="watch=true"`` singles out watches.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Set on stop() so that injected delays end at once instead of holding up shutdown.
        self.stopping = threading.Event()
        self.unauthorized = False
        self.forbidden = False
        self._failures: list[_Failure] = []
        self._page_failure: tuple[int, int] | None = None
        self._delays: list[_Delay] = []
        self._drop_after: int | None = None

    def fail_next(self, n: int, status: int = 500, path_contains: str | None = None) -> None:
        with self._lock:
            self._failures.append(_Failure(n, status, path_contains))

    def fail_list_page(self, page_index: int, status: int = 500) -> None:
        if page_index < 1:
            raise ValueError("pages are counted from 1")
        with self._lock:
            self._page_failure = (page_index, status)

    def delay(
        self, seconds: float, path_contains: str | None = None, times: int | None = None
    ) -> None:
        with self._lock:
            self._delays.append(_Delay(seconds, path_contains, times))

    def drop_watch_after(self, n_events: int) -> None:
        with self._lock:
            self._drop_after = n_events

    def clear(self) -> None:
        with self._lock:
            self.unauthorized = self.forbidden = False
            self._failures.clear()
            self._delays.clear()
            self._page_failure = None
            self._drop_after = None

    # -- used by the handler -------------------------------------------------------------------

    def take_failure(self, target: str) -> int | None:
        """Status code to fail this request with, consuming one injected failure."""
        with self._lock:
            for failure in self._failures:
                if failure.remaining > 0 and _matches(failure.path_contains, target):
                    failure.remaining -= 1
                    self._failures = [f for f in self._failures if f.remaining > 0]
                    return failure.status
        return None

    def take_page_failure(self, page: int) -> int | None:
        """Status code to fail list page ``page`` with (one-shot)."""
        with self._lock:
            if self._page_failure is not None and self._page_failure[0] == page:
                status = self._page_failure[1]
                self._page_failure = None
                return status
        return None

    def take_delay(self, target: str) -> float:
        """Total injected delay for this request."""
        total = 0.0
        with self._lock:
            for delay in self._delays:
                if _matches(delay.path_contains, target) and delay.remaining != 0:
                    total += delay.seconds
                    if delay.remaining is not None:
                        delay.remaining -= 1
            self._delays = [d for d in self._delays if d.remaining != 0]
        return total

    def take_drop(self) -> int | None:
        """Event count after which this watch is cut (one-shot), or None."""
        with self._lock:
            drop, self._drop_after = self._drop_after, None
        return drop
