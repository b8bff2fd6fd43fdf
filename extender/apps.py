from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _register_sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """SQLite has no GIN index: node search calls this Python function per row instead
    (``extender.decisionlog.queries.mentioning``)."""
    if connection.vendor != "sqlite":
        return
    from extender.decisionlog.queries import sqlite_mentions

    connection.connection.create_function(
        "decision_mentions", 4, sqlite_mentions, deterministic=True
    )


class ExtenderConfig(AppConfig):
    name = "extender"
    verbose_name = "Extender"

    def ready(self) -> None:
        connection_created.connect(_register_sqlite_functions, dispatch_uid="extender-sqlite")
