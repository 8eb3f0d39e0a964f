"""One in-process sync of a repository at a time: ``<repository data folder>/index.lock``.

Two ``gitrag index`` (or ``eval``, or ``install``'s first index) started close together
with no daemon would both chunk and embed, and the second would fail only when it came to
open the store (the embedded store's shard lock, see :mod:`gitrag.index.store.edge`). A command
takes this lock before any work instead: the second one learns at once that another
process (named by the pid written in the file) is indexing, says so in one line, and waits
for it; its own sync then has little or nothing left to do.

The lock is an exclusive ``flock`` on the file, released when the process exits however
it exits. Where the file cannot be made or the file system has no ``flock``, there is no
lock and the store's own lock is all there is.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = "index.lock"


def holder(data_dir: Path) -> int | None:
    """The pid written in ``data_dir``'s lock file by the process that last took it (None: unknown)."""
    try:
        text = (Path(data_dir) / LOCK_FILE).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def waiting_notice(pid: int | None) -> str:
    """The line a waiting command prints: ``another gitrag index (pid 123) is indexing this repository; waiting``."""
    who = f"another gitrag index (pid {pid})" if pid else "another gitrag index"
    return f"{who} is indexing this repository; waiting"


@contextmanager
def held(data_dir: Path, on_wait: Callable[[int | None], None]) -> Iterator[None]:
    """Hold the repository's index lock for the block. When another process holds it,
    ``on_wait(its pid or None)`` is called once and the call blocks until it is free
    (Ctrl-C interrupts the wait: KeyboardInterrupt)."""
    path = Path(data_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:  # a read-only data folder: no lock of our own
        fd = None
    try:
        if fd is not None and _take(fd, path, on_wait):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the flock


def _take(fd: int, path: Path, on_wait: Callable[[int | None], None]) -> bool:
    """Lock ``fd`` (waiting for the holder, after ``on_wait``); False where flock is unsupported."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
    on_wait(holder(path.parent))
    fcntl.flock(fd, fcntl.LOCK_EX)
    return True
