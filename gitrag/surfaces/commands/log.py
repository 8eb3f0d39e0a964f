"""``gitrag log QUESTION``: commits ranked by how well their message and changed paths match."""

from __future__ import annotations

import os
from typing import Any

from rich.markup import escape

from gitrag import config
from gitrag.errors import EXIT_OK, NotIndexed
from gitrag.git.repo import GitRepo
from gitrag.index.history import DAMAGE, Commit, HistoryIndex, discard, is_damage, unavailable
from gitrag.surfaces import output

FILES_SHOWN = 5  # changed paths printed per commit (JSON lists them all)


def log(question: str, repo: str, k: int, path: str, as_json: bool) -> int:
    """Rank the commits reachable from the current branch's history head. Reads only the
    git repository and ``history.db`` (no store, no embedder, no daemon), so it is quick
    whatever else runs. Raises NotIndexed when the branch's history was never read."""
    git = GitRepo(repo)
    head, name = git.require_head(), git.branch()
    data_dir = config.repo_data_dir(git.common_dir)
    if not os.path.lexists(data_dir / "history.db"):  # a link to an unmounted folder: say so below
        raise NotIndexed(f"no commit history is indexed for {git.root}; run `gitrag index` first")
    try:
        with HistoryIndex(data_dir) as hist:
            info = hist.branch_info(name)
            if info is None:
                raise NotIndexed(f"the history of branch {name!r} is not indexed yet; run `gitrag index` first")
            commits = hist.search(name, question, k=k, path=path)
    except DAMAGE as exc:
        if not is_damage(exc):  # cannot read it now (I/O, permissions): keep it
            raise unavailable(data_dir / "history.db", exc) from None
        discard(data_dir)  # derived from git alone: discarded, read again by the next sync
        raise NotIndexed(f"{data_dir / 'history.db'} was damaged and has been discarded; run `gitrag index` to "
                         "read the history again") from None
    read_to, reachable, complete = info
    if as_json:
        output.emit_json({
            "question": question, "branch": name, "head": head, "history_head": read_to,
            "up_to_date": read_to == head, "commits_indexed": reachable, "complete": complete,
            "commits": [commit_json(c) for c in commits],
        })
        return EXIT_OK
    _print(commits, name, head, read_to, path)
    return EXIT_OK


def commit_json(c: Commit) -> dict[str, Any]:
    """A commit as ``log --json`` gives it (fields documented in README, "JSON output")."""
    return {
        "commit": c.oid, "date": c.date, "author": c.author, "email": c.email, "subject": c.subject,
        "message": c.message, "score": round(c.score, 6), "files_changed": c.n_files,
        "files": [{"path": f.path, "status": f.status, "old_path": f.old_path} for f in c.files],
    }


def _print(commits: list[Commit], branch: str, head: str, read_to: str, path: str) -> None:
    if not commits:
        output.out.print(f"no matching commits{' touching ' + path if path else ''}", markup=False)
    for i, c in enumerate(commits, 1):
        output.out.print(f"[bold]{i:>2}. {c.oid[:12]}[/]  {c.date[:10]}  {escape(c.author)}  [dim]{c.score:.3f}[/]")
        output.out.print(f"      {escape(c.subject)}", markup=True)
        shown = [f.path if f.old_path is None else f"{f.old_path} -> {f.path}" for f in c.files[:FILES_SHOWN]]
        more = f"  [dim]+{c.n_files - len(shown)} more[/]" if c.n_files > len(shown) else ""
        if shown or more:  # a commit that changed no file (`git commit --allow-empty`): no empty line
            output.out.print(f"      [dim]{escape(', '.join(shown))}[/]{more}")
    state = "up to date" if read_to == head else f"history at {read_to[:12]}, HEAD at {head[:12]}: run `gitrag index`"
    output.out.print(f"[dim]{branch}: {state}[/]")
