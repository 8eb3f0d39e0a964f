"""Debouncing: when the one run a burst of events earns is due.

A burst is the events for one key (a repository) until its run fires. Each event moves the
run to ``quiet_s`` after it, but never past ``max_delay_s`` after the burst's first event:
a steady stream (a rebase of 200 commits, a script committing in a loop) is still indexed
within ``max_delay_s``. Pure and clock-injected: the scheduler that runs the job is the
caller's (:meth:`gitrag.daemon.jobs.Jobs.debounce`).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Debouncer:
    """Delays for bursts of events, per key. ``quiet_s``, ``max_delay_s``: seconds;
    ``clock``: monotonic seconds (``time.monotonic``; a test passes its own)."""

    def __init__(self, quiet_s: float, max_delay_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet_s, self.max_delay_s, self._clock = quiet_s, max_delay_s, clock
        self._first: dict[str, float] = {}  # key -> clock time of its burst's first event

    def delay(self, key: str) -> float:
        """An event for ``key`` now: seconds until its burst's run (>= 0), ``quiet_s`` from now
        capped at ``max_delay_s`` after the burst's first event. The caller (re)arms one
        job per key at that time, replacing the one armed before."""
        now = self._clock()
        first = self._first.setdefault(key, now)
        return max(0.0, min(self.quiet_s, first + self.max_delay_s - now))

    def fired(self, key: str) -> None:
        """``key``'s run has started: its next event starts a new burst."""
        self._first.pop(key, None)
