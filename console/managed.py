"""The console's Managed resources page: per resource, a bar per node (allocated of capacity)
and who holds what (docs/managed-resources.md)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from console.frame import page_context
from inventory.models import Cluster
from resources.accounting import usage

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
