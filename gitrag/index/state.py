"""SQLite state of one repository: branches, manifests, symbol graph; and the vector cache.

Every branch's manifest is built from rows shared by all branches that hold the same file:

- ``branches``: name -> collection, embedder fingerprint, last indexed commit, last use,
  pipeline version (``chunker``), whether its points are in the store (``materialized``),
  and its ``root``: the branch it started from (or that one's root), whose points it
  shares without being named on them (NULL: a root itself).
- ``files``: per branch, each tracked path -> blob id and skip reason (NULL if indexed).
- ``points``: per (variant, path, blob), the chunk occurrences of that file: point id,
  chunk hash and payload (compact JSON without the path, blob and chunk hash its columns
  hold, as an array of the fields every chunk has, by position, then an object of the
  others: :func:`stored_payload`, :func:`loaded_payload`). ``variant`` is
  ``<pipeline>|<embedder fingerprint>``. A
  branch's manifest is its ``files`` joined with these rows, so N branches holding the same
  blob share one set of rows (:meth:`State.points`).
- ``journal``: per branch, the paths a store write is changing; non-empty after a crash,
  or when a chunk failed to embed (the next sync does those paths again).
- ``meta``: the state's notes, among them ``unoptimized/<collection>``: the points written to
  a collection since its store optimizer last ran (:meth:`State.unoptimized`), so the
  optimizer runs once enough changed, not after every sync (gitrag.index.views.settle);
  and ``points/<branch>``: its point count at its indexed commit (:meth:`State.counted_points`),
  so a sync counts the points of the paths it touched, not the whole manifest.
- ``symbols``: per blob, the chunker's definitions and references (the symbol graph), as
  zlib-compressed JSON (:func:`graph_text`); ``symbol_names`` indexes its definitions by name.

Format 4 (this module). A format-2 state (payloads with every field, graphs as JSON text,
a ``points_by_hash`` index) is converted in place on open, nothing re-chunked or embedded:
on sqlalchemy (47,718 chunks) a fresh index's state is 44.1 MB instead of 90.7 (0.92 KB per chunk
instead of 1.90; bench/results/scale-disk.json). A format-3 state (each payload a JSON object,
its keys spelled out in every row) is converted in place the same way, each payload rewritten
as its positional form (:func:`stored_payload`; bench/results/disk-cache13.json); a state
that cannot be written then stays as it is, which this code reads too.

The vector cache is one SQLite file shared by every repository of the user
(``<data root>/cache.db``, see :mod:`gitrag.index.vector_cache`): (chunk SHA-256, embedder
fingerprint) -> int8 vector, chunk SHA-256 -> sparse vector, each row checked by its
digest when read. A second clone, a fork or a moved folder embeds nothing embedded before.

In the store, the points of all branches with one embedder share one collection; a point's
``branches`` and ``hidden`` payloads say which materialized branches hold it, relative to
their roots (see :mod:`gitrag.index.views`; :meth:`State.members` gives who holds what). The manifest and the last indexed commit only
move together, in one transaction (:meth:`State.commit_paths`), after the store has been
flushed; :meth:`State.plan` says which store writes a state change needs, before it is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
import zlib
from collections.abc import Callable, Container, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from gitrag.errors import DiskFull, StateError
from gitrag.index.records import BranchView, SparseVec
from gitrag.index.vector_cache import VectorCache, is_malformed

FORMAT_VERSION = 4
MIGRATES_FROM = "1"  # a state of this format is converted on open (its vectors go to the shared cache)
# states of these formats are converted in place on open (:func:`_convert_format2`, :func:`_convert_format3`)
CONVERTS_FROM = ("2", "3")
# the payload fields a ``points`` row keeps in its own columns, left out of its payload JSON
_COLUMN_FIELDS = ("path", "blob", "chunk_hash")
# the fields every chunk's payload starts with (gitrag.index.indexer), kept by position
_POSITIONAL = ("start_byte", "end_byte", "start_line", "end_line", "symbol", "kind", "language")

# the symbol graph's definitions read by key (the last segment of the name, lower-cased), so a
# query reads the few definitions of the names it needs, not the whole branch's graph
_SYMBOL_NAMES_SCHEMA = """
CREATE TABLE IF NOT EXISTS symbol_names(key TEXT NOT NULL, blob TEXT NOT NULL, variant TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, parent TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, language TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS symbol_names_by_key ON symbol_names(key, blob);
CREATE INDEX IF NOT EXISTS symbol_names_by_blob ON symbol_names(blob, variant);
"""

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
CREATE INDEX IF NOT EXISTS points_by_path ON points(path, blob);
CREATE TABLE IF NOT EXISTS journal(branch TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY(branch, path));
CREATE TABLE IF NOT EXISTS symbols(blob TEXT NOT NULL, variant TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY(blob, variant)) WITHOUT ROWID;
""" + _SYMBOL_NAMES_SCHEMA


# a branch's manifest rows: its indexed files joined with the shared rows of its variant
_BRANCH_POINTS = (
    "SELECT p.point_id, p.path, p.chunk_hash, p.payload, p.blob FROM files f "
    "JOIN branches b ON b.name = f.branch "
    "JOIN points p ON p.path = f.path AND p.blob = f.blob AND p.variant = b.chunker || '|' || b.fingerprint "
    "WHERE f.branch = ? AND f.skip_reason IS NULL"
)
# every point held by a materialized branch of one embedder, with the branch holding it
_MEMBERS = (
    "SELECT p.point_id, p.path, p.chunk_hash, p.payload, p.blob, f.branch FROM points p "
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
        """The payload as its ``points`` row keeps it (:func:`stored_payload`), made once: a
        sync writes each row twice (the plan's rolled-back trial, then the commit). The
        payload is never changed in place."""
        return stored_payload(self.payload)


def stored_payload(payload: dict[str, Any]) -> str:
    """Compact JSON of ``payload`` without the fields its ``points`` row has as columns
    (``_COLUMN_FIELDS``: path, blob, chunk hash; :func:`loaded_payload` puts them back).
    A payload whose other fields start with ``_POSITIONAL``'s, in that order (every chunk's),
    is kept as a JSON array of their values, then, if it has more, an object of the rest
    (``[5710,6364,146,166,"<module>","module","python",{"prose":1.0}]``: 62 bytes where
    the object took 135); any other payload as a JSON object."""
    rest = {k: v for k, v in payload.items() if k not in _COLUMN_FIELDS}
    keys = tuple(rest)
    if keys[: len(_POSITIONAL)] != _POSITIONAL:
        return json.dumps(rest, separators=(",", ":"), ensure_ascii=False)
    row: list[Any] = [rest[k] for k in _POSITIONAL]
    if len(keys) > len(_POSITIONAL):
        row.append({k: rest[k] for k in keys[len(_POSITIONAL):]})
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False)


def _payload_fields(value: Any) -> dict[str, Any] | None:
    """The payload fields of a stored payload's parsed JSON (:func:`stored_payload`'s two
    forms), in the order they were given; None when it is neither form."""
    if isinstance(value, dict):
        return value
    n = len(_POSITIONAL)
    if not isinstance(value, list) or len(value) not in (n, n + 1) or (len(value) > n and not isinstance(value[n], dict)):
        return None
    fields = dict(zip(_POSITIONAL, value, strict=False))
    if len(value) > n:
        fields.update(value[n])
    return fields


def loaded_payload(text: str, path: str, blob: str, chunk_hash: str, db: sqlite3.Connection | None = None
                   ) -> dict[str, Any]:
    """The payload of a ``points`` row: its JSON (either form of :func:`stored_payload`) and
    its path, blob and chunk hash columns. Text that is neither form raises ValueError, or,
    with ``db`` (the state it was read from), StateError naming that file and the fix (see
    ``_damaged``)."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        value = None
    if type(value) is list and len(value) == len(_POSITIONAL):  # most rows: no extras, nothing else to check
        payload = dict(zip(_POSITIONAL, value, strict=True))
        payload["path"], payload["blob"], payload["chunk_hash"] = path, blob, chunk_hash
        return payload
    got = _payload_fields(value)
    if got is None:
        if db is None:
            raise ValueError("a manifest payload that is neither a JSON object nor its positional array")
        _damaged(db)
    payload = got
    payload.setdefault("path", path)
    payload.setdefault("blob", blob)
    payload.setdefault("chunk_hash", chunk_hash)
    return payload


def graph_text(data: bytes | str) -> str:
    """The JSON text of a ``symbols`` row's graph (kept zlib-compressed: the graphs' JSON
    is ~11x its deflated size; a text value is read as it is)."""
    return zlib.decompress(data).decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data


def _graph_data(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 6)


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
class StoreWrites:
    """Points written to a collection's store: upserted, deleted, and whose membership payload
    was set (``moved``: a segment the optimizer sealed keeps a dead copy of each of them)."""

    written: int = 0
    deleted: int = 0
    moved: int = 0

    @property
    def total(self) -> int:
        return self.written + self.deleted + self.moved


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


def refused(path: Path, exc: BaseException | str) -> str | None:
    """The one-line message for a SQLite file (``state.db``, ``cache.db``, ``history.db``) the
    system keeps from opening: its folder read-only or not this user's (the file is fine, keep
    it); None when nothing says so."""
    refusal = _refusal(path)
    if refusal is None:
        return None
    return (f"cannot open {path} ({exc}): {refusal}, and gitrag writes there; remount it read-write, fix "
            f"the permissions, or set GITRAG_HOME to a folder you can write (the file itself is fine: keep it)")


def _cannot_open(path: Path, exc: sqlite3.DatabaseError, corrupt_advice: str) -> str:
    """The one-line message for a SQLite file that does not open: :func:`refused` when the system
    refuses, else ``corrupt_advice`` (the file is damaged)."""
    return refused(path, exc) or f"cannot open {path}: {exc}; {corrupt_advice}"


@contextmanager
def _disk_errors(path: Path) -> Iterator[None]:
    """SQLite's "database or disk is full" and "disk I/O error" as a StateError saying what to do."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "full" in str(exc):
            raise DiskFull(f"the disk holding {path.parent} is full ({exc}): "
                           "free space and run `gitrag index` again", str(path), str(exc)) from None
        if "disk I/O" in str(exc):
            raise DiskFull(f"cannot write {path} ({exc}): is the disk full? "
                           "free space and run `gitrag index` again", str(path), str(exc)) from None
        raise


