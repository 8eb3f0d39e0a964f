"""The work-tree overlay: uncommitted files searched together with the branch's index.

    git status (HEAD vs work tree, untracked not ignored) + diff(indexed commit, HEAD)
    -> each path whose bytes on disk differ from the indexed blob (by git's blob id of them)
    -> hidden: its committed points are dropped from the store's lists (by point id after
       the query, or by the query's path filter past POST_FILTER_MAX points)
    -> read from disk, judged by the file policy (work-tree ``.gitragignore``), chunked
    -> vectors from the vector cache by chunk SHA-256, embed only the misses (and cache them)
    -> in-memory dense (dot product, as the store's cosine) and sparse lists (the store's own
       IDF for each query term), merged into the same candidate lists the ranking fuses

A chunk an edit left as it was (same text, same path) is not scored here: its committed
point keeps answering from the store and is renamed to the work-tree chunk (Overlay.kept,
Overlay.drop), so only the changed chunks' points are hidden and only changed chunks are
scored in memory. In the daemon (PROVISIONAL) an edited file not cut yet is cut from its
committed chunks (gitrag.query.splice: no tokenising; a file whose definitions changed is
cut by the chunker) and the daemon's warm-up replaces that
with the chunker's cut.

So an edited file answers with its new code, a deleted or renamed-away one no longer
answers, and a new untracked file answers at once; every such result carries
``source="worktree"`` and its snippet comes from the file on disk. A file's chunks and
vectors are kept in a small in-process LRU by (path, blob id), and a file is not re-read
while its lstat signature holds, so in a long-lived process (the daemon, which ``gitrag
mcp`` asks) a second ask costs git status and the in-memory scoring; a new process finds
the vectors in the vector cache but chunks the files again.
At most MAX_FILES paths are overlaid per ask (the rest are counted in ``truncated``).

A file committed since the indexed commit (its bytes on disk are HEAD's blob: the daemon's
sync is on it) is HEAD's code not indexed yet, not an edit: those are listed in
``Overlay.unindexed``, and with a ``deadline`` (the daemon's ask: its wait) they are chunked
and embedded only while it lasts, in growing batches timed as they go; the rest answer as
indexed (or not at all when new) and are counted in ``Overlay.late``. A big commit mid-sync
would otherwise embed its files inside the request, past the wait.
"""

from __future__ import annotations

import math
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pathspec
import pygit2

from gitrag.git.repo import Entry, is_utf8
from gitrag.index import sparse
from gitrag.index.chunking import CHUNKER_VERSION, analyze
from gitrag.index.embedders.base import embed_partial
from gitrag.index.policy import DEFAULT_PATTERNS, IGNORE_FILE, Policy, content_reason, size_reason
from gitrag.index.state import Branch
from gitrag.index.store import Hit, SearchFilter, SparseVec
from gitrag.index.symbols import Definition, SymbolIndex
from gitrag.index.vector_cache import stored_forms
from gitrag.index.vectors import VERSION as VECTORS_VERSION
from gitrag.index.vectors import combine, path_vectors
from gitrag.index.workspace import Workspace

SOURCE = "worktree"
KEY_PREFIX = "worktree:"  # overlay candidates' keys; never a store point id (those are UUIDs)
MAX_FILES = 300  # paths overlaid per ask; an untracked build folder must not be embedded on an ask
# Hidden points up to this many are dropped from the store's lists after the query (read that
# much deeper); more are left out by the query's filter instead. A path filter made each
# query of a warm ask 2-5 ms slower on click (bench/bench_overlay.py), dropping ids costs ~0.
POST_FILTER_MAX = 1000
CACHE_FILES = 2048  # files kept chunked and embedded in the process


@dataclass
class OverlayFile:
    """One work-tree file as chunked and embedded: payloads like a point's (plus
    ``source``), combined dense vectors (n, dim), and its sparse weights (with its path's
    terms) as postings ``{term id: [(chunk index, weight), ...]}``."""

    path: str
    blob: str  # git's blob id of the bytes on disk (not in the object database)
    data: bytes
    payloads: list[dict[str, Any]]
    dense: np.ndarray
    postings: dict[int, list[tuple[int, float]]]
    definitions: list[Definition]
    languages: frozenset[str] = frozenset()
    provisional: bool = False  # chunked by gitrag.query.splice, not by the chunker

    def __post_init__(self) -> None:
        self.languages = frozenset(p.get("language", "") for p in self.payloads)


def overlay_key(path: str, i: int) -> str:
    """The candidate key of chunk ``i`` of the overlaid ``path``: ``worktree:<i>:<path>``."""
    return f"{KEY_PREFIX}{i}:{path}"


