from datetime import datetime

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class PortalConfig(AppConfig):
    """The project: settings, URLs, WSGI, Celery, the management commands and the admin's look.

    It has no models; its label is ``site`` because ``portal`` belongs to ``core`` (see there).
    """

    name = "portal"
    label = "site"
    verbose_name = "Site"

    def ready(self) -> None:
        """Hand the staged rollouts' gate the decision log's count of 0-node calls (the
        policies app may not import the extender; the project may)."""
        from policies.rollouts import register_zero_node_counter

        register_zero_node_counter(zero_node_calls)


def zero_node_calls(policy: str, since: datetime) -> int:
    """Calls of the decision log since ``since`` that chose nodes for a pod ``policy`` selected
    and left it none."""
    from decisions.models import Decision

    return Decision.objects.filter(
        created_at__gte=since,
        verb__in=("filter", "schedule"),
        nodes_in__gt=0,
        nodes_out=0,
        policy_set__versions__has_key=policy,
    ).count()


class PortalAdminConfig(admin_apps.AdminConfig):
    """Django's admin with the portal's site (``portal.sites.PortalAdminSite``) as the default."""

    default = False  # named in INSTALLED_APPS; the portal's own app is PortalConfig
    default_site = "portal.sites.PortalAdminSite"

    def ready(self) -> None:
        super().ready()  # autodiscovers every app's admin module
        from django.contrib import admin
        from rest_framework.authtoken.models import TokenProxy

        # DRF's own token admin would show keys in clear; the portal's tokens are hashed
        # (core/tokens.py; core/admin.py's ApiTokenAdmin lists them).
        if admin.site.is_registered(TokenProxy):
            admin.site.unregister(TokenProxy)
