"""Garbage collection of repository indexes: the full pass (``gitrag gc``, the daemon's
``gc`` request) and the scheduled pass the daemon runs on a repository's worker thread.

Full pass (:func:`full_pass`):

* branches deleted from git lose their manifest and their tag on the shared collection's
  points (points no other branch holds are deleted);
* the points of branches unused for ``branch_ttl_days`` and checked out in no work tree
  leave the store (the manifest stays: the next sync puts them back with no embedding);
* shared manifest rows, symbol rows and cached vectors that nothing references are deleted
  (the vector cache is shared: every repository's manifests count);
* the store's optimizer runs on each collection with writes it has not seen (a sync runs it
  only once enough changed: gitrag.index.views.settle);
* :func:`drop_gone_repositories`: data folders of repositories that no longer exist;
* the daemon's registry: entries of moved repositories follow them, entries of repositories
  that no longer exist are dropped (:func:`gitrag.daemon.registry.prune`).

Scheduled pass (:func:`scheduled_pass`), every ``gc_s`` in the daemon:

* a workspace idle for ``idle_s`` is closed (shards and SQLite freed; reopened on use)
* expired and deleted branches as above, and the optimizer as above; once a day, cached
  vectors no manifest references are deleted (``State.gc_cache``)
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import structlog

from gitrag import config, identity
from gitrag.daemon import registry
from gitrag.errors import DiskFull, GitragError
from gitrag.git.repo import DETACHED, GitRepo
from gitrag.index import sparse, views
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
        result["optimized"] = views.settle_all(ws)
        if time.time() - last_cache_gc > CACHE_GC_EVERY_S:
            result["vectors"], _ = ws.state.gc_cache(sparse.VERSION, other_states(ws))
            result["cache_gc"] = True
    except GitragError as exc:
        log.warning("gc failed", repo=str(ws.repo.common_dir), error=str(exc))
    if result.get("deleted") or result["dropped"] or result["vectors"] or result.get("optimized"):
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


def drop_gone_repositories(ws: Workspace | None) -> list[str]:
    """Delete the data folders (and server collections) of repositories that no longer exist
    (see :func:`gitrag.identity.gone_folders`: a git dir missing is given ``branch_ttl_days``
    before its data goes, so a repository moved while nothing ran keeps its index); returns
    the git dirs they served. Deleting files needs no SQLite write, so this runs on a full
    disk too; ``ws`` None (its state could not be opened): the local folders only."""
    dropped = []
    ttl_days = (ws.settings if ws is not None else config.load_settings()).branch_ttl_days
    for folder in identity.gone_folders(config.data_root(), grace_s=ttl_days * 86400):
        if ws is not None and folder == ws.data_dir:
            continue
        if ws is not None and ws.store.kind == "server":
            prefix = f"g{identity.repo_id_of(folder)}_"
            for name in ws.store.list_collections():
                if name.startswith(prefix):
                    ws.store.drop_collection(name)
        dropped.append(str(identity.recorded(folder)))
        shutil.rmtree(folder, ignore_errors=True)
    return dropped


def full_pass(ws: Workspace, checked_out: set[str], cache: bool = True) -> dict[str, Any]:
    """One full pass; returns ``{"deleted", "dropped", "optimized", "vectors_deleted",
    "sparse_deleted", "repositories_dropped", "registrations_pruned", "bytes_before",
    "bytes_after", "errors"}`` (``optimized``: the collections whose optimizer ran; bytes on
    disk of the repository's collections and state; ``registrations_pruned``: the
    registry's ``[{"repo", "moved_to"}]`` changes, ``moved_to`` None for a dropped entry).

    Each step runs whatever the others did: the folders of gone repositories are deleted
    first (no SQLite write: it works on a full disk and frees space for the rest), and a step
    that fails (a full disk, an I/O error) is one entry of ``errors``, ``[{"step", "error",
    "disk_full"}]``, and leaves its fields at their empty value."""
    result: dict[str, Any] = {"deleted": [], "dropped": [], "optimized": [], "registrations_pruned": [],
                              "repositories_dropped": [], "vectors_deleted": 0, "sparse_deleted": 0, "errors": []}
    result["bytes_before"] = disk_bytes(ws)

    def step(name: str, run: Any) -> Any:
        try:
            return run()
        except (GitragError, sqlite3.Error, OSError) as exc:
            log.warning("gc step failed", step=name, error=str(exc))
            result["errors"].append({"step": name, "error": step_error(exc), "disk_full": disk_full(exc)})
            return None

    if cache:
        result["repositories_dropped"] = step("repositories_dropped", lambda: drop_gone_repositories(ws)) or []
    result["deleted"] = step("deleted", lambda: drop_deleted(ws)) or []
    result["dropped"] = step("dropped", lambda: drop_expired(ws, checked_out)) or []
    result["optimized"] = step("optimized", lambda: views.settle_all(ws)) or []
    if cache:
        result["registrations_pruned"] = step("registrations_pruned", registry.prune) or []
        vectors, sparse_rows = step("cache", lambda: ws.state.gc_cache(sparse.VERSION, other_states(ws))) or (0, 0)
        result.update(vectors_deleted=vectors, sparse_deleted=sparse_rows)
    result["bytes_after"] = disk_bytes(ws)
    return result


def unopened_pass(exc: BaseException) -> dict[str, Any]:
    """gc when the repository's state cannot be opened (``exc``, a full disk): only what needs
    no database write, the data folders of repositories that no longer exist; the result has
    :func:`full_pass`'s fields, ``errors`` starting with step ``open`` (the bytes are 0: not
    measured)."""
    result: dict[str, Any] = {"deleted": [], "dropped": [], "optimized": [], "registrations_pruned": [],
                              "repositories_dropped": [], "vectors_deleted": 0, "sparse_deleted": 0,
                              "bytes_before": 0, "bytes_after": 0,
                              "errors": [{"step": "open", "error": step_error(exc), "disk_full": disk_full(exc)}]}
    try:
        result["repositories_dropped"] = drop_gone_repositories(None)
    except OSError as err:
        result["errors"].append({"step": "repositories_dropped", "error": step_error(err), "disk_full": disk_full(err)})
    return result


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write refused for want of space (or an I/O error, its usual face)."""
    if isinstance(exc, DiskFull):
        return True
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    return isinstance(exc, sqlite3.OperationalError) and ("full" in str(exc) or "disk I/O" in str(exc))


def step_error(exc: BaseException) -> str:
    """A failed gc step's cause in one line, without the indexer's "run `gitrag index`"
    advice (gc is what frees space; the command says what to do)."""
    if isinstance(exc, DiskFull) and exc.path:
        return f"cannot write {exc.path} ({exc.cause})"
    return str(exc).strip() or type(exc).__name__
