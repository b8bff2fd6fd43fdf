"""`LOG_FORMAT=json` on the production server: gunicorn's lines and the portal's are JSON
objects, and the request id the response returns joins the access line to the app's records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.portal_server import PortalServer, database_url, shared_database_target

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
REQUEST_ID = "0f6c3b0e8f2d4c1a9b7e5d3c1a2b4c6d"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PortalServer]:
    (_, port), db = shared_database_target()
    started = PortalServer(
        env={"DATABASE_URL": database_url(db, port), "LOG_FORMAT": "json", "ALLOWED_HOSTS": "*"},
        workdir=tmp_path,
        workers=1,
    )
    started.wait_until(lambda: started.get("/healthz").status == 200, 60, "the web")
    yield started
    started.stop()


def test_every_line_is_json_and_the_request_id_ties_them_together(server: PortalServer) -> None:
    refused = server.request("GET", "/api/v1/policies/", headers={"X-Request-ID": REQUEST_ID})
    assert refused.status == 401
    made = server.request("GET", "/api/v1/policies/", headers={"X-Request-ID": "bad id; x"})
    assert made.status == 401

    def lines() -> list[dict]:
        text = server.log_path.read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    server.wait_until(
        lambda: sum("/api/" in r.get("message", "") for r in lines()) >= 4, 10, "access lines"
    )
    records = lines()  # json.loads raised above on any line that is not JSON
    app = [r for r in records if r.get("logger") == "django.request"]
    assert app[0]["request_id"] == REQUEST_ID
    assert app[0]["message"] == "Unauthorized: /api/v1/policies/"
    access = [
        r["message"]
        for r in records
        if r.get("logger") == "gunicorn.access" and "/api/" in r["message"]
    ]
    assert access[0].endswith(f"request_id={REQUEST_ID}")
    assert '"GET /api/v1/policies/ HTTP/1.1" 401' in access[0]
    # A header that is not a UUID is replaced by a new id, never written to the log as given.
    replaced = access[1].rsplit("request_id=", 1)[1]
    assert len(replaced) == 32
    assert replaced != REQUEST_ID
    assert app[1]["request_id"] == replaced
    assert "bad id" not in server.log_path.read_text()
