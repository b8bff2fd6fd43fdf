"""Extender answer rate and latency during faults, written to bench/results/faults.md.

Runs the fault tests (tests/extender/test_extender_faults.py: real web and extender
processes on PostgreSQL through a TCP proxy) and collects the figures each one reports. Needs
``DATABASE_URL`` pointing at PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal .venv/bin/python bench/faults.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "faults.md"


def main() -> int:
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print("bench/faults.py needs DATABASE_URL pointing at PostgreSQL", file=sys.stderr)
        return 2
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as figures:
        env = {**os.environ, "FAULT_FIGURES": figures.name}
        test = "tests/extender/test_extender_faults.py"
        status = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            env=env,
            cwd=ROOT,
        )
        rows = [json.loads(line) for line in figures.read().splitlines() if line.strip()]
    lines = [
        "# Extender during faults",
        "",
        "kube-scheduler's `httpTimeout` is 2 s: a call counts as answered when it returns the same",
        "answer as before the fault within 2 s. Web: gunicorn, 2 workers; extender:",
        "`manage.py serve_extender` (8 threads); PostgreSQL through a TCP proxy the test controls;",
        "200 nodes in names mode. Produced by `bench/faults.py`.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}.",
        "",
        "| fault | calls | answered in time | rate | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['fault']} | {row['calls']} | {row['answered_in_time']} | "
            f"{row['answer_rate']:.2%} | {row['p50_ms']} | {row['p99_ms']} |"
        )
    RESULTS.write_text("\n".join(lines) + "\n")
    print(RESULTS.read_text())
    return status


if __name__ == "__main__":
    raise SystemExit(main())
