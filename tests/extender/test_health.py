"""/healthz, /readyz and /metrics: raw WSGI apps that answer without Django or a database."""

from __future__ import annotations

import time

import orjson
import pytest

from extender import health, refresh
from tests.extender.observability_fakes import FakeHolder, FakeSnapshot
from tests.extender.wsgi_client import call_wsgi


@pytest.fixture
def holder(monkeypatch: pytest.MonkeyPatch, settings) -> FakeHolder:
    settings.EXTENDER_STALE_SECONDS = 30
    fake = FakeHolder(FakeSnapshot(revision=12, built_at=time.time() - 5))
    monkeypatch.setattr(refresh, "get_holder", lambda: fake)
    return fake


def readyz() -> tuple[int, dict]:
    status, headers, body = call_wsgi(health.wsgi_routes["/readyz"], "/readyz")
    assert headers["Content-Type"] == "application/json"
    return status, orjson.loads(body)


def test_healthz_answers_while_the_process_lives() -> None:
    status, headers, body = call_wsgi(health.wsgi_routes["/healthz"], "/healthz")
    assert status == 200
    assert orjson.loads(body) == {"status": "ok"}
    assert headers["Cache-Control"] == "no-store"


def test_readyz_is_ready_with_a_fresh_snapshot(holder: FakeHolder) -> None:
    status, body = readyz()
    assert status == 200
    assert body["status"] == "ready"
    assert body["revision"] == 12
    assert 5 <= body["snapshot_age_seconds"] < 60


def test_readyz_without_a_snapshot_says_so(holder: FakeHolder) -> None:
    holder.snapshot = None
    status, body = readyz()
    assert status == 503
    assert body["reason"] == "no snapshot loaded"


def test_readyz_turns_stale_when_the_revision_cannot_be_confirmed(holder: FakeHolder) -> None:
    holder.last_refresh_ok = time.time() - 45
    holder.last_error = "database: OperationalError: connection refused"
    status, body = readyz()
    assert status == 503
    assert body["reason"].startswith("stale: revision not confirmed for 45")
    assert "limit 30 s" in body["reason"]
    assert body["last_error"] == "database: OperationalError: connection refused"
    assert body["revision"] == 12


def test_one_failed_check_within_the_limit_is_still_ready(holder: FakeHolder) -> None:
    holder.last_refresh_ok = time.time() - 2
    holder.last_error = "database: OperationalError: connection refused"
    status, body = readyz()
    assert status == 200
    assert body["last_error"] == "database: OperationalError: connection refused"


def test_a_newer_revision_that_failed_to_load_is_stale_at_once(
    holder: FakeHolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    refresher = refresh.SnapshotRefresher(
        holder_getter=lambda: holder, revision_reader=lambda: 13, inventory_reader=dict
    )
    holder.revision_in_db = 13
    holder.load_error = ValueError("bad rule")
    refresher.close_connections = lambda: None
    refresher.check_once()
    monkeypatch.setattr(refresh, "_refresher", refresher)
    status, body = readyz()
    assert status == 503
    assert body["reason"] == "revision 13 failed to load; serving revision 12"
    assert body["last_error"] == "build: ValueError"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_only_get_and_head_are_allowed(path: str, holder: FakeHolder) -> None:
    status, headers, body = call_wsgi(health.wsgi_routes[path], path, method="POST")
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert orjson.loads(body) == {"Error": "method POST not allowed here; use GET or HEAD"}


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_head_sends_headers_only(path: str, holder: FakeHolder) -> None:
    status, headers, body = call_wsgi(health.wsgi_routes[path], path, method="HEAD")
    assert status == 200
    assert body == b""
    assert int(headers["Content-Length"]) > 0


def test_metrics_is_prometheus_text(holder: FakeHolder) -> None:
    status, headers, body = call_wsgi(health.wsgi_routes["/metrics"], "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=")
    assert b"# TYPE extender_requests_total counter" in body
    assert b"extender_snapshot_revision 12.0" in body


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_the_portal_entry_point_routes_the_probes_here(path: str, holder: FakeHolder) -> None:
    from portal.wsgi import application

    status, headers, _ = call_wsgi(application, path)
    assert status == 200
    assert "X-Frame-Options" not in headers  # Django's middleware never saw the request
