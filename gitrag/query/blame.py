"""``ask --blame``: the last commit that changed each result's lines.

libgit2's blame (pygit2) over just the result's line range, as of the commit the index
answered from, for the returned results only: the newest (by commit time) of the commits
that last changed a line of the range. Exact, like ``git blame -L``; it walks the file's
history, so it costs about 0.1-0.8 s per result on click (BENCHMARKS.md, "ask --blame"),
which is why it is asked for and not on by default.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pygit2

from gitrag.git import log as gitlog


def blame_result(repo: pygit2.Repository, commit: str | None, path: str, start: int, end: int) -> dict[str, Any] | None:
    """``{"commit", "date", "author", "email", "subject"}`` of the last commit that changed
    a line of ``path``:``start``-``end`` as of ``commit``; None when git cannot say (no
    commit, the path is not in that tree)."""
    if not commit:
        return None
    found = gitlog.blame_range(repo, commit, path, start, end)
    if found is None:
        return None
    c = gitlog.lookup_commit(repo, found.commit)
    when = datetime.fromtimestamp(found.time, timezone(timedelta(minutes=found.offset))).isoformat()
    subject = gitlog.message(c).strip().split("\n", 1)[0].strip()
    return {"commit": found.commit, "date": when, "author": found.author, "email": found.email, "subject": subject}
