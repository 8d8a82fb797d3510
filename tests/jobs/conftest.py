"""The gated runner the fair-share, link-cancel and planned-ahead tests share: two workers, two jobs per user, a
fast cancel poll; every gate is released and the runner shut down after the test. A module that defines its own
``runner`` (test_jobs, test_faults, test_liveness) uses its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from planning.jobs import JobRunner, JobStore
from planning.jobs.runner import Cadence
from tests.jobs.test_fairshare import Gates


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture
def runner(tmp_path: Path, gates: Gates) -> Iterator[JobRunner]:
    r = JobRunner(JobStore(tmp_path / "jobs.sqlite"), max_workers=2, per_user=2,
                  cadence=Cadence(cancel_poll_interval=0.01))
    yield r
    for event in list(gates.release.values()):
        event.set()
    r.shutdown(wait=True, cancel=True)
    r.store.close()