class _Damaged(Exception):
    """SQLite found ``state.db`` itself damaged while opening it."""


class State:
    """The SQLite database of one repository (``<data dir>/state.db``) and the shared cache."""

    def __init__(self, data_dir: Path, reset_incompatible: bool = False, cache_path: Path | None = None) -> None:
        """Open (or create) the state. A format-1 state (the previous release) is migrated:
        its vectors go to the shared cache, the rest is rebuilt by the next sync with no
        embedding (``migrated_from`` says so). A state of another format raises StateError,
        unless ``reset_incompatible``: then it is moved aside to ``state.db.format-<N>`` and
        an empty one takes its place (``reset_from`` says which format was moved). A state
        SQLite finds damaged on open is moved to ``state.db.damaged`` and started again
        (``reset_from`` = "damaged"; it is all derived from git and the vector cache).
        ``cache_path``: the shared vector cache (default ``<data dir>/../cache.db``)."""
        self.path = Path(data_dir) / "state.db"
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.cache = VectorCache(cache_path or Path(data_dir).parent / "cache.db")
        self.reset_from: str | None = None
        self.migrated_from: str | None = None
        self._planner: sqlite3.Connection | None = None
        self.symbol_names_ready = True  # False: symbol_names could not be built (read-only state)
        try:
            self._open()
        except _Damaged:  # everything in it is derived from git and the cache: start again
            self._set_aside()
            self._open()
        if reset_incompatible:
            self._move_aside_if_damaged()
        self._check_version(reset_incompatible)

    def _open(self) -> None:
        try:
            with self._disk_errors():  # a full disk is not a corrupt file: say so
                self.db = _connect(self.path)
                if self.db.execute("SELECT count(*) FROM sqlite_master WHERE name='meta'").fetchone()[0] == 0:
                    self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            if is_malformed(exc) and _refusal(self.path) is None and self.reset_from != "damaged":
                raise _Damaged(str(exc)) from None
            raise StateError(_cannot_open(self.path, exc, "move it away and run `gitrag index` to rebuild")) from None
        self._inode = os.stat(self.path).st_ino

    def _move_aside_if_damaged(self) -> None:
        """``index --rebuild``: a state SQLite finds damaged (``PRAGMA integrity_check``: also an
        index that lost a row, which ``quick_check`` passes and which made a rebuild of the store
        from it miss that row's point, the corruption fuzz's seeds 1 and 7), or with a
        manifest payload that is not JSON, is moved
        to ``state.db.damaged`` and an empty one takes its place (``reset_from`` = "damaged":
        the collections are dropped and rebuilt from git and the vector cache)."""
        try:
            row = self.db.execute("PRAGMA integrity_check(1)").fetchone()
            bad = row is None or row[0] != "ok"
            if not bad and self.db.execute("SELECT count(*) FROM sqlite_master WHERE name='points'").fetchone()[0]:
                # a byte gone bad inside a payload's text passes SQLite's checks: the JSON's own
                bad = self.db.execute("SELECT 1 FROM points WHERE NOT json_valid(payload) LIMIT 1").fetchone() is not None
        except sqlite3.DatabaseError as exc:
            bad, row = True, (str(exc),)
        if not bad:
            return
        self.db.close()
        self._set_aside()
        self._open()

    def _set_aside(self) -> None:
        """Move a damaged ``state.db`` (and its WAL) to ``state.db.damaged``; ``reset_from``
        = "damaged" (the workspace drops the collections: the next sync rebuilds them)."""
        aside = self.path.with_name("state.db.damaged")
        for suffix in ("-wal", ""):
            if Path(f"{self.path}{suffix}").exists():
                Path(f"{self.path}{suffix}").replace(f"{aside}{suffix}")
        Path(f"{self.path}-shm").unlink(missing_ok=True)
        self.reset_from = "damaged"

    def _check_version(self, reset: bool) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is None:
            self.db.executescript(_SCHEMA)
            # OR IGNORE: another process creating this state at the same moment wrote it first
            self.db.execute("INSERT OR IGNORE INTO meta VALUES('format', ?)", (str(FORMAT_VERSION),))
            self.db.execute("INSERT OR IGNORE INTO meta VALUES('symbol_names', '1')")
        elif row[0] == str(FORMAT_VERSION):
            self._index_symbol_names()
        elif row[0] in CONVERTS_FROM:
            self._convert()
            self._index_symbol_names()
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

    def _convert(self) -> None:
        """Convert a format-2 or format-3 state in place, in one transaction
        (:func:`_convert_format2`, then :func:`_convert_format3`; nothing re-chunked or
        embedded), then give the freed pages back. A state that cannot be written now
        (read-only, busy) stays as it is, which this code reads as well."""
        try:
            with self.transaction() as db:
                done = _convert_format2(db)
                done = _convert_format3(db) or done
        except (StateError, sqlite3.OperationalError):
            return
        if done:
            try:
                with self._disk_errors():
                    self.db.execute("VACUUM")
                    self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except (StateError, sqlite3.OperationalError):  # another connection reads: the next gc vacuums
                pass

    def _index_symbol_names(self) -> None:
        """A state of this format written before the ``symbol_names`` table: make it and fill
        it from the stored graphs, once (a few seconds on 10^5 definitions, no re-chunking)."""
        if self.db.execute("SELECT 1 FROM meta WHERE key='symbol_names'").fetchone() is not None:
            return
        try:
            self._fill_names()
        except (StateError, sqlite3.OperationalError):  # a state this user cannot write: graphs are read whole
            self.symbol_names_ready = False

    def _fill_names(self) -> None:
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM meta WHERE key='symbol_names'").fetchone() is None:  # another process did
                for statement in _SYMBOL_NAMES_SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                _fill_symbol_names(db)
                db.execute("INSERT INTO meta VALUES('symbol_names', '1')")

    def is_current(self) -> bool:
        """False once the file was deleted or replaced under us (someone removed the data folder)."""
        try:
            return os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def connections(self) -> list[sqlite3.Connection]:
        """The open SQLite connections: the state's, the vector cache's and the planner's
        when it has one (for a caller emptying their page caches; not to query)."""
        return [self.db, self.cache.db, *([self._planner] if self._planner is not None else [])]

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

    def drop_branch(self, name: str) -> None:
        with self.transaction() as db:
            _drop_branch(db, name)

    def set_materialized(self, name: str, materialized: bool) -> None:
        with self.transaction() as db:
            _set_materialized(db, name, materialized)

    def meta(self, key: str) -> str | None:
        """The state's own note ``key`` (``detached_view``), or None when never set."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (key, value))

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

    def file_count(self, branch: str) -> int:
        """Paths in the branch's manifest (indexed or skipped)."""
        return int(self.db.execute("SELECT count(*) FROM files WHERE branch=?", (branch,)).fetchone()[0])

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

    def points(self, branch: str, paths: Iterable[str] | None = None,
               only: Container[str] | None = None) -> list[PointRow]:
        """The manifest of ``branch``: its points (of every path, or of ``paths``), in the
        same order either way; ``only``: just the points whose id it holds (the others'
        payloads are not decoded: a query's file candidates keep ~1 in 10 of a file's chunks)."""
        if paths is None:
            rows = self.db.execute(_BRANCH_POINTS, (branch,))
            return [PointRow(r[0], r[1], r[2], loaded_payload(r[3], r[1], r[4], r[2], self.db)) for r in rows
                    if only is None or r[0] in only]
        out: list[PointRow] = []
        for path in paths:
            rows = self.db.execute(_BRANCH_POINTS + " AND f.path = ?", (branch, path))
            out.extend(PointRow(r[0], r[1], r[2], loaded_payload(r[3], r[1], r[4], r[2], self.db)) for r in rows
                       if only is None or r[0] in only)
        return out

    def payloads(self, point_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{point id: payload} of these points' manifest rows (the store's payload without the
        ``branches``/``hidden`` membership); an id no row has is left out. Primary-key
        lookups: ~1 ms for 100 ids, where the store's retrieve took ~120 ms on sympy."""
        ids = list(dict.fromkeys(point_ids))
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.db.execute(f"SELECT point_id, payload, path, blob, chunk_hash FROM points WHERE point_id IN "
                                   f"({','.join('?' * len(part))})", part)
            out.update((r[0], loaded_payload(r[1], r[2], r[3], r[4], self.db)) for r in rows)
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
        """Points of the branch's manifest: a count over the whole manifest (~0.4 s at 73k
        points); a sync keeps it in ``meta`` instead (:meth:`counted_points`)."""
        return self.db.execute(f"SELECT count(*) FROM ({_BRANCH_POINTS})", (branch,)).fetchone()[0]

    def point_count_of(self, branch: str, paths: Iterable[str]) -> int:
        """Points of the branch's manifest in ``paths`` (one indexed query a path)."""
        query = f"SELECT count(*) FROM ({_BRANCH_POINTS} AND f.path = ?)"
        return sum(self.db.execute(query, (branch, p)).fetchone()[0] for p in paths)

    def counted_points(self, branch: Branch) -> int | None:
        """:meth:`point_count` of ``branch`` as the last sync counted it (``meta``
        ``points/<name>``: [indexed commit, count]), or None when it is not known for the
        branch's indexed commit (never counted, or a sync of it is under way or crashed)."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (_points_key(branch.name),)).fetchone()
        try:
            commit, count = json.loads(row[0]) if row is not None else (None, None)
        except (ValueError, TypeError):
            return None
        if commit is None or count is None or commit != branch.indexed_commit:
            return None
        return int(count)

    def set_counted_points(self, name: str, commit: str | None, count: int | None) -> None:
        """Record ``count`` points for branch ``name`` at ``commit`` (None: forget the count)."""
        with self.transaction() as db:
            if count is None or commit is None:
                db.execute("DELETE FROM meta WHERE key=?", (_points_key(name),))
            else:
                db.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (_points_key(name), json.dumps([commit, count])))

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

    def member_paths(self, fingerprint: str) -> list[str]:
        """Sorted paths with points in the collection of ``fingerprint``: the indexed files of
        its materialized branches (what :meth:`members` of all paths would visit)."""
        return [r[0] for r in self.db.execute(
            "SELECT DISTINCT f.path FROM files f JOIN branches b ON b.name = f.branch AND b.materialized = 1 "
            "AND b.fingerprint = ? WHERE f.skip_reason IS NULL ORDER BY f.path", (fingerprint,))]

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

    def write_journal(self, branch: str, paths: Iterable[str], writes: tuple[str, StoreWrites] | None = None) -> None:
        """Journal ``paths`` for ``branch``; with ``writes`` (collection, the store writes about
        to be made), add them to the collection's :meth:`unoptimized` count in the same
        transaction (counted before they are made: a crash counts writes the repair redoes)."""
        with self.transaction() as db:
            db.executemany("INSERT OR IGNORE INTO journal VALUES(?,?)", [(branch, p) for p in paths])
            if writes is not None:
                _add_unoptimized(db, *writes)

    # -- the store's optimizer -------------------------------------------------------
    def unoptimized(self, collection: str) -> StoreWrites:
        """The point writes made to ``collection`` since its optimizer last ran (as
        :meth:`write_journal` counted them; zero when none were counted)."""
        return _unoptimized(self.db, collection)

    def clear_unoptimized(self, collection: str) -> None:
        """The optimizer of ``collection`` ran (or the collection is gone): its count is zero."""
        with self.transaction() as db:
            db.execute("DELETE FROM meta WHERE key=?", (_unoptimized_key(collection),))

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
        """Store one blob's symbol graph (``{"language", "definitions", "references"}``) and
        the names it defines (:func:`symbol_name_key`), in one transaction."""
        self.put_symbols_many([(blob, variant, data)])

    def put_symbols_many(self, graphs: list[tuple[str, str, dict[str, Any]]]) -> None:
        """:meth:`put_symbols` of many (blob, variant, graph), in one transaction (a batch's)."""
        if not graphs:
            return
        with self.transaction() as db:
            for blob, var, data in graphs:
                _put_symbols(db, blob, var, json.dumps(data), data)

    def definitions_named(self, branch: str, keys: Iterable[str], variant: str) -> list[tuple[Any, ...]]:
        """The branch's definitions whose :func:`symbol_name_key` is one of ``keys``: rows
        (path, name, kind, parent, start_line, end_line, language), from each file's graph of
        chunker ``variant`` where the blob has one (else its other stored graph, as a whole-graph
        load reads it). A few index lookups, whatever the repository's size."""
        want = sorted(set(keys))
        out: list[tuple[Any, ...]] = []
        for i in range(0, len(want), 500):
            part = want[i : i + 500]
            out += self.db.execute(
                "SELECT f.path, d.name, d.kind, d.parent, d.start_line, d.end_line, d.language FROM symbol_names d "
                "JOIN files f ON f.blob = d.blob AND f.branch = ? AND f.skip_reason IS NULL "
                f"WHERE d.key IN ({','.join('?' * len(part))}) AND d.variant = (SELECT s.variant FROM symbols s "
                "WHERE s.blob = d.blob ORDER BY s.variant = ? DESC LIMIT 1)", (branch, *part, variant)).fetchall()
        return out

    def file_symbols(self, branch: str, path: str, variant: str) -> tuple[bool, str | None]:
        """(whether ``path`` is an indexed file of the branch, its graph JSON or None)."""
        row = self.db.execute("SELECT blob FROM files WHERE branch=? AND path=? AND skip_reason IS NULL",
                              (branch, path)).fetchone()
        if row is None:
            return False, None
        got = self.db.execute("SELECT data FROM symbols WHERE blob=? ORDER BY variant = ? DESC LIMIT 1",
                              (row[0], variant)).fetchone()
        return True, graph_text(got[0]) if got else None

    def indexed_paths(self, branch: str) -> list[str]:
        """The branch's indexed (not skipped) paths."""
        return [r[0] for r in self.db.execute("SELECT path FROM files WHERE branch=? AND skip_reason IS NULL",
                                              (branch,))]

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
            db.execute("DELETE FROM symbol_names WHERE blob NOT IN (SELECT DISTINCT blob FROM files)")
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
                    if other.execute("SELECT value FROM meta WHERE key='format'").fetchone() not in (
                            (str(FORMAT_VERSION),), *((v,) for v in CONVERTS_FROM)):  # all have ``points.chunk_hash``
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


def symbol_name_key(name: str) -> str:
    """The key a definition is found by in ``symbol_names``: the last segment of its
    qualified name (separators ``.``, ``::``, ``->``, ``#``, ``\\``), lower-cased; "" for none."""
    parts = [p for p in _NAME_SPLIT.split(name.strip()) if p]
    return parts[-1].lower() if parts else ""


_NAME_SPLIT = re.compile(r"::|->|[.#\\]")  # the same separators as gitrag.index.symbols.split_name


def _put_symbols(db: sqlite3.Connection, blob: str, variant: str, text: str, data: dict[str, Any]) -> None:
    db.execute("INSERT OR REPLACE INTO symbols VALUES(?,?,?)", (blob, variant, _graph_data(text)))
    db.execute("DELETE FROM symbol_names WHERE blob=? AND variant=?", (blob, variant))
    db.executemany("INSERT INTO symbol_names VALUES(?,?,?,?,?,?,?,?,?)", _name_rows(blob, variant, data))


def _name_rows(blob: str, variant: str, data: dict[str, Any]) -> list[tuple[Any, ...]]:
    lang = str(data.get("language", ""))
    rows = []
    for d in data.get("definitions", ()):
        name = str(d["name"])
        key = symbol_name_key(name)
        if key:
            rows.append((key, blob, variant, name, str(d.get("kind", "")), str(d.get("parent", "")),
                         int(d["start_line"]), int(d["end_line"]), lang))
    return rows


def _convert_format2(db: sqlite3.Connection) -> bool:
    """Format 2 -> 3, inside the caller's transaction: the ``points`` payloads lose the fields
    their columns hold (:data:`_COLUMN_FIELDS`) and become compact JSON, the graphs are
    compressed (:func:`graph_text`), the ``points_by_hash`` index (only ``live_hashes`` read
    it, a scan now) is dropped and ``points_by_file`` (path, blob, variant) becomes
    ``points_by_path`` (path, blob): the 53-byte variant was most of each entry, and a blob
    has the rows of one or two pipelines. False when another process converted it first."""
    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    if row is None or row[0] != "2":
        return False
    db.execute("UPDATE points SET payload = json_remove(payload, '$.path', '$.blob', '$.chunk_hash')")
    keys = db.execute("SELECT blob, variant FROM symbols").fetchall()
    for i in range(0, len(keys), 500):
        part = keys[i : i + 500]
        rows = [db.execute("SELECT data FROM symbols WHERE blob=? AND variant=?", k).fetchone() for k in part]
        db.executemany("UPDATE symbols SET data=? WHERE blob=? AND variant=?",
                       [(_graph_data(graph_text(r[0])), *k) for r, k in zip(rows, part, strict=True) if r is not None])
    db.execute("DROP INDEX IF EXISTS points_by_hash")
    db.execute("DROP INDEX IF EXISTS points_by_file")  # (path, blob, variant): a blob has one variant or two
    db.execute("CREATE INDEX IF NOT EXISTS points_by_path ON points(path, blob)")
    db.execute("UPDATE meta SET value='3' WHERE key='format'")
    return True


def _convert_format3(db: sqlite3.Connection) -> bool:
    """Format 3 -> 4, inside the caller's transaction: every ``points`` payload (a JSON
    object) rewritten in :func:`stored_payload`'s form; a payload that is not JSON is left
    as it is (``index --rebuild`` finds it). False when the state is not format 3 (another
    process converted it first)."""
    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    if row is None or row[0] != "3":
        return False
    last = ""
    while rows := db.execute("SELECT point_id, payload FROM points WHERE point_id > ? ORDER BY point_id LIMIT 5000",
                             (last,)).fetchall():
        out = []
        for pid, text in rows:
            try:
                value = json.loads(text)
            except (ValueError, TypeError):
                continue
            if isinstance(value, dict):
                out.append((stored_payload(value), pid))
        db.executemany("UPDATE points SET payload=? WHERE point_id=?", out)
        last = rows[-1][0]
    db.execute("UPDATE meta SET value=? WHERE key='format'", (str(FORMAT_VERSION),))
    return True


def _fill_symbol_names(db: sqlite3.Connection) -> int:
    """Index the definitions of every stored graph (a state written before ``symbol_names``
    existed: converted once on open, nothing re-chunked); returns the graphs read."""
    n = 0
    for blob, variant, text in db.execute("SELECT blob, variant, data FROM symbols").fetchall():
        db.executemany("INSERT INTO symbol_names VALUES(?,?,?,?,?,?,?,?,?)",
                       _name_rows(blob, variant, json.loads(graph_text(text))))
        n += 1
    return n


# -- state changes: each runs inside a transaction (State.apply, State.plan) ----------------

BASE_ROOT = "\0base"  # change_create_branch's default root: the base's root (or the base, a root)


def _create_branch(db: sqlite3.Connection, name: str, collection: str, fingerprint: str, copy_from: str | None,
                   root: str | None = BASE_ROOT, only: frozenset[tuple[str, str]] | None = None) -> None:
    _drop_branch(db, name)
    commit = chunker = None
    chosen = root
    root = None
    if copy_from is not None:
        commit, chunker, base_root = db.execute(
            "SELECT indexed_commit, chunker, root FROM branches WHERE name=?", (copy_from,)).fetchone()
        root = (base_root or copy_from) if chosen == BASE_ROOT else chosen
        if only is None:
            db.execute("INSERT INTO files SELECT ?, path, blob, skip_reason FROM files WHERE branch=?", (name, copy_from))
        else:
            rows = db.execute("SELECT path, blob, skip_reason FROM files WHERE branch=?", (copy_from,)).fetchall()
            db.executemany("INSERT INTO files VALUES(?,?,?,?)", [(name, *r) for r in rows if (r[0], r[1]) in only])
    now = time.time()
    db.execute("INSERT INTO branches VALUES(?,?,?,?,?,?,?,1,?)",
               (name, collection, fingerprint, commit, now, now, chunker, root))


def _points_key(name: str) -> str:
    return f"points/{name}"


def _drop_branch(db: sqlite3.Connection, name: str) -> None:
    db.execute("DELETE FROM meta WHERE key=?", (_points_key(name),))
    db.execute("DELETE FROM branches WHERE name=?", (name,))
    db.execute("UPDATE branches SET root=NULL WHERE root=?", (name,))  # its dependents become roots
    db.execute("DELETE FROM files WHERE branch=?", (name,))
    db.execute("DELETE FROM journal WHERE branch=?", (name,))


def _set_materialized(db: sqlite3.Connection, name: str, materialized: bool) -> None:
    db.execute("UPDATE branches SET materialized=? WHERE name=?", (int(materialized), name))


def _unoptimized_key(collection: str) -> str:
    return f"unoptimized/{collection}"


def _unoptimized(db: sqlite3.Connection, collection: str) -> StoreWrites:
    row = db.execute("SELECT value FROM meta WHERE key=?", (_unoptimized_key(collection),)).fetchone()
    try:
        written, deleted, moved = (int(n) for n in json.loads(row[0])) if row is not None else (0, 0, 0)
    except (ValueError, TypeError):  # not three numbers: counted as nothing (the next optimize rewrites it)
        return StoreWrites()
    return StoreWrites(written, deleted, moved)


def _add_unoptimized(db: sqlite3.Connection, collection: str, writes: StoreWrites) -> None:
    have = _unoptimized(db, collection)
    total = [have.written + writes.written, have.deleted + writes.deleted, have.moved + writes.moved]
    db.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (_unoptimized_key(collection), json.dumps(total)))


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


