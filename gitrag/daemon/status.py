"""The status of one repository's index (the contract's ``gitrag status --json``), built
where the daemon and the CLI can both reach it: the daemon answers ``status`` with it, and
``gitrag status`` without a daemon builds it in process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gitrag.index.workspace import Workspace

if TYPE_CHECKING:
    from gitrag.config import Settings
    from gitrag.git.repo import GitRepo


def _by_kind(counts: dict[str, int]) -> dict[str, int]:
    """{skip reason: files} as {kind of reason (``gitrag.index.policy.reason_kind``): files}, most first."""
    from gitrag.index.policy import reason_kind

    kinds: dict[str, int] = {}
    for reason, n in counts.items():
        kinds[reason_kind(reason)] = kinds.get(reason_kind(reason), 0) + n
    return dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def daemon_info() -> dict[str, Any]:
    """``{"running", "pid", "socket"}``: whether a daemon answers on the socket."""
    from gitrag.daemon.client import probe

    return probe()


def collect(ws: Workspace, daemon: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contract's status JSON for one repository (``daemon``: the daemon block, when
    the daemon itself answers)."""
    current = ws.repo.branch()
    branches = []
    for b in ws.state.branches():
        head = _branch_head(ws, b.name, current)
        branches.append({
            "name": b.name, "kind": branch_kind(b.name, head, current), "head": head, "indexed_commit": b.indexed_commit,
            "up_to_date": head is not None and head == b.indexed_commit, "current": b.name == current,
            "points": ws.state.point_count(b.name), "collection": b.collection,
            "collection_bytes": ws.store.size_bytes(b.collection) if ws.store.has_collection(b.collection) else 0,
            "materialized": b.materialized and ws.store.has_collection(b.collection), "last_used": b.last_used,
            "skipped": _by_kind(ws.state.skip_counts(b.name)),
        })
    repo = {
        "path": str(ws.repo.root), "branch": current, "head": ws.repo.head(), "branches": branches, "queue": 0,
        "worktree_changes": ws.repo.worktree_changes(), "data_dir": str(ws.data_dir),
        "state_bytes": ws.state.size_bytes(),
    }
    return {
        "daemon": daemon if daemon is not None else daemon_info(), "repos": [repo],
        "embedder": {"name": ws.settings.embedder}, "store": {"kind": ws.store.kind, "url": ws.settings.qdrant_url or None},
    }


def collect_never_indexed(repo: GitRepo, settings: Settings, daemon: dict[str, Any] | None = None) -> dict[str, Any]:
    """The status JSON of a repository with no data folder here (``data_dir`` null, no
    branch), built without opening (so creating) its workspace; ``daemon`` as in :func:`collect`."""
    info: dict[str, Any] = {
        "path": str(repo.root), "branch": repo.branch(), "head": repo.head(), "branches": [], "queue": 0,
        "worktree_changes": repo.worktree_changes(), "data_dir": None, "state_bytes": 0,
    }
    return {
        "daemon": daemon if daemon is not None else daemon_info(), "repos": [info],
        "embedder": {"name": settings.embedder},
        "store": {"kind": "server" if settings.qdrant_url else "embedded", "url": settings.qdrant_url or None},
    }


def branch_kind(name: str, head: str | None, current: str) -> str:
    """What an indexed name stands for: ``revision`` (an ``ask --rev`` view), ``detached`` (the
    view of a detached HEAD, gitrag.git.repo.DETACHED), ``deleted`` (a branch git no longer has:
    gc forgets it) or ``branch``."""
    from gitrag.git.repo import DETACHED
    from gitrag.query.revisions import is_view

    if is_view(name):
        return "revision"
    if name == DETACHED:
        return "detached"
    return "deleted" if head is None and name != current else "branch"


def _branch_head(ws: Workspace, name: str, current: str) -> str | None:
    if name == current:
        return ws.repo.head()
    from gitrag.query.revisions import PREFIX, is_view

    if is_view(name):  # a revision view (ask --rev) is at its commit by definition
        return name[len(PREFIX):-1]
    return ws.repo.branch_tip(name)
