"""A gunicorn worker is ready for its first request before it takes one
(extender/gunicorn_hooks.py): the URL configuration and its views are imported by the hook,
not by the first person to log in after a start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import sys
import django
django.setup()
from extender import gunicorn_hooks, refresh
refresh.wait_until_loaded = lambda seconds: True  # no snapshot to wait for here
views = ("portal.urls", "console.dashboard", "console.pods")
assert not any(name in sys.modules for name in views), "imported before the hook"
gunicorn_hooks.post_worker_init(None)
print(all(name in sys.modules for name in views))
"""


def test_the_worker_hook_imports_the_url_configuration_and_views(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PORTAL_VAR_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path}/portal.sqlite3",
        DJANGO_SETTINGS_MODULE="portal.settings",
        DEBUG="true",
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True"
