"""The commit index: per repository, every commit reachable from an indexed branch head,
with its author, date, message and the paths it changed, in SQLite (``<data dir>/history.db``).

Tables:

- ``commits``: one row per commit (``id`` a small integer, ``oid`` the commit id), immutable
  facts: author, e-mail, author time (s, UTC) and offset (min), message, parents, the
  paths changed against the first parent (:func:`pack_files`: zlib of the JSON
  ``[[status, path, old_path], ...]``) and their count.
- ``commit_text``: a contentless FTS5 table (``content=''``: the index and each row's term
  counts only; its text is never read back, the messages are in ``commits``), rowid =
  ``commits.id``, of the message's and the paths' code-aware terms
  (:func:`gitrag.index.sparse.terms`: identifiers whole and split, stems), ranked by FTS5's
  BM25. Format 2 kept the terms' text too (a third of the file), and each commit's changed
  files as JSON text (format 3: zlib of it); a format-2 file is converted in place (its rows
  copied into the contentless table: the same index, so the same ranks; its files compressed).
- ``commit_paths``: (path, commit) for ``--path`` filters and per-file change counts.
- ``heads`` / ``reach``: per branch, the head its history was read to and the commits
  reachable from it (read newest first within a time budget per sync, see
  :meth:`HistoryIndex.update`; at most :data:`MAX_COMMITS`). A search only sees the
  commits reachable from its branch's head: a commit of another branch, or one a rebase
  dropped, is never an answer, and an index built at an old commit knows nothing newer.

Crash safety: commits are facts keyed by their id, inserted ``OR IGNORE`` in transactions of
:data:`BATCH` (a crash keeps the ones done, the next update skips them); a branch's ``reach``
rows and its ``heads`` row move together in one last transaction, so a killed update leaves
the branch at its previous head and the next one redoes the walk.

The sync step: :func:`sync_branch` (``Indexer.sync_history``, right after a branch's code
sync) walks the commits new since the branch's history head within its time budget; a
failure there is logged and never stops the code index.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2
import structlog

from gitrag.errors import StateError
from gitrag.git import log as gitlog
from gitrag.git.log import CommitInfo, FileChange
from gitrag.git.repo import GitRepo
from gitrag.index import sparse
from gitrag.index.vector_cache import is_malformed

if TYPE_CHECKING:
    from gitrag.index.workspace import Workspace

FORMAT = "3"  # format 2 is converted in place; another format is dropped and read again (derived data)
#: At most this many commits per branch are indexed (newest first); older ones never are.
MAX_COMMITS = 100_000
BATCH = 500  # commits per transaction
MAX_QUERY_TERMS = 64  # distinct question terms sent to FTS5, in order of first use
COMMON_MIN = 100  # common_terms: a term in fewer commits is never left out
SEARCH_DEPTH = 200  # best BM25 matches read before the branch and path filters (deeper if too few pass)
#: BM25 weight of the touched paths' terms against the message's (1.0): paths say where, the
#: message what; a path term alone should not outrank a message that says it.
PATH_WEIGHT = 0.5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits(
    id INTEGER PRIMARY KEY, oid TEXT NOT NULL UNIQUE, author TEXT NOT NULL, email TEXT NOT NULL,
    time INTEGER NOT NULL, tz INTEGER NOT NULL, message TEXT NOT NULL, parents TEXT NOT NULL,
    files TEXT NOT NULL, n_files INTEGER NOT NULL, ctime INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS commit_paths(path TEXT NOT NULL, commit_id INTEGER NOT NULL,
    PRIMARY KEY(path, commit_id)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS commit_text USING fts5(message, paths, content='',
    tokenize="unicode61 tokenchars '_.$'");
CREATE TABLE IF NOT EXISTS heads(branch TEXT PRIMARY KEY, head TEXT NOT NULL, frontier TEXT NOT NULL,
    commits INTEGER NOT NULL, complete INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS reach(branch TEXT NOT NULL, commit_id INTEGER NOT NULL,
    PRIMARY KEY(branch, commit_id)) WITHOUT ROWID;
"""

log = structlog.get_logger("gitrag.index.history")


