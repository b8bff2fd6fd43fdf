"""The hot path: no database queries per request, and an engine free of Django."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import engine
from extender.holder import holder
from policies.assignment_services import label_assignment_create
from policies.services import policy_create
from tests.extender.extender_support import call, extender, reload
from tests.factories import load_nodes, make_cluster, node_object

__all__ = ["extender"]

REPO = Path(__file__).resolve().parents[2]
POD = {"metadata": {"name": "p", "namespace": "ml", "uid": "u", "labels": {"app": "x"}}}


@pytest.mark.django_db
def test_no_database_queries_per_request(extender: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("resources.binding.bind", lambda **kwargs: None)
    cluster = make_cluster("c", is_default=True, bind_enabled=True)
    load_nodes(cluster, [node_object(f"n{i}", {"zone": f"z{i % 3}"}) for i in range(20)])
    policy_create(
        actor=None,
        data={
            "name": "p",
            "filter_rules": [
                {"kind": "label", "key": "zone", "operator": "NotIn", "values": ["z0"]}
            ],
            "weight_rules": [{"kind": "resource", "resource": "memory", "weight": 5}],
        },
    )
    label_assignment_create(
        actor=None,
        data={"name": "a", "node_selector": {"node_names": ["n1*"]}, "labels": {"x": "y"}},
    )
    reload()
    names = [f"n{i}" for i in range(20)] + ["ghost"]
    items = [node_object(f"n{i}", {"zone": "z1"}) for i in range(5)]
    requests = [
        ("/extender/c/filter", {"Pod": POD, "NodeNames": names}),
        ("/extender/c/prioritize", {"Pod": POD, "NodeNames": names}),
        ("/extender/filter", {"Pod": POD, "Nodes": {"items": items}}),
        ("/extender/prioritize", {"Pod": POD, "Nodes": {"items": items}}),
        ("/extender/c/preempt", {"Pod": POD, "NodeNameToMetaVictims": {"n1": {"Pods": []}}}),
        ("/extender/c/bind", {"PodName": "p", "PodNamespace": "ml", "Node": "n1"}),
        ("/extender/c/filter", b"not json"),
        ("/extender/nope/filter", {"Pod": POD, "NodeNames": names}),
    ]
    for path, body in requests:  # warm-up
        call(path, body)
    with CaptureQueriesContext(connection) as queries:
        statuses = [call(path, body).status for path, body in requests]
    assert statuses == [200, 200, 200, 200, 200, 200, 400, 404]
    assert len(queries) == 0, [q["sql"] for q in queries]
    assert holder.snapshot is not None


def test_engine_imports_without_django() -> None:
    modules = sorted(f"engine.{info.name}" for info in pkgutil.iter_modules(engine.__path__))
    assert {"engine.evaluate", "engine.rules", "engine.pods"} <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "assert not loaded, loaded\n"
        "print('ok', len(sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_dispatcher_hands_other_paths_to_django(db: Any, extender: None) -> None:
    from portal import wsgi

    response = call("/admin/login/", b"", method="GET", via=wsgi.application)
    assert response.status == 200
    assert b"<html" in response.body.lower() or b"<!doctype" in response.body.lower()


@pytest.mark.django_db
def test_serves_the_last_snapshot_with_the_database_unreachable(
    extender: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError
    from django.db.backends.base.base import BaseDatabaseWrapper

    cluster = make_cluster("c")
    load_nodes(cluster, [node_object("n1", {"zone": "a"}), node_object("n2", {"zone": "b"})])
    policy_create(
        actor=None,
        data={
            "name": "zone-a",
            "filter_rules": [{"kind": "label", "key": "zone", "operator": "In", "values": ["a"]}],
        },
    )
    reload()
    before = holder.snapshot

    def unreachable(self: Any, *args: Any, **kwargs: Any) -> None:
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(BaseDatabaseWrapper, "cursor", unreachable)
    with pytest.raises(OperationalError):
        holder.load()
    assert holder.snapshot is before
    # What /readyz shows: the stage and the error type, never the text (hosts, users).
    assert holder.last_error == "build: OperationalError"
    response = call("/extender/c/filter", {"Pod": POD, "NodeNames": ["n1", "n2"]})
    assert response.status == 200
    assert response.json()["NodeNames"] == ["n1"]


def test_dispatcher_routes_probes_past_django(db: Any, extender: None) -> None:
    from portal import wsgi

    assert {"/healthz", "/readyz", "/metrics"} <= set(wsgi.ROUTES)
    response = call("/healthz", b"", method="GET", via=wsgi.application)
    assert response.status == 200
    assert "text/html" not in response.headers.get("Content-Type", "")
