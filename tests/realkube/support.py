"""What the real-control-plane tests share: the portal's generated configuration, read as an
operator reads it (the API), and the operator's setup of a cluster."""

from __future__ import annotations

from typing import Any

import yaml
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from inventory.models import Cluster


def api_client() -> APIClient:
    """An API client of a superuser, in process."""
    user_model = get_user_model()
    user = user_model.objects.filter(username="realkube-admin").first()
    if user is None:
        user = user_model.objects.create_superuser("realkube-admin", "a@example.com", "x")
    api = APIClient()
    api.force_authenticate(user)
    return api


def generated(cluster: Cluster | str, **query: str) -> Any:
    """``GET /api/v1/clusters/<name>/scheduler-config/`` (JSON), exactly as served."""
    name = cluster if isinstance(cluster, str) else cluster.name
    response = api_client().get(
        f"/api/v1/clusters/{name}/scheduler-config/", {"format": "json", **query}
    )
    assert response.status_code == 200, response.content
    return response.json()


def bundle_configuration(bundle: str, documents: dict[str, Any]) -> dict[str, Any]:
    """The KubeSchedulerConfiguration a bundle ships: the second scheduler's ConfigMap file,
    the kubeadm bundle's first document."""
    items = documents["items"]
    if bundle == "kubeadm":
        return dict(items[0])
    (config_map,) = (item for item in items if item["kind"] == "ConfigMap")
    (text,) = config_map["data"].values()
    return dict(yaml.safe_load(text))


def extenders_implementing(config: dict[str, Any], verb: str) -> list[dict[str, Any]]:
    return [e for e in config.get("extenders", []) if e.get(f"{verb}Verb")]