@dataclass(frozen=True)
class Commit:
    """A commit as stored; ``time`` in seconds since the epoch (UTC), ``tz`` the author's
    UTC offset in minutes, ``files`` the paths changed against the first parent (at most
    gitlog.MAX_FILES; ``n_files`` counts all), ``commit_time`` the committer time."""

    id: int
    oid: str
    author: str
    email: str
    time: int
    tz: int
    message: str
    parents: tuple[str, ...]
    files: tuple[FileChange, ...]
    n_files: int
    commit_time: int = 0
    score: float = 0.0

    @property
    def subject(self) -> str:
        return self.message.strip().split("\n", 1)[0].strip()

    @property
    def date(self) -> str:
        """Author date, ISO 8601 with the author's offset (``2024-05-01T12:00:00+02:00``)."""
        from datetime import datetime, timedelta, timezone

        return datetime.fromtimestamp(self.time, timezone(timedelta(minutes=self.tz))).isoformat()


@dataclass
class UpdateSummary:
    """One branch's history update: commits read from git (new to the index), reachable now."""

    branch: str
    head: str
    commits_read: int = 0
    commits_reachable: int = 0
    complete: bool = True
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)


def _terms(text: str) -> str:
    return " ".join(sparse.terms(text))


def _path_terms(paths: Iterable[str]) -> str:
    return " ".join(_one_path_terms(p) for p in paths)


@lru_cache(maxsize=16384)
def _one_path_terms(path: str) -> str:
    """A path's terms (cached: the same paths change again and again)."""
    return " ".join(sparse.terms(path.replace("/", " ").replace(".", " ")))


