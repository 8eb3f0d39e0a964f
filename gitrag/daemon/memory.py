"""Give memory back to the system between syncs (glibc only; a no-op elsewhere).

A sync of a large repository allocates a few hundred MB of short-lived Python objects and
numpy arrays (chunk texts, vectors, records). CPython frees them, but glibc keeps the
freed pages in its heaps: measured on the standard library corpus (27,780 chunks), RSS
stayed 134 MB above the live data until ``malloc_trim(0)``. Threads make it worse (one
heap, "arena", per thread that ever allocated), so the daemon caps the arenas at
``ARENAS`` before its worker threads start.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter number


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
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


def release() -> bool:
    """After a sync: collect the garbage (cycles too), then ``trim``."""
    gc.collect()
    return trim()
