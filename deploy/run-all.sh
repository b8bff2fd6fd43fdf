#!/usr/bin/env bash
# `make run`: prepare the local state (var/, secret key, database, static files, demo data, the
# admin account), then run gunicorn, a Celery worker, Celery beat and, when the command exists,
# the node watcher in the foreground. Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
export HOST PORT

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
    "web=.venv/bin/gunicorn portal.wsgi:application -c deploy/gunicorn.conf.py --bind ${HOST}:${PORT} --workers 2 --access-logfile -"
    "worker=.venv/bin/celery -A portal worker -l info --concurrency 2"
    "beat=.venv/bin/celery -A portal beat -l info -s ${VAR}/celerybeat-schedule"
)
if $PY manage.py help watch_nodes >/dev/null 2>&1; then
    processes+=("watcher=$PY manage.py watch_nodes")
fi

case "$HOST" in
    0.0.0.0 | "::" | "[::]") shown_host=127.0.0.1 ;;
    *) shown_host="$HOST" ;;
esac
base="http://${shown_host}:${PORT}"
cat <<BANNER

  Scheduling Policy Portal
    Admin      ${base}/admin/
    API docs   ${base}/api/docs/
    Extender   ${base}/extender/
    Metrics    ${base}/metrics
    Login      ${admin_message}
  Ctrl-C stops web, worker, beat$( [ ${#processes[@]} -gt 3 ] && echo " and watcher").

BANNER

exec $PY deploy/supervise.py "${processes[@]}"
