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
        freshes = [_freshness(b) for b in repo["branches"]]
        width = max([40, *map(len, freshes)])  # the points column lines up under the longest
        for b, fresh in zip(repo["branches"], freshes):
            mark = "*" if b["current"] else " "
            size = f"{b['collection_bytes'] / 1e6:.1f} MB" if b["materialized"] else "dropped (rebuilt on use)"
            output.out.print(f" {mark} {escape(_pad(b['name'], 24))} {escape(fresh.ljust(width))} {b['points']:>7} points  {size}")
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


def _freshness(b: dict[str, Any]) -> str:
    """A branch's index against its head, saying what a name without a head is: a branch deleted
    in git (gc forgets it), the view of a detached HEAD not checked out here now."""
    if b["indexed_commit"]:
        indexed = f"indexed {str(b['indexed_commit'])[:12]}"
    elif b["points"]:  # an interrupted first index: its batches so far are written, and answer
        indexed = "a partial index (its first index has not finished)"
    else:
        indexed = "nothing indexed yet (first index not finished)"
    kind = b.get("kind")  # a daemon of an older gitrag sends none
    if b["up_to_date"]:
        return "up to date"
    if kind == "deleted" or (kind is None and b["head"] is None and not b["current"]):
        return f"{indexed}; branch deleted in git: `gitrag gc` forgets it"
    if kind == "detached" and b["head"] is None:
        return f"{indexed}; a detached HEAD's view, not checked out now"
    return f"{indexed}, head {str(b['head'])[:12] if b['head'] else 'none (no commit)'}"


def _pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (a CJK character takes two)."""
    return text + " " * max(0, width - cell_len(text))
