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
