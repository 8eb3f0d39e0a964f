"""Garbage collection of one repository's index.

* branches deleted from git lose their collection and manifest;
* collections of branches unused for ``branch_ttl_days`` and checked out in no work tree
  are dropped (the manifest and the vector cache stay: the next sync rebuilds the
  collection with no embedding);
* cached vectors, sparse vectors and symbol rows that no manifest references are deleted.
"""

from __future__ import annotations

from gitrag import sparse

import time
from typing import Any

from gitrag.gitrepo import DETACHED
from gitrag.workspace import Workspace


def drop_deleted(ws: Workspace) -> list[str]:
    """Forget branches that no longer exist in git; returns their names."""
    alive = set(ws.repo.branches()) | {DETACHED}
    gone = [b for b in ws.state.branches() if b.name not in alive]
    for b in gone:
        ws.store.drop_collection(b.collection)
        ws.state.drop_branch(b.name)
    return [b.name for b in gone]


def drop_expired(ws: Workspace, checked_out: set[str], now: float | None = None) -> list[str]:
    """Drop the collections of branches unused for the TTL and not checked out; their names."""
    now = time.time() if now is None else now
    ttl_s = ws.settings.branch_ttl_days * 86400.0
    dropped = []
    for b in ws.state.branches():
        if b.name in checked_out or (b.last_used or 0.0) > now - ttl_s:
            continue
        if ws.store.has_collection(b.collection):
            ws.store.drop_collection(b.collection)
            dropped.append(b.name)
    return dropped


def disk_bytes(ws: Workspace) -> int:
    collections = sum(ws.store.size_bytes(b.collection) for b in ws.state.branches() if ws.store.has_collection(b.collection))
    return collections + ws.state.size_bytes()


def collect(ws: Workspace, checked_out: set[str], cache: bool = True) -> dict[str, Any]:
    """One full pass; returns ``{"deleted", "dropped", "vectors_deleted", "sparse_deleted",
    "bytes_before", "bytes_after"}`` (bytes on disk of the collections and the state)."""
    before = disk_bytes(ws)
    result: dict[str, Any] = {"deleted": drop_deleted(ws), "dropped": drop_expired(ws, checked_out)}
    vectors, sparse_rows = ws.state.gc_cache(sparse.VERSION) if cache else (0, 0)
    result.update(vectors_deleted=vectors, sparse_deleted=sparse_rows, bytes_before=before, bytes_after=disk_bytes(ws))
    return result
