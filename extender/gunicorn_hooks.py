"""gunicorn server hooks for the extender: multiprocess metrics and snapshot warm-up.

``deploy/gunicorn.conf.py`` calls :func:`use_prometheus_multiprocess_dir` (in the master,
before any worker exists, so every worker inherits the variable before it imports
prometheus_client) and exposes :func:`on_starting`, :func:`child_exit` and
:func:`post_worker_init` as its hooks. This module imports nothing heavy at load time: the
master never needs Django.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# How long a new worker waits for its first snapshot before taking requests anyway (it then
# reports not ready until the snapshot arrives).
WARMUP_SECONDS = 10.0


def default_prometheus_dir() -> Path:
    """``<var dir>/prometheus``, next to the rest of the portal's runtime state."""
    var_dir = os.environ.get("PORTAL_VAR_DIR") or Path(__file__).resolve().parent.parent / "var"
    return Path(var_dir) / "prometheus"


def use_prometheus_multiprocess_dir() -> str:
    """Point this server's workers at a metrics directory unless one was configured."""
    return os.environ.setdefault(MULTIPROC_ENV, str(default_prometheus_dir()))


def on_starting(server: Any) -> None:
    """gunicorn hook, master, once: start from an empty metrics directory."""
    path = os.environ.get(MULTIPROC_ENV)
    if path:
        from core.metrics import clear_prometheus_dir

        clear_prometheus_dir(path)


def child_exit(server: Any, worker: Any) -> None:
    """gunicorn hook, master: drop a dead worker's live gauges from the merged metrics."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def post_worker_init(worker: Any) -> None:
    """gunicorn hook, worker: load the snapshot and the URL configuration before the first
    request arrives."""
    from extender import refresh

    load_url_configuration()
    refresh.wait_until_loaded(WARMUP_SECONDS)


def load_url_configuration() -> None:
    """Import the URL configuration and every view module it names. Django does it lazily on
    a process's first request — about 0.2 s of a quiet machine's time (bench/login.py), paid
    by whoever logs in first after a start; a worker pays it before taking requests."""
    from django.urls import get_resolver

    get_resolver().reverse_dict  # noqa: B018 (populating the resolver imports every view)
