"""``ask --blame``: the last commit that changed each result's lines.

git's blame over just the results' line ranges (gitrag.git.blame: one ``git blame -L ...``
per file for all of its results, files in parallel; libgit2's blame when git cannot run),
as of the commit the index answered from, for the returned results only: the newest (by
commit time) of the commits that last changed a line of the range. Exact, like ``git blame
-L``; it walks the file's history, so it costs about 0.1-0.4 s per file on click
(BENCHMARKS.md, "ask --blame"), which is why it is asked for and not on by default.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from gitrag.git import blame as gitblame
from gitrag.git import log as gitlog
from gitrag.git.log import BlameLine
from gitrag.git.repo import GitRepo


def blame_results(repo: GitRepo, commit: str | None, keys: list[tuple[str, int, int]]
                  ) -> dict[tuple[str, int, int], dict[str, Any] | None]:
    """:func:`blame_result` of each ``(path, start, end)`` of ``keys``, the ranges of one
    file blamed by one run of git (gitrag.git.blame.blame_ranges)."""
    if not commit:
        return {key: None for key in keys}
    found = gitblame.blame_ranges(repo, commit, keys)
    return {key: _described(repo, found.get(key)) for key in keys}


def blame_result(repo: GitRepo, commit: str | None, path: str, start: int, end: int) -> dict[str, Any] | None:
    """``{"commit", "date", "author", "email", "subject"}`` of the last commit that changed
    a line of ``path``:``start``-``end`` as of ``commit``; None when git cannot say (no
    commit, the path is not in that tree)."""
    if not commit:
        return None
    return _described(repo, gitlog.blame_range(repo, commit, path, start, end))


def _described(repo: GitRepo, found: BlameLine | None) -> dict[str, Any] | None:
    if found is None:
        return None
    c = gitlog.lookup_commit(repo, found.commit)
    when = datetime.fromtimestamp(found.time, timezone(timedelta(minutes=found.offset))).isoformat()
    subject = gitlog.message(c).strip().split("\n", 1)[0].strip()
    return {"commit": found.commit, "date": when, "author": found.author, "email": found.email, "subject": subject}
