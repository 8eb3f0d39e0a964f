"""SQLite state of one repository: branches, manifest, vector cache, symbol graph.

Tables
- ``branches``: name -> collection, embedder fingerprint, last indexed commit, last use.
- ``files``: per branch, each tracked path -> blob id and skip reason (NULL if indexed).
- ``points``: per branch, each point -> path, chunk hash and payload (JSON): the manifest.
- ``vectors``: (chunk SHA-256, embedder fingerprint) -> float32 vector: the one durable copy.
- ``sparse``: chunk SHA-256 -> sparse vector (independent of the embedder).
- ``journal``: per branch, the paths a sync is writing to the store; non-empty after a crash,
  or when a chunk failed to embed (the next sync does those paths again).
- ``symbols``: per blob, the chunker's definitions and references (the symbol graph).

The manifest and the last indexed commit only move together, in one transaction
(:meth:`State.commit_paths`), after the store has been flushed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gitrag.errors import StateError
from gitrag.store.base import SparseVec

FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS branches(
    name TEXT PRIMARY KEY, collection TEXT NOT NULL, fingerprint TEXT NOT NULL,
    indexed_commit TEXT, updated_at REAL, last_used REAL, chunker TEXT);
CREATE TABLE IF NOT EXISTS files(
    branch TEXT NOT NULL, path TEXT NOT NULL, blob TEXT NOT NULL, skip_reason TEXT,
    PRIMARY KEY(branch, path)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS points(
    branch TEXT NOT NULL, point_id TEXT NOT NULL, path TEXT NOT NULL,
    chunk_hash TEXT NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY(branch, point_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS points_by_path ON points(branch, path);
CREATE INDEX IF NOT EXISTS points_by_hash ON points(chunk_hash);
CREATE TABLE IF NOT EXISTS vectors(
    hash TEXT NOT NULL, fingerprint TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY(hash, fingerprint)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sparse(hash TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS journal(branch TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY(branch, path));
CREATE TABLE IF NOT EXISTS symbols(blob TEXT NOT NULL, variant TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY(blob, variant)) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Branch:
    name: str
    collection: str
    fingerprint: str
    indexed_commit: str | None
    updated_at: float | None
    last_used: float | None
    chunker: str | None = None  # the indexer's PIPELINE_VERSION (chunker, sparse terms, vector mix) of the manifest


@dataclass(frozen=True)
class PointRow:
    point_id: str
    path: str
    chunk_hash: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class FileRow:
    path: str
    blob: str
    skip_reason: str | None


@dataclass
class FileUpdate:
    """The new state of one path after a sync: None ``blob`` means the path is gone."""

    path: str
    blob: str | None
    skip_reason: str | None = None
    points: list[PointRow] | None = None


class State:
    """The SQLite database of one repository (``<data dir>/state.db``)."""

    def __init__(self, data_dir: Path, reset_incompatible: bool = False) -> None:
        """Open (or create) the state. A state of another format raises StateError, unless
        ``reset_incompatible``: then it is moved aside to ``state.db.format-<N>`` and an
        empty one takes its place (``reset_from`` says which format was moved)."""
        self.path = Path(data_dir) / "state.db"
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.reset_from: str | None = None
        self._open()
        self._check_version(reset_incompatible)

    def _open(self) -> None:
        try:
            with self._disk_errors():  # a full disk is not a corrupt file: say so
                self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise StateError(f"cannot open {self.path}: {exc}; move it away and run `gitrag index` to rebuild") from None
        self._inode = os.stat(self.path).st_ino

    def _check_version(self, reset: bool) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES('format', ?)", (str(FORMAT_VERSION),))
        elif row[0] != str(FORMAT_VERSION):
            if not reset:
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
            self._open()
            self._check_version(False)
            self.reset_from = str(row[0])

    def is_current(self) -> bool:
        """False once the file was deleted or replaced under us (someone removed the data folder)."""
        try:
            return os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def close(self) -> None:
        self.db.close()

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

    @contextmanager
    def _disk_errors(self) -> Iterator[None]:
        """SQLite's "database or disk is full" and "disk I/O error" as a StateError saying what to do."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "full" in str(exc):
                raise StateError(f"the disk holding {self.path.parent} is full ({exc}): "
                                 "free space and run `gitrag index` again") from None
            if "disk I/O" in str(exc):
                raise StateError(f"cannot write {self.path} ({exc}): is the disk full? "
                                 "free space and run `gitrag index` again") from None
            raise

    # -- branches -------------------------------------------------------------
    def branch(self, name: str) -> Branch | None:
        row = self.db.execute("SELECT * FROM branches WHERE name=?", (name,)).fetchone()
        return Branch(*row) if row else None

    def branches(self) -> list[Branch]:
        return [Branch(*r) for r in self.db.execute("SELECT * FROM branches ORDER BY name")]

    def create_branch(self, name: str, collection: str, fingerprint: str, copy_from: str | None = None) -> Branch:
        """Register a branch; with ``copy_from`` its manifest starts as a copy of that branch's."""
        with self.transaction() as db:
            db.execute("DELETE FROM branches WHERE name=?", (name,))
            for table in ("files", "points", "journal"):
                db.execute(f"DELETE FROM {table} WHERE branch=?", (name,))
            commit = None
            if copy_from is not None:
                commit = db.execute("SELECT indexed_commit FROM branches WHERE name=?", (copy_from,)).fetchone()[0]
                db.execute("INSERT INTO files SELECT ?, path, blob, skip_reason FROM files WHERE branch=?", (name, copy_from))
                db.execute(
                    "INSERT INTO points SELECT ?, point_id, path, chunk_hash, payload FROM points WHERE branch=?",
                    (name, copy_from),
                )
            now = time.time()
            chunker = None
            if copy_from is not None:
                chunker = db.execute("SELECT chunker FROM branches WHERE name=?", (copy_from,)).fetchone()[0]
            db.execute(
                "INSERT INTO branches VALUES(?,?,?,?,?,?,?)", (name, collection, fingerprint, commit, now, now, chunker)
            )
        return self.branch(name)  # type: ignore[return-value]

    def drop_branch(self, name: str) -> None:
        with self.transaction() as db:
            for table in ("branches", "files", "points", "journal"):
                col = "name" if table == "branches" else "branch"
                db.execute(f"DELETE FROM {table} WHERE {col}=?", (name,))

    def touch_branch(self, name: str) -> None:
        with self._disk_errors():
            self.db.execute("UPDATE branches SET last_used=? WHERE name=?", (time.time(), name))

    # -- manifest --------------------------------------------------------------
    def files(self, branch: str) -> dict[str, FileRow]:
        rows = self.db.execute("SELECT path, blob, skip_reason FROM files WHERE branch=?", (branch,))
        return {r[0]: FileRow(*r) for r in rows}

    def points(self, branch: str, paths: Iterable[str] | None = None) -> list[PointRow]:
        if paths is None:
            rows = self.db.execute("SELECT point_id, path, chunk_hash, payload FROM points WHERE branch=?", (branch,))
            return [PointRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows]
        out: list[PointRow] = []
        for path in paths:
            rows = self.db.execute(
                "SELECT point_id, path, chunk_hash, payload FROM points WHERE branch=? AND path=?", (branch, path)
            )
            out.extend(PointRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows)
        return out

    def skip_counts(self, branch: str) -> dict[str, int]:
        """{skip reason: number of the branch's files skipped for it}, most frequent first."""
        rows = self.db.execute("SELECT skip_reason, count(*) AS n FROM files WHERE branch=? AND skip_reason IS NOT NULL "
                               "GROUP BY skip_reason ORDER BY n DESC, skip_reason", (branch,))
        return {r[0]: r[1] for r in rows}

    def point_count(self, branch: str) -> int:
        return self.db.execute("SELECT count(*) FROM points WHERE branch=?", (branch,)).fetchone()[0]

    def commit_paths(
        self, branch: str, updates: list[FileUpdate], commit: str, chunker: str, retry: Iterable[str] = ()
    ) -> None:
        """Apply per-path manifest updates and advance the branch to ``commit``, atomically.

        ``chunker`` is the CHUNKER_VERSION the updates were made with (recorded once a
        sync has re-chunked every path). ``retry``: paths left in the journal, so the next
        sync does them again (a chunk of theirs failed to embed)."""
        with self.transaction() as db:
            for up in updates:
                db.execute("DELETE FROM points WHERE branch=? AND path=?", (branch, up.path))
                db.execute("DELETE FROM files WHERE branch=? AND path=?", (branch, up.path))
                if up.blob is None:
                    continue
                db.execute("INSERT INTO files VALUES(?,?,?,?)", (branch, up.path, up.blob, up.skip_reason))
                db.executemany(
                    "INSERT OR REPLACE INTO points VALUES(?,?,?,?,?)",
                    [(branch, p.point_id, p.path, p.chunk_hash, json.dumps(p.payload)) for p in up.points or ()],
                )
            db.execute("DELETE FROM journal WHERE branch=?", (branch,))
            db.executemany("INSERT INTO journal VALUES(?,?)", [(branch, p) for p in sorted(set(retry))])
            db.execute(
                "UPDATE branches SET indexed_commit=?, updated_at=?, chunker=? WHERE name=?",
                (commit, time.time(), chunker, branch),
            )

    # -- crash journal ---------------------------------------------------------
    def journal_paths(self, branch: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT path FROM journal WHERE branch=?", (branch,))]

    def write_journal(self, branch: str, paths: Iterable[str]) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR IGNORE INTO journal VALUES(?,?)", [(branch, p) for p in paths])

    # -- vector cache -------------------------------------------------------------
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
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES(?,?,?)",
                [(h, fingerprint, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
            )

    def get_sparse(self, hashes: Iterable[str], version: str) -> dict[str, SparseVec]:
        """Cached sparse vectors of chunk hashes made by sparse-term ``version``."""
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
                [(f"{version}:{h}", json.dumps([s.indices, s.values])) for h, s in items.items()],
            )

    # -- symbol graph -------------------------------------------------------------
    def put_symbols(self, blob: str, variant: str, data: dict[str, Any]) -> None:
        with self._disk_errors():
            self.db.execute("INSERT OR REPLACE INTO symbols VALUES(?,?,?)", (blob, variant, json.dumps(data)))

    # -- garbage collection ---------------------------------------------------------
    def gc_cache(self, sparse_version: str | None = None) -> tuple[int, int]:
        """Delete cached vectors and sparse vectors no manifest references (and sparse vectors
        of another ``sparse_version`` when given); returns (vectors, sparse) deleted."""
        with self.transaction() as db:
            live = "SELECT DISTINCT chunk_hash FROM points"
            v = db.execute(f"DELETE FROM vectors WHERE hash NOT LIKE 'path:%' AND hash NOT IN ({live})").rowcount
            s = db.execute(f"DELETE FROM sparse WHERE substr(hash, instr(hash, ':') + 1) NOT IN ({live})").rowcount
            if sparse_version is not None:
                s += db.execute("DELETE FROM sparse WHERE hash NOT LIKE ?", (f"{sparse_version}:%",)).rowcount
            blobs = "SELECT DISTINCT blob FROM files"
            db.execute(f"DELETE FROM symbols WHERE blob NOT IN ({blobs})")
        self.db.execute("VACUUM")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # or the WAL keeps what VACUUM freed
        return v, s

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob("state.db*") if p.is_file())
