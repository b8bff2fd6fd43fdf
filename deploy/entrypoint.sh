#!/bin/sh
# The image's entrypoint: optional start-up steps, then the process the container runs
# ("$@": gunicorn by default, or any portal command). Like netbox-docker's:
#   PORTAL_MIGRATE=true              apply migrations first, retrying while the database is
#                                    not reachable yet (up to PORTAL_DB_WAIT_SECONDS, default 60)
#   PORTAL_ADMIN_PASSWORD_FILE=path  create the admin account (PORTAL_ADMIN_USERNAME, default
#   or PORTAL_ADMIN_PASSWORD=...     `admin`) or reset its password from a mounted Secret
# Both are idempotent: every replica may run them at every start.
set -eu
cd "$(dirname "$0")/.."

if [ "${PORTAL_MIGRATE:-false}" = "true" ]; then
    waited=0
    limit="${PORTAL_DB_WAIT_SECONDS:-60}"
    until python manage.py migrate --no-input; do
        if [ "$waited" -ge "$limit" ]; then
            echo "entrypoint: migrations failed for ${limit}s; giving up" >&2
            exit 1
        fi
        echo "entrypoint: migrations failed; retrying in 2s" >&2
        sleep 2
        waited=$((waited + 2))
    done
fi

if [ -n "${PORTAL_ADMIN_PASSWORD_FILE:-}" ] || [ -n "${PORTAL_ADMIN_PASSWORD:-}" ]; then
    python manage.py ensure_admin
fi

exec "$@"
