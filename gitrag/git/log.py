"""Reading commits from git's object database (pygit2): the history's own adapter.

The branch index reads trees through :mod:`gitrag.git.repo`; the commit index reads
commits, their first-parent tree diffs and blame through this module, over the
repository a :class:`~gitrag.git.repo.GitRepo` opened (its callers never touch pygit2's). Paths are decoded as ``gitrepo.decode_path``
does, so a commit's paths are spelled like the manifest's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import pygit2
from pygit2.enums import DeltaStatus, DiffFind, SortMode

from gitrag.git.repo import GitRepo, decode_path

#: A commit touching more paths than this lists only the first ones (a vendored import or a
#: mass reformat; the count is kept): its paths say nothing about where a change lives.
MAX_FILES = 200

_STATUS = {
    DeltaStatus.ADDED: "added", DeltaStatus.DELETED: "deleted", DeltaStatus.MODIFIED: "modified",
    DeltaStatus.RENAMED: "renamed", DeltaStatus.COPIED: "added", DeltaStatus.TYPECHANGE: "modified",
}


@dataclass(frozen=True)
class FileChange:
    """One path a commit changed against its first parent; ``old_path`` for a rename."""

    status: str  # added | deleted | modified | renamed
    path: str
    old_path: str | None = None


@dataclass(frozen=True)
class CommitInfo:
    """A commit as the history index keeps it. ``time``: author time, seconds since the
    epoch (UTC); ``offset``: the author's UTC offset in minutes; ``n_files``: paths changed
    (``files`` holds at most MAX_FILES of them)."""

    oid: str
    author: str
    email: str
    time: int
    offset: int
    message: str
    parents: tuple[str, ...]
    files: tuple[FileChange, ...]
    n_files: int
    commit_time: int = 0  # committer time, seconds since the epoch: the order the history was made in

    @property
    def subject(self) -> str:
        return self.message.strip().split("\n", 1)[0].strip()


def walk_commits(repo: GitRepo, heads: list[str], hide: str | None = None) -> Iterator[pygit2.Commit]:
    """Commits reachable from ``heads`` (not from ``hide``), newest first (by commit time,
    parents after children). An id that is not a commit is left out."""
    walker = repo.repo.walk(None, SortMode.TOPOLOGICAL | SortMode.TIME)
    for h in heads:
        try:
            walker.push(h)
        except (KeyError, ValueError, pygit2.GitError):
            continue
    if hide is not None:
        try:
            walker.hide(hide)
        except (KeyError, ValueError, pygit2.GitError):
            pass
    yield from walker


def lookup_commit(repo: GitRepo, oid: str) -> pygit2.Commit:
    """The commit ``oid`` (raises KeyError or ValueError as pygit2's ``repo[oid]`` does)."""
    return cast(pygit2.Commit, repo.repo[oid])


def descends(repo: GitRepo, head: str, old: str) -> bool:
    """Whether ``head`` is ``old`` or a descendant of it; False when ``old`` is gone (a
    force-push and a gc) or either is not a commit id."""
    try:
        return head == old or bool(repo.repo.descendant_of(head, old))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def message(c: pygit2.Commit) -> str:
    """The commit's message, decoded by its encoding, or as UTF-8 with replacement."""
    return c.message if isinstance(c.message, str) else c.raw_message.decode("utf-8", "replace")


def read_commit(repo: GitRepo, oid: str) -> CommitInfo:
    """The commit ``oid`` with the paths it changed against its first parent (all of its
    tree for a root commit), renames found when the diff has both additions and deletions
    (only then can there be one: the similarity search reads blobs, so it is skipped otherwise)."""
    c = lookup_commit(repo, oid)
    parents = tuple(str(p) for p in c.parent_ids)
    tree = c.tree
    if parents:
        diff = lookup_commit(repo, parents[0]).tree.diff_to_tree(tree)  # what repo.diff(tree, tree) calls
    else:
        diff = tree.diff_to_tree(swap=True)
    statuses = {d.status for d in diff.deltas}
    if DeltaStatus.ADDED in statuses and DeltaStatus.DELETED in statuses:
        diff.find_similar(flags=DiffFind.FIND_RENAMES)
    files: list[FileChange] = []
    n = 0
    for d in diff.deltas:
        status = _STATUS.get(d.status)
        if status is None:
            continue
        n += 1
        if len(files) >= MAX_FILES:
            continue
        if status == "deleted":
            files.append(FileChange(status, decode_path(d.old_file.raw_path)))
        elif status == "renamed":
            files.append(FileChange(status, decode_path(d.new_file.raw_path), decode_path(d.old_file.raw_path)))
        else:
            files.append(FileChange(status, decode_path(d.new_file.raw_path)))
    a = c.author
    return CommitInfo(oid, a.name, a.email, int(a.time), int(a.offset), message(c), parents, tuple(files), n,
                      int(c.commit_time))


@dataclass(frozen=True)
class BlameLine:
    """The newest commit among those that last changed a range of lines."""

    commit: str
    time: int
    offset: int
    author: str
    email: str


def blame_range(repo: GitRepo, commit: str, path: str, start: int, end: int) -> BlameLine | None:
    """Of the commits that last changed lines ``start``-``end`` (1-based, inclusive) of
    ``path`` as of ``commit``, the newest (by commit time; a descendant on a tie); None when git cannot blame the
    path there (not in that tree, a bad range)."""
    try:
        blame = repo.repo.blame(path, newest_commit=commit, min_line=start, max_line=end)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    best, best_time = None, 0
    for hunk in blame:
        cid = str(hunk.final_commit_id)
        try:
            c = lookup_commit(repo, cid)
        except (KeyError, ValueError):
            continue
        a = c.author
        newer = best is None or c.commit_time > best_time or (
            c.commit_time == best_time and cid != best.commit and repo.repo.descendant_of(cid, best.commit))
        if newer:
            best, best_time = BlameLine(cid, int(a.time), int(a.offset), a.name, a.email), c.commit_time
    return best
