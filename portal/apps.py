from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        from portal.roles import sync_roles_after_migrate

        # Runs after auth has created the permissions of every installed model.
        post_migrate.connect(sync_roles_after_migrate, sender=self)
