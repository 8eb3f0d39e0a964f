"""The ``embedded`` store: Qdrant Edge (qdrant-edge-py), an in-process Qdrant engine.

Layout: one EdgeShard directory per collection, ``root/<name>/`` (``edge_config.json``,
``segments/``; ``wal/`` in a collection of a layout with the engine's WAL, see LAYOUTS). Shards are opened lazily and kept open until :meth:`close` or
:meth:`EdgeStore.drop_collection`. A shard can be open in one process at a time: a second
process (or a second EdgeStore) gets a :class:`StoreError` saying so. That is gitrag's own
lock, ``root/<name>.lock`` (``flock``), taken before the engine opens the shard: the
engine's WAL lock comes too late, since its refused open has already rewritten files of
the shard the holder is writing (the holder's next flush failed: "Tracker journal ... is
shorter than expected").

Payload indexes (keyword): ``path`` (with prefix matching, for ``SearchFilter.path_prefix``;
exact values, for ``SearchFilter.excluded_paths``), ``language``, ``symbol`` (not in the "compact" layout), ``branches``
and ``hidden`` (every search filters on a branch view). The store adds no payload field of
its own.

Every call holds one lock per store, so the daemon may search from one thread while
another upserts. Engine exceptions (bare ``Exception``) become :class:`StoreError`; on an
existing collection, one that is not a full disk or a lock (an engine panic included), or
a segment lacking one of its files, is :class:`StoreDamaged`: gitrag.index.heal moves the
collection aside (:meth:`EdgeStore.move_aside`) and rebuilds it. So is a collection whose
files differ from its file record (``<name>/gitrag-files``, gitrag.index.store.files), taken
after every open, flush, optimize and close and checked before the engine loads the shard
(a damaged file can abort the process inside the load).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import shutil
import struct
import threading
import weakref
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import structlog
from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    Fusion,
    HnswIndexConfig,
    KeywordIndexParams,
    MatchAny,
    MatchPrefix,
    MatchValue,
    Memory,
    Modifier,
    Point,
    Prefetch,
    Query,
    QueryRequest,
    ScrollRequest,
    SearchParams,
    SparseVector,
    UpdateOperation,
    VectorStorageDatatype,
)

from gitrag.errors import StoreError, StoreHeld
from gitrag.index.store import files as file_record
from gitrag.index.store._common import (
    BRANCHES,
    HIDDEN,
    KEYWORD_FIELDS,
    check_name,
    checked,
    damaged,
    dense_list,
    explain,
    str_id,
    translate,
)
from gitrag.index.store.base import DENSE, RRF_K, SPARSE, BranchView, Hit, PointRecord, SearchFilter, SparseVec

log = structlog.get_logger("gitrag.index.store.edge")

_CONFIG_FILE = "edge_config.json"  # written by EdgeShard.create: marks a complete shard
_SCROLL_PAGE = 10_000
_ASIDE = ".damaged-"  # ``<name>.damaged-<time>``: a collection moved aside (gitrag.index.heal), never listed
# The engine writes through memory maps of sparse, preallocated files: on a full disk a
# write there kills the process with SIGBUS instead of failing. So no write starts with
# less than this free, plus a generous allowance per point written.
MIN_FREE_BYTES = 64 * 2**20
_BYTES_PER_POINT = 16 * 1024
# A segment gets its HNSW graph (built by ``optimize``, blocking) only above this many KB of
# dense vectors (1 KB = one 256-dim float32 vector; the engine's default is 10,000). Below
# it a dense query is an exact brute-force scan, ~2 ms for 25k points; building the graph
# for the stdlib corpus's 25,865 points cost ~8 CPU-s at the first index's final flush
# (BENCHMARKS.md, "First index speed"). So collections up to ~100k chunks are never
# indexed: exact results, and no optimize pause on the first answer's path.
INDEXING_THRESHOLD_KB = 100_000


class Layout(NamedTuple):
    """How a new collection keeps its points (fixed when the collection is created).

    ``datatype``: the dense vectors' storage type (None: the engine's float32);
    ``vectors`` / ``payload`` / ``sparse``: memory placement of the dense vectors, the
    payloads and the sparse index (None: the engine's default; ``Cold``: memory-mapped
    files the page cache holds as it can, not the process's heap); ``indexing_threshold_kb``:
    a segment above this many KB of vectors is sealed by ``optimize`` into an indexed one
    (an HNSW graph as ``hnsw`` says; None: the module's INDEXING_THRESHOLD_KB);
    ``max_segment_kb``: merges stop at this size; ``wal``: the engine's write-ahead log
    (None: on); ``exact``: dense queries scan exactly (``SearchParams(exact=True)``);
    ``optimize_every``: :meth:`EdgeStore.flush` runs the optimizer once this many points were
    upserted since it last ran (0: never); ``indexes`` / ``id_tracker``: memory placement
    of the keyword payload indexes and of sealed segments' id trackers; ``unindexed``: fields
    of KEYWORD_FIELDS that get no payload index (no query filters on them); ``payload_fields``:
    the only fields of a chunk's payload a point keeps besides gitrag's own (membership,
    ``vsig``, ``digest``; None: every field), see :attr:`EdgeStore.payload_fields`."""

    datatype: VectorStorageDatatype | None = None
    vectors: Memory | None = None
    payload: Memory | None = None
    sparse: Memory | None = Memory.Cached
    indexing_threshold_kb: int | None = None
    hnsw: HnswIndexConfig | None = None
    max_segment_kb: int | None = None
    wal: bool | None = None
    exact: bool = False
    optimize_every: int = 0
    indexes: Memory | None = None
    id_tracker: Memory | None = None
    unindexed: tuple[str, ...] = ()
    payload_fields: tuple[str, ...] | None = None


LAYOUTS = {
    # before issue 21's memory work: float32 vectors and everything else in RAM, an HNSW graph
    # above INDEXING_THRESHOLD_KB built at the sync's end (a 555k-point first index peaked at
    # 4.7 GB there)
    "current": Layout(),
    # float16 vectors (the cache's own form: nothing lost), memory-mapped vectors, payloads,
    # sparse and payload indexes and id tracker; segments sealed every 16,384 points and
    # merged up to 16 MB of vectors (~31k points), so one optimize step holds one small
    # segment; no graph (m=0), the dense list an exact scan (bench_hnsw.py: the graph saves
    # ~1 ms at 50k for 49 CPU-s of build and loses recall). bench/bench_store_memory.py
    # measures it.
    "lean": Layout(
        datatype=VectorStorageDatatype.Float16, vectors=Memory.Cold, payload=Memory.Cold, sparse=Memory.Cold,
        indexes=Memory.Cold, id_tracker=Memory.Cold, indexing_threshold_kb=8_000, max_segment_kb=16_000,
        exact=True, optimize_every=16_384,
        hnsw=HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10**9, payload_m=0),
    ),
}
# "lean" without the engine's write-ahead log: gitrag's own journal already makes a sync
# durable (journal the paths -> write the store -> flush -> commit the state; a crash before
# the commit is undone by gitrag.index.views.repair from the state and the vector cache), so
# the WAL only repeated what the flush writes: two preallocated 32 MB files per collection,
# 1.1 KB per chunk of sqlalchemy's 47,718 (bench/results/scale-disk.json). Without it an
# update is durable once ``flush`` returns, which is when gitrag commits the state.
# No query filters on ``symbol`` (gitrag.query reads it from the payloads it shows), so
# its keyword index (0.07 KB per chunk there) is not made either.
LAYOUTS["compact"] = LAYOUTS["lean"]._replace(wal=False, unindexed=("symbol",))
# "compact" whose points keep only the payload fields a search filters on (``path``,
# ``language``) besides membership and the integrity fields: every query shows the state's
# manifest rows (gitrag.index.state.State.payloads), which hold the whole payload already, so
# the store's copy of the rest (blob, byte and line ranges, symbol, kind, chunk hash, prose,
# roles) was read by nothing but the unranked modes and ``related``, which now read the state
# too. Payloads 0.530 -> 0.273 KB per chunk of the sqlalchemy 2.0.40 sdist (bench/results/disk-store13.json).
LAYOUTS["trim"] = LAYOUTS["compact"]._replace(payload_fields=("path", "language"))
# what new collections get; GITRAG_STORE_LAYOUT names another, for benchmarks side by side.
# A collection records its layout's name in ``<name>/gitrag-layout`` (none: "current", made
# before this file existed); one of another layout is rebuilt from the vector cache by the
# next sync (EdgeStore.outdated).
LAYOUT_NAME = os.environ.get("GITRAG_STORE_LAYOUT", "") if os.environ.get("GITRAG_STORE_LAYOUT", "") in LAYOUTS else "trim"
LAYOUT = LAYOUTS[LAYOUT_NAME]
_LAYOUT_FILE = "gitrag-layout"


def _edge_config(dim: int) -> EdgeConfig:
    lay = LAYOUT
    threshold = lay.indexing_threshold_kb if lay.indexing_threshold_kb is not None else INDEXING_THRESHOLD_KB
    return EdgeConfig(
        vectors={DENSE: EdgeVectorParams(size=dim, distance=Distance.Cosine, datatype=lay.datatype,
                                         memory=lay.vectors)},
        sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf, memory=lay.sparse)},
        optimizers=EdgeOptimizersConfig(indexing_threshold=threshold, max_segment_size=lay.max_segment_kb),
        payload_memory=lay.payload,
        hnsw_config=lay.hnsw,
        wal_enabled=lay.wal,
        id_tracker_memory=lay.id_tracker,
    )


def _point(record: PointRecord) -> Point:
    sparse = SparseVector(list(record.sparse.indices), list(record.sparse.values))
    vectors: dict[str, Any] = {DENSE: dense_list(record.dense), SPARSE: sparse}
    return Point(record.id, vectors, dict(record.payload))


def _filter(scope: SearchFilter | None) -> Filter | None:
    """Edge filter for ``scope``; None when it restricts nothing."""
    if scope is None:
        return None
    must: list[Any] = []
    if scope.path_prefix:
        must.append(FieldCondition("path", match=MatchPrefix(scope.path_prefix)))
    if scope.language:
        must.append(FieldCondition("language", match=MatchValue(scope.language)))
    must_not = [FieldCondition("path", match=MatchAny(list(scope.excluded_paths)))] if scope.excluded_paths else []
    return Filter(must=must or None, must_not=must_not or None) if must or must_not else None


def _in_branch(where: Filter | None, branch: BranchView | str | None) -> Filter | None:
    """``where`` restricted to the points ``branch`` sees (None: all; see BranchView)."""
    if branch is None:
        return where
    view = BranchView(branch) if isinstance(branch, str) else branch
    cond: Any = FieldCondition(BRANCHES, match=MatchValue(view.tag))
    if view.root is not None:
        cond = Filter(should=[cond, FieldCondition(BRANCHES, match=MatchValue(view.root))],
                      must_not=[FieldCondition(HIDDEN, match=MatchValue(view.tag))])
    return Filter(must=[cond] + ([where] if where is not None else []))


def _request(
    dense: np.ndarray | None, sparse: SparseVec | None, limit: int, prefetch: int, where: Filter | None,
    with_payload: bool = True,
) -> QueryRequest:
    dense_q = Query.Nearest(dense_list(dense), using=DENSE) if dense is not None else None
    # the dense list is an exact scan where the layout builds no graph (Layout.exact)
    dense_params = SearchParams(exact=True) if LAYOUT.exact else None
    sparse_q = (
        Query.Nearest(SparseVector(list(sparse.indices), list(sparse.values)), using=SPARSE)
        if sparse is not None
        else None
    )
    if dense_q is not None and sparse_q is not None:
        # the filter goes on each prefetch too: candidates outside the scope never take a rank
        prefetches = [
            Prefetch(limit=prefetch, query=dense_q, filter=where, params=dense_params),
            Prefetch(limit=prefetch, query=sparse_q, filter=where),
        ]
        return QueryRequest(
            limit=limit, prefetches=prefetches, query=Fusion.Rrf(k=RRF_K), filter=where, with_payload=with_payload
        )
    if dense_q is not None:
        return QueryRequest(limit=limit, query=dense_q, filter=where, with_payload=with_payload, params=dense_params)
    if sparse_q is None:
        raise ValueError("search needs a dense or a sparse query vector (or both)")
    return QueryRequest(limit=limit, query=sparse_q, filter=where, with_payload=with_payload)


# files every segment has, and pairs of which one never goes without the other: the engine
# loads a segment that lacks one of them without a word (a lost id map scrambles scores)
_SEGMENT_FILES = ("segment.json", "version.info")
_SEGMENT_PAIRS = (("mutable_id_tracker.versions", "mutable_id_tracker.mappings"),)


def _check_files(folder: Path) -> None:
    """StoreDamaged when a segment of the shard at ``folder`` lacks one of its files."""
    segments = folder / "segments"
    if not segments.is_dir():
        return
    for seg in segments.iterdir():
        if not seg.is_dir():
            continue
        missing = [f for f in _SEGMENT_FILES if not (seg / f).is_file()]
        missing += [b for a, b in _SEGMENT_PAIRS if (seg / a).exists() != (seg / b).exists() and not (seg / b).exists()]
        missing += [a for a, b in _SEGMENT_PAIRS if (seg / a).exists() != (seg / b).exists() and not (seg / a).exists()]
        if missing:
            raise damaged(f"collection {folder}", f"segment {seg.name} lacks {', '.join(missing)}")


def _free_bytes(folder: Path) -> int:
    """Bytes free for us on the file system holding ``folder`` (or its nearest existing parent)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def disk_usage(folder: Path) -> int:
    """Bytes allocated on disk below ``folder`` (like ``du``: sparse WAL files count little)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except FileNotFoundError:
                continue
            # blocks, not length: the WAL preallocates 32 MB files that stay sparse
            total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
    return total


_OPEN: weakref.WeakSet[EdgeStore] = weakref.WeakSet()  # stores of this process that may hold shards open


@atexit.register
def _close_at_exit() -> None:
    """Close the shards a process leaves open at its exit (a library caller that never calls
    ``close``): the engine rewrites some files when a shard is dropped, which the next open's
    file record (gitrag.index.store.files) would take for damage and heal (a whole rebuild).
    Only in the process that opened them (a forked child's copy is not its to flush)."""
    for store in list(_OPEN):
        if store._pid == os.getpid():
            try:
                store.close()
            except Exception:  # noqa: BLE001 - at exit, one store's failure must not stop the others
                log.warning("closing the store at exit failed", root=str(store.root))


class EdgeStore:
    """Collections as Qdrant Edge shards below ``root`` (created on first write). Shards left
    open at the process's exit are closed then (:func:`_close_at_exit`)."""

    kind = "embedded"
    exact_dense = LAYOUT.exact

    @property
    def payload_fields(self) -> tuple[str, ...] | None:
        """The fields of a chunk's payload a point written now keeps besides membership and
        the integrity fields (None: every field; ``Layout.payload_fields``): what a search
        filters on. Queries show the state's manifest rows, which hold every field."""
        return LAYOUT.payload_fields

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._shards: dict[str, EdgeShard] = {}
        self._held: dict[str, int] = {}  # collection -> fd of its flock'ed ``<name>.lock``
        self._lock = threading.RLock()
        self._written: dict[str, int] = {}  # collection -> points upserted since its last optimize
        self._recorded: set[str] = set()  # collections whose file record matches their files (store.files)
        self._pid = os.getpid()
        _OPEN.add(self)

    def mapped_files(self) -> tuple[Path, threading.RLock]:
        """(the folder of the shards' memory-mapped segment and WAL files, the lock under
        which no shard is opened or closed; see gitrag.daemon.memory.MapsFiles)."""
        return self.root, self._lock

    # -- collections ---------------------------------------------------------------

    def _dir(self, name: str) -> Path:
        return self.root / check_name(name)

    def _require_space(self, points: int = 0) -> None:
        """StoreError unless the disk has room to write ``points`` points safely (see MIN_FREE_BYTES)."""
        need = MIN_FREE_BYTES + points * _BYTES_PER_POINT
        free = _free_bytes(self.root)
        if free < need:
            raise StoreError(
                f"the disk holding {self.root} is full ({free // 2**20} MB free, {need // 2**20} MB needed "
                "to write safely): free space and run `gitrag index` again"
            )

    def _hold(self, name: str) -> None:
        """Take the exclusive ``flock`` on ``root/<name>.lock`` (kept until the shard is closed)
        before the engine may open the shard; StoreError "open in another process" when
        another process or EdgeStore holds it. Where the lock file cannot be made (a
        read-only folder) the engine's own lock is all there is."""
        if name in self._held:
            return
        path = self.root / f"{name}.lock"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return  # no flock on this file system: the engine's own lock only
            raise StoreHeld(explain(exc, f"collection {self._dir(name)}")) from None
        self._held[name] = fd

    def _let_go(self, name: str) -> None:
        """Release the collection's lock (after its shard is closed)."""
        fd = self._held.pop(name, None)
        if fd is not None:
            os.close(fd)

    def _shard(self, name: str) -> EdgeShard:
        """The open shard of an existing collection; StoreError if there is none."""
        shard = self._shards.get(name)
        if shard is not None:
            return shard
        folder = self._dir(name)
        if not (folder / _CONFIG_FILE).is_file():
            raise StoreError(f"collection {name!r} does not exist in {self.root}: run `gitrag index`")
        self._hold(name)
        try:
            _check_files(folder)
            # before the engine reads a byte: a damaged file can abort the process inside
            # the load (store.files), where no exception would reach the heal
            problem = file_record.check(folder)
            if problem is not None:
                raise damaged(f"collection {folder}", f"{problem} since gitrag last wrote it")
            with checked(f"collection {folder}"):
                shard = EdgeShard.load(str(folder))
        except BaseException:
            self._let_go(name)
            raise
        self._shards[name] = shard
        self._record(name)  # the load rewrites some files (the same bytes, new mtimes)
        return shard

    def _record(self, name: str) -> None:
        """Take the collection's file record (store.files) after gitrag's engine wrote its
        files; where it cannot be written the old one is deleted (never a stale record)."""
        folder = self._dir(name)
        self._recorded.discard(name)
        try:
            file_record.write(folder)
        except OSError as exc:
            file_record.forget(folder)
            log.warning("the store's file record could not be written", collection=str(folder), error=str(exc))
            return
        self._recorded.add(name)

    def _writing(self, name: str) -> None:
        """Before the engine writes the collection's files: its record becomes the mark "being
        written" (once per record; store.files says why)."""
        if name in self._recorded:
            self._recorded.discard(name)
            folder = self._dir(name)
            try:
                file_record.mark_writing(folder)
            except OSError:
                file_record.forget(folder)

    def create_collection(self, name: str, dim: int) -> None:
        """Create ``root/<name>/`` with dense ``dim`` (cosine) and sparse (IDF) vectors.

        No-op if it exists with the same ``dim``; :class:`StoreError` if its ``dim`` differs."""
        with self._lock:
            folder = self._dir(name)
            if (folder / _CONFIG_FILE).is_file():
                self._check_dim(name, folder, dim)
                return
            self._hold(name)  # before removing a partial shard: another process may be creating it
            try:
                if folder.exists():  # a crash during create left a partial shard
                    shutil.rmtree(folder)
                self._require_space()
                with translate(f"collection {folder}"):
                    self.root.mkdir(parents=True, exist_ok=True)
                    shard = EdgeShard.create(str(folder), _edge_config(dim))
                    for field_name in (f for f in KEYWORD_FIELDS if f not in LAYOUT.unindexed):
                        params = KeywordIndexParams(prefix=field_name == "path", memory=LAYOUT.indexes,
                                                    enable_hnsw=False if LAYOUT.exact else None)
                        shard.update(UpdateOperation.create_field_index(field_name, params))
                    shard.flush()
                    (folder / _LAYOUT_FILE).write_text(LAYOUT_NAME + "\n")
            except BaseException:
                self._let_go(name)
                raise
            self._shards[name] = shard
            self._record(name)

    def _check_dim(self, name: str, folder: Path, dim: int) -> None:
        try:
            config = json.loads((folder / _CONFIG_FILE).read_text())
            have = int(config["vectors"][DENSE]["size"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"collection {folder} has an unreadable {_CONFIG_FILE}: {exc}") from exc
        if have != dim:
            raise StoreError(f"collection {name!r} holds {have}-dim vectors, not {dim}: the embedder changed")

    def has_collection(self, name: str) -> bool:
        with self._lock:
            return name in self._shards or (self._dir(name) / _CONFIG_FILE).is_file()

    def outdated(self, name: str) -> bool:
        """Whether the existing collection ``name`` was made with another layout than LAYOUT
        (a collection without ``gitrag-layout`` predates the layouts: "current")."""
        try:
            have = (self._dir(name) / _LAYOUT_FILE).read_text().strip()
        except FileNotFoundError:
            have = "current"
        except OSError:
            return False
        return have != LAYOUT_NAME

    def drop_collection(self, name: str) -> None:
        """Close the shard and delete its folder; no error if it is missing."""
        with self._lock:
            folder = self._dir(name)
            shard = self._shards.pop(name, None)
            if shard is None and folder.exists():
                self._hold(name)  # never delete a shard another process has open
            try:
                with translate(f"collection {folder}"):
                    if shard is not None:
                        shard.close()
                    if folder.exists():
                        shutil.rmtree(folder)
            finally:
                self._let_go(name)

    def list_collections(self) -> list[str]:
        """Names of the collections below ``root``, sorted."""
        with self._lock:
            if not self.root.is_dir():
                return []
            return sorted(p.name for p in self.root.iterdir()
                          if (p / _CONFIG_FILE).is_file() and _ASIDE not in p.name)

    # -- points --------------------------------------------------------------------

    def _update(self, name: str, operation: Callable[[], UpdateOperation]) -> None:
        """Build the operation and apply it; both steps raise StoreError (bad ids, full disk)."""
        with self._lock:
            shard = self._shard(name)
            self._require_space()
            self._writing(name)
            with checked(f"collection {self._dir(name)}"):
                shard.update(operation())

    def upsert(self, name: str, points: list[PointRecord]) -> None:
        """Insert or replace ``points`` (same id: vectors and payload replaced)."""
        if points:
            self._require_space(len(points))
            self._update(name, lambda: UpdateOperation.upsert_points([_point(p) for p in points]))
            self._written[name] = self._written.get(name, 0) + len(points)

    def delete(self, name: str, ids: list[str]) -> None:
        """Delete points by id; ids that do not exist are ignored."""
        if ids:
            self._update(name, lambda: UpdateOperation.delete_points(list(ids)))

    def delete_path(self, name: str, path: str) -> None:
        """Delete every point whose payload ``path`` equals ``path``."""
        where = Filter(must=[FieldCondition("path", match=MatchValue(path))])
        self._update(name, lambda: UpdateOperation.delete_points_by_filter(where))

    def set_payload(self, name: str, updates: dict[str, dict[str, Any]]) -> None:
        """Overwrite payload fields of existing points: ``{point_id: {field: value}}``.

        Fields not named keep their values; ids that do not exist are ignored."""
        with self._lock:
            existing = self._existing(name, list(updates))
            for point_id, fields in updates.items():
                if fields and point_id in existing:
                    self._update(name, partial(UpdateOperation.set_payload, [point_id], dict(fields)))

    def set_payload_of(self, name: str, ids: list[str], fields: dict[str, Any]) -> None:
        """Overwrite the same payload ``fields`` of many points in one operation (missing ids ignored)."""
        if not ids or not fields:
            return
        with self._lock:
            existing = self._existing(name, list(ids))
            if existing:
                self._update(name, partial(UpdateOperation.set_payload, sorted(existing), dict(fields)))

    def _existing(self, name: str, ids: list[str]) -> set[str]:
        shard = self._shard(name)
        with checked(f"collection {self._dir(name)}"):
            records = shard.retrieve(ids, False, False) if ids else []
        return {str_id(r.id) for r in records}

    def ids(self, name: str, branch: BranchView | str | None = None) -> set[str]:
        """Every point id in the collection (scrolled in pages, no payloads or vectors); with
        ``branch``, those that branch sees."""
        where = _in_branch(None, branch)
        with self._lock:
            shard = self._shard(name)
            found: set[str] = set()
            offset: Any = None
            with checked(f"collection {self._dir(name)}"):
                while True:
                    page, offset = shard.scroll(
                        ScrollRequest(offset=offset, limit=_SCROLL_PAGE, filter=where, with_payload=False, with_vector=False)
                    )
                    found.update(str_id(r.id) for r in page)
                    if offset is None:
                        return found

    def count(self, name: str, branch: BranchView | str | None = None) -> int:
        """Exact number of points in the collection (with ``branch``: that it sees)."""
        with self._lock:
            shard = self._shard(name)
            with checked(f"collection {self._dir(name)}"):
                return int(shard.count(CountRequest(exact=True, filter=_in_branch(None, branch))))

    def search(
        self,
        name: str,
        *,
        dense: np.ndarray | None,
        sparse: SparseVec | None,
        limit: int,
        branch: BranchView | str | None,
        prefetch: int = 40,
        scope: SearchFilter | None = None,
        with_payload: bool = True,
    ) -> list[Hit]:
        """Best-first hits (see :meth:`gitrag.index.store.base.Store.search`); ValueError if no vector."""
        request = _request(dense, sparse, limit, prefetch, _in_branch(_filter(scope), branch), with_payload)
        with self._lock:
            shard = self._shard(name)
            with checked(f"collection {self._dir(name)}"):
                scored = shard.query(request)
        return [Hit(str_id(p.id), float(p.score), dict(p.payload or {})) for p in scored]

    def payloads(self, name: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Payloads by point id (see :meth:`gitrag.index.store.base.Store.payloads`): one ``retrieve``."""
        if not ids:
            return {}
        with self._lock:
            shard = self._shard(name)
            with checked(f"collection {self._dir(name)}"):
                records = shard.retrieve(list(ids), True, False)
        return {str_id(r.id): dict(r.payload or {}) for r in records}

    def records(self, name: str, ids: list[str], fields: list[str] | None = None,
                ) -> dict[str, tuple[dict[str, Any], np.ndarray, SparseVec | None]]:
        """{point id: (payload, float32 dense vector, sparse vector)} of the points ``ids``
        (missing ones left out), in one ``retrieve``: what :mod:`gitrag.index.integrity` checks.
        ``fields``: only these payload fields (the payload read is most of a retrieve's cost)."""
        if not ids:
            return {}
        out = {}
        with self._lock:
            shard = self._shard(name)
            with checked(f"collection {self._dir(name)}"):
                for r in shard.retrieve(list(ids), True if fields is None else (list(fields) or False), True):
                    vectors = r.vector or {}
                    sp = vectors.get(SPARSE)
                    sparse = SparseVec(sp.indices, sp.values) if sp is not None else None  # each getter copies once
                    out[str_id(r.id)] = (dict(r.payload or {}), np.asarray(vectors.get(DENSE, ()), dtype=np.float32),
                                         sparse)
        return out

    def vectors(self, name: str, ids: list[str]) -> tuple[list[str], np.ndarray, list[SparseVec | None]]:
        """(point ids found, float32 (n, dim) dense vectors in that order, their sparse vectors)
        of the points ``ids``, in one ``retrieve`` without payloads: the per-query check's read
        (gitrag.index.integrity), one array conversion for all of them. ValueError when the
        dense vectors differ in length (the check then reads :meth:`records`)."""
        if not ids:
            return [], np.zeros((0, 0), dtype=np.float32), []
        with self._lock:
            shard = self._shard(name)
            with checked(f"collection {self.root}/{name}"):
                got = shard.retrieve(list(ids), False, True)
                found, dense, sparse = [], [], []
                for r in got:
                    v = r.vector or {}  # each access converts the engine's vectors again: once
                    found.append(str(r.id))  # str_id's form, without a call per point
                    dense.append(v.get(DENSE, ()))
                    sp = v.get(SPARSE)
                    sparse.append(None if sp is None else SparseVec(sp.indices, sp.values))
        return found, _matrix(dense), sparse

    def move_aside(self, name: str) -> Path | None:
        """Close the collection and rename its folder to ``<name>.damaged-<n>`` (under its
        lock, so no other process has it open); returns that path (None: no folder)."""
        with self._lock:
            folder = self._dir(name)
            shard = self._shards.pop(name, None)
            if shard is not None:
                try:
                    shard.close()
                except Exception:  # noqa: BLE001 - a damaged shard may not close cleanly: it is set aside anyway
                    pass
            if not folder.exists():
                self._let_go(name)
                return None
            self._hold(name)
            try:
                n = 0
                while (aside := self.root / f"{name}{_ASIDE}{os.getpid()}-{n}").exists():
                    n += 1
                folder.rename(aside)
            finally:
                self._let_go(name)
            return aside

    def delete_aside(self, aside: Path) -> None:
        """Delete a folder :meth:`move_aside` made (once the rebuild is complete)."""
        if _ASIDE in Path(aside).name:
            shutil.rmtree(aside, ignore_errors=True)

    # -- durability ----------------------------------------------------------------

    def flush(self, name: str) -> None:
        """Write every update to the segments on disk (durable). The optimizer runs only when
        ``Layout.optimize_every`` points were upserted since it last ran: the engine keeps
        its appendable segment in memory, so a long sync seals it as it grows (bounded by
        ``max_segment_kb``, a point is rewritten a bounded number of times, not once per
        batch)."""
        with self._lock:
            every = LAYOUT.optimize_every
            if every and self._written.get(name, 0) >= every:
                self.optimize(name)
                return
            shard = self._shard(name)
            self._require_space()
            try:
                with checked(f"collection {self._dir(name)}"):
                    shard.flush()
            except BaseException:
                file_record.forget(self._dir(name))  # files half written: the engine's word, not the record's
                raise
            self._record(name)

    def optimize(self, name: str) -> None:
        """Let the optimizer run, then flush. Qdrant Edge has no background optimizer: this
        is where deleted points are vacuumed, small segments merged and the appendable
        segment sealed (``LAYOUT``: up to ``max_segment_kb``, no graph in the shipped
        layout; the old one built an HNSW graph above ``INDEXING_THRESHOLD_KB``, blocking).
        A sync runs it after its last batch, and :meth:`flush` every ``optimize_every``
        points; run after every batch over unbounded segments, it rewrote a 200k-point
        collection per batch (issue 21)."""
        with self._lock:
            shard = self._shard(name)
            self._require_space()
            self._writing(name)
            try:
                with translate(f"collection {self._dir(name)}"):
                    self._written[name] = 0
                    shard.optimize()
                    shard.flush()
            except BaseException:
                file_record.forget(self._dir(name))
                raise
            self._record(name)

    def size_bytes(self, name: str) -> int:
        """Bytes on disk under ``root/<name>/`` (0 if missing)."""
        folder = self._dir(name)
        return disk_usage(folder) if folder.is_dir() else 0

    def close(self) -> None:
        """Flush and close every open shard; the store reopens them lazily if used again."""
        with self._lock:
            shards, self._shards = self._shards, {}
            errors: list[str] = []
            for name, shard in shards.items():
                try:
                    shard.flush()
                    shard.close()
                    self._record(name)
                except Exception as exc:  # noqa: BLE001 - close the others anyway
                    file_record.forget(self._dir(name))
                    errors.append(f"{name}: {exc}")
                finally:
                    self._let_go(name)
            if errors:
                raise StoreError(f"closing collections in {self.root} failed: {'; '.join(errors)}")


@lru_cache(maxsize=8)
def _packer(dim: int) -> struct.Struct:
    return struct.Struct(f"={dim}d")


def _matrix(dense: list[Any]) -> np.ndarray:
    """float32 (n, dim) of ``dense`` (the engine's vectors as lists of floats): packed as
    float64 by one ``struct`` call per vector (~2.5 us for 256 floats, half of
    ``np.array``'s conversion of the lists). ValueError when they differ in length or are
    not lists of numbers."""
    if not dense:
        return np.zeros((0, 0), dtype=np.float32)
    dim = len(dense[0])
    if not isinstance(dense[0], list) or any(len(d) != dim for d in dense):
        raise ValueError("dense vectors of different lengths")
    pack = _packer(dim).pack
    try:
        data = b"".join([pack(*d) for d in dense])
    except struct.error as exc:  # not numbers (a multi-vector, a damaged record)
        raise ValueError(f"dense vectors that are not numbers: {exc}") from None
    return np.frombuffer(data, dtype=np.float64).reshape(len(dense), dim).astype(np.float32)
