"""Metrics of the Celery worker: tasks by outcome and their durations, served on
``WORKER_METRICS_PORT``.

The worker's pool processes run the tasks, so their samples reach the port the main process
serves only through prometheus_client's multiprocess mode: the worker runs with
``PROMETHEUS_MULTIPROC_DIR`` set (``make run``, the image's manifests do). Without it the port
still serves the build info and a warning is logged.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery.signals import task_postrun, task_prerun, worker_init, worker_process_shutdown
from django.conf import settings
from prometheus_client import REGISTRY, Counter, Histogram

from core.metrics import clear_prometheus_dir, multiprocess_registry, serve_metrics

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
if os.environ.get(MULTIPROC_ENV):
    # Metrics created at import write their files there at once: the folder must exist.
    os.makedirs(os.environ[MULTIPROC_ENV], exist_ok=True)
TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

TASKS = Counter(
    "portal_celery_tasks",
    "Celery tasks run by this worker, by task name and outcome (success, failure, retry).",
    ["task", "outcome"],
)
TASK_DURATION = Histogram(
    "portal_celery_task_duration_seconds",
    "Run time of Celery tasks by task name.",
    ["task"],
    buckets=TASK_BUCKETS,
)

_started: dict[str, float] = {}


@task_prerun.connect
def _task_started(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id:
        _started[task_id] = time.monotonic()


@task_postrun.connect
def _task_finished(
    task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    name = getattr(task, "name", None) or "unknown"
    TASKS.labels(name, (state or "unknown").lower()).inc()
    started = _started.pop(task_id, None) if task_id else None
    if started is not None:
        TASK_DURATION.labels(name).observe(time.monotonic() - started)


@worker_init.connect
def _serve_worker_metrics(**kwargs: Any) -> None:
    port = settings.WORKER_METRICS_PORT
    if port <= 0:
        return
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        # The main process, before the pool forks: drop a previous run's files.
        clear_prometheus_dir(directory, keep_pid=os.getpid())
        registry = multiprocess_registry()
    else:
        logger.warning(
            "WORKER_METRICS_PORT is set without %s: the pool processes' task metrics are not "
            "exported",
            MULTIPROC_ENV,
        )
        registry = REGISTRY
    serve_metrics(port, registry=registry)
    logger.info("worker metrics on :%d/metrics", port)


@worker_process_shutdown.connect
def _forget_pool_process(pid: int | None = None, **kwargs: Any) -> None:
    if pid and os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
