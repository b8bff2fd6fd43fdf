"""A scratch PostgreSQL database next to ``DATABASE_URL``'s, for the benchmarks that need
PostgreSQL (the decision log's writer, its bytes per decision, the replay): made before a run,
dropped after it."""

from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit, urlunsplit


def database_urls(script: str, suffix: str) -> tuple[str, str, str]:
    """(the bench database's URL, the server's maintenance URL, the bench database's name:
    ``DATABASE_URL``'s name + ``suffix``); exits naming ``script`` without PostgreSQL."""
    parts = urlsplit(os.environ.get("DATABASE_URL", ""))
    if parts.scheme not in ("postgres", "postgresql"):
        sys.exit(f"{script} needs DATABASE_URL=postgres://... (PostgreSQL)")
    name = parts.path.lstrip("/") + suffix
    return (
        urlunsplit(parts._replace(path="/" + name)),
        urlunsplit(parts._replace(path="/postgres")),
        name,
    )


def recreate(admin_url: str, name: str, *, drop_only: bool = False) -> None:
    """Drop the database ``name`` (connections to it closed) and, unless ``drop_only``, make it
    again, empty."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')
