"""Routes under /api/v1/: clusters, their sync trigger, nodes and node imports, pods (their
Pending pods and violations are the policies' verdicts: ``policies/api/urls.py``)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from core.middleware import allows_large_body
from inventory.api import pods, views
from inventory.api.parsers import (
    NodeListJSONParser,
    NodeListTextYAMLParser,
    NodeListXYAMLParser,
    NodeListYAMLParser,
)

router = SimpleRouter()
router.register("clusters", views.ClusterViewSet, basename="cluster")

NODE_LIST_PARSERS = [
    NodeListJSONParser,
    NodeListYAMLParser,
    NodeListXYAMLParser,
    NodeListTextYAMLParser,
]

urlpatterns = [
    *router.urls,
    path(
        "clusters/<str:cluster_name>/nodes/",
        views.NodeViewSet.as_view({"get": "list"}),
        name="node-list",
    ),
    # Before the detail route; a node literally named "import" is therefore not addressable
    # by GET here (it still appears in the list).
    path(
        "clusters/<str:cluster_name>/nodes/import/",
        allows_large_body(
            views.NodeViewSet.as_view({"post": "import_nodes"}, parser_classes=NODE_LIST_PARSERS)
        ),
        name="node-import",
    ),
    path(
        "clusters/<str:cluster_name>/nodes/<str:node>/",
        views.NodeViewSet.as_view({"get": "retrieve"}),
        name="node-detail",
    ),
    path(
        "clusters/<str:cluster_name>/pods/",
        pods.PodViewSet.as_view({"get": "list"}),
        name="pod-list",
    ),
]
