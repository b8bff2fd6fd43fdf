"""Two approvals racing in two processes on PostgreSQL: the change is applied exactly once.

Each trial is a proposal on its own policy; two reviewer processes wait for the same start
signal and approve at once. With two approvals needed both are counted and the later one (in
the order the proposal's row lock gives) applies the change; with one needed, one applies and
the other is told the proposal is closed. Either way the policy gains exactly one version.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from changes.models import Proposal, ProposalStatus
from changes.services import proposal_hold
from core.errors import ChangeHeld
from policies import services as policy_services
from policies.models import Policy, PolicyVersion
from tests.changes.conftest import set_rule
from tests.factories import make_policy

POSTGRES = "postgres" in os.environ.get("DATABASE_URL", "")
TRIALS = 6
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.skipif(
        not POSTGRES, reason="racing processes need PostgreSQL: set DATABASE_URL=postgres://..."
    ),
]


def hold_mode_switch(author, name: str) -> Proposal:
    policy = make_policy(name)
    try:
        policy_services.policy_set_mode(actor=author, policy=policy, mode="dry-run")
    except ChangeHeld as held:
        return Proposal.objects.get(pk=held.hold().pk)
    raise AssertionError("the write was not held")


def test_racing_approvals_apply_once(editors, tmp_path):
    author, first, second = editors
    proposals = []
    for trial in range(TRIALS):
        set_rule(2 if trial % 2 == 0 else 1)  # the rule when each proposal is made
        proposals.append(hold_mode_switch(author, f"race-{trial}"))
    assert proposal_hold  # the proposals above were stored by the hold
    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    pks = [str(p.pk) for p in proposals]
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.changes.race_worker", user.username, str(tmp_path), *pks],
            cwd=REPO,
            env=env,
        )
        for user in (first, second)
    ]
    try:
        for pk in pks:
            (tmp_path / f"go-{pk}").touch()
            deadline = time.monotonic() + 120
            outcomes = [tmp_path / f"{u.username}-{pk}" for u in (first, second)]
            while not all(o.exists() for o in outcomes):
                assert time.monotonic() < deadline, f"no outcome for proposal {pk}"
                assert all(w.poll() in (None, 0) for w in workers), "a worker died"
                time.sleep(0.01)
        for worker in workers:
            assert worker.wait(timeout=60) == 0
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    for trial, proposal in enumerate(proposals):
        proposal.refresh_from_db()
        texts = sorted(
            (tmp_path / f"{u.username}-{proposal.pk}").read_text() for u in (first, second)
        )
        policy = Policy.objects.get(name=f"race-{trial}")
        assert proposal.status == ProposalStatus.APPLIED, (trial, texts)
        assert policy.mode == "dry-run"
        assert policy.version == 2, (trial, texts)
        assert PolicyVersion.objects.filter(policy=policy).count() == 2
        if proposal.required_approvals == 2:
            assert texts == ["ok applied", "ok pending"], texts
            assert proposal.approvals.count() == 2
        else:
            assert texts == ["ok applied", "refused ProposalClosed"], texts
            assert proposal.approvals.count() == 1
