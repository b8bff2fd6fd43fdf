"""Fixtures every test gets."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_snapshot_dir(settings, tmp_path: Path) -> None:
    """Each test keeps extender snapshots in its own directory: a snapshot written by one test
    must not be served, as "the last one on disk", by the next."""
    settings.EXTENDER_SNAPSHOT_DIR = tmp_path / "extender"


@pytest.fixture(autouse=True)
def _no_snapshot_from_another_test():
    """The extender's holder and the portal's remembered snapshot start empty: revisions repeat
    across tests (each test's transaction is rolled back), so a snapshot kept from one test could
    pass for the next's."""
    from decisions import dimensions, partitions
    from extender.holder import holder
    from policies.compile import forget
    from policies.pod_verdicts import forget_verdicts
    from replay.service import forget_samples

    holder.snapshot = None
    forget()
    forget_verdicts()
    forget_samples()  # the editor's replay sample, read from another test's decision log
    # The decision log's interned ids and known partitions go with each test's rollback.
    dimensions.forget()
    partitions.forget()
    yield
    holder.snapshot = None
    forget()
    forget_verdicts()
