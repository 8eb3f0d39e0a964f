"""The daemon's scheduler (gitrag.daemon.jobs) on a real apscheduler AsyncIOScheduler: an
interval job that outlasts its interval is skipped by design, and that says nothing in the
daemon's log (it came every 0.5 s from the work-tree warm-up)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

import gitrag.daemon.jobs  # noqa: F401 - installs the filter on apscheduler's logger


def test_an_overlapping_interval_job_is_skipped_without_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []

    async def slow() -> None:
        runs.append(1)
        await asyncio.sleep(0.4)

    async def main() -> None:
        scheduler = AsyncIOScheduler(timezone=UTC)
        scheduler.add_job(slow, "interval", seconds=0.05, coalesce=True, max_instances=1)
        scheduler.start()
        await asyncio.sleep(0.6)
        scheduler.shutdown(wait=False)

    with caplog.at_level(logging.DEBUG, logger="apscheduler"):
        asyncio.run(main())
    assert runs  # it ran, and later ticks found it running
    assert not [r for r in caplog.records if "maximum number of running instances" in r.getMessage()]
    # other apscheduler warnings still pass
    logging.getLogger("apscheduler.scheduler").warning("Run time of job %s was missed", "x")
    assert any("was missed" in r.getMessage() for r in caplog.records)
