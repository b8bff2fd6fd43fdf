from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    """The base package's app: audit log, snapshot revision, API tokens, roles.

    Its label stays ``portal`` — the label these models were created under — so existing
    databases keep their tables, migration history, content types and permissions.
    """

    name = "core"
    label = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from core.middleware import stamp_login
        from core.roles import sync_roles_after_migrate

        # A new session starts its idle clock (core.middleware.SessionIdleTimeout).
        user_logged_in.connect(stamp_login, dispatch_uid="portal-session-idle-stamp")

        # After every app's post_migrate, not only this one's: auth creates each app's
        # permissions in that app's turn, and the apps after this one (inventory, policies,
        # extender) would otherwise have none granted when the signal comes from a flush
        # (transactional tests) rather than from migrations. Idempotent and additive.
        post_migrate.connect(sync_roles_after_migrate, dispatch_uid="portal-sync-roles")
