"""An answer is never older than HEAD without saying so: the daemon's catch-up before ``ask``.

When ``ask`` finds the work tree's branch indexed behind its HEAD (a reset, a commit whose
event is still in the debounce, a hook that never fired), or not indexed at all (a branch
made a moment ago: its first sync starts from its parent's index, so it is small), the
daemon queues a sync of that work tree at once (no debounce) and waits for it up to
:func:`ask_wait` seconds, then answers. Past the wait it answers from the index it has,
and the answer says so (``up_to_date: false`` and ``catching_up``).

``GITRAG_ASK_WAIT``: seconds, default 3; 0 answers at once (the sync is still queued).

The client's route reads :func:`ask_wait` only, so asyncio (with ssl, logging and
concurrent.futures: ~10 ms of a client's start) is imported by the daemon's coroutines
here, not by this module.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gitrag.errors import ConfigError

if TYPE_CHECKING:
    import asyncio

DEFAULT_WAIT_S = 3.0
MAX_WAIT_S = 600.0
POLL_S = 0.02
AT_HEAD_POLL_S = 0.1  # seconds between two looks at the state (a thread hop and one SQLite read)


def ask_wait(value: Any = None) -> float:
    """Seconds ``ask`` waits for a catch-up: ``value`` (a client's request) when given, else
    ``GITRAG_ASK_WAIT``, else 3; at most MAX_WAIT_S. Raises ConfigError for a value that is not
    a finite number >= 0."""
    raw = value if value is not None else os.environ.get("GITRAG_ASK_WAIT")
    if raw is None or raw == "":
        return DEFAULT_WAIT_S
    try:
        seconds = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):  # as every number setting: NaN and infinities too
        raise ConfigError(f"GITRAG_ASK_WAIT must be a number of seconds, 0 or more (over {MAX_WAIT_S:g} counts as "
                          f"{MAX_WAIT_S:g}), got {raw!r}")
    return min(seconds, MAX_WAIT_S)


def lag(ws: Any) -> str | None:
    """How the index of the work tree's branch stands to its HEAD, from the state alone (no
    search): None when it is at HEAD (or there is no commit), ``"behind"`` when it is at
    another commit, ``"none"`` when the branch has no index yet."""
    head = ws.repo.head()
    if head is None:
        return None
    branch = ws.state.branch(ws.repo.branch())
    if branch is None:
        return "none"
    return None if branch.indexed_commit == head else "behind"


async def catch_up(worker: Any, worktree: str, wait_s: float,
                   at_head: Callable[[], Awaitable[bool]] | None = None, deadline: float | None = None) -> bool:
    """Queue a sync of ``worktree`` now and wait up to ``wait_s`` seconds until the daemon is
    done with it, or (``at_head()``, looked at every :data:`AT_HEAD_POLL_S`) its index is at
    HEAD, whichever comes first: a hook event that arrives during the sync queues another
    one, which need not be waited for. Returns whether it got there in time.

    The wait is a deadline, not a timeout per step: ``deadline`` (``time.monotonic()``; the
    request's arrival plus ``wait_s`` when the caller has spent some of it already) ends it,
    and a look at the state that is slow to come back (a thread pool busy under load) is
    left to finish on its own instead of being awaited past it. Raises what ``at_head``
    raises when it finishes in time."""
    import asyncio

    worker.mark(worktree)
    worker.kick()
    end = time.monotonic() + wait_s
    end = end if deadline is None else min(end, deadline)
    look: asyncio.Future[bool] | None = None
    next_look = time.monotonic() + AT_HEAD_POLL_S
    try:
        while worker.catching_up(worktree) is not None:
            now = time.monotonic()
            if look is not None and look.done():
                if look.result():  # raises at_head's own error
                    return True
                look, next_look = None, now + AT_HEAD_POLL_S
            if now >= end:
                return False
            if at_head is not None and look is None and now >= next_look:
                look = asyncio.ensure_future(at_head())
            await asyncio.sleep(min(POLL_S, end - now))
        return True
    finally:
        if look is not None and not look.done():
            look.add_done_callback(_forget)


def _forget(look: asyncio.Future[bool]) -> None:
    """A look left running past the deadline: its result (or error) is not wanted."""
    if not look.cancelled():
        look.exception()


async def within(awaitable: Awaitable[Any], deadline: float, default: Any = None) -> Any:
    """``await awaitable`` until ``deadline`` (``time.monotonic()``), else ``default`` (the work
    is left to finish on its own)."""
    import asyncio

    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
    if task in done:
        return task.result()
    task.add_done_callback(_forget)
    return default
