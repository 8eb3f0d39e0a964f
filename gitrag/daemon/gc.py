"""Garbage collection in the daemon, run on a repository's worker thread.

* a workspace idle for ``idle_s`` is closed (shards and SQLite freed; reopened on use)
* the collection of a branch not used for ``branch_ttl_days`` and checked out in no work
  tree is dropped: the vector cache keeps its vectors, so it is rebuilt on use with no
  embedding (design principle 4)
* once a day, cached vectors no manifest references are deleted (``State.gc_cache``)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog

from gitrag.errors import GitragError
from gitrag.gitrepo import GitRepo
from gitrag.state import State
from gitrag.workspace import Workspace

log = structlog.get_logger("gitrag.daemon")
CACHE_GC_EVERY_S = 24 * 3600.0


def worktrees(common_dir: str | Path) -> list[str]:
    """The main work tree and every linked worktree that still exists, as resolved paths.
    Raises NotARepository when the repository is gone."""
    repo = GitRepo(common_dir)
    paths = [str(repo.workdir)] if repo.workdir else []
    for name in repo.repo.list_worktrees():
        wt = repo.repo.lookup_worktree(name)
        if not wt.is_prunable and Path(wt.path).is_dir():
            paths.append(str(Path(wt.path).resolve()))
    return paths


def stale(repo: GitRepo, state: State) -> bool:
    """Whether the work tree's branch is behind its HEAD (or not indexed yet)."""
    head = repo.head()
    if head is None:
        return False
    branch = state.branch(repo.branch())
    return branch is None or branch.indexed_commit != head


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


def collect(ws: Workspace, checked_out: set[str], last_cache_gc: float) -> dict[str, Any]:
    """One gc pass over an open workspace: ``{"dropped": [...], "cache_gc": bool, "vectors": n}``."""
    result: dict[str, Any] = {"dropped": [], "cache_gc": False, "vectors": 0}
    try:
        result["dropped"] = drop_expired(ws, checked_out)
        if time.time() - last_cache_gc > CACHE_GC_EVERY_S:
            result["vectors"], _ = ws.state.gc_cache()
            result["cache_gc"] = True
    except GitragError as exc:
        log.warning("gc failed", repo=str(ws.repo.common_dir), error=str(exc))
    if result["dropped"] or result["vectors"]:
        log.info("gc", repo=str(ws.repo.common_dir), **result)
    return result
