"""Give memory back to the system between syncs (glibc and Linux only; no-ops elsewhere).

A sync of a large repository allocates a few hundred MB of short-lived Python objects and
numpy arrays (chunk texts, vectors, records). CPython frees them, but glibc keeps the
freed pages in its heaps: measured on the standard library corpus (27,780 chunks), RSS
stayed 134 MB above the live data until ``malloc_trim(0)``. Threads make it worse (one
heap, "arena", per thread that ever allocated), so the daemon caps the arenas at
``ARENAS`` before its worker threads start.

What stays after a sync, measured on the same corpus (BENCHMARKS.md, "Daemon memory"):
the sparse-term caches (``functools.lru_cache`` of identifiers, stems and term ids,
65,536 entries each when full: ~30 MB of small objects, dropped by :func:`clear_caches`),
and the pages of the store's memory-mapped segment and WAL files that the sync touched
(~100 MB of file-backed RSS after a sync of one commit: the shard replays its WAL on
open), the static model's memory-mapped vectors (15.6 MB, every row touched by a large
sync; a question touches a few), and SQLite's page caches of the state and the vector cache (a few MB, freed by
:func:`shrink_sqlite`). The store's pages belong to the kernel's page cache: :func:`drop_file_pages` unmaps them
from the process (``madvise(MADV_DONTNEED)``), so they stop counting in its RSS and the
kernel may reclaim them; the next search faults the ones it reads back in from the page
cache (a minor fault, no disk read while they are cached).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sqlite3
import sys
from collections.abc import Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter number
_MADV_DONTNEED = 4
# modules whose function caches fill during a sync and serve only the next one
CACHED_MODULES = ("gitrag.index.sparse", "gitrag.git.repo")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None  # musl has neither


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas of this process at ``count``; True when it took effect."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, count))


def trim() -> bool:
    """Return free heap pages to the system (``malloc_trim(0)``); True when some were."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def clear_caches() -> int:
    """Empty the ``functools`` caches of :data:`CACHED_MODULES` (imported ones only);
    returns the entries dropped. They refill on the next sync (a few seconds' worth of
    sparse-term work on the standard library corpus, most of it in the first batch)."""
    dropped = 0
    for name in CACHED_MODULES:
        module = sys.modules.get(name)
        for value in vars(module).values() if module is not None else ():
            if isinstance(value, type):  # a cache's class, not a cache
                continue
            info = getattr(value, "cache_info", None)
            if callable(info) and callable(getattr(value, "cache_clear", None)):
                dropped += info().currsize
                value.cache_clear()
    return dropped


def file_mappings(root: Path) -> list[tuple[int, int, str]]:
    """This process's memory mappings of files below ``root`` that :func:`drop_file_pages`
    may drop: (start address, length in bytes, path). Only shared mappings and read-only
    ones: dropping a private writable mapping would lose its copied-on-write pages."""
    prefix = str(Path(root).resolve()) + os.sep
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as fh:
            for line in fh:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith(prefix):
                    continue
                perms = fields[1]
                if perms[3] != "s" and perms[1] == "w":
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                found.append((start, end - start, fields[5].rstrip("\n")))
    except OSError:  # no /proc: nothing to drop
        return []
    return found


def drop_file_pages(root: Path, lock: Any = None) -> int:
    """Unmap the resident pages of the files below ``root`` mapped into this process (the
    store's segments and WAL; see the module doc); returns the bytes of mappings advised.
    ``lock``: held meanwhile, so no shard is mapped or unmapped between reading
    /proc/self/maps and the ``madvise`` calls (the store's lock)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "madvise"):
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    with lock if lock is not None else nullcontext():
        for start, length, _path in file_mappings(root):
            if libc.madvise(start, length, _MADV_DONTNEED) == 0:
                done += length
    return done


def shrink_sqlite(connections: Iterable[sqlite3.Connection | None]) -> int:
    """``PRAGMA shrink_memory`` on each open connection: SQLite frees its page cache
    (up to ``cache_size`` pages per connection, refilled from the OS cache on the next
    read); returns the connections shrunk. A closed connection is skipped."""
    done = 0
    for db in connections:
        if db is None:
            continue
        try:
            db.execute("PRAGMA shrink_memory")
            done += 1
        except sqlite3.ProgrammingError:  # closed meanwhile
            continue
    return done


@runtime_checkable
class MapsFiles(Protocol):
    """An adapter that keeps files memory-mapped for as long as it is open (the embedded
    store's segments and WAL, the static model's vectors): :func:`release` drops the pages
    of those a sync touched. Adapters that map nothing (a Qdrant server, an HTTP embedder)
    do not have the method."""

    def mapped_files(self) -> tuple[Path, Any]:
        """(the folder its mapped files are below, the lock to hold while their pages are
        dropped so none is mapped or unmapped meanwhile, or None)."""
        ...


def release(databases: Iterable[sqlite3.Connection | None] = (), mapped: Iterable[object] = ()) -> bool:
    """After a sync: empty the sync's caches and SQLite's page caches (``databases``),
    collect the garbage (cycles too), ``trim``, and drop the file pages of those of
    ``mapped`` that map files (:class:`MapsFiles`, below their folder, under their lock;
    see :func:`drop_file_pages`)."""
    clear_caches()
    shrink_sqlite(databases)
    gc.collect()
    for holder in mapped:
        if isinstance(holder, MapsFiles):
            drop_file_pages(*holder.mapped_files())
    return trim()
