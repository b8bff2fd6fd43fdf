"""One process approving proposals for the race test (tests/changes/test_concurrency.py).

Usage: ``python -m tests.changes.race_worker <username> <directory> <pk> [<pk> ...]``. For each
proposal in turn it waits until ``<directory>/go-<pk>`` exists (the parent creates it for both
workers at once), approves, and writes ``<directory>/<username>-<pk>`` with the outcome.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from changes.errors import ProposalError
    from changes.models import Proposal
    from changes.services import proposal_approve

    username, directory, *pks = sys.argv[1:]
    folder = Path(directory)
    user = get_user_model().objects.get(username=username)
    connection.ensure_connection()  # connected before the start signal, not after
    for pk in pks:
        go = folder / f"go-{pk}"
        deadline = time.monotonic() + 120
        while not go.exists():
            if time.monotonic() > deadline:
                sys.exit(f"no start signal for proposal {pk}")
            time.sleep(0.001)
        try:
            result = proposal_approve(actor=user, proposal=Proposal.objects.get(pk=pk))
            outcome = f"ok {result.status}"
        except ProposalError as exc:
            outcome = f"refused {type(exc).__name__}"
        except Exception as exc:  # what a lost race would raise (a stale write, a duplicate)
            outcome = f"error {type(exc).__name__}: {exc}"
        (folder / f"{username}-{pk}").write_text(outcome)


if __name__ == "__main__":
    main()
