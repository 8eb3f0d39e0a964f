"""SQLite state of one repository: branches, manifests, symbol graph; and the vector cache.

Every branch's manifest is built from rows shared by all branches that hold the same file:

- ``branches``: name -> collection, embedder fingerprint, last indexed commit, last use,
  pipeline version (``chunker``), whether its points are in the store (``materialized``),
  and its ``root``: the branch it started from (or that one's root), whose points it
  shares without being named on them (NULL: a root itself).
- ``files``: per branch, each tracked path -> blob id and skip reason (NULL if indexed).
- ``points``: per (variant, path, blob), the chunk occurrences of that file: point id,
  chunk hash and payload (JSON). ``variant`` is ``<pipeline>|<embedder fingerprint>``. A
  branch's manifest is its ``files`` joined with these rows, so N branches holding the same
  blob share one set of rows (:meth:`State.points`).
- ``journal``: per branch, the paths a store write is changing; non-empty after a crash,
  or when a chunk failed to embed (the next sync does those paths again).
- ``symbols``: per blob, the chunker's definitions and references (the symbol graph).

The vector cache is one SQLite file shared by every repository of the user
(``<data root>/cache.db``, see :class:`VectorCache`): ``vectors`` (chunk SHA-256, embedder
fingerprint) -> float32 vector, ``sparse`` chunk SHA-256 -> sparse vector. A second clone,
a fork or a moved folder embeds nothing embedded before.

In the store, the points of all branches with one embedder share one collection; a point's
``branches`` and ``hidden`` payloads say which materialized branches hold it, relative to
their roots (see :mod:`gitrag.views`; :meth:`State.members` gives who holds what). The manifest and the last indexed commit only
move together, in one transaction (:meth:`State.commit_paths`), after the store has been
flushed; :meth:`State.plan` says which store writes a state change needs, before it is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from gitrag.errors import StateError
from gitrag.store.base import BranchView, SparseVec

FORMAT_VERSION = 2
MIGRATES_FROM = "1"  # a state of this format is converted on open (its vectors go to the shared cache)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS branches(
    name TEXT PRIMARY KEY, collection TEXT NOT NULL, fingerprint TEXT NOT NULL,
    indexed_commit TEXT, updated_at REAL, last_used REAL, chunker TEXT,
    materialized INTEGER NOT NULL DEFAULT 1, root TEXT);
CREATE TABLE IF NOT EXISTS files(
    branch TEXT NOT NULL, path TEXT NOT NULL, blob TEXT NOT NULL, skip_reason TEXT,
    PRIMARY KEY(branch, path)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_by_blob ON files(path, blob);
CREATE TABLE IF NOT EXISTS points(
    point_id TEXT PRIMARY KEY, variant TEXT NOT NULL, path TEXT NOT NULL, blob TEXT NOT NULL,
    chunk_hash TEXT NOT NULL, payload TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS points_by_file ON points(path, blob, variant);
CREATE INDEX IF NOT EXISTS points_by_hash ON points(chunk_hash);
CREATE TABLE IF NOT EXISTS journal(branch TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY(branch, path));
CREATE TABLE IF NOT EXISTS symbols(blob TEXT NOT NULL, variant TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY(blob, variant)) WITHOUT ROWID;
"""

