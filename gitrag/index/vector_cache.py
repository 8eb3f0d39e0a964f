"""The vector cache shared by every repository of one user: ``<data root>/cache.db``.

Format 3 (this module). Two rowid tables, each row small enough to live in its B-tree page:

- ``vectors``: (key, fingerprint id) -> dense vector, with ``digest``. ``key`` is the chunk
  SHA-256 as 32 raw bytes, or the UTF-8 text of another key (``path:<sha>``). A vector is
  kept as int8 with one scale per row (symmetric per-row quantisation, :func:`quantize`):
  a float32 scale ``s`` (4 bytes) then ``q`` (int8, one byte a dimension), the vector being
  ``q * s``; a 256-dim vector is 260 bytes (format 2: float16, 512). ``s`` has four
  significant bits, so every ``q * s`` is exact in float16 (the embedded store's layout
  keeps the vector it is given bit for bit) and quantising ``q * s`` again gives ``q`` and
  ``s`` back (the indexer writes :func:`stored_form` vectors: the same point whether its
  chunk was embedded now or read back). The loss on retrieval is measured in BENCHMARKS.md
  ("Disk per chunk").
- ``sparse``: (key, sparse-term version) -> the packed vector (:func:`pack_sparse`), with
  ``digest``: the term ids (uint32) and each term's count in the chunk (uint8, or uint16
  when a count passes 255), from which the BM25 weights of gitrag.index.sparse are computed
  again bit for bit (float32, as format 2 kept them); a vector the counts cannot give back
  exactly (two terms of one CRC-32, another weighting) keeps its float32 weights.
- ``signatures``: point id (16 bytes) -> its vector signature (``vsig``, six float64, see
  gitrag.index.integrity), with the point's chunk key (for :meth:`VectorCache.gc`) and
  ``digest``. Point ids are bound to their content (pipeline, embedder, path, blob, byte
  range, chunk), so a point's signature never changes: the per-query check reads it here
  by primary key instead of from the store's payload (a payload read was most of the check's
  time). A cache without the table (or one that cannot be written) has no signatures, and
  the check reads the store's.
- ``fingerprints``: embedder fingerprint <-> a small integer (the rows name the integer).
- ``meta``: ``format`` = ``3``.

Every row carries ``digest`` = BLAKE2b-64 of its key (the chunk SHA-256 text), its
embedder fingerprint (or sparse version) and its stored bytes. A read checks it: a row that
fails (a flipped byte, a truncated blob, the vector of another chunk) is not returned, is
deleted, and is counted in :attr:`VectorCache.dropped`; its chunk is then a cache miss, so
the caller embeds it again. A file SQLite cannot read at all ("database disk image is
malformed") is moved aside (``cache.db.damaged-<time>``, then deleted) and an empty cache
takes its place: everything in it is derived, so nothing is lost but embedding time.

Older caches are converted on open, in one transaction, every vector kept, so an upgrade
embeds nothing again: format 2 (float16 vectors, float32 sparse weights) in place, each row
quantised and packed again with a new digest (a row that fails its old digest is dropped,
a miss); format 1 (no ``meta``; ``vectors(hash, fingerprint, vec float32)``) into new
tables. The points already in a store keep the vectors they were written with (their
signatures hold); a collection rebuilt from the cache gets the int8 forms.

WAL mode and a 30 s busy timeout, so several processes (daemon, CLI) read and write it at
once; writes are upserts of deterministic values, so concurrent writers never conflict.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from gitrag.errors import StateError
from gitrag.index.records import SparseVec

log = structlog.get_logger("gitrag.index.vector_cache")

FORMAT = "3"
#: How dense vectors are kept: "int8" (shipped); "float16" or "float32" only for measuring
#: the loss (bench/bench_disk.py recall sets it in the process it runs).
DENSE = "int8"
OUTLIERS = 4  # components of a vector kept as float16 (see _encode_rows)
_QMAX = 127
_PART = 500  # keys per SELECT ... IN (...)
SIGNATURES_MEMO = 1_000_000  # checked signature rows a process keeps (~150 bytes each)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fingerprints(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vectors(
    id INTEGER PRIMARY KEY, key BLOB NOT NULL, fp INTEGER NOT NULL, digest BLOB NOT NULL, vec BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS vectors_by_key ON vectors(key, fp);
CREATE TABLE IF NOT EXISTS sparse(
    id INTEGER PRIMARY KEY, key BLOB NOT NULL, version TEXT NOT NULL, digest BLOB NOT NULL, data BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS sparse_by_key ON sparse(key, version);
"""

_SIGNATURES = """CREATE TABLE IF NOT EXISTS signatures(
    point BLOB PRIMARY KEY, chunk BLOB NOT NULL, digest BLOB NOT NULL, sig BLOB NOT NULL) WITHOUT ROWID"""
_SIG = struct.Struct("<6d")
_SIG_CONTEXT = "vsig"

_MALFORMED = ("malformed", "not a database", "file is encrypted", "corrupt")


def _grid_up(x: np.ndarray) -> np.ndarray:
    """float64 (n,): the smallest number of four significant bits (``m * 2**e``, m < 16)
    at least ``x`` (> 0)."""
    frac, exp = np.frexp(x)  # x = frac * 2**exp, frac in [0.5, 1)
    return np.ldexp(np.ceil(frac * 16.0), exp - 4)


