"""Settings come from the environment and refuse unsafe or malformed values.

Each case starts a fresh interpreter, because settings are read once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dj_database_url
import pytest
from django.db import connection

REPO = Path(__file__).resolve().parent.parent
# Variables the settings read; the parent test process may have any of them set.
SETTINGS_ENV = (
    "SECRET_KEY",
    "DEBUG",
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "ALLOWED_HOSTS",
    "HOST",
    "PORT",
    "STATIC_ROOT",
    "PORTAL_VAR_DIR",
    "DJANGO_SETTINGS_MODULE",
)
SHOW_SETTINGS = """
import json, django
django.setup()
from django.conf import settings
from portal.celery import app
print(json.dumps({
    "engine": settings.DATABASES["default"]["ENGINE"],
    "name": str(settings.DATABASES["default"]["NAME"]),
    "host": settings.DATABASES["default"].get("HOST", ""),
    "port": settings.DATABASES["default"].get("PORT", ""),
    "cache": settings.CACHES["default"]["BACKEND"],
    "broker": app.conf.broker_url,
    "debug": settings.DEBUG,
}))
"""


def start(tmp_path: Path, code: str = "import django; django.setup()", **env: str):
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_ENV}
    clean.update(DJANGO_SETTINGS_MODULE="portal.settings", PORTAL_VAR_DIR=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_production_refuses_to_start_without_secret_key(tmp_path: Path) -> None:
    result = start(tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_empty_debug_counts_as_production(tmp_path: Path) -> None:
    result = start(tmp_path, DEBUG="")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_starts_without_secret_key(tmp_path: Path) -> None:
    result = start(tmp_path, SHOW_SETTINGS, DEBUG="true")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["debug"] is True


def test_production_starts_with_secret_key(tmp_path: Path) -> None:
    result = start(tmp_path, SHOW_SETTINGS, SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["debug"] is False


@pytest.mark.parametrize("value", ["maybe", "2", "enabled"])
def test_malformed_debug_is_rejected(tmp_path: Path, value: str) -> None:
    result = start(tmp_path, SECRET_KEY="x" * 50, DEBUG=value)
    assert result.returncode != 0
    assert f"DEBUG must be a boolean (true/false), got {value!r}" in result.stderr


def test_malformed_port_is_rejected(tmp_path: Path) -> None:
    result = start(tmp_path, SECRET_KEY="x" * 50, PORT="eighty")
    assert result.returncode != 0
    assert "PORT must be an integer" in result.stderr


def test_embedded_defaults_need_no_server(tmp_path: Path) -> None:
    result = start(tmp_path, SHOW_SETTINGS, SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["engine"] == "django.db.backends.sqlite3"
    assert shown["name"] == str(tmp_path / "portal.sqlite3")
    assert shown["cache"] == "django.core.cache.backends.locmem.LocMemCache"
    assert shown["broker"] == "filesystem://"
    # The Celery app creates the filesystem broker's folders, so a fresh checkout just works.
    assert (tmp_path / "celery" / "queue").is_dir()
    assert (tmp_path / "celery" / "processed").is_dir()


def test_database_and_redis_urls_select_postgresql_and_redis(tmp_path: Path) -> None:
    result = start(
        tmp_path,
        SHOW_SETTINGS,
        SECRET_KEY="x" * 50,
        DATABASE_URL="postgres://portal:secret@db.example.com:5433/portal",
        REDIS_URL="redis://cache.example.com:6379/2",
        CELERY_BROKER_URL="redis://cache.example.com:6379/0",
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["engine"] == "django.db.backends.postgresql"
    assert (shown["name"], shown["host"], shown["port"]) == ("portal", "db.example.com", 5433)
    assert shown["cache"] == "django.core.cache.backends.redis.RedisCache"
    assert shown["broker"] == "redis://cache.example.com:6379/0"
    assert not (tmp_path / "celery").exists()


@pytest.mark.django_db
def test_suite_runs_on_the_database_that_database_url_names() -> None:
    url = os.environ.get("DATABASE_URL", "")
    expected = dj_database_url.parse(url)["ENGINE"] if url else "django.db.backends.sqlite3"
    with connection.cursor() as cursor:
        # A query proves the connection is real, not just configured.
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    # Shown with `pytest -s`; .ci/run runs this test that way to prove where the suite ran.
    print(f"\ndatabase under test: {connection.vendor} ({connection.settings_dict['ENGINE']})")
    assert connection.settings_dict["ENGINE"] == expected


def test_filesystem_broker_keeps_its_broadcast_tables_under_the_var_folder(tmp_path: Path) -> None:
    # kombu's filesystem transport puts its exchange tables in ./control unless told otherwise;
    # a broadcast (what `celery inspect` and the worker's pidbox use) would create it wherever
    # the process runs, the repository included.
    var, cwd = tmp_path / "var", tmp_path / "cwd"
    cwd.mkdir()
    code = (
        "import django; django.setup()\n"
        "from portal.celery import app\n"
        "app.control.broadcast('ping', reply=False)\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_ENV}
    clean.update(
        DJANGO_SETTINGS_MODULE="portal.settings",
        PORTAL_VAR_DIR=str(var),
        SECRET_KEY="x" * 50,
        PYTHONPATH=str(REPO),
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=clean, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert not (cwd / "control").exists()
    assert (var / "celery" / "control").is_dir()
