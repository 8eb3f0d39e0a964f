"""The daemon's commands (``cmd_<op>``) and its event intake.

The server calls ``cmd_<op>(**args)`` for each request and sends back what it returns;
a GitragError raised here reaches the client as ``{"ok": false, "kind", "error",
"exit_code"}``. ``repo`` arguments are any path inside a work tree; the work tree's own
HEAD and branch are used (a linked worktree is synced and answered as itself).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import structlog

from gitrag import __version__, config, identity
from gitrag.daemon import catchup, registry
from gitrag.daemon.warm import Warmer
from gitrag.daemon.worker import RepoWorker, sync_progress
from gitrag.errors import ConfigError, GitragError
from gitrag.errors import SettingsMismatch as SettingsMismatch  # defined there, named here too
from gitrag.git.repo import GitRepo
from gitrag.index.embedders import Embedder, create
from gitrag.index.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from gitrag.daemon.protocol import EventFields

log = structlog.get_logger("gitrag.daemon")


Debounce = Callable[[str, Callable[[], None]], None]  # (key, fn): run fn once, a little later


class Service:
    """Every repository's worker, the shared embedders, and the commands."""

    def __init__(self, socket: str = "", debounce: Debounce | None = None) -> None:
        self.socket = socket
        self.workers: dict[str, RepoWorker] = {}
        self.started = time.time()
        self.last_request = time.monotonic()  # of any op but ping (gitrag.daemon.jobs: leave_if_orphaned)
        self.stop_requested = asyncio.Event()
        self.debounce: Debounce = debounce or (lambda key, fn: fn())
        self._embedders: dict[tuple[Any, ...], Embedder] = {}
        self._embedders_lock = threading.Lock()
        from gitrag.build import build_id

        build_id()  # the code this daemon started with, not what is on disk when first asked
        self.warmer = Warmer()  # work-tree overlays kept warm between asks (gitrag.daemon.warm)

    # -- repositories ------------------------------------------------------------------
    def _open(self, path: Path, rebuild: bool = False) -> Workspace:
        """Open a repository's Workspace with its settings now and their embedder (see
        :meth:`_configure`); ``rebuild`` as in open_workspace."""
        settings, embedder = self._configure(GitRepo(path))
        return open_workspace(path, settings, embedder, rebuild=rebuild)

    def _configure(self, repo: GitRepo) -> tuple[config.Settings, Embedder]:
        """The settings of the work tree ``repo`` as a command there reads them now (its
        ``.gitrag.toml`` as it is at this moment, the user config, this process's
        environment) and an embedder for them, shared by every repository that configures
        the same one (one model in memory). Read again for every sync and request
        (RepoWorker.workspace): a commit that adds, edits or removes ``.gitrag.toml`` is
        followed at once. Raises ConfigError, and what the embedder's constructor raises."""
        settings = config.load_settings(repo.workdir)
        key = (settings.embedder, settings.local_model, settings.static_model, settings.ollama_host, settings.ollama_model,
               settings.ollama_timeout, settings.batch_size)
        with self._embedders_lock:
            if key not in self._embedders:
                self._embedders[key] = create(settings)
            embedder = self._embedders[key]
        return settings, embedder

    def release_embedders(self) -> None:
        """Forget the shared embedders (the model is freed once no workspace holds it)."""
        with self._embedders_lock:
            self._embedders.clear()

    def worker_for(self, path: str | Path) -> tuple[RepoWorker, str]:
        """The worker of the repository at ``path`` and the work tree's root. A repository
        whose folder was moved keeps its worker (see :meth:`_moved_worker`).
        Raises NotARepository."""
        repo = GitRepo(path)
        key = str(repo.common_dir)
        worker = self.workers.get(key)
        if worker is None:
            worker = self._moved_worker(key, str(repo.root))
        if worker is None:
            worker = self.workers[key] = RepoWorker(key, self._open, self._configure)
        return worker, str(repo.root)

    def never_indexed(self, worker: RepoWorker) -> bool:
        """Whether the worker's repository was never indexed here: no workspace open, no data
        folder, not registered. A read-only request (ask, related, status) then writes nothing
        for it (no id file in its git dir, no data folder): it is not indexed behind its owner's back."""
        if worker.opened:
            return False
        common = Path(worker.common_dir)
        return config.existing_repo_data_dir(common) is None and not registry.is_registered(common)

    def refuse_never_indexed(self, worker: RepoWorker, root: str) -> None:
        """NotIndexed (saying where the daemon looked) for a repository :meth:`never_indexed`,
        after the errors that come first (a branch name gitrag refuses, no commit yet)."""
        from gitrag.errors import NotIndexed
        from gitrag.index.workspace import NOT_INDEXED

        if not self.never_indexed(worker):
            return
        repo = GitRepo(root)
        repo.branch()
        repo.require_head()
        raise NotIndexed(f"{NOT_INDEXED} (the daemon looked in {config.data_root()}, "
                         f"GITRAG_HOME={config.gitrag_home() or 'unset'})")

    def _moved_worker(self, key: str, root: str) -> RepoWorker | None:
        """The worker of this repository at its old place, moved to ``key`` (the folder was
        moved: the old path no longer holds the id); None when there is none. A second
        worker would open the same data folder, whose store the first one holds."""
        repo_id = identity.read_id(Path(key))
        if repo_id is None:
            return None
        for old, worker in list(self.workers.items()):
            if worker.repo_id != repo_id or registry.holds(old, repo_id):
                continue
            del self.workers[old]
            worker.rehome(key, root)
            self.workers[key] = worker
            log.info("repository moved", old=old, new=key, registry=registry.follow(key) is not None)
            return worker
        return None

    async def forget_gone(self) -> list[str]:
        """Stop the workers of repositories that no longer exist (moved away and never asked
        for at the new place, or deleted) with nothing in flight: their workspaces close
        (shards, SQLite, the store's locks). Returns their git dirs."""
        gone = []
        for key, worker in list(self.workers.items()):
            if worker.alive() or worker.busy or worker.dirty or worker.syncing:
                continue
            del self.workers[key]
            try:
                await worker.stop()
            except GitragError as exc:
                log.info("closing a gone repository's workspace", repo=key, error=str(exc))
            gone.append(key)
        if gone:
            log.info("repositories gone", repos=gone)
        return gone

    def accept(self, repo: str, branch: Any = None, **event: Unpack[EventFields]) -> dict[str, Any]:
        """Take one hook event (from the socket or the spool): mark the work tree dirty, and
        ``branch`` (the branch the hook ran on; absent from older hooks' events) for a sync
        to its tip (``branches``: several, from a reference-transaction hook), and (re)start
        the debounce timer. Events of unregistered repositories are declined."""
        worker, root = self.worker_for(repo)
        if worker.common_dir not in registry.load():  # one read of the registry per event
            if registry.follow(worker.common_dir) is None:  # not moved here from a registered path either
                return {"accepted": False, "reason": "repository not registered; run `gitrag install` in it"}
            log.info("registered repository moved", repo=worker.common_dir)  # registered where it is now
        names = event.get("branches") if isinstance(event.get("branches"), list) else [branch]
        for name in names or [None]:
            worker.mark(root, name if isinstance(name, str) and name else None)
        self.debounce(worker.common_dir, worker.kick)
        log.debug("event", repo=root, hook=event.get("hook"), args=event.get("args"), branch=branch)
        return {"accepted": True, "queue": worker.queue()}

    def info(self) -> dict[str, Any]:
        from gitrag.build import build_id

        return {"running": True, "pid": os.getpid(), "socket": self.socket, "version": __version__,
                "build": build_id(), "home": str(config.gitrag_home() or "")}

    # -- commands ----------------------------------------------------------------------
    async def cmd_ping(self) -> dict[str, Any]:
        """``{"pid", "version", "uptime_s", "repos"}``."""
        return {**self.info(), "uptime_s": round(time.time() - self.started, 3), "repos": len(self.workers)}

    async def cmd_notify(self, repo: str, branch: str | None = None, **event: Unpack[EventFields]) -> dict[str, Any]:
        """``{"accepted": bool, "queue"?: int, "reason"?: str}``; ``branch``: see :meth:`accept`."""
        return self.accept(repo, branch, **event)

    def check_settings(self, root: str, settings: dict[str, Any] | None) -> None:
        """Refuse a client whose result settings (GITRAG_EMBEDDER, ...) differ from the ones
        this daemon uses for the repository: it would get an answer made with ours, silently.
        Raises SettingsMismatch."""
        if settings is None:
            return
        why = config.mismatch(settings, config.result_settings(config.load_settings(GitRepo(root).workdir)))
        if why is not None:
            raise SettingsMismatch(f"the running gitrag daemon uses other settings ({why}) and would answer with "
                                   f"its own: unset the variable, or restart the daemon with it "
                                   f"(`gitrag daemon --stop`, then run `gitrag daemon` the same way)")

    async def cmd_ask(self, repo: str, question: str, k: int = 10, mode: str = "hybrid", path: str = "",
                      lang: str = "", no_answer: bool = False, expand: int = 0,
                      settings: dict[str, Any] | None = None, exclude: Any = None,
                      files: Any = False, wait: Any = None, worktree: Any = True, offset: Any = 0,
                      rev: Any = "") -> dict[str, Any]:
        """The contract's ask JSON, answered from the warm embedder and store. An index behind
        HEAD (or none yet for the branch) is caught up first, waiting up to ``wait`` seconds
        (default ``GITRAG_ASK_WAIT``, 3; see gitrag.daemon.catchup); past that the answer
        comes from the index there is, with ``catching_up`` (one phrase) saying what the
        daemon is doing.
        ``exclude``: a list of gitignore-style globs; ``files``: true adds the ranked ``files``.
        Raises SettingsMismatch, NotIndexed (saying when the daemon is indexing it now),
        ConfigError for an ``exclude`` that is not a list of non-empty strings."""
        from gitrag.errors import NotIndexed, StoreDamaged
        from gitrag.index import heal
        from gitrag.index.store import SearchFilter
        from gitrag.query.retrieval import ask

        arrived = time.monotonic()  # GITRAG_ASK_WAIT counts from here: a deadline (gitrag.daemon.catchup)
        globs = _globs(exclude)
        if not isinstance(files, bool):
            raise ConfigError(f"files must be true or false, not {files!r}")
        # worktree, offset, rev: types and ranges checked by protocol.ARGS
        worker, root = self.worker_for(repo)
        self.check_settings(root, settings)
        self.refuse_never_indexed(worker, root)
        scope = SearchFilter(path, lang, globs) if (path or lang or globs) else None
        wait_s = catchup.ask_wait(wait)
        deadline = arrived + wait_s

        def answer_now(ws: Workspace) -> dict[str, Any]:
            # mid-sync the overlay would embed HEAD's files not indexed yet: only until the deadline
            return ask(ws, question, k=k, mode=mode, scope=scope, expand=expand, files=files,
                       worktree_overlay=worktree, offset=offset, deadline=deadline).to_json()

        async def answer() -> dict[str, Any]:
            if rev:  # a revision view is a sync: on the worker's thread, after the queued ones
                from gitrag.query import revisions

                return await worker.serial(lambda: revisions.ask(worker.workspace(root), rev, question, k=k, mode=mode,
                                                                 scope=scope, expand=expand, files=files,
                                                                 offset=offset).to_json())
            return await worker.read(lambda: answer_now(worker.workspace(root)))  # the warm-up noted below

        async def lag() -> str | None:  # from the state alone, no search: cheap
            return await worker.read(lambda: catchup.lag(worker.workspace(root)))

        def lag_or_answer() -> tuple[str | None, dict[str, Any] | None]:
            """The lag, and at HEAD the answer too: one trip to the pool and one view of the
            workspace for the usual ask (each hop waits for a core on a busy machine). A
            failing answer is None here: asked again below, where its errors are handled."""
            ws = worker.workspace(root)
            behind = catchup.lag(ws)
            if behind is not None:
                return behind, None
            try:
                return None, answer_now(ws)
            except GitragError:
                return None, None

        data: dict[str, Any] | None = None
        if rev:  # a revision is answered from its own view
            behind = None
        else:  # a pool busy past the deadline (under load): its answer is the one to wait for
            if worktree:
                self.warmer.note(root)
            first = asyncio.ensure_future(worker.read(lag_or_answer))
            behind, data = await first if wait_s == 0 else (await catchup.within(first, deadline) or await first)
        if behind is not None and wait_s > 0 and (behind == "behind" or self._known(worker, root)):
            # behind HEAD, or a new branch of a repository the daemon keeps: catch up first
            async def at_head() -> bool:
                return await lag() is None

            await catchup.catch_up(worker, root, wait_s, at_head, deadline=deadline)
        try:
            try:
                data = data if data is not None else await answer()
            except StoreDamaged as exc:  # rebuilt on the worker's thread (no sync beside it), then asked again
                log.warning("store damaged: rebuilding it from the vector cache before answering", error=str(exc))
                await worker.serial(lambda: heal.rebuild(worker.workspace(root)))
                data = await answer()
        except NotIndexed as exc:
            busy = worker.catching_up(root)
            if busy is None:  # say where it looked: a client of another GITRAG_HOME reads this
                home = config.gitrag_home()
                raise NotIndexed(f"{exc} (the daemon looked in {config.repo_data_dir(Path(worker.common_dir))}, "
                                 f"GITRAG_HOME={home or 'unset'})") from None
            raise NotIndexed(f"{str(exc).split(';')[0]}; {busy}: ask again in a moment") from None
        busy = worker.catching_up(root)
        if busy is not None and data.get("commit") != data.get("head"):
            data["catching_up"] = busy
        return data

    def _known(self, worker: RepoWorker, root: str) -> bool:
        """Whether the repository is one the daemon keeps (registered, or indexed on some
        branch): a branch of it with no index yet is caught up on ``ask``; a repository never
        indexed is not indexed behind its owner's back (NotIndexed says to run `gitrag index`)."""
        if registry.is_registered(worker.common_dir):
            return True
        try:
            return bool(worker.workspace(root).state.branches())
        except GitragError:
            return False

    async def cmd_related(self, repo: str, location: str, k: int = 10, path: str = "", lang: str = "",
                          exclude: Any = None, worktree: Any = True, offset: Any = 0,
                          settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """``gitrag related``'s JSON (gitrag.query.related) from the warm store. Raises
        SettingsMismatch, NotIndexed, ConfigError for a bad argument."""
        from gitrag.index.store import SearchFilter
        from gitrag.query.related import parse_location, related, to_json

        globs = _globs(exclude)
        where, line = parse_location(location)
        worker, root = self.worker_for(repo)
        self.check_settings(root, settings)
        self.refuse_never_indexed(worker, root)
        scope = SearchFilter(path, lang, globs) if (path or lang or globs) else None
        if worktree:
            self.warmer.note(root)
        return await worker.read(lambda: to_json(*related(worker.workspace(root), where, line, k=k, scope=scope,
                                                          worktree_overlay=worktree, offset=offset)))

    async def cmd_status(self, repo: str) -> dict[str, Any]:
        """The contract's status JSON for the repository, with its queue and last sync."""
        from gitrag.daemon.status import collect, collect_never_indexed

        worker, root = self.worker_for(repo)
        if self.never_indexed(worker):  # described without opening (so creating) its data folder
            return collect_never_indexed(GitRepo(root), config.load_settings(Path(root)), daemon=self.info())
        data = await worker.read(lambda: collect(worker.workspace(root), daemon=self.info()))
        for entry in data["repos"]:
            entry.update(queue=worker.queue(), syncs=worker.stats["syncs"], last_sync=worker.stats["last_sync"],
                         last_error=worker.stats["last_error"])
        return data

    async def cmd_index(self, repo: str, rebuild: bool = False, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """Sync the work tree now (after queued syncs); the contract's index JSON. Raises
        SettingsMismatch."""
        from gitrag.index.indexer import Indexer

        worker, root = self.worker_for(repo)
        self.check_settings(root, settings)

        def run() -> dict[str, Any]:
            written = 0
            try:
                with worker.indexing_now(root) as record:  # the client polls cmd_progress meanwhile
                    ws = worker.workspace(root, rebuild)
                    log_progress = sync_progress(str(root), ws.repo.branch())

                    def both(stage: str, done: int, total: int) -> None:
                        record(stage, done, total)
                        log_progress(stage, done, total)

                    summary = Indexer(ws, both).sync(rebuild=rebuild)
                written = summary.points_upserted
                return summary.to_json()
            finally:
                worker.settle(written)

        return await worker.serial(run)

    async def cmd_progress(self, repo: str) -> dict[str, Any]:
        """What the daemon is doing for the work tree now, opening nothing (cheap to poll):
        ``{"catching_up", "stage", "done", "total", "seconds"}`` as
        :meth:`RepoWorker.progress_of` (``catching_up`` None: it is not behind on it). For a
        routed ``gitrag index``'s progress and MCP ``index_status``. Raises NotARepository."""
        repo_ = GitRepo(repo)
        worker = self.workers.get(str(repo_.common_dir))
        if worker is None:
            return {"catching_up": None, "stage": None, "done": 0, "total": 0, "seconds": 0.0, "worktree_warmed": None}
        # worktree_warmed: when the work-tree overlay was last built ahead of an ask (Unix time; None: never)
        return worker.progress_of(str(repo_.root)) | {"worktree_warmed": self.warmer.warmed.get(str(repo_.root))}

    async def cmd_gc(self, repo: str) -> dict[str, Any]:
        """Garbage-collect the repository's index now (after queued syncs); see gitrag.daemon.gc."""
        from gitrag.daemon import gc as index_gc
        from gitrag.daemon.gc import worktrees

        worker, root = self.worker_for(repo)

        def run() -> dict[str, Any]:
            try:
                ws = worker.workspace(root)
            except GitragError as exc:  # a full disk: still free what needs no database write
                if not index_gc.disk_full(exc):
                    raise
                return index_gc.unopened_pass(exc)
            checked_out = {b for p in worktrees(ws.repo.common_dir) if (b := worker.workspace(p).repo.checked_out())}
            return index_gc.full_pass(ws, checked_out)

        return await worker.serial(run)

    async def cmd_integrity(self, repo: str, deep: Any = False) -> dict[str, Any]:
        """``gitrag doctor``'s integrity check (gitrag.index.integrity.audit) run here, where the
        store is open, after the queued syncs (a deep check drops cache rows that fail their
        digests): ``{"indexed": bool, "problems": [str], "points": int, "rows": int, "ms": float}``."""
        from gitrag.index import integrity

        worker, root = self.worker_for(repo)

        def run() -> dict[str, Any]:
            t0 = time.perf_counter()
            ws = worker.workspace(root)
            if not ws.state.branches():
                return {"indexed": False, "problems": [], "points": 0, "rows": 0, "ms": 0.0}
            problems, counts = integrity.audit(ws, bool(deep))
            return {"indexed": True, "problems": problems, "points": counts["points"], "rows": counts["rows"],
                    "ms": (time.perf_counter() - t0) * 1000}

        return await worker.serial(run)

    async def cmd_release(self, repo: str) -> dict[str, Any]:
        """Close the repository's workspace (its store) unless a sync or read is in flight, so
        a command that needs the store in its own process (``gitrag eval``) can open it; the
        next event or request opens it again. ``{"released": bool}`` (false: busy, try later)."""
        repo_ = GitRepo(repo)
        worker = self.workers.get(str(repo_.common_dir))
        if worker is None or not worker.is_open:
            return {"released": True}
        return {"released": await worker.serial(worker.close_if_idle)}

    async def cmd_stop(self) -> dict[str, Any]:
        """Ask the daemon to finish the running syncs and exit; ``{"stopping": true}``."""
        self.stop_requested.set()
        return {"stopping": True, "pid": os.getpid()}


def _globs(exclude: Any) -> tuple[str, ...]:
    """The ``exclude`` argument of an ask request as a tuple of globs (None: none).
    Raises ConfigError unless it is a list of strings (their syntax: SearchFilter)."""
    if exclude is None:
        return ()
    if not isinstance(exclude, list) or not all(isinstance(g, str) for g in exclude):
        raise ConfigError(f"exclude must be a list of glob strings, not {exclude!r}"[:200])
    return tuple(exclude)