def quantize(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q int8 (n, dim), s float32 (n,)): each row as ``q * s`` with |q| <= 127 and ``s`` the
    smallest four-significant-bit number >= max|row| / 127, or, for a row that already is
    ``q * s'`` exactly with such an ``s'`` a few steps above (a :func:`stored_form` vector
    given back), that ``s'``: quantising a quantised vector changes nothing. A zero row
    has s = 0."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    m64 = m.astype(np.float64)
    amax = np.abs(m64).max(axis=1) if m.shape[1] else np.zeros(m.shape[0])
    zero = ~(amax > 0) | ~np.isfinite(amax)
    first = _grid_up(np.where(zero, 1.0, amax) / _QMAX)
    scale = first.copy()
    unsettled = ~zero
    step = first
    for _ in range(6):  # an exact q * s' given back: s' is within 127/110 of the first step
        x = m64[unsettled] / step[unsettled, None]
        exact = (x == np.rint(x)).all(axis=1) & (np.abs(x) <= _QMAX).all(axis=1)
        rows = np.flatnonzero(unsettled)[exact]
        scale[rows] = step[rows]
        unsettled[rows] = False
        if not unsettled.any():
            break
        step = _grid_up(step * (1.0 + 2.0**-6))
    scale = np.where(zero, 0.0, scale)
    q = np.clip(np.rint(m64 / np.where(zero, 1.0, scale)[:, None]), -_QMAX, _QMAX)
    q = np.where(zero[:, None], 0, q).astype(np.int8)
    return q, scale.astype(np.float32)


def _encode_parts(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`_encode_rows` stores of each row of a float32 (n, dim) matrix, as arrays:
    (scale float32 (n,), kept positions int64 (n, k), kept values float16 (n, k), q int8
    (n, dim)). Each row's parts depend on that row alone."""
    m = np.asarray(matrix, dtype=np.float32)
    n, dim = m.shape
    k = min(OUTLIERS, dim)
    mag = np.abs(m.astype(np.float64))
    idx = np.sort(np.argsort(-mag, axis=1, kind="stable")[:, :k], axis=1)
    kept = np.take_along_axis(m, idx, axis=1).astype(np.float16)
    rest = m.copy()
    np.put_along_axis(rest, idx, 0.0, axis=1)
    q, scale = quantize(rest)
    lim = np.abs(kept.astype(np.float64)).min(axis=1) if k else np.zeros(n)
    s64 = scale.astype(np.float64)
    over = (s64 > 0) & (lim > 0)
    if over.any():  # |q| * s < the smallest kept magnitude, strictly
        cap = np.where(over, np.ceil(lim / np.where(over, s64, 1.0)) - 1, _QMAX).clip(0, _QMAX)
        q = (np.sign(q) * np.minimum(np.abs(q.astype(np.int16)), cap[:, None].astype(np.int16))).astype(np.int8)
    return scale, idx, kept, q


def _encode_rows(matrix: np.ndarray) -> list[bytes]:
    """The stored bytes of each row of a float32 (n, dim) matrix: the row's ``OUTLIERS``
    largest components by magnitude kept as float16 (a static model's vectors have one or
    two components several times the others, which would set the step of every other), the
    rest quantised (:func:`quantize`) and held strictly below the smallest kept one, so the
    decoded row's largest components are those same ones and encoding it again gives the
    same bytes. Layout: scale (float32), k (uint8), k positions (uint16), k values
    (float16), dim int8 (0 at the kept positions)."""
    scale, idx, kept, q = _encode_parts(matrix)
    head = np.uint8(idx.shape[1]).tobytes()
    return [scale[i].tobytes() + head + idx[i].astype("<u2").tobytes() + kept[i].astype("<f2").tobytes()
            + q[i].tobytes() for i in range(len(q))]


def encode_vector(vector: np.ndarray) -> bytes:
    """The stored bytes of one dense vector (see the module doc and :func:`_encode_rows`)."""
    if DENSE != "int8":
        return np.asarray(vector, dtype=np.float32).astype(DENSE).tobytes()
    return _encode_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]


def encode_vectors(vectors: list[np.ndarray]) -> list[bytes]:
    """:func:`encode_vector` of each (one quantisation product per dimension)."""
    if DENSE != "int8":
        return [encode_vector(v) for v in vectors]
    out: list[bytes] = [b""] * len(vectors)
    by_dim: dict[int, list[int]] = {}
    for i, v in enumerate(vectors):
        by_dim.setdefault(int(np.size(v)), []).append(i)
    for rows in by_dim.values():
        encoded = _encode_rows(np.stack([np.asarray(vectors[i], dtype=np.float32).ravel() for i in rows]))
        for i, data in zip(rows, encoded, strict=True):
            out[i] = data
    return out