class HistoryIndex:
    """The commit index of one repository (``<data dir>/history.db``)."""

    def __init__(self, data_dir: Path) -> None:
        """Open (or create) ``<data_dir>/history.db``. One of another format is derived data:
        it is deleted and rebuilt by the next syncs; so is a damaged one (:func:`is_damage`).
        Raises StateError, deleting nothing, when the file cannot be opened (a read-only or
        unmounted folder, an I/O error): its history may be healthy."""
        self.path = Path(data_dir) / "history.db"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.db = self._open()
            row = self.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        except (sqlite3.DatabaseError, OSError) as exc:
            if not is_damage(exc):
                raise unavailable(self.path, exc) from None
            # not a database any more: derived data, start again
            log.warning("history.db is damaged: started again (the next syncs read the history anew)",
                        path=str(self.path), error=str(exc))
            row = None
            self.db = sqlite3.connect(":memory:")
        if row is not None and row[0] == "2":
            row = self._convert_format2()
        if row is None or row[0] != FORMAT:
            self.db.close()
            discard(self.path.parent)
            self.db = self._open()

    def _convert_format2(self) -> tuple[str] | None:
        """Copy a format-2 file's FTS rows into a contentless table in place of its own (one
        transaction; then VACUUM gives the text's pages back). Returns the format row after
        it, None when the copy failed (the caller then discards the file: derived data)."""
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("2",):
                    db.execute("DROP TABLE IF EXISTS temp.commit_vocab")
                    db.execute("CREATE VIRTUAL TABLE commit_text3 USING fts5(message, paths, content='', "
                               "tokenize=\"unicode61 tokenchars '_.$'\")")
                    db.execute("INSERT INTO commit_text3(rowid, message, paths) SELECT rowid, message, paths "
                               "FROM commit_text")
                    db.execute("DROP TABLE commit_text")
                    db.execute("ALTER TABLE commit_text3 RENAME TO commit_text")
                    last = -1
                    while rows := db.execute("SELECT id, files FROM commits WHERE id > ? ORDER BY id LIMIT 2000",
                                             (last,)).fetchall():
                        last = rows[-1][0]
                        db.executemany("UPDATE commits SET files=? WHERE id=?",
                                       [(zlib.compress(str(f).encode("utf-8", "surrogatepass"), 6), i)
                                        for i, f in rows if isinstance(f, str)])
                    db.execute("UPDATE meta SET value=? WHERE key='format'", (FORMAT,))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.commit_vocab USING fts5vocab(main, commit_text, 'row')")
            try:  # the text's pages back to the file system (best effort: another process may read)
                db.execute("VACUUM")
            except sqlite3.OperationalError:
                pass
            log.info("history.db converted to format 3 (contentless text index)", path=str(self.path))
            return db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        except sqlite3.DatabaseError as exc:
            log.warning("history.db could not be converted: read again", path=str(self.path), error=str(exc))
            return None

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if db.execute("SELECT count(*) FROM sqlite_master WHERE name='meta'").fetchone()[0] == 0:
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta VALUES('format', ?)", (FORMAT,))
        # per connection: each term's number of commits (for search's ``max_share``)
        db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.commit_vocab USING fts5vocab(main, commit_text, 'row')")
        return db

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> HistoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    # -- update -------------------------------------------------------------------------
    def has_commits(self) -> bool:
        return self.db.execute("SELECT 1 FROM commits LIMIT 1").fetchone() is not None

    def head(self, branch: str) -> str | None:
        row = self.db.execute("SELECT head FROM heads WHERE branch=?", (branch,)).fetchone()
        return row[0] if row else None

    def update(self, repo: GitRepo, branch: str, head: str, budget_s: float | None = None) -> UpdateSummary:
        """Make ``branch``'s history the commits reachable from ``head``.

        When its recorded head is an ancestor of ``head``, the commits in between are read
        (all of them); otherwise (a first read, a rebase, a reset) its history starts again
        from ``head``. Then older commits are read from the branch's *frontier* (the parents
        where the last read stopped), newest first, until ``budget_s`` seconds have passed
        (None: all of them, up to :data:`MAX_COMMITS`); the next update goes on from there,
        so a long history is read over several syncs and each costs at most its budget.
        Commits already in the index (of another branch) are only linked, not read again."""
        t0 = time.perf_counter()
        deadline = None if budget_s is None else t0 + budget_s
        out = UpdateSummary(branch, head)
        row = self.db.execute("SELECT head, frontier, commits FROM heads WHERE branch=?", (branch,)).fetchone()
        old, frontier, have = (row[0], row[1].split(), row[2]) if row else (None, [], 0)
        if old == head and not frontier:
            out.commits_reachable = have
            return out
        reset = old is None or (old != head and not gitlog.descends(repo, head, old))
        linked: list[str] = []
        if reset:
            frontier, have = [head], 0
        elif old != head:  # the commits since the last update, all of them (up to MAX_COMMITS)
            for c in gitlog.walk_commits(repo, [head], hide=old):
                linked.append(str(c.id))
                if len(linked) >= MAX_COMMITS:
                    break
        out.commits_read += self._read_missing(repo, linked, out)
        if frontier:
            more, frontier = self._backfill(repo, branch, frontier, set(linked), deadline,
                                            MAX_COMMITS - have - len(linked), out)
            linked += more
        ids = self._ids(linked)
        with self._tx() as db:
            if reset:
                db.execute("DELETE FROM reach WHERE branch=?", (branch,))
            db.executemany("INSERT OR IGNORE INTO reach VALUES(?,?)", [(branch, ids[o]) for o in linked if o in ids])
            total = db.execute("SELECT count(*) FROM reach WHERE branch=?", (branch,)).fetchone()[0]
            if total >= MAX_COMMITS:
                frontier = []  # enough: older commits are never read (``complete`` stays false)
            complete = not frontier and total < MAX_COMMITS
            db.execute("INSERT OR REPLACE INTO heads VALUES(?,?,?,?,?,?)",
                       (branch, head, " ".join(frontier), total, int(complete), time.time()))
        out.commits_reachable, out.complete = total, complete
        out.seconds = round(time.perf_counter() - t0, 3)
        return out

    def _backfill(self, repo: GitRepo, branch: str, frontier: list[str], seen: set[str],
                  deadline: float | None, room: int, out: UpdateSummary) -> tuple[list[str], list[str]]:
        """Walk back from ``frontier`` (newest first), reading the commits the index lacks,
        until ``deadline`` or ``room`` commits; returns (the commits walked, the new
        frontier: their parents not walked, nor in the branch's history already)."""
        walked: list[str] = []
        parents: set[str] = set()
        done = set(seen)
        stopped = False
        chunk: list[str] = []
        for c in gitlog.walk_commits(repo, frontier):
            oid = str(c.id)
            if oid in done:
                continue
            if len(walked) >= room or (deadline is not None and walked and not chunk and time.perf_counter() > deadline):
                stopped = True
                break
            walked.append(oid)
            chunk.append(oid)
            done.add(oid)
            parents.update(str(p) for p in c.parent_ids)
            if len(chunk) >= 32:  # read in small steps, so the deadline is checked between them
                out.commits_read += self._read_missing(repo, chunk, out)
                chunk = []
        out.commits_read += self._read_missing(repo, chunk, out)
        if not stopped:
            return walked, []
        left = sorted((parents | set(frontier)) - done)
        ids = self._ids(left)
        have = {o for o, i in ids.items()
                if self.db.execute("SELECT 1 FROM reach WHERE branch=? AND commit_id=?", (branch, i)).fetchone()}
        return walked, [o for o in left if o not in have]

    def _read_missing(self, repo: GitRepo, oids: list[str], out: UpdateSummary) -> int:
        """Read from git and insert the commits of ``oids`` the index lacks; returns how many."""
        known = self._ids(oids)
        missing = [o for o in oids if o not in known]
        n = 0
        for i in range(0, len(missing), BATCH):
            infos = []
            for oid in missing[i : i + BATCH]:
                try:
                    infos.append(gitlog.read_commit(repo, oid))
                except (KeyError, ValueError, pygit2.GitError) as exc:  # a broken object: skip, keep going
                    out.skipped.append(f"{oid}: {exc}")
            self._insert(infos)
            n += len(infos)
        return n

    def prune(self, keep: Iterable[str]) -> int:
        """Forget the history of branches not in ``keep`` (their commits stay: other
        branches may reach them); returns the branches forgotten."""
        keep = set(keep)
        gone = [b for (b,) in self.db.execute("SELECT branch FROM heads") if b not in keep]
        if gone:
            with self._tx() as db:
                for b in gone:
                    db.execute("DELETE FROM heads WHERE branch=?", (b,))
                    db.execute("DELETE FROM reach WHERE branch=?", (b,))
        return len(gone)

    def _ids(self, oids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in range(0, len(oids), 500):
            part = oids[i : i + 500]
            rows = self.db.execute(f"SELECT oid, id FROM commits WHERE oid IN ({','.join('?' * len(part))})", part)
            out.update(rows)
        return out

    def _insert(self, infos: list[CommitInfo]) -> None:
        if not infos:
            return
        with self._tx() as db:
            for c in infos:
                files = pack_files(c.files)
                cur = db.execute(
                    "INSERT OR IGNORE INTO commits(oid, author, email, time, tz, message, parents, files, n_files, ctime) "
                    "VALUES(?,?,?,?,?,?,?,?,?,?)",
                    (c.oid, c.author, c.email, c.time, c.offset, c.message, " ".join(c.parents), files, c.n_files,
                     c.commit_time))
                if cur.rowcount != 1:  # another process read it first
                    continue
                cid = cur.lastrowid
                paths = sorted({f.path for f in c.files} | {f.old_path for f in c.files if f.old_path})
                db.execute("INSERT INTO commit_text(rowid, message, paths) VALUES(?,?,?)",
                           (cid, _terms(c.message), _path_terms(paths)))
                db.executemany("INSERT OR IGNORE INTO commit_paths VALUES(?,?)", [(p, cid) for p in paths])

    # -- read ---------------------------------------------------------------------------
    def branch_info(self, branch: str) -> tuple[str, int, bool] | None:
        """(head read to, commits reachable, whether that is all of them) or None when the
        branch's history was never read."""
        row = self.db.execute("SELECT head, commits, complete FROM heads WHERE branch=?", (branch,)).fetchone()
        return (row[0], row[1], bool(row[2])) if row else None

    def _count(self) -> int:
        return self.db.execute("SELECT max(id) FROM commits").fetchone()[0] or 0

    def common_terms(self, terms: list[str], max_share: float) -> set[str]:
        """Those of ``terms`` found in more than ``max_share`` of the index's commits and in
        more than COMMON_MIN commits (a short list costs nothing and IDF weighs it)."""
        total = self._count()
        out = set()
        for t in terms:
            row = self.db.execute("SELECT doc FROM commit_vocab WHERE term = ?", (t,)).fetchone()
            if row and row[0] > max_share * total and row[0] > COMMON_MIN:
                out.add(t)
        return out

    def search(self, branch: str, text: str, k: int = 10, path: str = "", max_files: int | None = None,
               terms: list[str] | None = None, max_share: float | None = None,
               max_terms: int = MAX_QUERY_TERMS) -> list[Commit]:
        """The ``k`` commits reachable from ``branch``'s head whose message and changed paths
        best match ``text`` (FTS5 BM25 over code-aware terms; ``score`` = -bm25, higher is
        better), best first, ties newest first. ``path``: only commits changing a path
        under that prefix; ``max_files``: only commits changing at most that many paths;
        ``terms``: the query terms to use instead of those of ``text``; ``max_share``: leave
        out terms found in more than that share of the commits (their BM25 weight is small and
        their lists long); ``max_terms``: at most that many terms, in order."""
        words = list(dict.fromkeys(terms if terms is not None else sparse.terms(text)))
        if max_share is not None:
            common = self.common_terms(words, max_share)
            words = [w for w in words if w not in common]
        words = words[:max_terms]
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        # FTS5 ranks alone first (a join inside the MATCH query made it score every match the
        # slow way: ~30 ms instead of ~2 on click's long questions), then the filters
        depth = max(SEARCH_DEPTH, 20 * k)
        while True:
            sql = ("WITH m AS MATERIALIZED (SELECT rowid AS id, -bm25(commit_text, 1.0, ?) AS s FROM commit_text "
                   "WHERE commit_text MATCH ? ORDER BY s DESC LIMIT ?) SELECT c.*, m.s FROM m "
                   "JOIN reach r ON r.branch = ? AND r.commit_id = m.id JOIN commits c ON c.id = m.id WHERE 1")
            args: list[object] = [PATH_WEIGHT, match, depth, branch]
            if max_files is not None:
                sql += " AND c.n_files <= ?"
                args.append(max_files)
            if path:
                sql += (" AND EXISTS (SELECT 1 FROM commit_paths p WHERE p.commit_id = c.id AND p.path >= ? "
                        "AND p.path < ?)")
                args += [path, path + "\U0010ffff"]
            sql += " ORDER BY m.s DESC, c.ctime DESC, c.oid LIMIT ?"
            args.append(k)
            try:
                rows = self.db.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:  # a term FTS5 cannot parse: nothing rather than an error
                if "fts5" not in str(exc):
                    raise
                return []
            if len(rows) >= k or depth >= self._count():
                break
            depth *= 8  # the filters left too few: look deeper (a --path, another branch's commits)
        return [_commit(r) for r in rows]

    def touching(self, branch: str, path: str, before: int | None = None) -> list[Commit]:
        """The non-merge commits reachable from ``branch``'s head that changed ``path``
        (added, modified, deleted or renamed to or from it), newest first; ``before``: only
        those committed earlier (commit time, seconds since the epoch)."""
        sql = ("SELECT c.*, 0.0 FROM commit_paths p JOIN reach r ON r.branch = ? AND r.commit_id = p.commit_id "
               "JOIN commits c ON c.id = p.commit_id WHERE p.path = ? AND instr(c.parents, ' ') = 0")
        args: list[object] = [branch, path]
        if before is not None:
            sql += " AND c.ctime < ?"
            args.append(before)
        sql += " ORDER BY c.ctime DESC, c.id DESC"
        return [_commit(r) for r in self.db.execute(sql, args)]

    def recent(self, branch: str, k: int = 10, path: str = "") -> list[Commit]:
        """The newest ``k`` commits reachable from ``branch``'s head (under ``path``)."""
        sql = "SELECT c.*, 0.0 FROM reach r JOIN commits c ON c.id = r.commit_id WHERE r.branch = ?"
        args: list[object] = [branch]
        if path:
            sql += " AND EXISTS (SELECT 1 FROM commit_paths p WHERE p.commit_id = c.id AND p.path >= ? AND p.path < ?)"
            args += [path, path + "\U0010ffff"]
        sql += " ORDER BY c.ctime DESC, c.oid LIMIT ?"
        args.append(k)
        return [_commit(r) for r in self.db.execute(sql, args)]


#: what a damaged ``history.db`` may raise on read: SQLite's own errors, and rows whose JSON or
#: fields no longer decode (a flipped byte inside a row); :func:`is_damage` tells which are damage
DAMAGE = (sqlite3.DatabaseError, ValueError, TypeError, IndexError, AttributeError)


def is_damage(exc: BaseException) -> bool:
    """True when ``exc`` says ``history.db`` itself is damaged, so discarding it loses nothing
    git cannot give again: SQLite's "file is not a database" / "database disk image is
    malformed" (:func:`gitrag.index.vector_cache.is_malformed`) or a row that no longer
    decodes. False for "unable to open database file", "disk I/O error", a read-only or
    locked database, a full disk: the file may be healthy and must be kept."""
    if isinstance(exc, sqlite3.DatabaseError):
        return is_malformed(exc)
    return isinstance(exc, DAMAGE) and not isinstance(exc, OSError)


def unavailable(path: Path, exc: BaseException) -> StateError:
    """The one-line error for a ``history.db`` that cannot be opened or read (not damage): a
    folder the system refuses (read-only, not this user's) is named as ``state.db``'s is."""
    from gitrag.index.state import refused

    cause = str(exc).strip() or type(exc).__name__
    said = refused(path, cause)
    if said is not None:
        return StateError(said)
    return StateError(f"cannot open {path} ({cause}): nothing was deleted; check that its folder is "
                      "mounted, readable and writable, then run the command again")


def discard(data_dir: Path) -> None:
    """Delete ``<data_dir>/history.db`` (and its WAL): it is derived from git alone, and the
    next syncs read the history again."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{Path(data_dir) / 'history.db'}{suffix}").unlink(missing_ok=True)


#: A sync spends at most this share of its own (code) time reading older history; after the
#: repository's first read, MIN_BUDGET_S if that is more. So history adds less than a tenth
#: to a first index (the issue's bound: 0.1 itself came out at 10.5-11% on click, the read
#: stops only between steps of 32 commits and then writes the branch's rows), and the rest of
#: a long history comes with the next syncs (hooks, the daemon's reconciles, `gitrag index`),
#: each reading ~1,500 more commits (click's 3,329 are all read by the third sync).
BUDGET_SHARE = 0.08
MIN_BUDGET_S = 0.5


def open_index(ws: Workspace) -> HistoryIndex:
    """The repository's commit index (``<data dir>/history.db``), created when missing."""
    return HistoryIndex(ws.data_dir)


def sync_branch(ws: Workspace, branch: str, head: str, code_seconds: float | None = None) -> UpdateSummary | None:
    """Bring ``branch``'s commit history to ``head`` (see HistoryIndex.update), reading
    older commits for ``BUDGET_SHARE`` x ``code_seconds`` (the sync's code part; None: all
    of them; at least MIN_BUDGET_S once the repository has a history), and forget
    the history of branches the state no longer has. None when it failed (logged: the
    history is a ranking aid and a command of its own, never a reason to fail a sync)."""
    try:
        with open_index(ws) as hist:
            budget = None if code_seconds is None else BUDGET_SHARE * code_seconds
            if budget is not None and hist.has_commits():  # not the repository's first read: the floor
                budget = max(MIN_BUDGET_S, budget)
            summary = hist.update(ws.repo, branch, head, budget_s=budget)
            hist.prune(b.name for b in ws.state.branches())
        if summary.commits_read:
            log.info("history", branch=branch, read=summary.commits_read, reachable=summary.commits_reachable,
                     seconds=summary.seconds)
        return summary
    except Exception as exc:  # noqa: BLE001 - a full disk, a corrupt history.db: the code index goes on
        log.warning("history update failed", branch=branch, error=repr(exc))
        if is_damage(exc):  # derived from git alone: the next sync reads it anew
            discard(ws.data_dir)
        return None


def pack_files(files: Iterable[FileChange]) -> bytes:
    """A commit's changed files as stored (format 3): zlib of the JSON ``[[status, path,
    old_path], ...]`` (format 2 kept the JSON text: the paths of one commit repeat their
    folders, so it is about a fifth of that)."""
    return zlib.compress(json.dumps([[f.status, f.path, f.old_path] for f in files]).encode("utf-8", "surrogatepass"), 6)


def unpack_files(data: bytes | str) -> list[Any]:
    """The ``[[status, path, old_path], ...]`` of a stored ``files`` value (zlib, or a format-2
    row's JSON text). ValueError when it does not decode (a damaged row: :data:`DAMAGE`)."""
    if isinstance(data, bytes):
        try:
            data = zlib.decompress(data).decode("utf-8", "surrogatepass")
        except zlib.error as exc:
            raise ValueError(f"a commit's files do not decode: {exc}") from None
    out = json.loads(data)
    if not isinstance(out, list):
        raise ValueError("a commit's files are not a list")
    return out


def _commit(r: tuple) -> Commit:
    files = tuple(FileChange(s, p, o) for s, p, o in unpack_files(r[8]))
    return Commit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(r[7].split()), files, r[9], r[10], float(r[11]))
