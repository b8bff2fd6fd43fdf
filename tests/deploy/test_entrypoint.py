"""The image's entrypoint (deploy/entrypoint.sh): migrations and the admin account from a
mounted Secret before the container's process, idempotent across restarts.

Run on a throw-away SQLite database in a temporary var folder, as a container would run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
CHECK_ADMIN = (
    "import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'portal.settings')\n"
    "import django; django.setup()\n"
    "from django.contrib.auth import get_user_model\n"
    "from django.db.migrations.executor import MigrationExecutor\n"
    "from django.db import connection\n"
    "pending = MigrationExecutor(connection).migration_plan(\n"
    "    MigrationExecutor(connection).loader.graph.leaf_nodes())\n"
    "print('pending', len(pending))\n"
    "if not pending:\n"
    "    users = get_user_model().objects\n"
    "    print('users', users.count(), users.filter(is_superuser=True).count())\n"
    "    password = open(%r).read().strip()\n"
    "    print('login', users.get(username='root').check_password(password))\n"
)


def run(tmp_path: Path, password_file: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "PORTAL_ADMIN_PASSWORD", "DJANGO_SETTINGS_MODULE"}
    }
    (tmp_path / "var").mkdir(exist_ok=True)  # the image's volume
    clean.update(
        DEBUG="true",
        PORTAL_VAR_DIR=str(tmp_path / "var"),
        PATH=f"{Path(sys.executable).parent}:{clean.get('PATH', '')}",
        **env,
    )
    return subprocess.run(
        [str(ENTRYPOINT), "python", "-c", CHECK_ADMIN % str(password_file)],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_migrates_and_creates_the_admin_from_a_secret_file_then_runs_the_command(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "admin-password"
    secret.write_text("a-long-secret-from-kubernetes\n")
    env = {
        "PORTAL_MIGRATE": "true",
        "PORTAL_ADMIN_PASSWORD_FILE": str(secret),
        "PORTAL_ADMIN_USERNAME": "root",
    }
    first = run(tmp_path, secret, **env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-3:] == ["pending 0", "users 1 1", "login True"]
    assert "a-long-secret" not in first.stdout + first.stderr
    # A restart (or another replica) does it again: nothing new, the Secret's password holds.
    secret.write_text("rotated-secret-password")
    again = run(tmp_path, secret, **env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-3:] == ["pending 0", "users 1 1", "login True"]


def test_without_settings_it_only_runs_the_command(tmp_path: Path) -> None:
    secret = tmp_path / "unused"
    secret.write_text("x")
    result = run(tmp_path, secret)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("pending ")
    assert int(result.stdout.splitlines()[-1].split()[1]) > 0


def test_an_unreadable_secret_stops_the_container(tmp_path: Path) -> None:
    missing = tmp_path / "not-mounted"
    result = run(tmp_path, missing, PORTAL_ADMIN_PASSWORD_FILE=str(missing))
    assert result.returncode != 0
    assert "PORTAL_ADMIN_PASSWORD_FILE: cannot read" in result.stderr
