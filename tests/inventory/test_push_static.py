"""Pushing labels on a static cluster says one thing (inventory/admin_tools.py): there is no
API server to patch, and the portal's rules already see the assigned labels."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from inventory.models import Node
from portal.demo import demo_seed

pytestmark = pytest.mark.django_db


def test_a_static_clusters_nodes_get_one_message(admin_client: Client) -> None:
    demo_seed()
    # The GPU nodes drift: gpu-tier assigns a label nobody pushed.
    ids = list(Node.objects.filter(name__startswith="demo-gpu-").values_list("pk", flat=True))
    response = admin_client.post(
        reverse("admin:inventory_node_changelist"),
        {"action": "push_assigned_labels", "_selected_action": ids},
        follow=True,
    )
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == [
        "Nothing to push. 9 selected nodes belong to static clusters (demo): there is no API "
        "server to patch, and the portal's rules already see their assigned labels."
    ]


def test_a_static_clusters_drift_does_not_offer_a_push(admin_client: Client) -> None:
    from inventory.models import Cluster

    demo_seed()
    cluster = Cluster.objects.get(name="demo")
    page = admin_client.get(reverse("admin:inventory_cluster_change", args=[cluster.pk]))
    text = page.content.decode()
    assert "a static cluster has no API server to push them to" in text
    assert "push them with the node list action" not in text
