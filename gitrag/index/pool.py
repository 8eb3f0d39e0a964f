"""The per-file work of a big sync on every core: worker processes read a blob, judge its
content, chunk it (one tokenisation of the file), take its symbol graph, its chunks' sparse
vectors and the dense vectors of the chunks the vector cache lacks.

The sync (:class:`gitrag.index.indexer.Indexer`) keeps everything that writes: the policy's path
rules (``.gitattributes``, ``.gitragignore``), the SQLite state and cache, the store, the
journal and the batches; it takes each file's :class:`FileResult` in path order, so its
batches, transactions, summary and points are those of a run without the pool (a test
compares the point sets). The pool is used for syncs of at least ``POOL_MIN_FILES`` paths
with an embedder that runs in-process on the CPU (``static``, ``hash``): a commit of a few
files never pays for starting processes, and a torch or Ollama embedder is not copied
into each worker. ``GITRAG_INDEX_WORKERS`` sets the number of workers (default: the CPUs
this process may use; 1 or 0: no pool). Any failure of the pool (a worker that cannot
start, a broken process) falls back to the in-process path for the files left.

Workers are started with ``spawn`` (the daemon runs threads: forking it is unsafe), open
the repository, the embedder and the cache (read-only) once, and at most ``AHEAD`` files
per worker are in flight, so memory stays flat whatever the repository's size.

Workers never outlive the process that started them (a killed ``gitrag index``, a daemon
killed during a first index): on Linux the kernel kills them when it dies
(``prctl(PR_SET_PDEATHSIG)``), elsewhere a thread in each worker sees its parent change and
exits; and their stdout/stderr are ``/dev/null``, so a caller waiting for the command's
output to end is never held by a worker.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gitrag.config import Settings
    from gitrag.index.state import PointRow

POOL_MIN_FILES = 256
AHEAD = 4  # files in flight per worker
IN_PROCESS_EMBEDDERS = ("static", "hash")


def workers() -> int:
    """Worker processes for a big sync: ``GITRAG_INDEX_WORKERS``, else the usable CPUs.
    Raises ConfigError for a bad ``GITRAG_INDEX_WORKERS`` (see gitrag.config.index_workers)."""
    from gitrag.config import index_workers

    named = index_workers()
    if named is not None:
        return named
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def usable(embedder: Any, paths: int) -> bool:
    """Whether a sync of ``paths`` paths with ``embedder`` runs its per-file work in a pool."""
    return paths >= POOL_MIN_FILES and getattr(embedder, "name", "") in IN_PROCESS_EMBEDDERS and workers() > 1


@dataclass(frozen=True)
class FileWork:
    """One file for a worker: ``reincluded`` as :meth:`gitrag.index.policy.Policy.reincluded`."""

    path: str
    blob: str
    mode: int
    reincluded: bool


@dataclass
class FileResult:
    """What a worker made of one file. ``reason``: why it is skipped (then nothing else).
    ``texts``: embedding text per embeddable chunk hash; ``vectors`` / ``sparse``: the dense
    and sparse vectors of the hashes the cache lacked when the worker looked (a chunk that
    failed to embed has none: the sync embeds it again and handles the failure)."""

    path: str
    reason: str | None = None
    rows: list[PointRow] = field(default_factory=list)
    graph: dict[str, Any] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    vectors: dict[str, Any] = field(default_factory=dict)
    sparse: dict[str, Any] = field(default_factory=dict)


# -- the worker side -----------------------------------------------------------------------

_worker: dict[str, Any] = {}
PARENT_POLL_S = 0.5  # how often a worker without PR_SET_PDEATHSIG looks for its parent


def _die_with_parent(parent: int) -> None:
    """Make this worker exit when process ``parent`` dies: PR_SET_PDEATHSIG (Linux; SIGKILL
    when the parent goes), and on every system a daemon thread that polls ``os.getppid()``
    (a worker is re-parented when its parent dies) every PARENT_POLL_S seconds."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no libc prctl: the thread below does it
            pass
    if os.getppid() != parent:  # it died before the line above: go now
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="gitrag-parent-watch", daemon=True).start()