def decode_vector(data: bytes) -> np.ndarray:
    """float32 (dim,) of stored bytes; ValueError when they cannot be a vector."""
    if DENSE != "int8":
        size = np.dtype(DENSE).itemsize
        if not data or len(data) % size:
            raise ValueError("a dense vector of the wrong length")
        return np.frombuffer(data, dtype=DENSE).astype(np.float32)
    if len(data) < 5:
        raise ValueError("a dense vector of the wrong length")
    k = data[4]
    body = 5 + 4 * k
    if len(data) <= body:
        raise ValueError("a dense vector of the wrong length")
    s = np.frombuffer(data[:4], dtype=np.float32)[0]
    idx = np.frombuffer(data[5 : 5 + 2 * k], dtype="<u2")
    vec = np.frombuffer(data[body:], dtype=np.int8).astype(np.float32) * s
    if k and int(idx.max()) >= vec.size:
        raise ValueError("a dense vector's kept component out of range")
    vec[idx] = np.frombuffer(data[5 + 2 * k : body], dtype="<f2").astype(np.float32)
    return vec


def stored_form(vector: np.ndarray) -> np.ndarray:
    """float32 (dim,): ``vector`` as the cache gives it back (int8 with a per-row scale).
    The indexer uses this form for what it has just embedded too, so a point's vector is the
    same whether its chunk was embedded now or read from the cache."""
    return decode_vector(encode_vector(vector))


def stored_forms(matrix: np.ndarray) -> np.ndarray:
    """float32 (n, dim): :func:`stored_form` of each row of ``matrix`` (n, dim), bit for
    bit, in one pass over the whole matrix (no bytes built and read back): what a worker
    or the sync calls for a file's or a batch's vectors."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"stored_forms takes an (n, dim) matrix, not shape {m.shape}")
    if DENSE != "int8":
        return m.astype(DENSE).astype(np.float32)
    if not m.shape[0]:
        return m.copy()
    scale, idx, kept, q = _encode_parts(m)
    out = q.astype(np.float32) * scale[:, None]
    np.put_along_axis(out, idx, kept.astype(np.float32), axis=1)
    return out


_PERSON = b"gitrag-cache3"  # vectors and sparse rows of format 3
_PERSON2 = b"gitrag-cache2"  # format 2's rows, and the signatures (unchanged since format 2)
_SIG_HASH = hashlib.blake2b(digest_size=8, person=_PERSON2)  # copied per signature row: digest()'s, made once


def digest(key: str, context: str, data: bytes, person: bytes = _PERSON) -> bytes:
    """8 bytes: BLAKE2b of the chunk key, the fingerprint (or sparse version) and the stored
    bytes. Format 3's vector and sparse rows are personalised apart from format 2's, so a row
    a gitrag of format 2 still running writes after the conversion fails its digest (a miss)
    instead of being read as int8."""
    h = hashlib.blake2b(digest_size=8, person=person)
    h.update(key.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(context.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(data)
    return h.digest()


def encode_key(key: str) -> bytes:
    """A chunk SHA-256 (64 lowercase hex) as its 32 bytes; any other key as UTF-8."""
    if len(key) == 64:
        try:
            raw = bytes.fromhex(key)
        except ValueError:
            raw = b""
        if raw and raw.hex() == key:
            return raw
    return key.encode("utf-8", "surrogatepass")


def decode_key(raw: bytes) -> str:
    return raw.hex() if len(raw) == 32 else bytes(raw).decode("utf-8", "surrogatepass")


_SPARSE_FLOAT, _SPARSE_U8, _SPARSE_U16 = 0, 1, 2


def _bm25(counts: np.ndarray) -> np.ndarray:
    """float64 (n,): gitrag.index.sparse.document_vector's weights of these term counts
    (the same float64 operations)."""
    from gitrag.index import sparse

    dl = float(counts.sum()) or 1.0
    norm = sparse.K1 * (1 - sparse.B + sparse.B * dl / sparse.AVGDL)
    return counts * (sparse.K1 + 1) / (counts + norm)


def _counts_of(values: np.ndarray) -> np.ndarray | None:
    """The term counts whose BM25 weights (:func:`_bm25`, rounded to float32) are ``values``
    (float32) exactly, or None. A weight is tf / (tf + norm) times a constant: the counts are
    proportional to ``w / (k1 + 1 - w)``, the smallest being 1, 2, 3 or 4."""
    from gitrag.index import sparse

    if values.size == 0:
        return np.zeros(0, dtype=np.float64)
    w = values.astype(np.float64)
    top = sparse.K1 + 1
    if not ((w > 0) & (w < top)).all():
        return None
    r = w / (top - w)
    low = float(r.min())
    for smallest in (1.0, 2.0, 3.0, 4.0):
        counts = np.rint(r * (smallest / low))
        if counts.min() < 1 or counts.max() > 65535:
            continue
        if np.array_equal(_bm25(counts).astype(np.float32), values):
            return counts
    return None


def pack_sparse(vec: SparseVec, version: str | None = None) -> bytes:
    """The stored bytes of a sparse vector: a kind byte, the term count (uint32), the term
    ids (uint32), then the terms' counts (uint8 or uint16) when ``version`` is the current
    sparse-term version and the counts give the weights back exactly (as float32), else the
    float32 weights."""
    from gitrag.index import sparse

    n = len(vec.indices)
    ids = np.asarray(vec.indices, dtype=np.uint32).tobytes()
    values = np.asarray(vec.values, dtype=np.float32)
    counts = _counts_of(values) if version == sparse.VERSION else None
    if counts is None:
        return bytes([_SPARSE_FLOAT]) + np.uint32(n).tobytes() + ids + values.tobytes()
    if counts.size == 0 or counts.max() <= 255:
        return bytes([_SPARSE_U8]) + np.uint32(n).tobytes() + ids + counts.astype(np.uint8).tobytes()
    return bytes([_SPARSE_U16]) + np.uint32(n).tobytes() + ids + counts.astype("<u2").tobytes()


def unpack_sparse(data: bytes, version: str | None = None) -> SparseVec:
    """The sparse vector of :func:`pack_sparse`'s bytes (weights as float32 values). Raises
    ValueError when ``data`` is not one (its digest passed, so only a bug gets here), or
    holds counts of another sparse-term ``version`` than this code's."""
    from gitrag.index import sparse

    if len(data) < 5 or data[0] not in (_SPARSE_FLOAT, _SPARSE_U8, _SPARSE_U16):
        raise ValueError("not a packed sparse vector")
    kind = data[0]
    n = int(np.frombuffer(data[1:5], dtype=np.uint32)[0])
    width = {_SPARSE_FLOAT: 4, _SPARSE_U8: 1, _SPARSE_U16: 2}[kind]
    if len(data) != 5 + (4 + width) * n:
        raise ValueError("packed sparse vector of the wrong length")
    idx = np.frombuffer(data[5 : 5 + 4 * n], dtype=np.uint32)
    rest = data[5 + 4 * n :]
    if kind == _SPARSE_FLOAT:
        vals = np.frombuffer(rest, dtype=np.float32)
    else:
        if version != sparse.VERSION:
            raise ValueError(f"sparse counts of version {version}, this code weighs version {sparse.VERSION}")
        counts = np.frombuffer(rest, dtype=np.uint8 if kind == _SPARSE_U8 else "<u2").astype(np.float64)
        vals = _bm25(counts).astype(np.float32)
    return SparseVec(idx.tolist(), vals.tolist())


