"""The daemon's life: one instance, a socket, signals, and a clean exit.

    flock <runtime dir>/daemon.lock (non-blocking): a second daemon exits with AlreadyRunning
    -> replace a stale socket (never a live one), listen (0600 in a 0700 folder)
    -> drain the spool, start the jobs (reconcile runs at once)
    -> serve until SIGTERM/SIGINT or a ``stop`` request; every 2 s check that the socket and
       the lock are still there and ours (re-create them, or stop: gitrag.daemon.watch)
    -> stop listening and scheduling, let each running sync finish, spool the work trees
       still waiting (the next start syncs them), close workspaces, remove the socket
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
from dataclasses import dataclass
from typing import IO

import structlog

from gitrag.daemon import memory, notify, protocol, spool, watch
from gitrag.daemon.jobs import Jobs
from gitrag.daemon.server import serve
from gitrag.daemon.service import Service
from gitrag.errors import AlreadyRunning as AlreadyRunning  # defined there, named here too

log = structlog.get_logger("gitrag.daemon")


@dataclass(frozen=True)
class Options:
    """Timings in seconds."""

    debounce_s: float = 0.5
    max_delay_s: float = 5.0
    reconcile_s: float = 300.0
    gc_s: float = 3600.0
    idle_s: float = 1800.0
    orphan_s: float = 600.0  # no repository registered: stop after this long without a request (0: never)


def acquire_lock() -> IO[str]:
    """Hold the daemon lock for the life of the returned file; writes our pid into it.
    Raises AlreadyRunning (with the holder's pid) when another daemon has it."""
    path = protocol.lock_path()
    protocol.private_dir(path.parent)
    fh = open(path, "a+")  # noqa: SIM115 - held (and flocked) for the daemon's life: returned to the caller
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        pid = fh.read().strip() or "?"
        fh.close()
        raise AlreadyRunning(f"a gitrag daemon (pid {pid}) already runs on {protocol.socket_path()}; "
                             f"stop it first with `gitrag daemon --stop`") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


def run(options: Options | None = None) -> int:
    """Run the daemon in the foreground until told to stop; returns the exit code (0).
    Raises AlreadyRunning, SocketInUse, or OSError when the socket cannot be made."""
    from gitrag.query import worktree

    lock = [acquire_lock()]  # the watch may swap it for a new one (see gitrag.daemon.watch)
    memory.limit_arenas()  # before any worker thread allocates
    worktree.PROVISIONAL = True  # the warm-up (gitrag.daemon.warm) chunks exactly right after an ask
    try:
        return asyncio.run(_serve(options or Options(), lock))
    finally:
        lock[0].close()


async def _serve(opts: Options, lock: list[IO[str]]) -> int:
    path = protocol.socket_path()
    service = Service(str(path))
    jobs = Jobs(service, opts.debounce_s, opts.max_delay_s, opts.reconcile_s, opts.gc_s, opts.idle_s,
                orphan_s=opts.orphan_s)
    service.debounce = jobs.debounce
    server = await serve(service, path)
    holder = watch.Holder(lock[0], protocol.lock_path(), server, path)
    watcher = asyncio.get_running_loop().create_task(
        watch.watch(holder, service.stop_requested, lambda: serve(service, path), acquire_lock))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, service.stop_requested.set)
    jobs.start()
    log.info("daemon started", pid=os.getpid(), socket=str(path))
    await service.stop_requested.wait()
    log.info("daemon stopping", pid=os.getpid())
    await watcher
    lock[0] = holder.lock
    holder.server.close()
    jobs.shutdown()
    await _finish(service)
    if os.path.exists(path) and os.stat(path).st_ino == holder.socket_inode:
        os.unlink(path)
    log.info("daemon stopped", pid=os.getpid())
    return 0


async def _finish(service: Service) -> None:
    """Let running syncs finish; spool what is still waiting so no event is lost."""
    results = await asyncio.gather(*(w.stop() for w in service.workers.values()), return_exceptions=True)
    for worker, left in zip(list(service.workers.values()), results, strict=True):
        if isinstance(left, BaseException):
            log.error("worker did not stop cleanly", repo=worker.common_dir, error=repr(left))
            continue
        for worktree, branches in left.items():
            one_each: list[str | None] = [*(branches or [])] or [None]
            for branch in one_each:  # one event per reported branch: each is synced again
                spool.append(notify.event("daemon-stop", [], worktree, worker.common_dir, branch))