def _detach_output() -> None:
    """Point this worker's stdout and stderr at /dev/null: it reports through its results,
    and an inherited pipe would keep the caller of the command waiting for its end."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (1, 2):
            os.dup2(null, fd)
    finally:
        os.close(null)


def _init(repo_path: str, settings: Settings, cache_path: str, variant: str, fingerprint: str,
          parent: int | None = None) -> None:
    if parent is not None:
        _die_with_parent(parent)
        _detach_output()
    from gitrag.git.repo import GitRepo
    from gitrag.index.embedders import create

    emb = create(settings)
    if emb.fingerprint != fingerprint:
        raise RuntimeError(f"worker embedder {emb.fingerprint} differs from the sync's {fingerprint}")
    cache = sqlite3.connect(f"file:{cache_path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
    _worker.update(repo=GitRepo(repo_path), emb=emb, cache=cache, variant=variant, fingerprint=fingerprint)


def _cached(table: str, hashes: list[str], context: str) -> set[str]:
    """The chunk hashes the vector cache (gitrag.index.vector_cache) has a row for:
    ``table`` "vectors" with ``context`` the embedder fingerprint, "sparse" with it the
    sparse-term version. Presence only: the parent reads the rows through VectorCache,
    which checks their digests (a bad row is dropped there and embedded again)."""
    from gitrag.index.vector_cache import decode_key, encode_key

    db = _worker["cache"]
    if table == "vectors":
        row = db.execute("SELECT id FROM fingerprints WHERE name=?", (context,)).fetchone()
        if row is None:
            return set()
        where, arg = "fp=?", row[0]
    else:
        where, arg = "version=?", context
    out: set[str] = set()
    for i in range(0, len(hashes), 500):
        part = [encode_key(h) for h in hashes[i : i + 500]]
        rows = db.execute(f"SELECT key FROM {table} WHERE {where} AND key IN ({','.join('?' * len(part))})",
                          (arg, *part))
        out.update(decode_key(r[0]) for r in rows)
    return out


def process(work: FileWork) -> FileResult:
    """Read, judge, chunk and embed one file (in a worker; see the module doc)."""
    from gitrag.git.repo import Entry
    from gitrag.index import sparse
    from gitrag.index.chunking import analyze
    from gitrag.index.embedders.base import embed_partial
    from gitrag.index.indexer import _graph, _rows_for
    from gitrag.index.policy import content_reason
    from gitrag.index.vector_cache import stored_forms

    repo, emb = _worker["repo"], _worker["emb"]
    try:
        data = repo.read_blob(work.blob)
    except Exception as exc:  # noqa: BLE001 - a corrupt or missing object: skip the file, keep going
        return FileResult(work.path, f"unreadable blob: {exc}")
    reason = content_reason(data, work.path, work.reincluded)
    if reason:
        return FileResult(work.path, reason)
    try:
        analysis = analyze(work.path, data, max_tokens=emb.max_tokens, count_tokens=emb.count_tokens)
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the rest
        return FileResult(work.path, f"chunker error: {type(exc).__name__}")
    rows = _rows_for(Entry(work.path, work.blob, work.mode), analysis, _worker["variant"])
    texts: dict[str, str] = {}
    spans: dict[str, Any] = {}
    for c in analysis.chunks:
        if c.embeddable:
            texts[c.hash] = c.text
            if c.span is not None:
                spans[c.hash] = c.span
    result = FileResult(work.path, None, rows, _graph(analysis), texts)
    hashes = list(texts)
    have_sparse = _cached("sparse", hashes, sparse.VERSION)
    result.sparse = {h: sparse.document_vector(texts[h]) for h in hashes if h not in have_sparse}
    have = _cached("vectors", hashes, _worker["fingerprint"])
    todo = [h for h in hashes if h not in have]
    if todo:
        try:
            vecs, failed = embed_partial(emb, [texts[h] for h in todo], [spans.get(h) for h in todo])
        except Exception:  # noqa: BLE001 - the sync embeds them again, and reports what fails
            return result
        skip = set(failed)
        # as the cache keeps them (int8 and a scale): the same point whether embedded here, in the sync or read back
        forms = stored_forms(vecs)  # the whole file's vectors in one pass
        result.vectors = {h: forms[j] for j, h in enumerate(todo) if j not in skip}
    return result


# -- the sync side -------------------------------------------------------------------------


class Pool:
    """Worker processes for one sync; :meth:`results` yields FileResults in input order."""

    def __init__(self, repo_path: str, settings: Settings, cache_path: str, variant: str, fingerprint: str,
                 size: int | None = None) -> None:
        import multiprocessing

        self.size = size or workers()
        self._pool = ProcessPoolExecutor(self.size, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_init,
                                         initargs=(repo_path, settings, cache_path, variant, fingerprint,
                                                   os.getpid()))

    def results(self, works: Iterator[FileWork]) -> Iterator[tuple[FileWork, Future[FileResult]]]:
        """(work, future) in input order, at most ``AHEAD`` per worker submitted ahead."""
        pending: deque[tuple[FileWork, Future[FileResult]]] = deque()
        limit = AHEAD * self.size
        for work in works:
            pending.append((work, self._pool.submit(process, work)))
            while len(pending) >= limit:
                yield pending.popleft()
        while pending:
            yield pending.popleft()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