def _unpack_sparse2(data: bytes) -> SparseVec:
    """A format-2 row: n (uint32), ids (uint32), weights (float32)."""
    n = int(np.frombuffer(data[:4], dtype=np.uint32)[0])
    if len(data) != 4 + 8 * n:
        raise ValueError("packed sparse vector of the wrong length")
    idx = np.frombuffer(data[4 : 4 + 4 * n], dtype=np.uint32)
    vals = np.frombuffer(data[4 + 4 * n :], dtype=np.float32)
    return SparseVec(idx.tolist(), vals.tolist())


def _point_key(point_id: str) -> bytes:
    """16 bytes of a point id (a UUID); another text as its UTF-8 bytes."""
    if len(point_id) == 36 and point_id[8] == point_id[13] == point_id[18] == point_id[23] == "-" \
            and point_id == point_id.lower():  # the canonical text of a UUID
        try:
            return bytes.fromhex(point_id.replace("-", ""))
        except ValueError:
            pass
    return point_id.encode("utf-8", "surrogatepass")


def _point_name(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.decode("utf-8", "surrogatepass")


def is_malformed(exc: BaseException) -> bool:
    """True for SQLite's "the file is damaged" errors (not busy, locked, full or read-only)."""
    return isinstance(exc, sqlite3.DatabaseError) and any(s in str(exc).lower() for s in _MALFORMED)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=30000")
    return db


@contextmanager
def _disk_errors(path: Path) -> Iterator[None]:
    from gitrag.index.state import _disk_errors as state_disk_errors

    with state_disk_errors(path):
        yield


def _cannot_open(path: Path, exc: sqlite3.DatabaseError) -> str:
    from gitrag.index.state import _cannot_open as state_cannot_open

    return state_cannot_open(path, exc, "move it away (vectors are embedded again)")


def _batches_by_id(db: sqlite3.Connection, select: str, size: int = 2000) -> Iterator[list[Any]]:
    """The rows of ``select`` (a ``SELECT id, ... FROM table`` without WHERE or ORDER) in
    batches of ``size``, in ``id`` order, each batch read after the caller has handled the
    previous one (it may update or delete the rows it got: the next starts after their ids)."""
    last = -1
    while rows := db.execute(f"{select} WHERE id > ? ORDER BY id LIMIT ?", (last, size)).fetchall():
        yield rows
        last = rows[-1][0]


class VectorCache:
    """The vector cache shared by every repository of one user (see the module doc).

    ``dropped``: rows that failed their digest since open (deleted, re-embedded by the
    caller); ``moved_aside``: where a damaged file was moved (None if none was)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.dropped = 0
        self.moved_aside: Path | None = None
        self.signed = False  # whether the signatures table is there
        self._fps: dict[str, int] = {}
        # signature rows whose digest held, by point id: read once per process (a point id is
        # bound to its content, so its signature never changes; the memo holds checked values)
        self._verified: dict[str, list[float]] = {}
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if not is_malformed(exc):
                raise StateError(_cannot_open(self.path, exc)) from None
            self._move_aside(exc)
            try:
                self._open()
            except sqlite3.DatabaseError as again:
                raise StateError(_cannot_open(self.path, again)) from None

    # -- opening, migrating, healing -----------------------------------------------------
    def _open(self) -> None:
        with _disk_errors(self.path):
            self.db = _connect(self.path)
            try:
                self._migrate()
                self.signed = self._signatures_table()
            except BaseException:
                self.db.close()
                raise

    def _signatures_table(self) -> bool:
        """Whether the ``signatures`` table is there (made if not, when the file can be written)."""
        try:
            self.db.execute(_SIGNATURES)
            return True
        except sqlite3.OperationalError:  # read-only, or busy past the timeout: the check reads the store's
            return self.db.execute("SELECT 1 FROM sqlite_master WHERE name='signatures'").fetchone() is not None

    def _migrate(self) -> None:
        """Create the tables, or convert a format-1 or format-2 cache (see the module doc)."""
        db = self.db
        row = _meta_format(db)
        if row == FORMAT:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            row = _meta_format(db)  # another process may have done it while we waited
            if row is None:
                old = [r[1] for r in db.execute("PRAGMA table_info(vectors)")]
                if old == ["hash", "fingerprint", "vec"]:
                    db.execute("ALTER TABLE vectors RENAME TO vectors_format1")
                    db.execute("ALTER TABLE sparse RENAME TO sparse_format1")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                if old == ["hash", "fingerprint", "vec"]:
                    converted = self._convert_format1(db)
                    log.info("vector cache converted to format 3", path=str(self.path), **converted)
                db.execute("INSERT OR REPLACE INTO meta VALUES('format', ?)", (FORMAT,))
            elif row == "2":
                converted = self._convert_format2(db)
                log.info("vector cache converted from format 2 to 3", path=str(self.path), **converted)
                db.execute("INSERT OR REPLACE INTO meta VALUES('format', ?)", (FORMAT,))
            elif row != FORMAT:
                raise StateError(f"{self.path} is a vector cache of format {row} (this gitrag reads {FORMAT}): "
                                 f"move it away (vectors are embedded again) or use the gitrag that wrote it")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        if row != FORMAT:
            try:  # the old rows' pages go back to the file system (best effort: others may read)
                db.execute("VACUUM")
            except sqlite3.DatabaseError:
                pass

    def _convert_format1(self, db: sqlite3.Connection) -> dict[str, int]:
        """Copy every format-1 row into the format-3 tables, then drop the old tables.
        A row whose bytes cannot be a float32 vector is left out (counted)."""
        kept = bad = 0
        fps: dict[str, int] = {}
        cur = db.execute("SELECT hash, fingerprint, vec FROM vectors_format1")
        while rows := cur.fetchmany(2000):
            good = []
            for key, fingerprint, vec in rows:
                if not isinstance(vec, bytes) or len(vec) % 4 or not vec:
                    bad += 1
                    continue
                fp = fps.get(fingerprint)
                if fp is None:
                    fp = fps[fingerprint] = _fingerprint_id(db, fingerprint)
                good.append((key, fingerprint, fp, np.frombuffer(vec, dtype=np.float32)))
            datas = encode_vectors([v for *_, v in good])
            out = [(encode_key(key), fp, digest(key, fingerprint, data), data)
                   for (key, fingerprint, fp, _), data in zip(good, datas, strict=True)]
            db.executemany("INSERT OR IGNORE INTO vectors(key, fp, digest, vec) VALUES(?,?,?,?)", out)
            kept += len(out)
        sparse_kept = 0
        cur = db.execute("SELECT hash, data FROM sparse_format1")
        while rows := cur.fetchmany(2000):
            out = []
            for versioned, text in rows:
                version, _, key = str(versioned).partition(":")
                try:
                    idx, vals = json.loads(text)
                    data = pack_sparse(SparseVec(list(idx), list(vals)), version)
                except (ValueError, TypeError):
                    bad += 1
                    continue
                out.append((encode_key(key), version, digest(key, version, data), data))
            db.executemany("INSERT OR IGNORE INTO sparse(key, version, digest, data) VALUES(?,?,?,?)", out)
            sparse_kept += len(out)
        db.execute("DROP TABLE vectors_format1")
        db.execute("DROP TABLE sparse_format1")
        return {"vectors": kept, "sparse": sparse_kept, "unreadable": bad}

    def _convert_format2(self, db: sqlite3.Connection) -> dict[str, int]:
        """Rewrite every format-2 row in place: float16 vectors quantised (:func:`quantize`),
        sparse weights packed as counts (:func:`pack_sparse`), each with the digest of its new
        bytes. A row that fails its format-2 digest is deleted (a miss: embedded again)."""
        names = {int(i): str(n) for i, n in db.execute("SELECT id, name FROM fingerprints")}
        kept = bad = 0
        for rows in _batches_by_id(db, "SELECT id, key, fp, digest, vec FROM vectors"):
            good, drop = [], []
            for rid, raw, fp, dig, vec in rows:
                name, key = names.get(fp), decode_key(raw)
                if (name is None or not isinstance(vec, bytes) or not vec or len(vec) % 2
                        or digest(key, name, vec, _PERSON2) != dig):
                    drop.append((rid,))
                    continue
                good.append((rid, key, name, np.frombuffer(vec, dtype=np.float16).astype(np.float32)))
            datas = encode_vectors([v for *_, v in good])
            db.executemany("UPDATE vectors SET digest=?, vec=? WHERE id=?",
                           [(digest(key, name, data), data, rid)
                            for (rid, key, name, _), data in zip(good, datas, strict=True)])
            db.executemany("DELETE FROM vectors WHERE id=?", drop)
            kept, bad = kept + len(good), bad + len(drop)
        sparse_kept = 0
        for rows in _batches_by_id(db, "SELECT id, key, version, digest, data FROM sparse"):
            out, drop = [], []
            for rid, raw, version, dig, data in rows:
                key = decode_key(raw)
                try:
                    if not isinstance(data, bytes) or digest(key, version, data, _PERSON2) != dig:
                        raise ValueError("digest")
                    new = pack_sparse(_unpack_sparse2(data), version)
                except (ValueError, IndexError):
                    drop.append((rid,))
                    continue
                out.append((digest(key, version, new), new, rid))
            db.executemany("UPDATE sparse SET digest=?, data=? WHERE id=?", out)
            db.executemany("DELETE FROM sparse WHERE id=?", drop)
            sparse_kept, bad = sparse_kept + len(out), bad + len(drop)
        return {"vectors": kept, "sparse": sparse_kept, "unreadable": bad}

    def _move_aside(self, exc: BaseException) -> None:
        """Move a file SQLite calls damaged (and its WAL) to ``cache.db.damaged-<time>``."""
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
        try:
            for suffix in ("-wal", ""):
                src = Path(f"{self.path}{suffix}")
                if src.exists():
                    src.replace(f"{aside}{suffix}")
            Path(f"{self.path}-shm").unlink(missing_ok=True)
        except OSError as err:
            raise StateError(f"cannot open {self.path}: {exc}, and it cannot be moved aside ({err}); "
                             "move it away (vectors are embedded again)") from None
        self.moved_aside = aside
        log.warning("vector cache damaged: moved aside and deleted, starting an empty one (chunks are embedded "
                    "again)", path=str(self.path), error=str(exc))
        for suffix in ("-wal", ""):  # derived data only; other processes still holding it keep their inode
            Path(f"{aside}{suffix}").unlink(missing_ok=True)

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A read that finds the file damaged: moved aside, an empty cache in its place
        (the read returns nothing: the caller embeds again)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not is_malformed(exc):
                raise
            self._heal_file(exc)

    def _heal_file(self, exc: BaseException) -> None:
        self.db.close()
        self._fps.clear()
        self._move_aside(exc)
        self._open()

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

    def _fp(self, fingerprint: str, create: bool = False) -> int | None:
        fp = self._fps.get(fingerprint)
        if fp is None:
            row = self.db.execute("SELECT id FROM fingerprints WHERE name=?", (fingerprint,)).fetchone()
            if row is None and create:
                with self.transaction() as db:
                    fp = _fingerprint_id(db, fingerprint)
            elif row is not None:
                fp = int(row[0])
            if fp is not None:
                self._fps[fingerprint] = fp
        return fp

    # -- dense vectors ---------------------------------------------------------------------
    def get_vectors(self, hashes: Iterable[str], fingerprint: str) -> dict[str, np.ndarray]:
        """{key: float32 (dim,) vector} of the ``hashes`` cached for ``fingerprint`` whose
        digest holds; a row that fails is deleted and counted (:attr:`dropped`), a miss."""
        out: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        if not unique:
            return out
        bad: list[int] = []
        with self._reading():
            fp = self._fp(fingerprint)
            if fp is None:
                return out
            for i in range(0, len(unique), _PART):
                part = [encode_key(h) for h in unique[i : i + _PART]]
                rows = self.db.execute(
                    f"SELECT id, key, digest, vec FROM vectors WHERE fp=? AND key IN ({','.join('?' * len(part))})",
                    (fp, *part))
                for rid, raw, dig, vec in rows:
                    key = decode_key(raw)
                    if not isinstance(vec, bytes) or digest(key, fingerprint, vec) != dig:
                        bad.append(rid)
                        continue
                    try:
                        out[key] = decode_vector(vec)
                    except ValueError:
                        bad.append(rid)
        if bad:
            self._drop("vectors", bad)
        return out

    def put_vectors(self, items: dict[str, np.ndarray], fingerprint: str) -> None:
        """Cache ``items`` ({key: vector}) for ``fingerprint``, quantised (:func:`encode_vector`)
        with digests."""
        if not items:
            return
        fp = self._fp(fingerprint, create=True)
        keys = sorted(items)  # in key order: fewer B-tree page splits
        rows = [(encode_key(h), fp, digest(h, fingerprint, data), data)
                for h, data in zip(keys, encode_vectors([items[h] for h in keys]), strict=True)]
        with self.transaction() as db:
            db.executemany("INSERT INTO vectors(key, fp, digest, vec) VALUES(?,?,?,?) ON CONFLICT(key, fp) "
                           "DO UPDATE SET digest=excluded.digest, vec=excluded.vec", rows)

    # -- sparse vectors --------------------------------------------------------------------
    def get_sparse(self, hashes: Iterable[str], version: str) -> dict[str, SparseVec]:
        """Cached sparse vectors of chunk hashes made by sparse-term ``version`` (checked
        like :meth:`get_vectors`)."""
        out: dict[str, SparseVec] = {}
        unique = list(dict.fromkeys(hashes))
        bad: list[int] = []
        with self._reading():
            for i in range(0, len(unique), _PART):
                part = [encode_key(h) for h in unique[i : i + _PART]]
                rows = self.db.execute(
                    f"SELECT id, key, digest, data FROM sparse WHERE version=? AND key IN ({','.join('?' * len(part))})",
                    (version, *part))
                for rid, raw, dig, data in rows:
                    key = decode_key(raw)
                    if not isinstance(data, bytes) or digest(key, version, data) != dig:
                        bad.append(rid)
                        continue
                    try:
                        out[key] = unpack_sparse(data, version)
                    except (ValueError, IndexError):
                        bad.append(rid)
        if bad:
            self._drop("sparse", bad)
        return out

    def put_sparse(self, items: dict[str, SparseVec], version: str) -> None:
        if not items:
            return
        rows = []
        for h in sorted(items):
            data = pack_sparse(items[h], version)
            rows.append((encode_key(h), version, digest(h, version, data), data))
        with self.transaction() as db:
            db.executemany("INSERT INTO sparse(key, version, digest, data) VALUES(?,?,?,?) ON CONFLICT(key, version) "
                           "DO UPDATE SET digest=excluded.digest, data=excluded.data", rows)

    # -- vector signatures of points ---------------------------------------------------------
    def get_signatures(self, point_ids: Iterable[str]) -> dict[str, list[float]]:
        """{point id: its ``vsig``} of the ``point_ids`` that have a row whose digest holds; a
        row that fails is deleted and counted (:attr:`dropped`), a miss. A row is read and its
        digest checked the first time this process asks for it; after that its checked value
        comes from memory (up to SIGNATURES_MEMO points)."""
        memo = self._verified
        out: dict[str, list[float]] = {}
        unique = []
        for p in dict.fromkeys(point_ids):
            sig = memo.get(p)
            if sig is None:
                unique.append(p)
            else:
                out[p] = sig
        if not unique or not self.signed:
            return out
        keys = {_point_key(p): p for p in unique}
        bad: list[bytes] = []
        tail = b"\0" + _SIG_CONTEXT.encode() + b"\0"
        with self._reading():
            for i in range(0, len(unique), _PART):
                part = list(keys)[i : i + _PART]
                rows = self.db.execute(f"SELECT point, digest, sig FROM signatures WHERE point IN "
                                       f"({','.join('?' * len(part))})", part)
                for raw, dig, sig in rows:
                    pid = keys.get(raw)
                    if pid is None or not isinstance(sig, bytes) or len(sig) != _SIG.size:
                        bad.append(raw)
                        continue
                    h = _SIG_HASH.copy()  # digest(pid, _SIG_CONTEXT, sig, _PERSON2) in one update
                    h.update(pid.encode("utf-8", "surrogatepass") + tail + sig)
                    if h.digest() != dig:
                        bad.append(raw)
                        continue
                    out[pid] = memo[pid] = list(_SIG.unpack(sig))
        if len(memo) > SIGNATURES_MEMO:
            memo.clear()
        if bad:
            self._drop_signatures(bad)
        return out

    def put_signatures(self, items: dict[str, tuple[str, list[float]]]) -> None:
        """Keep ``items`` ({point id: (chunk key, vsig)}); best effort (the check reads the
        store's signature for a point that has none here)."""
        if not items or not self.signed:
            return
        rows = []
        for pid, (chunk, sig) in items.items():
            data = _SIG.pack(*sig)
            rows.append((_point_key(pid), encode_key(chunk), digest(pid, _SIG_CONTEXT, data, _PERSON2), data))
        rows.sort()  # in key order: fewer B-tree pages touched per insert
        try:
            with self.transaction() as db:
                db.executemany("INSERT OR REPLACE INTO signatures(point, chunk, digest, sig) VALUES(?,?,?,?)", rows)
        except (sqlite3.DatabaseError, StateError) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and is_malformed(exc):
                raise
            log.warning("vector signatures not cached (the check reads them from the store)", error=str(exc))

    def _drop_signatures(self, keys: list[bytes]) -> None:
        self.dropped += len(keys)
        log.warning("vector cache rows failed their digest: dropped", path=str(self.path), table="signatures",
                    rows=len(keys))
        try:
            with self.transaction() as db:
                db.executemany("DELETE FROM signatures WHERE point=?", [(k,) for k in keys])
        except (sqlite3.DatabaseError, StateError):  # read-only or busy: they are skipped on every read anyway
            pass

    def _drop(self, table: str, ids: list[int]) -> None:
        self.dropped += len(ids)
        log.warning("vector cache rows failed their digest: dropped, embedded again", path=str(self.path),
                    table=table, rows=len(ids))
        try:
            with self.transaction() as db:
                db.executemany(f"DELETE FROM {table} WHERE id=?", [(i,) for i in ids])
        except (sqlite3.DatabaseError, StateError):  # read-only or busy: they are skipped on every read anyway
            pass

    # -- whole-cache operations ------------------------------------------------------------
    def verify(self) -> dict[str, int]:
        """Read every row and check its digest (``gitrag doctor --deep``); failing rows are
        dropped. Returns {"vectors", "sparse": rows read, "bad": rows that failed,
        "damaged": 1 when SQLite found the file itself damaged (moved aside)}."""
        names = {r[0]: r[1] for r in self.db.execute("SELECT id, name FROM fingerprints")}
        counts = {"vectors": 0, "sparse": 0, "bad": 0, "damaged": 0}
        bad_v: list[int] = []
        bad_s: list[int] = []
        bad_g: list[bytes] = []
        try:
            check = self.db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed ({check[0] if check else '?'})")
            for rid, raw, fp, dig, vec in self.db.execute("SELECT id, key, fp, digest, vec FROM vectors"):
                counts["vectors"] += 1
                name = names.get(fp)
                if name is None or not isinstance(vec, bytes) or digest(decode_key(raw), name, vec) != dig:
                    bad_v.append(rid)
            for rid, raw, version, dig, data in self.db.execute("SELECT id, key, version, digest, data FROM sparse"):
                counts["sparse"] += 1
                if not isinstance(data, bytes) or digest(decode_key(raw), version, data) != dig:
                    bad_s.append(rid)
            for raw, dig, sig in self.db.execute("SELECT point, digest, sig FROM signatures") if self.signed else ():
                counts["sparse"] += 1  # counted with the other small rows
                if (not isinstance(sig, bytes) or len(sig) != _SIG.size
                        or digest(_point_name(raw), _SIG_CONTEXT, sig, _PERSON2) != dig):
                    bad_g.append(raw)
        except sqlite3.DatabaseError as exc:
            if not is_malformed(exc):
                raise
            counts["damaged"] = 1
            self._heal_file(exc)
            return counts
        if bad_v:
            self._drop("vectors", bad_v)
        if bad_s:
            self._drop("sparse", bad_s)
        if bad_g:
            self._drop_signatures(bad_g)
        counts["bad"] = len(bad_v) + len(bad_s) + len(bad_g)
        return counts

    def import_from(self, other: Path) -> int:
        """Copy every vector and sparse vector of a format-1 ``state.db`` (same tables as a
        format-1 cache) that this cache lacks; returns the vectors copied."""
        src = sqlite3.connect(f"file:{other}?mode=ro", uri=True, timeout=30)
        try:
            vecs = {}
            by_fp: dict[str, dict[str, np.ndarray]] = {}
            for key, fingerprint, vec in src.execute("SELECT hash, fingerprint, vec FROM vectors"):
                if isinstance(vec, bytes) and vec and len(vec) % 4 == 0:
                    by_fp.setdefault(fingerprint, {})[key] = np.frombuffer(vec, dtype=np.float32)
            sparse: dict[str, dict[str, SparseVec]] = {}
            for versioned, text in src.execute("SELECT hash, data FROM sparse"):
                version, _, key = str(versioned).partition(":")
                try:
                    idx, vals = json.loads(text)
                except (ValueError, TypeError):
                    continue
                sparse.setdefault(version, {})[key] = SparseVec(list(idx), list(vals))
        finally:
            src.close()
        n = 0
        for fingerprint, vecs in by_fp.items():
            have = self.get_vectors(vecs, fingerprint)
            new = {k: v for k, v in vecs.items() if k not in have}
            self.put_vectors(new, fingerprint)
            n += len(new)
        for version, items in sparse.items():
            have_s = self.get_sparse(items, version)
            self.put_sparse({k: v for k, v in items.items() if k not in have_s}, version)
        return n

    def gc(self, live_hashes: Iterable[str], sparse_version: str | None = None) -> tuple[int, int]:
        """Delete chunk vectors and sparse vectors whose hash is not in ``live_hashes`` (and
        sparse vectors of another ``sparse_version``); path vectors stay. (vectors, sparse) deleted."""
        with self.transaction() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS live(key BLOB PRIMARY KEY) WITHOUT ROWID")
            db.execute("DELETE FROM live")
            db.executemany("INSERT OR IGNORE INTO live VALUES(?)", ((encode_key(h),) for h in live_hashes))
            # chunk keys are 32 bytes; ``path:<sha>`` keys are longer and stay
            v = db.execute("DELETE FROM vectors WHERE length(key) = 32 AND key NOT IN (SELECT key FROM live)").rowcount
            s = db.execute("DELETE FROM sparse WHERE key NOT IN (SELECT key FROM live)").rowcount
            if self.signed:  # a point's signature goes with its chunk
                db.execute("DELETE FROM signatures WHERE chunk NOT IN (SELECT key FROM live)")
            if sparse_version is not None:
                s += db.execute("DELETE FROM sparse WHERE version != ?", (sparse_version,)).rowcount
            db.execute("DELETE FROM live")
        if v or s:
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return v, s

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*")
                   if p.is_file() and ".damaged-" not in p.name)

    def close(self) -> None:
        self.db.close()


def _meta_format(db: sqlite3.Connection) -> str | None:
    if db.execute("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()[0] == 0:
        return None
    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    return None if row is None else str(row[0])


def _fingerprint_id(db: sqlite3.Connection, fingerprint: str) -> int:
    db.execute("INSERT OR IGNORE INTO fingerprints(name) VALUES(?)", (fingerprint,))
    return int(db.execute("SELECT id FROM fingerprints WHERE name=?", (fingerprint,)).fetchone()[0])
