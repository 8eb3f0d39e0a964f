from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.markup import escape

from gitrag.daemon.status import collect
from gitrag.errors import EXIT_OK
from gitrag.index.workspace import NOT_INDEXED, open_workspace
from gitrag.surfaces import output

if TYPE_CHECKING:
    from gitrag.config import Settings


def status(repo: str, as_json: bool) -> int:
    from gitrag.daemon import routing

    data = routing.status(repo)  # None: no daemon runs
    settings = None
    if data is None:  # a repository gitrag never indexed here: described, nothing written
        data, settings = _never_indexed(repo)
    if data is None:
        ws = open_workspace(repo, settings)
        try:
            data = collect(ws)
        finally:
            ws.close()
    if as_json:
        output.emit_json(data)
    else:
        _print(data)
    return EXIT_OK


def _never_indexed(path: str) -> tuple[dict[str, Any] | None, Settings]:
    """(the status of a repository with no data folder here (``data_dir`` None, no branch), read
    without creating its state (no id file in the git dir, no folder), or None when it has one;
    its settings, read once)."""
    from gitrag import config
    from gitrag.daemon.status import collect_never_indexed
    from gitrag.git.repo import GitRepo

    repo = GitRepo(path)
    settings = config.load_settings(repo.workdir)
    repo.branch()  # a name gitrag refuses says so, as with an index
    if config.existing_repo_data_dir(repo.common_dir) is not None:
        return None, settings
    config.check_writable()  # a home this user cannot write says so here too (NotWritable), not "run install"
    return collect_never_indexed(repo, settings), settings


def _print(data: dict[str, Any]) -> None:
    d = data["daemon"]
    output.out.print(f"daemon: {'running, pid ' + str(d['pid']) if d['running'] else 'not running'}")
    output.out.print(f"embedder: {data['embedder']['name']}   store: {data['store']['kind']}")
    for repo in data["repos"]:
        output.out.print(f"[bold]{escape(repo['path'])}[/]  ({repo['worktree_changes']} work-tree change(s) not indexed)")
        for b in repo["branches"]:
            mark = "*" if b["current"] else " "
            head = str(b["head"])[:12] if b["head"] else "not checked out"
            indexed = str(b["indexed_commit"])[:12] if b["indexed_commit"] else "nothing yet (first index not finished)"
            fresh = "up to date" if b["up_to_date"] else f"indexed {indexed}, head {head}"
            size = f"{b['collection_bytes'] / 1e6:.1f} MB" if b["materialized"] else "dropped (rebuilt on use)"
            output.out.print(f" {mark} {escape(_pad(b['name'], 24))} {fresh:<40} {b['points']:>7} points  {size}")
            if b["current"] and b.get("skipped"):
                skipped = ", ".join(f"{n} {reason}" for reason, n in b["skipped"].items())
                output.out.print(f"   skipped files: {skipped}", markup=False)
        if not repo["branches"] and "head" in repo and repo["head"] is None:
            output.out.print("   no commit yet: commit first (`git commit`); then `gitrag index`, or the hooks, index it")
        elif not repo["branches"] and repo["data_dir"] is None:
            output.out.print(f"   {NOT_INDEXED}", markup=False)
        elif not repo["branches"]:
            output.out.print("   nothing indexed yet: run `gitrag index`")
        if repo["data_dir"] is not None:
            output.out.print(f"   state: {repo['state_bytes'] / 1e6:.1f} MB in {repo['data_dir']}", markup=False)


def _pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (a CJK character takes two)."""
    return text + " " * max(0, width - cell_len(text))
