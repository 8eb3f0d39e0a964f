"""The daemon's scheduled work, on apscheduler's AsyncIOScheduler.

* debounce: an event (re)arms a one-shot job per repository ``debounce_s`` later, but
  never later than ``max_delay_s`` after the first event of a burst (the delay is
  :class:`gitrag.daemon.debounce.Debouncer`'s); the job kicks the worker, which syncs every
  dirty work tree once
* reconcile, every ``reconcile_s`` and at start: drain the spool, prune the registry
  (moved repositories follow, gone ones are dropped: :func:`registry.prune`), stop the
  workers of repositories that no longer exist, then mark every work tree of every
  registered repository whose branch is behind its HEAD (catches what hooks never saw:
  commits while the daemon was down, ``git reset``, a fetch into a branch)
* gc, every ``gc_s``: the same worker stop, then see :mod:`gitrag.daemon.gc`
* warm-overlays, every ``warm.WARM_EVERY_S``: the work-tree overlays of recently asked work
  trees are built ahead of the next ask (:mod:`gitrag.daemon.warm`)
* release-idle, every ``RELEASE_EVERY_S``: a repository with no request or sync for
  ``worker.RELEASE_AFTER_S`` gives back the memory its questions touched (the store's mapped
  pages, SQLite's caches, the heap's free pages: :meth:`RepoWorker.release_if_idle`), once
  per idle spell
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from gitrag import config
from gitrag.daemon import gc, registry, spool, warm
from gitrag.daemon.debounce import Debouncer
from gitrag.daemon.service import Service
from gitrag.daemon.worker import RELEASE_AFTER_S, RepoWorker
from gitrag.errors import GitragError
from gitrag.git.repo import GitRepo
from gitrag.index.state import State

log = structlog.get_logger("gitrag.daemon")
RELEASE_EVERY_S = 5.0


def calm(fn: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
    """``fn`` as a scheduled job whose cancellation (the daemon stopping while it runs) is one
    log line: apscheduler logs a cancelled coroutine job as an error with its traceback."""

    @functools.wraps(fn)
    async def job(*args: object, **kwargs: object) -> object:
        try:
            return await fn(*args, **kwargs)
        except asyncio.CancelledError:
            log.info("scheduled job cancelled: the daemon is stopping", job=getattr(fn, "__name__", repr(fn)))
            return None

    return job


class _NoOverlapNoise(logging.Filter):
    """Drops apscheduler's "Execution of job ... skipped: maximum number of running instances
    reached": every interval job here is max_instances=1 by design (a warm-up round on a big
    work tree outlasts WARM_EVERY_S), and the line came every 0.5 s into daemon.log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in str(record.msg)


logging.getLogger("apscheduler.scheduler").addFilter(_NoOverlapNoise())


