"""Settings for Celery and watcher subprocesses started by the inventory tests.

The test settings plus a private default queue, so a test's worker never takes tasks meant
for another test run sharing the same Redis.
"""

import os

from tests.settings import *  # noqa: F403

CELERY_TASK_DEFAULT_QUEUE = os.environ.get("PORTAL_TEST_QUEUE", "celery")
