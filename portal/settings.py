"""Portal settings: every value comes from the environment, with defaults that run anywhere.

Embedded defaults (SQLite under ``var/``, kombu's filesystem broker, a local-memory cache) let a
fresh clone run without any server; production points ``DATABASE_URL``, ``REDIS_URL`` and
``CELERY_BROKER_URL`` at PostgreSQL and Redis. ``DEBUG`` is off unless asked for, and with it off
the process refuses to start without ``SECRET_KEY``.
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from django_guid.integrations import CeleryIntegration

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (or DEBUG=true for local development); "
            "`make run` generates one under var/."
        )
    SECRET_KEY = "insecure-development-key-do-not-use-in-production"

HOST = os.environ.get("HOST", "127.0.0.1")
PORT = env_int("PORT", 8000)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
# In Kubernetes the pod's own address (downward API): kubelet's probes and Prometheus reach a
# pod by it, and the web port's probes and metrics honour ALLOWED_HOSTS like every page.
if os.environ.get("POD_IP", "").strip():
    ALLOWED_HOSTS.append(os.environ["POD_IP"].strip())
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "portal.apps.PortalAdminConfig",  # django.contrib.admin with the portal's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "axes",
    "django_guid",
    "core",
    "portal",
    "inventory",
    "policies",
    "changes",
    "resources",
    # The decision log (app label "extender", its tables' label) and the kube-scheduler runtime
    # (app label "extender_runtime"): decisions/apps.py, extender/apps.py.
    "decisions",
    "extender",
    "console",
    "scheduler",
    "replay",
]

MIDDLEWARE = [
    # First: every later log record of the request carries its id (core.logs).
    "django_guid.middleware.guid_middleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF, which parses form bodies: oversized and anonymous multipart bodies are
    # refused before anything reads them (core.middleware).
    "core.middleware.RequestBodyGuard",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Inside SessionMiddleware: it marks a used session for saving, at most once a minute.
    "core.middleware.SessionIdleTimeout",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A save held for approvals: a message and a redirect to its proposal (changes).
    "changes.middleware.HeldChangeRedirect",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: it locks out a username and address after repeated failed logins.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "portal" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The worker, beat and web processes share the file: wait for locks instead of failing.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    )
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # A stalled database must fail a request fast instead of holding a worker: bounded connect,
    # statements, and a TCP timeout for connections whose packets are silently dropped.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "connect_timeout": env_int("DB_CONNECT_TIMEOUT", 5),
            "options": f"-c statement_timeout={env_int('DB_STATEMENT_TIMEOUT_MS', 30000)}",
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": env_int("DB_TCP_USER_TIMEOUT_MS", 15000),
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache and change notifications ---------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "portal",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Channel on which writers announce a new snapshot revision (only used with REDIS_URL).
PORTAL_CHANGES_CHANNEL = os.environ.get("PORTAL_CHANGES_CHANNEL", "portal:changes")

# --- Replay (docs/replay.md) ------------------------------------------------------------------
# The default window, the bound a full replay refuses past (distinct pod shapes and candidate
# sets), the editor's sample (the newest calls of the window) and how long it is kept decoded,
# how long a queued replay's result is kept, and the node labels that name a node pool.
REPLAY_DEFAULT_DAYS = env_int("REPLAY_DEFAULT_DAYS", 7)
REPLAY_MAX_SHAPES = env_int("REPLAY_MAX_SHAPES", 1_000_000)
REPLAY_SAMPLE_CALLS = env_int("REPLAY_SAMPLE_CALLS", 10_000)
REPLAY_SAMPLE_TTL = env_int("REPLAY_SAMPLE_TTL", 60)
REPLAY_RESULT_TTL = env_int("REPLAY_RESULT_TTL", 3600)
REPLAY_POOL_LABELS = [
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/instance-type",
]

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_DIR = VAR_DIR / "celery"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        # Broadcast (pidbox) exchange tables; kombu's default is ./control in the working folder.
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
    }
    # kombu's filesystem transport with atomic writes (portal/broker.py): no torn message.
    CELERY_BROKER_TRANSPORT = "portal.broker:Transport"
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# The one periodic schedule of the project (beat: ``manage.py run_beat``). Each task's queued
# copy expires before the next is due, so a stalled worker does not pile them up.
CELERY_BEAT_SCHEDULE = {
    "inventory.dispatch_due_syncs": {
        "task": "inventory.dispatch_due_syncs",
        "schedule": 10.0,
        "options": {"expires": 10.0},
    },
    # Staged rollouts: advance, hold or roll back (policies/rollouts.py). Time windows do not
    # wait for the beat: the extender switches at the boundary itself.
    "policies.step_rollouts": {
        "task": "policies.step_rollouts",
        "schedule": 60.0,
        "options": {"expires": 55.0},
    },
    "extender.purge_decisions": {
        "task": "extender.purge_decisions",
        "schedule": crontab(minute=17),
        "options": {"expires": 3000},
    },
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Metrics of the processes without a web port ---------------------------------------------
# The Celery worker and the node watcher serve Prometheus metrics on these ports (0: off; the
# web and the extender serve /metrics on their own ports). docs/operations.md.
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0)
WATCHER_METRICS_PORT = env_int("WATCHER_METRICS_PORT", 0)

# --- Auth, API ------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "admin:login"
# Argon2id at OWASP's baseline cost (core/hashers.py; docs/security.md, "What a login costs").
# The PBKDF2 hashers stay listed so passwords stored under the earlier default keep verifying;
# each is re-hashed with Argon2id at its user's next successful login.
PASSWORD_HASHERS = [
    "core.hashers.PortalArgon2idHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.tokens.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "core.api.errors.api_exception_handler",
    # Writes per user (core.api.throttles); reads are not limited.
    "DEFAULT_THROTTLE_CLASSES": ["core.api.throttles.WriteRateThrottle"],
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
# API writes per user (DRF's N/second|minute|hour|day; empty: unlimited). 429 past it. The
# default lets a script create a few hundred objects one by one; docs/security.md.
API_WRITE_RATE = os.environ.get("API_WRITE_RATE", "1200/minute").strip()
SPECTACULAR_SETTINGS = {
    "TITLE": "Scheduling Policy Portal API",
    "DESCRIPTION": "Node labels, filter rules and weights for kube-scheduler's extender.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc assets ship in drf-spectacular-sidecar: no CDN, works air-gapped.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "NodeOperatorEnum": "policies.api.serializers.NODE_OPERATORS",
        "PodOperatorEnum": "policies.api.serializers.POD_OPERATORS",
        "RuleOperatorEnum": "policies.models.OPERATOR_CHOICES",
        "FilterKindEnum": "policies.models.FILTER_KIND_CHOICES",
        "WeightKindEnum": "policies.models.WEIGHT_KIND_CHOICES",
        "PolicySetKindEnum": ["PolicySet"],
        "ObjectKindEnum": ["cluster", "policy", "label_assignment", "expectation"],
    },
    # Writes held for approvals answer 202 (changes.api.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "changes.api.schema.add_held_responses",
    ],
}

# --- Extender -------------------------------------------------------------------------------
# kube-scheduler sends whole node objects in full mode: ~13 KB a node, ~64 MB for 5,000.
EXTENDER_MAX_BODY_BYTES = env_int("EXTENDER_MAX_BODY_BYTES", 128 * 1024 * 1024)
# How often each process checks the snapshot revision when no change is announced (seconds): the
# safety net; commits are announced by a signal file, Redis or PostgreSQL NOTIFY.
EXTENDER_POLL_SECONDS = float(os.environ.get("EXTENDER_POLL_SECONDS", "5.0"))
# A snapshot older than this, while the revision cannot be checked, makes /readyz fail.
EXTENDER_STALE_SECONDS = float(os.environ.get("EXTENDER_STALE_SECONDS", "30"))
DECISION_LOG_RETENTION_DAYS = env_int("DECISION_LOG_RETENTION_DAYS", 7)
DECISION_LOG_QUEUE_SIZE = env_int("DECISION_LOG_QUEUE_SIZE", 10000)
# The decision log's writer (docs/operations.md, "Decision log: shedding"): "child" (serve_extender
# starts it as a child process; other processes write in a thread), "socket" (a writer run
# elsewhere with `manage.py decision_writer` listens at DECISION_LOG_SOCKET) or "thread". Above
# half of a queue, clean passes are kept 1 in DECISION_LOG_SAMPLE_EVERY.
DECISION_LOG_WRITER = os.environ.get("DECISION_LOG_WRITER", "child").strip().lower()
DECISION_LOG_SOCKET = Path(
    os.environ.get("DECISION_LOG_SOCKET", VAR_DIR / "extender" / "decision-log.sock")
)
DECISION_LOG_SAMPLE_EVERY = env_int("DECISION_LOG_SAMPLE_EVERY", 10)
# How long the writer holds a batch while the database is unreachable before its records are
# counted lost (decision_log_dropped_total{reason="write_error"}); the extender never waits.
DECISION_LOG_OUTAGE_SECONDS = float(os.environ.get("DECISION_LOG_OUTAGE_SECONDS", "30"))
# Each queue (every extender process's, the writer's) is also bounded in bytes: a record of a
# 5,000-node call carries 5,000 candidate names (~200 KB).
DECISION_LOG_QUEUE_BYTES = env_int("DECISION_LOG_QUEUE_BYTES", 256 * 1024 * 1024)
# Background threads of each extender process: the snapshot refresher and the decision-log
# writer. Tests switch them off unless they exercise them.
EXTENDER_REFRESH_ENABLED = env_bool("EXTENDER_REFRESH_ENABLED", True)
# Where each extender process keeps the sources of its last snapshot, to restart without the
# database.
EXTENDER_SNAPSHOT_DIR = Path(os.environ.get("EXTENDER_SNAPSHOT_DIR", VAR_DIR / "extender"))
# The extender's own server (`manage.py serve_extender`): address, request threads, how long a
# client may take to send a request, and connections at once (in all and per client address).
EXTENDER_BIND = os.environ.get("EXTENDER_BIND", "127.0.0.1:8001")
EXTENDER_THREADS = env_int("EXTENDER_THREADS", 8)
EXTENDER_READ_TIMEOUT_SECONDS = env_int("EXTENDER_READ_TIMEOUT_SECONDS", 5)
EXTENDER_MAX_CONNECTIONS = env_int("EXTENDER_MAX_CONNECTIONS", 500)
EXTENDER_MAX_CONNECTIONS_PER_CLIENT = env_int("EXTENDER_MAX_CONNECTIONS_PER_CLIENT", 32)
# A sync that would remove more than this share of a cluster's nodes (always: all of them) is
# held for an operator's confirmation instead of applied (inventory.guard).
INVENTORY_MAX_REMOVAL_SHARE = float(os.environ.get("INVENTORY_MAX_REMOVAL_SHARE", "0.5"))
# Evictions people ask for (the Violations page): at most this many a minute per cluster
# (0: no cap), this many seconds apart (inventory.evict).
EVICTIONS_PER_MINUTE = env_int("EVICTIONS_PER_MINUTE", 30)
EVICTION_INTERVAL_SECONDS = float(os.environ.get("EVICTION_INTERVAL_SECONDS", "0.2"))
# The namespace the portal runs in (PORTAL_NAMESPACE, else the ServiceAccount's, else the
# manifests' policy-portal) and the namespaces no eviction reaches and whose pods a policy
# warns about before it is saved (comma-separated; docs/operations.md, "Evictions").
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
PORTAL_NAMESPACE = (
    os.environ.get("PORTAL_NAMESPACE", "").strip()
    or (_SA_NAMESPACE.read_text().strip() if _SA_NAMESPACE.is_file() else "")
    or "policy-portal"
)
EVICTION_PROTECTED_NAMESPACES = env_list(
    "EVICTION_PROTECTED_NAMESPACES", f"kube-system,kube-public,kube-node-lease,{PORTAL_NAMESPACE}"
)
# The violations of a cluster are judged at most once per policy change and pod inventory
# change; while pods keep changing, a result this many seconds old is reused (pages, API).
POD_VERDICT_MAX_AGE_SECONDS = float(os.environ.get("POD_VERDICT_MAX_AGE_SECONDS", "5"))
# HTTPS for the extender's own server: its certificate and key, and the CA that signs the
# client certificates it then requires (kube-scheduler's tlsConfig certFile/keyFile),
# optionally narrowed to certificates with one of these comma-separated common or DNS names,
# and checked against that CA's revocation list (PEM). Changed files are read again.
EXTENDER_TLS_CERT_FILE = os.environ.get("EXTENDER_TLS_CERT_FILE", "").strip()
EXTENDER_TLS_KEY_FILE = os.environ.get("EXTENDER_TLS_KEY_FILE", "").strip()
EXTENDER_TLS_CLIENT_CA_FILE = os.environ.get("EXTENDER_TLS_CLIENT_CA_FILE", "").strip()
EXTENDER_TLS_CLIENT_NAMES = os.environ.get("EXTENDER_TLS_CLIENT_NAMES", "").strip()
EXTENDER_TLS_CRL_FILE = os.environ.get("EXTENDER_TLS_CRL_FILE", "").strip()
# Who may call the extender (comma-separated CIDRs; empty: anyone who reaches the port) and
# who may call its bind verb (empty: the same list). docs/threat-model.md.
EXTENDER_ALLOWED_CIDRS = os.environ.get("EXTENDER_ALLOWED_CIDRS", "")
EXTENDER_BIND_ALLOWED_CIDRS = os.environ.get("EXTENDER_BIND_ALLOWED_CIDRS", "")
DECISION_LOG_ENABLED = env_bool("DECISION_LOG_ENABLED", True)
# The admission webhook (docs/admission.md) answers on the extender's server; an AdmissionReview
# carries one pod, which etcd stores only up to 1.5 MiB, so 2 MiB fits every real review. A pod
# whose patch would be longer than these is refused with a message (extender.admission.handler).
ADMISSION_MAX_BODY_BYTES = env_int("ADMISSION_MAX_BODY_BYTES", 2 * 1024 * 1024)
ADMISSION_MAX_PATCH_OPS = env_int("ADMISSION_MAX_PATCH_OPS", 2000)
ADMISSION_MAX_PATCH_BYTES = env_int("ADMISSION_MAX_PATCH_BYTES", 512 * 1024)
# The web port serves kube-scheduler's verbs only when this turns the compatibility route on
# (then under the same allowlists; never with client certificates required). portal/wsgi.py.
EXTENDER_ON_WEB_PORT = env_bool("EXTENDER_ON_WEB_PORT", False)
# Who may read the web port's /metrics, and its /healthz and /readyz (comma-separated CIDRs;
# empty: anyone who reaches the port and names an allowed host).
WEB_METRICS_ALLOWED_CIDRS = os.environ.get("WEB_METRICS_ALLOWED_CIDRS", "")
WEB_PROBES_ALLOWED_CIDRS = os.environ.get("WEB_PROBES_ALLOWED_CIDRS", "")
# /metrics and /readyz's details (web and extender ports) to anonymous callers; off: only with
# "Authorization: Bearer $METRICS_TOKEN" or from WEB_METRICS_ALLOWED_CIDRS (extender.health).
# The production overlay turns it off.
METRICS_ANONYMOUS = env_bool("METRICS_ANONYMOUS", True)
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()
# /api/schema/ and /api/docs/ to anonymous callers; off: a session or an API token is needed.
API_DOCS_ANONYMOUS = env_bool("API_DOCS_ANONYMOUS", True)

# --- Cluster credentials (inventory.credentials, docs/operations.md) -------------------------
# A cluster names its kubeconfig (or token/CA directory) in this operator-provisioned
# directory (in Kubernetes a mounted Secret); nothing outside it is ever read.
KUBECONFIG_DIR = Path(os.environ.get("KUBECONFIG_DIR", VAR_DIR / "kubeconfigs"))
# Commands a kubeconfig's exec plugin (or an auth-provider's cmd-path) may run, and the
# auth-providers it may use, e.g. "aws,gke-gcloud-auth-plugin,kubelogin" (empty: none).
KUBECONFIG_ALLOWED_COMMANDS = env_list("KUBECONFIG_ALLOWED_COMMANDS", "")
KUBECONFIG_ALLOWED_AUTH_PROVIDERS = env_list("KUBECONFIG_ALLOWED_AUTH_PROVIDERS", "")
# Environment variables an allowed exec plugin may get: set by a kubeconfig's exec.env, or
# passed from the portal's own environment (besides PATH, HOME, LANG, LC_ALL, TZ, TMPDIR),
# e.g. "AWS_PROFILE,AWS_REGION,AWS_ROLE_ARN,AWS_WEB_IDENTITY_TOKEN_FILE". Empty: none.
KUBECONFIG_EXEC_ENV = env_list("KUBECONFIG_EXEC_ENV", "")
# Local operators only: an empty kubeconfig name means this process's own KUBECONFIG or
# ~/.kube/config (commands still checked).
KUBECONFIG_DEFAULT_LOOKUP = env_bool("KUBECONFIG_DEFAULT_LOOKUP", False)

# Label keys "push assigned labels" may write to a cluster's nodes: an allowlist of prefixes
# (each with its subdomains; "/" for keys without a prefix). Empty: nothing is pushed.
# kubernetes.io, k8s.io and their subdomains are refused even when listed (inventory.push).
LABEL_PUSH_ALLOWED_PREFIXES = env_list("LABEL_PUSH_ALLOWED_PREFIXES", "")

# --- Generated scheduler configuration ------------------------------------------------------
# The URL kube-scheduler reaches the extender at (its urlPrefix): the extender's own when it is
# served apart from the portal, else the portal's. Unset: the host of the request, with a warning.
EXTENDER_EXTERNAL_URL = os.environ.get("EXTENDER_EXTERNAL_URL", "").strip()
PORTAL_EXTERNAL_URL = os.environ.get("PORTAL_EXTERNAL_URL", "").strip()

# --- i18n, static ---------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEBUG
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# The outer bound on any request body Django reads (a 5,000-node NodeList import); the API's
# parsers hold every other document to core.limits.MAX_DOCUMENT_BYTES (4 MiB).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 128 * 1024 * 1024)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10000
# Uploads larger than FILE_UPLOAD_MAX_MEMORY_SIZE are spooled here, a directory of the portal's
# own (0700), never the system's temporary directory, where other processes and paths the
# portal reads could find them (docs/threat-model.md, "Uploads").
FILE_UPLOAD_TEMP_DIR = str(VAR_DIR / "uploads")
# A directory that cannot be made is reported by Django's system check (files.E001).
with contextlib.suppress(OSError):
    os.makedirs(FILE_UPLOAD_TEMP_DIR, mode=0o700, exist_ok=True)

# --- Security -------------------------------------------------------------------------------
# TLS is terminated in front of the portal in production; these follow that deployment.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
# A session ends after this many idle minutes: it lives SESSION_COOKIE_AGE from its last save,
# and core.middleware.SessionIdleTimeout saves a session in use once a minute at most.
SESSION_IDLE_TIMEOUT_MINUTES = env_int("SESSION_IDLE_TIMEOUT_MINUTES", 480)
SESSION_COOKIE_AGE = SESSION_IDLE_TIMEOUT_MINUTES * 60
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# --- Content Security Policy (django-csp), login throttling (django-axes) -----------------------
# Scripts and style sheets only from the portal's own static files: no inline script anywhere,
# no <style> element, no CDN (docs/security.md). The one exception, chosen: style *attributes*
# (style-src-attr), which the admin's inline formsets and Swagger UI set and which cannot run
# code. Images also as data: URIs (the admin's icons).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-elem": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# After this many failed logins for one username from one address, that pair is locked out for
# AXES_COOLOFF_MINUTES (the right password included).
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_IPWARE_PROXY_COUNT = env_int("AXES_PROXY_COUNT", 0)
AXES_VERBOSE = False

# Request ids (django-guid): taken from X-Request-ID when it is a UUID, else made; returned in
# the response's X-Request-ID and handed to the Celery tasks a request enqueues.
DJANGO_GUID = {
    "GUID_HEADER_NAME": "X-Request-ID",
    "VALIDATE_GUID": True,
    # Tasks log with the id of the request that enqueued them (a new one for beat's), and the
    # worker logs through LOGGING below.
    "INTEGRATIONS": [CeleryIntegration(use_django_logging=True, log_parent=False)],
}
# LOG_FORMAT: `plain` (default) or `json` (one object per line, for log collectors).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain").strip().lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING_CONFIG = "core.logs.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "core.logs.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own default handlers would print a second, plain copy of its records.
        "django": {"handlers": [], "propagate": True},
        "py.warnings": {"handlers": [], "propagate": True},
        "django.db.backends": {"level": "WARNING"},
        "django_guid": {"level": "WARNING"},
    },
}

# The portal's own scheduler (manage.py run_scheduler; docs/own-scheduler.md).
# Score = SCHEDULER_POLICY_WEIGHT x the policies' score (0..10, x10 as kube-scheduler scales an
# extender's) + SCHEDULER_LEAST_ALLOCATED_WEIGHT x NodeResourcesLeastAllocated (0..100).
SCHEDULER_POLICY_WEIGHT = env_int("SCHEDULER_POLICY_WEIGHT", 1)
SCHEDULER_LEAST_ALLOCATED_WEIGHT = env_int("SCHEDULER_LEAST_ALLOCATED_WEIGHT", 1)
# kube-scheduler's percentageOfNodesToScore (0: its adaptive default).
SCHEDULER_PERCENTAGE_OF_NODES_TO_SCORE = env_int("SCHEDULER_PERCENTAGE_OF_NODES_TO_SCORE", 0)
# Backoff of a pod that did not fit: initial and maximum seconds (kube-scheduler's defaults).
SCHEDULER_BACKOFF_INITIAL_SECONDS = float(os.environ.get("SCHEDULER_BACKOFF_INITIAL_SECONDS", "1"))
SCHEDULER_BACKOFF_MAX_SECONDS = float(os.environ.get("SCHEDULER_BACKOFF_MAX_SECONDS", "10"))
SCHEDULER_METRICS_PORT = env_int("SCHEDULER_METRICS_PORT", 0)
# The own scheduler places nothing for a cluster until the pod inventory has reported in this
# long after the scheduler started (a leader, or a cluster given its scheduler name): every
# watch event sent before it started has then been applied (docs/own-scheduler.md).
SCHEDULER_VIEW_MARGIN_SECONDS = float(os.environ.get("SCHEDULER_VIEW_MARGIN_SECONDS", "1"))

# Managed resources (docs/managed-resources.md): how long a reservation made at bind counts
# while the pod inventory has not seen the pod bound, and how often each extender process
# checks whether its table of free amounts is out of date (a few cheap reads, never per call).
MANAGED_RESERVATION_SECONDS = float(os.environ.get("MANAGED_RESERVATION_SECONDS", "120"))
EXTENDER_MANAGED_POLL_SECONDS = float(os.environ.get("EXTENDER_MANAGED_POLL_SECONDS", "0.5"))
# Scheduler names besides default-scheduler and portal-scheduler whose pods the bind verb binds
# (a second scheduler generated with another scheduler_name); any other is refused.
EXTENDER_SCHEDULER_NAMES = env_list("EXTENDER_SCHEDULER_NAMES", "")
