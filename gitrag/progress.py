"""Progress of a long sync as plain lines, for where no bar can be drawn: a pipe, a CI log,
a file, the daemon's log.

The indexer reports ``(stage, done, total)`` (stages ``restore``, ``chunk``, ``embed``,
``store``), counting the whole sync. ``total`` is exact whenever it is given: the files to
chunk are known when the sync starts, and the chunks to embed and the points to write of a
sync written in batches (a first index, ``gitrag.index.indexer.Indexer._apply``) only once
its last batch is chunked; until then it is :data:`UNKNOWN` and a line says the count so far
with no percentage (a projection grew as larger files came: 44% fell to 39%). So a stage's
total never changes once given and its percentage never goes down. :class:`Lines` turns
those calls into at most one line per interval, e.g.::

    indexing main: embedding chunks 1,200/4,300, 28%, 41 s
    indexing main: writing points 26,585 so far, 41 s

``GITRAG_PROGRESS_INTERVAL`` sets the interval in seconds (default 5; ``0``: a line at
every report, as tests use; ``off``: no lines). A sync shorter than the interval prints
nothing. Standard library only.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from typing import Any

DEFAULT_INTERVAL_S = 5.0
UNKNOWN = -1  # a stage's total before it is known (see the module)
ENV = "GITRAG_PROGRESS_INTERVAL"
STAGES = {"chunk": "chunking files", "embed": "embedding chunks", "store": "writing points",
          "restore": "restoring points"}
# what :func:`format_line` writes, for programs that read the lines back
# (``total`` and ``percent`` are None in a line of a stage whose total is not known yet)
LINE_RE = re.compile(r"^(?P<label>.+): (?P<stage>[a-z ]+) (?P<done>[\d,]+)"
                     r"(?:/(?P<total>[\d,]+), (?P<percent>\d+)%| so far), (?P<seconds>\d+) s$")

Emit = Callable[[str, dict[str, Any]], None]  # (line, fields)


def interval(environ: dict[str, str] | None = None) -> float | None:
    """Seconds between lines from ``GITRAG_PROGRESS_INTERVAL``; ``None`` when ``off``.

    Unset or empty gives :data:`DEFAULT_INTERVAL_S`; negatives count as 0. Anything else
    that is not a number raises ConfigError naming the variable, as every number setting
    does (``gitrag.config.load_settings`` checks it for every command)."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    raw = text.strip().lower()
    if raw in ("off", "none", "no", "false"):
        return None
    try:
        seconds = float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        seconds = math.nan
    if math.isnan(seconds):
        from gitrag.errors import ConfigError  # standard library only

        raise ConfigError(f"{ENV} must be a number of seconds or off, got {text!r}")
    return max(0.0, seconds)


def percent(done: int, total: int) -> int | None:
    """``done`` of ``total`` in whole percent, rounded down (100 for an empty stage); None
    when ``total`` is :data:`UNKNOWN` (any negative)."""
    if total < 0:
        return None
    return 100 * min(done, total) // total if total > 0 else 100


def format_line(label: str, stage: str, done: int, total: int, seconds: float) -> str:
    """``"{label}: {stage description} {done}/{total}, {percent}%, {seconds} s"``, or
    ``"{label}: {stage description} {done} so far, {seconds} s"`` while ``total`` is
    :data:`UNKNOWN`; counts with thousands separators, percent and seconds rounded down;
    parsed back by :data:`LINE_RE`."""
    what = STAGES.get(stage, stage)
    share = percent(done, total)
    if share is None:
        return f"{label}: {what} {done:,} so far, {int(seconds)} s"
    return f"{label}: {what} {done:,}/{total:,}, {share}%, {int(seconds)} s"


class Lines:
    """A ``(stage, done, total)`` progress callback calling ``emit(line, fields)`` at most
    once per ``every`` seconds (the first time ``every`` seconds after it was made).

    ``fields`` are ``stage, done, total, percent, seconds`` (for structured logs; ``total``
    :data:`UNKNOWN` and ``percent`` None while the stage's total is not known). ``every``
    ``None`` makes a callback that never emits.
    """

    def __init__(self, label: str, emit: Emit, every: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.emit, self.every, self.clock = label, emit, every, clock
        self.started = self._last = clock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.every is None:
            return
        now = self.clock()
        if now - self._last < self.every:
            return
        self._last = now
        seconds = now - self.started
        fields = {"stage": stage, "done": done, "total": total,
                  "percent": percent(done, total), "seconds": round(seconds, 1)}
        self.emit(format_line(self.label, stage, done, total, seconds), fields)
