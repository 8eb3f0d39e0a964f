"""Git access: the one module that talks to the object database (pygit2).

Paths are ``str``: UTF-8 decoded with ``backslashreplace``, so a non-UTF-8 file name gets a
stable, printable, JSON-safe spelling (see :func:`decode_path`). Blobs are read by id from
the object database, never from the work tree.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, cast

import pygit2
from pygit2.enums import AttrCheck, DeltaStatus, DiffFind, FileMode, FileStatus

from gitrag.errors import (
    EmptyRepository,
    NotARepository,
    UnknownRevision,
    UnsupportedBranch,
    UnsupportedPath,
    UnsupportedRepository,
)

ZERO_OID = "0" * 40
# the detached HEAD's view: a name no branch can have (git refuses a space in a ref name,
# `git check-ref-format`), as a revision view's "(rev <commit>)"; before 2026-12 it was
# "(detached)", which a branch can be named: the two shared one view (the indexer forgets
# a view of that name once, gitrag.index.indexer.Indexer._forget_legacy_detached)
DETACHED = "(HEAD detached)"
LEGACY_DETACHED = "(detached)"


def is_utf8(text: str) -> bool:
    """False for a str holding surrogate escapes (bytes that were not UTF-8: see os.fsdecode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def decode_path(raw: bytes) -> str:
    """A tree path's bytes as a printable str; invalid UTF-8 becomes ``\\xNN`` escapes."""
    return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Entry:
    """A file in a tree: ``mode`` is git's file mode (0o100644, 0o120000 symlink, ...)."""

    path: str
    blob: str
    mode: int


@dataclass(frozen=True)
class Change:
    """One path's change between two trees; ``old``/``new`` None when added/deleted."""

    status: str  # added | deleted | modified | renamed | typechange
    old: Entry | None
    new: Entry | None


_STATUS = {
    DeltaStatus.ADDED: "added",
    DeltaStatus.DELETED: "deleted",
    DeltaStatus.MODIFIED: "modified",
    DeltaStatus.RENAMED: "renamed",
    DeltaStatus.COPIED: "added",
    DeltaStatus.TYPECHANGE: "typechange",
}


class GitRepo:
    """A repository opened at any path inside its work tree (or its git dir)."""

    def __init__(self, path: str | os.PathLike[str] = ".") -> None:
        start = Path(path).absolute()
        if not start.exists():
            raise NotARepository(f"{start} does not exist")
        found = pygit2.discover_repository(str(start))
        if found is None:
            raise NotARepository(f"{start} is not inside a git repository; run gitrag in one, or pass --repo PATH")
        self.repo = _open(found)
        self.git_dir = Path(self.repo.path).resolve()
        self.common_dir = self._common_dir()
        self.workdir = Path(self.repo.workdir).resolve() if self.repo.workdir and not self._bare_by_git() else None
        for where in (self.workdir, self.common_dir):
            if where is not None and not is_utf8(str(where)):
                raise UnsupportedPath(
                    f"the repository's path {decode_path(os.fsencode(where))} is not valid UTF-8, and gitrag "
                    "names its index and talks to its daemon by that path: rename the folder (or a parent)")

    def _bare_by_git(self) -> bool:
        """Whether git takes this repository for a bare one although pygit2 gives it a work tree:
        a git dir not named ``.git`` whose config does not set ``core.bare`` (a bare clone whose
        ``config`` file is gone) is bare to git when found by itself, while libgit2 takes its
        parent folder for the work tree (git status there would list a whole unrelated folder)."""
        if self.git_dir.name == ".git" or self.git_dir != self.common_dir or os.environ.get("GIT_WORK_TREE"):
            return False
        config = self.repo.config
        return "core.bare" not in config and "core.worktree" not in config

    def _common_dir(self) -> Path:
        marker = self.git_dir / "commondir"
        if marker.is_file():
            return (self.git_dir / marker.read_text().strip()).resolve()
        return self.git_dir

    @property
    def root(self) -> Path:
        """The work tree root (the git dir for a bare repository)."""
        return self.workdir or self.git_dir

    # -- HEAD ---------------------------------------------------------------
    def branch(self) -> str:
        """The current branch name, or DETACHED (``(HEAD detached)``) on a detached HEAD. Raises
        UnsupportedBranch when the name is not valid UTF-8 (see :meth:`checked_out`)."""
        name = self._head_name()
        if not is_utf8(name):
            raise UnsupportedBranch(
                f"branch name is not valid UTF-8: gitrag does not index it; rename it (git branch -m NEW-NAME) "
                f"or check out another branch ({decode_path(os.fsencode(name))})")
        return name

    def checked_out(self) -> str | None:
        """:meth:`branch`, or None when its name is not valid UTF-8 (a branch gitrag does not
        index, so nothing of it is in the index to keep: for gc's set of checked-out branches)."""
        name = self._head_name()
        return name if is_utf8(name) else None

    def _head_name(self) -> str:
        """HEAD's branch name as pygit2 gives it (surrogate escapes for bytes that are not UTF-8)."""
        if self.repo.head_is_detached:
            return DETACHED
        ref = self.repo.lookup_reference("HEAD").target
        name = ref if isinstance(ref, str) else str(ref)
        return name.removeprefix("refs/heads/")

    def head(self) -> str | None:
        """HEAD's commit id, or None on an unborn branch."""
        if self.repo.head_is_unborn:
            return None
        return str(self.repo.head.target)

    def require_head(self) -> str:
        head = self.head()
        if head is None:
            raise EmptyRepository(f"branch {self.branch()!r} has no commit yet; commit something, then index")
        return head

    def branch_tip(self, name: str) -> str | None:
        """The commit id at the tip of local branch ``name`` (``refs/heads/<name>``), read
        from the refs whatever is checked out; None when there is no such branch (deleted,
        never created, or not a valid ref name)."""
        try:
            ref = self.repo.references.get(f"refs/heads/{name}")
            return str(ref.peel(pygit2.Commit).id) if ref is not None else None
        except (ValueError, KeyError, pygit2.GitError):
            return None

    def has_commit(self, oid: str | None) -> bool:
        if not oid or oid == ZERO_OID:
            return False
        try:
            obj = self.repo.get(oid)
        except (ValueError, KeyError):
            return False
        return isinstance(obj, pygit2.Commit)

    def merge_base(self, a: str, b: str) -> str | None:
        try:
            base = self.repo.merge_base(a, b)
        except (ValueError, KeyError, pygit2.GitError):
            return None
        return str(base) if base else None

    def distance(self, a: str, b: str) -> int:
        """Commits on either side between ``a`` and ``b`` (ahead + behind)."""
        ahead, behind = self.ahead_behind(a, b)
        return ahead + behind

    def ahead_behind(self, a: str, b: str) -> tuple[int, int]:
        """(commits reachable from ``a`` only, from ``b`` only)."""
        ahead, behind = self.repo.ahead_behind(a, b)
        return int(ahead), int(behind)

    def resolve(self, rev: str) -> str:
        """The commit id ``rev`` names (git's revision syntax: a tag, a branch, a short id,
        ``HEAD~20``). Raises UnknownRevision with git's reason."""
        try:
            return str(self.repo.revparse_single(rev).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
            detail = str(exc).strip().strip("'") or type(exc).__name__
            why = "" if detail == rev else f" ({detail})"  # git's message is often the name again
            raise UnknownRevision(f"unknown revision {rev!r}{why}; give a tag, a commit or e.g. HEAD~20") from None

    def root_commits(self, head: str) -> list[str]:
        """The ids of the commits reachable from ``head`` that have no parent, sorted."""
        return sorted(str(c.id) for c in self.repo.walk(head, pygit2.enums.SortMode.NONE) if not c.parents)

    def remotes(self) -> dict[str, str]:
        """Remote name -> URL (``""`` where git has none)."""
        return {r.name or "": r.url or "" for r in self.repo.remotes}

    @property
    def is_shallow(self) -> bool:
        """Whether this is a shallow clone (its oldest commits are cuts, not roots)."""
        return bool(self.repo.is_shallow)

    def linked_worktrees(self) -> list[Path]:
        """The linked worktrees (``git worktree add``) that still exist, resolved; not the main one."""
        paths = []
        for name in self.repo.list_worktrees():
            wt = self.repo.lookup_worktree(name)
            if not wt.is_prunable and Path(wt.path).is_dir():
                paths.append(Path(wt.path).resolve())
        return paths

    def branches(self) -> list[str]:
        """The local branches' names, but those that are not valid UTF-8 (never indexed)."""
        return [name for name in self.repo.branches.local if is_utf8(name)]

    # -- trees and blobs ------------------------------------------------------
    def _tree(self, commit: str) -> pygit2.Tree:
        return self.repo[commit].peel(pygit2.Tree)

    def files(self, commit: str) -> Iterator[Entry]:
        """Every non-tree entry of the commit's tree, depth first, with an explicit stack."""
        stack: list[tuple[str, pygit2.Tree]] = [("", self._tree(commit))]
        while stack:
            prefix, tree = stack.pop()
            for obj in tree:
                path = prefix + decode_path(obj.raw_name or b"")  # a tree entry always has a name
                if obj.filemode == FileMode.TREE:
                    stack.append((path + "/", cast(pygit2.Tree, self.repo[obj.id])))
                else:
                    yield Entry(path, str(obj.id), int(obj.filemode))

    def paths_differing(self, old_commit: str, new_commit: str) -> int:
        """How many paths differ between the two commits' trees (added, deleted or changed; no
        rename detection, no blob read: subtrees with the same id are skipped, so it costs
        what differs)."""
        return len(self._tree(old_commit).diff_to_tree(self._tree(new_commit)))

    def diff(self, old_commit: str, new_commit: str) -> list[Change]:
        """Tree changes from ``old_commit`` to ``new_commit`` with rename detection.

        Similarity needs the blobs of deleted and added files; when the object database
        lacks one (a partial or shallow clone, a mirror whose largest blobs were left out)
        only exact renames (same blob id, read from the trees) are detected, and the other
        pairs stay a deletion and an addition: the same paths either way, so a sync still
        touches what changed and skips the missing blob as unreadable."""
        old_tree, new_tree = self._tree(old_commit), self._tree(new_commit)
        diff = old_tree.diff_to_tree(new_tree)  # what repo.diff(tree, tree) calls
        try:
            diff.find_similar(flags=DiffFind.FIND_RENAMES)
        except KeyError:  # pygit2.NotFoundError (a GitError and a KeyError): a blob is missing
            diff = old_tree.diff_to_tree(new_tree)
            diff.find_similar(flags=DiffFind.FIND_RENAMES | DiffFind.FIND_EXACT_MATCH_ONLY)
        changes = []
        for delta in diff.deltas:
            status = _STATUS.get(delta.status)
            if status is None:
                continue
            old = _entry(delta.old_file) if status not in ("added",) else None
            new = _entry(delta.new_file) if status != "deleted" else None
            changes.append(Change(status, old, new))
        return changes

    def read_blob(self, blob: str) -> bytes:
        """The blob's bytes; KeyError or ValueError when the object database has no such blob."""
        return cast(pygit2.Blob, self.repo[blob]).data

    def read_blob_cached(self, blob: str) -> bytes:
        """:meth:`read_blob` through a small process-wide LRU (:data:`blob_cache`) by (common
        git dir, blob id): a blob id names its bytes, so a cached blob is the blob. For
        queries, which read the same few files' blobs for every question (ranking texts,
        snippets); a sync reads each blob once and does not pass through it."""
        key = (str(self.common_dir), blob)
        data = blob_cache.get(key)
        if data is None:
            data = cast(pygit2.Blob, self.repo[blob]).data
            blob_cache.put(key, data)
        return data

    def blob_size(self, blob: str) -> int:
        """The blob's size in bytes, from the object header (the content is not inflated)."""
        return int(self.repo.odb.read_header(blob)[1])

    def attribute(self, commit: str, path: str, name: str) -> bool | str | None:
        """A ``.gitattributes`` value for ``path`` as of ``commit`` (not the work tree)."""
        flags = AttrCheck.INDEX_ONLY | AttrCheck.INCLUDE_COMMIT | AttrCheck.NO_SYSTEM
        try:
            return self.repo.get_attr(path, name, flags=flags, commit=commit)
        except (pygit2.GitError, ValueError):
            return None

    def blob_at(self, commit: str, path: str) -> str | None:
        """The blob id of ``path`` (repository-relative, ``/``-separated) in ``commit``'s tree;
        None when the tree has no file there (or the commit is not in the object database)."""
        try:
            entry = self._tree(commit)[path]
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return str(entry.id) if entry.type == pygit2.enums.ObjectType.BLOB else None

    def root_blob(self, commit: str, name: str) -> str | None:
        """The blob id of the file ``name`` at the top of ``commit``'s tree; None when there is none."""
        tree = self._tree(commit)
        entry = tree[name] if name in tree else None
        return str(entry.id) if entry is not None and entry.type == pygit2.enums.ObjectType.BLOB else None

    def changed_paths(self) -> list[str]:
        """``git status``'s paths: tracked files that differ between HEAD and the work tree or
        index, plus untracked ones not ignored (each file of an untracked folder); [] for a
        bare repository or when git cannot read the status. Names as git status gives them
        (surrogate escapes for bytes that are not UTF-8)."""
        if self.workdir is None:
            return []
        try:
            status = self.repo.status(untracked_files="all")
        except pygit2.GitError:
            return []
        return [p for p, flags in status.items() if flags != FileStatus.CURRENT and not flags & FileStatus.IGNORED]

    def worktree_changes(self) -> int:
        """How many :meth:`changed_paths` there are (as gitrag.query.worktree counts them)."""
        return len(self.changed_paths())


class CacheInfo(NamedTuple):
    """The fields of ``functools``' cache statistics (its own type is private)."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class BlobCache:
    """An LRU of blob bytes by (common git dir, blob id), at most ``max_bytes`` in all, none
    larger than ``max_blob``; thread-safe. ``cache_info``/``cache_clear`` as functools'
    caches, so gitrag.daemon.memory empties it with the others when the daemon gives its
    memory back."""

    def __init__(self, max_bytes: int, max_blob: int) -> None:
        self.max_bytes, self.max_blob = max_bytes, max_blob
        self._data: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._size = 0
        self._hits = self._misses = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> bytes | None:
        with self._lock:
            data = self._data.get(key)
            if data is None:
                self._misses += 1
                return None
            self._hits += 1
            self._data.move_to_end(key)
            return data

    def put(self, key: tuple[str, str], data: bytes) -> None:
        if len(data) > self.max_blob:
            return
        with self._lock:
            if key in self._data:
                return
            self._data[key] = data
            self._size += len(data)
            while self._size > self.max_bytes:
                _, old = self._data.popitem(last=False)
                self._size -= len(old)

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.max_bytes, len(self._data))

    def cache_clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._size = self._hits = self._misses = 0


# a question's snippets read its results' whole blobs: on sqlalchemy 2.0.40 (sdist, docs included)
# 0.5-1.8 MiB a question, 151 blobs of 14.7 MiB for the 23 questions of bench_scale.QUESTIONS
blob_cache = BlobCache(max_bytes=16 << 20, max_blob=2 << 20)


def _open(git_dir: str) -> pygit2.Repository:
    """The pygit2 repository at ``git_dir``; UnsupportedRepository when libgit2 cannot read
    its format (``git init --object-format=sha256`` needs a libgit2 built with sha256)."""
    try:
        return pygit2.Repository(git_dir)
    except pygit2.GitError as exc:
        text = str(exc)
        if "object format" in text or "extension" in text:
            fmt = _object_format(git_dir)
            what = f"a {fmt} repository" if fmt else "a repository of a format this git library cannot read"
            raise UnsupportedRepository(
                f"{git_dir.rstrip('/')} is {what} ({text}): not supported by gitrag "
                f"(its libgit2 {pygit2.LIBGIT2_VERSION} reads sha1 repositories only)") from None
        raise


def _object_format(git_dir: str) -> str | None:
    """``extensions.objectformat`` of the repository's config file, read as text."""
    try:
        text = Path(git_dir, "config").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip().lower() == "objectformat":
            return value.strip().lower() or None
    return None


def _entry(f: pygit2.DiffFile) -> Entry:
    return Entry(decode_path(f.raw_path), str(f.id), int(f.mode))
