"""The cluster setting ``scheduler_name``: empty by default, validated by the service (a 400
with a specific message through the API, nothing written), changed through the API."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from core.errors import ContentError
from inventory.models import Cluster
from inventory.services import cluster_create
from scheduler.loop import scheduled_clusters
from tests.factories import make_cluster
from tests.support.api_fixtures import token_client

pytestmark = pytest.mark.django_db


def test_empty_by_default_and_validated() -> None:
    assert make_cluster("plain").scheduler_name == ""
    for bad in ("default-scheduler", "Portal_Scheduler", "-x", "a" * 254):
        with pytest.raises(ContentError) as caught:
            cluster_create(actor=None, data={"name": "bad", "scheduler_name": bad})
        assert "scheduler_name" in caught.value.args[0]
    assert not Cluster.objects.filter(name="bad").exists()


def test_set_through_the_api_and_picked_up_for_kubernetes_clusters(settings, tmp_path) -> None:
    settings.KUBECONFIG_DIR = tmp_path
    (tmp_path / "k").write_text("")
    user = get_user_model().objects.create_superuser("root", password="x")
    api = token_client(user, "admin")
    make_cluster("static-one", scheduler_name="portal-scheduler")
    make_cluster("kube", source="kubernetes", kubeconfig_path="k")
    bad = api.patch(
        "/api/v1/clusters/kube/", {"scheduler_name": "default-scheduler"}, format="json"
    )
    assert bad.status_code == 400
    assert "kube-scheduler's own name" in str(bad.json()), bad.json()
    assert scheduled_clusters() == []  # a static cluster has no API server to bind in
    ok = api.patch("/api/v1/clusters/kube/", {"scheduler_name": "portal.scheduler"}, format="json")
    assert ok.status_code == 200, ok.json()
    assert ok.json()["scheduler_name"] == "portal.scheduler"
    assert [c.name for c in scheduled_clusters()] == ["kube"]
