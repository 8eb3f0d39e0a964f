"""Garbage collection in the daemon, run on a repository's worker thread.

* a workspace idle for ``idle_s`` is closed (shards and SQLite freed; reopened on use)
* the points of a branch not used for ``branch_ttl_days`` and checked out in no work tree
  leave the shared collection: the vector cache keeps their vectors, so they come back on
  use with no embedding (design principle 4)
* a branch deleted from git loses its manifest and its points (those no other branch holds)
* once a day, cached vectors no manifest references are deleted (``State.gc_cache``)
"""

from __future__ import annotations

from gitrag import sparse

import time
from pathlib import Path
from typing import Any

import structlog

from gitrag.errors import GitragError
from gitrag.gc import drop_deleted, drop_expired, other_states
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


def collect(ws: Workspace, checked_out: set[str], last_cache_gc: float) -> dict[str, Any]:
    """One gc pass over an open workspace: ``{"dropped": [...], "cache_gc": bool, "vectors": n}``."""
    result: dict[str, Any] = {"dropped": [], "cache_gc": False, "vectors": 0}
    try:
        result["deleted"] = drop_deleted(ws)
        result["dropped"] = drop_expired(ws, checked_out)
        if time.time() - last_cache_gc > CACHE_GC_EVERY_S:
            result["vectors"], _ = ws.state.gc_cache(sparse.VERSION, other_states(ws))
            result["cache_gc"] = True
    except GitragError as exc:
        log.warning("gc failed", repo=str(ws.repo.common_dir), error=str(exc))
    if result.get("deleted") or result["dropped"] or result["vectors"]:
        log.info("gc", repo=str(ws.repo.common_dir), **result)
    return result
