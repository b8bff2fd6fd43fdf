"""Run several processes in the foreground as one service (used by ``make run``).

Usage: ``supervise.py NAME=COMMAND [NAME=COMMAND ...]`` (each COMMAND is split like a shell
would). Every output line is prefixed with its process name. SIGINT or SIGTERM stops them all;
if one exits on its own, the others are stopped and the exit status is non-zero. Standard library
only, so it runs before anything else is installed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import IO

STOP_TIMEOUT_SECONDS = 20.0
PR_SET_PDEATHSIG = 1
_print_lock = threading.Lock()


# Loaded here, not in the forked child, where only the bare call should run.
_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In the child before exec: on Linux, get SIGTERM if the supervisor itself is killed."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _pump(name: str, width: int, stream: IO[bytes]) -> None:
    prefix = f"{name:<{width}} | ".encode()
    out = sys.stdout.buffer
    for line in iter(stream.readline, b""):
        with _print_lock:
            out.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
            out.flush()


def say(message: str) -> None:
    with _print_lock:
        sys.stdout.write(f"{'run':<8} | {message}\n")
        sys.stdout.flush()


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    specs = [arg.split("=", 1) for arg in argv]
    if not specs or any(len(spec) != 2 or not spec[0] for spec in specs):
        print(__doc__, file=sys.stderr)
        return 2
    width = max(8, *(len(name) for name, _ in specs))
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stop_requested.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs: dict[str, subprocess.Popen] = {}
    pumps = []
    for name, command in specs:
        # Each child leads its own process group: a terminal's Ctrl-C reaches only this
        # supervisor, which then stops every child (and their own children) exactly once.
        try:
            procs[name] = subprocess.Popen(
                shlex.split(command),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            say(f"cannot start {name}: {exc}")
            for started in procs.values():
                _kill_group(started)
            return 1
    # Output threads start only after every fork: forking while threads run can deadlock.
    for name, command in specs:
        proc = procs[name]
        pump = threading.Thread(target=_pump, args=(name, width, proc.stdout), daemon=True)
        pump.start()
        pumps.append(pump)
        say(f"started {name} (pid {proc.pid}): {command}")

    failed: str | None = None
    while not stop_requested.is_set() and failed is None:
        for name, proc in procs.items():
            if proc.poll() is not None:
                failed = name
                break
        else:
            stop_requested.wait(0.2)

    if failed is not None:
        say(f"{failed} exited with status {procs[failed].returncode}; stopping the others")
    else:
        say("stopping all processes")
    for proc in procs.values():
        if proc.poll() is None:
            # Only the leader: gunicorn and Celery stop their own workers gracefully.
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop within {STOP_TIMEOUT_SECONDS:.0f}s; killing it")
            _kill_group(proc)
            proc.wait()
    for pump in pumps:
        pump.join(timeout=2)
    say("all processes stopped")
    if failed is not None:
        code = procs[failed].returncode
        # Exiting on its own is a failure even with status 0; a signal gives a negative code.
        return code if code > 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