@dataclass
class Overlay:
    """What the work tree changes in one branch's index, for one search.

    ``hidden``: indexed paths whose committed points must not answer (deleted, modified,
    renamed away, now skipped); ``files``: the overlaid files; ``changes``: work-tree
    files that differ from HEAD (git status); ``embedded``: chunks embedded for this
    overlay now; ``skipped``: ``{path: reason}`` for dirty files the policy skips;
    ``truncated``: dirty paths beyond MAX_FILES, left as indexed; ``unindexed``: overlaid paths
    whose bytes are HEAD's blob (committed since the indexed commit, not indexed yet); ``late``:
    such files not searched because the build's deadline came first (left as indexed)."""

    hidden: frozenset[str] = frozenset()
    files: dict[str, OverlayFile] = field(default_factory=dict)
    changes: int = 0
    embedded: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    truncated: int = 0
    generation: str = ""  # the branch's indexed commit when built (keys the IDF memo)
    hidden_ids: frozenset[str] = frozenset()  # point ids of the hidden paths' committed chunks
    # committed point id -> overlay key of the same chunk (same text, same path) in the work
    # tree's file: the store's list answers for it and the hit is renamed (see drop); those
    # chunks are left out of the overlay's own lists. Empty when the path filter is used.
    kept: dict[str, str] = field(default_factory=dict)
    _own: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # path -> indices scored here
    unindexed: frozenset[str] = frozenset()
    late: int = 0

    @property
    def active(self) -> bool:
        return bool(self.hidden or self.files)

    # -- scope and payloads -------------------------------------------------------------
    @property
    def post_filter(self) -> bool:
        """Hidden points are dropped from the lists by id (see :meth:`drop`), not by the query."""
        return len(self.hidden_ids) <= POST_FILTER_MAX

    @property
    def extra_depth(self) -> int:
        """How much deeper to read a store list so that dropping hidden points leaves its depth."""
        return len(self.hidden_ids) if self.post_filter else 0

    def drop(self, hits: list[Hit]) -> list[Hit]:
        """``hits`` without the hidden paths' committed points whose chunk the work tree
        changed; a point whose chunk the work-tree file still holds unchanged is renamed to
        that chunk's overlay key (its payload from the file on disk: new lines, ``source``),
        its score kept (the same text and path: the same vectors the overlay would score)."""
        if not (self.hidden_ids or self.kept):
            return hits
        out = []
        for h in hits:
            if h.id in self.hidden_ids:
                continue
            key = self.kept.get(h.id)
            if key is None:
                out.append(h)
            else:
                got = self._locate(key)
                out.append(Hit(key, h.score, got[0].payloads[got[1]]) if got else h)
        return out

    def own(self, f: OverlayFile) -> np.ndarray:
        """Indices of ``f``'s chunks the overlay scores itself (those no kept point answers for)."""
        got = self._own.get(f.path)
        return got if got is not None else np.arange(len(f.payloads))

    def scope(self, scope: SearchFilter | None) -> SearchFilter | None:
        """``scope`` for the store's query: with the hidden paths in ``excluded_paths`` when
        there are too many hidden points to drop after the query (:attr:`post_filter`)."""
        if not self.hidden or self.post_filter:
            return scope
        base = scope or SearchFilter()
        paths = tuple(sorted(set(base.excluded_paths) | self.hidden))
        return SearchFilter(base.path_prefix, base.language, base.exclude, paths)

    def _locate(self, key: str) -> tuple[OverlayFile, int] | None:
        if not key.startswith(KEY_PREFIX):
            return None
        index, _, path = key[len(KEY_PREFIX):].partition(":")
        f = self.files.get(path)
        if f is None or not index.isdigit() or int(index) >= len(f.payloads):
            return None
        return f, int(index)

    def owns(self, key: str) -> bool:
        return self._locate(key) is not None

    def payloads(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out = {}
        for k in keys:
            got = self._locate(k)
            if got is not None:
                out[k] = got[0].payloads[got[1]]
        return out

    def snippet_of_blob(self, path: str, blob: str, start_byte: int, end_byte: int) -> str | None:
        """The bytes ``[start_byte, end_byte)`` of the overlaid ``path`` as read from disk for
        this search; None when ``path`` is not overlaid with that blob."""
        f = self.files.get(path)
        if f is None or f.blob != blob:
            return None
        return f.data[start_byte:end_byte].decode("utf-8", "replace")

    # -- the two lists ---------------------------------------------------------------------
    def _admitted(self, scope: SearchFilter | None) -> list[OverlayFile]:
        """The files with a chunk inside ``scope`` (path and language; a file's chunks share its path)."""
        return [f for f in self.files.values() if f.payloads and (
            scope is None or any(scope.admits(f.path, lang) for lang in f.languages))]

    def _inside(self, f: OverlayFile, i: int, scope: SearchFilter | None) -> bool:
        return scope is None or not scope.language or f.payloads[i].get("language", "") == scope.language

    def dense_hits(self, query: np.ndarray, limit: int, scope: SearchFilter | None,
                   floor: float = -math.inf) -> list[Hit]:
        """The overlay's chunks by cosine to ``query`` (float32 (dim,), normalised, as the
        store's dense list), best first, at most ``limit``, none scoring below ``floor``
        (the last score of a full store list: lower ones would not make the merged list)."""
        q = np.asarray(query, dtype=np.float32)
        admitted = self._admitted(scope)
        if not admitted:
            return []
        rows = [(f, self.own(f)) for f in admitted]
        scores = np.concatenate([(f.dense[idx] if len(idx) < len(f.payloads) else f.dense) @ q for f, idx in rows])
        owner = [(f, int(i)) for f, idx in rows for i in idx]
        if not owner:
            return []
        order = np.argsort(-scores, kind="stable")
        if floor > -math.inf:
            order = order[: int(np.count_nonzero(scores >= floor))]
        scored: list[tuple[float, str, OverlayFile, int]] = []
        for j in order:
            f, i = owner[int(j)]
            if self._inside(f, i, scope):
                scored.append((float(scores[j]), overlay_key(f.path, i), f, i))
                if len(scored) >= limit:
                    break
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [Hit(key, score, f.payloads[i]) for score, key, f, i in scored]

    def sparse_hits(self, terms: SparseVec, idf: dict[int, float], limit: int,
                    scope: SearchFilter | None, floor: float = -math.inf) -> list[Hit]:
        """The overlay's chunks by the store's sparse score, ``sum(q_t * idf_t * w_t)`` (see
        :func:`idf`), best first; chunks sharing no term with the query are left out."""
        scored: list[tuple[float, str, OverlayFile, int]] = []
        for f in self._admitted(scope):
            acc: dict[int, float] = {}
            for t, q in zip(terms.indices, terms.values):
                weight = q * idf.get(t, 0.0)
                for i, w in f.postings.get(t, ()):
                    acc[i] = acc.get(i, 0.0) + weight * w
            mine = self._own.get(f.path)
            if mine is not None:
                allowed = set(mine.tolist())
                acc = {i: v for i, v in acc.items() if i in allowed}
            scored += [(s, overlay_key(f.path, i), f, i) for i, s in acc.items()
                       if s > 0 and s >= floor and self._inside(f, i, scope)]
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [Hit(key, score, f.payloads[i]) for score, key, f, i in scored[:limit]]

    def _derived(self) -> list[Any]:
        """[every term id of the overlay's sparse vectors, the symbol graph of its files (made
        when first asked for)], kept for the last few sets of files: a second ask over the
        same edits rebuilds neither."""
        key = tuple((f.path, f.blob, f.provisional) for f in self.files.values())
        with _cache_lock:
            got = _derived.get(key)
        if got is None:
            got = [frozenset(t for f in self.files.values() for t in f.postings), None]
            with _cache_lock:
                _derived[key] = got
                while len(_derived) > 4:
                    _derived.popitem(last=False)
        return got

    def terms(self) -> frozenset[int]:
        """Every term id in the overlay's sparse vectors."""
        return self._derived()[0]

    # -- the symbol graph -------------------------------------------------------------------
    def graph(self) -> SymbolIndex:
        """The definitions of the overlaid files (no references: ranking asks for definitions only)."""
        got = self._derived()
        if got[1] is None:
            got[1] = SymbolIndex(self.files, [d for f in self.files.values() for d in f.definitions], [])
        return got[1]


def merge(store_hits: list[Hit], overlay_hits: list[Hit], limit: int) -> list[Hit]:
    """One best-first list of store and overlay hits (scores on the same scale), at most ``limit``."""
    if not overlay_hits:
        return store_hits[:limit]
    return sorted(store_hits + overlay_hits, key=lambda h: -h.score)[:limit]


# -- building it ----------------------------------------------------------------------------

_cache: OrderedDict[tuple[str, ...], OverlayFile] = OrderedDict()
_cache_lock = threading.Lock()
_derived: OrderedDict[tuple[tuple[str, str, bool], ...], list[Any]] = OrderedDict()
# Whether an ask may take an edited file's chunks from gitrag.query.splice (its committed
# chunks, the changed range as one chunk) when the chunker's cut is not cached yet: the
# daemon sets it, since its warm-up (gitrag.daemon.warm) replaces them with the chunker's
# cut within a second; a one-off process chunks exactly.
PROVISIONAL = False


def dirty_paths(ws: Workspace, branch: Branch | None) -> tuple[list[str], int, dict[str, str]]:
    """(paths that may differ from the branch's indexed commit, work-tree files that differ
    from HEAD, {path: HEAD's blob} of the paths changed between the indexed commit and HEAD).
    The first are git status's changed and untracked-not-ignored files, plus those changed
    paths; each is checked against the indexed blob by the caller."""
    repo = ws.repo
    if repo.workdir is None:
        return [], 0, {}
    changed = set(repo.changed_paths())
    # a name that is not UTF-8 (surrogate escapes from git status) is counted as changed but
    # not overlaid: the index spells it with \xNN escapes (gitrepo.decode_path), so its
    # committed chunks answer as indexed, and no query or SQLite key ever meets the raw bytes
    paths = {p for p in changed if is_utf8(p)}
    head = repo.head()
    old = branch.indexed_commit if branch else None
    in_head: dict[str, str] = {}
    if old and head and old != head and repo.has_commit(old):
        for c in repo.diff(old, head):
            paths |= {e.path for e in (c.old, c.new) if e is not None}
            if c.new is not None:
                in_head[c.new.path] = c.new.blob
    return sorted(paths), len(changed), in_head


class _WorktreePolicy(Policy):
    """The file policy with the work tree's ``.gitragignore`` (what the next commit will hold)."""

    def __init__(self, ws: Workspace, commit: str, ignore: str) -> None:
        self._lines = ignore.splitlines()
        super().__init__(ws.repo, commit, ws.settings.max_file_bytes, None)

    def _load_ignore(self) -> pathspec.PathSpec:
        return pathspec.PathSpec.from_lines("gitignore", [*DEFAULT_PATTERNS, *self._lines])


_verdicts: OrderedDict[tuple[str, ...], str | None] = OrderedDict()  # (data dir, head, ignore, path, blob) -> reason
# (data dir, path) -> (lstat signature, blob id, bytes): a file whose signature is unchanged is not
# read and hashed again (git's own index does the same with the same fields)
_stats: OrderedDict[tuple[str, str], tuple[tuple[int, ...], str, bytes]] = OrderedDict()


_build_lock = threading.Lock()  # one build at a time in a process (see build)


def build(ws: Workspace, branch: Branch, exact: bool | None = None, deadline: float | None = None,
          warming: bool = False) -> Overlay:
    """The overlay of the work tree over ``branch``'s index (see the module doc).

    Reads files of the work tree only under its root; a file that cannot be read is
    skipped with its reason (its committed points hidden). Raises what the embedder raises
    as a whole (EmbedderUnavailable). Builds in one process take turns: an ask that comes
    while the daemon's warm-up (gitrag.daemon.warm) chunks the same edits waits for it and
    then finds them cached, instead of chunking them a second time beside it (on a busy
    machine two builds of the same files take twice the CPU and both finish late).

    ``exact``: False lets an edited file not cached yet be chunked provisionally
    (gitrag.query.splice), True never; None: as PROVISIONAL says (the daemon's asks). An
    exact build in the daemon (its warm-up) gives the turn up while it chunks a file, so an
    ask never waits for the chunker there. ``warming``: the daemon's warm-up builds it (not
    recorded by :func:`settled_since`).

    ``deadline`` (``time.monotonic()``; None: none): files committed since the indexed commit
    and not cached are chunked and embedded only until then (see the module doc)."""
    global _asking, _last_ask
    exact = (not PROVISIONAL) if exact is None else exact
    if exact and PROVISIONAL:  # the daemon's warm-up: holds the turn except while it chunks (see _files)
        with _build_lock:
            return _build(ws, branch, exact, deadline)
    with _build_lock:
        _asking += 1
        started = time.monotonic()
        try:
            built = _build(ws, branch, exact, deadline)
        finally:
            _asking -= 1
            _last_ask = time.monotonic()
        if not warming and not built.late and not any(f.provisional for f in built.files.values()):
            _settled[str(ws.repo.root)] = started
        return built


_settled: dict[str, float] = {}  # work-tree root -> monotonic start of the last ask's build with no provisional cut


def settled_since(root: str, since: float) -> bool:
    """Whether an ask (not the warm-up) began building the overlay of the work tree ``root``
    at or after ``since`` (monotonic seconds) and found every file chunked exactly (none cut
    provisionally): what a warm-up round begun then would have done is done."""
    return _settled.get(root, -1.0) >= since


_asking = 0  # asks building an overlay now (the daemon's warm-up gives way to them, see _give_way)
_last_ask = 0.0  # monotonic time the last one finished
GIVE_WAY_S = 0.3  # the rest of an ask (its search and ranking) after its overlay is built
MAX_WAIT_S = 5.0  # the warm-up waits at most this long before a file


def _give_way() -> None:
    """Before the daemon's warm-up chunks a file (Python work holding the GIL): wait while an
    ask is building its overlay or was a moment ago, so a first ask after edits (which cuts
    them provisionally, in ms) does not share the interpreter with the chunker."""
    deadline = time.monotonic() + MAX_WAIT_S
    while (_asking or time.monotonic() - _last_ask < GIVE_WAY_S) and time.monotonic() < deadline:
        time.sleep(0.02)


def _build(ws: Workspace, branch: Branch, exact: bool, deadline: float | None = None) -> Overlay:
    paths, changes, in_head = dirty_paths(ws, branch)
    if not paths:
        return Overlay(changes=changes)
    manifest = ws.state.files_of(branch.name, paths)
    root = ws.repo.root
    head = ws.repo.head() or branch.indexed_commit or ""
    try:
        ignore = (root / IGNORE_FILE).read_text("utf-8", "replace")
    except OSError:
        ignore = ""
    policy: list[Policy] = []  # made on the first file not judged before in this process
    hidden: set[str] = set()
    todo: list[tuple[str, str, bytes, str | None]] = []
    skipped: dict[str, str] = {}
    truncated = 0
    for path in paths:
        known = manifest.get(path)
        disk = root / path
        try:
            info = os.lstat(disk)
        except OSError:
            info = None
        if info is None or stat.S_ISDIR(info.st_mode):
            if known is not None:  # deleted (or renamed away) in the work tree
                hidden.add(path)
            continue
        mode = 0o120000 if stat.S_ISLNK(info.st_mode) else (0o100755 if info.st_mode & 0o111 else 0o100644)
        data, blob = b"", ""
        if mode != 0o120000 and stat.S_ISREG(info.st_mode) and info.st_size <= ws.settings.max_file_bytes:
            sig = (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_mode)
            seen = _stats.get((str(ws.data_dir), path))
            if seen is not None and seen[0] == sig:
                blob, data = seen[1], seen[2]
            else:
                try:
                    data = disk.read_bytes()
                except OSError as exc:
                    skipped[path] = f"unreadable: {exc.strerror or exc}"
                    if known is not None:
                        hidden.add(path)
                    continue
                blob = str(pygit2.hash(data))
                if len(data) == info.st_size:  # not written while we read it
                    _stats[(str(ws.data_dir), path)] = (sig, blob, data)
                    while len(_stats) > CACHE_FILES:
                        _stats.popitem(last=False)
        if known is not None and blob and known.blob == blob:
            continue  # the same bytes as indexed (edited and edited back, or committed and indexed)
        if known is not None:
            hidden.add(path)
        key = (str(ws.data_dir), head, ignore, path, blob)
        if key in _verdicts:
            reason = _verdicts[key]
        else:
            reason = _reason(ws, policy, head, ignore, path, blob, mode, info.st_size, data) if head else None
            if blob:
                _verdicts[key] = reason
                while len(_verdicts) > CACHE_FILES:
                    _verdicts.popitem(last=False)
        if reason:
            skipped[path] = reason
            continue
        if len(todo) >= MAX_FILES:
            truncated += 1
            hidden.discard(path)  # left as indexed: better stale than missing
            continue
        todo.append((path, blob, data, known.blob if known is not None else None))
    unindexed = frozenset(path for path, blob, _, _ in todo if blob and in_head.get(path) == blob)
    files, embedded, late = _overlaid(ws, branch, todo, unindexed, exact, hidden, deadline)
    hidden_ids, kept, own = _committed(ws, branch, frozenset(hidden), files)
    if len(hidden_ids) > POST_FILTER_MAX and any(f.provisional for f in files.values()):
        # the store leaves the hidden paths out by a filter: every chunk is scored here, so cut them exactly
        files, more, later = _overlaid(ws, branch, [t for t in todo if t[0] not in late], unindexed, True, hidden,
                                       deadline)
        embedded, late = embedded + more, [*late, *later]
        hidden_ids, kept, own = _committed(ws, branch, frozenset(hidden), files)
    return Overlay(frozenset(hidden), files, changes, embedded, skipped, truncated, branch.indexed_commit or "",
                   hidden_ids, kept, own, unindexed - set(late), len(late))


FIRST_BATCH = 2  # files committed since the index, chunked and embedded before the first timing


def _overlaid(ws: Workspace, branch: Branch, todo: list[tuple[str, str, bytes, str | None]],
              unindexed: frozenset[str], exact: bool, hidden: set[str], deadline: float | None
              ) -> tuple[dict[str, OverlayFile], int, list[str]]:
    """(the overlaid files, chunks embedded, the paths of ``unindexed`` left out by ``deadline``):
    the edits whole, the files committed since the index while the deadline lasts (:func:`_until`);
    those left out leave ``hidden`` too (they answer as indexed: better stale than missing)."""
    files, embedded = _files(ws, branch, [t for t in todo if t[0] not in unindexed], exact, frozenset(hidden))
    done, more, late = _until(ws, branch, [t for t in todo if t[0] in unindexed], exact, frozenset(hidden), deadline)
    for path in late:
        hidden.discard(path)
    return files | done, embedded + more, late


def _until(ws: Workspace, branch: Branch, todo: list[tuple[str, str, bytes, str | None]], exact: bool,
           hidden: frozenset[str], deadline: float | None) -> tuple[dict[str, OverlayFile], int, list[str]]:
    """(the overlaid files of ``todo``, chunks embedded, the paths left out) with what is cached
    taken at once and the rest chunked and embedded in batches while ``deadline`` lasts: each
    batch as many files as the last one's rate says fit before it (at least one)."""
    if deadline is None:
        files, embedded = _files(ws, branch, todo, exact, hidden)
        return files, embedded, []
    fp = ws.embedder.fingerprint
    with _cache_lock:
        cached = [t for t in todo if (got := _cache.get(_cache_key(ws, fp, t[0], t[1]))) is not None
                  and not (exact and got.provisional)]
    files, embedded = _files(ws, branch, cached, exact, hidden)
    rest = [t for t in todo if t[0] not in files]
    per_file = 0.0
    while rest:
        now = time.monotonic()
        if now >= deadline:
            break
        n = FIRST_BATCH if per_file == 0.0 else int((deadline - now) / per_file)
        if n < 1:
            break
        batch, rest = rest[:n], rest[n:]
        made, more = _files(ws, branch, batch, exact, hidden)
        per_file = max((time.monotonic() - now) / len(batch), 1e-6)
        files, embedded = files | made, embedded + more
    return files, embedded, [t[0] for t in rest]


_hidden_memo: OrderedDict[tuple[Any, ...], tuple[frozenset[str], dict[str, str], dict[str, np.ndarray]]] = OrderedDict()


def _committed(ws: Workspace, branch: Branch, hidden: frozenset[str], files: dict[str, OverlayFile]
               ) -> tuple[frozenset[str], dict[str, str], dict[str, np.ndarray]]:
    """(the committed point ids that must not answer, kept: committed point id -> overlay key
    of the same chunk still in the work-tree file, the indices of each overlaid file's
    chunks the overlay scores itself), memoised per indexed commit and overlaid blobs.

    An edit of one function leaves the file's other chunks as they were (same text, same
    path: the same point but for its lines): their points keep answering from the store
    (renamed by Overlay.drop), so only the changed chunks' points are dropped and only the
    changed chunks are scored in memory. Matched by chunk hash, in file order. When even
    the changed chunks' points are more than POST_FILTER_MAX (the hidden paths then leave
    the store's query by a path filter, kept chunks with them), nothing is kept."""
    if not hidden:
        return frozenset(), {}, {}
    key = (str(ws.data_dir), branch.name, branch.indexed_commit, branch.chunker, hidden,
           tuple((p, f.blob, f.provisional) for p, f in files.items() if p in hidden))
    got = _hidden_memo.get(key)
    if got is None:
        ids, by_path = _committed_points(ws, branch, hidden)
        committed: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for path, points in by_path.items():
            if path in files:
                for pid, payload in points:
                    committed.setdefault((path, payload.get("chunk_hash", "")), []).append(
                        (int(payload.get("start_byte", 0)), pid))
        for same in committed.values():
            same.sort(reverse=True)  # popped from the end: file order
        kept: dict[str, str] = {}
        own: dict[str, np.ndarray] = {}
        for path, f in files.items():
            if path not in hidden:
                continue
            mine = []
            for i, p in enumerate(f.payloads):
                same = committed.get((path, p["chunk_hash"]))
                if same:
                    kept[same.pop()[1]] = overlay_key(path, i)
                else:
                    mine.append(i)
            own[path] = np.asarray(mine, dtype=np.int64)
        rest = frozenset(ids) - kept.keys()
        got = (rest, kept, own) if len(rest) <= POST_FILTER_MAX else (frozenset(ids), {}, {})
        _hidden_memo[key] = got
        while len(_hidden_memo) > 8:
            _hidden_memo.popitem(last=False)
    return got


_points_memo: OrderedDict[tuple[Any, ...], tuple[frozenset[str], dict[str, list[tuple[str, dict[str, Any]]]]]] = \
    OrderedDict()


def _committed_points(ws: Workspace, branch: Branch, hidden: frozenset[str]
                      ) -> tuple[frozenset[str], dict[str, list[tuple[str, dict[str, Any]]]]]:
    """(the point ids of ``hidden``'s committed chunks in ``branch``, per path its
    ``(point id, payload)`` pairs), memoised per indexed commit."""
    key = (str(ws.data_dir), branch.name, branch.indexed_commit, branch.chunker, hidden)
    with _cache_lock:
        got = _points_memo.get(key)
    if got is None:
        ids = frozenset(ws.state.point_ids(branch.name, sorted(hidden)))
        by_path: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for pid, payload in ws.state.payloads(ids).items():
            by_path.setdefault(str(payload.get("path", "")), []).append((pid, payload))
        got = (ids, by_path)
        with _cache_lock:
            _points_memo[key] = got
            while len(_points_memo) > 8:
                _points_memo.popitem(last=False)
    return got


def _provisional(ws: Workspace, branch: Branch, hidden: frozenset[str], path: str, committed_blob: str | None,
                 data: bytes) -> Any:
    """gitrag.query.splice's analysis of ``path`` (its committed blob and chunks), or None."""
    from gitrag.query.splice import definitions, splice

    if not committed_blob or path not in hidden:
        return None
    points = _committed_points(ws, branch, hidden)[1].get(path)
    if not points:
        return None
    try:
        old = ws.repo.read_blob(committed_blob)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    gkey = (str(ws.data_dir), committed_blob)
    graph = _graphs.get(gkey)
    if graph is None:
        graph = _graphs[gkey] = definitions(ws.state.file_symbols(branch.name, path, CHUNKER_VERSION)[1])
        while len(_graphs) > CACHE_FILES:
            _graphs.popitem(last=False)
    return splice(path, old, data, [payload for _, payload in points], graph)


# (data dir, committed blob) -> the definitions of its symbol graph, as stored
_graphs: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()


def _reason(ws: Workspace, policy: list[Policy], head: str, ignore: str, path: str, blob: str, mode: int, size: int,
            data: bytes) -> str | None:
    """The policy's skip reason for a work-tree file, else None. What the path alone decides
    (ignore patterns, .gitattributes at ``head``: a git attribute lookup each) is memoised
    per (head, ignore file, path, mode), so an edited file is judged again by its bytes only."""
    key = (str(ws.data_dir), head, ignore, path, str(mode))
    by_path = _path_verdicts.get(key)
    if by_path is None:
        if not policy:
            policy.append(_WorktreePolicy(ws, head, ignore))
        by_path = _path_verdicts[key] = (policy[0].by_path(Entry(path, blob, mode)), policy[0].reincluded(path))
        while len(_path_verdicts) > CACHE_FILES:
            _path_verdicts.popitem(last=False)
    reason, reincluded = by_path
    if reason:
        return reason
    return size_reason(size, ws.settings.max_file_bytes) or content_reason(data, path, reincluded)


# (data dir, head, ignore, path, mode) -> (by_path's reason, re-included by the user)
_path_verdicts: OrderedDict[tuple[str, ...], tuple[str | None, bool]] = OrderedDict()


def _cache_key(ws: Workspace, fingerprint: str, path: str, blob: str) -> tuple[str, ...]:
    """The process cache's key of a work-tree file: everything its chunks and vectors depend on."""
    return (str(ws.data_dir), fingerprint, CHUNKER_VERSION, sparse.VERSION, VECTORS_VERSION, path, blob)


def _files(ws: Workspace, branch: Branch, todo: list[tuple[str, str, bytes, str | None]], exact: bool = True,
           hidden: frozenset[str] = frozenset()) -> tuple[dict[str, OverlayFile], int]:
    """The overlaid files, from the process cache or chunked and embedded now (an edited
    file provisionally, see gitrag.query.splice, unless ``exact``)."""
    from gitrag.query.splice import KnownChunk

    emb = ws.embedder
    fp = emb.fingerprint
    out: dict[str, OverlayFile] = {}
    fresh: list[tuple[tuple[str, ...], str, str, bytes, Any]] = []
    spliced: set[str] = set()
    chunked = partial(analyze, max_tokens=emb.max_tokens, count_tokens=emb.count_tokens)
    for path, blob, data, committed_blob in todo:
        key = _cache_key(ws, fp, path, blob)
        with _cache_lock:
            got = _cache.get(key)
            if got is not None:
                _cache.move_to_end(key)
        if got is not None and not (exact and got.provisional):
            out[path] = got
            continue
        analysis = None if exact else _provisional(ws, branch, hidden, path, committed_blob, data)
        if analysis is not None:
            spliced.add(path)
        elif exact and PROVISIONAL:  # the daemon's warm-up: chunks without the turn, asks first
            _build_lock.release()
            try:
                _give_way()
                analysis = chunked(path, data)  # pure computation: no SQLite, no shared state
            finally:
                _build_lock.acquire()
        fresh.append((key, path, blob, data, analysis or chunked(path, data)))
    if not fresh:
        return out, 0
    # a carried-over chunk (KnownChunk) needs no vector here: its committed point answers for
    # it from the store (Overlay.kept); _build chunks exactly when the store cannot (path filter)
    chunks = [(path, c) for _, path, _, _, a in fresh for c in a.chunks if c.embeddable and not isinstance(c, KnownChunk)]
    hashes = list(dict.fromkeys(c.hash for _, c in chunks))
    vectors = ws.state.get_vectors(hashes, fp)
    texts = {c.hash: (c.text, c.span) for _, c in chunks}
    todo_h = [h for h in hashes if h not in vectors and h in texts]
    embedded = 0
    if todo_h:
        made, failed = embed_partial(emb, [texts[h][0] for h in todo_h], [texts[h][1] for h in todo_h])
        bad = set(failed)  # stored_forms: the vectors as the cache keeps them, so a second ask scores the same
        forms = stored_forms(made)
        new = {h: forms[i] for i, h in enumerate(todo_h) if i not in bad}
        ws.state.put_vectors(new, fp)
        vectors.update(new)
        embedded = len(new)
    sparse_of = ws.state.get_sparse(hashes, sparse.VERSION)
    new_sparse = {h: sparse.document_vector(texts[h][0]) for h in hashes if h not in sparse_of and h in texts}
    if new_sparse:
        ws.state.put_sparse(new_sparse, sparse.VERSION)
        sparse_of.update(new_sparse)
    path_vecs, _ = path_vectors(ws.state, emb, fp, [path for _, path, _, _, _ in fresh])
    for key, path, blob, data, analysis in fresh:
        payloads: list[dict[str, Any]] = []
        dense_rows: list[np.ndarray] = []
        rows: list[int] = []
        postings: dict[int, list[tuple[int, float]]] = {}
        dim = emb.dim
        for c in analysis.chunks:
            known = isinstance(c, KnownChunk)
            if not c.embeddable or not (known or c.hash in vectors):
                continue
            payload = {
                "path": path, "blob": blob, "start_byte": c.start_byte, "end_byte": c.end_byte,
                "start_line": c.start_line, "end_line": c.end_line, "symbol": c.symbol, "kind": c.kind,
                "language": c.language, "chunk_hash": c.hash, "source": SOURCE,
            }
            if c.prose:
                payload["prose"] = c.prose
            if known:  # never scored in memory (see above): its row stays zeros
                payloads.append(payload)
                continue
            vec = sparse.with_path(sparse_of[c.hash], path)
            for t, w in zip(vec.indices, vec.values):
                postings.setdefault(t, []).append((len(payloads), w))
            rows.append(len(payloads))
            payloads.append(payload)
            dense_rows.append(combine(vectors[c.hash], path_vecs[path]))
        matrix = np.zeros((len(payloads), dim), np.float32)
        if dense_rows:
            matrix[rows] = np.stack(dense_rows)
        defs = [Definition(path, d.start_line, d.end_line, d.name, d.kind, d.parent, analysis.language)
                for d in analysis.definitions]
        f = OverlayFile(path, blob, data, payloads, matrix, postings, defs, provisional=path in spliced)
        out[path] = f
        with _cache_lock:
            _cache[key] = f
            while len(_cache) > CACHE_FILES:
                _cache.popitem(last=False)
    return out, embedded


# -- the store's IDF ---------------------------------------------------------------------------

_idf_cache: OrderedDict[tuple[str, str, int], float] = OrderedDict()


def idf(ws: Workspace, collection: str, term_ids: list[int], generation: str = "") -> dict[int, float]:
    """The IDF the store applies to each term (Qdrant's ``Modifier.IDF``:
    ``ln(1 + (N - n + 0.5) / (n + 0.5))``, N points, n of them holding the term), so an
    overlay chunk's sparse score is on the scale of the store's own.

    Read back from the store, not recounted: a one-term query's best hit scores
    ``idf * w`` where ``w`` is that point's weight (its cached sparse vector plus its
    path's terms); a term no point holds gets the formula with n = 0. Memoised per
    (collection, ``generation``, term): the caller passes what changes when the
    collection does (the branch's indexed commit); IDF moves little between syncs."""
    out: dict[int, float] = {}
    probe: dict[int, Hit] = {}
    missing: list[int] = []
    for t in term_ids:
        key = (collection, generation, t)
        if key in _idf_cache:
            out[t] = _idf_cache[key]
            continue
        hits = ws.store.search(collection, dense=None, sparse=SparseVec([t], [1.0]), limit=1, branch=None)
        if hits:
            probe[t] = hits[0]
        else:
            missing.append(t)
    if probe:
        # the store's points keep no chunk hash (layout "trim"): the state's manifest rows hold it
        rows = ws.state.payloads([h.id for h in probe.values() if "chunk_hash" not in h.payload])
        hash_of = {h.id: str(h.payload.get("chunk_hash") or rows.get(h.id, {}).get("chunk_hash", ""))
                   for h in probe.values()}
        cached = ws.state.get_sparse(list(hash_of.values()), sparse.VERSION)
        for t, hit in probe.items():
            vec = cached.get(hash_of[hit.id])
            w = dict(zip(*_with_path(vec, hit.payload.get("path", "")))).get(t) if vec else None
            if w:
                out[t] = hit.score / w
            else:
                missing.append(t)
    if missing:
        n_points = ws.store.count(collection)
        for t in missing:
            out[t] = math.log(1 + (n_points + 0.5) / 0.5)
    for t in term_ids:
        _idf_cache[(collection, generation, t)] = out[t]
    while len(_idf_cache) > 65536:
        _idf_cache.popitem(last=False)
    return out


def _with_path(vec: SparseVec, path: str) -> tuple[list[int], list[float]]:
    full = sparse.with_path(vec, path)
    return full.indices, full.values


class OverlayLookup:
    """gitrag.query.ranking's view of the index with the overlay on top: definitions and chunks of
    hidden paths are gone, those of overlaid files come from the overlay (``base``: the
    branch's own lookup, see gitrag.query.retrieval)."""

    def __init__(self, base: Any, overlay: Overlay, scope: SearchFilter | None) -> None:
        self.base, self.overlay, self.scope = base, overlay, scope

    def definitions(self, name: str, exact_case: bool) -> list[Any]:
        from gitrag.index.symbols import split_name
        from gitrag.query import ranking

        found = [d for d in self.base.definitions(name, exact_case) if d.path not in self.overlay.hidden]
        extra = self.overlay.graph().find(name)
        if exact_case:
            last = split_name(name)[-1:]
            extra = [d for d in extra if d.segments[-1:] == last]
        return found + [ranking.DefinitionSite(d.name, d.path, d.start_line, d.end_line) for d in extra
                        if self.scope is None or self.scope.admits(d.path, d.language)]

    def chunks_at(self, site: Any) -> list[Any]:
        from gitrag.query import ranking

        f = self.overlay.files.get(site.path)
        if f is not None:
            return [ranking.Candidate(overlay_key(f.path, i), p["path"], p["start_line"], p["end_line"],
                                      p.get("symbol", ""), p.get("kind", ""), 0.0, payload=p)
                    for i, p in enumerate(f.payloads) if p["start_line"] <= site.line <= p["end_line"]]
        if site.path in self.overlay.hidden:
            return []
        return self.base.chunks_at(site)

    def known_paths(self, written: str) -> list[str]:
        from gitrag.query import ranking

        base = [p for p in self.base.known_paths(written) if p not in self.overlay.hidden]
        return sorted(set(base) | set(ranking.written_paths(written, frozenset(self.overlay.files))))

    def project_names(self) -> frozenset[str]:
        return self.base.project_names()

    def chunk_texts(self, cands: list[Any]) -> dict[str, str]:
        """{key: source text} of ``cands``: an overlaid file's from the bytes read from disk, the
        others' from their blobs (the base lookup)."""
        out: dict[str, str] = {}
        rest = []
        for c in cands:
            if self.overlay.owns(c.key):
                p = c.payload
                text = self.overlay.snippet_of_blob(p["path"], p.get("blob", ""), p.get("start_byte", 0),
                                                    p.get("end_byte", 0))
                if text is not None:
                    out[c.key] = text
            else:
                rest.append(c)
        return out | self.base.chunk_texts(rest)

    def history_prior(self, query: Any) -> dict[str, float]:
        """The branch's similar-fix prior (gitrag.query.history): the history does not change with
        the work tree, so a dirty work tree keeps the ranking's ``history`` stage."""
        return self.base.history_prior(query)
