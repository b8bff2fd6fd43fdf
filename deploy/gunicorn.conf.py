"""gunicorn settings for the portal's web process (admin, API, extender webhook, metrics).

Command-line flags win over these, so ``make run`` and the container image share this file.
"""

import os
import sys
from pathlib import Path

# gunicorn loads this file by path; the hooks module lives in the repository next to it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from extender import gunicorn_hooks

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "sync"
# Full-mode extender requests carry every node object (tens of MB for big clusters).
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 10
keepalive = 5
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
# The request id the portal returned (X-Request-ID, core.logs) ends every access line, so it
# joins the application's records of the same request.
access_log_format = (
    '%(h)s "%(r)s" %(s)s %(B)s %(M)sms "%(f)s" "%(a)s" request_id=%({x-request-id}o)s'
)
if os.environ.get("LOG_FORMAT", "plain").strip().lower() == "json":
    # One JSON object per line, as the portal's own records (settings.LOGGING).
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
                "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            }
        },
        "handlers": {
            "json": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stdout",
            }
        },
        # The workers' root logger is the portal's (settings.LOGGING, JSON as well).
        "root": {"level": "WARNING", "handlers": []},
        "loggers": {
            "gunicorn.error": {"handlers": ["json"], "level": loglevel.upper(), "propagate": False},
            "gunicorn.access": {"handlers": ["json"], "level": "INFO", "propagate": False},
        },
    }
# TLS ends at the proxy in front; trust its X-Forwarded-* headers only from where it runs.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# No runtime control socket: it would live in the user's home, shared by every instance there.
control_socket_disable = True

# Every worker keeps its own snapshot and metrics: metrics are merged through a shared
# directory, set here in the master so each worker inherits it before importing the client.
gunicorn_hooks.use_prometheus_multiprocess_dir()
on_starting = gunicorn_hooks.on_starting
child_exit = gunicorn_hooks.child_exit
post_worker_init = gunicorn_hooks.post_worker_init
