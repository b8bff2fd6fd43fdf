"""The console's Managed resources page: per resource, a bar per node (allocated of capacity)
and who holds what (docs/managed-resources.md)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from console.frame import page_context
from inventory.models import Cluster
from resources.accounting import usage
from resources.models import ManagedResource

VIEW_PERMISSION = "resources.view_managedresource"


def managed_view(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    names = list(Cluster.objects.order_by("-is_default", "name").values_list("name", flat=True))
    wanted = request.GET.get("cluster") or (names[0] if names else "")
    cluster = Cluster.objects.filter(name=wanted).first()
    node = request.GET.get("node") or None
    context = page_context(
        request,
        "Managed resources",
        clusters=names,
        cluster=cluster,
        node=node or "",
        resources=usage(cluster, node) if cluster is not None else [],
    )
    return TemplateResponse(request, "resources/managed.html", context)


def over_capacity_problems() -> list[tuple[str, str, str]]:
    """The dashboard's problems of managed resources: (message, link, what to do there) per
    node with more allocated than it has (free < 0), in the clusters that have such resources."""
    found = []
    page = reverse("admin:console-managed-resources")
    clusters = Cluster.objects.filter(pk__in=ManagedResource.objects.values("cluster_id")).order_by(
        "name"
    )
    for cluster in clusters:
        for resource in usage(cluster):
            for node in resource["nodes"]:
                if node["free"] >= 0:
                    continue
                found.append(
                    (
                        f"Managed resource {resource['name']} of cluster {cluster.name}: node "
                        f"{node['node']} has {node['allocated']} allocated of "
                        f"{node['capacity']} ({-node['free']} over capacity).",
                        f"{page}?{urlencode({'cluster': cluster.name, 'node': node['node']})}",
                        "see who holds it",
                    )
                )
    return found
