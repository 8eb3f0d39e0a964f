"""One worker per repository: coalesced syncs, one at a time, on the worker's own thread.

A repository is keyed by its common git dir; its main work tree and its linked worktrees
share one State and store (one :class:`Workspace`, kept open: warm embedder and shards).
Each work tree has its own HEAD and branch, so a sync runs on a view of the workspace
whose ``repo`` is that work tree (``Indexer(view).sync()``).

Events only mark a work tree dirty; :meth:`RepoWorker.kick` starts one drain task that
syncs each dirty work tree once and loops until none is dirty, so fifty events that
arrive during (or before) a sync cost one more sync, not fifty. An event may also name the
branch its hook ran on (``git commit`` on ``main``, then at once ``git checkout -b x``):
each branch so reported is synced to its own tip first, unless it is the one checked out
then (the work tree's sync covers it) or its ref is gone (dropped quietly).

Syncs, gc and the opening of the workspace run on a one-thread executor (one at a time, in
order); reads (ask, status) run on asyncio's default pool beside them (State and store are
thread-safe).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

import structlog

from gitrag import identity
from gitrag.config import Settings
from gitrag.daemon import memory
from gitrag.errors import BranchGone, EmptyRepository, GitragError, NotARepository, StoreHeld, UnsupportedBranch
from gitrag.git.repo import GitRepo
from gitrag.index.embedders import Embedder
from gitrag.index.workspace import Workspace

log = structlog.get_logger("gitrag.daemon")


def sync_progress(worktree: str, branch: str) -> Callable[[str, int, int], None]:
    """The indexer's progress callback in the daemon: an info log event ``sync progress``
    (worktree, branch, stage, done, total, percent, seconds) every
    ``GITRAG_PROGRESS_INTERVAL`` seconds of a long sync (:mod:`gitrag.progress`)."""
    from gitrag.progress import Lines, interval

    def emit(_line: str, fields: dict[str, Any]) -> None:
        log.info("sync progress", worktree=worktree, branch=branch, **fields)

    return Lines(f"syncing {branch}", emit, interval())
T = TypeVar("T")
STAGES = {"chunk": "chunking files", "embed": "embedding chunks", "store": "writing points",
          "restore": "restoring points"}
LOCK_WAIT_S = 120.0  # how long a daemon waits for a store another process holds (a CLI command)
LOCK_BACKOFF_S = (0.2, 5.0)  # the first pause between tries, doubled up to the second


def retry_while_locked(fn: Callable[..., T], *args: Any, wait_s: float = LOCK_WAIT_S,
                       alive: Callable[[], bool] | None = None) -> T:
    """``fn(*args)``, tried again for up to ``wait_s`` seconds while it fails because the
    embedded store is open in another process (a CLI command that began before this daemon
    ran holds it for a moment): the daemon waits its turn instead of failing the request.
    The pauses double from 0.2 s to 5 s, one log line says it waits, and it stops at once
    (re-raising) when ``alive()`` turns false: the repository is gone, nothing to wait for."""
    deadline = time.monotonic() + wait_s
    pause, cap = LOCK_BACKOFF_S
    said = False
    while True:
        try:
            return fn(*args)
        except StoreHeld as exc:
            if time.monotonic() > deadline \
                    or (alive is not None and not alive()):
                raise
            if not said:
                log.info("the store is open in another process; waiting", error=str(exc), wait_s=wait_s)
                said = True
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, cap)


CLOSE_AFTER_POINTS = 5_000  # a sync that wrote this many points reopens the shards from disk
# seconds without a request (or a sync) after which the memory the questions touched is given
# back (see RepoWorker.release_if_idle); agents ask in bursts seconds apart, which stay warm
RELEASE_AFTER_S = 10.0


class RepoWorker:
    """Syncs one repository. ``opener(path)`` opens its Workspace (called once, lazily)."""

    def __init__(self, common_dir: str, opener: Callable[..., Workspace],
                 configure: Callable[[GitRepo], tuple[Settings, Embedder]] | None = None) -> None:
        self.common_dir = common_dir
        self._opener = opener
        self._configure = configure  # a work tree's settings now and their embedder (None: kept from the opening)
        self._ws: Workspace | None = None
        self._repo_id = identity.read_id(Path(common_dir))  # kept: after a move the old path has none
        self._ws_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"sync-{Path(common_dir).parent.name}")
        self._task: asyncio.Task[None] | None = None
        self.dirty: dict[str, float] = {}  # work tree path -> time of its first unsynced event
        self.reported: dict[str, dict[str, None]] = {}  # dirty work tree -> branches its hooks named, in order
        self.syncing: str | None = None  # the work tree being synced now
        self.indexing: str | None = None  # the work tree whose sync runs on the worker thread now
        self.progress: tuple[str, int, int] | None = None  # (stage, done, total) of that sync
        self.indexing_since: float | None = None  # time.monotonic() when it began
        self.stopping = False
        self.busy = 0  # syncs and reads in flight
        self.background = 0  # of them, the daemon's own background reads (the overlay warm-up)
        self.last_used = time.monotonic()
        self.released = self.last_used  # when release_if_idle last gave the memory back (monotonic)
        # syncs: how many moved the index (a sync that finds it current is not counted)
        self.stats: dict[str, Any] = {"syncs": 0, "last_sync": None, "last_error": None}

    # -- the workspace ---------------------------------------------------------------
    @property
    def repo_id(self) -> str | None:
        """The id in the repository's git dir (read again once the workspace is open: a new
        repository gets its id, a copied one a forked id, then); None when it has none (not
        indexed yet, or a git dir that cannot be written)."""
        return self._repo_id

    def alive(self) -> bool:
        """Whether the repository is still where this worker serves it (not moved, not deleted)."""
        from gitrag.daemon import registry

        return registry.holds(self.common_dir, self.repo_id)

    def rehome(self, common_dir: str, worktree: str) -> None:
        """Serve the repository from its new place after its folder was moved: the open
        Workspace (its store, its shard locks, the warm model) is kept, its data folder
        records the new git dir, and queued syncs of work trees that are gone are dropped."""
        with self._ws_lock:
            self.common_dir = common_dir
            if self._ws is not None:
                self._ws = replace(self._ws, repo=GitRepo(worktree))
                identity.record(self._ws.data_dir, Path(common_dir))
        for path in [p for p in self.dirty if not Path(p).exists()]:
            self.dirty.pop(path, None)
            self.reported.pop(path, None)

    @property
    def opened(self) -> bool:
        """Whether this worker has opened the repository's Workspace (its data folder exists)."""
        return self._ws is not None

    def workspace(self, worktree: str | Path, rebuild: bool = False) -> Workspace:
        """A view of the repository's Workspace on ``worktree`` (its HEAD, its branch).

        Opens the shared Workspace on first use, and again when its data folder was deleted
        under it (the index starts over). The view carries the work tree's settings as they
        are now (``configure``: its ``.gitrag.toml`` read again, a few small reads), with their
        embedder: a commit that adds, edits or removes the file changes what the next sync
        indexes (a new ``max_file_bytes`` judges every path again) and what the next ask
        embeds with, as a command without a daemon would. A change of the store's settings
        (``qdrant_url``, ``qdrant_api_key``: the user's config) reopens the Workspace.
        ``rebuild``: a state of another format is moved aside instead of refused. Raises
        NotARepository when the work tree is gone, ConfigError, EmbedderUnavailable, and what
        open_workspace raises."""
        repo = GitRepo(worktree)
        with self._ws_lock:
            if self._ws is not None and not self._ws.state.is_current():
                log.warning("the data folder was deleted; starting the index over", data_dir=str(self._ws.data_dir))
                self._discard()
            if self._ws is not None and self._configure is not None:
                settings, embedder = self._configure(repo)
                now = self._ws.settings
                if (settings.qdrant_url, settings.qdrant_api_key) != (now.qdrant_url, now.qdrant_api_key):
                    log.info("the store's settings changed; reopening it", repo=self.common_dir)
                    self._discard()
                elif settings != now or embedder is not self._ws.loaded_embedder:
                    log.info("settings changed", repo=str(repo.root), sources=list(settings.sources),
                             changed=sorted(f.name for f in fields(Settings) if getattr(settings, f.name)
                                            != getattr(now, f.name) and f.compare))
                    self._ws = replace(self._ws, settings=settings, _embedder=embedder)
            if self._ws is None:
                self._ws = self._opener(Path(worktree), rebuild=rebuild)
                self._ws.embedder  # noqa: B018 - load it here, so every view shares it
                self._repo_id = identity.read_id(Path(self.common_dir)) or self._repo_id
            return replace(self._ws, repo=repo)

    def _discard(self) -> None:
        """Drop a Workspace whose files are gone (closing it may fail: nothing left to flush to)."""
        ws, self._ws = self._ws, None
        for close in (ws.store.close, ws.state.close) if ws else ():
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - its files are gone; nothing to save
                log.info("closing a deleted workspace", error=repr(exc))

    def close(self) -> None:
        """Close the Workspace (frees shards and SQLite); the next use opens it again."""
        with self._ws_lock:
            if self._ws is not None:
                self._ws.close()
                self._ws = None

    def close_if_idle(self) -> bool:
        """Close the Workspace unless a read or another job is in flight (this call counts
        one); returns whether it closed. For the gc job, on the worker's thread."""
        if self.busy > 1 or self.dirty or self.syncing:
            return False
        self.close()
        return True

    @property
    def is_open(self) -> bool:
        return self._ws is not None

    # -- running work ----------------------------------------------------------------
    async def serial(self, fn: Callable[..., T], *args: Any, background: bool = False) -> T:
        """Run ``fn(*args)`` on the worker's thread, after the syncs queued before it
        (``background``: the daemon's own work, not a use; see :meth:`read`)."""
        return await self._tracked(asyncio.get_running_loop().run_in_executor(self._executor, fn, *args),
                                   touch=not background)

    async def read(self, fn: Callable[..., T], *args: Any, background: bool = False) -> T:
        """Run a read-only ``fn(*args)`` on the default pool, beside a running sync. A
        ``background`` read (the overlay warm-up) is the daemon's own work, not a use: it
        does not count as the worker's last use (idle gc, a daemon with nothing registered
        leaving when unused)."""
        return await self._tracked(asyncio.to_thread(retry_while_locked, fn, *args, alive=self.alive),
                                   touch=not background)

    def catching_up(self, worktree: str) -> str | None:
        """What the daemon is doing for ``worktree`` now (``indexing it now (embedding chunks:
        40 of 200)``, ``a sync is queued``), or None when it is not behind on it. A sync a
        client asked for (``gitrag index``) counts as much as one a hook event started."""
        if self.indexing == worktree and self.progress is not None:
            stage, done, total = self.progress
            of = f"{done} of {total}" if total >= 0 else f"{done} so far"  # progress.UNKNOWN: not known yet
            return f"the daemon is indexing it now ({STAGES.get(stage, stage)}: {of})"
        if self.indexing == worktree or self.syncing == worktree:
            return "the daemon is indexing it now (starting)"
        if worktree in self.dirty:
            return "the daemon has a sync of it queued" + (" behind another work tree's" if self.syncing else "")
        return None

    def progress_of(self, worktree: str) -> dict[str, Any]:
        """``{"catching_up", "stage", "done", "total", "seconds"}`` for ``worktree``: the
        phrase of :meth:`catching_up` (None: not behind on it) and, while its sync runs and
        has reported, the indexer's stage (``chunk``, ``embed``, ``store``, ``restore``),
        counts so far and of the stage, and seconds since the sync began (else None, 0, 0, 0)."""
        running = self.indexing == worktree and self.progress is not None
        stage, done, total = self.progress if running and self.progress else (None, 0, 0)
        since = self.indexing_since if running else None
        return {"catching_up": self.catching_up(worktree), "stage": stage, "done": done, "total": total,
                "seconds": round(time.monotonic() - since, 1) if since is not None else 0.0}

    @contextmanager
    def indexing_now(self, worktree: str) -> Iterator[Callable[[str, int, int], None]]:
        """Around a sync of ``worktree`` on the worker thread (a queued one, or a client's
        ``index``): yields the indexer's progress callback; :meth:`catching_up` and
        :meth:`progress_of` report the sync until it ends."""
        def record(stage: str, done: int, total: int) -> None:
            self.progress = (stage, done, total)

        self.indexing, self.progress, self.indexing_since = worktree, None, time.monotonic()
        try:
            yield record
        finally:
            self.indexing, self.progress, self.indexing_since = None, None, None

    async def _tracked(self, awaitable: Awaitable[T], touch: bool = True) -> T:
        self.busy += 1
        self.background += not touch
        try:
            return await awaitable
        finally:
            self.busy -= 1
            self.background -= not touch
            if touch:
                self.last_used = time.monotonic()

    # -- events -----------------------------------------------------------------------
    def mark(self, worktree: str, branch: str | None = None) -> None:
        """Queue a sync of ``worktree`` (its checked-out branch), and of ``branch`` (a
        branch its hook ran on, which HEAD may have left since) to its tip."""
        self.dirty.setdefault(worktree, time.time())
        if branch:
            self.reported.setdefault(worktree, {})[branch] = None

    def queue(self) -> int:
        """Work trees waiting for a sync, plus the one being synced."""
        return len(self.dirty) + (1 if self.syncing else 0)

    def kick(self) -> None:
        """Start draining the dirty work trees unless a drain task already runs."""
        if self.stopping or not self.dirty or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self.dirty and not self.stopping:
            worktree = next(iter(self.dirty))
            del self.dirty[worktree]
            branches = list(self.reported.pop(worktree, ()))
            self.syncing = worktree
            try:
                await self.serial(self.sync_dirty, worktree, branches)
            finally:
                self.syncing = None

    def sync_dirty(self, worktree: str, branches: list[str]) -> dict[str, Any] | None:
        """One dirty work tree's syncs (worker thread): each reported branch to its tip, in the
        order reported, except the one checked out now; then the checked-out branch to HEAD.
        Returns the last one's summary (None on failure); a branch that no longer exists is
        skipped quietly."""
        try:
            current: str | None = GitRepo(worktree).branch()
        except GitragError:
            current = None  # the work tree is gone: its sync below says so
        for branch in branches:
            if branch != current:
                self.sync_now(worktree, branch)
        return self.sync_now(worktree)

    def sync_now(self, worktree: str, branch: str | None = None) -> dict[str, Any] | None:
        """Sync ``worktree``'s branch to its HEAD, or ``branch`` to its tip (a branch not
        checked out: the sync reads git objects only), on the worker thread; the summary, or
        None on failure or when ``branch`` no longer exists."""
        from gitrag.index.indexer import Indexer

        written = 0
        try:
            def sync(ws: Workspace, progress: Callable[[str, int, int], None]) -> Any:
                log_progress = sync_progress(worktree, branch or ws.repo.branch())

                def both(stage: str, done: int, total: int) -> None:
                    progress(stage, done, total)
                    log_progress(stage, done, total)

                return Indexer(ws, both).sync(branch=branch, history=False)

            with self.indexing_now(worktree) as progress:
                summary = retry_while_locked(lambda: sync(self.workspace(worktree), progress), alive=self.alive)
            written = summary.points_upserted
            # counted before the history step and before the memory is given back, so a
            # client that sees the index at HEAD also sees the sync counted
            moved = summary.previous_commit != summary.commit or summary.points_upserted or summary.points_deleted
            self.stats.update(syncs=self.stats["syncs"] + bool(moved), last_sync=time.time(), last_error=None)
            Indexer(self.workspace(worktree)).sync_history(summary)  # the commit index (gitrag.index.history)
        except EmptyRepository:
            return None
        except BranchGone:  # deleted since its hook ran (commit, then `git branch -D` at once)
            log.info("reported branch gone", worktree=worktree, branch=branch)
            return None
        except NotARepository as exc:
            log.info("work tree gone", worktree=worktree, error=str(exc))
            return None
        except UnsupportedBranch as exc:  # not indexed, by design: not a failure of the sync
            log.info("branch not indexed", worktree=worktree, reason=str(exc))
            return None
        except GitragError as exc:
            self.stats["last_error"] = str(exc)
            log.warning("sync failed", worktree=worktree, branch=branch, error=str(exc))
            return None
        except Exception as exc:  # a bug: keep serving the other repositories
            self.stats["last_error"] = repr(exc)
            log.exception("sync crashed", worktree=worktree, branch=branch)
            return None
        finally:
            self.settle(written)
        return summary.to_json()

    def settle(self, points_written: int) -> None:
        """After a sync (worker thread): give its memory back. The sync's texts, vectors and
        records are garbage now (collected and trimmed, see gitrag/daemon/memory.py), its
        sparse-term caches and SQLite's page caches are emptied, and the pages of the
        store's and the static model's mapped files it touched are dropped from the
        process (they stay in the page cache); after a large write the
        store's shards are closed too, since the engine keeps freshly written points on its
        heap, and reopen lazily from their memory-mapped files."""
        if points_written >= CLOSE_AFTER_POINTS and self._ws is not None:
            try:
                self._ws.store.close()
            except GitragError as exc:
                log.warning("closing the shards after a sync failed", error=str(exc))
        ws = self._ws
        if ws is None:
            memory.release()
            return
        memory.release(ws.state.connections(), [ws.store, ws.loaded_embedder])

    def idle_for(self, now: float | None = None) -> float | None:
        """Seconds since the worker's last use when its memory is still held and nothing runs
        (no sync queued or running, no read but the daemon's own warm-up), else None."""
        if self._ws is None or self.busy > self.background or self.dirty or self.syncing or self.indexing:
            return None
        if self.released >= self.last_used:
            return None
        return (time.monotonic() if now is None else now) - self.last_used

    def release_if_idle(self, after_s: float = RELEASE_AFTER_S) -> bool:
        """Give back what the questions since the last release touched once the worker was
        idle ``after_s`` seconds (worker thread; see :meth:`settle`): the pages of the store's
        and the model's memory-mapped files (they stay in the page cache: the next question
        faults the ones it reads back in, ~25 ms of CPU once on sqlalchemy's 47k chunks),
        SQLite's page caches, the sparse-term caches and the heap's free pages. The shards
        stay open (closing them saves ~14 MB there and costs the next question ~0.3 s).
        Returns whether it released."""
        idle = self.idle_for()
        if idle is None or idle < after_s:
            return False
        self.released = time.monotonic()
        self.settle(0)
        return True

    async def stop(self) -> dict[str, list[str]]:
        """Let the running sync finish, start no other; returns the work trees still dirty,
        each with the branches reported for it (see :meth:`mark`)."""
        self.stopping = True
        if self._task is not None:
            await asyncio.shield(self._task)
        left = {worktree: list(self.reported.get(worktree, ())) for worktree in self.dirty}
        await asyncio.get_running_loop().run_in_executor(self._executor, self.close)
        self._executor.shutdown(wait=True)
        return left
