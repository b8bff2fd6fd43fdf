"""Run several processes in the foreground as one service (used by ``make run``).

Usage: ``supervise.py NAME=COMMAND [NAME=COMMAND ...]`` (each COMMAND is split like a shell
would). Every output line is prefixed with its process name. SIGINT or SIGTERM stops them all.
A process that exits on its own is restarted, the others left running: after a short delay that
doubles each time it dies again soon after starting (``SUPERVISE_BACKOFF_SECONDS``, default 1),
capped (``SUPERVISE_BACKOFF_MAX_SECONDS``, default 60), and reset once a run lasted
``SUPERVISE_STABLE_SECONDS`` (default 60). Each exit and restart is logged. Standard library
only, so it runs before anything else is installed. docs/operations.md ("Running for days").

One thread, no helper threads: children are forked from a single-threaded process (forking
while other threads hold locks can deadlock the child), and their output is read with a
selector in the same loop that watches them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

STOP_TIMEOUT_SECONDS = 20.0
PR_SET_PDEATHSIG = 1

# Loaded here, not in the forked child, where only the bare call should run.
_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def _env_seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def _die_with_parent() -> None:
    """In the child before exec: on Linux, get SIGTERM if the supervisor itself is killed."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def say(message: str) -> None:
    sys.stdout.write(f"{'run':<8} | {message}\n")
    sys.stdout.flush()


@dataclass
class Child:
    name: str
    command: str
    prefix: bytes
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    quick_deaths: int = 0
    restarts: int = 0
    pending: bytes = field(default=b"")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class Supervisor:
    def __init__(self, specs: list[tuple[str, str]]) -> None:
        width = max(8, *(len(name) for name, _ in specs))
        self.children = [Child(n, c, f"{n:<{width}} | ".encode()) for n, c in specs]
        self.selector = selectors.DefaultSelector()
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.backoff = _env_seconds("SUPERVISE_BACKOFF_SECONDS", 1.0)
        self.backoff_max = _env_seconds("SUPERVISE_BACKOFF_MAX_SECONDS", 60.0)
        self.stable = _env_seconds("SUPERVISE_STABLE_SECONDS", 60.0)
        self.stop_requested = False

    def start(self, child: Child) -> None:
        # Each child leads its own process group: a terminal's Ctrl-C reaches only this
        # supervisor, which then stops every child (and their own children) exactly once.
        proc = subprocess.Popen(
            shlex.split(child.command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        self.selector.register(proc.stdout, selectors.EVENT_READ, child)
        child.proc, child.started_at, child.restart_at = proc, time.monotonic(), None
        say(f"started {child.name} (pid {proc.pid}): {child.command}")

    def pump(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            child: Child = key.data
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                self.selector.unregister(key.fileobj)
                self.flush(child)
                continue
            lines = (child.pending + data).split(b"\n")
            child.pending = lines.pop()
            self.write(child, lines)

    def flush(self, child: Child) -> None:
        if child.pending:
            self.write(child, [child.pending])
            child.pending = b""

    def write(self, child: Child, lines: list[bytes]) -> None:
        out = sys.stdout.buffer
        for line in lines:
            out.write(child.prefix + line + b"\n")
        out.flush()

    def drain(self, child: Child) -> None:
        """The rest of an exited child's output, then its pipe closed."""
        proc = child.proc
        assert proc is not None
        assert proc.stdout is not None
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(proc.stdout)
        # Non-blocking: a grandchild that left its group may still hold the pipe open.
        chunks = [child.pending]
        with contextlib.suppress(OSError):
            while chunk := os.read(proc.stdout.fileno(), 65536):
                chunks.append(chunk)
        lines = b"".join(chunks).split(b"\n")
        child.pending = lines.pop()
        self.write(child, lines)
        self.flush(child)
        proc.stdout.close()

    def exited(self, child: Child, now: float) -> None:
        proc = child.proc
        assert proc is not None
        # What it left behind (gunicorn or Celery workers) goes with it before the next start.
        _kill_group(proc.pid)
        self.drain(child)
        lasted = now - child.started_at
        child.quick_deaths = 0 if lasted >= self.stable else child.quick_deaths + 1
        delay = min(self.backoff_max, self.backoff * (2 ** max(0, child.quick_deaths - 1)))
        child.restart_at = now + delay
        child.proc = None
        status = proc.returncode
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        say(f"{child.name} {how} after {lasted:.1f}s; restarting in {delay:.0f}s")
        if delay >= self.backoff_max and child.quick_deaths > 1:
            say(
                f"{child.name} keeps exiting within {self.stable:.0f}s of starting "
                f"({child.quick_deaths} times in a row); restarting it every "
                f"{self.backoff_max:.0f}s until it stays up"
            )

    def run(self) -> int:
        for child in self.children:
            try:
                self.start(child)
            except OSError as exc:
                say(f"cannot start {child.name}: {exc}")
                self.stop_all()
                return 1
        while not self.stop_requested:
            now = time.monotonic()
            for child in self.children:
                if child.proc is not None and child.proc.poll() is not None:
                    self.exited(child, now)
                elif (
                    child.proc is None and child.restart_at is not None and now >= child.restart_at
                ):
                    child.restarts += 1
                    try:
                        self.start(child)
                    except OSError as exc:
                        say(f"cannot restart {child.name}: {exc}")
                        child.started_at = now
                        child.proc = None
                        child.quick_deaths += 1
                        child.restart_at = now + self.backoff_max
                        continue
                    say(f"restarted {child.name} (restart {child.restarts})")
            self.pump(0.2)
        say("stopping all processes")
        self.stop_all()
        say("all processes stopped")
        return 0

    def stop_all(self) -> None:
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in running:
            assert child.proc is not None
            # Only the leader: gunicorn and Celery stop their own workers gracefully.
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for child in self.children:
            proc = child.proc
            if proc is None:
                continue
            while proc.poll() is None and time.monotonic() < deadline:
                self.pump(0.1)
            if proc.poll() is None:
                say(f"{child.name} did not stop within {STOP_TIMEOUT_SECONDS:.0f}s; killing it")
                _kill_group(proc.pid)
                proc.wait()
            # Whatever the leader left behind in its group goes with it.
            _kill_group(proc.pid)
            self.drain(child)


def main(argv: list[str]) -> int:
    specs = [arg.split("=", 1) for arg in argv]
    if not specs or any(len(spec) != 2 or not spec[0] for spec in specs):
        print(__doc__, file=sys.stderr)
        return 2
    supervisor = Supervisor([(name, command) for name, command in specs])

    def request_stop(signum: int, _frame: object) -> None:
        supervisor.stop_requested = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
