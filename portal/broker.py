"""The embedded default Celery broker: kombu's filesystem transport, made safe to run for days.

kombu's own transport writes a message straight under its final name while the consumer lists
the folder and reads whatever it finds, so a consumer can read a message half written (a torn
JSON document) and the worker then dies on ``JSONDecodeError``. This transport writes each
message under a temporary name the consumer never picks up and renames it into place
(``os.replace``, atomic on one file system), so a message is seen whole or not at all. A file
that still cannot be read as a message (left by an older version, or damaged on disk) is moved
into ``<processed_folder>/unreadable`` and logged instead of stopping the worker.
docs/operations.md ("Running for days").
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

# Temporary names start with a dot and end in ".part": kombu's consumer matches
# "<anything>.<queue>.msg" after the first dot, which a ".part" file never does.
_TEMPORARY_PREFIX = ".incoming-"
UNREADABLE_FOLDER = "unreadable"


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temporary = os.path.join(self.data_folder_out, f"{_TEMPORARY_PREFIX}{uuid.uuid4()}.part")
        try:
            with open(temporary, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
                handle.flush()
            os.replace(temporary, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.startswith(".") or name.partition(".")[2] != wanted:
                continue
            source = os.path.join(self.data_folder_in, name)
            # Claim the message by renaming it in its folder (one file system, so atomic): of two
            # consumers, only one rename succeeds.
            claimed = os.path.join(self.data_folder_in, f".claimed-{uuid.uuid4()}-{name}")
            try:
                os.replace(source, claimed)
            except OSError:
                continue
            try:
                with open(claimed, "rb") as handle:
                    payload = handle.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {claimed!r} from queue.") from exc
            try:
                message = loads(bytes_to_str(payload))
                # What the consumer does first with it: a JSON document that is no message
                # (no properties, no delivery tag) would stop the worker there.
                self.Message(message, channel=self)
            except Exception:  # any unreadable file is set aside, never raised
                self._set_aside(claimed, name)
                continue
            if self.store_processed:
                shutil.move(claimed, os.path.join(self.processed_folder, name))
            else:
                with contextlib.suppress(OSError):
                    os.remove(claimed)
            return message
        raise Empty()

    def _set_aside(self, claimed: str, name: str) -> None:
        folder = os.path.join(self.processed_folder or self.data_folder_in, UNREADABLE_FOLDER)
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            shutil.move(claimed, target)
        logger.error(
            "Celery broker: %s is not a readable message; moved to %s and skipped", name, target
        )


class Transport(filesystem.Transport):
    Channel = Channel
