"""The console's pages, served through the admin site (its login, look and permissions)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from console import dashboard, dryrun, explain
from console.charts import bar_chart
from console.frame import app_list, page_context
from core.errors import ContentError
from inventory.models import Cluster
from policies.models import Policy

# What the dashboard needs: the viewer's reading rights (the pods' pages need the same).
DASHBOARD_PERMISSION = "inventory.view_pod"
EXPLAIN_FIELDS = ("cluster", "namespace", "name", "labels", "manifest", "nodes", "stored")


def dashboard_view(request: HttpRequest) -> TemplateResponse:
    """The admin's landing page: are my clusters fresh, which policies act, what is refused.

    An account without the viewer's reading rights (a staff account no role was given yet) is
    told so instead of being shown the installation's figures, or zeros that read as "all well".
    """
    if not request.user.has_perm(DASHBOARD_PERMISSION):
        context = page_context(request, "Dashboard", app_list=app_list(request), no_role=True)
        return TemplateResponse(request, "console/dashboard.html", context)
    data = dashboard.build()
    context = page_context(
        request,
        "Dashboard",
        app_list=app_list(request),
        dashboard=data,
        chart=bar_chart(
            data.hourly, title="Extender calls per hour over the last 24 hours, and pods refused"
        ),
    )
    return TemplateResponse(request, "console/dashboard.html", context)


def explain_view(request: HttpRequest) -> HttpResponse:
    """Explain a pod: the query string is the form, so every result is a permalink. It reads
    the inventory's pods and nodes: the viewer's reading right is needed."""
    if not request.user.has_perm(DASHBOARD_PERMISSION):
        raise PermissionDenied
    query = {key: request.GET.get(key, "") for key in EXPLAIN_FIELDS}
    context: dict = page_context(
        request,
        "Explain a pod",
        query=query,
        clusters=list(
            Cluster.objects.order_by("-is_default", "name").values_list("name", flat=True)
        ),
        result=None,
        errors=None,
    )
    if request.GET:
        try:
            result = explain.explain(query)
        except ContentError as exc:
            context["errors"] = exc.errors
        else:
            context["result"] = result
            context["save_expectation_url"] = save_expectation_url(request, query, result)
            context["chart"] = bar_chart(
                result["score_histogram"],
                title="How many passing nodes got each score 0..10",
                unit="nodes with this score",
                highlight="",
                counts=True,
                width=330,  # 11 bars: text about its own size from a phone to a desktop
            )
    return TemplateResponse(request, "console/explain.html", context)


def save_expectation_url(request: HttpRequest, query: dict, result: dict) -> str | None:
    """The expectation add form prefilled with the pod as it was explained (editors only).

    The pod comes from the result, not the form's fields, so a pasted manifest's namespace and
    labels are the ones kept; "Only these nodes" becomes the expectation's node names, and the
    kind is today's outcome (lands somewhere, or nowhere)."""
    if not request.user.has_perm("policies.add_expectation"):
        return None
    pod = result["pod"]
    prefill = {
        # The outcome as it is now, so the saved case keeps it (the operator may change it).
        "kind": "can_land" if result["summary"]["passed"] else "never_lands",
        "namespace": pod["namespace"],
        "pod_labels": "\n".join(f"{key}={value}" for key, value in sorted(pod["labels"].items())),
    }
    if result.get("patterns"):
        prefill["node_names"] = ", ".join(result["patterns"])
    cluster = Cluster.objects.filter(name=result["cluster"]).values_list("pk", flat=True).first()
    if cluster is not None:
        prefill["cluster"] = str(cluster)
    return f"{reverse('admin:policies_expectation_add')}?{urlencode(prefill)}"


def dry_run_view(request: HttpRequest, name: str) -> HttpResponse:
    """What the dry-run policy ``name`` would have rejected, from the decision log."""
    if not request.user.has_perm(DASHBOARD_PERMISSION):
        raise PermissionDenied
    policy = Policy.objects.filter(name=name).first()
    if policy is None:
        raise Http404(f"No policy named {name!r}.")
    context = page_context(
        request,
        f"Dry-run report: {name}",
        policy=policy,
        report=dryrun.dry_run_report(name),
    )
    return TemplateResponse(request, "console/dry_run.html", context)
