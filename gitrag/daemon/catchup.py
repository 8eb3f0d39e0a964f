"""An answer is never older than HEAD without saying so: the daemon's catch-up before ``ask``.

When ``ask`` finds the work tree's branch indexed behind its HEAD (a reset, a commit whose
event is still in the debounce, a hook that never fired), or not indexed at all (a branch
made a moment ago: its first sync starts from its parent's index, so it is small), the
daemon queues a sync of that work tree at once (no debounce) and waits for it up to
:func:`ask_wait` seconds, then answers. Past the wait it answers from the index it has,
and the answer says so (``up_to_date: false`` and ``catching_up``).

``GITRAG_ASK_WAIT``: seconds, default 3; 0 answers at once (the sync is still queued).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gitrag.errors import ConfigError

DEFAULT_WAIT_S = 3.0
POLL_S = 0.02
AT_HEAD_POLL_S = 0.1  # seconds between two looks at the state (a thread hop and one SQLite read)


def ask_wait(value: Any = None) -> float:
    """Seconds ``ask`` waits for a catch-up: ``value`` (a client's request) when given, else
    ``GITRAG_ASK_WAIT``, else 3. Raises ConfigError for a value that is not a number >= 0."""
    raw = value if value is not None else os.environ.get("GITRAG_ASK_WAIT")
    if raw is None or raw == "":
        return DEFAULT_WAIT_S
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"GITRAG_ASK_WAIT must be a number of seconds, not {raw!r}") from None
    if not seconds >= 0:  # also NaN
        raise ConfigError(f"GITRAG_ASK_WAIT must be 0 or more seconds, not {raw!r}")
    return min(seconds, 600.0)


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
                   at_head: Callable[[], Awaitable[bool]] | None = None) -> bool:
    """Queue a sync of ``worktree`` now and wait up to ``wait_s`` seconds until the daemon is
    done with it, or (``at_head()``, polled every :data:`AT_HEAD_POLL_S`) its index is at
    HEAD, whichever comes first: a hook event that arrives during the sync queues another
    one, which need not be waited for. Returns whether it got there in time."""
    worker.mark(worktree)
    worker.kick()
    deadline = time.monotonic() + wait_s
    next_look = time.monotonic() + AT_HEAD_POLL_S
    while worker.catching_up(worktree) is not None:
        now = time.monotonic()
        if now >= deadline:
            return False
        if at_head is not None and now >= next_look:
            if await at_head():
                return True
            next_look = time.monotonic() + AT_HEAD_POLL_S
        await asyncio.sleep(POLL_S)
    return True
