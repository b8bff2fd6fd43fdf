"""record_call / record_error: the handler's one call per request, which must never raise."""

from __future__ import annotations

import logging

import pytest

from extender import metrics, refresh
from extender.observe import record_call, record_error
from tests.extender.observability_fakes import call_record


def requests(verb: str, cluster: str, code: str) -> float:
    return metrics.REQUESTS.labels(verb, cluster, code)._value.get()


def test_record_call_counts_a_successful_request() -> None:
    before = requests("prioritize", "observe-ok", "200")
    record_call(call_record(verb="prioritize", cluster="observe-ok"))
    assert requests("prioritize", "observe-ok", "200") - before == 1


def test_a_broken_record_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    # A negative count would make the counter raise: the response must still go out.
    with caplog.at_level(logging.ERROR, logger="extender.observe"):
        record_call(call_record(cluster="observe-bad", nodes_in=-1))
    assert "recording an extender call failed" in caplog.text


def test_record_error_without_any_snapshot_counts_under_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refresh, "get_holder", lambda: None)
    before = metrics.ERRORS.labels("filter", "other", "no_snapshot")._value.get()
    record_error("filter", "c1", "no_snapshot")
    assert metrics.ERRORS.labels("filter", "other", "no_snapshot")._value.get() - before == 1
    assert requests("filter", "other", "503") >= 1
