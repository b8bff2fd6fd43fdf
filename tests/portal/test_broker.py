"""The embedded broker (portal/broker.py): no torn message, no dead worker on a bad file."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from kombu import Connection
from kombu.transport import filesystem

from portal import broker

ROOT = Path(__file__).resolve().parents[2]


def folders(tmp_path: Path) -> dict[str, str]:
    queue = tmp_path / "queue"
    processed = tmp_path / "processed"
    for folder in (queue, processed, tmp_path / "control"):
        folder.mkdir(exist_ok=True)
    return {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "processed_folder": str(processed),
        "control_folder": str(tmp_path / "control"),
        "store_processed": False,
    }


@pytest.fixture
def channel_of(tmp_path: Path) -> Iterator[Callable[[type], Any]]:
    connections: list[Connection] = []

    def make(transport: type) -> Any:
        connection = Connection(
            "filesystem://", transport=transport, transport_options=folders(tmp_path)
        )
        connections.append(connection)
        return connection.default_channel

    yield make
    for connection in connections:
        connection.release()


class _WriterInterrupted:
    """A file whose writes stop half way while a consumer looks at the folder: the interleaving
    a worker polling every few milliseconds meets when beat writes at the same moment."""

    def __init__(self, handle: Any, consume: Callable[[], Any], seen: list) -> None:
        self.handle = handle
        self.consume = consume
        self.seen = seen

    def write(self, data: bytes) -> int:
        half = len(data) // 2
        self.handle.write(data[:half])
        self.handle.flush()
        try:
            self.seen.append(self.consume())
        except Empty:
            self.seen.append(None)
        except ValueError as exc:
            self.seen.append(exc)
        self.handle.write(data[half:])
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)

    def __enter__(self) -> _WriterInterrupted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


def interrupted_put(monkeypatch, module, channel, payload: dict) -> list:
    seen: list = []

    def opener(path: str, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = open(path, mode, *args, **kwargs)  # noqa: SIM115
        if "w" in mode:
            return _WriterInterrupted(handle, lambda: channel._get("tasks"), seen)
        return handle

    monkeypatch.setattr(module, "open", opener, raising=False)
    channel._put("tasks", payload)
    monkeypatch.undo()
    return seen


def message(n: int, body: str = "") -> dict:
    return {"body": body, "headers": {"n": n}, "properties": {"delivery_tag": f"tag-{n}"}}


PAYLOAD = message(0, "x" * 4000)


def test_kombu_own_transport_hands_out_a_torn_message(channel_of, monkeypatch):
    """The control: the same interleaving tears kombu's filesystem transport (the
    ``JSONDecodeError`` that stopped ``make run``), so the next test exercises the race."""
    channel = channel_of(filesystem.Transport)
    seen = interrupted_put(monkeypatch, filesystem, channel, PAYLOAD)
    assert len(seen) == 1
    assert isinstance(seen[0], ValueError)


def test_a_message_is_seen_whole_or_not_at_all(channel_of, monkeypatch):
    channel = channel_of(broker.Transport)
    seen = interrupted_put(monkeypatch, broker, channel, PAYLOAD)
    assert seen == [None]
    assert channel._get("tasks") == PAYLOAD
    with pytest.raises(Empty):
        channel._get("tasks")


def test_an_unreadable_file_is_set_aside_and_the_next_message_served(channel_of, tmp_path):
    channel = channel_of(broker.Transport)
    queue = tmp_path / "queue"
    (queue / "0_aaaa.tasks.msg").write_bytes(b'{"body": "half writ')
    (queue / "0_bbbb.tasks.msg").write_bytes(b"\xff\xfe not utf-8")
    (queue / "0_cccc.tasks.msg").write_text(json.dumps({"no": "properties"}))
    channel._put("tasks", message(1))
    assert channel._get("tasks") == message(1)
    aside = sorted(p.name for p in (tmp_path / "processed" / "unreadable").iterdir())
    assert aside == ["0_aaaa.tasks.msg", "0_bbbb.tasks.msg", "0_cccc.tasks.msg"]
    assert [p.name for p in queue.iterdir()] == []


def test_two_consumers_never_get_the_same_message(channel_of):
    first, second = channel_of(broker.Transport), channel_of(broker.Transport)
    for n in range(20):
        first._put("tasks", message(n))
    got = []
    for turn in range(40):
        with contextlib.suppress(Empty):
            got.append((first if turn % 2 else second)._get("tasks")["headers"]["n"])
    assert sorted(got) == list(range(20))


WORKER_APP = """
from celery import Celery
import json, os, sys
sys.path.insert(0, {root!r})
app = Celery("survivor")
app.conf.broker_url = "filesystem://"
app.conf.broker_transport = "portal.broker:Transport"
app.conf.broker_transport_options = {options!r}
app.conf.task_acks_late = True
app.conf.worker_prefetch_multiplier = 1
app.conf.broker_connection_retry_on_startup = True

@app.task(name="survivor.touch")
def touch(path):
    open(path, "w").write("ran")
"""


def test_a_worker_survives_bad_messages_and_runs_the_next_task(tmp_path):
    """A real worker on the embedded broker: a torn file, a JSON document that is no message
    and a message naming no known task are each skipped; the task sent after them runs."""
    options = folders(tmp_path)
    (tmp_path / "survivor_app.py").write_text(
        textwrap.dedent(WORKER_APP.format(root=str(ROOT), options=options))
    )
    queue = Path(options["data_folder_in"])
    (queue / "1_torn.celery.msg").write_bytes(b'{"body": "eyJh')
    (queue / "2_nomessage.celery.msg").write_text(json.dumps({"hello": "world"}))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    sys.path.insert(0, str(tmp_path))
    try:
        import survivor_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    survivor_app.app.send_task("no.such.task")
    marker = tmp_path / "ran"
    survivor_app.touch.delay(str(marker))
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "survivor_app", "worker", "--pool", "solo"),
            *("-l", "info", "--without-heartbeat", "--without-gossip", "--without-mingle"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        alive = worker.poll() is None
    finally:
        worker.send_signal(signal.SIGTERM)
        output = worker.communicate(timeout=30)[0].decode(errors="replace")
    assert marker.exists(), output
    assert alive, output
    assert sorted(p.name for p in (tmp_path / "processed" / "unreadable").iterdir()) == [
        "1_torn.celery.msg",
        "2_nomessage.celery.msg",
    ], output
