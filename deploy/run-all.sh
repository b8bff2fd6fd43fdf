#!/usr/bin/env bash
# `make run`: prepare the local state (var/, secret key, database, static files, demo data, the
# admin account), then run the web (gunicorn: admin and API), the extender's own server (its
# own port, so people's traffic never occupies kube-scheduler's), a Celery worker, Celery beat
# and the watcher (node and pod inventories, requeue after a change) in the foreground. One that
# exits is restarted with backoff, the others left running (deploy/supervise.py); Ctrl-C stops
# them all.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
# The other ports follow PORT (8000: 8001, 8002, 8003, 8004), so a second `make run` with another
# PORT (and its own PORTAL_VAR_DIR) does not collide with the first.
EXTENDER_PORT="${EXTENDER_PORT:-$((PORT + 1))}"
WEB_CONCURRENCY="${WEB_CONCURRENCY:-2}"
WATCHER_METRICS_PORT="${WATCHER_METRICS_PORT:-$((PORT + 2))}"
WORKER_METRICS_PORT="${WORKER_METRICS_PORT:-$((PORT + 3))}"
SCHEDULER_METRICS_PORT="${SCHEDULER_METRICS_PORT:-$((PORT + 4))}"
case "$HOST" in
    0.0.0.0 | "::" | "[::]") shown_host=127.0.0.1 ;;
    *) shown_host="$HOST" ;;
esac
# EXTENDER_BIND and EXTENDER_EXTERNAL_URL too: the generated scheduler configuration points
# kube-scheduler at this extender.
EXTENDER_BIND="${HOST}:${EXTENDER_PORT}"
EXTENDER_EXTERNAL_URL="${EXTENDER_EXTERNAL_URL:-http://${shown_host}:${EXTENDER_PORT}/}"
export HOST PORT EXTENDER_PORT EXTENDER_BIND EXTENDER_EXTERNAL_URL WEB_CONCURRENCY \
    WATCHER_METRICS_PORT WORKER_METRICS_PORT SCHEDULER_METRICS_PORT

# shellcheck source=deploy/local-env.sh
. deploy/local-env.sh
VAR="${PORTAL_VAR_DIR:-var}"

step() { printf '==> %s\n' "$*"; }

step "migrate"
$PY manage.py migrate --no-input
step "collectstatic"
$PY manage.py collectstatic --no-input -v0
step "seed_demo"
$PY manage.py seed_demo
step "ensure_admin"
admin_message="$($PY manage.py ensure_admin)"
echo "$admin_message"

processes=(
    "web=.venv/bin/gunicorn portal.wsgi:application -c deploy/gunicorn.conf.py --bind ${HOST}:${PORT} --workers ${WEB_CONCURRENCY} --access-logfile -"
    "extender=$PY manage.py serve_extender --bind ${HOST}:${EXTENDER_PORT}"
    # The pool processes' task metrics reach the worker's metrics port through this folder.
    "worker=env PROMETHEUS_MULTIPROC_DIR=${VAR}/prometheus-worker .venv/bin/celery -A portal worker -l info --concurrency 2"
    "beat=$PY manage.py run_beat --schedule ${VAR}/celerybeat-schedule"
)
processes+=("watcher=$PY manage.py watch_nodes")
# The own scheduler: places the pods naming a cluster's scheduler_name (idle when none does).
processes+=("scheduler=$PY manage.py run_scheduler")

base="http://${shown_host}:${PORT}"
extender="http://${shown_host}:${EXTENDER_PORT}"
cat <<BANNER

  Scheduling Policy Portal
    Admin      ${base}/admin/   (Pending pods: ${base}/admin/pending/)
    API docs   ${base}/api/docs/
    Extender   ${extender}/extender/   (kube-scheduler's own port; probes ${extender}/readyz)
    Metrics    ${base}/metrics  ${extender}/metrics
               watcher :${WATCHER_METRICS_PORT}/metrics  worker :${WORKER_METRICS_PORT}/metrics
               scheduler :${SCHEDULER_METRICS_PORT}/metrics
    Login      ${admin_message}
  A process that exits is restarted (with backoff); Ctrl-C stops them all.

BANNER

exec $PY deploy/supervise.py "${processes[@]}"
