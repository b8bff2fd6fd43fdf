"""Deleting a cluster takes its nodes, policies and label assignments: the API requires the
cluster's version (If-Match), and its settings carry a version that every change bumps."""

from __future__ import annotations

import pytest

from inventory.models import Cluster
from policies.models import Policy
from tests.factories import make_cluster, make_policy

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/prod/"


@pytest.fixture
def prod(db):
    cluster = make_cluster("prod")
    make_policy("prod-only", cluster="prod")
    return cluster


def test_a_delete_without_a_version_is_428_and_keeps_everything(editor, prod):
    response = editor.delete(URL)
    assert response.status_code == 428
    assert "If-Match" in response.json()["detail"]
    assert Cluster.objects.filter(name="prod").exists()
    assert Policy.objects.filter(name="prod-only").exists()


def test_a_stale_version_is_412_and_the_current_one_deletes(editor, prod):
    etag = editor.get(URL)["ETag"]
    assert etag == '"1"'
    assert editor.patch(URL, {"description": "changed"}, format="json").status_code == 200
    assert editor.get(URL)["ETag"] == '"2"'
    assert editor.delete(URL, HTTP_IF_MATCH=etag).status_code == 412
    assert editor.delete(URL, HTTP_IF_MATCH='"2"').status_code == 204
    assert not Cluster.objects.filter(name="prod").exists()
    assert not Policy.objects.filter(name="prod-only").exists()


def test_a_sync_does_not_move_the_version(prod):
    from inventory.services import nodes_apply
    from tests.support.ui_helpers import node_object

    nodes_apply(cluster=prod, objects=[node_object("n1")], replace=True)
    prod.refresh_from_db()
    assert prod.version == 1
