from __future__ import annotations

from django.apps import AppConfig


class ResourcesConfig(AppConfig):
    name = "resources"
    label = "resources"
    verbose_name = "Managed resources"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from inventory import signals
        from resources import ledger, services

        signals.cluster_deleting.connect(
            services.delete_cluster_resources, dispatch_uid="resources.cluster_deleting"
        )
        signals.pods_written.connect(ledger.confirm, dispatch_uid="resources.pods_written")
