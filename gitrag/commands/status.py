from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.markup import escape

from gitrag import output
from gitrag.errors import EXIT_OK
from gitrag.workspace import Workspace, open_workspace


def status(repo: str, as_json: bool) -> int:
    from gitrag.daemon import routing

    data = routing.status(repo)  # None: no daemon runs
    if data is None:
        ws = open_workspace(repo)
        try:
            data = collect(ws)
        finally:
            ws.close()
    if as_json:
        output.emit_json(data)
    else:
        _print(data)
    return EXIT_OK


def _by_kind(counts: dict[str, int]) -> dict[str, int]:
    """{skip reason: files} as {kind of reason (``gitrag.policy.reason_kind``): files}, most first."""
    from gitrag.policy import reason_kind

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
            "name": b.name, "head": head, "indexed_commit": b.indexed_commit,
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


def _branch_head(ws: Workspace, name: str, current: str) -> str | None:
    if name == current:
        return ws.repo.head()
    from gitrag.revisions import PREFIX, is_view

    if is_view(name):  # a revision view (ask --rev) is at its commit by definition
        return name[len(PREFIX):-1]
    try:
        ref = ws.repo.repo.lookup_branch(name)
    except (ValueError, KeyError):
        return None
    return str(ref.target) if ref is not None else None


def _print(data: dict[str, Any]) -> None:
    d = data["daemon"]
    output.out.print(f"daemon: {'running, pid ' + str(d['pid']) if d['running'] else 'not running'}")
    output.out.print(f"embedder: {data['embedder']['name']}   store: {data['store']['kind']}")
    for repo in data["repos"]:
        output.out.print(f"[bold]{escape(repo['path'])}[/]  ({repo['worktree_changes']} work-tree change(s) not indexed)")
        for b in repo["branches"]:
            mark = "*" if b["current"] else " "
            head = str(b["head"])[:12] if b["head"] else "not checked out"
            fresh = "up to date" if b["up_to_date"] else f"indexed {str(b['indexed_commit'])[:12]}, head {head}"
            size = f"{b['collection_bytes'] / 1e6:.1f} MB" if b["materialized"] else "dropped (rebuilt on use)"
            output.out.print(f" {mark} {escape(_pad(b['name'], 24))} {fresh:<40} {b['points']:>7} points  {size}")
            if b["current"] and b.get("skipped"):
                skipped = ", ".join(f"{n} {reason}" for reason, n in b["skipped"].items())
                output.out.print(f"   skipped files: {skipped}", markup=False)
        if not repo["branches"] and "head" in repo and repo["head"] is None:
            output.out.print("   no commit yet: commit first (`git commit`); then `gitrag index`, or the hooks, index it")
        elif not repo["branches"]:
            output.out.print("   nothing indexed yet: run `gitrag index`")
        output.out.print(f"   state: {repo['state_bytes'] / 1e6:.1f} MB in {repo['data_dir']}", markup=False)


def _pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (a CJK character takes two)."""
    return text + " " * max(0, width - cell_len(text))
