"""Test settings: the real settings module with a throwaway SECRET_KEY.

Everything else (DATABASE_URL, REDIS_URL) comes from the environment exactly as in production,
so CI runs the suite against real PostgreSQL and Redis.
"""

import os

os.environ.setdefault("SECRET_KEY", "insecure-test-only-key")
os.environ.setdefault(
    "PORTAL_VAR_DIR", os.path.join(os.path.dirname(__file__), "..", "var", "test")
)

from portal.settings import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
