"""Keep the work-tree overlay of recently asked work trees chunked and embedded ahead of the
next ask (gitrag.query.worktree).

An agent edits files and asks at once; the first ask after an edit would pay the chunker
(about 0.1 s a 500-line file) and the embedding of the changed chunks. Every WARM_EVERY_S
the daemon builds the overlay of each work tree asked with the overlay in the last
WARM_FOR_S seconds, on the default thread pool beside any sync: with nothing changed that
is one git status and a stat of each dirty file (a few ms: about 1-2% of a core at one round
each 0.5 s); with edits it chunks and embeds them, so the next ask finds them in the
process's cache. An ask that comes while a round chunks waits for it rather than chunking
the same files beside it (gitrag.query.worktree.build). A failure is logged, never raised.

A round's cost grows with the work tree (git status stats every tracked file: ~6 ms of CPU
on sqlalchemy, ~24 ms on a 120k-chunk tree under load, where two rounds a second took 5% of
a core for ten minutes after each ask), so each work tree's rounds are spaced to spend at most
WARM_BUDGET of a core: the next comes WARM_EVERY_S after the last, or its CPU time /
WARM_BUDGET after it began when that is later (an ask in the meantime builds the overlay
itself, as without the warm-up). A round is skipped when an ask began building the overlay
after the last round began and cut nothing provisionally (gitrag.query.worktree.settled_since):
that ask did the round's work (its git status, its files chunked exactly), so while an agent
asks in a burst the asks' own git status is the only one; edits after that ask are chunked by
the next round or the next ask.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import structlog

from gitrag.errors import GitragError, UnsupportedBranch
from gitrag.index.workspace import Workspace

log = structlog.get_logger("gitrag.daemon")

WARM_EVERY_S = 0.5  # an agent's next ask comes seconds after its edit; the round starts within this
WARM_FOR_S = 600.0
WARM_BUDGET = 0.02  # share of one core a work tree's rounds may take


class Warmer:
    """Which work trees to warm (``note``), and when each was last warmed (``warmed``:
    work-tree root -> Unix time, seconds; reported by the ``progress`` op)."""

    def __init__(self) -> None:
        self.asked: dict[str, float] = {}  # root -> monotonic time of its last overlay ask
        self.warmed: dict[str, float] = {}
        self.refused: set[str] = set()  # roots on a branch gitrag does not index (logged once, until it changes)
        self.next_round: dict[str, float] = {}  # root -> monotonic time before which it is not warmed again
        self.began: dict[str, float] = {}  # root -> monotonic time its last round began (or was skipped)

    def note(self, root: str) -> None:
        self.asked[root] = time.monotonic()

    async def run(self, service: Any) -> None:
        """One round over the recently asked work trees (the scheduler calls it every WARM_EVERY_S)."""
        from gitrag.query import worktree

        now = time.monotonic()
        for root, asked in list(self.asked.items()):
            if now - asked > WARM_FOR_S:
                self.asked.pop(root, None)
                self.next_round.pop(root, None)
                self.began.pop(root, None)
                continue
            try:
                worker, key = service.worker_for(root)
            except GitragError:
                self.asked.pop(root, None)
                continue
            if worker.stopping or worker.indexing is not None or worker.catching_up(key) is not None:
                # a sync is writing, running or queued: it cuts the same commit's files (twice the
                # CPU on two cores, and the warm-up's turn would hold an ask): the next round
                continue
            if now < self.next_round.get(root, 0.0):
                continue  # within its CPU budget (WARM_BUDGET)
            if worktree.settled_since(root, self.began.get(root, now)):
                self.began[root] = now  # an ask since the last round built the overlay, nothing cut provisionally
                continue
            self.began[root] = now
            try:
                cpu_s = await worker.read(functools.partial(_warm_worktree, worker, key), background=True)
                self.next_round[root] = now + cpu_s / WARM_BUDGET
            except UnsupportedBranch as exc:  # not indexed: nothing to warm while it is checked out
                if root not in self.refused:
                    self.refused.add(root)
                    log.info("not warming the work-tree overlay", worktree=root, reason=str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - warming is an optimisation, never an error
                log.info("warming the work-tree overlay failed", worktree=root, error=str(exc))
                continue
            self.refused.discard(root)
            self.warmed[root] = time.time()


def _warm_worktree(worker: Any, key: Any) -> float:
    """:func:`warm` of the work tree ``key`` of ``worker`` (run by the worker's read, on its
    thread); returns the CPU seconds it took (this thread's)."""
    start = time.thread_time()
    warm(worker.workspace(key))
    return time.thread_time() - start


def warm(ws: Workspace) -> None:
    """Build the current branch's overlay once, chunked exactly (its files land in
    gitrag.query.worktree's cache, replacing what an ask chunked provisionally)."""
    from gitrag.query import worktree

    branch = ws.state.branch(ws.repo.branch())
    if branch is not None and branch.materialized and ws.repo.head() is not None:
        # edits cut provisionally first (ms): an ask meanwhile finds them. This pass holds the
        # overlay's turn, so files committed since the index wait past its first batch for the
        # exact pass, which gives the turn up while it chunks
        quick = worktree.build(ws, branch, exact=False, deadline=time.monotonic(), warming=True)
        # then the chunker's cut replaces them, and cuts the files the quick pass left late
        if quick.late or any(f.provisional for f in quick.files.values()):
            worktree.build(ws, branch, exact=True)
