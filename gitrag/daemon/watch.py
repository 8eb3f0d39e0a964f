"""The daemon keeps its socket and its lock, or leaves.

logind removes ``XDG_RUNTIME_DIR`` at logout, and a user may ``rm -rf`` the runtime folder:
the socket and the lock file go with it. A daemon that kept running there would hold the
store while no client could reach it, and a second daemon could take a new lock beside it.
So every :data:`WATCH_S` seconds the daemon looks at both:

- both still its own: nothing to do;
- gone: it takes the lock again (a new file at the same path) and listens again on a new
  socket (log line ``runtime folder gone; socket re-created``);
- the lock or the socket now belongs to another daemon, or the lock cannot be taken: it
  stops (as on SIGTERM: running syncs finish, queued ones are spooled, the store is closed).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import structlog

log = structlog.get_logger("gitrag.daemon")

WATCH_S = 2.0


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
    except OSError:
        return -1  # there but unreadable: not ours any more


class Holder:
    """What the daemon holds: its lock file (flocked) and its listening server."""

    def __init__(self, lock: IO[str], lock_path: Path, server: Any, socket_path: Path) -> None:
        self.lock, self.lock_path, self.server, self.socket_path = lock, lock_path, server, socket_path
        self.lock_inode = os.fstat(lock.fileno()).st_ino
        self.socket_inode = _inode(socket_path)

    def close_lock(self) -> None:
        self.lock.close()


async def watch(holder: Holder, stop: asyncio.Event, listen: Callable[[], Awaitable[Any]],
                take_lock: Callable[[], IO[str]], every_s: float = WATCH_S) -> None:
    """Until ``stop`` is set: every ``every_s`` seconds check the lock and the socket (see the
    module doc). ``listen()`` makes a new server on the socket path; ``take_lock()`` returns
    the flocked lock file or raises (another daemon has it)."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every_s)
            return
        except TimeoutError:
            pass
        lock_now, socket_now = _inode(holder.lock_path), _inode(holder.socket_path)
        if lock_now == holder.lock_inode and socket_now == holder.socket_inode:
            continue
        if (lock_now is not None and lock_now != holder.lock_inode) or \
                (socket_now is not None and socket_now != holder.socket_inode):
            log.warning("another daemon took the lock or the socket; stopping", socket=str(holder.socket_path))
            stop.set()
            return
        try:
            if lock_now is None:
                new_lock = take_lock()
                holder.close_lock()
                holder.lock, holder.lock_inode = new_lock, os.fstat(new_lock.fileno()).st_ino
            if socket_now is None:
                holder.server.close()
                holder.server = await listen()
                holder.socket_inode = _inode(holder.socket_path)
        except Exception as exc:  # noqa: BLE001 - whatever it is, a daemon nobody can reach must go
            log.warning("cannot re-create the socket or the lock; stopping", error=repr(exc))
            stop.set()
            return
        log.warning("runtime folder gone; socket re-created", socket=str(holder.socket_path))


def flocked(path: Path) -> bool:
    """Whether ``path`` is flocked by someone (for tests and doctor)."""
    try:
        fh = open(path)  # noqa: SIM115 - closed in the finally below
    except OSError:
        return False
    try:
        fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        fh.close()