_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors(
    hash TEXT NOT NULL, fingerprint TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY(hash, fingerprint)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sparse(hash TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
"""

# a branch's manifest rows: its indexed files joined with the shared rows of its variant
_BRANCH_POINTS = (
    "SELECT p.point_id, p.path, p.chunk_hash, p.payload FROM files f "
    "JOIN branches b ON b.name = f.branch "
    "JOIN points p ON p.path = f.path AND p.blob = f.blob AND p.variant = b.chunker || '|' || b.fingerprint "
    "WHERE f.branch = ? AND f.skip_reason IS NULL"
)
# every point held by a materialized branch of one embedder, with the branch holding it
_MEMBERS = (
    "SELECT p.point_id, p.path, p.chunk_hash, p.payload, f.branch FROM points p "
    "JOIN files f ON f.path = p.path AND f.blob = p.blob AND f.skip_reason IS NULL "
    "JOIN branches b ON b.name = f.branch AND b.materialized = 1 AND b.fingerprint = ? "
    "AND p.variant = b.chunker || '|' || b.fingerprint"
)


def branch_tag(name: str) -> str:
    """The keyword that stands for branch ``name`` in a point's ``branches`` payload (12 hex)."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def variant(chunker: str | None, fingerprint: str) -> str:
    """What decides a file's points besides its path and blob: pipeline and embedder."""
    return f"{chunker}|{fingerprint}"


@dataclass(frozen=True)
class Branch:
    name: str
    collection: str
    fingerprint: str
    indexed_commit: str | None
    updated_at: float | None
    last_used: float | None
    chunker: str | None = None  # the indexer's PIPELINE_VERSION (chunker, sparse terms, vector mix) of the manifest
    materialized: bool = True  # False: the manifest is kept, its points are not in the store (gc of an idle branch)
    root: str | None = None  # the branch whose points it shares implicitly (None: a root)

    @property
    def tag(self) -> str:
        """This branch's keyword in the store's ``branches`` / ``hidden`` payloads."""
        return branch_tag(self.name)

    @property
    def view(self) -> BranchView:
        """What a search of this branch filters on: ``store.search(..., branch=branch.view)``."""
        return BranchView(self.tag, branch_tag(self.root) if self.root is not None else None)


@dataclass(frozen=True)
class PointRow:
    point_id: str
    path: str
    chunk_hash: str
    payload: dict[str, Any]

    @cached_property
    def payload_json(self) -> str:
        """``json.dumps(payload)``, made once: a sync writes each row twice (the plan's
        rolled-back trial, then the commit). The payload is never changed in place."""
        return json.dumps(self.payload)


@dataclass(frozen=True)
class Member:
    """A point the store must hold: its manifest row and the branches whose manifest has it."""

    row: PointRow
    branches: frozenset[str]



@dataclass(frozen=True)
class Snapshot:
    """The store's view of the state at one moment: who holds which points, and the branches."""

    members: dict[str, Member]
    branches: dict[str, Branch]


@dataclass(frozen=True)
class FileRow:
    path: str
    blob: str
    skip_reason: str | None


@dataclass
class FileUpdate:
    """The new state of one path after a sync: None ``blob`` means the path is gone.

    ``points`` of an indexed file replace the shared rows of its (variant, path, blob), so
    every branch holding that blob sees them (they are the same, the chunker being
    deterministic, unless a chunk failed to embed before)."""

    path: str
    blob: str | None
    skip_reason: str | None = None
    points: list[PointRow] | None = None


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=30000")  # other processes (daemons of other users' repos, CLIs) write too
    return db


def _refusal(path: Path) -> str | None:
    """Why the system, not the file, keeps SQLite from opening ``path``: its folder is on a
    read-only file system, or the folder (or the file, its ``-wal``/``-shm``) is not this
    user's to write. None when nothing says so (then the file itself is the suspect)."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"{folder} is on a read-only file system"
    except OSError:
        pass
    if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by this user (uid {os.getuid()})"
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if os.path.exists(name) and not os.access(name, os.R_OK | os.W_OK):
            return f"{name} is not readable and writable by this user (uid {os.getuid()})"
    return None


def _cannot_open(path: Path, exc: sqlite3.DatabaseError, corrupt_advice: str) -> str:
    """The one-line message for a SQLite file that does not open: the refusal when the system
    refuses (the file is fine, keep it), else ``corrupt_advice`` (the file is damaged)."""
    refusal = _refusal(path)
    if refusal is not None:
        return (f"cannot open {path} ({exc}): {refusal}, and gitrag writes there; remount it read-write, fix "
                f"the permissions, or set GITRAG_HOME to a folder you can write (the file itself is fine: keep it)")
    return f"cannot open {path}: {exc}; {corrupt_advice}"


@contextmanager
def _disk_errors(path: Path) -> Iterator[None]:
    """SQLite's "database or disk is full" and "disk I/O error" as a StateError saying what to do."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "full" in str(exc):
            raise StateError(f"the disk holding {path.parent} is full ({exc}): "
                             "free space and run `gitrag index` again") from None
        if "disk I/O" in str(exc):
            raise StateError(f"cannot write {path} ({exc}): is the disk full? "
                             "free space and run `gitrag index` again") from None
        raise


class VectorCache:
    """The vector cache shared by every repository of one user (``<data root>/cache.db``).

    Keys: (chunk SHA-256 or ``path:<sha>``, embedder fingerprint) -> float32 vector bytes;
    ``<sparse version>:<chunk SHA-256>`` -> sparse vector JSON. WAL mode and a 30 s busy
    timeout, so several processes (daemon, CLI) read and write it at once; writes are
    ``INSERT OR REPLACE`` of deterministic values, so concurrent writers never conflict."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            with _disk_errors(self.path):
                self.db = _connect(self.path)
                self.db.executescript(_CACHE_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StateError(_cannot_open(self.path, exc, "move it away (vectors are embedded again)")) from None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with _disk_errors(self.path):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise

    def get_vectors(self, hashes: Iterable[str], fingerprint: str) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = self.db.execute(
                f"SELECT hash, vec FROM vectors WHERE fingerprint=? AND hash IN ({marks})", (fingerprint, *part)
            )
            out.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
        return out

    def put_vectors(self, items: dict[str, np.ndarray], fingerprint: str) -> None:
        # in key order: random hashes inserted in order split and rewrite far fewer B-tree
        # pages (1 KB rows; 24.6k vectors: ~1.4 -> ~1.0 CPU-s)
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES(?,?,?)",
                [(h, fingerprint, np.asarray(items[h], dtype=np.float32).tobytes()) for h in sorted(items)],
            )

    def get_sparse(self, hashes: Iterable[str], version: str) -> dict[str, SparseVec]:
        out: dict[str, SparseVec] = {}
        unique = [f"{version}:{h}" for h in dict.fromkeys(hashes)]
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            rows = self.db.execute(f"SELECT hash, data FROM sparse WHERE hash IN ({','.join('?' * len(part))})", part)
            for key, data in rows:
                idx, vals = json.loads(data)
                out[key.split(":", 1)[1]] = SparseVec(idx, vals)
        return out

    def put_sparse(self, items: dict[str, SparseVec], version: str) -> None:
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO sparse VALUES(?,?)",
                [(f"{version}:{h}", json.dumps([items[h].indices, items[h].values])) for h in sorted(items)],
            )

    def import_from(self, other: Path) -> int:
        """Copy every vector and sparse vector of another SQLite file with the same tables
        (a format-1 ``state.db``) that this cache lacks; returns the vectors copied."""
        with _disk_errors(self.path):
            self.db.execute("ATTACH DATABASE ? AS old", (str(other),))
            try:
                with self.transaction() as db:
                    n = db.execute("INSERT OR IGNORE INTO vectors SELECT hash, fingerprint, vec FROM old.vectors").rowcount
                    db.execute("INSERT OR IGNORE INTO sparse SELECT hash, data FROM old.sparse")
            finally:
                self.db.execute("DETACH DATABASE old")
        return n

    def gc(self, live_hashes: Iterable[str], sparse_version: str | None = None) -> tuple[int, int]:
        """Delete chunk vectors and sparse vectors whose hash is not in ``live_hashes`` (and
        sparse vectors of another ``sparse_version``); path vectors stay. (vectors, sparse) deleted."""
        with self.transaction() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS live(hash TEXT PRIMARY KEY) WITHOUT ROWID")
            db.execute("DELETE FROM live")
            db.executemany("INSERT OR IGNORE INTO live VALUES(?)", ((h,) for h in live_hashes))
            v = db.execute("DELETE FROM vectors WHERE hash NOT LIKE 'path:%' AND hash NOT IN (SELECT hash FROM live)").rowcount
            s = db.execute("DELETE FROM sparse WHERE substr(hash, instr(hash, ':') + 1) NOT IN (SELECT hash FROM live)").rowcount
            if sparse_version is not None:
                s += db.execute("DELETE FROM sparse WHERE hash NOT LIKE ?", (f"{sparse_version}:%",)).rowcount
            db.execute("DELETE FROM live")
        if v or s:
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return v, s

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())

    def close(self) -> None:
        self.db.close()


class State:
    """The SQLite database of one repository (``<data dir>/state.db``) and the shared cache."""

    def __init__(self, data_dir: Path, reset_incompatible: bool = False, cache_path: Path | None = None) -> None:
        """Open (or create) the state. A format-1 state (the previous release) is migrated:
        its vectors go to the shared cache, the rest is rebuilt by the next sync with no
        embedding (``migrated_from`` says so). A state of another format raises StateError,
        unless ``reset_incompatible``: then it is moved aside to ``state.db.format-<N>`` and
        an empty one takes its place (``reset_from`` says which format was moved).
        ``cache_path``: the shared vector cache (default ``<data dir>/../cache.db``)."""
        self.path = Path(data_dir) / "state.db"
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.cache = VectorCache(cache_path or Path(data_dir).parent / "cache.db")
        self.reset_from: str | None = None
        self.migrated_from: str | None = None
        self._planner: sqlite3.Connection | None = None
        self._open()
        self._check_version(reset_incompatible)

    def _open(self) -> None:
        try:
            with self._disk_errors():  # a full disk is not a corrupt file: say so
                self.db = _connect(self.path)
                if self.db.execute("SELECT count(*) FROM sqlite_master WHERE name='meta'").fetchone()[0] == 0:
                    self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StateError(_cannot_open(self.path, exc, "move it away and run `gitrag index` to rebuild")) from None
        self._inode = os.stat(self.path).st_ino

    def _check_version(self, reset: bool) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is None:
            self.db.executescript(_SCHEMA)
            # OR IGNORE: another process creating this state at the same moment wrote it first
            self.db.execute("INSERT OR IGNORE INTO meta VALUES('format', ?)", (str(FORMAT_VERSION),))
        elif row[0] != str(FORMAT_VERSION):
            if row[0] != MIGRATES_FROM and not reset:
                raise StateError(
                    f"{self.path} was written by a gitrag with index format {row[0]} (this one reads "
                    f"{FORMAT_VERSION}); run `gitrag index --rebuild` to rebuild it"
                )
            self.db.close()  # as the last connection, SQLite folds the WAL into the file
            aside = self.path.with_name(f"state.db.format-{row[0]}")
            for suffix in ("-wal", ""):  # a WAL left by another connection goes along with its file
                if Path(f"{self.path}{suffix}").exists():
                    Path(f"{self.path}{suffix}").replace(f"{aside}{suffix}")
            Path(f"{self.path}-shm").unlink(missing_ok=True)
            if row[0] == MIGRATES_FROM:  # keep its vectors; the manifest is rebuilt from them
                self.cache.import_from(aside)
                for suffix in ("-wal", "-shm", ""):
                    Path(f"{aside}{suffix}").unlink(missing_ok=True)
                self.migrated_from = str(row[0])
            else:
                self.reset_from = str(row[0])
            self._open()
            self._check_version(False)

    def is_current(self) -> bool:
        """False once the file was deleted or replaced under us (someone removed the data folder)."""
        try:
            return os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def close(self) -> None:
        if self._planner is not None:
            self._planner.close()
        self.db.close()
        self.cache.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._disk_errors():
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # also when COMMIT itself failed (a full disk)
                    self.db.execute("ROLLBACK")
                raise

    def _disk_errors(self) -> Any:
        return _disk_errors(self.path)

    # -- branches -------------------------------------------------------------
    def branch(self, name: str) -> Branch | None:
        row = self.db.execute("SELECT * FROM branches WHERE name=?", (name,)).fetchone()
        return _branch(row) if row else None

    def branches(self) -> list[Branch]:
        return [_branch(r) for r in self.db.execute("SELECT * FROM branches ORDER BY name")]

    def create_branch(self, name: str, collection: str, fingerprint: str, copy_from: str | None = None) -> Branch:
        """Register a branch; with ``copy_from`` its manifest starts as a copy of that branch's
        (its file list: the points rows are shared, not copied)."""
        with self.transaction() as db:
            _create_branch(db, name, collection, fingerprint, copy_from)
        return self.branch(name)  # type: ignore[return-value]

    def drop_branch(self, name: str) -> None:
        with self.transaction() as db:
            _drop_branch(db, name)

    def set_materialized(self, name: str, materialized: bool) -> None:
        with self.transaction() as db:
            _set_materialized(db, name, materialized)

    def touch_branch(self, name: str) -> None:
        with self._disk_errors():
            self.db.execute("UPDATE branches SET last_used=? WHERE name=?", (time.time(), name))

    # -- manifest --------------------------------------------------------------
    def skip_counts(self, branch: str) -> dict[str, int]:
        """{skip reason: number of the branch's files skipped for it}, most frequent first."""
        rows = self.db.execute("SELECT skip_reason, count(*) AS n FROM files WHERE branch=? AND skip_reason IS NOT NULL "
                               "GROUP BY skip_reason ORDER BY n DESC, skip_reason", (branch,))
        return {r[0]: r[1] for r in rows}

    def files(self, branch: str) -> dict[str, FileRow]:
        rows = self.db.execute("SELECT path, blob, skip_reason FROM files WHERE branch=?", (branch,))
        return {r[0]: FileRow(*r) for r in rows}

    def files_of(self, branch: str, paths: Iterable[str]) -> dict[str, FileRow]:
        """The manifest rows of ``paths`` only (those the branch has), 500 per query."""
        out: dict[str, FileRow] = {}
        wanted = list(dict.fromkeys(paths))
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            rows = self.db.execute(f"SELECT path, blob, skip_reason FROM files WHERE branch=? AND path IN "
                                   f"({','.join('?' * len(part))})", (branch, *part))
            out.update((r[0], FileRow(*r)) for r in rows)
        return out

    def points(self, branch: str, paths: Iterable[str] | None = None) -> list[PointRow]:
        """The manifest of ``branch``: its points (of every path, or of ``paths``)."""
        if paths is None:
            rows = self.db.execute(_BRANCH_POINTS, (branch,))
            return [PointRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows]
        out: list[PointRow] = []
        for path in paths:
            rows = self.db.execute(_BRANCH_POINTS + " AND f.path = ?", (branch, path))
            out.extend(PointRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows)
        return out

    def point_ids(self, branch: str, paths: Iterable[str]) -> set[str]:
        """The point ids of ``branch``'s chunks of ``paths`` (no payloads decoded)."""
        out: set[str] = set()
        for path in paths:
            rows = self.db.execute(_BRANCH_POINTS + " AND f.path = ?", (branch, path))
            out.update(r[0] for r in rows)
        return out

    def differing_paths(self, a: str, b: str) -> list[str] | None:
        """Paths whose file (blob or skip reason) differs between branches ``a`` and ``b``;
        None when their pipelines differ (every point differs)."""
        ca, cb = (self.db.execute("SELECT chunker FROM branches WHERE name=?", (n,)).fetchone() for n in (a, b))
        if ca is None or cb is None or ca[0] != cb[0]:
            return None
        rows = self.db.execute(
            "SELECT path FROM (SELECT path, blob, skip_reason FROM files WHERE branch=? EXCEPT "
            "SELECT path, blob, skip_reason FROM files WHERE branch=?) UNION "
            "SELECT path FROM (SELECT path, blob, skip_reason FROM files WHERE branch=? EXCEPT "
            "SELECT path, blob, skip_reason FROM files WHERE branch=?)", (a, b, b, a))
        return sorted(r[0] for r in rows)

    def point_count(self, branch: str) -> int:
        return self.db.execute(f"SELECT count(*) FROM ({_BRANCH_POINTS})", (branch,)).fetchone()[0]

    def commit_paths(
        self, branch: str, updates: list[FileUpdate], commit: str, chunker: str, retry: Iterable[str] = ()
    ) -> None:
        """Apply per-path manifest updates and advance the branch to ``commit``, atomically.

        ``chunker`` is the pipeline version the updates were made with (recorded once a
        sync has re-chunked every path). ``retry``: paths left in the journal, so the next
        sync does them again (a chunk of theirs failed to embed)."""
        with self.transaction() as db:
            _commit_paths(db, branch, updates, commit, chunker, retry)

    def commit_batch(self, branch: str, updates: list[FileUpdate], chunker: str) -> None:
        """Apply the manifest updates of one batch of a sync that has more batches to do, in
        one transaction, and journal their paths: they stay journaled until
        :meth:`commit_paths` ends the sync (a crash in between makes the next sync redo
        them). The branch keeps its indexed commit; it takes ``chunker`` only if it had
        none (a first index). Raises StateError on a full disk."""
        with self.transaction() as db:
            _commit_paths(db, branch, updates, None, chunker, (), final=False)

    # -- the store's view of the state ------------------------------------------------
    def members(self, fingerprint: str, paths: Iterable[str] | None = None) -> dict[str, Member]:
        """Every point the collection of embedder ``fingerprint`` must hold (of ``paths``, or
        of all paths): {point id: Member}; a point no materialized branch holds is absent."""
        return _members(self.db, fingerprint, None if paths is None else sorted(set(paths)))

    def snapshot(self, fingerprint: str, paths: Iterable[str] | None = None) -> Snapshot:
        """Who holds the points of ``paths`` (None: all) now, and the branches."""
        wanted = None if paths is None else sorted(set(paths))
        return Snapshot(_members(self.db, fingerprint, wanted), {b.name: b for b in self.branches()})

    def plan(
        self, fingerprint: str, paths: Iterable[str] | None, change: Callable[[sqlite3.Connection], None]
    ) -> tuple[Snapshot, Snapshot]:
        """(snapshot now, snapshot once ``change`` is applied) of ``paths`` (None: all), for
        the store writes a state change needs. ``change`` runs in a transaction that is
        rolled back: nothing changes here."""
        wanted = None if paths is None else sorted(set(paths))
        before = self.snapshot(fingerprint, wanted)
        with self._disk_errors():
            if self._planner is None:  # its own connection: readers on ``db`` never see the trial
                self._planner = _connect(self.path)
            self._planner.execute("BEGIN")
            try:
                change(self._planner)
                rows = self._planner.execute("SELECT * FROM branches")
                after = Snapshot(_members(self._planner, fingerprint, wanted), {r[0]: _branch(r) for r in rows})
            finally:
                self._planner.execute("ROLLBACK")
        return before, after

    def apply(self, change: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``change`` (one of this module's ``change_*`` functions) in one transaction."""
        with self.transaction() as db:
            change(db)

    # -- crash journal ---------------------------------------------------------
    def journal_paths(self, branch: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT path FROM journal WHERE branch=?", (branch,))]

    def journal(self) -> dict[str, list[str]]:
        """Every journal row: {branch: [paths]} (a branch may no longer exist)."""
        out: dict[str, list[str]] = {}
        for b, p in self.db.execute("SELECT branch, path FROM journal ORDER BY branch, path"):
            out.setdefault(b, []).append(p)
        return out

    def write_journal(self, branch: str, paths: Iterable[str]) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR IGNORE INTO journal VALUES(?,?)", [(branch, p) for p in paths])

    def clear_journal_of_gone_branches(self) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM journal WHERE branch NOT IN (SELECT name FROM branches)")

    # -- vector cache (shared) ----------------------------------------------------
    def get_vectors(self, hashes: Iterable[str], fingerprint: str) -> dict[str, np.ndarray]:
        return self.cache.get_vectors(hashes, fingerprint)

    def put_vectors(self, items: dict[str, np.ndarray], fingerprint: str) -> None:
        self.cache.put_vectors(items, fingerprint)

    def get_sparse(self, hashes: Iterable[str], version: str) -> dict[str, SparseVec]:
        """Cached sparse vectors of chunk hashes made by sparse-term ``version``."""
        return self.cache.get_sparse(hashes, version)

    def put_sparse(self, items: dict[str, SparseVec], version: str) -> None:
        self.cache.put_sparse(items, version)

    # -- symbol graph -------------------------------------------------------------
    def put_symbols(self, blob: str, variant: str, data: dict[str, Any]) -> None:
        with self._disk_errors():
            self.db.execute("INSERT OR REPLACE INTO symbols VALUES(?,?,?)", (blob, variant, json.dumps(data)))

    # -- garbage collection ---------------------------------------------------------
    def gc_rows(self) -> int:
        """Delete shared points rows and symbol rows no branch's files reference; returns points deleted."""
        with self.transaction() as db:
            n = db.execute(
                "DELETE FROM points WHERE NOT EXISTS (SELECT 1 FROM files f JOIN branches b ON b.name = f.branch "
                "WHERE f.path = points.path AND f.blob = points.blob AND f.skip_reason IS NULL "
                "AND points.variant = b.chunker || '|' || b.fingerprint)"
            ).rowcount
            db.execute("DELETE FROM symbols WHERE blob NOT IN (SELECT DISTINCT blob FROM files)")
        return n

    def live_hashes(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT DISTINCT chunk_hash FROM points")}

    def gc_cache(self, sparse_version: str | None = None, other_states: Iterable[Path] = ()) -> tuple[int, int]:
        """Delete unreferenced rows here, then cached vectors and sparse vectors that neither
        this repository's manifests nor those of ``other_states`` (the ``state.db`` of the
        user's other repositories, which share the cache) reference; returns (vectors, sparse)
        deleted from the cache."""
        self.gc_rows()
        live = self.live_hashes()
        for path in other_states:
            if Path(path).resolve() == self.path.resolve():
                continue
            try:
                other = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
                try:
                    if other.execute("SELECT value FROM meta WHERE key='format'").fetchone() != (str(FORMAT_VERSION),):
                        raise sqlite3.DatabaseError("another format")
                    live.update(r[0] for r in other.execute("SELECT DISTINCT chunk_hash FROM points"))
                finally:
                    other.close()
            except sqlite3.DatabaseError:  # unreadable or of another format: keep everything
                return 0, 0
        result = self.cache.gc(live, sparse_version)
        with self._disk_errors():
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # or the WAL keeps what VACUUM freed
        return result

    def size_bytes(self) -> int:
        """Bytes of this repository's ``state.db`` (and WAL); the shared cache not included."""
        return sum(p.stat().st_size for p in self.path.parent.glob("state.db*") if p.is_file())


def _branch(row: Any) -> Branch:
    return Branch(*row[:7], materialized=bool(row[7]), root=row[8])


# -- state changes: each runs inside a transaction (State.apply, State.plan) ----------------

def _create_branch(db: sqlite3.Connection, name: str, collection: str, fingerprint: str, copy_from: str | None) -> None:
    _drop_branch(db, name)
    commit = chunker = root = None
    if copy_from is not None:
        commit, chunker, base_root = db.execute(
            "SELECT indexed_commit, chunker, root FROM branches WHERE name=?", (copy_from,)).fetchone()
        root = base_root or copy_from
        db.execute("INSERT INTO files SELECT ?, path, blob, skip_reason FROM files WHERE branch=?", (name, copy_from))
    now = time.time()
    db.execute("INSERT INTO branches VALUES(?,?,?,?,?,?,?,1,?)",
               (name, collection, fingerprint, commit, now, now, chunker, root))


def _drop_branch(db: sqlite3.Connection, name: str) -> None:
    db.execute("DELETE FROM branches WHERE name=?", (name,))
    db.execute("UPDATE branches SET root=NULL WHERE root=?", (name,))  # its dependents become roots
    db.execute("DELETE FROM files WHERE branch=?", (name,))
    db.execute("DELETE FROM journal WHERE branch=?", (name,))


def _set_materialized(db: sqlite3.Connection, name: str, materialized: bool) -> None:
    db.execute("UPDATE branches SET materialized=? WHERE name=?", (int(materialized), name))


def _commit_paths(
    db: sqlite3.Connection, branch: str, updates: list[FileUpdate], commit: str | None, chunker: str,
    retry: Iterable[str], final: bool = True,
) -> None:
    fingerprint = db.execute("SELECT fingerprint FROM branches WHERE name=?", (branch,)).fetchone()[0]
    var = variant(chunker, fingerprint)
    for up in updates:
        db.execute("DELETE FROM files WHERE branch=? AND path=?", (branch, up.path))
        if up.blob is None:
            continue
        db.execute("INSERT INTO files VALUES(?,?,?,?)", (branch, up.path, up.blob, up.skip_reason))
        if up.skip_reason is None and up.points is not None:
            db.execute("DELETE FROM points WHERE path=? AND blob=? AND variant=?", (up.path, up.blob, var))
            db.executemany(
                "INSERT OR REPLACE INTO points VALUES(?,?,?,?,?,?)",
                [(p.point_id, var, p.path, up.blob, p.chunk_hash, p.payload_json) for p in up.points],
            )
    if not final:  # a batch of a sync: its paths journaled; the commit and a set pipeline stay
        db.executemany("INSERT OR IGNORE INTO journal VALUES(?,?)", [(branch, up.path) for up in updates])
        db.execute("UPDATE branches SET chunker=? WHERE name=? AND chunker IS NULL", (chunker, branch))
        return
    db.execute("DELETE FROM journal WHERE branch=?", (branch,))
    db.executemany("INSERT INTO journal VALUES(?,?)", [(branch, p) for p in sorted(set(retry))])
    db.execute(
        "UPDATE branches SET indexed_commit=?, updated_at=?, chunker=? WHERE name=?",
        (commit, time.time(), chunker, branch),
    )


def _members(db: sqlite3.Connection, fingerprint: str, paths: list[str] | None) -> dict[str, Member]:
    found: dict[str, tuple[PointRow, set[str]]] = {}

    def take(rows: Iterable[Any]) -> None:
        for pid, path, chunk_hash, payload, branch in rows:
            have = found.get(pid)
            if have is None:
                found[pid] = (PointRow(pid, path, chunk_hash, json.loads(payload)), {branch})
            else:
                have[1].add(branch)

    if paths is None:
        take(db.execute(_MEMBERS, (fingerprint,)))
    else:
        for path in paths:
            take(db.execute(_MEMBERS + " WHERE p.path = ?", (fingerprint, path)))
    return {pid: Member(row, frozenset(b)) for pid, (row, b) in found.items()}


def change_create_branch(name: str, collection: str, fingerprint: str, copy_from: str | None) -> Callable[[sqlite3.Connection], None]:
    return lambda db: _create_branch(db, name, collection, fingerprint, copy_from)


def change_drop_branch(name: str) -> Callable[[sqlite3.Connection], None]:
    return lambda db: _drop_branch(db, name)


def change_materialized(name: str, materialized: bool) -> Callable[[sqlite3.Connection], None]:
    return lambda db: _set_materialized(db, name, materialized)


def change_paths(
    branch: str, updates: list[FileUpdate], commit: str, chunker: str, retry: Iterable[str] = (), final: bool = True
) -> Callable[[sqlite3.Connection], None]:
    """:meth:`State.commit_paths` (``final``) or :meth:`State.commit_batch` as a change."""
    retry = list(retry)
    return lambda db: _commit_paths(db, branch, updates, commit, chunker, retry, final)
