"""Wait for a store another process has open, instead of failing (several CLI readers at once).

The embedded store's shards are open in one process at a time (gitrag.index.store.edge). Three
``gitrag ask`` started together with no daemon take turns: each attempt that finds the
store held (:class:`~gitrag.errors.StoreHeld`) waits a moment and tries again, up to
:data:`HELD_WAIT_S` seconds, with one line on stderr saying it waits. When a daemon
started meanwhile holds it, the caller's ``routed()`` asks through it instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from gitrag.errors import StoreHeld

T = TypeVar("T")
HELD_WAIT_S = 60.0
PAUSE_S = (0.05, 1.0)  # the first pause, doubled up to the second


def until_free(attempt: Callable[[], T], routed: Callable[[], T | None] | None = None,
               notice: Callable[[], None] | None = None, wait_s: float = HELD_WAIT_S) -> T:
    """``attempt()``, again while it raises StoreHeld, for up to ``wait_s`` seconds; after each
    refusal ``routed()`` (a daemon that started since) is asked first and its answer used when
    it gives one (not None). ``notice()`` is called once, at the first wait. Re-raises the
    last StoreHeld after the wait."""
    deadline = time.monotonic() + wait_s
    pause, cap = PAUSE_S
    said = False
    while True:
        try:
            return attempt()
        except StoreHeld:
            if routed is not None:
                answer = routed()
                if answer is not None:
                    return answer
            if time.monotonic() > deadline:
                raise
            if not said and notice is not None:
                notice()
                said = True
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, cap)
