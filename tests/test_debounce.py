"""The debouncer: one run per burst, ``quiet_s`` after its last event, never past ``max_delay_s``."""

from __future__ import annotations

import pytest

from gitrag.daemon.debounce import Debouncer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_event_moves_the_run_to_quiet_s_after_it() -> None:
    clock = Clock()
    d = Debouncer(0.5, 5.0, clock)
    assert d.delay("repo") == pytest.approx(0.5)
    clock.now += 0.3
    assert d.delay("repo") == pytest.approx(0.5)  # re-armed: 0.5 s after this event, not the first


def test_a_steady_stream_runs_within_max_delay_of_its_first_event() -> None:
    clock = Clock()
    d = Debouncer(0.5, 2.0, clock)
    due = []
    for _ in range(5):  # an event every 0.4 s, each closer than quiet_s to the last
        due.append(clock.now + d.delay("repo"))
        clock.now += 0.4
    assert due[:4] == pytest.approx([100.5, 100.9, 101.3, 101.7])
    assert due[-1] == pytest.approx(100.0 + 2.0)  # capped at the burst's first event + max_delay_s
    clock.now = 102.5  # the run is late (a busy loop): an event now does not postpone it further
    assert d.delay("repo") == 0.0


def test_a_fired_run_ends_the_burst_and_keys_are_apart() -> None:
    clock = Clock()
    d = Debouncer(0.5, 2.0, clock)
    d.delay("a")
    clock.now += 1.9
    assert d.delay("b") == pytest.approx(0.5)  # another repository's burst starts on its own
    assert d.delay("a") == pytest.approx(0.1)  # a's cap is near
    d.fired("a")
    clock.now += 10.0
    assert d.delay("a") == pytest.approx(0.5)  # a new burst: the old first event no longer caps it
