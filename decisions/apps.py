"""The decision log's Django app.

Its label is ``extender``, not ``decisions``: the log was first written inside the ``extender``
package, and a label names the tables (``extender_decision``, ...), the migration history
(``django_migrations.app = 'extender'``), the content types and the permissions
(``extender.view_decision``). Keeping the label lets existing databases, API tokens' roles and
the migrations carry on unchanged after the move; the kube-scheduler runtime left in the
``extender`` package is therefore labelled ``extender_runtime`` (``extender/apps.py``).
"""

from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _register_sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """SQLite has no GIN index: node search calls this Python function per row instead
    (``decisions.queries.mentioning``)."""
    if connection.vendor != "sqlite":
        return
    from decisions.queries import sqlite_mentions

    connection.connection.create_function(
        "decision_mentions", 4, sqlite_mentions, deterministic=True
    )


class DecisionsConfig(AppConfig):
    name = "decisions"
    label = "extender"  # the tables' and migrations' label: see the module's docstring
    verbose_name = "Extender"  # the admin index's heading for the log, as before the move

    def ready(self) -> None:
        connection_created.connect(_register_sqlite_functions, dispatch_uid="extender-sqlite")