def _damaged(db: sqlite3.Connection) -> NoReturn:
    """Raise StateError naming the state file and the fix: a manifest row's bytes are not a
    payload's JSON (:func:`stored_payload`; a byte gone bad inside the text: SQLite's own
    checks pass)."""
    row = db.execute("PRAGMA database_list").fetchone()
    raise StateError(f"the index state {row[2] if row else 'state.db'} is damaged (a manifest row is not JSON): "
                     "run `gitrag index --rebuild`")


def _members(db: sqlite3.Connection, fingerprint: str, paths: list[str] | None) -> dict[str, Member]:
    found: dict[str, tuple[PointRow, set[str]]] = {}

    def take(rows: Iterable[Any]) -> None:
        for pid, path, chunk_hash, payload, blob, branch in rows:
            have = found.get(pid)
            if have is None:
                found[pid] = (PointRow(pid, path, chunk_hash, loaded_payload(payload, path, blob, chunk_hash, db)), {branch})
            else:
                have[1].add(branch)

    if paths is None:
        take(db.execute(_MEMBERS, (fingerprint,)))
    else:
        for path in paths:
            take(db.execute(_MEMBERS + " WHERE p.path = ?", (fingerprint, path)))
    return {pid: Member(row, frozenset(b)) for pid, (row, b) in found.items()}


def change_create_branch(name: str, collection: str, fingerprint: str, copy_from: str | None,
                         root: str | None = BASE_ROOT, only: frozenset[tuple[str, str]] | None = None,
                         ) -> Callable[[sqlite3.Connection], None]:
    """A new branch ``name`` holding the files of ``copy_from`` (None: none; ``only``: those
    of these (path, blob)), at its indexed commit, rooted at ``root``: a materialized root
    branch of the same pipeline, None for a root itself, or BASE_ROOT (``copy_from``'s
    root, or ``copy_from`` when it is a root)."""
    return lambda db: _create_branch(db, name, collection, fingerprint, copy_from, root, only)


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
