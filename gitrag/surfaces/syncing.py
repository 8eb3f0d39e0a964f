"""An in-process sync as the commands run it: the index lock, a progress bar, the sync, the close.

``gitrag index``, ``install`` (when the daemon went away), ``index --publish`` and ``eval``
sync in their own process. Each waits for another in-process index of the same
repository first (:func:`locked`: the index lock, saying whom it waits for), shows the
sync's progress (:func:`sync_shown`), and the first two close the workspace before the
lock is let go (:func:`sync_and_close`), so the next in-process index finds the store's
shard lock free.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager

from gitrag.index import lock as index_lock
from gitrag.index.indexer import Indexer, IndexSummary
from gitrag.index.workspace import Workspace
from gitrag.surfaces import output


def locked(ws: Workspace) -> AbstractContextManager[None]:
    """The repository's index lock (gitrag.index.lock.held), with one line on stderr naming
    the process it waits for."""
    return index_lock.held(ws.data_dir, lambda pid: output.info(index_lock.waiting_notice(pid)))


def sync_shown(ws: Workspace, show: bool, rebuild: bool = False) -> IndexSummary:
    """Sync the current branch of ``ws`` with a progress bar (``show``: on a terminal, else a
    line on stderr now and then; off for ``--json``). Raises what the sync raises."""
    with output.progress_bar(show, f"indexing {ws.repo.branch()}") as progress:
        return Indexer(ws, progress).sync(rebuild=rebuild)


def sync_and_close(ws: Workspace, show: bool, rebuild: bool = False) -> IndexSummary:
    """:func:`sync_shown` under :func:`locked`, then ``ws`` closed before the lock goes,
    whatever happened (after a failed sync an error of the close is suppressed: the sync's
    is the one to report). Interrupted while waiting for the lock, ``ws`` is left open for
    the caller to close (closing twice is harmless)."""
    with locked(ws):
        try:
            summary = sync_shown(ws, show, rebuild)
        except BaseException:
            with contextlib.suppress(Exception):
                ws.close()
            raise
        ws.close()
        return summary
