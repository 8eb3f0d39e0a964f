"""Garbage collection of repository indexes: the full pass (``gitrag gc``, the daemon's
``gc`` request) and the scheduled pass the daemon runs on a repository's worker thread.

Full pass (:func:`full_pass`):

* branches deleted from git lose their manifest and their tag on the shared collection's
  points (points no other branch holds are deleted);
* the points of branches unused for ``branch_ttl_days`` and checked out in no work tree
  leave the store (the manifest stays: the next sync puts them back with no embedding);
* shared manifest rows, symbol rows and cached vectors that nothing references are deleted
  (the vector cache is shared: every repository's manifests count);
* :func:`drop_gone_repositories`: data folders of repositories that no longer exist;
* the daemon's registry: entries of moved repositories follow them, entries of repositories
  that no longer exist are dropped (:func:`gitrag.daemon.registry.prune`).

Scheduled pass (:func:`scheduled_pass`), every ``gc_s`` in the daemon:

* a workspace idle for ``idle_s`` is closed (shards and SQLite freed; reopened on use)
* expired and deleted branches as above; once a day, cached vectors no manifest
  references are deleted (``State.gc_cache``)
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import structlog

from gitrag import config, identity
from gitrag.daemon import registry
from gitrag.errors import GitragError
from gitrag.git.repo import DETACHED, GitRepo
from gitrag.index import sparse
from gitrag.index.indexer import forget_branch, release_branch
from gitrag.index.state import State
from gitrag.index.workspace import Workspace

log = structlog.get_logger("gitrag.daemon")
CACHE_GC_EVERY_S = 24 * 3600.0


def worktrees(common_dir: str | Path) -> list[str]:
    """The main work tree and every linked worktree that still exists, as resolved paths.
    Raises NotARepository when the repository is gone."""
    repo = GitRepo(common_dir)
    paths = [str(repo.workdir)] if repo.workdir else []
    return paths + [str(p) for p in repo.linked_worktrees()]


def stale(repo: GitRepo, state: State) -> bool:
    """Whether the work tree's branch is behind its HEAD (or not indexed yet); never for a
    branch whose name is not valid UTF-8 (not indexed: the repository's other work trees are)."""
    head, name = repo.head(), repo.checked_out()
    if head is None or name is None:
        return False
    branch = state.branch(name)
    return branch is None or branch.indexed_commit != head


def scheduled_pass(ws: Workspace, checked_out: set[str], last_cache_gc: float) -> dict[str, Any]:
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


def drop_deleted(ws: Workspace) -> list[str]:
    """Forget branches that no longer exist in git; returns their names."""
    from gitrag.query.revisions import is_view

    alive = set(ws.repo.branches()) | {DETACHED}
    gone = [b for b in ws.state.branches() if b.name not in alive and not is_view(b.name)]  # views: LRU
    for b in gone:
        forget_branch(ws, b)
    return [b.name for b in gone]


def drop_expired(ws: Workspace, checked_out: set[str], now: float | None = None) -> list[str]:
    """Take the points of branches unused for the TTL and not checked out out of the store;
    returns their names."""
    now = time.time() if now is None else now
    ttl_s = ws.settings.branch_ttl_days * 86400.0
    dropped = []
    for b in ws.state.branches():
        if b.name in checked_out or (b.last_used or 0.0) > now - ttl_s or not b.materialized:
            continue
        release_branch(ws, b)
        dropped.append(b.name)
    return dropped


def other_states(ws: Workspace) -> list[Path]:
    """The ``state.db`` of the user's other repositories (they share the vector cache)."""
    root = config.data_root()
    return sorted(p for p in root.glob("*/state.db") if p.parent != ws.data_dir) if root.is_dir() else []


def disk_bytes(ws: Workspace) -> int:
    """Bytes on disk of the repository's collections and state (the shared cache not included)."""
    names = {b.collection for b in ws.state.branches()}
    return sum(ws.store.size_bytes(n) for n in names if ws.store.has_collection(n)) + ws.state.size_bytes()


def drop_gone_repositories(ws: Workspace) -> list[str]:
    """Delete the data folders (and server collections) of repositories that no longer exist
    (see :func:`gitrag.identity.gone_folders`); returns the git dirs they served."""
    dropped = []
    for folder in identity.gone_folders(config.data_root()):
        if folder == ws.data_dir:
            continue
        if ws.store.kind == "server":
            prefix = f"g{identity.repo_id_of(folder)}_"
            for name in ws.store.list_collections():
                if name.startswith(prefix):
                    ws.store.drop_collection(name)
        dropped.append(str(identity.recorded(folder)))
        shutil.rmtree(folder, ignore_errors=True)
    return dropped


def full_pass(ws: Workspace, checked_out: set[str], cache: bool = True) -> dict[str, Any]:
    """One full pass; returns ``{"deleted", "dropped", "vectors_deleted", "sparse_deleted",
    "repositories_dropped", "registrations_pruned", "bytes_before", "bytes_after"}`` (bytes
    on disk of the repository's collections and state; ``registrations_pruned``: the
    registry's ``[{"repo", "moved_to"}]`` changes, ``moved_to`` None for a dropped entry)."""
    before = disk_bytes(ws)
    result: dict[str, Any] = {"deleted": drop_deleted(ws), "dropped": drop_expired(ws, checked_out)}
    result["registrations_pruned"] = registry.prune() if cache else []
    result["repositories_dropped"] = drop_gone_repositories(ws) if cache else []
    vectors, sparse_rows = ws.state.gc_cache(sparse.VERSION, other_states(ws)) if cache else (0, 0)
    result.update(vectors_deleted=vectors, sparse_deleted=sparse_rows, bytes_before=before, bytes_after=disk_bytes(ws))
    return result
