"""The last snapshot sources on local disk, so a restarted process serves without the database.

After every successful build the process writes the sources document it built from
(``policies.engine.sources``) to ``<PORTAL_VAR_DIR>/extender/snapshot-sources.json``: a
temporary file in the same directory, flushed and ``os.replace``d, so a reader sees the old
file or the new one, never half of one. A process that starts while the database is
unreachable rebuilds its snapshot from this file (docs/adr/0005-extender-server.md).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings

logger = logging.getLogger(__name__)

FILE_NAME = "snapshot-sources.json"


def sources_path() -> Path:
    return Path(settings.EXTENDER_SNAPSHOT_DIR) / FILE_NAME


def save(document: dict[str, Any]) -> None:
    """Replace the file with ``document``; failures are logged, never raised (serving goes on)."""
    path = sources_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".sources-", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(orjson.dumps(document))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        logger.warning("could not keep the snapshot on disk at %s: %s", path, exc)


def load() -> dict[str, Any] | None:
    """The last saved document, or None when there is none (or it cannot be read)."""
    path = sources_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("could not read the snapshot on disk at %s: %s", path, exc)
        return None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        logger.warning("ignoring an unreadable snapshot file at %s", path)
        return None
    return document if isinstance(document, dict) else None
