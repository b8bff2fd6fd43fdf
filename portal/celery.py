"""The Celery application; tasks live in each app's ``tasks.py``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Task counters and the worker's metrics port hang on Celery's signals (connected on import).
import core.task_metrics  # noqa: E402, F401


@app.on_after_configure.connect
def _create_filesystem_broker_folders(sender: Celery, **kwargs: object) -> None:
    # kombu's filesystem transport fails on a missing folder; a fresh checkout has none yet.
    if not str(sender.conf.broker_url or "").startswith("filesystem://"):
        return
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)
