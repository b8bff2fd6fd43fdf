"""Test settings: the real settings module with a throwaway SECRET_KEY.

Everything else (DATABASE_URL, REDIS_URL) comes from the environment exactly as in production,
so CI runs the suite against real PostgreSQL and Redis.
"""

import os

os.environ.setdefault("SECRET_KEY", "insecure-test-only-key")
os.environ.setdefault(
    "PORTAL_VAR_DIR", os.path.join(os.path.dirname(__file__), "..", "var", "test")
)

from portal.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
# The extender's background threads (snapshot refresher, decision-log writer) would race each
# test's own database setup and snapshots; the tests that exercise them switch them on.
EXTENDER_REFRESH_ENABLED = False
DECISION_LOG_ENABLED = False
# Suites write far faster than people do; tests/core/api/test_throttles.py sets its own rate.
API_WRITE_RATE = "100000/minute"
# A test that changes pods reads the violations again at once; production reuses a result up to
# 5 s old while pods keep changing (tests/inventory/api/test_pods.py checks the reuse on its own).
POD_VERDICT_MAX_AGE_SECONDS = 0
# WhiteNoise serves collected files; tests never collect them, so give it an empty directory.
os.makedirs(STATIC_ROOT, exist_ok=True)  # noqa: F405
