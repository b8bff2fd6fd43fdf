# Sourced (POSIX sh) by `make run`, `make migrate` and `make seed`: the local state directory
# and a SECRET_KEY generated once and kept in it, so sessions survive restarts.
# An exported SECRET_KEY or PORTAL_VAR_DIR wins over these defaults.

portal_var="${PORTAL_VAR_DIR:-var}"
# kombu's filesystem transport needs its folders to exist before any process connects.
mkdir -p "$portal_var/celery/queue" "$portal_var/celery/processed"
# Where clusters name their kubeconfigs (KUBECONFIG_DIR; the demo cluster is static).
mkdir -p "$portal_var/kubeconfigs"

if [ -z "${SECRET_KEY:-}" ]; then
    if [ ! -s "$portal_var/secret_key" ]; then
        (
            umask 077
            .venv/bin/python -c "import secrets; print(secrets.token_urlsafe(50))" \
                > "$portal_var/secret_key"
        )
    fi
    chmod 600 "$portal_var/secret_key"
    SECRET_KEY="$(cat "$portal_var/secret_key")"
    export SECRET_KEY
fi
