"""The cluster form refuses a kubeconfig name KUBECONFIG_DIR does not hold, and names the ones
it does (a typo is caught at save, not at the first sync)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from inventory.models import Cluster

pytestmark = pytest.mark.django_db

FORM = {
    "name": "prod",
    "source": "kubernetes",
    "sync_interval_seconds": 300,
    "unknown_node_action": "deny",
    "admission": "off",
}


def test_a_kubeconfig_name_not_in_the_directory_is_refused_with_the_names_there(
    admin_client: Client, tmp_path: Path, settings: Any
) -> None:
    settings.KUBECONFIG_DIR = tmp_path
    (tmp_path / "prod-eu").write_text("apiVersion: v1\nkind: Config\n")
    (tmp_path / "staging").mkdir()
    (tmp_path / "..data").mkdir()  # a mounted Secret's internals are not names to offer
    page = admin_client.post("/admin/inventory/cluster/add/", {**FORM, "kubeconfig_path": "prod"})
    assert page.status_code == 200
    html = page.content.decode()
    assert (
        "No kubeconfig named &#x27;prod&#x27; in KUBECONFIG_DIR. It holds: prod-eu, staging."
        in html
    )
    assert not Cluster.objects.filter(name="prod").exists()
    saved = admin_client.post(
        "/admin/inventory/cluster/add/", {**FORM, "kubeconfig_path": "prod-eu"}
    )
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    assert Cluster.objects.get(name="prod").kubeconfig_path == "prod-eu"