class Jobs:
    """Owns the scheduler; ``debounce`` is handed to the Service as its event timer."""

    def __init__(self, service: Service, debounce_s: float = 0.5, max_delay_s: float = 5.0,
                 reconcile_s: float = 300.0, gc_s: float = 3600.0, idle_s: float = 1800.0,
                 orphan_s: float = 0.0, release_after_s: float = RELEASE_AFTER_S) -> None:
        self.service = service
        self.orphan_s, self._last_request = orphan_s, time.monotonic()
        self.debounce_s, self.max_delay_s, self.idle_s = debounce_s, max_delay_s, idle_s
        self.reconcile_s, self.gc_s = reconcile_s, gc_s
        self.release_after_s = release_after_s
        self.scheduler = AsyncIOScheduler(timezone=UTC, job_defaults={"misfire_grace_time": None})
        self._bursts = Debouncer(debounce_s, max_delay_s)
        self._cache_gc: dict[str, float] = {}  # common dir -> time of its last cache gc

    def start(self) -> None:
        now = datetime.now(UTC)
        self.scheduler.add_job(calm(self.reconcile), "interval", seconds=self.reconcile_s, id="reconcile",
                               next_run_time=now, coalesce=True, max_instances=1)
        self.scheduler.add_job(calm(self.gc), "interval", seconds=self.gc_s, id="gc", coalesce=True, max_instances=1)
        self.scheduler.add_job(calm(self.service.warmer.run), "interval", args=[self.service], seconds=warm.WARM_EVERY_S,
                               id="warm-overlays", coalesce=True, max_instances=1)
        self.scheduler.add_job(calm(self.release_idle), "interval", seconds=min(RELEASE_EVERY_S, self.release_after_s),
                               id="release-idle", coalesce=True, max_instances=1)
        if self.orphan_s > 0:
            self.scheduler.add_job(calm(self.leave_if_orphaned), "interval", seconds=min(30.0, max(0.5, self.orphan_s / 2)),
                                   id="orphan", coalesce=True, max_instances=1)
        self.scheduler.start()

    async def leave_if_orphaned(self) -> None:
        """Stop a daemon that serves no registered repository (nothing installed in its
        GITRAG_HOME: one an MCP server or `gitrag ask` started, e.g. with another home) once
        ``orphan_s`` seconds passed without a request or a sync. A daemon of installed
        repositories keeps running: their hooks need it."""
        workers = list(self.service.workers.values())
        if any(w.busy > w.background or w.dirty or w.syncing for w in workers):  # a warm-up round is no use
            self._last_request = time.monotonic()
            return
        last = max([self._last_request, self.service.last_request, *(w.last_used for w in workers)])
        if time.monotonic() - last < self.orphan_s:
            return
        if await asyncio.to_thread(registry.load):  # a repository registered meanwhile: stay
            return
        log.info("no repository registered in this home and no request lately: stopping",
                 idle_s=round(time.monotonic() - last, 1))
        self.service.stop_requested.set()

    async def release_idle(self) -> list[str]:
        """Give back the memory of the repositories idle ``release_after_s`` seconds (on each
        one's worker thread, after its queued work); returns their git dirs."""
        done = []
        for key, worker in list(self.service.workers.items()):
            idle = worker.idle_for()
            if idle is None or idle < self.release_after_s:
                continue
            if await worker.serial(worker.release_if_idle, self.release_after_s, background=True):
                done.append(key)
        if done:
            log.debug("idle: memory given back", repos=done)
        return done

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def debounce(self, key: str, fn: Callable[[], None]) -> None:
        """Run ``fn`` once, ``debounce_s`` after the last call for ``key`` (capped by the burst)."""
        delay = self._bursts.delay(key)

        async def fire() -> None:
            self._bursts.fired(key)
            fn()

        run_at = datetime.now(UTC) + timedelta(seconds=delay)
        self.scheduler.add_job(calm(fire), "date", run_date=run_at, id=f"debounce:{key}", replace_existing=True)

    async def reconcile(self) -> None:
        """Drain the spool, then queue every registered work tree whose index is behind."""
        for event in spool.drain():
            try:
                self.service.accept(**{k: v for k, v in event.items() if k != "op"})
            except (GitragError, TypeError) as exc:
                log.info("spooled event dropped", repo=event.get("repo"), error=str(exc))
        for change in await asyncio.to_thread(registry.prune):
            log.info("registry pruned", repo=change["repo"], moved_to=change["moved_to"])
        await self.service.forget_gone()
        for common_dir in registry.load():
            try:
                behind = await asyncio.to_thread(_behind, common_dir)
                worker, _ = self.service.worker_for(common_dir) if behind else (None, "")
            except GitragError as exc:
                log.info("registered repository unreadable", repo=common_dir, error=str(exc))
                continue
            if worker is not None:
                log.info("reconcile", repo=common_dir, worktrees=behind)
                for path in behind:
                    worker.mark(path)
                worker.kick()

    async def gc(self) -> None:
        """Close idle workspaces, drop expired collections; release the model when all are closed."""
        await self.service.forget_gone()
        for key, worker in list(self.service.workers.items()):
            if worker.busy or worker.dirty or worker.syncing or not worker.is_open:
                continue
            if time.monotonic() - worker.last_used > self.idle_s:
                await worker.serial(worker.close_if_idle)
                continue
            await worker.serial(self._collect, worker, key)
        if not any(w.is_open for w in self.service.workers.values()):
            self.service.release_embedders()

    def _collect(self, worker: RepoWorker, key: str) -> None:
        paths = gc.worktrees(key)
        checked_out = {b for p in paths if (b := worker.workspace(p).repo.checked_out())}
        result = gc.scheduled_pass(worker.workspace(paths[0]) if paths else worker.workspace(key), checked_out,
                            self._cache_gc.get(key, time.time()))
        if result["cache_gc"] or key not in self._cache_gc:
            self._cache_gc[key] = time.time()


def _behind(common_dir: str) -> list[str]:
    """The work trees of a repository whose branch is behind its HEAD; reads the State only
    (opens no store, loads no model, and does not count as use of an idle workspace)."""
    paths = gc.worktrees(common_dir)
    state = State(config.repo_data_dir(Path(common_dir)))
    try:
        return [p for p in paths if gc.stale(GitRepo(p), state)]
    finally:
        state.close()
