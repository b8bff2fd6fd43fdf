"""Log records carry the request id; ``LOG_FORMAT=json`` writes one JSON object per line.

django-guid's middleware takes the id from the request's ``X-Request-ID`` header (an ingress
controller's, when it is a UUID) or makes one, returns it in the response's ``X-Request-ID``
and keeps it for the request's duration; its Celery integration hands it to the tasks the
request enqueues. :class:`RequestIdFilter` puts it on every record as ``request_id`` (``-``
outside a request). Python warnings are logged too (:func:`configure`), so with JSON every line
the process writes is an object. docs/operations.md, "Logs".
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

from django_guid.context import guid

NO_REQUEST = "-"


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = guid.get() or NO_REQUEST
        return True


def configure(config: dict[str, Any]) -> None:
    """``LOGGING_CONFIG``: Django's ``dictConfig``, plus Python warnings as log records."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
